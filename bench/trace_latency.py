#!/usr/bin/env python3
"""Splits the publish-to-delivery latency of `serve_bench latency` into segments, from a
`perf script` dump of syscall entries and exits (see bench/trace_latency.sh).

Threads are told apart by what they do: the server's worker is the thread that writes
the log (pwrite64), the publisher is the other thread that writes most, the subscriber
the other thread that reads most. Per item (one log write), the segments are:

  publish -> server read     publisher's socket write to the server's first read
  server read -> log write   the server decodes, checks and re-encodes the item
  log write                  the pwrite64 system call itself
  log write -> send          fan-out and delivery up to the write to the subscriber
  send -> subscriber read    kernel and wake-up, up to the subscriber's first read

Prints the median and mean of each, in microseconds, over the items after the first
tenth (warm-up).
"""
import statistics
import sys
from collections import Counter

# Socket writes (writev, sendto, sendmsg) and reads (recvfrom, recvmsg): plain read
# and write are file I/O here (the benchmark loading its data).
PWRITE, WRITES, READS = 18, {20, 44, 46}, {45, 47}

ev = []
for line in open(sys.argv[1]):
    p = line.split()
    # comm tid time: raw_syscalls:sys_enter|exit: NR n ...
    try:
        i = p.index("NR")
        tid, t, nr = p[i - 3], float(p[i - 2].rstrip(":")) * 1e6, int(p[i + 1])
    except (ValueError, IndexError):
        continue
    ev.append((t, tid, "enter" in p[i - 1], nr))
ev.sort()

calls = Counter((tid, nr) for t, tid, enter, nr in ev if enter)
by = lambda pred: Counter({tid: n for (tid, nr), n in calls.items() if pred(nr)})
server = by(lambda nr: nr == PWRITE).most_common(1)[0][0]
writers = by(lambda nr: nr in WRITES)
readers = by(lambda nr: nr in READS)
del writers[server], readers[server]
publisher = writers.most_common(1)[0][0]
del readers[publisher]
subscriber = readers.most_common(1)[0][0]

items, cur, last_pub = [], None, None
for t, tid, enter, nr in ev:
    if tid == publisher and enter and nr in WRITES:
        last_pub = t
    elif tid == server and not enter and nr in READS and cur is None and last_pub is not None:
        cur = {"pub": last_pub, "recv": t}
    elif cur is None:
        continue
    elif tid == server and nr == PWRITE:
        cur["pw" if enter else "pwx"] = cur.get("pw" if enter else "pwx", t)
    elif tid == server and enter and nr in WRITES and "pwx" in cur and "send" not in cur:
        cur["send"] = t
    elif tid == subscriber and not enter and nr in READS and "send" in cur:
        cur["sub"] = t
        items.append(cur)
        cur, last_pub = None, None

items = items[len(items) // 10 :]
if not items:
    sys.exit("no complete item found in the trace")
segments = [
    ("publish -> server read", "pub", "recv"),
    ("server read -> log write", "recv", "pw"),
    ("log write", "pw", "pwx"),
    ("log write -> send", "pwx", "send"),
    ("send -> subscriber read", "send", "sub"),
    ("publish -> subscriber read", "pub", "sub"),
]
print(f"{len(items)} items (threads: publisher {publisher}, server {server}, subscriber {subscriber})")
for name, a, b in segments:
    d = [i[b] - i[a] for i in items if a in i and b in i]
    print(f"  {name:28s} median {statistics.median(d):7.1f} µs   mean {statistics.mean(d):7.1f} µs")

#!/usr/bin/env python3
"""Latency and throughput of Ztreamy and `jelly serve`, side by side, one run.

Standard library only. The same client code runs against every server: raw HTTP/1.1
on loopback, one keep-alive publisher connection (requests written open-loop, i.e.
pipelined, and their answers read as they come), one long-lived chunked subscriber
in its own process. Servers differ only in how a request and a subscription look:

  jelly    PUT /topics/{t} {"physical":"triples"} once per cell (a fresh topic),
           POST /topics/{t}/items  Content-Type: application/n-triples (one item),
           GET  /topics/{t}/items  Accept: application/n-triples
  ztreamy  POST {path}/publish  Content-Type: application/ztreamy-event, one event
           (Event-Id, Source-Id, Syntax: application/n-triples, Timestamp,
           Body-Length, then the N-Triples), GET {path}/stream (no Accept-Encoding:
           identity, Ztreamy serialization)

Every item is S statements from the dataset followed by one marker triple
`<urn:x-seq:N> <urn:x-p> "N" .`: the N-Triples bytes are identical for both servers.
The subscriber stamps each recv() (CLOCK_MONOTONIC, shared by the processes) and an
item has arrived when its marker, the item's last line, has been read. Before a cell
the harness publishes probe items until the subscriber has seen one, so the
subscription is live before the measured items are sent.

Output: one JSON object per line on stdout (and --jsonl FILE), then a table.
    compare.py --server jelly=jelly:http://127.0.0.1:8686 \
               --server ztreamy=ztreamy:http://127.0.0.1:9000/events
    compare.py --report FILE.jsonl...     # the table of earlier runs
"""
import argparse
import json
import multiprocessing as mp
import os
import re
import select
import socket
import sys
import time
import urllib.parse
from statistics import median

MARKER_RE = re.compile(rb'<urn:x-seq:(\d+)> <urn:x-p> "\d+" \.')
PROBE_RE = re.compile(rb'<urn:x-probe:(\d+)>')
TAIL = 128  # longer than any marker line
now_ns = time.monotonic_ns
CLK_TCK = os.sysconf('SC_CLK_TCK')


# ---------------------------------------------------------------- servers

class Server:
    def __init__(self, name, kind, url):
        self.name, self.kind = name, kind
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.base = u.path.rstrip('/')
        self.hosthdr = f'{self.host}:{self.port}'.encode()
        self.topic = None
        self.cell = None
        self.pid = None

    def cpu_s(self):
        """User+system CPU seconds of the server process so far (None without --pid)."""
        if not self.pid:
            return None
        with open(f'/proc/{self.pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def prepare(self, cell):
        """Fresh per-cell state: a new topic for jelly; ztreamy has one stream."""
        self.cell = cell
        if self.kind == 'jelly':
            # The run's id keeps topics fresh when the same server is measured again:
            # a topic left by an earlier run would replay its items (and markers) to the
            # new subscriber.
            self.topic = f'{cell}-{RUN_ID}'
            status, body = roundtrip(self.host, self.port, http_request(
                b'PUT', b'x', f'/topics/{self.topic}'.encode(), b'application/json',
                b'{"physical":"triples"}', close=True))
            if status not in (200, 201):
                raise RuntimeError(f'PUT topic {self.topic}: {status} {body[:200]!r}')

    def publish_request(self, nt: bytes, seq):
        if self.kind == 'jelly':
            path = f'/topics/{self.topic}/items'.encode()
            return http_post(self.hosthdr, path, b'application/n-triples', nt)
        ev = (b'Event-Id: ' + f'{self.cell}-{seq}'.encode() + b'\r\n'
              b'Source-Id: bench-publisher\r\n'
              b'Syntax: application/n-triples\r\n'
              b'Timestamp: ' + TIMESTAMP + b'\r\n'
              b'Body-Length: ' + str(len(nt)).encode() + b'\r\n\r\n' + nt)
        return http_post(self.hosthdr, self.base.encode() + b'/publish',
                         b'application/ztreamy-event', ev)

    def subscribe_request(self):
        if self.kind == 'jelly':
            return (b'GET /topics/' + self.topic.encode() + b'/items HTTP/1.1\r\nHost: '
                    + self.hosthdr + b'\r\nAccept: application/n-triples\r\n\r\n')
        return (b'GET ' + self.base.encode() + b'/stream HTTP/1.1\r\nHost: ' + self.hosthdr
                + b'\r\n\r\n')


RUN_ID = f'{os.getpid():x}{int(time.time()):x}'
TIMESTAMP = time.strftime('%Y-%m-%dT%H:%M:%S+00:00', time.gmtime()).encode()


def http_request(method, hosthdr, path, ctype, body, close=False):
    """One HTTP/1.1 request with a body; `close` asks the server to close after it."""
    return (method + b' ' + path + b' HTTP/1.1\r\nHost: ' + hosthdr + b'\r\nContent-Type: '
            + ctype + b'\r\nContent-Length: ' + str(len(body)).encode()
            + (b'\r\nConnection: close' if close else b'') + b'\r\n\r\n' + body)


def http_post(hosthdr, path, ctype, body):
    return http_request(b'POST', hosthdr, path, ctype, body)


def roundtrip(host, port, req):
    """Sends one request on a connection of its own; the first response (status, body)."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(req)
        r = ResponseReader()
        while not r.responses:
            d = s.recv(65536)
            if not d:
                break
            r.feed(d)
        return r.responses[0] if r.responses else (0, b'')


class ResponseReader:
    """Incremental parser of (pipelined) HTTP/1.1 responses: Content-Length or chunked."""

    def __init__(self):
        self.buf = b''
        self.responses = []

    def feed(self, data):
        self.buf += data
        while True:
            h = self.buf.find(b'\r\n\r\n')
            if h < 0:
                return
            head = self.buf[:h].decode('latin-1').split('\r\n')
            status = int(head[0].split()[1])
            hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(':') for l in head[1:])}
            pos = h + 4
            if 'content-length' in hdrs:
                end = pos + int(hdrs['content-length'])
                if len(self.buf) < end:
                    return
                body = self.buf[pos:end]
            elif hdrs.get('transfer-encoding', '').lower() == 'chunked':
                body, end = b'', pos
                while True:
                    e = self.buf.find(b'\r\n', end)
                    if e < 0:
                        return
                    size = int(self.buf[end:e].split(b';')[0], 16)
                    if len(self.buf) < e + 2 + size + 2:
                        return
                    body += self.buf[e + 2:e + 2 + size]
                    end = e + 2 + size + 2
                    if size == 0:
                        break
            else:
                end, body = pos, b''
            self.responses.append((status, body))
            self.buf = self.buf[end:]


class Dechunker:
    """Incremental decoder of a chunked body (or passthrough when not chunked)."""

    def __init__(self, chunked):
        self.chunked = chunked
        self.buf = b''
        self.left = 0      # bytes left in the current chunk
        self.skip = 0      # CRLF after a chunk still to skip

    def feed(self, data):
        if not self.chunked:
            return data
        self.buf += data
        out = []
        while self.buf:
            if self.skip:
                n = min(self.skip, len(self.buf))
                self.buf, self.skip = self.buf[n:], self.skip - n
                continue
            if self.left:
                n = min(self.left, len(self.buf))
                out.append(self.buf[:n])
                self.buf, self.left = self.buf[n:], self.left - n
                if not self.left:
                    self.skip = 2
                continue
            e = self.buf.find(b'\r\n')
            if e < 0:
                break
            self.left = int(self.buf[:e].split(b';')[0], 16)
            self.buf = self.buf[e + 2:]
            if self.left == 0:
                self.skip = 2   # end of body; nothing follows in a live stream
        return b''.join(out)


# ---------------------------------------------------------------- subscriber process

def subscriber(host, port, request, expected, conn):
    """Reads the stream; reports 'ready' at the first probe, 'complete' when all
    `expected` markers arrived, and the arrival times when told 'stop'."""
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.sendall(request)
    conn.send(('connected',))
    arrivals = {}
    head, dech, tail = b'', None, b''
    ready = complete = False
    status = None
    nbytes = 0
    while True:
        r, _, _ = select.select([s, conn], [], [], 1.0)
        if conn in r:
            msg = conn.recv()
            if msg[0] == 'stop':
                break
        if s not in r:
            continue
        data = s.recv(1 << 20)
        t = now_ns()
        if not data:
            break
        nbytes += len(data)
        if dech is None:
            head += data
            h = head.find(b'\r\n\r\n')
            if h < 0:
                continue
            lines = head[:h].decode('latin-1').split('\r\n')
            status = int(lines[0].split()[1])
            chunked = any(l.lower().startswith('transfer-encoding:') and 'chunked' in l.lower()
                          for l in lines[1:])
            dech = Dechunker(chunked)
            data, head = head[h + 4:], None
            if status != 200:
                conn.send(('error', f'subscribe answered {status}'))
        body = dech.feed(data)
        if not body:
            continue
        scan = tail + body
        for m in MARKER_RE.finditer(scan):
            arrivals.setdefault(int(m.group(1)), t)
        if not ready and PROBE_RE.search(scan):
            ready = True
            conn.send(('ready',))
        tail = scan[-TAIL:]
        if not complete and len(arrivals) >= expected:
            complete = True
            conn.send(('complete',))
    conn.send(('result', arrivals, nbytes, status))
    s.close()


# ---------------------------------------------------------------- publisher

def publish(host, port, requests, interval_ns, deadline_s=120.0):
    """Writes the requests on one keep-alive connection, request i at t0 + i*interval
    (open loop: never waits for an answer; interval 0 = back to back). Returns the send
    times (taken just before each write), the time the last answer was read, and the
    statuses."""
    s = socket.create_connection((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rr = ResponseReader()

    def drain(block_s=0.0):
        if block_s > 0:
            r, _, _ = select.select([s], [], [], block_s)
            if not r:
                return
        while True:
            try:
                d = s.recv(1 << 16, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            if not d:
                raise RuntimeError('publisher connection closed by the server')
            rr.feed(d)

    sends = []
    t0 = now_ns() + 2_000_000
    for i, req in enumerate(requests):
        if interval_ns:
            target = t0 + i * interval_ns
            while True:
                rem = target - now_ns()
                if rem <= 0:
                    break
                if rem > 400_000:
                    drain((rem - 250_000) / 1e9)
                # else: spin
        t = now_ns()
        s.sendall(req)
        sends.append(t)
        drain()
    end = time.monotonic() + deadline_s
    while len(rr.responses) < len(requests) and time.monotonic() < end:
        drain(0.05)
    last_answer = now_ns()
    s.close()
    return sends, last_answer, [st for st, _ in rr.responses]


# ---------------------------------------------------------------- one cell

class Items:
    def __init__(self, path):
        with open(path, 'rb') as f:
            self.lines = [l if l.endswith(b'\n') else l + b'\n' for l in f if l.strip()
                          and not l.startswith(b'#')]
        self.pos = 0

    def take(self, n):
        out = []
        while n:
            k = min(n, len(self.lines) - self.pos)
            out.extend(self.lines[self.pos:self.pos + k])
            self.pos = (self.pos + k) % len(self.lines)
            n -= k
        return b''.join(out)


def marker(seq):
    return b'<urn:x-seq:%d> <urn:x-p> "%d" .\n' % (seq, seq)


def run_cell(server, cell, payloads, interval_ns, settle_s):
    """payloads: N-Triples bodies (each ending with its marker). Returns (sends,
    arrivals, last_answer, statuses, nbytes, sub_status)."""
    server.prepare(cell)
    ctx = mp.get_context('fork')
    parent, child = ctx.Pipe()
    p = ctx.Process(target=subscriber, args=(server.host, server.port,
                                             server.subscribe_request(), len(payloads), child))
    p.start()
    try:
        if not parent.poll(10) or parent.recv()[0] != 'connected':
            raise RuntimeError('subscriber did not connect')
        # probes until the subscription is live
        k, deadline = 0, time.monotonic() + 15
        ready = False
        while not ready:
            if time.monotonic() > deadline:
                raise RuntimeError(f'{server.name}: subscriber never saw a probe')
            st, body = roundtrip(server.host, server.port, server.publish_request(
                b'<urn:x-probe:%d> <urn:x-p> "probe" .\n' % k, f'probe{k}'))
            if st != 200:
                raise RuntimeError(f'{server.name}: probe publish answered {st} {body[:200]!r}')
            k += 1
            if parent.poll(0.1):
                msg = parent.recv()
                if msg[0] == 'ready':
                    ready = True
                elif msg[0] == 'error':
                    raise RuntimeError(f'{server.name}: {msg[1]}')
        time.sleep(0.05)
        reqs = [server.publish_request(b, i) for i, b in enumerate(payloads)]
        cpu0 = server.cpu_s()
        sends, last_answer, statuses = publish(server.host, server.port, reqs, interval_ns)
        # wait for the subscriber to have everything (or give up after settle_s)
        end = time.monotonic() + settle_s
        while time.monotonic() < end:
            if parent.poll(0.05):
                msg = parent.recv()
                if msg[0] == 'complete':
                    break
        cpu1 = server.cpu_s()
        server.last_cpu = None if cpu0 is None else round(cpu1 - cpu0, 3)
        parent.send(('stop',))
        while True:
            msg = parent.recv()
            if msg[0] == 'result':
                _, arrivals, nbytes, sub_status = msg
                break
    finally:
        p.join(5)
        if p.is_alive():
            p.terminate()
    return sends, arrivals, last_answer, statuses, nbytes, sub_status


def pct(sorted_vals, q):
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, int(round(q * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


# ---------------------------------------------------------------- benchmarks

def latency_cell(server, items, S, I_us, n, rnd, warmup):
    payloads = [items.take(S) + marker(i) for i in range(n)]
    cell = f'lat-r{rnd}-s{S}-i{I_us}'
    sends, arr, last_answer, statuses, nbytes, sst = run_cell(server, cell, payloads,
                                                              I_us * 1000, settle_s=20)
    skip = int(n * warmup)
    lats = sorted((arr[i] - sends[i]) / 1000 for i in range(skip, n) if i in arr)
    lost = sum(1 for i in range(n) if i not in arr)
    bad = sum(1 for st in statuses if st != 200) + (n - len(statuses))
    return {
        'bench': 'latency', 'server': server.name, 'kind': server.kind, 'round': rnd,
        'statements': S, 'item_statements': S + 1, 'interval_us': I_us, 'items': n,
        'measured': len(lats), 'lost': lost, 'bad_answers': bad,
        'item_bytes': round(sum(map(len, payloads)) / n),
        'send_span_ms': round((sends[-1] - sends[0]) / 1e6, 2),
        'nominal_span_ms': round((n - 1) * I_us / 1000, 2),
        'p50_us': r1(pct(lats, .50)), 'p90_us': r1(pct(lats, .90)),
        'p99_us': r1(pct(lats, .99)), 'max_us': r1(lats[-1] if lats else None),
        'mean_us': r1(sum(lats) / len(lats) if lats else None),
        'server_cpu_s': server.last_cpu,
    }


def throughput_cell(server, items, total, per_item, rnd):
    n = total // per_item
    payloads = [items.take(per_item) + marker(i) for i in range(n)]
    cell = f'tp-r{rnd}'
    sends, arr, last_answer, statuses, nbytes, sst = run_cell(server, cell, payloads, 0,
                                                              settle_s=120)
    lost = sum(1 for i in range(n) if i not in arr)
    last = max(arr.values()) if arr else None
    secs = (last - sends[0]) / 1e9 if last else None
    stmts = n * (per_item + 1)
    return {
        'bench': 'throughput', 'server': server.name, 'kind': server.kind, 'round': rnd,
        'items': n, 'item_statements': per_item + 1, 'statements': stmts,
        'payload_bytes': sum(map(len, payloads)), 'lost': lost,
        'bad_answers': sum(1 for st in statuses if st != 200) + (n - len(statuses)),
        'seconds': round(secs, 4) if secs else None,
        'statements_per_s': round(stmts / secs) if secs and not lost else None,
        'publish_seconds': round((last_answer - sends[0]) / 1e9, 4),
        'subscriber_bytes': nbytes,
        'server_cpu_s': server.last_cpu,
    }


def r1(x):
    return None if x is None else round(x, 1)


# ---------------------------------------------------------------- report

def table(rows):
    out = []
    servers = list(dict.fromkeys(r['server'] for r in rows))
    lat = [r for r in rows if r['bench'] == 'latency']
    if lat:
        out.append('latency, µs (median over rounds of each cell\'s p50 / p99; lost items)')
        out.append('| S | interval µs | ' + ' | '.join(f'{s} p50 | {s} p99' for s in servers) + ' |')
        out.append('|---|---|' + '---|---|' * len(servers))
        cells = list(dict.fromkeys((r['statements'], r['interval_us']) for r in lat))
        for S, I in cells:
            cols = []
            for s in servers:
                rs = [r for r in lat if r['server'] == s and r['statements'] == S
                      and r['interval_us'] == I]
                p50 = [r['p50_us'] for r in rs if r['p50_us'] is not None]
                p99 = [r['p99_us'] for r in rs if r['p99_us'] is not None]
                lost = sum(r['lost'] for r in rs)
                sfx = f' ({lost} lost)' if lost else ''
                cols.append(f'{median(p50):.0f}{sfx}' if p50 else '-')
                cols.append(f'{median(p99):.0f}' if p99 else '-')
            out.append(f'| {S} | {I} | ' + ' | '.join(cols) + ' |')
    tp = [r for r in rows if r['bench'] == 'throughput']
    if tp:
        out.append('')
        out.append('throughput, statements/s (per round; items of %d statements)'
                   % tp[0]['item_statements'])
        for s in servers:
            vals = [r['statements_per_s'] for r in tp if r['server'] == s]
            ok = [v for v in vals if v]
            out.append(f'- {s}: ' + ', '.join(f'{v:,}' if v else 'incomplete' for v in vals)
                       + (f' (median {median(ok):,.0f})' if ok else ''))
    return '\n'.join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--server', action='append', default=[],
                    help='NAME=KIND:URL, KIND jelly (URL the server root) or ztreamy '
                         '(URL the stream, e.g. http://127.0.0.1:9000/events)')
    ap.add_argument('--pid', action='append', default=[],
                    help='NAME=PID of a server process, to report its CPU seconds per cell')
    ap.add_argument('--dataset', default='/work/shared/datasets/iot-assist-weather/'
                                         'iot-assist-weather.nt')
    ap.add_argument('--sizes', default='5,50,200')
    ap.add_argument('--intervals-us', default='10000,1000,100')
    ap.add_argument('--items-fast', type=int, default=500, help='items per cell at <=1 ms')
    ap.add_argument('--items-slow', type=int, default=200, help='items per cell at >1 ms')
    ap.add_argument('--warmup', type=float, default=0.1)
    ap.add_argument('--rounds', type=int, default=1, help='times through the whole grid')
    ap.add_argument('--tp-statements', type=int, default=200_000)
    ap.add_argument('--tp-item', type=int, default=1000)
    ap.add_argument('--skip', default='', help='latency,throughput to skip')
    ap.add_argument('--jsonl', help='also append the JSON lines to this file')
    ap.add_argument('--report', nargs='+', help='only print the table of these JSONL files')
    a = ap.parse_args()

    if a.report:
        rows = [json.loads(l) for f in a.report for l in open(f) if l.strip().startswith('{')]
        print(table(rows))
        return
    servers = []
    for spec in a.server:
        name, _, rest = spec.partition('=')
        kind, _, url = rest.partition(':')
        assert kind in ('jelly', 'ztreamy'), spec
        servers.append(Server(name, kind, url))
    if not servers:
        ap.error('no --server')
    for spec in a.pid:
        name, _, pid = spec.partition('=')
        for srv in servers:
            if srv.name == name:
                srv.pid = int(pid)
    items = Items(a.dataset)
    out = open(a.jsonl, 'a') if a.jsonl else None
    rows = []

    def emit(row):
        rows.append(row)
        line = json.dumps(row)
        print(line, flush=True)
        if out:
            out.write(line + '\n')
            out.flush()

    sizes = [int(x) for x in a.sizes.split(',')]
    intervals = [int(x) for x in a.intervals_us.split(',')]
    k = 0
    for rnd in range(a.rounds):
        if 'latency' not in a.skip:
            for S in sizes:
                for I in intervals:
                    n = a.items_slow if I > 1000 else a.items_fast
                    order = servers if k % 2 == 0 else servers[::-1]   # alternate who goes first
                    k += 1
                    for srv in order:
                        items.pos = 0   # same statements for every server
                        emit(latency_cell(srv, items, S, I, n, rnd, a.warmup))
        if 'throughput' not in a.skip:
            order = servers if rnd % 2 == 0 else servers[::-1]
            for srv in order:
                items.pos = 0
                emit(throughput_cell(srv, items, a.tp_statements, a.tp_item, rnd))
    print()
    print(table(rows))


if __name__ == '__main__':
    main()

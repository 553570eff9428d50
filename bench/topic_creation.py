# Describe latency of an existing topic while another client creates 300 new topics,
# against the same with no creations (BENCHMARKS.md §5, "Session 18" and "Session 19").
# Topics are made with PUT, or with `publish` by publishing one statement to each
# (auto-creation).
# Usage: python3 bench/topic_creation.py target/release/jelly PORT [put|publish]
import sys, time, threading, urllib.request, subprocess, shutil, os, statistics
jelly, port = sys.argv[1], sys.argv[2]
by = sys.argv[3] if len(sys.argv) > 3 else "put"
data = f"/tmp/createbench-{port}"
shutil.rmtree(data, ignore_errors=True)
srv = subprocess.Popen([jelly, "serve", "--listen", f"127.0.0.1:{port}", "--data", data, "--log-level", "warn"], stderr=subprocess.DEVNULL)
base = f"http://127.0.0.1:{port}"
for _ in range(100):
    try:
        urllib.request.urlopen(base + "/health").read(); break
    except Exception: time.sleep(0.05)
urllib.request.urlopen(urllib.request.Request(base + "/topics/x", method="PUT", data=b"")).read()
def describes(stop, out):
    while not stop.is_set():
        t = time.perf_counter(); urllib.request.urlopen(base + "/topics/x").read(); out.append((time.perf_counter() - t) * 1e3)
def phase(create):
    stop = threading.Event(); lat = []
    th = threading.Thread(target=describes, args=(stop, lat)); th.start()
    t0 = time.perf_counter(); n = 0
    if create:
        for i in range(300):
            if by == "publish":
                req = urllib.request.Request(f"{base}/topics/c{create}-{i}/items", method="POST",
                                             data=b"<http://s> <http://p> <http://o> .\n",
                                             headers={"Content-Type": "application/n-triples"})
            else:
                req = urllib.request.Request(f"{base}/topics/c{create}-{i}", method="PUT", data=b"")
            urllib.request.urlopen(req).read(); n += 1
    else:
        time.sleep(0.4)
    stop.set(); th.join()
    lat.sort()
    return f"creates {n} in {(time.perf_counter()-t0)*1e3:.0f} ms; describes {len(lat)}: p50 {statistics.median(lat):.2f} p99 {lat[int(len(lat)*0.99)]:.2f} max {lat[-1]:.2f} ms"
print("idle    ", phase(0))
print("creating", phase(1))
print("creating", phase(2))
srv.terminate(); srv.wait(); shutil.rmtree(data, ignore_errors=True)

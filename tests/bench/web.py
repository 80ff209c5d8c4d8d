#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The web page's cost: what the server spends and sends for the page's data
requests, and how long headless chromium takes to draw it.

  tests/bench/web.py [--mlmond build/daemon/mlmond] [--runs 1000]

1. The overview (GET /) with RUNS running runs (real `sleep` processes): the
   page's HTML and the JSON requests its script makes (system, runs, leaks,
   and the sparkline and top-op requests of the first 100 runs).
2. A run page for a 24 h run sampled every second: a real short run (a Python
   process sending StatsD timings of two ops) is recorded, then the database
   is grown with the store's own schema to 86 400 samples and 2 x 86 400 op
   slices (copies of the recorded rows, shifted over the day; RSS made to
   grow) and served again: the run page's four requests for the whole run.

Beyond the page's requests: the throughput (10s,1m,5m) of the first and the
last registered of the RUNS runs, and the 24 h run's samples over the whole
day raw (86 400 rows; max_rows raised for them) and in 1 minute steps.

Server time is the wall time of each request over the unix socket, the
median of 5 spaced past the 250 ms answer cache. Chromium time is the wall
time of `chromium --headless=new --dump-dom` until the page is drawn, less
that of about:blank."""

import argparse
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

import headrow
from benchlib import SRC, call, free_port, timed_get

DAY_MS = 86400 * 1000


def start(mlmond, tmp, conf=""):
    sock = os.path.join(tmp, "sock")
    port = free_port()
    with open(os.path.join(tmp, "mlmond.conf"), "w") as f:
        f.write(conf)
    log = open(os.path.join(tmp, "mlmond.log"), "ab")
    p = subprocess.Popen([mlmond, "-c", os.path.join(tmp, "mlmond.conf"), "--db", os.path.join(tmp, "db"),
                          "--listen", f"127.0.0.1:{port}", "--socket", sock, "--statsd-socket",
                          os.path.join(tmp, "statsd.sock"), "--statsd-udp", "none"], stdout=log, stderr=log)
    for _ in range(200):
        try:
            if call(sock, "GET", "/v1/health")[0] == 200:
                return p, sock, port
        except OSError:
            time.sleep(0.05)
    sys.exit("mlmond did not start: " + open(os.path.join(tmp, "mlmond.log")).read()[-2000:])


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)


def measure(sock, path, n=5):
    times, size = [], 0
    for _ in range(n):
        dt, size, st = timed_get(sock, path)
        if st != 200:
            sys.exit(f"{path}: HTTP {st}")
        times.append(dt)
        time.sleep(0.3)  # past the answer cache
    return statistics.median(times), size


def chromium_ms(url):
    exe = shutil.which("chromium")
    if not exe:
        return None
    with tempfile.TemporaryDirectory() as prof:
        t = time.perf_counter()
        # the budget is virtual time, skipped while the page is idle; below
        # the pages' 5 s refresh
        r = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            f"--user-data-dir={prof}", "--virtual-time-budget=3000", "--dump-dom", url],
                           capture_output=True, timeout=300)
        ms = (time.perf_counter() - t) * 1000
    if url != "about:blank" and b'data-ready="1"' not in r.stdout:
        sys.exit(f"{url}: the page was not drawn in chromium's time budget")
    return ms


def chromium_net_ms(url, n=3):
    base = statistics.median(chromium_ms("about:blank") for _ in range(n))
    return statistics.median(chromium_ms(url) for _ in range(n)) - base


def report(rows):
    total_t = sum(t for _, t, _ in rows)
    total_b = sum(b for _, _, b in rows)
    for name, t, b in rows:
        print(f"  {name:<60} {t * 1000:8.2f} ms {b:>10,} B")
    print(f"  {'total':<60} {total_t * 1000:8.2f} ms {total_b:>10,} B")


def overview(mlmond, nruns):
    tmp = tempfile.mkdtemp(prefix="mlmond-web-")
    procs = []
    p, sock, port = start(mlmond, tmp)
    try:
        for i in range(nruns):
            s = subprocess.Popen(["sleep", "3600"])
            procs.append(s)
            st, body = call(sock, "POST", "/v1/runs", {"pid": s.pid, "name": f"job-{i}", "tags": {"team": "t"}})
            if st != 201:
                sys.exit(f"register: {st} {body}")
        time.sleep(5)
        st, runs = call(sock, "GET", "/v1/runs?state=all")
        ids = [r["id"] for r in runs["runs"]][:100]
        rows = [(path, *measure(sock, path)) for path in ("/", "/v1/system", "/v1/runs?state=all", "/v1/leaks")]
        t_s = b_s = t_l = b_l = 0
        for rid in ids:
            t, b = measure(sock, f"/v1/runs/{rid}/samples?from=10m&step=10s&limit=100", n=1)
            t_s, b_s = t_s + t, b_s + b
            t, b = measure(sock, f"/v1/runs/{rid}/latency?window=1m&q=99", n=1)
            t_l, b_l = t_l + t, b_l + b
        rows += [(f"{len(ids)} x samples?from=10m&step=10s (sparklines)", t_s, b_s),
                 (f"{len(ids)} x latency?window=1m&q=99 (top op)", t_l, b_l)]
        print(f"overview with {nruns} running runs:")
        report(rows)
        # not the page's: the throughput of one run, the first and the last registered
        first, last = min(r["id"] for r in runs["runs"]), max(r["id"] for r in runs["runs"])
        print(f"  with {nruns} running runs, not the page's:")
        report([(path, *measure(sock, path)) for path in
                (f"/v1/runs/{rid}/throughput?window=10s,1m,5m" for rid in (first, last))])
        ms = chromium_net_ms(f"http://127.0.0.1:{port}/")
        if ms is not None:
            print(f"  chromium: overview drawn in {ms:.0f} ms (beyond about:blank)")
    finally:
        for s in procs:
            s.kill()
            s.wait()
        stop(p)
        shutil.rmtree(tmp)


SENDER = r"""
import socket, sys, time, random
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
print("ready", flush=True)
sys.stdin.readline()
t = time.monotonic()
while time.monotonic() - t < 6:
    s.sendto(b"forward:%.2f|ms|#category:model" % random.lognormvariate(2.2, 0.3), sys.argv[1])
    s.sendto(b"data_load:%.2f|ms|#category:io" % random.lognormvariate(1.5, 0.6), sys.argv[1])
    time.sleep(0.01)
print("done", flush=True)
sys.stdin.readline()
"""


def grow_day(db, rid):
    """The run's recorded rows copied over 24 h before now, one per second."""
    c = sqlite3.connect(db)
    t1 = (int(time.time() * 1000) // 1000 - 120) * 1000
    t0 = t1 - DAY_MS
    rows = [headrow.unpack(d) for (d,) in c.execute("SELECT data FROM samples WHERE run_id = ? ORDER BY ts DESC",
                                                       (rid,))]
    sample = next(r for r in rows if r["has_cpu_pct"])
    slices = c.execute("SELECT op, category, count, timings, hist FROM op_slices WHERE run_id = ? AND timings > 0 "
                       "GROUP BY op HAVING ts = MAX(ts)", (rid,)).fetchall()
    c.execute("DELETE FROM samples WHERE run_id = ?", (rid,))
    c.execute("DELETE FROM op_slices WHERE run_id = ?", (rid,))
    marks = [(rid, t0 + 600_000, "warmup-done"), (rid, t0 + 12 * 3600_000, "eval")]
    c.execute("DELETE FROM marks WHERE run_id = ?", (rid,))
    c.executemany("INSERT INTO marks (run_id, ts, label) VALUES (?, ?, ?)", marks)
    rows = []
    for i in range(86400):
        s = dict(sample)
        s["has_rss"] = True
        s["rss_bytes"] += i * 1024
        s["rss_anon_bytes"] += i * 1024
        s["cpu_pct"] = 40 + 20 * ((i // 600) % 2)
        s["cpu_time_ns"] = i * 500_000_000
        rows.append((t0 + i * 1000, rid, headrow.pack(s)))
    c.executemany("INSERT INTO samples (ts, run_id, data) VALUES (?, ?, ?)", rows)
    c.executemany("INSERT OR IGNORE INTO head_ticks (ts) VALUES (?)", [(r[0],) for r in rows])
    c.executemany("INSERT INTO op_slices (ts, run_id, op, category, count, timings, hist) VALUES (?, ?, ?, ?, ?, ?, ?)",
                  [(t0 + i * 1000, rid, *sl) for i in range(86400) for sl in slices])
    c.execute("UPDATE runs SET state = 'exited', registered_ts = ?, ended_ts = ?, last_ts = ?, samples = 86400 "
              "WHERE id = ?", (t0, t1, t1, rid))
    c.commit()
    c.close()
    return t0, t1


def run_page(mlmond):
    tmp = tempfile.mkdtemp(prefix="mlmond-web-")
    p, sock, port = start(mlmond, tmp)
    sender = subprocess.Popen([sys.executable, "-c", SENDER, os.path.join(tmp, "statsd.sock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        sender.stdout.readline()
        st, run = call(sock, "POST", "/v1/runs", {"pid": sender.pid, "name": "resnet-24h", "interval": "1s"})
        rid = run["id"]
        sender.stdin.write("go\n")
        sender.stdin.flush()
        sender.stdout.readline()
        time.sleep(2)
        sender.kill()
        sender.wait()
        time.sleep(2)
        stop(p)
        t0, t1 = grow_day(os.path.join(tmp, "db"), rid)
        # the whole day's raw samples in one answer: within max_rows and the query budget
        p, sock, port = start(mlmond, tmp, "[http]\nmax_rows = 86400\nquery_timeout = 60s\n")
        span = t1 - t0
        sstep, lstep = -(-span // 1500), max(1000, -(-span // 300 // 1000) * 1000)
        rng = f"from={t0}&until={t1}"
        paths = [f"/runs/{rid}", f"/v1/runs/{rid}", f"/v1/runs/{rid}/marks",
                 f"/v1/runs/{rid}/samples?{rng}&limit=1600&step={sstep}ms",
                 f"/v1/runs/{rid}/latency?{rng}&q=50,90,99&step={lstep}ms"]
        print("run page of a 24 h run sampled every second (86 400 samples, 2 ops x 86 400 slices), whole run:")
        report([(path, *measure(sock, path)) for path in paths])
        ms = chromium_net_ms(f"http://127.0.0.1:{port}/runs/{rid}")
        if ms is not None:
            print(f"  chromium: run page drawn in {ms:.0f} ms (beyond about:blank)")
        print("  the whole run, not the page's:")
        report([(path, *measure(sock, path)) for path in
                (f"/v1/runs/{rid}/samples?{rng}&limit=86400", f"/v1/runs/{rid}/samples?{rng}&step=60s&limit=1440")])
    finally:
        if sender.poll() is None:
            sender.kill()
        stop(p)
        shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlmond", default=os.path.join(SRC, "build", "daemon", "mlmond"))
    ap.add_argument("--runs", type=int, default=1000)
    a = ap.parse_args()
    overview(a.mlmond, a.runs)
    run_page(a.mlmond)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The read path at any span: every request the run page makes for the whole
of a 7-day run against the same for a 1-hour run.

  tests/bench/readpath.py [--mlmond build/daemon/mlmond] [--storegen build/tests/storegen]
                          [-r REPEATS] [--db FILE]

`storegen readpath` (tests/bench/storegen.c) writes the two runs through the
store's own code: 604 800 and 3 600 samples at 1 s, each second 2 ops with 5
timings each, compacted minute by minute as the daemon's maintenance does,
both ended 2 minutes ago. It also prints how many SQL statements the
querier runs for the page's two stepped questions (the reader's
sqlite3_trace_v2). mlmond (default config: raw data kept 7 days) is then
started on the database, and each request is timed: the time to the first
byte of the answer over the unix socket (the answer is built whole before
its head is sent, so this is the server's time), REPEATS times (default 9),
the week's and the hour's requests in turn, spaced past the 250 ms answer
cache; the median and the fastest are printed, with the ratio of the
medians and the load average of the machine.

The page's requests are those of web/run.js for a run that has ended: the
run, its marks, its samples in 1 500 points and its latency in 300 steps
over [registered, ended]. Beyond the page: the throughput windows at the
run's end, the span's summary and its latency without steps (mlmonctl
report).

--db FILE keeps the database storegen writes there (and its figures in
FILE.txt), and serves a copy of it when it is there already (its runs end
when it was written: an older one has less raw data within the 7 days)."""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SRC, call, start_mlmond  # noqa: E402


def ttfb(sock_path, path):
    """(seconds to the first byte, status, bytes of the body) of one GET."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sock_path)
    req = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
    t = time.perf_counter()
    s.sendall(req)
    first = s.recv(65536)
    dt = time.perf_counter() - t
    data = [first]
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        data.append(b)
    s.close()
    raw = b"".join(data)
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        body = dechunk(body)
    return dt, status, len(body)


def dechunk(b):
    out, i = [], 0
    while True:
        j = b.index(b"\r\n", i)
        n = int(b[i:j].split(b";")[0], 16)
        if n == 0:
            return b"".join(out)
        out.append(b[j + 2:j + 2 + n])
        i = j + 2 + n + 2


def page_paths(rid, t0, t1, interval_ms=1000):
    """The run page's requests for a run over [t0, t1] (web/run.js), then
    the others'."""
    span = t1 - t0
    sstep = -(-span // 1500)
    lstep = max(1000, -(-span // 300 // 1000) * 1000)
    rng = f"from={t0}&until={t1}"
    page = [("run", f"/v1/runs/{rid}"),
            ("marks", f"/v1/runs/{rid}/marks"),
            ("samples, 1 500 points", f"/v1/runs/{rid}/samples?{rng}&limit=1600"
             + (f"&step={sstep}ms" if sstep > interval_ms else "")),
            ("latency, 300 steps", f"/v1/runs/{rid}/latency?{rng}&q=50,90,99&step={lstep}ms")]
    others = [("throughput 10s,1m,5m", f"/v1/runs/{rid}/throughput"),
              ("summary of the span", f"/v1/runs/{rid}/summary?{rng}"),
              ("latency of the span", f"/v1/runs/{rid}/latency?{rng}&q=50,90,99")]
    return page, others


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlmond", default=os.path.join(SRC, "build", "daemon", "mlmond"))
    ap.add_argument("--storegen", default=os.path.join(SRC, "build", "tests", "storegen"))
    ap.add_argument("-r", "--repeats", type=int, default=9)
    ap.add_argument("--db")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-readpath-")
    daemon = None
    try:
        db = os.path.join(tmp, "db")
        src = a.db or db
        if not (a.db and os.path.exists(a.db) and os.path.exists(a.db + ".txt")):
            t = time.monotonic()
            out = subprocess.run([a.storegen, "readpath", src], check=True, capture_output=True, text=True).stdout
            with open(src + ".txt", "w") as f:
                f.write(out)
            print(f"storegen readpath: {time.monotonic() - t:.0f} s, {os.path.getsize(src) / 1e6:.0f} MB")
        if src != db:
            shutil.copy(src, db)
        out = open(src + ".txt").read()
        k = dict(line.split() for line in out.splitlines())
        print(f"SQL statements of the querier (sqlite3_trace_v2 on the reader): "
              f"7 d: samples {k['week_samples_statements']}, latency {k['week_latency_statements']} "
              f"({k['week_latency_steps']} steps); "
              f"1 h: samples {k['hour_samples_statements']}, latency {k['hour_latency_statements']} "
              f"({k['hour_latency_steps']} steps)")
        daemon, sock, _, _ = start_mlmond(a.mlmond, tmp)
        if not sock:
            sys.exit("mlmond did not start: " + open(os.path.join(tmp, "mlmond.log")).read()[-2000:])
        time.sleep(2)  # the retention of what lies past 7 days, the first maintenance passes
        runs = {}
        for name in ("week", "hour"):
            st, run = call(sock, "GET", f"/v1/runs/{k[name + '_id']}")
            if st != 200:
                sys.exit(f"run {k[name + '_id']}: HTTP {st}")
            runs[name] = page_paths(run["id"], run["registered_ts"], run["ended_ts"])
        load0 = loadavg()
        rows = []
        for group in (0, 1):
            for i, (what, _) in enumerate(runs["week"][group]):
                times = {"week": [], "hour": []}
                size = {}
                for _ in range(a.repeats):
                    for name in ("week", "hour"):
                        dt, st, n = ttfb(sock, runs[name][group][i][1])
                        if st != 200:
                            sys.exit(f"{runs[name][group][i][1]}: HTTP {st}")
                        times[name].append(dt)
                        size[name] = n
                        time.sleep(0.3)  # past the answer cache
                rows.append((group, what, times, size))
        load1 = loadavg()
        print(f"server time (first byte over the unix socket), median and fastest of {a.repeats}, "
              f"load average {load0} before, {load1} after:")
        print(f"  {'request':<24} {'7 days':>17} {'1 hour':>17} {'ratio':>6} {'bytes 7 d / 1 h':>18}")
        for group, what, times, size in rows:
            if group == 1 and rows[0][0] == 0 and what == runs["week"][1][0][0]:
                print("  not the page's:")
            w, h = statistics.median(times["week"]), statistics.median(times["hour"])
            print(f"  {what:<24} {w * 1000:7.2f} ({min(times['week']) * 1000:6.2f}) "
                  f"{h * 1000:7.2f} ({min(times['hour']) * 1000:6.2f}) {w / h:6.2f} "
                  f"{size['week']:>8,} / {size['hour']:>7,}")
        for name in ("week", "hour"):
            print(f"  {name}: {runs[name][0][2][1]}")
            print(f"  {name}: {runs[name][0][3][1]}")
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait(timeout=30)
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

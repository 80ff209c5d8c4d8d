#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""GET /metrics, protobuf against text: mlmond (a release build) with RUNS
registered sleeping processes, each with OPS ops of 100 StatsD timings (so
every run has OPS native histograms, or OPS summaries in the text format).
Prints, for each format: the answer's size, the time of one full render
(a scrape right after a StatsD line, which the answer cache cannot serve;
the median of TRIES), and wrk's req/s against /metrics (-t2 -c8, DUR s,
REPS times interleaved; between two data changes most answers come from
the GET cache, as with a real fleet of scrapers).

Needs: wrk (without it, req/s is left out), meson and ninja unless --mlmond.

--series-per-uid N raises [metrics] series_per_uid (default 20 000, which
holds 3 333 ops of all runs of one user: the benchmark's runs are all one
user's) so that every run's ops are in the answer: 4 000 runs x 4 ops need
96 000 and more. --reps 0 leaves wrk out.

usage: tests/bench/metrics_proto.py [--runs 100] [--ops 4] [--reps 3] [--dur 5] [--tries 21] [--mlmond PATH]
                                    [--series-per-uid N]"""

import argparse
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from benchlib import SRC, call, start_mlmond

PROTO_ACCEPT = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
FORMATS = {"text": "text/plain;version=0.0.4", "protobuf": PROTO_ACCEPT}


def build():
    bdir = os.path.join(SRC, "build-bench-metrics-proto")
    if not os.path.isdir(bdir):
        subprocess.run(["meson", "setup", bdir, SRC, "--buildtype=release"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", bdir, "daemon/mlmond"], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(bdir, "daemon", "mlmond")


def get(url, accept):
    req = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read()


def wrk(url, accept, dur):
    out = subprocess.run(["wrk", "-t2", "-c8", f"-d{dur}s", "-H", f"Accept: {accept}", url],
                         capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        sys.exit(f"wrk saw errors:\n{out}")
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--ops", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dur", type=int, default=5)
    ap.add_argument("--tries", type=int, default=21)
    ap.add_argument("--mlmond")
    ap.add_argument("--series-per-uid", type=int)
    o = ap.parse_args()
    mlmond = o.mlmond or build()
    tmp = tempfile.mkdtemp(prefix="mlmond-bench-proto-")
    sleepers = [subprocess.Popen(["sleep", "100000"]) for _ in range(o.runs)]
    daemon = None
    try:
        conf = f"[metrics]\nseries_per_uid = {o.series_per_uid}\n" if o.series_per_uid else ""
        daemon, sock, ssock, _ = start_mlmond(mlmond, tmp, conf=conf)
        if not sock:
            sys.exit(f"mlmond did not come up; see {tmp}/mlmond.log")
        port = int(daemon.args[daemon.args.index("--listen") + 1].rsplit(":", 1)[1])
        url = f"http://127.0.0.1:{port}/metrics"
        ids = []
        for i, p in enumerate(sleepers):
            st, r = call(sock, "POST", "/v1/runs", {"pid": p.pid, "name": f"bench-{i}"})
            assert st in (200, 201), (st, r)
            ids.append(r["id"])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        rng = random.Random(6)
        for rid in ids:
            for k in range(o.ops):
                s.sendto("\n".join(f"op{k}:{rng.lognormvariate(2, 0.5):.3f}|ms|#run:{rid}"
                                   for _ in range(100)).encode(), ssock)
        time.sleep(3)  # a few ticks: every run has samples

        print(f"/metrics, protobuf vs text: {o.runs} runs x {o.ops} ops of 100 timings; {os.cpu_count()} CPUs, "
              f"load {' '.join(open('/proc/loadavg').read().split()[:3])}; binary {mlmond}"
              + (f"; series_per_uid = {o.series_per_uid}" if o.series_per_uid else ""))
        for name, accept in FORMATS.items():
            body = get(url, accept)
            renders = []
            for _ in range(o.tries):
                s.sendto(f"op0:1|ms|#run:{ids[0]}".encode(), ssock)  # moves the data on: no cached answer
                time.sleep(0.02)
                t0 = time.monotonic()
                get(url, accept)
                renders.append((time.monotonic() - t0) * 1000)
            extra = ""
            if name == "text":
                lines = body.decode().splitlines()
                left = sum(float(x.split()[-1]) for x in lines if x.startswith("mlmond_metrics_left_out_total"))
                extra = (f"; {sum(1 for x in lines if x and not x.startswith('#'))} series"
                         f", {left:.0f} left out over the limits")
            print(f"{name:9s} {len(body):8d} bytes; one full render {statistics.median(renders):.2f} ms (median of "
                  f"{o.tries}, fastest {min(renders):.2f}){extra}")
        if o.reps == 0:
            return
        if not shutil.which("wrk"):
            print("wrk not installed: req/s left out (apt-get install -y wrk)")
            return
        rates = {name: [] for name in FORMATS}
        for _ in range(o.reps):
            for name, accept in FORMATS.items():
                rates[name].append(wrk(url, accept, o.dur))
        for name, r in rates.items():
            print(f"{name:9s} wrk -t2 -c8 -d{o.dur}s: median {statistics.median(r):.0f} req/s "
                  f"({', '.join(f'{x:.0f}' for x in r)})")
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait()
        for p in sleepers:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

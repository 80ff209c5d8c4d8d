#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The overview page (GET /) with many running runs: how many requests one
refresh of the page makes, and the server time they take.

  tests/bench/overview.py [--mlmond build/daemon/mlmond] [--runs 1000] [--settle 130] [--rounds 5]

mlmond (of the build given) watches RUNS real `sleep` processes, each
registered over the unix socket with a name and a tag, at the default
interval; after SETTLE seconds (two minutes: the minute tier has rows)
headless chromium loads the overview and the benchmark records, over the
DevTools protocol, the API requests of one refresh of the page (the one
after the first drawing). The page's own script decides what it asks: this
measures the page of the binary under test, whatever it is.

Server time: those requests replayed in order over the unix socket, one
after the other, ROUNDS times (each round 0.3 s after the last, past the
250 ms answer cache). The wall time of a request over the socket is the
server's time plus a few tens of microseconds of the client's, and plus
the sampler's tick when one comes due just before it (the server runs a
due tick before each request: at 1 000 runs, tens of ms on a busy
machine). So per request its fastest time of the rounds, the handler's
own; the total of those, and the median of the rounds' totals, ticks
included."""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import SRC, call, start_mlmond, timed_get

sys.path.insert(0, os.path.join(SRC, "tests", "blackbox"))
from browser import Browser  # noqa: E402

REFRESH_TIMEOUT_S = 60


def one_refresh(port):
    """The API requests of the page's second load of its data (a refresh,
    not the first drawing), and how long chromium took to draw it first."""
    with Browser() as b:
        t = time.perf_counter()
        page = b.open(f"http://127.0.0.1:{port}/", timeout=300)
        drawn_ms = (time.perf_counter() - t) * 1000
        first = page.eval("document.getElementById('updated').textContent")
        page.requests.clear()
        page.wait(f"document.getElementById('updated').textContent !== {first!r}", REFRESH_TIMEOUT_S,
                  what="a refresh of the page")
        # the refresh's text is written once its requests are answered
        return page.api_requests(), drawn_ms, page.eval("document.querySelectorAll('#runs tbody tr').length")


def shape(path):
    """The request with run ids as ID, to group the per-run requests."""
    return re.sub(r"/runs/\d+/", "/runs/ID/", path)


def replay(sock, paths, rounds):
    per = {p: [] for p in paths}
    totals, size = [], {}
    for _ in range(rounds):
        time.sleep(0.3)
        total = 0.0
        for p in paths:
            dt, n, st = timed_get(sock, p)
            if st != 200:
                sys.exit(f"{p}: HTTP {st}")
            per[p].append(dt)
            size[p] = n
            total += dt
        totals.append(total)
    return {p: min(v) for p, v in per.items()}, size, statistics.median(totals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlmond", default=os.path.join(SRC, "build", "daemon", "mlmond"))
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--settle", type=float, default=130)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="mlmond-overview-")
    procs = []
    daemon, sock, _, _ = start_mlmond(a.mlmond, tmp)
    try:
        if not sock:
            sys.exit("mlmond did not start: " + open(os.path.join(tmp, "mlmond.log")).read()[-2000:])
        port = int(daemon.args[daemon.args.index("--listen") + 1].rsplit(":", 1)[1])
        for i in range(a.runs):
            s = subprocess.Popen(["sleep", "3600"])
            procs.append(s)
            st, body = call(sock, "POST", "/v1/runs", {"pid": s.pid, "name": f"job-{i}", "tags": {"team": "t"}})
            if st != 201:
                sys.exit(f"register: {st} {body}")
        time.sleep(a.settle)
        paths, drawn_ms, rows = one_refresh(port)
        times, size, total = replay(sock, paths, a.rounds)
        groups = {}
        for p in paths:
            g = groups.setdefault(shape(p), [0, 0.0, 0])
            g[0] += 1
            g[1] += times[p]
            g[2] += size[p]
        print(f"overview with {a.runs} running runs ({rows} rows drawn), one refresh:")
        print(f"  requests per refresh: {len(paths)}")
        for name, (n, t, b) in groups.items():
            label = f"{n} x {name}" if n > 1 else name
            print(f"  {label:<70} {t * 1000:8.2f} ms {b:>10,} B")
        print(f"  {'server time, all of them (each its fastest of ' + str(a.rounds) + ')':<70} "
              f"{sum(times.values()) * 1000:8.2f} ms {sum(size.values()):>10,} B")
        print(f"  {'the rounds, ticks included (median)':<70} {total * 1000:8.2f} ms")
        print(f"  chromium: first drawn in {drawn_ms:.0f} ms")
    finally:
        for s in procs:
            s.kill()
            s.wait()
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

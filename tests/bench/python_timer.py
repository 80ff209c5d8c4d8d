#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What an mlmon timing costs the caller: ns per `with mlmon.timer(...)`
block and per mlmon.observe() in a tight loop, against a bare pair of
time.perf_counter() calls, with a daemon receiving.

Usage: PYTHONPATH=client/python tests/bench/python_timer.py [N]
It starts its own mlmond when $MLMOND names the binary (else it uses the
daemon at $MLMON_SOCKET / the default sockets), registers itself, and prints
one line per case: the best of 5 rounds of N calls, and the lines mlmond
received and dropped."""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))
import mlmon  # noqa: E402
from mlmon import _http  # noqa: E402


def start_daemon(d):
    binary = os.environ.get("MLMOND")
    if not binary:
        return None
    api, statsd = os.path.join(d, "api.sock"), os.path.join(d, "statsd.sock")
    proc = subprocess.Popen([binary, "-c", "/dev/null", "--db", os.path.join(d, "db"), "--listen", "none",
                             "--socket", api, "--statsd-socket", statsd, "--statsd-udp", "none"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mlmon.configure(socket=api, statsd_socket=statsd)
    for _ in range(250):
        if os.path.exists(api) and os.path.exists(statsd):
            return proc
        time.sleep(0.02)
    raise SystemExit("mlmond did not start")


def best_ns(fn, n, rounds=5):
    best = None
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn(n)
        per = (time.perf_counter_ns() - t0) / n
        best = per if best is None else min(best, per)
        mlmon.flush()
        time.sleep(0.05)  # let the daemon drain its queue between rounds
    return best


def bare(n):
    pc = time.perf_counter
    for _ in range(n):
        t0 = pc()
        pc() - t0


def timer_block(n):
    timer = mlmon.timer
    for _ in range(n):
        with timer("bench", category="bench"):
            pass


def observe_call(n):
    observe = mlmon.observe
    for _ in range(n):
        observe("bench_observe", 1.25, category="bench")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    with tempfile.TemporaryDirectory() as d:
        proc = start_daemon(d)
        try:
            run = mlmon.attach(name="python-timer-bench")
            empty = best_ns(lambda k: None, 1)
            b = best_ns(bare, n)
            t = best_ns(timer_block, n)
            o = best_ns(observe_call, n)
            mlmon.flush()
            time.sleep(1.5)
            health = _http.request("GET", "/v1/health") if run.id is not None else {}
            print(f"python {sys.version.split()[0]}, {n} calls per round, best of 5 (overhead of the loop included)")
            print(f"bare perf_counter pair: {b:8.1f} ns")
            print(f"mlmon.timer block:      {t:8.1f} ns  (+{t - b:.1f} ns over the bare pair)")
            print(f"mlmon.observe:          {o:8.1f} ns")
            print(f"lines sent: {10 * n}, received by mlmond: {health.get('statsd_received')}, "
                  f"dropped here: {mlmon.dropped()}  (empty call {empty:.0f} ns)")
        finally:
            if proc:
                proc.terminate()
                proc.wait()


if __name__ == "__main__":
    main()

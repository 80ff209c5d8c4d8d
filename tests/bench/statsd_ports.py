#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""StatsD from many UDP source ports: a sender holds N
UDP sockets on 127.0.0.1 and sends untagged one-line datagrams from them in
turn at a fixed rate, so mlmond must attribute every datagram by its source
port. Meanwhile a registered process is sampled (interval 250 ms) and
/v1/health is asked every 100 ms over the unix socket.

Scenarios: "unregistered" (the hostile neighbour: no socket belongs to a
run, every line is unmatched), "registered" (the sender is registered:
every line lands in its run) and "fresh" (unregistered, the N sockets held
open but every datagram sent from a new socket, closed at once: each port
is new to mlmond).

For each it prints the datagrams sent, the daemon's CPU % over the step
(schedstat), the tick overruns during the step, the /v1/health answer time
(median and max), and the lines counted received/unmatched. Goals: < 10 %
CPU at 2000 ports x 1000 datagrams/s, no overrun, health < 50 ms.

Loopback only (127.0.0.1); bounded: -d seconds per scenario (default 10,
at most 120), -n ports (default 2000, at most 20000), -r datagrams/s
(default 1000, at most 100000).

usage: tests/bench/statsd_ports.py [-m MLMOND] [-n PORTS] [-r RATE] [-d SECONDS]
                                   [-s unregistered,registered]
Exit status: 0 ran (goals reported), 1 mlmond misbehaved, 2 setup error."""

import argparse
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import SRC, call, sched_ns, start_mlmond  # noqa: E402



SENDER = r'''
import os, socket, sys, time
n, rate, dur, port = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
fresh = sys.argv[5] == "fresh"
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print("ready", flush=True)
sys.stdin.readline()
dest = ("127.0.0.1", port)
t0 = time.monotonic()
sent = 0
while True:
    now = time.monotonic()
    if now - t0 >= dur:
        break
    due = int((now - t0) * rate)
    while sent < due:
        if fresh:  # a new socket (a new port) for every datagram
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(b"ports.op:1|ms", dest)
        else:
            socks[sent % n].sendto(b"ports.op:1|ms", dest)
        sent += 1
    time.sleep(0.001)
print(sent, flush=True)
sys.stdin.readline()
'''


def health_poller(sock, stop, times):
    while not stop.is_set():
        t = time.monotonic()
        try:
            st, _ = call(sock, "GET", "/v1/health")
            if st == 200:
                times.append((time.monotonic() - t) * 1000)
        except OSError:
            times.append(float("inf"))
        stop.wait(0.1)


def scenario(a, name, sock, udp_port, dpid):
    sender = subprocess.Popen([sys.executable, "-c", SENDER, str(a.n), str(a.r), str(a.d), str(udp_port), name],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if sender.stdout.readline().strip() != "ready":
            print(f"{name}: the sender did not start")
            return None
        if name == "registered":
            st, body = call(sock, "POST", "/v1/runs", {"pid": sender.pid, "name": "ports-sender"})
            if st not in (200, 201):
                print(f"{name}: register failed: {st} {body}")
                return None
            time.sleep(0.5)
        _, h0 = call(sock, "GET", "/v1/health")
        c0 = sched_ns(dpid)
        t0 = time.monotonic()
        stop, times = threading.Event(), []
        poller = threading.Thread(target=health_poller, args=(sock, stop, times))
        poller.start()
        sender.stdin.write("go\n")
        sender.stdin.flush()
        sent = int(sender.stdout.readline())
        time.sleep(0.3)  # what is queued is read
        c1 = sched_ns(dpid)
        t1 = time.monotonic()
        stop.set()
        poller.join()
        _, h1 = call(sock, "GET", "/v1/health")
    finally:
        sender.stdin.close()
        sender.wait(timeout=30)
    d = {k: h1[k] - h0[k] for k in ("statsd_received", "statsd_unmatched", "overruns", "ticks")}
    return dict(sent=sent, cpu_pct=(c1 - c0) / ((t1 - t0) * 1e9) * 100, health_med=statistics.median(times),
                health_max=max(times), health_n=len(times), **d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", default=os.environ.get("MLMOND"), help="mlmond binary")
    ap.add_argument("-n", type=int, default=2000, help="source ports (default 2000)")
    ap.add_argument("-r", type=int, default=1000, help="datagrams/s (default 1000)")
    ap.add_argument("-d", type=float, default=10.0, help="seconds per scenario (default 10)")
    ap.add_argument("-s", default="unregistered,registered,fresh", help="scenarios")
    a = ap.parse_args()
    if not (1 <= a.n <= 20000 and 1 <= a.r <= 100000 and 0 < a.d <= 120):
        sys.exit("statsd_ports.py: -n 1..20000, -r 1..100000, -d up to 120 s")

    mlmond = a.m
    for c in ("build-i", "build"):
        p = os.path.join(SRC, c, "daemon", "mlmond")
        if not mlmond and os.access(p, os.X_OK):
            mlmond = p
    if not mlmond or not os.access(mlmond, os.X_OK):
        sys.exit("statsd_ports.py: mlmond not found (build it, or -m PATH / MLMOND=)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < a.n + 64:
        sys.exit(f"statsd_ports.py: RLIMIT_NOFILE hard limit {hard} < {a.n + 64}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, a.n + 64), hard))

    tmp = tempfile.mkdtemp(prefix="mlmond-ports.", dir="/var/tmp")
    daemon, sock, ssock, udp_port = start_mlmond(mlmond, tmp, "--interval", "250ms")
    sampled = subprocess.Popen(["sleep", "600"])
    rc = 0
    try:
        if not sock:
            print("statsd_ports.py: mlmond did not come up")
            return 2
        call(sock, "POST", "/v1/runs", {"pid": sampled.pid, "name": "sampled"})
        print(f"StatsD from many UDP ports: {a.n} ports, {a.r} datagrams/s, {a.d:g} s; binary {mlmond}")
        print(f"{os.cpu_count()} CPUs; load average {open('/proc/loadavg').read().split()[:3]}")
        print(f"{'scenario':13} {'sent':>7} {'received':>8} {'unmatched':>9} {'cpu %':>6} {'ticks':>5} "
              f"{'overruns':>8} {'health ms med':>13} {'max':>7}")
        for name in a.s.split(","):
            try:
                res = scenario(a, name, sock, udp_port, daemon.pid)
            except OSError as e:  # an overloaded daemon resets connections
                print(f"{name}: mlmond did not answer: {e}")
                res = None
            if res is None:
                rc = 1
                continue
            print(f"{name:13} {res['sent']:>7} {res['statsd_received']:>8} {res['statsd_unmatched']:>9} "
                  f"{res['cpu_pct']:>6.1f} {res['ticks']:>5} {res['overruns']:>8} {res['health_med']:>13.2f} "
                  f"{res['health_max']:>7.2f}", flush=True)
            ok = res["cpu_pct"] < 10 and res["overruns"] == 0 and res["health_max"] < 50
            print(f"  goal (< 10 % CPU, no overrun, health < 50 ms): {'met' if ok else 'MISSED'}")
            if daemon.poll() is not None:
                print(f"MLMOND EXITED with {daemon.returncode}")
                return 1
    finally:
        sampled.kill()
        sampled.wait()
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                rc = 1
        shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())

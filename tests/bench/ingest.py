#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""StatsD ingest benchmark: one sender (tests/bench/statsd_send.c, built here
with gcc) pushes timing lines, 50 per datagram, at a target rate for a few
seconds to mlmond's unix datagram socket and to its UDP listener. The sender
is registered before it sends, so every line is attributed (by
SCM_CREDENTIALS on the unix socket, by the source port's owner over UDP).

For each step it prints the lines/s actually sent, the lines the sender could
not send (EAGAIN on a non-blocking unix socket), the lines the daemon took
(the run's latency count; /v1/health statsd_received and statsd_unmatched
deltas as a cross-check), the loss %, the kernel's UDP receive-buffer drops,
and the daemon's CPU per line. Then the highest rate of the ladder with no
loss, per listener.

Goals: >= 500 000 lines/s on the unix socket; no loss at
100 000 lines/s on either listener.

usage: tests/bench/ingest.py [-d SECONDS] [-r RATE,RATE,...] [-l unix,udp,unix-blocking]
                             [-m MLMOND] [-s SNDBUF] [-k]
Exit status: 0 ran (goals reported), 1 mlmond misbehaved, 2 setup error."""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from benchlib import SRC, call, sched_ns, start_mlmond  # noqa: E402



def udp_rcvbuf_errors():
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    return int(rows[1][rows[0].index("RcvbufErrors")])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-d", type=float, default=10.0, help="seconds per step (default 10)")
    ap.add_argument("-r", default="100000,200000,300000,500000,750000,1000000,0",
                    help="target lines/s, 0 = as fast as possible")
    ap.add_argument("-l", default="unix,udp,unix-blocking",
                    help="listeners: unix (non-blocking sender), udp, unix-blocking (blocking sender, max only)")
    ap.add_argument("-m", default=os.environ.get("MLMOND"), help="mlmond binary")
    ap.add_argument("-s", type=int, default=0, help="sender SO_SNDBUF bytes (default: the system's)")
    ap.add_argument("-k", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()

    mlmond = a.m
    if not mlmond:
        for c in ("build-t3", "build-bench", "build"):
            p = os.path.join(SRC, c, "daemon", "mlmond")
            if os.access(p, os.X_OK):
                mlmond = p
                break
    if not mlmond or not os.access(mlmond, os.X_OK):
        sys.exit("ingest.py: mlmond not found (build it, or -m PATH / MLMOND=)")
    if not shutil.which("gcc"):
        sys.exit("ingest.py: gcc is needed")

    tmp = tempfile.mkdtemp(prefix="mlmond-ingest.", dir="/var/tmp")
    sender = os.path.join(tmp, "statsd_send")
    subprocess.run(["gcc", "-O2", "-Wall", "-o", sender, os.path.join(SRC, "tests/bench/statsd_send.c"), "-lm"],
                   check=True)
    daemon, sock, ssock, udp_port = start_mlmond(mlmond, tmp)
    rc = 0
    try:
        if not sock:
            sys.exit("ingest.py: mlmond did not come up")
        print(f"StatsD ingest benchmark: {a.d:g} s per step, 50 lines per datagram; binary {mlmond}")
        print(f"{os.cpu_count()} CPUs; load average {open('/proc/loadavg').read().split()[:3]}; "
              f"net.unix.max_dgram_qlen {open('/proc/sys/net/unix/max_dgram_qlen').read().strip()}; "
              f"wmem_default {open('/proc/sys/net/core/wmem_default').read().strip()}; "
              f"sender SO_SNDBUF {a.s or 'default'}")
        print(f"{'listener':14} {'target/s':>9} {'sent/s':>9} {'sent':>9} {'snd drop':>9} {'taken':>9} "
              f"{'loss %':>7} {'rcvbuf':>7} {'cpu ns/line':>11} {'cpu %':>6}")
        best = {}
        loss_at = {}
        for listener in a.l.split(","):
            rates = [0] if listener == "unix-blocking" else [int(r) for r in a.r.split(",")]
            for rate in rates:
                res = step(a, sender, listener, rate, sock, ssock, udp_port, daemon.pid)
                if res is None:
                    rc = 1
                    continue
                tgt = "max" if rate == 0 else str(rate)
                print(f"{listener:14} {tgt:>9} {res['rate']:>9.0f} {res['sent']:>9} {res['snd_drop']:>9} "
                      f"{res['taken']:>9} {res['loss_pct']:>7.3f} {res['rcvbuf']:>7} "
                      f"{res['cpu_ns_line']:>11.0f} {res['cpu_pct']:>6.1f}", flush=True)
                if res["mismatch"]:
                    print(f"  !! {res['mismatch']}", flush=True)
                    rc = 1
                lossless = res["loss_pct"] == 0 and (rate == 0 or res["rate"] >= 0.98 * rate)
                if lossless and res["rate"] > best.get(listener, 0):
                    best[listener] = res["rate"]
                loss_at[(listener, rate)] = res["loss_pct"]
                if daemon.poll() is not None:
                    print(f"MLMOND EXITED with {daemon.returncode}")
                    return 1
        print()
        for listener in a.l.split(","):
            print(f"{listener}: highest rate with no loss: {best.get(listener, 0):.0f} lines/s")
        if "unix" in best or "unix-blocking" in best:
            u = max(best.get("unix", 0), best.get("unix-blocking", 0))
            print(f"goal >= 500000 lines/s on the unix socket: {'met' if u >= 500000 else 'MISSED'} ({u:.0f})")
        for listener in ("unix", "udp"):
            if (listener, 100000) in loss_at:
                print(f"goal no loss at 100000 lines/s on {listener}: "
                      f"{'met' if loss_at[(listener, 100000)] == 0 else 'MISSED'} "
                      f"({loss_at[(listener, 100000)]:.3f} % lost)")
        st, h = call(sock, "GET", "/v1/health")
        print(f"daemon: statsd_received {h['statsd_received']}, malformed {h['statsd_malformed']}, "
              f"unmatched {h['statsd_unmatched']}, overruns {h['overruns']}, self_rss_bytes {h['self_rss_bytes']}")
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                code = daemon.wait(timeout=30)
                if code != 0:
                    print(f"MLMOND: exit status {code} after SIGTERM")
                    rc = 1
            except subprocess.TimeoutExpired:
                daemon.kill()
                print("MLMOND: did not exit within 30 s of SIGTERM")
                rc = 1
        with open(os.path.join(tmp, "mlmond.log"), errors="replace") as f:
            bad = [line for line in f if "ERROR" in line or "Sanitizer" in line]
        if bad:
            print("MLMOND logged errors:\n" + "".join(bad[:20]))
            rc = 1
        if a.k:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return rc


def step(a, sender, listener, rate, sock, ssock, udp_port, dpid):
    op = f"{listener.replace('-', '_')}_{rate}"
    argv = [sender]
    argv += ["unix", ssock] if listener.startswith("unix") else ["udp", f"127.0.0.1:{udp_port}"]
    argv += ["-r", str(rate), "-d", str(a.d), "-o", op]
    if listener == "unix-blocking":
        argv.append("-b")
    if a.s:
        argv += ["-s", str(a.s)]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        word, pid = p.stdout.readline().split()
        assert word == "ready"
        st, run = call(sock, "POST", "/v1/runs", {"pid": int(pid), "name": op})
        if st != 201:
            print(f"registration refused: {st} {run}")
            return None
        h0 = call(sock, "GET", "/v1/health")[1]
        cpu0, rb0, t0 = sched_ns(dpid), udp_rcvbuf_errors(), time.time()
        p.stdin.write("go\n")
        p.stdin.flush()
        out = dict(kv.split("=") for kv in p.stdout.readline().split())
        # drain: wait until the daemon's received count stops moving
        last, still = None, 0
        while still < 5:
            time.sleep(0.1)
            cur = call(sock, "GET", "/v1/health")[1]["statsd_received"]
            still = still + 1 if cur == last else 0
            last = cur
        # the sender's CPU window ended when it printed; count the drain too
        cpu1, rb1 = sched_ns(dpid), udp_rcvbuf_errors()
        el = time.time() - t0
        h1 = call(sock, "GET", "/v1/health")[1]
        st, lat = call(sock, "GET", f"/v1/runs/{run['id']}/latency?from={int(t0 * 1000) - 2000}"
                                    f"&until={int(time.time() * 1000) + 1000}&op={op}")
        taken = lat["ops"].get(op, {}).get("count", 0) if st == 200 else -1
    finally:
        p.stdin.close()
        p.wait()
    sent, snd_drop = int(out["sent_lines"]), int(out["dropped_lines"])
    recv = h1["statsd_received"] - h0["statsd_received"]
    unm = h1["statsd_unmatched"] - h0["statsd_unmatched"]
    mal = h1["statsd_malformed"] - h0["statsd_malformed"]
    mismatch = []
    if recv - unm != taken:
        mismatch.append(f"statsd_received delta {recv} - unmatched {unm} != taken {taken}")
    if unm or mal:
        mismatch.append(f"unmatched {unm}, malformed {mal}")
    if int(out["errors"]):
        mismatch.append(f"sender errors {out['errors']}")
    attempted = sent + snd_drop
    return {
        "rate": float(out["rate"]), "sent": sent, "snd_drop": snd_drop, "taken": taken,
        "loss_pct": 100.0 * (attempted - taken) / attempted if attempted else 0.0,
        "rcvbuf": rb1 - rb0, "cpu_ns_line": (cpu1 - cpu0) / max(taken, 1),
        "cpu_pct": (cpu1 - cpu0) / 1e9 / el * 100, "mismatch": "; ".join(mismatch),
    }


if __name__ == "__main__":
    sys.exit(main())

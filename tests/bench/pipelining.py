#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Pipelined HTTP requests: N GETs sent at once on one connection, against N
sent one by one on one kept-alive connection. Starts its own mlmond on a
temporary directory and a free loopback port; prints the time per request
of both, the median of REPS repetitions.

usage: tests/bench/pipelining.py [-n N] [-r REPS] [--path PATH] [MLMOND]
MLMOND defaults to build/daemon/mlmond under the repository root."""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(path, close=False):
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n".encode()


def read_answers(s, n):
    """Reads until n answers (status lines) have come, or the peer closes."""
    buf = b""
    while buf.count(b"HTTP/1.1 ") < n or not buf.endswith(b"\n"):
        c = s.recv(1 << 20)
        if not c:
            break
        buf += c
    return buf


def pipelined(port, path, n):
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        t = time.monotonic()
        s.sendall(request(path) * (n - 1) + request(path, close=True))
        buf = read_answers(s, n)
        took = time.monotonic() - t
    got = buf.count(b"HTTP/1.1 200")
    if got != n:
        sys.exit(f"pipelining.py: {got} of {n} pipelined requests answered 200")
    return took


def one_by_one(port, path, n):
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        t = time.monotonic()
        for _ in range(n):
            s.sendall(request(path))
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += s.recv(65536)
            head, _, body = buf.partition(b"\r\n\r\n")
            length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
            while len(body) < length:
                body += s.recv(65536)
        return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description="per-request time of pipelined HTTP requests")
    ap.add_argument("-n", type=int, default=200, help="requests per connection (default 200)")
    ap.add_argument("-r", "--reps", type=int, default=5, help="repetitions (default 5)")
    ap.add_argument("--path", default="/v1/health", help="what is asked (default /v1/health)")
    ap.add_argument("mlmond", nargs="?", default=os.path.join(ROOT, "build", "daemon", "mlmond"))
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="mlmond-bench-")
    port = free_port()
    with open(os.path.join(tmp, "mlmond.conf"), "w"):
        pass
    log = open(os.path.join(tmp, "mlmond.log"), "wb")
    p = subprocess.Popen([a.mlmond, "-c", os.path.join(tmp, "mlmond.conf"), "--db", os.path.join(tmp, "db"),
                          "--listen", f"127.0.0.1:{port}", "--socket", os.path.join(tmp, "sock"),
                          "--statsd-socket", os.path.join(tmp, "statsd.sock"), "--statsd-udp", "none"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(100):
            try:
                one_by_one(port, a.path, 1)
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit(f"pipelining.py: mlmond did not come up (log in {tmp})")
        pipe = [pipelined(port, a.path, a.n) for _ in range(a.reps)]
        single = [one_by_one(port, a.path, a.n) for _ in range(a.reps)]
        mp, ms = statistics.median(pipe), statistics.median(single)
        print(f"{a.n} requests of GET {a.path} on one connection, median of {a.reps}; binary {a.mlmond}")
        print(f"pipelined:  {mp:.4f} s, {mp / a.n * 1000:.3f} ms/request")
        print(f"one by one: {ms:.4f} s, {ms / a.n * 1000:.3f} ms/request")
    finally:
        p.terminate()
        p.wait(timeout=15)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

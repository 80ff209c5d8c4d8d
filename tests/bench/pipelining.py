#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Pipelined HTTP requests: N GETs sent at once on one connection, against N
sent one by one on one kept-alive connection. Starts its own mlmond on a
temporary directory and a free loopback port; prints the time per request
of both, the median and the largest of REPS repetitions.

With --runs R and --load L: first R ended runs with 16 tags of the largest
size (a list of about 4.3 KB a run), then L clients fetching
/v1/runs?state=all&limit=R+1 in a loop (every other one over the unix
socket) while the requests are timed: what a pipelined request waits for
while large answers are being sent.

usage: tests/bench/pipelining.py [-n N] [-r REPS] [--path PATH] [--runs R] [--load L] [--load-path P] [MLMOND]
MLMOND defaults to build/daemon/mlmond under the repository root."""
import argparse
import http.client
import json
import multiprocessing
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


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(self.unix_path)


def make_ended_runs(sock_path, n):
    """n runs of one sleeping process, each registered and unregistered."""
    tags = {f"k{i:02d}" + "x" * 61: "v" * 128 for i in range(16)}
    p = subprocess.Popen(["sleep", "3600"])
    c = UnixHTTP(sock_path)
    try:
        for _ in range(n):
            c.request("POST", "/v1/runs", json.dumps({"pid": p.pid, "name": "n" * 128, "tags": tags,
                                                       "discover": False}))
            run = json.loads(c.getresponse().read())
            c.request("DELETE", f"/v1/runs/{run['id']}")
            c.getresponse().read()
    finally:
        c.close()
        p.kill()
        p.wait()


def loader(port, sock_path, path, unix, stop):
    os.nice(19)
    while not stop.is_set():
        c = UnixHTTP(sock_path) if unix else http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            c.request("GET", path)
            c.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            c.close()


def main():
    ap = argparse.ArgumentParser(description="per-request time of pipelined HTTP requests")
    ap.add_argument("-n", type=int, default=200, help="requests per connection (default 200)")
    ap.add_argument("-r", "--reps", type=int, default=5, help="repetitions (default 5)")
    ap.add_argument("--path", default="/v1/health", help="what is asked (default /v1/health)")
    ap.add_argument("--runs", type=int, default=0, help="ended runs to make first (default 0)")
    ap.add_argument("--load", type=int, default=0, help="clients fetching the list of every run meanwhile")
    ap.add_argument("--load-path", help="what they fetch (default /v1/runs?state=all&limit=RUNS+1; a daemon "
                    "that predates limit= takes /v1/runs?state=all)")
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
        sock_path = os.path.join(tmp, "sock")
        make_ended_runs(sock_path, a.runs)
        ctx = multiprocessing.get_context("fork")
        stop = ctx.Event()
        load_path = a.load_path or f"/v1/runs?state=all&limit={a.runs + 1}"
        loaders = [ctx.Process(target=loader, args=(port, sock_path, load_path, i % 2 == 1, stop))
                   for i in range(a.load)]
        for x in loaders:
            x.start()
        time.sleep(1 if a.load else 0)
        try:
            pipe = [pipelined(port, a.path, a.n) for _ in range(a.reps)]
            single = [one_by_one(port, a.path, a.n) for _ in range(a.reps)]
        finally:
            stop.set()
            for x in loaders:
                x.join()
        print(f"{a.n} requests of GET {a.path} on one connection, {a.reps} times; {a.runs} ended runs, "
              f"{a.load} clients fetching them all meanwhile; binary {a.mlmond}")
        for what, v in (("pipelined: ", pipe), ("one by one:", single)):
            m = statistics.median(v)
            print(f"{what} median {m:.4f} s, {m / a.n * 1000:.3f} ms/request; "
                  f"at most {max(v):.4f} s, {max(v) / a.n * 1000:.3f} ms/request")
    finally:
        p.terminate()
        p.wait(timeout=15)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

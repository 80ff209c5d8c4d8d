# SPDX-License-Identifier: MIT
"""What the Python benchmarks share: the source tree's root, a call of
mlmond's HTTP API over its unix socket, and a process's CPU time."""

import http.client
import json
import os
import socket
import subprocess
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path_ = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path_)


def call(sock, method, path, body=None):
    """(status, parsed JSON) of one request to the unix socket at sock."""
    c = UnixHTTP(sock)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"} if body is not None else {})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


def timed_get(sock, path):
    """(seconds, bytes, status) of one GET over the unix socket at sock."""
    c = UnixHTTP(sock)
    t = time.perf_counter()
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    dt = time.perf_counter() - t
    c.close()
    return dt, len(body), r.status


def sched_ns(pid):
    """CPU time of all of pid's threads (schedstat), in ns."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total


def free_port(kind=socket.SOCK_STREAM):
    """A loopback port free now, for a listener of kind."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlmond(mlmond, tmp, *extra, conf=""):
    """mlmond on tmp's files (config conf, db, unix sockets) and free
    loopback ports for HTTP and StatsD UDP; returns (process, HTTP socket
    path, StatsD socket path, UDP port), or None if it did not answer
    /v1/health within 5 s (its log is tmp/mlmond.log)."""
    sock, ssock = os.path.join(tmp, "sock"), os.path.join(tmp, "statsd.sock")
    http_port, udp_port = free_port(), free_port(socket.SOCK_DGRAM)
    with open(os.path.join(tmp, "mlmond.conf"), "w") as f:
        f.write(conf)
    log = open(os.path.join(tmp, "mlmond.log"), "wb")
    daemon = subprocess.Popen([mlmond, "-c", os.path.join(tmp, "mlmond.conf"), "--db", os.path.join(tmp, "db"),
                               "--listen", f"127.0.0.1:{http_port}", "--socket", sock, "--statsd-socket", ssock,
                               "--statsd-udp", f"127.0.0.1:{udp_port}", *extra], stdout=log, stderr=log)
    log.close()
    for _ in range(100):
        try:
            if call(sock, "GET", "/v1/health")[0] == 200:
                return daemon, sock, ssock, udp_port
        except OSError:
            time.sleep(0.05)
    return daemon, None, None, None

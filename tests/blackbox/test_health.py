# SPDX-License-Identifier: MIT
"""/v1/health tells the truth: "degraded" with
its reasons while a listener does not accept, the database cannot be
written or the sampler is late, "ok" again once that clears; the watchdog
pings stop while a listener does not accept; a failing database does not
flood the log."""

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import Mlmond, needs, wait_for

WATCHDOG_USEC = 1500000  # pings every 0.5 s


class WatchedMlmond(Mlmond):
    """An mlmond that sends sd_notify messages (the watchdog's among them)
    to a datagram socket of the test."""

    def __init__(self, tmpdir, **kw):
        self.notify_path = os.path.join(tmpdir, "notify.sock")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        self.notify.setblocking(False)
        super().__init__(tmpdir, **kw)

    def start(self):
        real = subprocess.Popen

        def popen(argv, **kw):
            kw["env"] = dict(kw["env"], NOTIFY_SOCKET=self.notify_path, WATCHDOG_USEC=str(WATCHDOG_USEC))
            return real(argv, **kw)
        subprocess.Popen = popen
        try:
            super().start()
        finally:
            subprocess.Popen = real

    def pings(self):
        """How many WATCHDOG=1 arrived since the last call."""
        n = 0
        while True:
            try:
                msg = self.notify.recv(4096)
            except BlockingIOError:
                return n
            n += msg.split(b"\n").count(b"WATCHDOG=1")


def health(mlmond, unix=False):
    st, h = mlmond.uget("/v1/health") if unix else mlmond.get("/v1/health")
    assert st == 200, h
    assert h["status"] == ("degraded" if h["reasons"] else "ok"), h
    return h


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class KeptConnection:
    """One keep-alive HTTP/1.1 connection to the unix socket, opened while
    the daemon can still accept it."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(3)
        self.s.connect(path)

    def health(self):
        self.s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.s.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        while len(body) < length:
            body += self.s.recv(65536)
        return json.loads(body[:length])

    def close(self):
        self.s.close()


def test_listener_not_accepting(make_mlmond):
    """Out of file descriptors, libmicrohttpd cannot accept: connections
    wait in the backlog. Health says so (asked on a connection opened
    before), the watchdog pings stop; with descriptors back, ok and pings."""
    mlmond = make_mlmond(WatchedMlmond, config_text="[http]\nheader_timeout = 30s\n")
    time.sleep(1.2)
    assert mlmond.pings() >= 1, "no watchdog pings to begin with"
    assert health(mlmond)["reasons"] == []
    kept = KeptConnection(mlmond.socket_path)
    assert kept.health()["reasons"] == []
    soft, hard = subprocess.run(["prlimit", "--pid", str(mlmond.pid), "--nofile", "--raw", "--noheadings",
                                 "--output=SOFT,HARD"], capture_output=True, text=True, check=True).stdout.split()
    socks = []
    try:
        n = open_fds(mlmond.pid)
        subprocess.run(["prlimit", "--pid", str(mlmond.pid), f"--nofile={n}:{hard}"], check=True)
        for _ in range(3):  # they wait in the TCP backlog: accept() fails with EMFILE
            s = socket.socket()
            s.settimeout(1)
            s.connect(("127.0.0.1", mlmond.port))
            socks.append(s)
        h = wait_for(lambda: (lambda h: h if h["reasons"] else None)(kept.health()), 8.0,
                     what="health to say a listener is not accepting")
        assert h["status"] == "degraded" and h["reasons"] == ["a listener is not accepting"], h
        mlmond.pings()
        time.sleep(1.5)
        assert mlmond.pings() == 0, "watchdog pings went on while a listener did not accept"
    finally:
        subprocess.run(["prlimit", "--pid", str(mlmond.pid), f"--nofile={soft}:{hard}"], check=True)
        for s in socks:
            s.close()
        kept.close()
    wait_for(lambda: health(mlmond)["status"] == "ok", 5.0, what="health to say ok again")
    mlmond.pings()
    time.sleep(1.2)
    assert mlmond.pings() >= 1, "no watchdog pings once the listener accepts again"


def test_sampler_late(make_mlmond, helpers):
    """A daemon stopped for a while comes back "degraded" (sampler late),
    then ok once it is on time again."""
    mlmond = make_mlmond(interval="250ms")
    h = helpers("grow", 0)
    h.expect("ready")
    mlmond.register(h.pid)
    time.sleep(0.5)
    assert health(mlmond)["reasons"] == []
    mlmond.signal(signal.SIGSTOP)
    time.sleep(1.6)
    mlmond.signal(signal.SIGCONT)
    assert health(mlmond)["reasons"] == ["sampler late"]
    wait_for(lambda: health(mlmond)["status"] == "ok", 8.0, what="health to say ok again")


def fill(path):
    """Writes zeros to path until the file system is full. Unbuffered: a
    buffered file would try its last chunk again when closed, and fail."""
    chunk = b"\0" * 65536
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while True:
            os.write(fd, chunk)
    except OSError:
        pass
    finally:
        os.close(fd)


@pytest.fixture
def small_fs():
    """A 16 MiB tmpfs (root only)."""
    if os.geteuid() != 0:
        needs("root", "to mount a small file system")
    d = tempfile.mkdtemp(prefix="mlmond-bb-fs-", dir="/tmp")
    os.chmod(d, 0o755)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", d], capture_output=True)
    if r.returncode != 0:
        os.rmdir(d)
        needs("tmpfs", f"cannot mount one: {r.stderr.decode().strip()}")
    yield d
    subprocess.run(["umount", "-l", d], check=False)
    os.rmdir(d)


def test_database_failing(make_mlmond, helpers, small_fs):
    """A full file system under the database: degraded (database writes
    failing) while writes fail, a bounded number of log lines, ok again
    once there is room."""
    mlmond = make_mlmond(interval="100ms")
    mlmond.allowed_errors.append(r".")  # what SQLite says on a full disk is its business
    os.makedirs(os.path.join(small_fs, "db"))
    h = helpers("grow", 0)
    h.expect("ready")
    # the database on the small file system: restart on it
    mlmond.stop()
    mlmond.db_path = os.path.join(small_fs, "db", "mlmond.db")
    mlmond.start()
    mlmond.register(h.pid, interval="100ms")
    time.sleep(0.5)
    assert health(mlmond)["reasons"] == []

    lines_before = mlmond.log_lines()
    filler = os.path.join(small_fs, "filler")
    fill(filler)
    t0 = time.monotonic()
    h1 = wait_for(lambda: (lambda h: h if "database writes failing" in h["reasons"] else None)(health(mlmond)),
                  10.0, what="health to say database writes fail")
    assert h1["status"] == "degraded", h1
    errors = h1["db_write_errors"]
    time.sleep(6)
    h2 = health(mlmond)
    assert "database writes failing" in h2["reasons"] and h2["db_write_errors"] > errors, h2
    spent = time.monotonic() - t0
    lines = mlmond.stderr().splitlines()[lines_before:]
    assert len(lines) <= 6 * spent, f"{len(lines)} log lines in {spent:.1f} s:\n" + "\n".join(lines)
    for text in set(re.sub(r"\d+", "N", line) for line in lines):
        same = [line for line in lines if re.sub(r"\d+", "N", line) == text]
        assert len(same) <= 6 * (1 + spent // 10), f"{len(same)} times in {spent:.1f} s: {text}"

    os.unlink(filler)
    wait_for(lambda: health(mlmond)["status"] == "ok", 15.0, what="health to say ok again")
    st, run = mlmond.get("/v1/runs?state=running")
    assert st == 200 and len(run["runs"]) == 1

# SPDX-License-Identifier: MIT
"""Hostile HTTP clients: slow and idle connections must not lock
other clients out, every request gets an answer at once, a cached answer is
never given to a different question, pipelined requests are answered back
to back, and control bytes in a decoded path or parameter are a 400.
Loopback only, bounded loops."""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from conftest import as_user, needs, strict_json, wait_for


def read_all(s, timeout=5.0):
    """Everything the peer sends until it closes (or timeout): bytes."""
    s.settimeout(timeout)
    buf = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            buf += c
    except (socket.timeout, ConnectionResetError):
        pass
    return buf


def raw_get(mlmond, target, unix=False, timeout=5.0):
    """GET target (as is) on a fresh connection; returns (status, body bytes),
    status None when the connection was refused or closed without an answer."""
    if unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(mlmond.socket_path)
    else:
        s = socket.create_connection(("127.0.0.1", mlmond.port), timeout=timeout)
    try:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = read_all(s, timeout)
    except (ConnectionResetError, BrokenPipeError):
        return None, b""
    finally:
        s.close()
    if not data.startswith(b"HTTP/1.1 "):
        return None, data
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def timed_get(mlmond, target, unix=False, timeout=5.0):
    t = time.monotonic()
    st, body = raw_get(mlmond, target, unix=unix, timeout=timeout)
    return st, body, time.monotonic() - t


# ---- 11: control bytes in the decoded path or parameters -------------------------

@pytest.mark.parametrize("target", ["/v1/runs/%00", "/v1/runs/1%00/samples", "/v1/health%00", "/v1/runs/%0a",
                                    "/v1/runs?state=%00", "/v1/runs?name=a%01b", "/v1/runs?na%7fme=x"])
def test_control_byte_is_400(mlmond, target):
    st, body = raw_get(mlmond, target)
    assert st == 400, (target, st, body)
    assert strict_json(body)["error"]["code"] == "bad_request"


def test_encoded_slash_is_not_a_separator(mlmond):
    st, body = raw_get(mlmond, "/v1%2Fhealth")
    assert st == 404, body


# ---- 6: the cache is keyed on what was asked, decoded ---------------------------

def test_cache_tells_encoded_separators_apart(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid, name="myrun")
    for _ in range(3):  # within the cache's 250 ms, in both orders
        st, body = raw_get(mlmond, "/v1/runs?name=myrun%26state%3Dall")
        assert st == 200 and strict_json(body)["runs"] == [], body
        st, body = raw_get(mlmond, "/v1/runs?name=myrun&state=all")
        assert st == 200, body
        assert [r["id"] for r in strict_json(body)["runs"]] == [run["id"]], body
        st, body = raw_get(mlmond, "/v1/runs?name=myrun%26state%3Dall")
        assert st == 200 and strict_json(body)["runs"] == [], body

    lat = f"/v1/runs/{run['id']}/latency"
    st, body = raw_get(mlmond, lat + "?op=x%26window%3D5s")
    assert st == 200, body
    first = strict_json(body)["window_s"]
    st, body = raw_get(mlmond, lat + "?op=x&window=5s")
    assert st == 200, body
    assert strict_json(body)["window_s"] == 5.0 != first, body


# ---- 7: any number of parameters gets an answer, at once --------------------------

@pytest.mark.parametrize("n", [17, 400, 500, 2000])
def test_many_parameters_answered_at_once(mlmond, n):
    q = "&".join(f"a{i}=1" for i in range(n))
    st, body, took = timed_get(mlmond, "/v1/runs?" + q, timeout=8)
    assert st == 400, (n, st, body[:200])
    assert "too many query parameters" in strict_json(body)["error"]["message"]
    assert took < 1.0, f"{n} parameters answered after {took:.2f} s"
    st, _ = mlmond.get("/v1/health")
    assert st == 200


# ---- 8: pipelined requests ---------------------------------------------------------

def test_pipelined_requests_back_to_back(mlmond):
    n = 200
    one = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
    last = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", mlmond.port), timeout=10)
    try:
        t = time.monotonic()
        s.sendall(one * (n - 1) + last)
        data = read_all(s, 10)
        took = time.monotonic() - t
    finally:
        s.close()
    assert data.count(b"HTTP/1.1 200 OK") == n
    # one by one on a kept-alive connection this takes well under 0.1 s;
    # libmicrohttpd's pace (a request per timer wake-up) took 3.7 s
    assert took < 1.0, f"{n} pipelined requests took {took:.2f} s"


# ---- 4: slow and idle clients cannot lock others out -------------------------------

def test_request_head_has_a_deadline(make_mlmond):
    d = make_mlmond(config_text="[http]\nheader_timeout = 1s\nconnection_timeout = 30s\n")
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    try:
        t = time.monotonic()
        s.sendall(b"G")
        s.settimeout(6)
        try:
            got = s.recv(100)
        except ConnectionResetError:
            got = b""
        took = time.monotonic() - t
    finally:
        s.close()
    assert got == b"", got
    assert 0.8 <= took < 2.5, f"a connection without a request head was closed after {took:.2f} s"


def test_idle_keepalive_gives_its_slot_up(mlmond):
    """per_ip_connection_limit kept-alive, idle connections from 127.0.0.1:
    a new client from there is still answered."""
    held = []
    try:
        for _ in range(16):
            s = socket.create_connection(("127.0.0.1", mlmond.port), timeout=5)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
            s.settimeout(5)
            assert s.recv(65536).startswith(b"HTTP/1.1 200"), "no answer on a kept-alive connection"
            held.append(s)
        st, body, took = timed_get(mlmond, "/v1/health", timeout=5)
        assert st == 200, (st, body)
        assert took < 1.0
    finally:
        for s in held:
            s.close()


ATTACKER = textwrap.dedent("""
    import socket, sys, time
    sock, port, n_unix, n_tcp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    # "slow": one byte of a request head; "busy": a whole head, its body never sent
    busy = sys.argv[5:] == ["busy"]
    sent = b"POST /v1/runs HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 1000\\r\\n\\r\\n" if busy else b"G"
    deadline = time.monotonic() + 20  # a full backlog makes each connect wait
    held = []
    def hold(family, source, target):
        # connect, send what the attack sends, keep it
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(1)
        try:
            if source:
                s.bind(source)
            s.connect(target)
            s.sendall(sent)
            held.append(s)
        except OSError:
            s.close()
    # loopback has 127.0.0.0/8: more TCP source addresses, more slots
    targets = [(socket.AF_UNIX, None, sock)] * n_unix + \
              [(socket.AF_INET, (f"127.0.0.{1 + i % 24}", 0), ("127.0.0.1", port)) for i in range(n_tcp)]
    for t in targets:
        if time.monotonic() > deadline:
            break
        hold(*t)
    print("ready", len(held), flush=True)
    sys.stdin.readline()
""")


@pytest.fixture
def other_user():
    """A fresh unprivileged user (useradd), removed afterwards: its uid."""
    if os.geteuid() != 0:
        needs("root", "to act as another user")
    if not shutil.which("useradd") or not shutil.which("setpriv"):
        needs("useradd", "useradd and setpriv, to act as another user")
    name = "mlbb" + uuid.uuid4().hex[:8]
    r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       capture_output=True)
    if r.returncode != 0:
        needs("useradd", f"cannot create a user: {r.stderr.decode().strip()}")
    try:
        yield int(subprocess.run(["id", "-u", name], capture_output=True, check=True).stdout)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def accept_queues(d):
    """(TCP, unix socket): how many connections wait to be accepted on d's
    listeners, as ss reads them (Recv-Q of a listening socket)."""
    out = subprocess.run(["ss", "-Hlnxt"], capture_output=True, text=True, check=True).stdout
    tcp = unix = None
    for f in (line.split() for line in out.splitlines()):
        if len(f) >= 5 and f[1] == "LISTEN":
            if f[4] == f"127.0.0.1:{d.port}":
                tcp = int(f[2])
            elif f[4] == d.socket_path:
                unix = int(f[2])
    assert tcp is not None and unix is not None, f"ss shows no listener of mlmond:\n{out}"
    return tcp, unix


@contextlib.contextmanager
def attack(d, uid, n_unix, n_tcp, how):
    """ATTACKER, as uid, holding its connections (how: slow or busy) until
    the block ends; the block starts once the daemon has taken in every
    one of them (none waits to be accepted)."""
    p = subprocess.Popen(as_user(uid) + [sys.executable, "-c", ATTACKER, d.socket_path, str(d.port), str(n_unix),
                                         str(n_tcp), how],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = p.stdout.readline().decode().split()
        assert line and line[0] == "ready", line
        wait_for(lambda: accept_queues(d) == (0, 0), 20, what="the daemon to accept the attacker's connections")
        yield
    finally:
        p.stdin.close()
        p.wait(timeout=10)
        p.stdout.close()


def health_at_once(d, unix):
    for _ in range(3):
        st, body, took = timed_get(d, "/v1/health", unix=unix, timeout=5)
        assert st == 200 and took < 1.0, ("unix socket" if unix else "TCP", st, body, took)


def test_slow_user_cannot_lock_others_out(make_mlmond, other_user):
    # a long head deadline: what is tested here is the sharing of the slots
    d = make_mlmond(config_text="[http]\nheader_timeout = 30s\nconnection_timeout = 30s\n")
    with attack(d, other_user, 300, 300, "slow"):
        health_at_once(d, unix=True)
        health_at_once(d, unix=False)
    # the slots come back
    wait_for(lambda: d.get("/v1/health")[0] == 200, 3.0, what="the API after the attacker left")


def test_busy_user_cannot_lock_others_out(make_mlmond, other_user):
    """Requests whose body never comes hold their slots (a connection with
    a request in hand is never given up for a new one): one user holds at
    most max_connections_per_uid of them, and the listener's other slots
    stay free for everyone else."""
    d = make_mlmond(config_text="[http]\nconnection_limit = 32\nmax_connections_per_uid = 8\n"
                                "header_timeout = 30s\nconnection_timeout = 30s\n")
    with attack(d, other_user, 40, 0, "busy"):
        health_at_once(d, unix=True)

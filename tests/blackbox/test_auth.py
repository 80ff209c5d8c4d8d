# SPDX-License-Identifier: MIT
"""Authorization on the unix socket (SO_PEERCRED): root may register and
unregister anything; another user only processes it could read itself."""

import json
import os
import subprocess

import pytest

from conftest import as_user, needs, strict_json, wait_for

NOBODY = 65534

# A raw HTTP request over the unix socket, run as another user: prints
# {"status": N, "body": "..."}.
RAW_CLIENT = r"""
import json, socket, sys
sock, method, path = sys.argv[1:4]
body = sys.argv[4].encode() if len(sys.argv) > 4 else b""
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sock)
req = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
if body:
    req += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
s.sendall(req.encode() + b"\r\n" + body)
data = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    data += c
head, _, rest = data.partition(b"\r\n\r\n")
print(json.dumps({"status": int(head.split()[1]), "body": rest.decode("utf-8")}))
"""


def raw_as(uid, mlmond, method, path, body=None):
    argv = as_user(uid) + ["/usr/bin/python3", "-I", "-c", RAW_CLIENT, mlmond.socket_path, method, path]
    if body is not None:
        argv.append(json.dumps(body))
    r = subprocess.run(argv, capture_output=True, timeout=20)
    assert r.returncode == 0, r.stderr.decode()
    out = json.loads(r.stdout)
    return out["status"], strict_json(out["body"].encode())


@pytest.fixture
def nobody_sleep():
    """A process of uid 65534, started as that user."""
    p = subprocess.Popen(as_user(NOBODY) + ["sleep", "60"], stdin=subprocess.DEVNULL)

    def became_sleep():
        try:
            with open(f"/proc/{p.pid}/status") as f:
                st = dict(line.split(":", 1) for line in f.read().splitlines())
            return st["Name"].strip() == "sleep" and st["Uid"].split()[0] == str(NOBODY)
        except FileNotFoundError:
            return False
    wait_for(became_sleep, 5.0, what="setpriv to exec sleep as uid 65534")
    yield p
    p.kill()
    p.wait()


@pytest.fixture(autouse=True)
def need_root():
    if os.geteuid() != 0:
        needs("root", "to act as two different users")


def test_nonroot_cannot_register_roots_process(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    r = mlmond.ctl("register", h.pid, user=NOBODY)
    err = r.stderr.decode()
    assert r.returncode == 1, (r.returncode, err)
    assert r.stdout == b""
    assert "not yours" in err, err
    assert len(err.strip().splitlines()) == 1, err

    st, body = raw_as(NOBODY, mlmond, "POST", "/v1/runs", {"pid": h.pid})
    assert st == 403 and body["error"]["code"] == "forbidden", (st, body)
    st, body = mlmond.get("/v1/runs?state=all")
    assert body["runs"] == [], "a refused registration left a run behind"


def test_nonroot_registers_its_own_process(mlmond, nobody_sleep):
    r = mlmond.ctl("register", nobody_sleep.pid, "--name", "mine", user=NOBODY)
    assert r.returncode == 0, r.stderr.decode()
    run_id = int(r.stdout.decode().strip())
    run = mlmond.run(run_id)
    assert (run["pid"], run["uid"], run["name"], run["state"]) == (nobody_sleep.pid, NOBODY, "mine", "running")
    # and may unregister it
    r = mlmond.ctl("unregister", run_id, user=NOBODY)
    assert r.returncode == 0, r.stderr.decode()
    assert mlmond.run(run_id)["state"] == "unregistered"


def test_nonroot_cannot_unregister_roots_run(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid)
    st, body = raw_as(NOBODY, mlmond, "DELETE", f"/v1/runs/{run['id']}")
    assert st == 403 and body["error"]["code"] == "forbidden", (st, body)
    r = mlmond.ctl("unregister", run["id"], user=NOBODY)
    assert r.returncode == 1 and "not yours" in r.stderr.decode(), r
    assert mlmond.run(run["id"])["state"] == "running"


def test_root_may_unregister_anyones_run(mlmond, nobody_sleep):
    st, body = raw_as(NOBODY, mlmond, "POST", "/v1/runs", {"pid": nobody_sleep.pid})
    assert st == 201, body
    assert body["uid"] == NOBODY
    st, body = mlmond.delete(f"/v1/runs/{body['id']}")
    assert st == 200 and body["state"] == "unregistered", body


def test_nonroot_cannot_register_a_setuid_like_process(mlmond, helpers):
    """Same real uid is not enough: a process whose effective uid differs
    (what a setuid program looks like) is not the caller's to read."""
    p = subprocess.Popen(["setpriv", f"--ruid={NOBODY}", "--", "sleep", "60"], stdin=subprocess.DEVNULL)
    try:
        def ruid_set():
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    st = dict(line.split(":", 1) for line in f.read().splitlines())
                return st["Name"].strip() == "sleep" and st["Uid"].split()[:2] == [str(NOBODY), "0"]
            except FileNotFoundError:
                return False
        wait_for(ruid_set, 5.0, what="sleep with real uid 65534, effective 0")
        st, body = raw_as(NOBODY, mlmond, "POST", "/v1/runs", {"pid": p.pid})
        assert st == 403 and body["error"]["code"] == "forbidden", (st, body)
    finally:
        p.kill()
        p.wait()


def test_nonroot_cannot_register_a_process_that_runs_as_root(mlmond):
    """Its real uid is the caller's and it is dumpable, but it runs as root
    (effective, saved and file-system uid 0): a server that set only its
    real uid. Not the caller's to read either."""
    code = ("import ctypes, os, time; os.setresuid(65534, 0, 0); ctypes.CDLL(None).prctl(4, 1, 0, 0, 0); "
            "print('ready', flush=True); time.sleep(60)")
    p = subprocess.Popen(["/usr/bin/python3", "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ready"
        with open(f"/proc/{p.pid}/status") as f:
            st = dict(line.split(":", 1) for line in f.read().splitlines())
        assert st["Uid"].split() == [str(NOBODY), "0", "0", "0"], st["Uid"]
        st, body = raw_as(NOBODY, mlmond, "POST", "/v1/runs", {"pid": p.pid})
        assert st == 403 and body["error"]["code"] == "forbidden", (st, body)
        assert "uid" in body["error"]["message"] or "credentials" in body["error"]["message"], body
    finally:
        p.kill()
        p.wait()
        p.stdout.close()


def test_tcp_cannot_mutate(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid)
    for method, path, body in (("POST", "/v1/runs", {"pid": h.pid}), ("DELETE", f"/v1/runs/{run['id']}", None)):
        r = mlmond.request(method, path, body)
        assert r.status == 405, (method, r.status, r.body)
        assert r.json["error"]["code"] == "method_not_allowed"
        assert "GET" in r.headers.get("allow", ""), r.headers
    assert mlmond.run(run["id"])["state"] == "running"

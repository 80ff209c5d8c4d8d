# SPDX-License-Identifier: MIT
"""What a first user of mlmonctl runs into: messages that say what to do,
errors in the shape asked for, `run` of a mistyped command, and `top`
showing the op that costs the time and living through a daemon restart."""

import json
import os
import subprocess
import time

import pytest

from conftest import MLMONCTL, as_user, strict_json, wait_for

NOBODY = 65534


def ctl(*args, env=None):
    e = dict(os.environ)
    for k in ("MLMON_SOCKET", "MLMON_URL", "MLMON_RUN_ID", "MLMON_TOKEN_FILE"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([MLMONCTL] + [str(a) for a in args], stdin=subprocess.DEVNULL, capture_output=True,
                          env=e, timeout=30)


def one_line(r):
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1, r.stderr.decode()
    return lines[0]


def test_negative_pid_is_an_invalid_pid(mlmond):
    for args in (["register", "-5"], ["register", "--name", "x", "-5"]):
        r = mlmond.ctl(*args)
        err = r.stderr.decode()
        assert r.returncode == 2, (args, r.returncode, err)
        assert "invalid PID '-5'" in err and "invalid option" not in err, err
    # an option's value may still be a negative number
    r = mlmond.ctl("register", "--name", "-5", "-7")
    assert r.returncode == 2 and "invalid PID '-7'" in r.stderr.decode(), r.stderr.decode()
    # and an observation's negative time is named as such
    r = mlmond.ctl("observe", "--id", "1", "step", "-3")
    assert r.returncode == 2 and "invalid MS '-3'" in r.stderr.decode(), r.stderr.decode()


def test_no_daemon_hint_names_the_options(tmpdir_0755):
    sock = os.path.join(tmpdir_0755, "nothing.sock")
    r = ctl("--socket", sock, "list")
    line = one_line(r)
    assert r.returncode == 1, line
    assert "is mlmond running?" in line and "--socket" in line and "$MLMON_SOCKET" in line, line
    assert "--url" in line, line
    # the same through $MLMON_SOCKET
    r = ctl("list", env={"MLMON_SOCKET": sock})
    line = one_line(r)
    assert r.returncode == 1 and sock in line and "$MLMON_SOCKET" in line, line


def test_register_json_errors_are_json(mlmond, tmpdir_0755):
    # the daemon refuses: its code and message
    r = mlmond.ctl("--json", "register", 2**22 + 12345)
    assert r.returncode == 1, r
    err = strict_json(r.stdout)["error"]
    assert err["code"] == "not_found" and "process" in err["message"], err
    # a bad PID: a usage error, still JSON, still exit 2
    r = mlmond.ctl("register", "--json", "-5")
    assert r.returncode == 2, r
    err = strict_json(r.stdout)["error"]
    assert err["code"] == "bad_request" and "invalid PID '-5'" in err["message"], err
    # no daemon at all
    r = ctl("--json", "--socket", os.path.join(tmpdir_0755, "none.sock"), "register", os.getpid())
    assert r.returncode == 1, r
    err = strict_json(r.stdout)["error"]
    assert err["code"] == "unavailable" and "is mlmond running?" in err["message"], err


def test_list_json_carries_the_leak_verdict(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid)
    mlmond.wait_sample_after(run["id"], 0)
    r = mlmond.ctl("list", "--json")
    assert r.returncode == 0, r.stderr.decode()
    (item,) = strict_json(r.stdout)["runs"]
    leak = item["leak"]
    assert leak["suspected"] is False and leak["metric"] == "rss_anon_bytes" and leak["reason"], leak
    assert "history" not in leak, leak
    # the list's verdict is the run's
    full = mlmond.run(run["id"])["leak"]
    assert full["suspected"] == leak["suspected"] and full["metric"] == leak["metric"]
    # ended runs too
    mlmond.delete(f"/v1/runs/{run['id']}")
    r = mlmond.ctl("list", "--all", "--json")
    (item,) = strict_json(r.stdout)["runs"]
    assert item["leak"] is None or item["leak"]["suspected"] is False, item


def test_forbidden_says_what_to_do(mlmond):
    if os.geteuid() != 0:
        pytest.skip("needs root, to act as another user")
    # a process of nobody that made itself non-dumpable (what setuid
    # programs are): its owner may not monitor it
    code = "import ctypes,sys,time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); print('ready', flush=True); time.sleep(60)"
    p = subprocess.Popen(as_user(NOBODY) + ["/usr/bin/python3", "-c", code], stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ready"
        r = mlmond.ctl("register", p.pid, user=NOBODY)
        line = one_line(r)
        assert r.returncode == 1, line
        assert "dumpable" not in line.replace("PR_SET_DUMPABLE", ""), line
        assert "changed its credentials" in line and "root" in line, line
    finally:
        p.kill()
        p.wait()
    # root's process: run as its owner or as root
    r = mlmond.ctl("register", os.getpid(), user=NOBODY)
    line = one_line(r)
    assert r.returncode == 1 and "dumpable" not in line, line
    assert "uid 0" in line and "root" in line, line


@pytest.mark.parametrize("cmd,code,words", [
    ("/no/such/binary", 127, "command not found"),
    ("no-such-command-mlmon", 127, "command not found"),
    ("/etc/passwd", 126, "Permission denied"),
    ("/etc", 126, "Is a directory"),
])
def test_run_of_a_missing_command_registers_nothing(mlmond, cmd, code, words):
    r = mlmond.ctl("run", "--", cmd, "arg")
    line = one_line(r)
    assert r.returncode == code, (r.returncode, line)
    assert line == f"mlmonctl: {cmd}: {words}", line
    st, body = mlmond.get("/v1/runs?state=all")
    assert st == 200 and body["runs"] == [], body

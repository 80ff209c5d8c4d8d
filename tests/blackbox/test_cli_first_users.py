# SPDX-License-Identifier: MIT
"""What a first user of mlmonctl runs into: messages that say what to do,
errors in the shape asked for, `run` of a mistyped command, and `top`
showing the op that costs the time and living through a daemon restart."""

import json
import os
import socket
import subprocess
import time

import pytest

from conftest import MLMONCTL, as_user, needs, strict_json, wait_for

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
        needs("root", "to act as another user")
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


def run_line(out, run_id):
    """The table row of run_id in a top screen, as its columns."""
    for line in out.splitlines():
        cols = line.split()
        if cols and cols[0] == str(run_id):
            return cols
    pytest.fail(f"no row for run {run_id} in:\n{out}")


def test_top_shows_the_op_with_the_most_time_and_gauges(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid, name="train")
    # many short waits, few long steps: the steps are where the time goes
    obs = [{"op": "data_wait", "ms": 1} for _ in range(50)] + [{"op": "step", "ms": 100} for _ in range(5)]
    obs.append({"op": "loss", "gauge": 0.42})
    st, body = mlmond.post(f"/v1/runs/{run['id']}/observations", obs)
    assert st == 202, body
    wait_for(lambda: mlmond.get(f"/v1/runs/{run['id']}/samples?from=1m")[1]["gauges"], 5,
             what="the gauge to be stored")

    r = mlmond.ctl("top", "--iterations", "1")
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr.decode()
    row = run_line(out, run["id"])
    assert "step" in row and "data_wait" not in row, out
    assert "Gauges" in out and "loss 0.42" in out, out

    r = mlmond.ctl("top", "--iterations", "1", "--op", "data_wait")
    assert r.returncode == 0, r.stderr.decode()
    row = run_line(r.stdout.decode(), run["id"])
    assert "data_wait" in row and "step" not in row, r.stdout.decode()

    r = mlmond.ctl("top", "--json", "--iterations", "1")
    assert r.returncode == 0, r.stderr.decode()
    (doc,) = strict_json(r.stdout)["runs"]
    assert doc["gauges"] == {"loss": 0.42}, doc


def test_top_waits_for_a_restarted_daemon(mlmond):
    p = subprocess.Popen([MLMONCTL, "--socket", mlmond.socket_path, "top", "--interval", "200ms",
                          "--iterations", "40"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().startswith(b"mlmonctl top - "), "no first screen"
        mlmond.stop()
        time.sleep(1.0)  # several refreshes find no daemon
        mlmond.start()
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = err.decode()
    assert p.returncode == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert "went away" in lines[0] and lines[0].endswith("reconnecting..."), err
    assert "reconnected to mlmond" in lines[1], err
    # screens came after the restart too: the last one shows the new daemon
    assert out.decode().count("mlmonctl top - ") >= 2, out.decode()


def test_top_without_a_daemon_still_fails_at_once(tmpdir_0755):
    t0 = time.monotonic()
    r = ctl("--socket", os.path.join(tmpdir_0755, "none.sock"), "top", "--iterations", "20", "--interval", "1s")
    assert r.returncode == 1 and "is mlmond running?" in one_line(r), r.stderr.decode()
    assert time.monotonic() - t0 < 5, "top waited for a daemon that was never there"


def test_observe_refuses_to_mix_categories(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    rid = mlmond.register(h.pid)["id"]
    ok = mlmond.ctl("observe", "--id", rid, "--category", "training", "step", 100)
    assert ok.returncode == 0, ok.stderr.decode()
    # without a category: the op's own
    ok = mlmond.ctl("observe", "--id", rid, "step", 110)
    assert ok.returncode == 0, ok.stderr.decode()
    # another category: refused, and said so
    r = mlmond.ctl("observe", "--id", rid, "--category", "eval", "step", 5)
    line = one_line(r)
    assert r.returncode == 1, line
    assert "'step'" in line and "category 'training'" in line and "'eval'" in line, line
    # an op first seen without a category stays without one
    assert mlmond.ctl("observe", "--id", rid, "load", 3).returncode == 0
    r = mlmond.ctl("observe", "--id", rid, "--category", "io", "load", 4)
    assert r.returncode == 1 and "no category" in one_line(r), r.stderr.decode()
    # a batch mixing them is refused whole
    st, body = mlmond.post(f"/v1/runs/{rid}/observations",
                           [{"op": "fresh", "ms": 1, "category": "a"}, {"op": "fresh", "ms": 2, "category": "b"}])
    assert st == 409 and body["error"]["code"] == "conflict" and "observation 1" in body["error"]["message"], body

    # a StatsD line naming another category is dropped, counted as unmatched
    before = mlmond.get("/v1/health")[1]["statsd_unmatched"]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(f"step:7|ms|#run:{rid},category:eval".encode(), mlmond.statsd_path)
    wait_for(lambda: mlmond.get("/v1/health")[1]["statsd_unmatched"] == before + 1, 5,
             what="the StatsD line to be dropped")

    st, lat = mlmond.get(f"/v1/runs/{rid}/latency?window=1m")
    ops = lat["ops"]
    assert ops["step"]["category"] == "training" and ops["step"]["count"] == 2, ops
    assert ops["load"]["category"] is None and ops["load"]["count"] == 1, ops
    assert "fresh" not in ops, ops


def test_run_local_prints_the_address_it_serves(tmpdir_0755):
    """tools/run-local.sh names the --listen and --socket given to it, not its defaults."""
    from conftest import MLMOND, ROOT, free_port, UnixHTTPConnection
    build = os.path.dirname(os.path.dirname(os.path.abspath(MLMOND)))
    port = free_port()
    sock = os.path.join(tmpdir_0755, "local.sock")
    env = dict(os.environ, MLMOND_SKIP_SETUP="1", MLMOND_BUILD_DIR=build)
    p = subprocess.Popen([os.path.join(ROOT, "tools", "run-local.sh"), "--listen", f"127.0.0.1:{port}",
                          f"--socket={sock}", "--statsd-socket", os.path.join(tmpdir_0755, "statsd.sock"),
                          "--statsd-udp", "none", "--db", os.path.join(tmpdir_0755, "local.db")],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        hints = []
        while not hints or not hints[-1].startswith("run-local: and"):
            line = p.stdout.readline().decode()
            assert line, f"run-local.sh ended early ({p.wait()}), said {hints}"
            if line.startswith("run-local:"):
                hints.append(line.strip())
        assert hints[0] == f"run-local: try  curl -s http://127.0.0.1:{port}/v1/health", hints
        assert f"MLMON_SOCKET={sock} " in hints[1], hints
        # and that is where mlmond answers
        def health():
            try:
                c = UnixHTTPConnection(sock, timeout=2)
                c.request("GET", "/v1/health")
                return c.getresponse().status == 200
            except OSError:
                return False
        wait_for(health, 10, what="mlmond on the socket run-local.sh named")
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/v1/health")
        assert c.getresponse().status == 200
    finally:
        p.terminate()
        p.wait(timeout=10)

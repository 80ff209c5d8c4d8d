# SPDX-License-Identifier: MIT
"""`mlmonctl run` never stops a job from running: without a daemon the job
runs unmonitored (one warning, its own exit status) unless --require-daemon;
the job finds its run and the daemon in its environment; a report that
cannot be written is an error exit after the job ran."""

import os
import subprocess
import sys
import time

from conftest import MLMONCTL, strict_json
from test_auth import NOBODY, raw_as

WARNING = b"running the job unmonitored"


def ctl_at(socket, *args, env=None, timeout=30):
    e = dict(os.environ)
    e.pop("MLMON_SOCKET", None)
    e.pop("MLMON_URL", None)
    e.pop("MLMON_STATSD_SOCKET", None)
    e.pop("MLMON_RUN_ID", None)
    e.update(env or {})
    return subprocess.run([MLMONCTL, "--socket", socket] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                          capture_output=True, env=e, timeout=timeout)


def env_job(path, status=0):
    """A job that writes the MLMON_ part of its environment, as JSON, to
    path, then exits with status."""
    code = ("import json, os, sys; "
            f"json.dump({{k: v for k, v in os.environ.items() if k.startswith('MLMON_')}}, open({path!r}, 'w')); "
            f"sys.exit({status})")
    return [sys.executable, "-c", code]


def read_json(path):
    with open(path, "rb") as f:
        return strict_json(f.read())


def mlmonctl_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith(b"mlmonctl: ")]


def test_no_daemon_runs_the_job_unmonitored(tmpdir_0755):
    missing = os.path.join(tmpdir_0755, "nobody-here.sock")
    ran = os.path.join(tmpdir_0755, "ran")
    r = ctl_at(missing, "run", "--", "sh", "-c", f"echo yes > {ran}; exit 3")
    assert r.returncode == 3, r.stderr.decode()
    assert open(ran).read() == "yes\n"
    assert r.stderr.count(WARNING) == 1, r.stderr.decode()
    warning = [line for line in r.stderr.splitlines() if WARNING in line]
    assert warning[0].startswith(b"mlmonctl: cannot reach mlmond at " + missing.encode()), warning
    assert b"exited with status 3" in r.stderr, r.stderr.decode()


def test_no_daemon_environment_and_report(tmpdir_0755):
    missing = os.path.join(tmpdir_0755, "nobody-here.sock")
    env_path = os.path.join(tmpdir_0755, "env.json")
    report = os.path.join(tmpdir_0755, "report.json")
    # an MLMON_RUN_ID from an outer run is not passed on as this job's
    r = ctl_at(missing, "run", "--report", report, "--", *env_job(env_path, 5), env={"MLMON_RUN_ID": "99"})
    assert r.returncode == 5, r.stderr.decode()
    env = read_json(env_path)
    assert "MLMON_RUN_ID" not in env, env
    assert env["MLMON_SOCKET"] == missing, env
    assert env["MLMON_STATSD_SOCKET"] == os.path.join(tmpdir_0755, "statsd.sock"), env
    rep = read_json(report)
    assert rep["run"] is None and rep["exit_status"] == 5 and rep["signal"] is None, rep

    # a StatsD socket given by the caller is kept
    r = ctl_at(missing, "run", "--", *env_job(env_path), env={"MLMON_STATSD_SOCKET": "/elsewhere/s.sock"})
    assert r.returncode == 0, r.stderr.decode()
    assert read_json(env_path)["MLMON_STATSD_SOCKET"] == "/elsewhere/s.sock"


def test_require_daemon_refuses(tmpdir_0755):
    missing = os.path.join(tmpdir_0755, "nobody-here.sock")
    ran = os.path.join(tmpdir_0755, "ran")
    r = ctl_at(missing, "run", "--require-daemon", "--", "sh", "-c", f"touch {ran}; exit 3")
    assert r.returncode == 1, r.stderr.decode()
    assert not os.path.exists(ran), "the job ran"
    assert WARNING not in r.stderr and missing.encode() in r.stderr, r.stderr.decode()
    assert len(mlmonctl_lines(r.stderr)) == 1, r.stderr.decode()


def test_unwritable_report_without_daemon_is_an_error(tmpdir_0755):
    missing = os.path.join(tmpdir_0755, "nobody-here.sock")
    ran = os.path.join(tmpdir_0755, "ran")
    report = os.path.join(tmpdir_0755, "no-such-dir", "report.json")
    r = ctl_at(missing, "run", "--report", report, "--", "sh", "-c", f"touch {ran}")
    assert r.returncode == 1, r.stderr.decode()
    assert os.path.exists(ran)
    assert b"cannot write report to " + report.encode() in r.stderr, r.stderr.decode()


def test_job_knows_its_run(mlmond, tmpdir_0755):
    env_path = os.path.join(tmpdir_0755, "env.json")
    report = os.path.join(tmpdir_0755, "report.json")
    r = mlmond.ctl("run", "--name", "knows", "--report", report, "--", *env_job(env_path, 2),
                   env={"MLMON_RUN_ID": "99", "MLMON_STATSD_SOCKET": ""})
    assert r.returncode == 2, r.stderr.decode()
    assert WARNING not in r.stderr, r.stderr.decode()
    env = read_json(env_path)
    run_id = read_json(report)["run"]["id"]
    assert env["MLMON_RUN_ID"] == str(run_id), (env, run_id)
    assert f"mlmonctl: run {run_id} (knows) ".encode() in r.stderr, r.stderr.decode()
    assert mlmond.run(run_id)["name"] == "knows"
    assert env["MLMON_SOCKET"] == mlmond.socket_path, env
    assert env["MLMON_STATSD_SOCKET"] == mlmond.statsd_path, env

    r = mlmond.ctl("run", "--require-daemon", "--", "sh", "-c", "exit 7")
    assert r.returncode == 7 and WARNING not in r.stderr, r.stderr.decode()


def test_statsd_from_the_job_reaches_its_run(mlmond, tmpdir_0755):
    report = os.path.join(tmpdir_0755, "report.json")
    code = ("import os, socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); "
            "s.sendto(b'envop:4|ms|#run:' + os.environ['MLMON_RUN_ID'].encode(), os.environ['MLMON_STATSD_SOCKET'])")
    r = mlmond.ctl("run", "--report", report, "--", sys.executable, "-c", code)
    assert r.returncode == 0, r.stderr.decode()
    run_id = read_json(report)["run"]["id"]
    deadline = time.monotonic() + 5
    while True:
        st, lat = mlmond.uget(f"/v1/runs/{run_id}/latency")
        if st == 200 and "envop" in lat.get("ops", {}):
            break
        assert time.monotonic() < deadline, (st, lat)
        time.sleep(0.1)
    assert lat["ops"]["envop"]["count"] == 1, lat


def test_unwritable_report_is_an_error_after_the_job(mlmond, tmpdir_0755):
    ran = os.path.join(tmpdir_0755, "ran")
    report = os.path.join(tmpdir_0755, "no-such-dir", "report.json")
    r = mlmond.ctl("run", "--report", report, "--", "sh", "-c", f"touch {ran}")
    assert r.returncode == 1, r.stderr.decode()
    assert os.path.exists(ran)
    err = r.stderr.decode()
    assert "exited with status 0" in err and "cannot write report to" in err, err
    assert err.index("exited with status 0") < err.index("cannot write report to"), err
    # the job's own failure is the exit status
    r = mlmond.ctl("run", "--report", report, "--", "sh", "-c", "exit 6")
    assert r.returncode == 6, r.stderr.decode()


def test_daemon_gone_mid_run_keeps_the_status(mlmond, tmpdir_0755):
    started = os.path.join(tmpdir_0755, "started")
    go = os.path.join(tmpdir_0755, "go")
    argv = [MLMONCTL, "--socket", mlmond.socket_path, "run", "--", "sh", "-c",
            f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; exit 5"]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(started):
            assert time.monotonic() < deadline and p.poll() is None, "the job did not start"
            time.sleep(0.02)
        assert mlmond.stop() == 0
        open(go, "w").close()
        _, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 5, stderr.decode()
    lines = mlmonctl_lines(stderr)
    assert len(lines) == 2 and b"exited with status 5" in lines[1], stderr.decode()
    assert lines[0].startswith(b"mlmonctl: lost mlmond at " + mlmond.socket_path.encode()), stderr.decode()


def test_help_lists_require_daemon():
    r = subprocess.run([MLMONCTL, "--help"], capture_output=True, timeout=10)
    assert r.returncode == 0 and b"--require-daemon" in r.stdout, r


def test_mark_without_id_marks_the_jobs_run(mlmond, tmpdir_0755):
    report = os.path.join(tmpdir_0755, "report.json")
    r = mlmond.ctl("run", "--report", report, "--", "sh", "-c", f"{MLMONCTL} mark warmup-done")
    assert r.returncode == 0, r.stderr.decode()
    run_id = read_json(report)["run"]["id"]
    st, marks = mlmond.uget(f"/v1/runs/{run_id}/marks")
    assert st == 200 and [m["label"] for m in marks["marks"]] == ["warmup-done"], marks

    # no ID and no MLMON_RUN_ID: a usage error; a bad MLMON_RUN_ID is named
    r = mlmond.ctl("mark", "warmup-done")
    assert r.returncode == 2 and b"MLMON_RUN_ID" in r.stderr, r.stderr.decode()
    r = mlmond.ctl("mark", "warmup-done", env={"MLMON_RUN_ID": "abc"})
    assert r.returncode == 2 and b"MLMON_RUN_ID" in r.stderr, r.stderr.decode()
    # an ID given wins over the environment (this run has ended: refused, by its ID)
    r = mlmond.ctl("mark", run_id, "second", env={"MLMON_RUN_ID": "987654321"})
    assert r.returncode == 1 and f"run {run_id} ".encode() in r.stderr and b"987654321" not in r.stderr, r


def test_refused_registration_runs_the_job_unmonitored(mlmond, tmpdir_0755):
    ran = os.path.join(tmpdir_0755, "ran")
    r = mlmond.ctl("run", "--interval", "50ms", "--", "sh", "-c", f"touch {ran}; exit 4")
    assert r.returncode == 4 and os.path.exists(ran), r.stderr.decode()
    assert r.stderr.count(WARNING) == 1 and b"did not register the job" in r.stderr and b"interval" in r.stderr, r
    os.unlink(ran)
    r = mlmond.ctl("run", "--require-daemon", "--interval", "50ms", "--", "sh", "-c", f"touch {ran}; exit 4")
    assert r.returncode == 1 and not os.path.exists(ran) and b"interval" in r.stderr, r.stderr.decode()


def test_how_the_job_ended(mlmond, helpers):
    """A job's run keeps how its process ended: mlmond reads it from the
    zombie (mlmonctl run reaps the job only once mlmond has seen it end),
    and mlmonctl run hands over what its wait(2) said too."""
    for cmd, want in ((["sh", "-c", "exit 3"], (3, None)), (["sh", "-c", "kill -9 $$"], (None, 9)),
                      (["sh", "-c", "kill -TERM $$"], (None, 15))):
        r = mlmond.ctl("run", "--json", "--", *cmd)
        run = strict_json(r.stderr)["run"]
        assert (run["exit_code"], run["exit_signal"]) == want, (cmd, run)
        assert run["proc_state"] is None and run["state"] == "exited"
        shown = mlmond.ctl("show", run["id"]).stdout.decode()
        assert ("exited with status 3" if want[0] else f"killed by SIG{'KILL' if want[1] == 9 else 'TERM'}") in shown
        line = [x for x in mlmond.ctl("list", "--all").stdout.decode().splitlines() if x.split()[0] == str(run["id"])]
        assert line and (("exit 3" in line[0]) if want[0] else ("SIG" in line[0])), line
    # what a parent hands over (POST /v1/runs/ID/exit) counts where mlmond saw
    # nothing: a run unregistered before its process ended
    h = helpers("busy", "0", "0")
    h.expect("ready")
    run = mlmond.register(h.pid)
    path = f"/v1/runs/{run['id']}/exit"
    assert mlmond.post(path, {"exit_code": 1})[0] == 409  # its process is alive
    assert mlmond.delete(f"/v1/runs/{run['id']}")[0] == 200
    h.kill()
    for body in ({"exit_code": 1, "exit_signal": 9}, {"exit_code": 256}, {"exit_signal": 0}, {"exit_code": "1"},
                 {"exit_code": 1, "why": "x"}):
        assert mlmond.post(path, body)[0] == 400, body
    # another user's word on root's run does not count
    st, body = raw_as(NOBODY, mlmond, "POST", path, {"exit_code": 0})
    assert st == 403 and body["error"]["code"] == "forbidden", body
    assert (mlmond.run(run["id"])["exit_code"], mlmond.run(run["id"])["exit_signal"]) == (None, None)
    assert mlmond.post(path, {"exit_signal": 9}) == (200, {"run": run["id"]})
    got = mlmond.run(run["id"])
    assert (got["exit_code"], got["exit_signal"]) == (None, 9), got
    # the first account stands
    assert mlmond.post(path, {"exit_code": 0})[0] == 200
    got = mlmond.run(run["id"])
    assert (got["exit_code"], got["exit_signal"]) == (None, 9), got
    # over TCP: read-only
    assert mlmond.request("POST", path, {"exit_code": 0}).status == 405

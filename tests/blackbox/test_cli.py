# SPDX-License-Identifier: MIT
"""mlmonctl against a real daemon: exit codes, `run` (the job's status, the
report), and the register/list/show/unregister round trip."""

import json
import os
import resource
import subprocess

from conftest import MLMONCTL, helper, strict_json


def report_of(path):
    with open(path, "rb") as f:
        return strict_json(f.read())


def test_run_keeps_exit_status(mlmond, tmpdir_0755):
    path = os.path.join(tmpdir_0755, "report.json")
    r = mlmond.ctl("run", "--name", "three", "--report", path, "--", "sh", "-c", "exit 3")
    assert r.returncode == 3, r.stderr.decode()
    rep = report_of(path)
    run = rep["run"]
    assert rep["exit_status"] == 3 and rep["signal"] is None, rep
    assert rep["command"] == ["sh", "-c", "exit 3"]
    assert run["name"] == "three" and run["state"] == "exited" and run["ended_ts"] is not None, run
    # the daemon agrees, and the report's run is the daemon's run
    live = mlmond.run(run["id"])
    assert live["state"] == "exited" and live["pid"] == run["pid"] and live["ended_ts"] == run["ended_ts"]
    assert "summary" in run and run["summary"]["samples"] >= 1


def test_run_killed_by_signal_exits_128_plus(mlmond, tmpdir_0755):
    path = os.path.join(tmpdir_0755, "report.json")
    r = mlmond.ctl("run", "--report", path, "--", "sh", "-c", "kill -TERM $$")
    assert r.returncode == 143, r.stderr.decode()
    rep = report_of(path)
    assert rep["exit_status"] == 143 and rep["signal"] == 15, rep
    assert rep["run"]["state"] == "exited"
    assert mlmond.run(rep["run"]["id"])["state"] == "exited"


def test_run_exit_zero_and_not_found(mlmond):
    r = mlmond.ctl("run", "--", "true")
    assert r.returncode == 0, r.stderr.decode()
    r = mlmond.ctl("run", "--", "/nonexistent/command")
    assert r.returncode == 127, r.stderr.decode()


def test_run_measures_the_whole_job(mlmond, tmpdir_0755):
    """The job is registered before it runs a single instruction: its CPU
    time from the daemon is what the kernel charged it, less at most what it
    burned after the last sample."""
    path = os.path.join(tmpdir_0755, "report.json")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = mlmond.ctl("run", "--interval", "100ms", "--report", path, "--", helper("busy"), "100", "1")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 0, r.stderr.decode()
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)  # job + mlmonctl itself
    run = report_of(path)["run"]
    got = run["summary"]["cpu_time_s"]
    assert run["interval_ms"] == 100
    assert used > 0.2, f"the 1 s burner got only {used:.2f} s of CPU"
    assert used - 0.3 <= got <= used + 0.02, f"mlmond says {got:.3f} s of CPU, the kernel charged {used:.3f} s"
    assert run["summary"]["samples"] >= 5


def test_run_report_counts_a_short_job(mlmond, tmpdir_0755):
    """A job shorter than the sampling interval: the report must still say
    what it used (the run's end is a reading too), not 0 s of CPU."""
    path = os.path.join(tmpdir_0755, "report.json")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = mlmond.ctl("run", "--interval", "1s", "--report", path, "--", helper("busy"), "100", "0.6")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 0, r.stderr.decode()
    used = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    summary = report_of(path)["run"]["summary"]
    assert used > 0.2, f"the 0.6 s burner got only {used:.2f} s of CPU"
    assert abs(summary["cpu_time_s"] - used) <= 0.1, (
        f"the report says {summary['cpu_time_s']} s of CPU for a job that used {used:.3f} s "
        f"({summary['samples']} samples)")


def test_register_list_show_unregister(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    r = mlmond.ctl("register", h.pid, "--name", "cli", "--interval", "500ms", "--tag", "a=1", "--tag", "b=x=y",
                   "--no-discover")  # exactly the tags given, wherever the suite runs
    assert r.returncode == 0, r.stderr.decode()
    run_id = int(r.stdout.decode())
    run = mlmond.run(run_id)
    assert (run["pid"], run["name"], run["interval_ms"], run["tags"]) == (h.pid, "cli", 500, {"a": "1", "b": "x=y"})

    r = mlmond.ctl("list")
    assert r.returncode == 0 and str(h.pid) in r.stdout.decode() and "cli" in r.stdout.decode(), r
    listed = strict_json(mlmond.ctl("--json", "list").stdout)
    assert [x["id"] for x in listed["runs"]] == [run_id]
    shown = strict_json(mlmond.ctl("show", run_id, "--json").stdout)
    assert shown["id"] == run_id and "summary" in shown
    r = mlmond.ctl("show", run_id)
    assert r.returncode == 0 and str(h.pid) in r.stdout.decode()

    r = mlmond.ctl("unregister", run_id)
    assert r.returncode == 0, r.stderr.decode()
    assert mlmond.run(run_id)["state"] == "unregistered"
    r = mlmond.ctl("unregister", run_id)
    assert r.returncode == 1 and r.stderr.strip(), r
    assert "No running runs" in mlmond.ctl("list").stdout.decode() or \
        str(h.pid) not in mlmond.ctl("list").stdout.decode()
    all_runs = mlmond.ctl("list", "--all")
    assert all_runs.returncode == 0 and str(h.pid) in all_runs.stdout.decode()


def test_refusals_exit_1_with_the_daemons_message(mlmond, helpers):
    r = mlmond.ctl("show", "987654321")
    assert r.returncode == 1 and b"987654321" in r.stderr and r.stdout == b"", r
    r = mlmond.ctl("register", "1", "--interval", "50ms")
    assert r.returncode == 1 and b"interval" in r.stderr, r
    h = helpers("grow", 0)
    h.expect("ready")
    assert mlmond.ctl("register", h.pid).returncode == 0
    r = mlmond.ctl("register", h.pid)
    assert r.returncode == 1 and b"already registered" in r.stderr, r


def test_usage_errors_exit_2(mlmond):
    for args in ([], ["frobnicate"], ["register"], ["register", "abc"], ["register", "0"], ["register", "1", "2"],
                 ["register", "1", "--bogus"], ["register", "1", "--interval", "soon"], ["register", "1", "--tag", "novalue"],
                 ["show"], ["unregister", "-5"], ["run"], ["run", "--report"], ["list", "extra"]):
        r = mlmond.ctl(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert r.stderr.strip(), args


def test_socket_from_environment_and_daemon_down(mlmond, tmpdir_0755):
    r = subprocess.run([MLMONCTL, "list", "--json"], capture_output=True, timeout=10,
                       env=dict(os.environ, MLMON_SOCKET=mlmond.socket_path))
    assert r.returncode == 0 and "runs" in json.loads(r.stdout), r
    missing = os.path.join(tmpdir_0755, "nobody-here.sock")
    r = subprocess.run([MLMONCTL, "--socket", missing, "list"], capture_output=True, timeout=10)
    assert r.returncode == 1 and missing.encode() in r.stderr, r
    # the flag wins over the environment
    r = subprocess.run([MLMONCTL, "--socket", mlmond.socket_path, "list"], capture_output=True, timeout=10,
                       env=dict(os.environ, MLMON_SOCKET=missing))
    assert r.returncode == 0, r

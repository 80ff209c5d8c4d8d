# SPDX-License-Identifier: MIT
"""Jobs made of short processes, and jobs shorter than the interval, at the
daemon's default interval (1 s):

- the CPU of children that start and end between two samples is counted
  (through their parents' cutime/cstime): a shell loop of short Python
  processes and a gzip pipeline read within 5% of getrusage(RUSAGE_CHILDREN),
  in the samples and in the summary;
- a job under `mlmonctl run` that reaches 200 MiB just before it exits reads
  its peak from wait4()'s ru_maxrss, which mlmonctl hands over."""

import json
import os
import resource
import subprocess
import sys

import pytest

from conftest import MiB, strict_json



def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_job(daemon, tmpdir, argv, *opts):
    """Runs argv under `mlmonctl run`; returns (the run's JSON, the CPU
    seconds that the test's reaped children used meanwhile: mlmonctl and
    everything it waited for)."""
    report = os.path.join(tmpdir, "report.json")
    before = children_cpu_s()
    r = daemon.ctl("run", *opts, "--report", report, "--", *argv, timeout=120)
    cpu = children_cpu_s() - before
    assert r.returncode == 0, r.stderr.decode()
    with open(report, "rb") as f:
        run_id = strict_json(f.read())["run"]["id"]
    return daemon.run(run_id), cpu


@pytest.fixture
def default_daemon(make_mlmond):
    return make_mlmond(interval=None)


def sampled_cpu_s(daemon, run_id):
    """The CPU time of the run's last sample: what sampling counted, before
    mlmonctl handed over the job's rusage."""
    return daemon.samples(run_id)[-1]["cpu_time_s"]


def test_loop_of_short_processes(default_daemon, tmpdir_0755):
    # 20 processes of ~0.1-0.2 s each: most begin and end between two samples
    loop = f'for i in $(seq 20); do {sys.executable} -c "sum(range(10**7))"; done'
    run, truth = run_job(default_daemon, tmpdir_0755, ["sh", "-c", loop], "--children")
    cpu = run["summary"]["cpu_time_s"]
    assert truth > 1.0, truth
    assert abs(cpu - truth) <= 0.05 * truth, (cpu, truth, run["summary"])
    sampled = sampled_cpu_s(default_daemon, run["id"])
    assert abs(sampled - truth) <= 0.05 * truth, (sampled, truth)
    s = run["summary"]
    # user and system come from clock ticks (1/100 s), rounded per process
    assert abs(s["user_time_s"] + s["system_time_s"] - cpu) <= 0.02 * cpu + 0.03, s


def test_pipeline(default_daemon, tmpdir_0755):
    pipe = "head -c 50M /dev/urandom | gzip -1 >/dev/null"
    run, truth = run_job(default_daemon, tmpdir_0755, ["sh", "-c", pipe], "--children")
    cpu = run["summary"]["cpu_time_s"]
    assert truth > 0.5, truth
    assert abs(cpu - truth) <= 0.05 * truth, (cpu, truth, run["summary"])
    sampled = sampled_cpu_s(default_daemon, run["id"])
    assert abs(sampled - truth) <= 0.05 * truth, (sampled, truth)


# 200 MiB touched in the last ~60 ms before the exit: a sample rarely sees it
# (nor the VmHWM it leaves, which dies with the process), wait4() always does
HOLD = ("import time; time.sleep(0.5); b = bytearray(200 << 20); "
        "[b.__setitem__(i, 1) for i in range(0, len(b), 4096)]")


@pytest.mark.parametrize("children", [False, True], ids=["alone", "children"])
def test_short_job_peak(default_daemon, tmpdir_0755, children):
    opts = ["--children"] if children else []
    run, _ = run_job(default_daemon, tmpdir_0755, [sys.executable, "-c", HOLD], *opts)
    s = run["summary"]
    assert s["peak_rss_bytes"] >= 190 * MiB, s
    assert s["wall_time_s"] < 5, s
    # the job's CPU time is the one wait4() gave: never 0 for a job that ran
    assert s["cpu_time_s"] is not None and s["cpu_time_s"] > 0, s

    show = default_daemon.ctl("show", run["id"])
    assert show.returncode == 0, show.stderr
    assert b"peak RSS:" in show.stdout, show.stdout
    peak = [line for line in show.stdout.decode().splitlines() if "peak RSS:" in line][-1]
    value, unit = peak.split()[-2:]
    assert unit == "MiB" and float(value) >= 190, peak


def test_short_job_compare(default_daemon, tmpdir_0755):
    """The report saved by `run --report` carries the exit's figures, so
    `compare` sees the job's real peak."""
    report = os.path.join(tmpdir_0755, "short.json")
    r = default_daemon.ctl("run", "--report", report, "--", sys.executable, "-c", HOLD, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(report) as f:
        rep = json.load(f)
    assert rep["run"]["summary"]["peak_rss_bytes"] >= 190 * MiB, rep["run"]["summary"]


def test_exit_report_is_checked(mlmond):
    """POST /v1/runs/{id}/exit takes only what wait4() can say, and only
    once the process is gone."""
    p = subprocess.Popen(["sleep", "30"])
    try:
        run = mlmond.register(p.pid)
        path = f"/v1/runs/{run['id']}/exit"
        good = {"rusage": {"max_rss_bytes": 1 << 20, "user_time_s": 0.5, "system_time_s": 0.1}}
        st, body = mlmond.post(path, good)
        assert st == 409 and body["error"]["code"] == "conflict", (st, body)
        for bad in [{"rusage": {"max_rss_bytes": -1, "user_time_s": 0, "system_time_s": 0}},
                    {"rusage": {"max_rss_bytes": 1e300, "user_time_s": 0, "system_time_s": 0}},
                    {"rusage": {"max_rss_bytes": 1, "user_time_s": "1", "system_time_s": 0}},
                    {"rusage": {"max_rss_bytes": 1, "user_time_s": 0}},
                    {"rusage": {"max_rss_bytes": 1, "user_time_s": 0, "system_time_s": 0, "x": 1}},
                    {"rusage": [1]}, {"exit": 1}]:
            st, body = mlmond.post(path, bad)
            assert st == 400 and body["error"]["code"] == "bad_request", (bad, st, body)
        st, body = mlmond.post("/v1/runs/999999/exit", good)
        assert st == 404, (st, body)
        st, body = mlmond.post(f"/v1/runs/{run['id']}/samples", {})
        assert st == 201 and body["run"] == run["id"], (st, body)

        p.kill()
        p.wait()
        st, body = mlmond.post(path, good)
        assert st == 200, (st, body)
        got = mlmond.run(run["id"])
        assert got["state"] == "exited", got
        assert got["summary"]["peak_rss_bytes"] >= 1 << 20, got["summary"]
        # a run of the process alone keeps its own sampled CPU
        assert got["summary"]["cpu_time_s"] < 0.5, got["summary"]
        st, body = mlmond.post(f"/v1/runs/{run['id']}/samples", {})
        assert st == 409, (st, body)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()

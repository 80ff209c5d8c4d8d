# SPDX-License-Identifier: MIT
"""Job and rank identity: tags discovered at registration from the process's
environment (torchrun, Slurm, MPI variables), explicit tags winning over
them, --no-discover and "discover": false, a process with an empty
environment, the tag limits, the tags as /metrics labels (checked by
promtool), and `mlmonctl run --ranks` with a launcher that starts ranks."""

import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import wait_for

BASE_ENV = {"PATH": "/usr/bin:/bin"}
TORCHRUN = {"TORCHELASTIC_RUN_ID": "exp-42", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}
SLURM = {"SLURM_JOB_ID": "12345", "SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NTASKS": "4"}
ENV_KEYS = ("job_id", "rank", "local_rank", "world_size")


@pytest.fixture
def spawn():
    procs = []

    def start(env, argv=("sleep", "60")):
        p = subprocess.Popen(list(argv), env=env, stdin=subprocess.DEVNULL)
        procs.append(p)
        # Popen returns once exec has begun; the kernel sets the new
        # environment's place a moment later (until then /proc/PID/environ
        # reads empty): wait for it, as a process registered later would be
        if env:
            wait_for(lambda: read_environ(p.pid), 5, interval=0.01, what="the spawned process's environment")
        return p
    yield start
    for p in procs:
        p.kill()
        p.wait()


def read_environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read()


def env_tags(tags):
    return {k: v for k, v in tags.items() if k in ENV_KEYS}


def metrics_labels(d, run_id):
    """The labels of the run's mlmond_run_info series, as a dict."""
    r = d.request("GET", "/metrics")
    assert r.status == 200
    body = r.body.decode()
    line = next(x for x in body.splitlines() if x.startswith("mlmond_run_info{") and f'run="{run_id}"' in x)
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line)), body


def test_slurm_and_torchrun_variables_become_tags(mlmond, spawn):
    slurm = spawn({**BASE_ENV, **SLURM})
    run = mlmond.register(slurm.pid)
    assert env_tags(run["tags"]) == {"job_id": "12345", "rank": "2", "local_rank": "0", "world_size": "4"}
    assert env_tags(mlmond.run(run["id"])["tags"]) == env_tags(run["tags"])

    # torchrun under Slurm: torchrun's variables win, whatever their order
    both = spawn({**BASE_ENV, **SLURM, **TORCHRUN})
    run2 = mlmond.register(both.pid)
    assert env_tags(run2["tags"]) == {"job_id": "exp-42", "rank": "3", "local_rank": "1", "world_size": "8"}

    labels, body = metrics_labels(mlmond, run2["id"])
    assert labels["tag_job_id"] == "exp-42" and labels["tag_rank"] == "3"
    assert labels["tag_local_rank"] == "1" and labels["tag_world_size"] == "8"
    # every per-run series carries them; none is added
    for line in body.splitlines():
        if line.startswith("mlmond_run_") and f'run="{run2["id"]}"' in line:
            assert 'tag_job_id="exp-42"' in line, line


def test_explicit_tags_win_and_discovery_can_be_turned_off(mlmond, spawn):
    p = spawn({**BASE_ENV, **TORCHRUN})
    run = mlmond.register(p.pid, tags={"rank": "7", "team": "vision"})
    assert run["tags"]["rank"] == "7" and run["tags"]["team"] == "vision"
    assert run["tags"]["job_id"] == "exp-42" and run["tags"]["world_size"] == "8"

    q = spawn({**BASE_ENV, **TORCHRUN})
    run = mlmond.register(q.pid, tags={"team": "vision"}, discover=False)
    assert run["tags"] == {"team": "vision"}

    r = spawn({**BASE_ENV, **SLURM})
    out = mlmond.ctl("register", r.pid, "--no-discover", "--tag", "a=b")
    assert out.returncode == 0, out.stderr
    st, runs = mlmond.get(f"/v1/runs?pid={r.pid}")
    assert st == 200 and runs["runs"][0]["tags"] == {"a": "b"}, (out.stdout, runs)

    st, body = mlmond.post("/v1/runs", {"pid": r.pid, "discover": "no"})
    assert st == 400 and "discover" in body["error"]["message"]


def test_empty_environment_gets_no_discovered_tags(mlmond, spawn):
    p = spawn({})  # env -i: /proc/PID/environ is empty
    run = mlmond.register(p.pid)
    assert env_tags(run["tags"]) == {}
    assert env_tags(mlmond.run(run["id"])["tags"]) == {}
    # a process given MPI and LSF variables gets them
    q = spawn({**BASE_ENV, "PMI_RANK": "5", "PMI_SIZE": "6", "LSB_JOBID": "77"})
    assert env_tags(mlmond.register(q.pid)["tags"]) == {"job_id": "77", "rank": "5", "world_size": "6"}


def test_tag_limits_and_labels(mlmond, spawn):
    p = spawn(dict(BASE_ENV))
    too_many = {f"k{i:02d}": "v" for i in range(17)}
    st, body = mlmond.post("/v1/runs", {"pid": p.pid, "tags": too_many})
    assert st == 400 and "at most 16" in body["error"]["message"]
    st, body = mlmond.post("/v1/runs", {"pid": p.pid, "tags": {"k": "v" * 129}})
    assert st == 400 and "128" in body["error"]["message"]

    # 16, sanitised keys, a collision (the first key in sorted order keeps
    # the label), and a value that needs escaping (a newline is refused:
    # mlmond takes no control character in what users name)
    tags = {f"k{i:02d}": "v" for i in range(13)}
    tags.update({"a-b": 'say "hi"\\n\\', "a.b": "loses", "x": "v" * 128})
    run = mlmond.register(p.pid, tags=tags)
    assert run["tags"] == tags  # 16 given: nothing discovered on top
    labels, body = metrics_labels(mlmond, run["id"])
    assert labels["tag_a_b"] == 'say \\"hi\\"\\\\n\\\\'
    assert labels["tag_x"] == "v" * 128 and labels["tag_k12"] == "v"
    assert sum(1 for k in labels if k.startswith("tag_")) == 15
    if shutil.which("promtool"):
        c = subprocess.run(["promtool", "check", "metrics"], input=body.encode(), capture_output=True, timeout=30)
        assert c.returncode == 0, c.stdout.decode() + c.stderr.decode()


LAUNCHER = textwrap.dedent("""
    import os, subprocess, sys, time
    n = int(sys.argv[1])
    kids = []
    for r in range(n):
        env = dict(os.environ, TORCHELASTIC_RUN_ID="fake-job", RANK=str(r), LOCAL_RANK=str(r),
                   WORLD_SIZE=str(n))
        kids.append(subprocess.Popen(["sleep", "1.5"], env=env))
    sys.exit(max(k.wait() for k in kids))
""")


def test_run_ranks_registers_each_rank(mlmond, tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    out = mlmond.ctl("run", "--ranks", "--name", "launch", "--", sys.executable, str(script), "3")
    assert out.returncode == 0, out.stderr
    line = [x for x in out.stderr.decode().splitlines() if x.startswith("mlmonctl: ranks:")]
    assert line, out.stderr
    ids = [int(i) for i in re.findall(r"run (\d+) \(rank", line[0])]
    assert len(ids) == 3, line
    ranks = {}
    for i in ids:
        run = mlmond.run(i)
        assert run["tags"]["job_id"] == "fake-job" and run["tags"]["world_size"] == "3"
        ranks[run["tags"]["rank"]] = run
    assert sorted(ranks) == ["0", "1", "2"]
    assert all(r["comm"] == "sleep" for r in ranks.values())
    # the launcher is a run of its own, as without --ranks
    st, runs = mlmond.get("/v1/runs?state=all&name=launch")
    assert st == 200 and len(runs["runs"]) == 1 and runs["runs"][0]["id"] not in ids


def test_run_without_ranks_registers_only_the_launcher(mlmond, tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    out = mlmond.ctl("run", "--", sys.executable, str(script), "2")
    assert out.returncode == 0, out.stderr
    assert b"ranks:" not in out.stderr
    st, runs = mlmond.get("/v1/runs?state=all")
    assert st == 200 and len(runs["runs"]) == 1

# SPDX-License-Identifier: MIT
"""mlmon.attach() in the ranks of `mlmonctl run --ranks`: a real torchrun job
(three ranks on gloo, each timing its steps after `run = mlmon.attach()`)
and a plain launcher whose ranks attach before mlmonctl has seen them. Each
rank's timings land on the rank's own run, all of them, the launcher's run
gets none, and `mlmonctl report --job` shows the op. A process's own run
wins over an inherited $MLMON_RUN_ID that names another process's run."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import free_port
from test_python import PYTHONPATH, run_script

TORCH_PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch where installed

RANK_JOB = textwrap.dedent("""
    import json, os, time
    t0 = time.monotonic()
    import mlmon
    run = mlmon.attach(name="train")          # the README's first line
    attach_s = time.monotonic() - t0
    import torch, torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 100
    for _ in range(steps):
        with mlmon.timer("step"):
            loss = model(torch.randn(8, 16)).sum()
            opt.zero_grad()
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
            opt.step()
    mlmon.flush()
    with open(os.path.join(os.environ["OUT_DIR"], os.environ["RANK"] + ".json"), "w") as f:
        json.dump({"pid": os.getpid(), "run": run.id, "sent": steps, "dropped": mlmon.dropped(),
                   "attach_s": attach_s, "job_id": os.environ.get("TORCHELASTIC_RUN_ID"),
                   "run_id_env": os.environ.get("MLMON_RUN_ID")}, f)
    dist.destroy_process_group()
""")


def ranks_line(stderr):
    line = [x for x in stderr.splitlines() if x.startswith("mlmonctl: ranks:")]
    assert line, stderr
    return {int(rank): int(run) for run, rank in re.findall(r"run (\d+) \(rank (\d+)\)", line[0])}


def op_counts(d, run_id):
    st, lat = d.get(f"/v1/runs/{run_id}/latency?window=5m")
    assert st == 200, lat
    return {op: o["count"] for op, o in lat["ops"].items()}


def launcher_run(d, name):
    st, runs = d.get(f"/v1/runs?state=all&name={name}")
    assert st == 200 and len(runs["runs"]) == 1, runs
    return runs["runs"][0]


def check_ranks(d, stderr, out_dir, n, launcher, op, sent_key="sent"):
    """Each rank's timings on its own run, and all of them; none on the
    launcher's run."""
    runs = ranks_line(stderr)
    assert sorted(runs) == list(range(n)), stderr
    for rank, run_id in runs.items():
        with open(os.path.join(out_dir, f"{rank}.json")) as f:
            got = json.load(f)
        run = d.run(run_id)
        assert got["run"] == run_id and run["pid"] == got["pid"], (rank, got, run)
        assert got["dropped"] == 0
        assert op_counts(d, run_id) == {op: got[sent_key]}, (rank, run_id)
        assert got["run_id_env"] == str(run_id)  # what programs it starts inherit
    assert op_counts(d, launcher["id"]) == {}
    return runs


def test_a_torchrun_job_times_each_rank_on_its_own_run(mlmond, tmp_path):
    if subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode != 0:
        pytest.skip("no torch for " + TORCH_PYTHON)
    script = tmp_path / "train.py"
    script.write_text(RANK_JOB)
    # Debian's torchrun 1.13 on Python 3.11 dies at start unless it redirects
    # and tees stderr; a static rendezvous on a free port, with a job id. A
    # port taken between free_port() and torchrun's bind (other tests run
    # beside this one) is tried again with another.
    for attempt in range(3):
        job = f"mlmon-ranks-{attempt}"
        r = mlmond.ctl("run", "--ranks", "--name", job, "--", TORCH_PYTHON, "-m", "torch.distributed.run",
                       "--redirects", "2", "--tee", "2", "--nnodes", "1", "--nproc_per_node", "3",
                       "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--rdzv_id", job,
                       str(script), env={"PYTHONPATH": PYTHONPATH, "OUT_DIR": str(tmp_path)}, timeout=90)
        stderr = r.stderr.decode()
        if r.returncode == 0 or "Address already in use" not in stderr:
            break
    assert r.returncode == 0, stderr
    launcher = launcher_run(mlmond, job)
    runs = check_ranks(mlmond, stderr, str(tmp_path), 3, launcher, "step")
    for rank in runs:
        with open(tmp_path / f"{rank}.json") as f:
            got = json.load(f)
        assert got["job_id"] == job and got["attach_s"] < 2.5, got
    rep = mlmond.ctl("report", "--job", job)
    text = rep.stdout.decode()
    assert rep.returncode == 0, rep.stderr.decode()
    assert re.search(r"^  step +300 ", text, re.M), text
    assert "No timed operations" not in text


# A launcher of plain Python ranks: each rank attaches at once (before
# mlmonctl's first look at the tree, most of the time), times "work", and
# forks a worker that times "work" too (it counts for the rank's run). The
# launcher attaches and times "launch" on its own run.
LAUNCHER = textwrap.dedent("""
    import os, subprocess, sys, mlmon
    run = mlmon.attach()
    with mlmon.timer("launch"):
        kids = [subprocess.Popen([sys.executable, "-c", sys.argv[1]],
                                 env=dict(os.environ, RANK=str(r), WORLD_SIZE="3", TORCHELASTIC_RUN_ID="plain-job"))
                for r in range(3)]
        codes = [k.wait() for k in kids]
    mlmon.flush()
    assert run.info["pid"] == os.getpid(), run.info
    sys.exit(max(codes))
""")

RANK = textwrap.dedent("""
    import json, os, time, mlmon
    run = mlmon.attach()
    for _ in range(50):
        mlmon.observe("work", 1.0)
    pid = os.fork()
    if pid == 0:
        for _ in range(7):
            mlmon.observe("work", 2.0)
        mlmon.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    mlmon.flush()
    with open(os.path.join(os.environ["OUT_DIR"], os.environ["RANK"] + ".json"), "w") as f:
        json.dump({"pid": os.getpid(), "run": run.id, "sent": 57, "dropped": mlmon.dropped(),
                   "run_id_env": os.environ.get("MLMON_RUN_ID")}, f)
""")


def test_ranks_that_attach_before_their_runs_exist(mlmond, tmp_path):
    r = mlmond.ctl("run", "--ranks", "--name", "plain", "--", sys.executable, "-c", LAUNCHER, RANK,
                   env={"PYTHONPATH": PYTHONPATH, "OUT_DIR": str(tmp_path)}, timeout=60)
    stderr = r.stderr.decode()
    assert r.returncode == 0, stderr
    launcher = launcher_run(mlmond, "plain")
    # the launcher's own timing on its run, and nothing of the ranks
    assert op_counts(mlmond, launcher["id"]) == {"launch": 1}
    runs = ranks_line(stderr)
    assert sorted(runs) == [0, 1, 2], stderr
    for rank, run_id in runs.items():
        with open(tmp_path / f"{rank}.json") as f:
            got = json.load(f)
        assert got["run"] == run_id and got["dropped"] == 0 and got["run_id_env"] == str(run_id), got
        assert op_counts(mlmond, run_id) == {"work": 57}


def test_own_run_wins_over_an_inherited_run_id(mlmond):
    """$MLMON_RUN_ID names another process's run: the process's own run, and
    in a child its parent's (the nearest registered ancestor), wins."""
    other = subprocess.Popen(["sleep", "30"])
    try:
        foreign = mlmond.register(other.pid)["id"]
        out, _ = run_script(mlmond, """
            import json, os, mlmon
            from mlmon import _http
            mine = _http.request("POST", "/v1/runs", {"pid": os.getpid(), "name": "mine"})["id"]
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # a child that attaches first: its nearest registered ancestor
                os.close(r)
                child = mlmon.attach()
                with mlmon.timer("child"):
                    pass
                mlmon.flush()
                os.write(w, str(child.id).encode())
                os._exit(0)
            os.close(w)
            os.waitpid(pid, 0)
            child_run = int(os.read(r, 100))
            run = mlmon.attach(name="ignored")
            with mlmon.timer("own"):
                pass
            print(json.dumps({"mine": mine, "run": run.id, "child": child_run}))
        """, MLMON_RUN_ID=str(foreign))
        assert out["run"] == out["mine"] == out["child"] != foreign
        assert op_counts(mlmond, out["run"]) == {"own": 1, "child": 1}
        assert op_counts(mlmond, foreign) == {}
    finally:
        other.kill()
        other.wait()

# SPDX-License-Identifier: MIT
"""Jobs of real DDP: torchrun (Debian's python3-torch, gloo on CPU) started
under `mlmonctl run --ranks`, each rank timing its own work before the
all-reduce (compute), the backward pass that holds the all-reduce and the
whole step (helpers/ddp_train.py). What the job's verdicts must say:

- one rank slowed before the all-reduce: that rank and only it, in any op
  (its peers wait for it in backward: they are its victims, never named);
  NVIDIA's scores beside the verdict;
- that rank stopped (SIGSTOP): the job is "stalled", naming it, within 30 s;
  running again after SIGCONT;
- every rank equally slow: no straggler; one rank killed (SIGKILL): torchrun
  starts every worker again, the new workers are attempt 1, judged apart
  from attempt 0, whose end says which rank died first and how;
- two ranks, one slowed: the slow one, or "cannot tell" when no op is
  declared collective; never the one that waits.

Debian's torchrun 1.13 on Python 3.11 dies at start unless it redirects and
tees the workers' output (--redirects 2 --tee 2). Each job runs a tiny
model for a few seconds; skipped without torch."""

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import MLMONCTL, ROOT, free_port, needs, wait_for
from test_web import chromium

TORCH_PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch
TRAIN = os.path.join(ROOT, "tests", "blackbox", "helpers", "ddp_train.py")
# each rank's timings of an op before a verdict is read: enough for the
# sign test to be sure of a 10 ms slowdown, a few seconds of steps
STEPS = 150
CONFIG = "[jobs]\nstall_floor = 2s\n"


@pytest.fixture(scope="module", autouse=True)
def torch_or_skip():
    if subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"], capture_output=True).returncode != 0:
        needs("torch", f"no torch for {TORCH_PYTHON} (Debian package python3-torch)")


class Job:
    """`mlmonctl run --ranks -- torchrun ... ddp_train.py` in the
    background; stop() makes the ranks stop together and waits for it."""

    def __init__(self, d, tmp_path, job_id, nproc, env, restarts=False):
        self.d, self.id, self.dir = d, job_id, tmp_path
        self.stop_file = tmp_path / f"{job_id}.stop"
        (tmp_path / job_id).mkdir()
        e = {k: v for k, v in os.environ.items() if not k.startswith("MLMON_")}
        e.update(env, DDP_STOP=str(self.stop_file), DDP_OUT=str(tmp_path / job_id), DDP_MAX_S="55")
        elastic = ["--max_restarts", "1", "--monitor_interval", "1"] if restarts else []
        for attempt in range(3):  # a port taken by another test meanwhile: another one
            argv = [MLMONCTL, "--socket", d.socket_path, "run", "--ranks", "--name", job_id, "--", TORCH_PYTHON,
                    "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2", "--nnodes", "1",
                    "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1", "--master_port",
                    str(free_port()), "--rdzv_id", job_id] + elastic + [TRAIN]
            self.log = open(tmp_path / f"{job_id}.log", "wb")
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                         env=e, cwd=tmp_path)
            self.t0 = time.monotonic()
            if self.wait_ranks(nproc, 0) or "Address already in use" not in self.output():
                return
        pytest.fail(f"torchrun could not start:\n{self.output()}")

    def output(self):
        with open(self.dir / f"{self.id}.log", "rb") as f:
            return f.read().decode("utf-8", "replace")

    def doc(self, query=""):
        st, body = self.d.get(f"/v1/jobs/{self.id}{query}")
        assert st == 200, (st, body)
        return body

    def wait_ranks(self, n, attempt, steps=0):
        """Waits for the attempt's n ranks to run and time `steps` steps
        each; False if the job ended first."""
        def ready():
            if self.proc.poll() is not None:
                return "ended"
            st, doc = self.d.get(f"/v1/jobs/{self.id}?attempt={attempt}")
            if st != 200:
                return None
            running = [r for r in doc["runs"] if not r["launcher"] and r["state"] == "running"]
            counts = [r["count"] for r in doc["ranks"].get("step", [])]
            return len(running) == n and len(counts) == n and min(counts) >= steps and doc
        got = wait_for(ready, 60, interval=0.25, what=f"{n} ranks of {self.id} (attempt {attempt}), {steps} steps")
        return got != "ended"

    def pid_of(self, rank):
        return next(r["pid"] for r in self.doc()["runs"] if r["rank"] == str(rank) and r["state"] == "running")

    def stop(self):
        self.stop_file.touch()
        rc = self.proc.wait(timeout=60)
        self.log.close()
        assert rc == 0, self.output()
        print(f"{self.id}: {time.monotonic() - self.t0:.1f} s under torchrun")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()  # mlmonctl: the launcher and its workers die of a closed pipe, or with the test
            self.proc.wait()
        self.log.close()


@pytest.fixture
def ddp_job(make_mlmond, tmp_path):
    """ddp_job(job_id, nproc, env[, restarts]): a daemon and a job on it,
    returned once each rank has timed STEPS steps; killed at teardown if it
    still runs."""
    started = []

    def start(job_id, nproc, env, restarts=False):
        d = make_mlmond(config_text=CONFIG)
        job = Job(d, tmp_path, job_id, nproc, env, restarts)
        started.append(job)
        assert job.wait_ranks(nproc, 0, STEPS)
        return d, job
    yield start
    for j in started:
        j.kill()


def named(doc):
    """The ranks the verdicts name, by op."""
    out = {}
    for s in doc["stragglers"]:
        out.setdefault(s["op"], set()).add((s["rank"], s["kind"]))
    return out


def page_shows_stall(d, pid):
    """The job page says the job is stalled, why, and which rank is stopped
    (where chromium runs)."""
    try:
        dom, console = chromium(f"http://127.0.0.1:{d.port}/jobs/ddp-slow")
    except pytest.skip.Exception as e:
        print(f"the job page not checked: {e}")
        return
    assert console == [], console
    assert "stalled" in dom.text_of(id="title")
    stalled = dom.find("section", id="stalled")
    assert stalled and stalled[0][1].get("hidden") is None and "is stopped" in stalled[0][2], stalled
    row = [e for e in dom.find("tr") if e[1].get("data-run") and "data-rank-of" not in e[1] and str(pid) in e[2]]
    assert row and "stopped" in row[0][2], row


def test_slow_rank_then_stopped_rank(ddp_job):
    d, job = ddp_job("ddp-slow", 3, {"DDP_SLOW_RANK": "2", "DDP_SLOW_MS": "10"})
    doc = job.doc()

    # rank 2 and only rank 2: slower at its own work, and the one the others
    # wait for in backward; ranks 0 and 1 wait more there and are named nowhere
    assert named(doc) == {"compute": {("2", "slower")}, "backward": {("2", "waited_for")}}, doc["stragglers"]
    assert doc["undecided"] == [] and doc["collective_ops"] == ["backward"]
    back = {r["rank"]: r["p50_ms"] for r in doc["ranks"]["backward"]}
    assert back["0"] > back["2"] + 5 and back["1"] > back["2"] + 5, back  # the victims' wait
    for s in doc["stragglers"]:
        assert s["p_value"] < 0.001 and s["reason"].startswith("rank 2 (run ") and not s["local"]
    waited = next(s for s in doc["stragglers"] if s["kind"] == "waited_for")
    assert waited["wait_ms"] > 5 and "wait for it in backward" in waited["reason"]
    # NVIDIA's scores: rank 2's compute far below the fastest's; backward holds
    # a collective, where low scores are the victims' and are not flagged
    compute = {r["rank"]: r for r in doc["ranks"]["compute"]}
    assert compute["2"]["relative_score"] < 0.75 and compute["2"]["score_flagged"]
    assert not compute["0"]["score_flagged"] and not compute["1"]["score_flagged"]
    assert not any(r["score_flagged"] for r in doc["ranks"]["backward"])
    assert all(0 < r["individual_score"] <= 1 for op in doc["ranks"].values() for r in op)
    # who is who: the whole job here, every rank named, the launcher apart
    assert (doc["world_size"], doc["ranks_here"], doc["partial"], doc["view"]) == \
        (3, 3, False, "all 3 ranks on this host")
    ranks = [r for r in doc["runs"] if not r["launcher"]]
    assert [(r["rank"], r["attempt"], r["name"]) for r in ranks] == \
        [(str(i), "0", f"rank {i} of ddp-slow") for i in range(3)]
    st, runs = d.get("/v1/runs?name=ddp-slow")
    assert runs["runs"][0]["tags"]["role"] == "launcher"  # mlmonctl's run of torchrun itself
    text = d.ctl("report", "--job", "ddp-slow").stdout.decode()
    flagged = {tuple(line.split()[:1] + line.split()[-1:]) for line in text.splitlines()
               if line.rstrip().endswith(("STRAGGLER", "WAITED-FOR"))}
    assert flagged == {("2", "STRAGGLER"), ("2", "WAITED-FOR")}, text
    assert "Ranks, backward (holds a collective" in text

    # rank 1 stopped: the others block in the all-reduce, every rank at 0% CPU;
    # the job is stalled, and its state names the one that is stopped
    pid = job.pid_of(1)
    os.kill(pid, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        doc = wait_for(lambda: (lambda x: x["state"] == "stalled" and x)(job.doc()), 30, interval=0.25,
                       what="the job to be stalled")
        print(f"stalled {time.monotonic() - t0:.1f} s after SIGSTOP: {doc['stalled_ranks']}")
        assert [(r["rank"], r["cause"]) for r in doc["stalled_ranks"]] == [("1", "stopped")]
        assert "is stopped" in doc["stalled_ranks"][0]["reason"]
        assert doc["stalled_since"] == doc["stall"]["last_step_ts"] and doc["stall"]["threshold_ms"] >= 2000
        assert next(r for r in doc["runs"] if r["rank"] == "1")["proc_state"] == "stopped"
        assert d.get("/v1/health")[1]["jobs_stalled"] == 1
        listed = {j["job_id"]: j for j in d.get("/v1/jobs")[1]["jobs"]}
        assert listed["ddp-slow"]["state"] == "stalled" and listed["ddp-slow"]["stalled_since"] > 0
        line = next(x for x in d.ctl("list").stdout.decode().splitlines() if f" {pid} " in f" {x} ")
        assert " stopped " in line, line
        metrics = d.request("GET", "/metrics").body.decode()
        assert re.search(r'^mlmond_run_process_state\{[^}]*pid="%d"[^}]*state="stopped"\} 1$' % pid, metrics, re.M)
        assert "STALLED" in d.ctl("report", "--job", "ddp-slow").stdout.decode()
        page_shows_stall(d, pid)
    finally:
        os.kill(pid, signal.SIGCONT)
    doc = wait_for(lambda: (lambda x: x["state"] == "running" and x)(job.doc()), 30, interval=0.25,
                   what="the job to run again")
    assert doc["stalled_ranks"] == [] and d.get("/v1/health")[1]["jobs_stalled"] == 0

    job.stop()
    doc = job.doc()
    assert doc["state"] == "finished"
    assert [(r["exit_code"], r["exit_signal"]) for r in doc["runs"] if not r["launcher"]] == [(0, None)] * 3
    assert re.fullmatch(r"ranks 0, 1, 2 exited with status 0 within \d+\.\d s", doc["end_reason"]), doc["end_reason"]
    shown = d.ctl("show", doc["runs"][0]["id"]).stdout.decode()
    assert re.search(r"^ +process: +exited with status 0$", shown, re.M), shown


def test_elastic_restart_is_judged_by_attempt(ddp_job):
    # every rank equally slow before the all-reduce: no straggler
    d, job = ddp_job("ddp-elastic", 3, {"DDP_SLOW_RANK": "all", "DDP_SLOW_MS": "10"}, restarts=True)
    doc = job.doc()
    assert doc["attempt"] == 0 and doc["stragglers"] == [] and doc["undecided"] == [], doc["stragglers"]

    # rank 1 killed: torchrun stops the others and starts all three again
    old = {r["rank"]: r for r in doc["runs"] if not r["launcher"]}
    os.kill(old["1"]["pid"], signal.SIGKILL)
    assert job.wait_ranks(3, 1, STEPS)
    doc = job.doc()
    assert doc["attempt"] == 1 and doc["state"] == "running"
    # attempt 1 on its own: the slowness of attempt 0's end is not held against anyone
    assert doc["stragglers"] == [] and doc["undecided"] == [], doc["stragglers"]
    assert [(r["rank"], r["attempt"], r["name"]) for r in doc["runs"] if not r["launcher"]] == \
        [(str(i), "1", f"rank {i} of ddp-elastic (attempt 1)") for i in range(3)]
    assert [(a["attempt"], a["state"], a["runs"]) for a in doc["attempts"]] == [(0, "finished", 3), (1, "running", 3)]
    why = doc["attempts"][0]["end_reason"]
    assert why.startswith("rank 1 was killed by SIGKILL first; "), why
    first = job.doc("?attempt=0")
    ended = {r["rank"]: (r["exit_code"], r["exit_signal"]) for r in first["runs"] if not r["launcher"]}
    assert ended["1"] == (None, signal.SIGKILL), ended
    assert all(ended[r] != (None, None) for r in ("0", "2")), ended  # SIGTERM from torchrun, or a gloo error
    assert first["end_reason"] == why and first["state"] == "finished"
    text = d.ctl("report", "--job", "ddp-elastic").stdout.decode()
    assert text.startswith("job ddp-elastic, attempt 1: ") and "attempt 0: finished, rank 1 was killed" in text
    job.stop()


def test_two_ranks(ddp_job):
    d, job = ddp_job("ddp-two", 2, {"DDP_SLOW_RANK": "1", "DDP_SLOW_MS": "10"})
    # backward holds the all-reduce ([jobs] collective_ops): rank 0 waits for
    # rank 1 there, so rank 1 is the slow one
    doc = job.doc()
    assert named(doc) == {"compute": {("1", "slower")}, "backward": {("1", "waited_for")}}, doc["stragglers"]
    slow = next(s for s in doc["stragglers"] if s["op"] == "compute")
    assert "of 2 ranks, named since the other waits for it" in slow["reason"], slow
    # the report's column is the verdict's figure, for each of the two (the ranks still run: the
    # medians move a little between the two questions)
    text = d.ctl("report", "--job", "ddp-two").stdout.decode()
    rows = {line.split()[0]: line.split() for line in text.split("Ranks, compute:")[1].splitlines()[2:4]}
    assert rows["1"][5].startswith("+") and rows["0"][5].startswith("-"), text
    assert float(rows["1"][5][:-1]) == pytest.approx(slow["slower_pct"], rel=0.1), (text, slow)
    # told that no op holds a collective: two ranks that differ, and nothing to
    # say which is slow; never the one that waits
    doc = job.doc("?collective=")
    assert doc["stragglers"] == [] and doc["collective_ops"] == []
    assert sorted(u["op"] for u in doc["undecided"]) == ["backward", "compute"], doc["undecided"]
    for u in doc["undecided"]:
        assert u["reason"].startswith("2 ranks: cannot tell which is slow in " + u["op"]) and len(u["runs"]) == 2
    job.stop()

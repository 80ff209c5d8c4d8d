# SPDX-License-Identifier: MIT
"""The goodput ledger (GET /v1/runs/ID/goodput, /v1/jobs/ID/goodput, mlmonctl
report, /metrics) on real jobs: a Python loop under `mlmonctl run` that
starts up, waits for data, steps, stalls, checkpoints between marks and
evaluates, and writes down what it did by its own clock; the ledger must add
up to the span to the millisecond and agree with what the job measured. A
job of two ranks whose rank 0 is restarted counts what the restart lost from
the attempt's last checkpoint mark on."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, wait_for

PYTHONPATH = os.path.join(ROOT, "client", "python")
PARTS = ("startup_s", "step_s", "data_wait_s", "checkpoint_s", "eval_s", "idle_s", "lost_s", "other_s")

# A training loop of known shape: 1.5 s of startup, 40 iterations of a 15 ms
# data wait and a 40 ms step with a 3 s stall after the 20th, a checkpoint of
# 1.2 s between two marks, a 0.5 s evaluation timed as an op of category
# eval, 20 more iterations. Each timing is the one mlmon sends (t.ms).
JOB = r"""
import json, os, time
import mlmon
run = mlmon.attach()
rec = {"data": [], "step": []}
def it(i):
    with mlmon.timer("data_wait", category="data") as t:
        time.sleep(0.015)
    rec["data"].append(t.ms)
    with mlmon.timer("step") as t:
        time.sleep(0.04)
    rec["step"].append(t.ms)
    if "first_step_end" not in rec:
        rec["first_step_end"] = time.time() * 1000
time.sleep(1.5)
for i in range(40):
    it(i)
    if i == 19:
        time.sleep(3.0)
mlmon.mark("checkpoint-start")
time.sleep(1.2)
mlmon.mark("checkpoint-end")
with mlmon.timer("validate", category="eval") as t:
    time.sleep(0.5)
rec["eval"] = t.ms
for i in range(20):
    it(i)
mlmon.flush()
with open(os.environ["OUT"], "w") as f:
    json.dump(rec, f)
"""


def env_for(d, **extra):
    e = dict(os.environ)
    for k in ("MLMON_RUN_ID", "MLMON_URL", "MLMON_SOCKET", "MLMON_STATSD_SOCKET"):
        e.pop(k, None)
    e.update(PYTHONPATH=PYTHONPATH, PYTHONDONTWRITEBYTECODE="1", MLMON_STATSD_SOCKET=d.statsd_path, **extra)
    return e


def ideal_step(ms):
    """The rule: the mean of the steps at or below median + 3 MAD (the
    median as the lower middle value, as the histogram ranks it)."""
    s = sorted(ms)
    med = s[(len(s) - 1) // 2]
    dev = sorted(abs(x - med) for x in s)
    mad = dev[(len(dev) - 1) // 2]
    kept = [x for x in s if x <= med + 3 * mad]
    return sum(kept) / len(kept)


def check_adds_up(doc):
    total = sum(doc[k] for k in PARTS)
    assert total == pytest.approx(doc["wall_s"], abs=1e-6), doc
    assert all(doc[k] >= 0 for k in PARTS), doc
    assert doc["wall_s"] == pytest.approx((doc["until"] - doc["from"]) / 1000, abs=1e-6), doc


@pytest.fixture(scope="module")
def loop(make_module_mlmond, tmp_path_factory):
    """The loop's run, its ledger, and what it measured itself."""
    d = make_module_mlmond(interval="250ms")
    out = str(tmp_path_factory.mktemp("goodput") / "rec.json")
    r = d.ctl("run", "--name", "loop", "--", sys.executable, "-c", textwrap.dedent(JOB),
              env=env_for(d, OUT=out), timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    with open(out) as f:
        rec = json.load(f)
    run = d.run(1)
    assert run["state"] == "exited"
    st, doc = d.get("/v1/runs/1/goodput")
    assert st == 200, doc
    return d, run, doc, rec


def test_ledger_adds_up_and_agrees_with_the_job(loop):
    d, run, doc, rec = loop
    check_adds_up(doc)
    assert doc["from"] == run["registered_ts"] and doc["until"] == run["ended_ts"]
    assert doc["step_op"] == "step" and doc["reason"] is None and doc["run"] == 1
    # the first step ends the startup; the other 59 are the steps
    assert doc["steps"] == 59
    assert doc["startup_s"] == pytest.approx((rec["first_step_end"] - run["registered_ts"]) / 1000, abs=0.1)
    assert doc["step_s"] == pytest.approx(sum(rec["step"][1:]) / 1000, rel=0.01)
    # the first data wait happened before the first step: startup's, but its
    # slice may give it room after the startup ended
    assert sum(rec["data"][1:]) / 1000 * 0.99 <= doc["data_wait_s"] <= sum(rec["data"]) / 1000 * 1.01
    assert doc["eval_s"] == pytest.approx(rec["eval"] / 1000, rel=0.01)
    st, marks = d.get("/v1/runs/1/marks")
    ts = {m["label"]: m["ts"] for m in marks["marks"]}
    assert doc["checkpoint_s"] == pytest.approx((ts["checkpoint-end"] - ts["checkpoint-start"]) / 1000, abs=0.002)
    # the 3 s stall: its whole empty seconds are idle (the ledger sees seconds)
    assert 2.0 <= doc["idle_s"] <= 3.05, doc
    assert doc["lost_s"] == 0
    # ideal step: the mean of the steps at or below median + 3 MAD (the
    # histogram's buckets are 0.54% wide); goodput from it
    assert doc["ideal_step_ms"] == pytest.approx(ideal_step(rec["step"]), rel=0.005)
    assert doc["goodput_pct"] == pytest.approx(100 * doc["steps"] * doc["ideal_step_ms"] / 1000 / doc["wall_s"],
                                               abs=0.01)
    # no energy counters here: unknown, not 0
    assert doc["energy_j"] is None and doc["energy_per_step_j"] is None


def test_series_and_spans(loop):
    d, run, doc, rec = loop
    st, s = d.get("/v1/runs/1/goodput?step=2s")
    assert st == 200 and s["series_step_s"] == 2.0
    for p in s["series"]:
        assert all(p[k] >= 0 for k in PARTS), p
    for k in PARTS:
        assert sum(p[k] for p in s["series"]) == pytest.approx(doc[k], abs=0.002 * len(s["series"])), k
    # from a mark on: no startup, the last 20 steps, the eval
    st, m = d.get("/v1/runs/1/goodput?since_mark=checkpoint-end")
    assert st == 200, m
    check_adds_up(m)
    assert m["since_mark"]["label"] == "checkpoint-end" and m["startup_s"] == 0
    assert m["steps"] == 20 and m["checkpoint_s"] == 0
    assert m["eval_s"] == pytest.approx(rec["eval"] / 1000, rel=0.01)
    st, w = d.get(f"/v1/runs/1/goodput?from={run['registered_ts']}&until={run['registered_ts'] + 300}")
    assert st == 200 and w["wall_s"] == 0.3 and w["reason"] is not None  # no step yet: no split
    assert all(w[k] is None for k in PARTS) and w["goodput_pct"] is None and w["steps"] is None


def test_report_and_show(loop):
    d, run, doc, rec = loop
    r = d.ctl("report", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert f"Goodput over the span: {doc['goodput_pct']:.1f} % (59 steps of step" in out, out
    for label in ("startup", "step", "data wait", "checkpoint", "eval", "idle", "lost", "other"):
        assert any(line.split()[:len(label.split())] == label.split() for line in out.splitlines()
                   if line.startswith("  ")), label
    assert "input-bound: " in out and "GPU idle: " in out and "time to OOM: " in out
    r = d.ctl("--json", "report", "1")
    assert json.loads(r.stdout)["goodput"]["steps"] == 59
    # the 10 s job is shorter than half the default window: no input-bound verdict, and why
    r = d.ctl("show", "1")
    assert "input-bound: no verdict (not judged yet: " in r.stdout.decode(), r.stdout


def test_no_step_timings(make_mlmond, helpers):
    d = make_mlmond(interval="250ms")
    h = helpers("busy", "1", "0")
    h.expect("ready")
    plain = d.register(h.pid)["id"]
    st, _ = d.post(f"/v1/runs/{plain}/observations", [{"op": "inference", "ms": 12.5}] * 20)
    assert st == 202
    st, doc = d.get(f"/v1/runs/{plain}/goodput")
    assert st == 200 and doc["reason"].startswith("no timings of the step op"), doc
    assert all(doc[k] is None for k in PARTS) and doc["steps"] is None and doc["goodput_pct"] is None
    assert doc["ideal_step_ms"] is None and doc["wall_s"] > 0
    # the run's own step op
    h2 = helpers("busy", "1", "0")
    h2.expect("ready")
    named = d.register(h2.pid, step_op="inference")
    assert named["step_op"] == "inference" and d.run(plain)["step_op"] == "step"
    for _ in range(3):
        st, _ = d.post(f"/v1/runs/{named['id']}/observations", [{"op": "inference", "ms": 12.5}] * 10)
        time.sleep(0.3)
    st, doc = d.get(f"/v1/runs/{named['id']}/goodput")
    assert st == 200 and doc["step_op"] == "inference" and doc["steps"] == 29, doc
    check_adds_up(doc)
    assert doc["ideal_step_ms"] == pytest.approx(12.5, rel=0.003)
    # mlmonctl run --step-op sends it
    r = d.ctl("register", "--step-op", "train", str(os.getpid()))
    assert r.returncode == 0, r.stderr
    assert d.run(int(r.stdout))["step_op"] == "train"


def test_bad_requests(make_mlmond, helpers):
    d = make_mlmond(interval="250ms")
    h = helpers("busy", "1", "0")
    h.expect("ready")
    rid = d.register(h.pid, tags={"job_id": "j"})["id"]
    for path, status, text in ((f"/v1/runs/{rid}/goodput?window=5x", 400, "window"),
                               (f"/v1/runs/{rid}/goodput?step=0", 400, "step"),
                               (f"/v1/runs/{rid}/goodput?step=1ms", 400, "step"),
                               (f"/v1/runs/{rid}/goodput?window=1m&since_mark=x", 400, "since_mark"),
                               (f"/v1/runs/{rid}/goodput?q=50", 400, "q"),
                               (f"/v1/runs/{rid}/goodput?since_mark=nope", 404, "nope"),
                               ("/v1/runs/999/goodput", 404, "999"),
                               ("/v1/runs/x/goodput", 400, ""),
                               ("/v1/jobs/none/goodput", 404, "none"),
                               ("/v1/jobs/j/goodput?q=50", 400, "q"),
                               ("/v1/jobs/j/goodput?since_mark=nope", 404, "nope"),
                               ("/v1/jobs/j/goodput?window=1d&step=1s", 400, "step")):
        st, body = d.get(path)
        assert st == status and text in body["error"]["message"], (path, st, body)
    for bad in ("", 7, "x" * 201, ["step"]):
        st, body = d.post("/v1/runs", {"pid": os.getpid(), "step_op": bad})
        assert st == 400 and "step_op" in body["error"]["message"], (bad, st, body)


def post_loop(d, rid, n, step_ms=20.0, gap=0.05):
    for _ in range(n):
        st, _ = d.post(f"/v1/runs/{rid}/observations", [{"op": "step", "ms": step_ms}])
        assert st == 202
        time.sleep(gap)


def test_job_restart_is_lost(make_mlmond, helpers):
    d = make_mlmond(interval="250ms")
    tags = lambda rank, attempt: {"job_id": "elastic", "rank": str(rank), "attempt": str(attempt)}  # noqa: E731
    a0 = helpers("busy", "1", "0")
    r1 = helpers("busy", "1", "0")
    a0.expect("ready")
    r1.expect("ready")
    run0 = d.register(a0.pid, tags=tags(0, 0))["id"]
    run1 = d.register(r1.pid, tags=tags(1, 0))["id"]
    post_loop(d, run0, 10)
    st, mark = d.post(f"/v1/runs/{run0}/marks", {"label": "checkpoint-saved"})
    assert st == 201
    post_loop(d, run0, 10)
    a0.kill()  # rank 0 crashes; its restart comes 0.5 s later
    wait_for(lambda: d.run(run0)["state"] == "exited", 5.0, what="attempt 0 to end")
    time.sleep(0.5)
    a1 = helpers("busy", "1", "0")
    a1.expect("ready")
    run2 = d.register(a1.pid, tags=tags(0, 1))["id"]
    post_loop(d, run2, 10)
    post_loop(d, run1, 5)
    end0, reg2 = d.run(run0)["ended_ts"], d.run(run2)["registered_ts"]

    st, doc = d.get(f"/v1/runs/{run0}/goodput")
    assert st == 200
    check_adds_up(doc)
    assert doc["lost_s"] == pytest.approx((end0 - mark["ts"]) / 1000, abs=0.002), doc
    st, job = d.get("/v1/jobs/elastic/goodput")
    assert st == 200, job
    check_adds_up(job)
    assert job["ranks_n"] == 2 and [r["rank"] for r in job["ranks"]] == ["0", "1"]
    rank0 = job["ranks"][0]
    check_adds_up(rank0)
    # lost: attempt 0 from its checkpoint to its end, and the restart's gap
    assert rank0["lost_s"] == pytest.approx((reg2 - mark["ts"]) / 1000, abs=0.002), rank0
    # the job: the mean of its ranks
    for k in PARTS:
        assert job[k] == pytest.approx((job["ranks"][0][k] + job["ranks"][1][k]) / 2, abs=0.002), k
    r = d.ctl("report", "--job", "elastic")
    assert r.returncode == 0 and "Goodput of the job (the mean of its ranks):" in r.stdout.decode(), r.stdout


def test_metrics(make_mlmond, helpers):
    d = make_mlmond(interval="250ms")
    h = helpers("busy", "1", "0")
    h.expect("ready")
    rid = d.register(h.pid)["id"]
    post_loop(d, rid, 5)
    # the ledger runs once a closed slice reached it
    text = wait_for(lambda: (lambda t: t if "mlmond_run_goodput_seconds_total{" in t else None)(
        d.request("GET", "/metrics").body.decode()), 5.0, what="the goodput families")
    for kind in ("startup", "step", "data_wait", "checkpoint", "eval", "idle", "lost", "other"):
        assert f'mlmond_run_goodput_seconds_total{{run="{rid}",name="",pid="{h.pid}",kind="{kind}"}} ' in text, kind
    assert f'mlmond_run_goodput_steps_total{{run="{rid}",name="",pid="{h.pid}"}} ' in text
    # not judged (no data wait timed): no series, as for any unknown figure
    assert "mlmond_run_input_bound{" not in text
    assert "mlmond_run_oom_eta_seconds{" not in text
    if subprocess.run(["which", "promtool"], capture_output=True).returncode == 0:
        out = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True)
        assert out.returncode == 0, out

# SPDX-License-Identifier: MIT
"""GET /v1/overview, what the overview page draws, in one answer: real
processes (an idle one, a busy one, one whose ops mlmond is told of, a
leaking one that then ends, one that ended before it, the four ranks of a job
with one rank slower) and each figure against what is known from outside
mlmond: the timings sent, the clock around the requests, /proc."""

import subprocess

import pytest

from conftest import now_ms, schedstat_ns, statm_rss_bytes, wait_for
from test_jobs import start_job
from test_statsd import agents  # noqa: F401

FAST_LEAK = "[leak]\nwindows = 10s\ngrace = 2s\n"
WAITS, WAIT_MS = 100, 1.0
STEPS, STEP_MS = 10, 90.0


def overview(d, query=""):
    st, body = d.get("/v1/overview" + query)
    assert st == 200, body
    return body


def test_overview_in_one_answer(make_mlmond, helpers, agents):  # noqa: F811
    d = make_mlmond(interval="250ms", config_text=FAST_LEAK)
    idle = subprocess.Popen(["sleep", "600"])
    timed = subprocess.Popen(["sleep", "600"])
    done = subprocess.Popen(["sleep", "600"])
    try:
        busy = helpers("busy", 40, 0)
        grow = helpers("memshape", "leak", 20, 4096)
        busy.expect("ready", timeout=30)
        grow.expect("ready", timeout=30)
        ids = {"idle": d.register(idle.pid, name="idle", tags={"team": "a"})["id"],
               "busy": d.register(busy.pid, name="busy")["id"],
               "leaky": d.register(grow.pid, name="leaky")["id"],
               "done": d.register(done.pid, name="done")["id"]}
        busy_from, busy_ns = now_ms(), schedstat_ns(busy.pid)
        t0 = now_ms()
        ids["timed"] = d.register(timed.pid, name="timed")["id"]
        t1 = now_ms()
        # many short waits and fewer, longer steps: the steps cost the most time
        st, body = d.post(f"/v1/runs/{ids['timed']}/observations",
                          [{"op": "data_wait", "ms": WAIT_MS, "category": "io"}] * WAITS +
                          [{"op": "step", "ms": STEP_MS, "category": "train"}] * STEPS)
        assert st == 202, body
        job_ids, _, _ = start_job(d, agents, "ov-job", [1.0, 1.0, 1.25, 1.0])
        # one ends, then the leaking one is flagged and ends too
        done.kill()
        done.wait()
        wait_for(lambda: d.run(ids["done"])["state"] == "exited", 10, what="the first run to end")
        wait_for(lambda: (d.run(ids["leaky"])["leak"] or {}).get("suspected"), 60, what="the leak verdict")
        wait_for(lambda: d.run(ids["busy"])["latest"]["ts"] > busy_from + 2000, 10, what="busy's samples")

        # the running ones: the leak flag on, the top op by total time
        t2 = now_ms()
        ov = overview(d)
        t3 = now_ms()
        busy_pct = (schedstat_ns(busy.pid) - busy_ns) / 1e6 / (now_ms() - busy_from) * 100
        runs = {r["id"]: r for r in ov["runs"]}
        running = [r["id"] for r in ov["runs"] if r["state"] == "running"]
        assert running == sorted(ids[k] for k in ("idle", "busy", "leaky", "timed")) + job_ids, running
        assert ov["running"] == len(running) and ov["truncated"] is False
        assert [r["id"] for r in ov["runs"][len(running):]] == [ids["done"]]
        assert runs[ids["leaky"]]["leak"]["suspected"] is True and runs[ids["leaky"]]["leak"]["detected"] is True
        assert runs[ids["idle"]]["leak"]["detected"] is False and runs[ids["idle"]]["tags"] == {"team": "a"}
        top = runs[ids["timed"]]["top_op"]
        assert top["op"] == "step" and top["category"] == "train" and top["count"] == STEPS, top
        assert top["total_ms"] == pytest.approx(STEPS * STEP_MS)
        assert top["p99_ms"] == pytest.approx(STEP_MS, rel=0.01)
        # per_s over the part of the minute the run has lived, not over a minute
        # (rounded to 3 decimals)
        assert STEPS / ((t3 - t0) / 1000) - 5e-4 <= top["per_s"] <= STEPS / ((t2 - t1) / 1000) + 5e-4, \
            (top, t0, t1, t2, t3)
        assert runs[ids["idle"]]["top_op"] is None
        # a minute a point, the run's own minute last; the idle process's RSS as /proc has it
        assert ov["spark_step_s"] == 60 and all(len(r["spark"]["cpu_pct"]) == 11 for r in ov["runs"])
        rss = [v for v in runs[ids["idle"]]["spark"]["rss_bytes"] if v is not None]
        assert rss and all(v == statm_rss_bytes(idle.pid) for v in rss), rss
        assert runs[ids["idle"]]["spark"]["rss_bytes"][-1] is not None
        assert runs[ids["idle"]]["spark"]["from"] == (t2 // 60000 - 10) * 60000 or \
            runs[ids["idle"]]["spark"]["from"] == (t3 // 60000 - 10) * 60000
        cpu = [v for v in runs[ids["busy"]]["spark"]["cpu_pct"] if v is not None]
        assert cpu and sum(cpu) / len(cpu) == pytest.approx(busy_pct, abs=10), (cpu, busy_pct)
        latest = runs[ids["idle"]]["latest"]
        assert latest["rss_bytes"] == statm_rss_bytes(idle.pid) and latest["cpu_pct"] == 0
        # the job, its slower rank named
        assert [(j["job_id"], j["state"], j["runs"]) for j in ov["jobs"]] == [("ov-job", "running", 4)]
        assert [s["run"] for s in ov["jobs"][0]["stragglers"]] == [job_ids[2]], ov["jobs"]
        assert ov["jobs_total"] == 1

        # the leaking run ends: still flagged, the first of the finished
        grow.close()
        wait_for(lambda: d.run(ids["leaky"])["state"] == "exited", 10, what="the leaking run to end")
        ov = overview(d)
        finished = [r for r in ov["runs"] if r["state"] != "running"]
        assert [r["id"] for r in finished] == [ids["leaky"], ids["done"]], finished
        assert finished[0]["leak"]["detected"] is True and finished[1]["leak"]["detected"] is False
        assert finished[0]["ended_ts"] >= finished[1]["ended_ts"]
        # a finished run's minutes end at its end
        assert finished[1]["spark"]["from"] == (finished[1]["ended_ts"] // 60000 - 10) * 60000
        assert finished[1]["latest"]["rss_bytes"] > 0
        ov = overview(d, "?finished=1&jobs=0&spark=1m")
        assert [r["id"] for r in ov["runs"] if r["state"] != "running"] == [ids["leaky"]]
        assert ov["jobs"] == [] and ov["jobs_total"] == 1
        assert all(len(r["spark"]["rss_bytes"]) == 2 for r in ov["runs"])
    finally:
        for p in (idle, timed, done):
            p.kill()
            p.wait()


def test_overview_bad_parameters(mlmond):
    for q in ("spark=30s", "spark=2h", "spark=x", "window=0s", "window=2h", "finished=-1", "finished=101",
              "jobs=x", "state=all", "finished=1e2"):
        st, body = mlmond.get("/v1/overview?" + q)
        assert st == 400 and body["error"]["code"] == "bad_request", (q, st, body)
    ov = overview(mlmond, "?finished=0&jobs=0")
    assert ov["runs"] == [] and ov["running"] == 0 and ov["jobs"] == []

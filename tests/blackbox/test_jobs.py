# SPDX-License-Identifier: MIT
"""Jobs on one host: runs that share a job_id tag. Four rank processes
(helpers/statsd_agent.py), registered with job_id and rank tags, send real
StatsD timings of known distributions over the unix socket; GET /v1/jobs,
GET /v1/jobs/ID, mlmonctl report --job and compare must give the exact merge
of every timing sent and name exactly the rank that was made slower."""

import json
import math
import random

import pytest

from test_cli_reports import ctl_alone, err, out
from test_latency import check_stats, json_error, send_timings
from test_statsd import agents, op_count, settle  # noqa: F401

PER_RANK = 400


def timings(seed, scale=1.0, n=PER_RANK):
    """A narrow lognormal around 10 ms (3 decimals, as sent); a string seed
    gives the same numbers on every run."""
    rng = random.Random(seed)
    return [float(f"{scale * rng.lognormvariate(math.log(10.0), 0.1):.3f}") for _ in range(n)]


def start_job(d, agents, job_id, scales, op="step"):
    """One agent per rank, registered with the job's tags, each sending its
    timings; returns (run ids, timings per rank, agents) once all have
    landed."""
    ids, sent, procs = [], [], []
    for rank, scale in enumerate(scales):
        a = agents()
        run = d.register(a.pid, name=f"rank{rank}", tags={"job_id": job_id, "rank": str(rank)})
        values = timings(f"{job_id}/{rank}", scale)
        send_timings(a, d.statsd_path, op, values)
        ids.append(run["id"])
        sent.append(values)
        procs.append(a)
    for rid in ids:
        settle(lambda: op_count(d, rid, op, "window=1h"), PER_RANK, f"timings of run {rid}", quiet=0)
    return ids, sent, procs


def job(d, job_id, query=""):
    st, body = d.get(f"/v1/jobs/{job_id}{query}")
    assert st == 200, (st, body)
    return body


@pytest.fixture
def slow_job(mlmond, agents):
    ids, sent, _ = start_job(mlmond, agents, "train-a", [1.0, 1.0, 1.25, 1.0])
    return mlmond, ids, sent


def test_one_slower_rank_is_the_one_straggler(slow_job):
    d, ids, sent = slow_job
    doc = job(d, "train-a")
    assert doc["job_id"] == "train-a"
    assert [(r["id"], r["rank"], r["state"]) for r in doc["runs"]] == \
        [(ids[i], str(i), "running") for i in range(4)]
    assert [s["run"] for s in doc["stragglers"]] == [ids[2]], doc["stragglers"]
    s = doc["stragglers"][0]
    assert s["rank"] == "2" and s["op"] == "step"
    assert s["slower_pct"] == pytest.approx(25, abs=3)
    assert s["p_value"] < 0.001 and "rank 2" in s["reason"] and "slower" in s["reason"]
    others = sorted(v for i in (0, 1, 3) for v in sent[i])
    assert s["job_p50_ms"] == pytest.approx(others[len(others) // 2], rel=0.02)
    ranks = doc["ranks"]["step"]
    assert [r["run"] for r in ranks] == ids and all(r["count"] == PER_RANK for r in ranks)
    # the merge of all four ranks is the distribution of every timing sent
    check_stats(doc["ops"]["step"], [v for vs in sent for v in vs], (50, 90, 99))
    for r, values in zip(ranks, sent):
        s_values = sorted(values)
        assert r["p50_ms"] == pytest.approx(s_values[(len(values) - 1) // 2], rel=0.01)
        assert r["p99_ms"] == pytest.approx(s_values[int(0.99 * (len(values) - 1))], rel=0.01)


def test_equal_ranks_have_no_straggler_and_the_list(mlmond, agents):
    ids_a, _, _ = start_job(mlmond, agents, "train-b", [1.0, 1.0, 1.0, 1.0])
    # a job id with a space, URL-encoded in the path
    ids_b, sent_b, _ = start_job(mlmond, agents, "exp 1", [1.0, 1.0, 1.0, 1.0])
    assert job(mlmond, "train-b")["stragglers"] == []
    doc = job(mlmond, "exp%201", "?q=50,99.9")
    assert doc["job_id"] == "exp 1" and doc["stragglers"] == []
    assert set(doc["ops"]["step"]) >= {"p50_ms", "p99.9_ms", "count"}
    check_stats(doc["ops"]["step"], [v for vs in sent_b for v in vs], (50, 99.9))

    st, body = mlmond.get("/v1/jobs")
    assert st == 200
    jobs = {j["job_id"]: j for j in body["jobs"]}
    assert set(jobs) == {"train-b", "exp 1"}
    j = jobs["train-b"]
    assert (j["runs"], j["ranks"], j["state"], j["last_ended_ts"]) == (4, 4, "running", None)
    assert j["first_registered_ts"] == min(mlmond.run(i)["registered_ts"] for i in ids_a)
    # a finished job: every run unregistered
    for i in ids_b:
        assert mlmond.delete(f"/v1/runs/{i}")[0] == 200
    jobs = {j["job_id"]: j for j in mlmond.get("/v1/jobs")[1]["jobs"]}
    ended = max(mlmond.run(i)["ended_ts"] for i in ids_b)
    assert (jobs["exp 1"]["state"], jobs["exp 1"]["last_ended_ts"]) == ("finished", ended)
    # its span ends with its last run
    doc = job(mlmond, "exp%201")
    assert doc["until"] == ended and [r["state"] for r in doc["runs"]] == ["unregistered"] * 4
    check_stats(doc["ops"]["step"], [v for vs in sent_b for v in vs], (50, 99))


def test_errors(slow_job):
    d, ids, _ = slow_job
    st, e = json_error(d, "GET", "/v1/jobs/nope")
    assert st == 404 and e["code"] == "not_found" and "nope" in e["message"]
    for q in ("?window=x", "?q=0", "?bogus=1", "?window=1m&since_mark=a"):
        st, e = json_error(d, "GET", "/v1/jobs/train-a" + q)
        assert st == 400, (q, e)
    st, e = json_error(d, "GET", "/v1/jobs/train-a?since_mark=never")
    assert st == 404 and "never" in e["message"]


def test_since_mark_starts_each_rank_at_its_own_mark(mlmond, agents):
    ids, _, procs = start_job(mlmond, agents, "train-c", [1.0, 1.0])
    # rank 0 marks, then sends 30 more; rank 1 has no mark: it is left out
    assert mlmond.post(f"/v1/runs/{ids[0]}/marks", {"label": "warm"})[0] == 201
    later = timings("train-c/later", n=30)
    send_timings(procs[0], mlmond.statsd_path, "step", later)
    settle(lambda: op_count(mlmond, ids[0], "step", "window=1h"), PER_RANK + 30, "the later timings", quiet=0)
    doc = job(mlmond, "train-c", "?since_mark=warm")
    assert doc["since_mark"] == "warm"
    marks = {r["id"]: r["since_mark_ts"] for r in doc["runs"]}
    assert marks[ids[0]] == mlmond.get(f"/v1/runs/{ids[0]}/marks")[1]["marks"][0]["ts"]
    assert marks[ids[1]] is None
    # the mark's 1-second slice may hold some of the first timings too
    step = doc["ranks"]["step"]
    assert [r["run"] for r in step] == [ids[0]]
    assert 30 <= step[0]["count"] <= PER_RANK + 30 and doc["ops"]["step"]["count"] == step[0]["count"]
    r = mlmond.ctl("report", "--job", "train-c", "--since-mark", "warm")
    assert r.returncode == 0 and ", each run since its mark warm\n" in out(r), out(r) + err(r)
    assert mlmond.ctl("report", "--job", "train-c", "--since-mark", "warm", "--window", "1m").returncode == 2


def test_report_job_and_compare(slow_job, agents, tmp_path):
    d, ids, _ = slow_job
    r = d.ctl("report", "--job", "train-a")
    assert r.returncode == 0, err(r)
    text = out(r)
    assert text.startswith("job train-a: 4 runs, 4 running\n")
    assert "Operations over the span, all ranks merged:" in text and "Ranks, step:" in text
    flagged = [line for line in text.splitlines() if line.rstrip().endswith("STRAGGLER")]
    assert len(flagged) == 1, text
    rank, run, count, p50, p99, vs_others, relative, individual, _ = flagged[0].split()
    assert (rank, run, count) == ("2", str(ids[2]), str(PER_RANK))
    p50_ms, p99_ms = (float(v.removesuffix("ms")) for v in (p50, p99))
    assert 10 * 1.25 * 0.95 < p50_ms < p99_ms < 10 * 1.25 * 1.5
    # the column is the figure the verdict states: the same percentage
    doc = job(d, "train-a")
    assert vs_others == "%+.1f%%" % doc["stragglers"][0]["slower_pct"]
    # NVIDIA's relative score: the fastest rank's median over its own, flagged below 0.75 with a star
    assert float(relative.rstrip("*")) == pytest.approx(min(r["p50_ms"] for r in doc["ranks"]["step"]) / p50_ms,
                                                        abs=0.002)
    assert relative.endswith("*") == (float(relative.rstrip("*")) < 0.75)
    assert "1 straggler:\n  rank 2 (run %d)" % ids[2] in text

    r = d.ctl("report", "--job", "train-a", "--json")
    assert r.returncode == 0
    slow = json.loads(out(r))
    assert [s["run"] for s in slow["stragglers"]] == [ids[2]]
    r = d.ctl("report", "--job", "train-a", "--window", "1h", "--json")
    assert r.returncode == 0 and [s["run"] for s in json.loads(out(r))["stragglers"]] == [ids[2]]

    # errors: an unknown job (1), --job with a run ID or --slo (2)
    r = d.ctl("report", "--job", "nope")
    assert r.returncode == 1 and len(err(r).strip().splitlines()) == 1 and "nope" in err(r)
    assert d.ctl("report", "--job", "train-a", str(ids[0])).returncode == 2
    assert d.ctl("report", "--job", "train-a", "--slo", "step=5ms@p99").returncode == 2
    assert d.ctl("report").returncode == 2

    # the same job without the slow rank's slowdown: compare the merged ops
    start_job(d, agents, "train-d", [1.0, 1.0, 1.0, 1.0])
    r = d.ctl("report", "--job", "train-d", "--json")
    assert r.returncode == 0
    base = tmp_path / "base.json"
    cur = tmp_path / "cur.json"
    base.write_text(out(r))
    cur.write_text(json.dumps(slow))
    r = ctl_alone("compare", base, cur, "--json")
    assert r.returncode == 1, out(r) + err(r)
    rows = {m["metric"]: m for m in json.loads(out(r))["metrics"]}
    assert set(rows) == {"step p50_ms", "step p90_ms", "step p99_ms"}
    assert rows["step p99_ms"]["verdict"] == "REGRESSED"
    assert ctl_alone("compare", base, base).returncode == 0
    r = ctl_alone("compare", cur, base)
    assert r.returncode == 0 and "improved" in out(r)
    # a job document against a run report: refused
    run_report = tmp_path / "run.json"
    run_report.write_text(out(d.ctl("report", ids[0], "--json")))
    r = ctl_alone("compare", base, run_report)
    assert r.returncode == 2 and "job report" in err(r)


def test_part_of_a_job_on_this_host(mlmond, agents):
    """A host that sees 2 of the 4 ranks a job was started with says so, and
    says that its verdicts are local."""
    ids = []
    for rank, scale in ((0, 1.0), (1, 1.3)):
        a = agents()
        run = mlmond.register(a.pid, tags={"job_id": "wide", "rank": str(rank), "world_size": "4"})
        send_timings(a, mlmond.statsd_path, "step", timings(f"wide/{rank}", scale))
        ids.append(run["id"])
    for rid in ids:
        settle(lambda: op_count(mlmond, rid, "step", "window=1h"), PER_RANK, f"timings of run {rid}", quiet=0)
    doc = job(mlmond, "wide")
    assert (doc["world_size"], doc["ranks_here"], doc["partial"], doc["view"]) == \
        (4, 2, True, "2 of 4 ranks on this host")
    # two ranks and no op that holds a collective: which is slow cannot be told
    assert doc["stragglers"] == [] and len(doc["undecided"]) == 1
    # with an op declared to hold one, the verdict is made, and says it is local
    doc = job(mlmond, "wide", "?collective=step")
    assert [s["run"] for s in doc["stragglers"]] == [ids[0]] and doc["stragglers"][0]["kind"] == "waited_for"
    s = doc["stragglers"][0]
    assert s["local"] and s["reason"].endswith("; judged among the 2 of 4 ranks on this host"), s
    listed = {j["job_id"]: j for j in mlmond.get("/v1/jobs")[1]["jobs"]}
    assert (listed["wide"]["world_size"], listed["wide"]["attempt"], listed["wide"]["state"]) == (4, 0, "running")
    text = mlmond.ctl("report", "--job", "wide").stdout.decode()
    assert text.startswith("job wide: 2 runs, 2 running; 2 of 4 ranks on this host\n"), text


def test_job_ids_too_long_and_attempts_unknown(slow_job):
    d, _, _ = slow_job
    long_id = "j" * 129
    # the API and the web page agree: no job id is that long
    for path in (f"/v1/jobs/{long_id}", f"/jobs/{long_id}"):
        st, e = json_error(d, "GET", path)
        assert st == 400 and "not a job id" in e["message"], (path, e)
    st, e = json_error(d, "GET", "/v1/jobs/" + "j" * 128)
    assert st == 404
    st, e = json_error(d, "GET", "/v1/jobs/train-a?attempt=3")
    assert st == 404 and "attempt 3" in e["message"]
    assert json_error(d, "GET", "/v1/jobs/train-a?attempt=x")[0] == 400
    assert d.ctl("report", "--job", "train-a", "--attempt", "x").returncode == 2
    assert d.ctl("report", "--attempt", "0", "1").returncode == 2

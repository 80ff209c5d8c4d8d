# SPDX-License-Identifier: MIT
"""Service-level objectives on latency: GET .../latency?slo=OP:TARGET@PCT
and mlmonctl report --slo OP=TARGET@pPCT, over real StatsD timings of a
known distribution (1..1000 ms, one of each), so the exact answers are
known: the share above a target, and the percentile."""

import math
import time

from conftest import strict_json
from test_statsd import agents, latency, op_count, registered, settle  # noqa: F401

# the histogram's relative accuracy: a bucket holding the target may be
# counted on either side of it
REL = 0.01
VALUES = [float(v) for v in range(1, 1001)]
SLO_KEYS = ["op", "target_ms", "percentile", "count", "over", "over_share", "percentile_ms", "met"]


def out(r):
    return r.stdout.decode()


def err(r):
    return r.stderr.decode()


def exact_quantile(pct):
    s = sorted(VALUES)
    return s[int(math.floor(pct / 100.0 * (len(s) - 1)))]


def over_bounds(target):
    """The fewest and most values the daemon may count above target."""
    return (sum(v > target * (1 + REL) for v in VALUES), sum(v > target * (1 - REL) for v in VALUES))


def timed_run(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    dgrams = ["\n".join(f"inference:{v:g}|ms" for v in VALUES[i:i + 50]) for i in range(0, len(VALUES), 50)]
    a.unix(mlmond.statsd_path, dgrams)
    settle(lambda: op_count(mlmond, rid, "inference"), len(VALUES), "timings taken")
    return a, rid


def test_slo_over_the_latency_histogram(mlmond, agents):
    _, rid = timed_run(mlmond, agents)
    body = latency(mlmond, rid, "window=1m&slo=inference:50ms@95,inference:0.99s@95,load:200ms@99")
    assert "inference" in body["ops"] and "slo" in body
    missed, met, none = body["slo"]
    for o in (missed, met, none):
        assert list(o) == SLO_KEYS, o

    assert missed["op"] == "inference" and missed["target_ms"] == 50.0 and missed["percentile"] == 95.0
    assert missed["count"] == 1000
    lo, hi = over_bounds(50.0)
    assert lo <= missed["over"] <= hi and missed["over_share"] == missed["over"] / 1000, missed
    assert abs(missed["percentile_ms"] - exact_quantile(95)) <= REL * exact_quantile(95), missed
    assert missed["met"] is False

    assert met["target_ms"] == 990.0 and met["met"] is True, met
    lo, hi = over_bounds(990.0)
    assert lo <= met["over"] <= hi, (met, lo, hi)
    assert met["percentile_ms"] <= 990.0

    assert none == {"op": "load", "target_ms": 200.0, "percentile": 99.0, "count": 0, "over": None,
                    "over_share": None, "percentile_ms": None, "met": None}, none

    # other units and a 'p'; op= restricts the ops shown, not the objectives
    body = latency(mlmond, rid, "op=nothing&slo=inference:2000us@p50.5")
    assert body["ops"] == {} and body["slo"][0]["target_ms"] == 2.0 and body["slo"][0]["percentile"] == 50.5
    # without slo=, no slo field
    assert "slo" not in latency(mlmond, rid, "window=1m")

    # the span: timings before the mark do not count
    time.sleep(1.1)  # data is kept per 1-second slice: the mark must fall in a later one
    st, _ = mlmond.post(f"/v1/runs/{rid}/marks", {"label": "later"})
    assert st == 201
    o = latency(mlmond, rid, "since_mark=later&slo=inference:50ms@95")["slo"][0]
    assert o["count"] == 0 and o["met"] is None, o

    for bad, word in [("inference", "expected OP:TARGET@PERCENTILE"), ("inference:50@95", "target"),
                      ("inference:50m@95", "target"), ("inference:-5ms@95", "target"),
                      ("inference:50ms@100", "percentile"), ("inference:50ms@0", "percentile"),
                      ("inference:50ms@p", "percentile"), ("inference:50ms@1e1", "percentile"),
                      (":50ms@95", "expected"), ("", "at least one"), (",".join(["a:1ms@50"] * 17), "at most")]:
        r = mlmond.request("GET", f"/v1/runs/{rid}/latency?slo={bad}", None, unix=True)
        assert r.status == 400, (bad, r.status, r.body)
        e = r.json["error"]
        assert e["code"] == "bad_request" and "slo" in e["message"] and word in e["message"], (bad, e)


def test_report_slo_gates_like_compare(mlmond, agents):
    _, rid = timed_run(mlmond, agents)

    r = mlmond.ctl("report", rid, "--slo", "inference=990ms@p95", "--slo", "inference=1s@50")
    assert r.returncode == 0, (out(r), err(r))
    text = out(r)
    assert "Objectives over the span:" in text and "All 2 objectives met." in text, text
    row = next(line.split() for line in text.splitlines() if line.strip().startswith("inference p95"))
    assert row[:4] == ["inference", "p95", "<=", "990.00ms"] and row[-1] == "MET", row
    assert row[4] == "1000", row

    r = mlmond.ctl("report", rid, "--slo", "inference=50ms@p95")
    assert r.returncode == 1, (out(r), err(r))
    assert "MISSED" in out(r) and "1 of 1 objective missed" in out(r), out(r)

    r = mlmond.ctl("report", rid, "--slo", "load=200ms@99", "--slo", "inference=990ms@95")
    assert r.returncode == 1 and "no timings" in out(r), out(r)

    r = mlmond.ctl("--json", "report", rid, "--slo", "inference=50ms@95")
    assert r.returncode == 1
    doc = strict_json(r.stdout)
    assert [o["met"] for o in doc["latency"]["slo"]] == [False], doc["latency"]

    # without --slo nothing changes
    r = mlmond.ctl("report", rid)
    assert r.returncode == 0 and "Objectives" not in out(r), out(r)

    for bad in ("inference", "inference=50@95", "inference=50ms@100", "=50ms@95", "a,b=5ms@50",
                "inference=50ms@p", "inference=5d@50"):
        r = mlmond.ctl("report", rid, "--slo", bad)
        assert r.returncode == 2 and out(r) == "", (bad, r)
        assert len(err(r).strip().splitlines()) <= 2 and "objective" in err(r), (bad, err(r))

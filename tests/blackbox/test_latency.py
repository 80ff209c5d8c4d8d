# SPDX-License-Identifier: MIT
"""Latency percentiles, throughput of ops, the JSON twin of StatsD, marks,
and their persistence, end to end: known distributions go in through the
real sockets, and /latency must give the exact count, min, max and mean and
quantiles within 1% of the ones computed here (the daemon targets the value
of rank floor(q * (n - 1)) in sorted order)."""

import json
import math
import os
import random
import signal
import sqlite3
import time

import pytest

from conftest import MLMONCTL, now_ms, wait_for
from test_statsd import (agents, cmd, counters, delta, latency, lines, op_count, registered,  # noqa: F401
                         settle, throughput_ops)

QUANTILE_REL = 0.01


def exact_quantile(sorted_values, pct):
    return sorted_values[int(math.floor(pct / 100.0 * (len(sorted_values) - 1)))]


def lognormal_ms(n, seed, mu=math.log(8.0), sigma=0.6):
    """n timings in ms, 3 decimals (printed and parsed back exactly)."""
    rng = random.Random(seed)
    return [float(f"{rng.lognormvariate(mu, sigma):.3f}") for _ in range(n)]


def send_timings(agent, path, op, values, per_datagram=50):
    dgrams = ["\n".join(f"{op}:{v:.3f}|ms" for v in values[i:i + per_datagram])
              for i in range(0, len(values), per_datagram)]
    agent.unix(path, dgrams)


def check_stats(o, values, pcts):
    s = sorted(values)
    assert o["count"] == len(values)
    assert o["min_ms"] == s[0] and o["max_ms"] == s[-1]
    mean = math.fsum(values) / len(values)
    assert o["mean_ms"] == pytest.approx(mean, rel=1e-6)
    assert o["total_ms"] == pytest.approx(math.fsum(values), rel=1e-9)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    assert o["stddev_ms"] == pytest.approx(std, rel=1e-6)
    for p in pcts:
        key = f"p{p:g}_ms"
        want = exact_quantile(s, p)
        assert o[key] == pytest.approx(want, rel=QUANTILE_REL), f"{key}: {o[key]} vs exact {want}"
        assert s[0] <= o[key] <= s[-1]


def json_error(d, method, path, body=None, unix=True):
    r = d.request(method, path, body, unix=unix)
    assert r.status >= 400, f"{method} {path}: {r.status} {r.body[:300]!r}, expected an error"
    err = r.json["error"] if r.body else None
    assert err and isinstance(err.get("code"), str) and err.get("message"), (r.status, r.body)
    return r.status, err


# ---- 8. a known distribution, end to end ----------------------------------------

def test_percentiles_of_a_lognormal_distribution(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    values = lognormal_ms(20000, seed=20240501)
    before = counters(mlmond)
    send_timings(a, mlmond.statsd_path, "inference", values)
    settle(lambda: op_count(mlmond, rid, "inference"), 20000, "timings taken")
    assert delta(counters(mlmond), before) == {"statsd_received": 20000, "statsd_malformed": 0,
                                               "statsd_unmatched": 0}

    body = latency(mlmond, rid, "window=1m&q=50,90,99")
    assert body["window_s"] == 60.0 and body["since_mark"] is None
    assert body["until"] - body["from"] >= 60000
    o = body["ops"]["inference"]
    assert set(o) == {"category", "count", "total_ms", "mean_ms", "stddev_ms", "min_ms", "max_ms",
                      "p50_ms", "p90_ms", "p99_ms"}
    check_stats(o, values, [50, 90, 99])

    # other quantiles, and the key names after normalisation
    o = latency(mlmond, rid, "window=1m&q=0.1,25,75,99.9,99.99,100")["ops"]["inference"]
    check_stats(o, values, [0.1, 25, 75, 99.9, 99.99, 100])
    o = latency(mlmond, rid, "q=50.000,99.90")["ops"]["inference"]
    assert "p50_ms" in o and "p99.9_ms" in o

    # op= restricts; an op with no timings is absent
    assert set(latency(mlmond, rid, "op=inference")["ops"]) == {"inference"}
    assert latency(mlmond, rid, "op=nothing")["ops"] == {}


def test_two_ops_and_a_second_run_do_not_mix(mlmond, agents):
    a, b = agents(), agents()
    ra, rb = registered(mlmond, a), registered(mlmond, b)
    va = lognormal_ms(3000, seed=1)
    vb = lognormal_ms(2000, seed=2, mu=math.log(100.0), sigma=1.0)
    vc = [float(i) for i in range(1, 1001)]  # uniform 1..1000: exact ranks are easy to check
    send_timings(a, mlmond.statsd_path, "pre", va)
    send_timings(a, mlmond.statsd_path, "infer", vb)
    send_timings(b, mlmond.statsd_path, "pre", vc)
    settle(lambda: op_count(mlmond, ra, "infer"), 2000, "run a's infer")
    settle(lambda: op_count(mlmond, rb, "pre"), 1000, "run b's pre")
    ops_a = latency(mlmond, ra, "q=50,90,99")["ops"]
    check_stats(ops_a["pre"], va, [50, 90, 99])
    check_stats(ops_a["infer"], vb, [50, 90, 99])
    ob = latency(mlmond, rb, "q=50,90,99")["ops"]["pre"]
    check_stats(ob, vc, [50, 90, 99])
    assert ob["p50_ms"] == pytest.approx(500.0, rel=0.01)  # rank floor(0.5 * 999) = 499 -> value 500


# ---- 9. throughput of ops --------------------------------------------------------

def test_throughput_of_a_paced_counter(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    # 2 lines every 10 ms for 10 s from the next whole second B on: 200/s
    out = a.call("pace", timeout=30, path=mlmond.statsd_path, line="req:1|c", per_batch=2, period_ms=10,
                 batches=1000)
    start, last = out["start_ms"], out["last_ms"]
    assert last < start + 10000 + 200, f"the sender fell behind: last batch at +{last - start:.0f} ms"
    assert out["late"] < 100, f"{out['late']} of 1000 batches more than 5 ms late"
    end = start + 10000  # the end of sending; the agent stays alive
    settle(lambda: throughput_ops(mlmond, rid, f"window=10s&until={end}").get("req", {}).get("count"),
           2000.0, "counted requests")
    w = throughput_ops(mlmond, rid, f"window=10s&until={end}")["req"]
    assert w["per_s"] == pytest.approx(200.0, rel=0.05)
    # the second half alone: the pacing held
    w5 = throughput_ops(mlmond, rid, f"window=5s&until={end}")["req"]
    assert w5["count"] == pytest.approx(1000, rel=0.05) and w5["per_s"] == pytest.approx(200.0, rel=0.05)
    # several windows in one answer
    st, body = mlmond.get(f"/v1/runs/{rid}/throughput?window=10s,1m&until={end}")
    assert st == 200 and [w["window_s"] for w in body["windows"]] == [10, 60]
    assert body["windows"][1]["ops"]["req"]["count"] == 2000.0
    # the 1m window reaches back before the registration: the rate divides
    # by the part of it the run covers, not by 60 s
    covered_s = (end - mlmond.run(rid)["registered_ts"]) / 1000.0
    assert covered_s < 30
    assert body["windows"][1]["ops"]["req"]["per_s"] == pytest.approx(2000 / covered_s, rel=0.05)
    assert a.proc.poll() is None and mlmond.run(rid)["state"] == "running"


def test_rates_divide_by_the_span_the_run_covers(mlmond, agents):
    """A short run in a long window: 50 ops/s for ~10 s reads 50/s in a 5 min
    window, while the run goes on and once it is over."""
    a = agents()
    rid = registered(mlmond, a, interval="250ms")
    path = f"/v1/runs/{rid}/observations"
    rate, period, seconds = 50, 0.1, 10
    per_batch = int(rate * period)
    t0 = time.monotonic()
    sent = 0
    for k in range(int(seconds / period)):
        delay = t0 + k * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        st, body = mlmond.post(path, [{"op": "step", "count": 1}] * per_batch)
        assert (st, body) == (202, {"accepted": per_batch})
        sent += per_batch
    # sent over (seconds - period) + the span to the registration: at most
    # one batch off the steady rate; a batch more covers the query's lag
    time.sleep(period)

    def per_s():
        st, body = mlmond.get(f"/v1/runs/{rid}/throughput?window=5m")
        assert st == 200, body
        w = body["windows"][0]
        assert w["window_s"] == 300
        return w["ops"]["step"]

    during = per_s()
    assert during["count"] == sent
    assert during["per_s"] == pytest.approx(rate, rel=0.05), f"during the run: {during}"

    st, _ = mlmond.delete(f"/v1/runs/{rid}")
    assert st in (200, 204), st
    wait_for(lambda: mlmond.run(rid)["state"] != "running", 5, what="the run to end")
    after = per_s()
    assert after["count"] == sent
    assert after["per_s"] == pytest.approx(rate, rel=0.05), f"after the run: {after}"
    # the 1m window too: the same part of it is covered
    st, body = mlmond.get(f"/v1/runs/{rid}/throughput?window=1m")
    assert body["windows"][0]["ops"]["step"]["per_s"] == pytest.approx(rate, rel=0.05)


# ---- 10. the JSON twin ---------------------------------------------------------

BAD_BODIES = [
    ("not an array", {"op": "inf", "ms": 1}),
    ("empty array", []),
    ("bad item last", [{"op": "inf", "ms": 1}, {"op": "inf", "ms": 2}, {"op": "inf", "ms": -1}]),
    ("no op", [{"op": "inf", "ms": 1}, {"ms": 1}]),
    ("empty op", [{"op": "", "ms": 1}]),
    ("op not a string", [{"op": 5, "ms": 1}]),
    ("op with a control char", [{"op": "a\u0001b", "ms": 1}]),
    ("op over 200 bytes", [{"op": "a" * 201, "ms": 1}]),
    ("no value", [{"op": "inf"}]),
    ("two values", [{"op": "inf", "ms": 1, "count": 1}]),
    ("ms a string", [{"op": "inf", "ms": "1"}]),
    ("ms null", [{"op": "inf", "ms": None}]),
    ("unknown field", [{"op": "inf", "ms": 1, "unit": "s"}]),
    ("category on a gauge", [{"op": "q", "gauge": 1, "category": "c"}]),
    ("category empty", [{"op": "inf", "ms": 1, "category": ""}]),
    ("item not an object", [{"op": "inf", "ms": 1}, 3]),
    ("NaN", b'[{"op": "inf", "ms": 1}, {"op": "inf", "ms": NaN}]'),
    ("1e999", b'[{"op": "inf", "ms": 1}, {"op": "inf", "ms": 1e999}]'),
    ("not JSON", b'[{"op": "inf", "ms": 1},'),
]


def test_json_observations(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a, interval="250ms")
    path = f"/v1/runs/{rid}/observations"
    t0 = int(time.time() * 1000)
    st, body = mlmond.post(path, [{"op": "inf", "ms": 10, "category": "model_inference"},
                                  {"op": "inf", "ms": 20.5},
                                  {"op": "req", "count": 3},
                                  {"op": "qd", "gauge": 5}])
    assert (st, body) == (202, {"accepted": 4})
    o = latency(mlmond, rid)["ops"]["inf"]
    assert (o["count"], o["min_ms"], o["max_ms"], o["category"]) == (2, 10.0, 20.5, "model_inference")
    ops = throughput_ops(mlmond, rid)
    assert ops["req"]["count"] == 3.0 and ops["inf"]["count"] == 2.0

    def gauges():
        st, b = mlmond.get(f"/v1/runs/{rid}/samples?from={t0 - 1000}")
        return [(g["name"], g["value"]) for g in b["gauges"]]
    settle(gauges, [("qd", 5.0)], "the stored gauge")

    for what, bad in BAD_BODIES:
        r = mlmond.request("POST", path, bad, unix=True)
        assert r.status == 400, f"{what}: {r.status} {r.body!r}"
        assert r.json["error"]["code"] == "bad_request", what
    # nothing of any refused body was taken
    assert op_count(mlmond, rid, "inf") == 2
    assert {k: v["count"] for k, v in throughput_ops(mlmond, rid).items()} == {"inf": 2.0, "req": 3.0}

    # refusals around the run
    assert json_error(mlmond, "POST", "/v1/runs/987654/observations", [{"op": "a", "ms": 1}])[0] == 404
    assert json_error(mlmond, "POST", path, [{"op": "a", "ms": 1}], unix=False)[0] == 405
    a.close()
    wait_for(lambda: mlmond.run(rid)["state"] == "exited", 5, what="the run to end")
    st, err = json_error(mlmond, "POST", path, [{"op": "a", "ms": 1}])
    assert (st, err["code"]) == (409, "conflict")
    assert op_count(mlmond, rid, "inf", "window=5m") == 2


def test_json_observations_at_most_10000(make_mlmond, agents):
    # 10 000 items take ~220 KB: more than the default [http] max_body_bytes
    d = make_mlmond(config_text="[http]\nmax_body_bytes = 1048576\n")
    a = agents()
    rid = registered(d, a)
    path = f"/v1/runs/{rid}/observations"
    values = lognormal_ms(10000, seed=7)
    st, body = d.post(path, [{"op": "bulk", "ms": v} for v in values])
    assert (st, body) == (202, {"accepted": 10000})
    check_stats(latency(d, rid, "q=50,90,99")["ops"]["bulk"], values, [50, 90, 99])
    r = d.request("POST", path, [{"op": "bulk", "ms": 1}] * 10001, unix=True)
    assert r.status == 400 and r.json["error"]["code"] == "bad_request", r.body
    assert op_count(d, rid, "bulk") == 10000


def test_json_observations_find_the_callers_run(mlmond, agents):
    a, stranger = agents(), agents()
    rid = registered(mlmond, a)
    obs = json.dumps([{"op": "child", "ms": 4}, {"op": "child", "ms": 6}])

    # a forked child (never registered) of the registered agent
    out = a.call("fork", depth=1, then=cmd("http", socket=mlmond.socket_path, method="POST",
                                           path="/v1/observations", body=obs))
    r = out["result"]
    assert r["status"] == 202 and json.loads(r["body"]) == {"accepted": 2, "run": rid}, r
    # a grandchild
    out = a.call("fork", depth=2, then=cmd("http", socket=mlmond.socket_path, method="POST",
                                           path="/v1/observations", body=obs))
    assert out["result"]["status"] == 202 and json.loads(out["result"]["body"])["run"] == rid
    # the agent itself
    r = a.call("http", socket=mlmond.socket_path, method="POST", path="/v1/observations", body=obs)
    assert r["status"] == 202 and json.loads(r["body"])["run"] == rid
    o = latency(mlmond, rid)["ops"]["child"]
    assert (o["count"], o["min_ms"], o["max_ms"]) == (6, 4.0, 6.0)

    # mlmonctl observe run by the registered process (its child, really)
    r = a.call("run", argv=[MLMONCTL, "--socket", mlmond.socket_path, "observe", "--category", "cli_cat",
                            "cli", "4.5"])
    assert r["rc"] == 0, r
    r = a.call("run", argv=[MLMONCTL, "--socket", mlmond.socket_path, "--json", "observe", "cli", "5.5"])
    assert r["rc"] == 0 and json.loads(r["stdout"]) == {"accepted": 1, "run": rid}, r
    o = latency(mlmond, rid)["ops"]["cli"]
    assert (o["count"], o["total_ms"], o["category"]) == (2, 10.0, "cli_cat")

    # an unregistered process: 404, nothing taken anywhere
    r = stranger.call("http", socket=mlmond.socket_path, method="POST", path="/v1/observations", body=obs)
    assert r["status"] == 404 and json.loads(r["body"])["error"]["code"] == "not_found", r
    r = stranger.call("run", argv=[MLMONCTL, "--socket", mlmond.socket_path, "observe", "cli", "1"])
    assert r["rc"] == 1 and r["stderr"], r
    assert op_count(mlmond, rid, "child") == 6 and op_count(mlmond, rid, "cli") == 2
    # the test process itself is not registered either
    assert json_error(mlmond, "POST", "/v1/observations", [{"op": "a", "ms": 1}])[0] == 404


# ---- 11. marks -------------------------------------------------------------------

def next_second(margin=0.05):
    """Sleeps into the next 1-second slice: data before and after a mark
    must not share the slice the mark is in (slices are the granularity)."""
    t = time.time()
    time.sleep(math.floor(t) + 1 - t + margin)


def test_marks(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    path = mlmond.statsd_path
    marks = f"/v1/runs/{rid}/marks"

    a.unix(path, [lines("m:1|ms", 10)])
    settle(lambda: op_count(mlmond, rid, "m"), 10, "timings before the mark")
    next_second()
    t_before = int(time.time() * 1000)
    st, mk = mlmond.post(marks, {"label": "warmup-done"})
    t_after = int(time.time() * 1000)
    assert st == 201 and mk["run"] == rid and mk["label"] == "warmup-done", mk
    assert t_before <= mk["ts"] <= t_after
    a.unix(path, [lines("m:2|ms", 7)])
    settle(lambda: op_count(mlmond, rid, "m"), 17, "all the timings")

    body = latency(mlmond, rid, "since_mark=warmup-done")
    assert body["since_mark"] == {"label": "warmup-done", "ts": mk["ts"]}
    o = body["ops"]["m"]
    assert (o["count"], o["min_ms"], o["max_ms"]) == (7, 2.0, 2.0)
    assert body["from"] <= mk["ts"] and body["from"] > mk["ts"] - 1000

    # the latest mark of that label counts
    next_second()
    st, mk2 = mlmond.post(marks, {"label": "warmup-done"})
    assert st == 201 and mk2["ts"] > mk["ts"]
    a.unix(path, [lines("m:3|ms", 3)])
    settle(lambda: op_count(mlmond, rid, "m", "since_mark=warmup-done"), 3, "timings after the second mark")
    assert latency(mlmond, rid, "since_mark=warmup-done")["ops"]["m"]["min_ms"] == 3.0

    st, lst = mlmond.get(marks)
    assert st == 200 and lst == {"marks": [{"label": "warmup-done", "ts": mk["ts"]},
                                           {"label": "warmup-done", "ts": mk2["ts"]}]}

    # unknown mark
    st, err = json_error(mlmond, "GET", f"/v1/runs/{rid}/latency?since_mark=nope", unix=False)
    assert (st, err["code"]) == (404, "not_found")
    # labels
    for bad in [{"label": ""}, {"label": "x" * 65}, {"label": "a\nb"}, {"label": 5}, {}, {"label": "a", "x": 1}]:
        st, err = json_error(mlmond, "POST", marks, bad)
        assert (st, err["code"]) == (400, "bad_request"), bad
    st, mk3 = mlmond.post(marks, {"label": "é" * 32})  # 64 bytes of UTF-8
    assert st == 201, mk3
    assert json_error(mlmond, "POST", marks, {"label": "x"}, unix=False)[0] == 405
    assert json_error(mlmond, "POST", "/v1/runs/987654/marks", {"label": "x"})[0] == 404
    assert json_error(mlmond, "GET", "/v1/runs/987654/marks", unix=False)[0] == 404

    # an exited run: no new marks (409), the old ones stay and still work
    a.close()
    wait_for(lambda: mlmond.run(rid)["state"] == "exited", 5, what="the run to end")
    st, err = json_error(mlmond, "POST", marks, {"label": "too-late"})
    assert (st, err["code"]) == (409, "conflict")
    st, lst = mlmond.get(marks)
    assert st == 200 and [m["label"] for m in lst["marks"]] == ["warmup-done", "warmup-done", "é" * 32]
    assert op_count(mlmond, rid, "m", "since_mark=warmup-done") == 3


# ---- 12. bad queries ---------------------------------------------------------------

def test_bad_latency_queries(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    a.unix(mlmond.statsd_path, ["op:1|ms"])
    settle(lambda: op_count(mlmond, rid, "op"), 1, "one timing")
    L = f"/v1/runs/{rid}/latency"
    bad = [
        ("q=0", 400), ("q=101", 400), ("q=abc", 400), ("q=50.1234", 400), ("q=-5", 400), ("q=", 400),
        ("q=" + ",".join(str(i) for i in range(1, 12)), 400),  # 11 quantiles
        ("q=nan", 400), ("q=inf", 400), ("q=50,abc", 400), ("q=100.001", 400),
        ("q=+50", 400), ("q=%2050", 400),
        ("window=1m&from=5m", 400), ("window=5x", 400), ("window=0s", 400), ("window=", 400),
        ("from=yesterday", 400), ("until=soon", 400), ("from=1s&until=1m", 400),
        ("since_mark=nope", 404), ("bogus=1", 400), ("q=50&q=90", 400),
    ]
    for query, status in bad:
        st, err = json_error(mlmond, "GET", f"{L}?{query}", unix=False)
        assert st == status, f"{query}: {st} {err}"
        assert err["code"] == {400: "bad_request", 404: "not_found"}[status], query
    for path, status in [("/v1/runs/987654/latency", 404), ("/v1/runs/abc/latency", 400)]:
        assert json_error(mlmond, "GET", path, unix=False)[0] == status, path

    # the edges that are fine
    good = {"q=100": ["p100_ms"], "q=0.001": ["p0.001_ms"], "q=99.999": ["p99.999_ms"],
            "q=" + ",".join(str(i) for i in range(1, 11)): [f"p{i}_ms" for i in range(1, 11)],
            "from=5m&until=0s": ["p50_ms", "p90_ms", "p99_ms"],
            "window=1m&q=50": ["p50_ms"]}
    for query, keys in good.items():
        o = latency(mlmond, rid, query)["ops"]["op"]
        assert [k for k in o if k.startswith("p")] == keys, (query, o)
        assert all(o[k] == 1.0 for k in keys)


@pytest.mark.parametrize("q", ["1e-4", "0x10"])
def test_quantile_not_in_plain_decimals_is_refused(mlmond, agents, q):
    a = agents()
    rid = registered(mlmond, a)
    a.unix(mlmond.statsd_path, ["op:1|ms"])
    settle(lambda: op_count(mlmond, rid, "op"), 1, "one timing")
    st, err = json_error(mlmond, "GET", f"/v1/runs/{rid}/latency?q={q}", unix=False)
    assert (st, err["code"]) == (400, "bad_request")


# ---- 13. persistence -----------------------------------------------------------------

def test_latency_survives_a_restart(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a, interval="250ms")
    t0 = int(time.time() * 1000)
    va = lognormal_ms(5000, seed=11)
    send_timings(a, mlmond.statsd_path, "lat", va)
    settle(lambda: op_count(mlmond, rid, "lat"), 5000, "first batch")
    time.sleep(1.5)  # closed slices, stored by a tick
    vb = lognormal_ms(3000, seed=12, mu=math.log(20.0))
    send_timings(a, mlmond.statsd_path, "lat", vb)  # still in the open slice at SIGTERM
    a.unix(mlmond.statsd_path, ["req:2|c"])
    settle(lambda: op_count(mlmond, rid, "lat"), 8000, "second batch")
    t1 = int(time.time() * 1000)
    q = f"from={t0 - 2000}&until={t1}&q=50,90,99,99.9"
    before = latency(mlmond, rid, q)
    check_stats(before["ops"]["lat"], va + vb, [50, 90, 99, 99.9])
    thr_q = f"window={(t1 - t0) // 1000 + 5}s&until={t1}"
    thr_before = throughput_ops(mlmond, rid, thr_q)

    mlmond.restart()
    assert mlmond.run(rid)["state"] == "running"  # same process: sampled again
    after = latency(mlmond, rid, q)
    o, p = before["ops"]["lat"], after["ops"]["lat"]
    for k in ("count", "min_ms", "max_ms", "p50_ms", "p90_ms", "p99_ms", "p99.9_ms"):
        assert p[k] == o[k], f"{k}: {o[k]} before the restart, {p[k]} after"
    for k in ("total_ms", "mean_ms", "stddev_ms"):
        assert p[k] == pytest.approx(o[k], rel=1e-9), k
    assert (after["from"], after["until"]) == (before["from"], before["until"])
    assert throughput_ops(mlmond, rid, thr_q) == thr_before

    # and once the process is gone too
    a.close()
    wait_for(lambda: mlmond.run(rid)["state"] == "exited", 5, what="the run to end")
    mlmond.restart()
    assert latency(mlmond, rid, q)["ops"]["lat"]["count"] == 8000
    assert latency(mlmond, rid, q)["ops"]["lat"]["p99_ms"] == o["p99_ms"]


def test_timings_across_a_minute_boundary_all_counted(make_mlmond, agents):
    """A second's timings are stored at the first tick after it, and ticks
    here are 10 s apart: the maintenance pass that compacts a minute into
    the minute tier waits for the tick after the minute's end, or the
    timings of its last seconds would be missing from every answer that
    reads the minute tier (a window past the minute's end)."""
    d = make_mlmond(interval="10s")
    a = agents()
    rid = registered(d, a, interval="10s")
    # 12 s of timings across a minute's end
    now = time.time()
    s = now % 60
    start = now if 46 <= s <= 54 else now + (52 - s) % 60
    time.sleep(start - now)
    sent = 0
    while time.time() < start + 12:
        send_timings(a, d.statsd_path, "step", [1.0] * 5)
        sent += 5
        time.sleep(0.1)
    minute = math.floor(start / 60) * 60 * 1000
    # the minute compacted (compact_until past it), then the answer: the
    # minute tier holds its seconds, the raw slices the rest
    wait_for(lambda: compacted_past(d, minute + 60000), 40.0, what="the minute compacted")
    got = op_count(d, rid, "step", "window=5m")
    assert got == sent, f"{sent - got} of {sent} timings missing from the minute tier"


def compacted_past(d, ts_ms):
    with sqlite3.connect(f"file:{d.db_path}?mode=ro", uri=True) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'compact_until'").fetchone()
    return row is not None and int(row[0]) >= ts_ms


def test_timings_of_a_process_found_gone_by_a_tick(mlmond, agents):
    """A run's process may be found gone by a tick before its pidfd's event
    is handled (the tick's timer goes first): that run ends inside the
    tick's transaction, and what it timed since the last tick is stored
    all the same, as when the pidfd's event ends it."""
    # a run sampled before it in the same tick opens the tick's transaction
    registered(mlmond, agents())
    a = agents()
    rid = registered(mlmond, a)
    mlmond.wait_sample_after(rid, now_ms())
    send_timings(a, mlmond.statsd_path, "step", [2.0] * 30)
    # mlmond stopped: the agent exits and a tick comes due meanwhile, so
    # both are pending when it goes on
    os.kill(mlmond.proc.pid, signal.SIGSTOP)
    try:
        a.close()
        time.sleep(0.6)
    finally:
        os.kill(mlmond.proc.pid, signal.SIGCONT)
    wait_for(lambda: mlmond.run(rid)["state"] == "exited", 5.0, what="the run ended")
    o = latency(mlmond, rid, "window=5m")["ops"].get("step")
    assert o is not None and o["count"] == 30 and o["total_ms"] == 60.0, o

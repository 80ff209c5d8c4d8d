# SPDX-License-Identifier: MIT
"""A fleet: three mlmond instances (three databases, three ports: three
hosts), each watching one rank of a job that reports its step timings over
StatsD, one rank 30% slower, and Debian's real Prometheus with native
histograms on, scraping the three every 250 ms. Prometheus merges the
ranks' native histograms: the job's p99 over the last minute comes back
from PromQL within 1% of the exact p99 of the timings sent, the p99 of all
of them in the very bucket of the timing at its rank, and the slow rank
shows per instance. Then the Grafana dashboard (contrib/grafana): every
query of every panel, its variables resolved the way Grafana resolves them,
parses and returns series from that Prometheus (each rank's process holds
GPU memory through the NVML stand-in, so the GPU panels have data too).
Prometheus also runs the rules mlmond ships (contrib/prometheus), which
judge the job across the hosts: the straggler alert fires for the slow rank,
and for it alone.

Skipped without prometheus (Debian package prometheus)."""

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT, Mlmond, needs, wait_for
from test_latency import exact_quantile, lognormal_ms, send_timings
from test_metrics import Prometheus
from test_metrics_proto import bucket_index
from test_statsd import Agent, registered

GIB = 1 << 30

RANKS = 3
SLOW_RANK = 2
SLOWDOWN = 1.3
# Prometheus's quantile of a native histogram of schema 7 (buckets 0.54%
# wide) against the exact one
P99_REL = 0.01
JOB = "fleet-1"
# rate() extrapolates each series' increase to the window's ends, from its
# first and last samples in it: when the series are older than the window
# and scraped often, every series gets nearly the same factor, and the sum
# weighs the ranks as the timings did (a series born inside the window
# would be stretched by up to half a scrape interval over its short life).
SCRAPE_MS = 250
WINDOW_S = 10
SEL = f'{{tag_job_id="{JOB}",op="step"}}'


RULES = os.path.join(ROOT, "contrib", "prometheus", "mlmond.rules.yml")


def rules_now(dirname):
    """The shipped rules with their alerts' hold times ("for: 5m") at 0, so
    that an alert fires at its first evaluation: the conditions are the
    shipped ones, the wait is not the test's to make."""
    with open(RULES) as f:
        text = f.read()
    path = os.path.join(dirname, "mlmond.rules.yml")
    with open(path, "w") as f:
        f.write(re.sub(r"^(\s+)for: \S+$", r"\1for: 0s", text, flags=re.M))
    return path


class NativePrometheus(Prometheus):
    """Prometheus with native histograms on, scraping every target and
    running the rules mlmond ships."""

    def __init__(self, target_ports, rules):
        super().__init__(target_ports, ["--enable-feature=native-histograms"], interval=f"{SCRAPE_MS}ms",
                         rules=[rules])

    def targets(self):
        try:
            return self.api("/api/v1/targets")["data"]["activeTargets"]
        except OSError:
            return []

    def query(self, q):
        out = self.api("/api/v1/query", query=q)
        assert out["status"] == "success", out
        return out["data"]["result"]


def timings(rank, n, seed):
    slow = SLOWDOWN if rank == SLOW_RANK else 1.0
    return [float(f"{v * slow:.3f}") for v in lognormal_ms(n, seed=seed, mu=4.6, sigma=0.25)]


def prometheus_bucket(values_ms, q):
    """The bounds in seconds of the schema-7 bucket, (2^((i-1)/128),
    2^(i/128)], where histogram_quantile(q) ends up on a histogram of
    exactly these timings: the first bucket whose cumulative count reaches
    the rank q * count, so the one that holds the ceil(rank)-th smallest
    timing; the answer is interpolated within it."""
    i = bucket_index(sorted(values_ms)[math.ceil(q * len(values_ms)) - 1])
    return 2 ** ((i - 1) / 128), 2 ** (i / 128)


class Fleet:
    """The hosts, their ranks (one agent each) and the Prometheus scraping
    them, for the tests of this module; stopped (and the hosts' logs
    checked) at the end."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mlmond-bb-", dir="/tmp")
        os.chmod(self.dir, 0o755)
        self.hosts, self.ranks, self.prom = [], [], None

    def start(self):
        standin = os.environ.get("NVML_STANDIN")
        for i in range(RANKS):
            a = Agent()
            self.ranks.append(a)
            sub = tempfile.mkdtemp(dir=self.dir)
            os.chmod(sub, 0o755)
            config = ""
            if standin:
                # the stand-in NVML says the rank's process holds GPU memory and keeps the GPU busy
                os.environ["NVML_STANDIN_PROCS"] = f"{a.pid}:{(i + 1) * GIB}:{40 + 10 * i}"
                config = f"[gpu]\nnvml_library = {standin}\n"
            try:
                self.hosts.append(Mlmond(sub, interval="1s", config_text=config))
            finally:
                os.environ.pop("NVML_STANDIN_PROCS", None)
            registered(self.hosts[-1], a, name=f"rank{i}", tags={"job_id": JOB, "rank": str(i)})
        self.prom = NativePrometheus([d.port for d in self.hosts], rules_now(self.dir))

        def all_up():
            if self.prom.proc.poll() is not None:
                pytest.fail(f"prometheus exited {self.prom.proc.returncode}:\n{self.prom.logs()}")
            t = self.prom.targets()
            return len(t) == RANKS and all(x["health"] == "up" for x in t)
        wait_for(all_up, 60, interval=0.2, what="prometheus to scrape the three hosts")

    def stop(self):
        failures = []
        if self.prom:
            self.prom.stop()
        for d in self.hosts:
            try:
                d.stop()
                d.check_stderr()
            except BaseException as e:  # pytest.fail raises a BaseException
                failures.append(str(e))
        for a in self.ranks:
            a.close()
        subprocess.run(["rm", "-rf", "--one-file-system", self.dir], check=False)
        if failures:
            pytest.fail("\n".join(failures))


@pytest.fixture(scope="module")
def fleet():
    if not shutil.which("prometheus"):
        needs("prometheus", "it is not installed (Debian package prometheus)")
    f = Fleet()
    try:
        f.start()
        yield f
    finally:
        f.stop()


def test_fleet_p99_from_native_histograms(fleet):
    hosts, ranks, prom = fleet.hosts, fleet.ranks, fleet.prom

    def counts_are(n):
        res = prom.query(f'histogram_count(mlmond_run_op_duration_seconds{SEL})')
        return len(res) == RANKS and all(float(r["value"][1]) == n for r in res)

    # a few timings first, then a wait, so that each series is older
    # than the window that rate() looks at: its increase is what follows
    first = [timings(i, 100, seed=100 + i) for i in range(RANKS)]
    for i, d in enumerate(hosts):
        send_timings(ranks[i], d.statsd_path, "step", first[i])
    wait_for(lambda: counts_are(100), 30, interval=0.2, what="the first timings in prometheus")
    time.sleep(WINDOW_S + 1)
    sent = [timings(i, 3000, seed=200 + i) for i in range(RANKS)]
    for i, d in enumerate(hosts):
        send_timings(ranks[i], d.statsd_path, "step", sent[i])
    wait_for(lambda: counts_are(3100), 30, interval=0.2, what="all timings in prometheus")

    window = sorted(v for s in sent for v in s)
    every = sorted(v for s in first + sent for v in s)
    got = prom.query(f'histogram_quantile(0.99, sum(rate(mlmond_run_op_duration_seconds{SEL}[{WINDOW_S}s])))')
    assert len(got) == 1, got
    p99_window = float(got[0]["value"][1]) * 1000
    got = prom.query(f'histogram_quantile(0.99, sum(mlmond_run_op_duration_seconds{SEL}))')
    p99_every = float(got[0]["value"][1]) * 1000
    want_window, want_every = exact_quantile(window, 99), exact_quantile(every, 99)
    print(f"fleet p99 over the last {WINDOW_S} s: prometheus {p99_window:.3f} ms, exact {want_window:.3f} ms; "
          f"since registration: prometheus {p99_every:.3f} ms, exact {want_every:.3f} ms")
    # the sum of the three histograms holds every timing
    got = prom.query(f'histogram_count(sum(mlmond_run_op_duration_seconds{SEL}))')
    assert float(got[0]["value"][1]) == RANKS * 3100
    got = prom.query(f'histogram_sum(sum(mlmond_run_op_duration_seconds{SEL}))')
    assert float(got[0]["value"][1]) == pytest.approx(sum(every) / 1000, rel=1e-9)

    # the slow rank, by its rank tag
    got = prom.query(f'histogram_quantile(0.5, sum by (tag_rank) (rate(mlmond_run_op_duration_seconds{SEL}[{WINDOW_S}s])))')
    p50 = {r["metric"]["tag_rank"]: float(r["value"][1]) for r in got}
    assert len(p50) == RANKS, got
    others = [v for k, v in p50.items() if k != str(SLOW_RANK)]
    print("p50 by tag_rank (ms):", {k: round(v * 1000, 3) for k, v in sorted(p50.items())})
    assert p50[str(SLOW_RANK)] > max(others), p50

    assert p99_window == pytest.approx(want_window, rel=P99_REL)
    assert p99_every == pytest.approx(want_every, rel=P99_REL)
    # the sum's exact counts: the p99 lies in the very bucket that holds
    # the timing of Prometheus's rank, within one bucket's width
    lo, hi = prometheus_bucket(every, 0.99)
    assert lo <= p99_every / 1000 <= hi, \
        f"p99 {p99_every / 1000!r} s outside its bucket ({lo!r}, {hi!r}] s: the buckets are off"
    assert p50[str(SLOW_RANK)] / max(others) == pytest.approx(SLOWDOWN, rel=0.05)


# ---- the Grafana dashboard ------------------------------------------------------

DASHBOARD = os.path.join(ROOT, "contrib", "grafana", "mlmond.json")
# What Grafana puts for its own variables: $__rate_interval is at least four
# scrape intervals (here 250 ms).
GRAFANA_VARS = {"__rate_interval": "5s", "__interval": "1s", "__range": "1m"}


def dashboard_panels(d):
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])  # a collapsed row holds its panels


def substitute(text, values):
    def one(m):
        name = m.group(1) or m.group(2)
        assert name in values, f"the dashboard uses ${name}, which is no variable of it"
        return values[name]
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", one, text)


def label_values(prom, query, values):
    """What Grafana's label_values(SELECTOR, LABEL) offers, with the
    variables substituted."""
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query)
    assert m, f"a variable's query Grafana's Prometheus data source does not know: {query}"
    out = prom.api("/api/v1/series", **{"match[]": substitute(m.group(1), values)})
    assert out["status"] == "success", out
    return sorted({s[m.group(2)] for s in out["data"] if m.group(2) in s})


def test_dashboard_queries_return_series(fleet):
    """Every target of every panel, with the variables at All and at one
    choice each (this job, its first run, the step op), parses and returns
    series; so does each variable's own query."""
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    for i, d in enumerate(fleet.hosts):
        send_timings(fleet.ranks[i], d.statsd_path, "step", timings(i, 50, seed=300 + i))
    # two scrapes with the new timings in the rate interval
    time.sleep(1.0)

    variables = [v for v in dash["templating"]["list"] if v["type"] == "query"]
    assert [v["name"] for v in variables] == ["instance", "job", "run", "op"]
    every = dict(GRAFANA_VARS, **{v["name"]: v.get("allValue") or ".*" for v in variables})
    chosen = dict(GRAFANA_VARS)
    for v in variables:
        query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        offered = label_values(fleet.prom, query, chosen)
        assert offered, f"variable {v['name']}: {query} offers nothing"
        pick = {"job": JOB, "op": "step"}.get(v["name"], offered[0])
        assert pick in offered, (v["name"], offered)
        # as Grafana writes a value into a regular expression in a PromQL string
        chosen[v["name"]] = re.escape(pick).replace("\\", "\\\\")

    targets = [(p["title"], t) for p in dashboard_panels(dash) for t in p.get("targets", [])]
    assert len(targets) >= 15, targets
    end = time.time()
    empty = []
    for values in (every, chosen):
        for title, t in targets:
            expr = substitute(t["expr"], values)
            if t.get("instant"):
                out = fleet.prom.api("/api/v1/query", query=expr, time=end)
            else:
                out = fleet.prom.api("/api/v1/query_range", query=expr, start=end - 20, end=end, step=1)
            assert out["status"] == "success", (title, expr, out)
            if not out["data"]["result"]:
                empty.append(f"{title}: {expr}")
    assert not empty, "queries that return no series:\n" + "\n".join(empty)
    print(f"{len(targets)} queries of {len(list(dashboard_panels(dash)))} panels, twice: every one returns series")


def test_the_shipped_rules_find_the_slow_rank_across_hosts(fleet):
    """Each host sees one rank of the job and judges nothing; the rules
    compare the three ranks' medians in Prometheus: the straggler alert
    fires for rank 2, on its own host, and for no other rank."""
    hosts, ranks, prom = fleet.hosts, fleet.ranks, fleet.prom
    for i, d in enumerate(hosts):
        st, doc = d.get(f"/v1/jobs/{JOB}")
        assert doc["stragglers"] == [] and doc["ranks_here"] == 1
        send_timings(ranks[i], d.statsd_path, "step", timings(i, 400, seed=400 + i))

    def firing():
        alerts = prom.api("/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == "MlmondStraggler" and a["state"] == "firing"]
    got = wait_for(firing, 30, interval=0.25, what="the straggler alert")
    assert [(a["labels"]["tag_job_id"], a["labels"]["tag_rank"], a["labels"]["op"]) for a in got] == \
        [(JOB, str(SLOW_RANK), "step")], got
    assert "rank 2 is slow in step" in got[0]["annotations"]["summary"]
    medians = {r["metric"]["tag_rank"]: float(r["value"][1]) for r in prom.query(f'mlmond:rank_op_p50_seconds{{tag_job_id="{JOB}"}}')}
    print("medians by rank, recorded (ms):", {k: round(v * 1000, 3) for k, v in sorted(medians.items())})
    assert medians[str(SLOW_RANK)] == pytest.approx(max(medians.values()))
    # no other alert of the shipped rules: the job steps on, nothing leaks
    others = [a["labels"]["alertname"] for a in prom.api("/api/v1/alerts")["data"]["alerts"]
              if a["labels"]["alertname"] != "MlmondStraggler"]
    assert others == [], others

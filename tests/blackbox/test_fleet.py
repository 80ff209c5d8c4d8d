# SPDX-License-Identifier: MIT
"""A fleet: three mlmond instances (three databases, three ports: three
hosts), each watching one rank of a job that reports its step timings over
StatsD, one rank 30% slower, and Debian's real Prometheus with native
histograms on, scraping the three every second. Prometheus merges the
ranks' native histograms: the job's p99 over the last minute comes back
from PromQL within 1% of the exact p99 of the timings sent, the p99 of all
of them in the very bucket of the timing at its rank, and the slow rank
shows per instance.

Skipped without prometheus (Debian package prometheus)."""

import math
import os
import shutil
import time

import pytest

from conftest import needs, wait_for
from test_latency import exact_quantile, lognormal_ms, send_timings
from test_metrics import Prometheus
from test_metrics_proto import bucket_index
from test_statsd import agents, registered  # noqa: F401

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


class NativePrometheus(Prometheus):
    """Prometheus with native histograms on, scraping every target."""

    def __init__(self, target_ports):
        super().__init__(target_ports, ["--enable-feature=native-histograms"], interval=f"{SCRAPE_MS}ms")

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


def test_fleet_p99_from_native_histograms(make_mlmond, agents):
    if not shutil.which("prometheus"):
        needs("prometheus", "it is not installed (Debian package prometheus)")
    hosts = [make_mlmond(interval="1s") for _ in range(RANKS)]
    ranks = []
    for i, d in enumerate(hosts):
        a = agents()
        registered(d, a, name=f"rank{i}", tags={"job_id": JOB, "rank": str(i)})
        ranks.append(a)
    prom = NativePrometheus([d.port for d in hosts])
    try:
        def all_up():
            if prom.proc.poll() is not None:
                pytest.fail(f"prometheus exited {prom.proc.returncode}:\n{prom.logs()}")
            t = prom.targets()
            return len(t) == RANKS and all(x["health"] == "up" for x in t)
        wait_for(all_up, 60, interval=0.2, what="prometheus to scrape the three hosts")

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
        # the sum's exact counts: the p99 lies in the very bucket that
        # holds the timing of Prometheus's rank, within one bucket's width
        lo, hi = prometheus_bucket(every, 0.99)
        assert lo <= p99_every / 1000 <= hi, \
            f"p99 {p99_every / 1000!r} s outside its bucket ({lo!r}, {hi!r}] s: the buckets are off"
        assert p50[str(SLOW_RANK)] / max(others) == pytest.approx(SLOWDOWN, rel=0.05)
    finally:
        prom.stop()

# SPDX-License-Identifier: MIT
"""Timing slices stored before the base-2 buckets (histogram encoding
version 1) stay readable: tests/fixtures/db/hist-v1.db was written by the
mlmond of that time (run 1: 4000 "infer" timings lognormal_ms(4000,
seed=31) and 1000 "io" timings lognormal_ms(1000, seed=32, mu=ln 0.05,
sigma=1), sent over the StatsD socket, the run ended). Today's daemon must
give their exact count, min, max, sum and quantiles within the documented
0.78% (0.5% of the old buckets + 0.271% of the new ones), from the raw
slices and from the minute rollups it writes from them; nothing is
dropped."""

import math
import os
import shutil
import sqlite3

import pytest

from conftest import ROOT, wait_for
from test_latency import check_stats, exact_quantile, lognormal_ms
from test_statsd import latency

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "db", "hist-v1.db")
V1_REL = 1.005 * (1 + 0.002708) - 1 + 1e-9
KEEP = "[storage]\nretention_raw = 3650d\nretention_rollup = 3650d\n"


@pytest.fixture
def upgraded(make_mlmond):
    d = make_mlmond(config_text=KEEP)
    d.stop()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(d.db_path + suffix):
            os.unlink(d.db_path + suffix)
    shutil.copy(FIXTURE, d.db_path)
    d.start()
    return d


def expected():
    return {"infer": lognormal_ms(4000, seed=31),
            "io": lognormal_ms(1000, seed=32, mu=math.log(0.05), sigma=1.0)}


def span(d):
    run = d.run(1)
    assert run["state"] == "exited"
    return f"from={run['registered_ts'] - 60000}&until={run['ended_ts'] + 60000}"


def check_v1(o, values):
    check_stats(o, values, [])  # count, min, max, sum, mean, stddev: exact
    s = sorted(values)
    for p in (1, 10, 25, 50, 75, 90, 95, 99, 99.9):
        got, want = o[f"p{p:g}_ms"], exact_quantile(s, p)
        assert got == pytest.approx(want, rel=V1_REL), f"p{p}: {got} vs exact {want}"


def test_old_slices_read_in_the_new_buckets(upgraded):
    got = latency(upgraded, 1, span(upgraded) + "&q=1,10,25,50,75,90,95,99,99.9")
    want = expected()
    assert set(got["ops"]) == set(want)
    for op, values in want.items():
        check_v1(got["ops"][op], values)


def test_old_slices_through_the_minute_rollups(upgraded):
    # the fixture's minute is over: the daemon rolls it up, decoding the old
    # slices and writing the rollup in today's encoding
    def rolled():
        db = sqlite3.connect(f"file:{upgraded.db_path}?mode=ro", uri=True)
        try:
            return db.execute("SELECT count(*), min(substr(hist, 1, 1)) FROM op_slices_1m").fetchone()
        finally:
            db.close()
    wait_for(lambda: rolled()[0] == 2, 20, interval=0.5, what="the minute rollups")
    assert rolled()[1] == b"\x02"
    got = latency(upgraded, 1, span(upgraded) + "&q=1,10,25,50,75,90,95,99,99.9")
    for op, values in expected().items():
        check_v1(got["ops"][op], values)

# SPDX-License-Identifier: MIT
"""The job's own exceptions go through the mlmon package untouched: a
`with mlmon.timer()` block, a `@mlmon.timed` function and a profiler's
`profile()` block that raise let the very exception object through (an
Exception as well as a KeyboardInterrupt), and the timing of the block or
call that raised still reaches mlmond: real scripts against the real
daemon, the timings read back from its API."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

PYTHONPATH = os.path.join(ROOT, "client", "python")

# What each script starts with: its run, a job's own exception type, and a
# way to wait until mlmond has the timings of an op (it aggregates them in
# 1-second slices).
PRELUDE = """
import json, time, mlmon

run = mlmon.attach(name="raising")


class JobError(Exception):
    pass


def landed(op, n):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        o = run.latency(window="5m", op=op)["ops"].get(op)
        if o and o["count"] >= n:
            return o
        time.sleep(0.05)
    return None


def raises(fn, exc):
    try:
        fn()
    except BaseException as e:
        return e is exc
    return False
"""


def run_script(d, code):
    """Runs PRELUDE + code in a fresh python3 with d's sockets; returns the
    JSON object of its last stdout line. The script must exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLMON_")}
    env.update(PYTHONPATH=PYTHONPATH, PYTHONDONTWRITEBYTECODE="1", MLMON_SOCKET=d.socket_path,
               MLMON_STATSD_SOCKET=d.statsd_path)
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, f"script failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_timer_lets_the_exception_through(mlmond):
    out = run_script(mlmond, """
        err, stop, ms = JobError("boom"), KeyboardInterrupt(), []

        def block(exc):
            with mlmon.timer("step", category="training") as t:
                ms.append(t)
                time.sleep(0.005)
                raise exc

        through = [raises(lambda: block(err), err), raises(lambda: block(stop), stop)]
        o = landed("step", 2)
        print(json.dumps({"through": through, "ms": [t.ms for t in ms], "op": o}))
    """)
    assert out["through"] == [True, True], "the job's exception did not come through as it was raised"
    o = out["op"]
    assert o is not None, "the timings of the blocks that raised never reached mlmond"
    assert o["count"] == 2 and o["category"] == "training", o
    assert all(ms >= 5 for ms in out["ms"]), out["ms"]
    # the durations sent are the ones the timer measured (to the API's nine digits)
    assert o["min_ms"] == pytest.approx(min(out["ms"]), rel=1e-6), (o, out["ms"])
    assert o["max_ms"] == pytest.approx(max(out["ms"]), rel=1e-6), (o, out["ms"])


def test_timed_function_lets_the_exception_through(mlmond):
    out = run_script(mlmond, """
        err, stop = JobError("boom"), KeyboardInterrupt()

        @mlmon.timed("load", category="data")
        def load(exc):
            time.sleep(0.005)
            raise exc

        @mlmon.timed
        def plain(exc):
            raise exc

        through = [raises(lambda: load(err), err), raises(lambda: load(stop), stop), raises(lambda: plain(err), err)]
        print(json.dumps({"through": through, "load": landed("load", 2), "plain": landed("plain", 1)}))
    """)
    assert out["through"] == [True, True, True], "the job's exception did not come through as it was raised"
    assert out["load"] is not None and out["plain"] is not None, "the timings of the calls that raised never came"
    assert out["load"]["count"] == 2 and out["load"]["category"] == "data" and out["load"]["min_ms"] >= 5, out
    assert out["plain"]["count"] == 1, out


def test_profile_block_lets_the_exception_through(mlmond):
    out = run_script(mlmond, """
        err, stop = JobError("boom"), KeyboardInterrupt()
        prof = mlmon.PerformanceProfiler()

        def block(exc):
            with prof.profile("epoch"):
                time.sleep(0.005)
                raise exc

        through = [raises(lambda: block(err), err), raises(lambda: block(stop), stop)]
        m = prof.get_metrics("epoch")
        print(json.dumps({"through": through, "op": landed("epoch", 2), "total_s": m.timing.total_s}))
    """)
    assert out["through"] == [True, True], "the job's exception did not come through as it was raised"
    o = out["op"]
    assert o is not None, "the timings of the blocks that raised never reached mlmond"
    assert o["count"] == 2 and o["min_ms"] >= 5, o
    assert out["total_s"] >= 0.010, out

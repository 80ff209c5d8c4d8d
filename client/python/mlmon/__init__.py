# SPDX-License-Identifier: MIT
"""mlmon: time operations of a Python job and ask mlmond about its run.

    import mlmon
    run = mlmon.attach(name="train")
    with mlmon.timer("inference", category="model_inference"):
        model(batch)
    mlmon.mark("warmup-done")
    print(run.latency(since_mark="warmup-done"))

Standard library only. The timing calls (timer, timed, observe, count,
gauge, mark) never raise into the job; the queries raise mlmon.Unavailable
when mlmond cannot be reached."""

from ._http import ApiError, Error, Unavailable
from ._run import Run, attach, mark, run
from ._statsd import count, dropped, flush, gauge, observe
from ._timer import timed, timer
from .profiler import (ComputeMetrics, GoodputMetrics, MemoryMetrics, PerformanceMetrics, PerformanceProfiler,
                       SystemMetrics, TimingMetrics, benchmark)


def configure(socket=None, statsd_socket=None):
    """Where mlmond is, overriding $MLMON_SOCKET and $MLMON_STATSD_SOCKET."""
    from . import _http
    _http._configured["socket"] = socket
    _http._configured["statsd_socket"] = statsd_socket


__all__ = ["ApiError", "ComputeMetrics", "Error", "GoodputMetrics", "MemoryMetrics", "PerformanceMetrics", "PerformanceProfiler", "Run",
           "SystemMetrics", "TimingMetrics", "Unavailable", "attach", "benchmark", "configure", "count", "dropped",
           "flush", "gauge", "mark", "observe", "run", "timed", "timer"]


def _version():
    # the project's version, from the one file that holds it (meson.build
    # and the package's metadata read it too)
    import os
    try:
        with open(os.path.join(os.path.dirname(__file__), "VERSION"), encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


__version__ = _version()

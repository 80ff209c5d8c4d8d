# SPDX-License-Identifier: MIT
"""PerformanceProfiler and benchmark(): the profiler API of the usual
profiling guides, answered by mlmond. Each profile() block is a marked span
of the run (a mark at its start and at its end) and one timing of its op;
memory figures come from the run's samples over the span, timing
breakdowns from the daemon's latency histograms."""

import contextlib
import dataclasses
import logging
import math
import time
from time import perf_counter
from typing import Optional

from . import _http, _run
from ._http import ApiError, Unavailable
from ._statsd import _S, observe

log = logging.getLogger("mlmon")

MIB = 1048576.0
MARK_LABEL_MAX = 64
# How long a query waits for what was just sent to become visible
# (datagrams read, a sample taken after a span's end).
VISIBLE_TIMEOUT_S = 5.0


@dataclasses.dataclass
class Memory:
    peak_ram_mb: Optional[float] = None
    final_ram_mb: Optional[float] = None
    peak_gpu_mb: Optional[float] = None


@dataclasses.dataclass
class Timing:
    count: int = 0
    total_s: float = 0.0
    mean_ms: Optional[float] = None
    min_ms: Optional[float] = None
    max_ms: Optional[float] = None


@dataclasses.dataclass
class Carbon:
    energy_j: Optional[float] = None
    co2_g: Optional[float] = None


@dataclasses.dataclass
class Metrics:
    operation_name: Optional[str]
    timing: Timing
    memory: Memory
    carbon: Carbon


@dataclasses.dataclass
class _Span:
    op: str
    start_ms: float
    end_ms: float
    seconds: float


def _mib(b):
    return None if b is None else b / MIB


def _max(values):
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _wait(pred, timeout=VISIBLE_TIMEOUT_S, step=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(step)


class PerformanceProfiler:
    """profiler = mlmon.PerformanceProfiler()
    with profiler.profile("inference"): ...
    profiler.get_metrics("inference").memory.peak_ram_mb

    track_gpu: report peak_gpu_mb (else None). track_carbon: report the
    span's energy and CO2 where the host has energy counters.
    memory_interval: the sampling interval (s) when the profiler registers
    the process itself; a run that exists keeps its own. detailed_memory,
    device and output_dir are accepted and ignored. enable_line_profiling
    and estimate_flops raise NotImplementedError."""

    def __init__(self, track_gpu=True, track_carbon=False, detailed_memory=False, memory_interval=0.5,
                 enable_line_profiling=False, estimate_flops=False, device=None, output_dir=None,
                 category="profile"):
        if enable_line_profiling:
            raise NotImplementedError("mlmon: line profiling is not offered (mlmond times blocks, not lines)")
        if estimate_flops:
            raise NotImplementedError("mlmon: FLOP estimates are not offered (mlmond measures, it does not model)")
        self.track_gpu = track_gpu
        self.track_carbon = track_carbon
        self.memory_interval = memory_interval
        self.category = category
        self._spans = []

    def _run(self):
        r = _run.run()
        if r is None or r.id is None:
            r = _run.attach(interval=self.memory_interval)
        return r

    def _mark(self, label):
        r = _run.mark(label[:MARK_LABEL_MAX])
        return r["ts"] if r else time.time() * 1000.0

    @contextlib.contextmanager
    def profile(self, operation_name):
        """Times the block as op operation_name (category "profile") and
        marks its start and end on the run. Never raises for the daemon's
        sake."""
        try:
            self._run()
        except Exception:
            pass
        start = self._mark(f"{operation_name}:start")
        t0 = perf_counter()
        try:
            yield self
        finally:
            seconds = perf_counter() - t0
            observe(operation_name, seconds * 1000.0, category=self.category)
            end = self._mark(f"{operation_name}:end")
            self._spans.append(_Span(operation_name, start, max(end, start), seconds))

    # ---- answers -----------------------------------------------------------

    def _spans_of(self, operation_name):
        spans = [s for s in self._spans if operation_name is None or s.op == operation_name]
        if not spans:
            raise KeyError(f"mlmon: no profile() block named {operation_name!r} has ended")
        return spans

    def _samples(self, run, from_ms, until_ms):
        """The run's samples from from_ms on, once one at or after
        until_ms exists (waiting for it up to a few intervals)."""
        interval_s = (run.info.get("interval_ms") or 1000) / 1000.0

        def fetch():
            out, since = [], int(from_ms)
            for _ in range(100):
                page = run.samples(from_ms=since)
                out += page["samples"]
                if not page.get("truncated") or not page["samples"]:
                    break
                since = page["samples"][-1]["ts"] + 1
            return out

        samples = []

        def after_end():
            nonlocal samples
            samples = fetch()
            return samples and samples[-1]["ts"] >= until_ms

        if not _wait(after_end, timeout=3 * interval_s + 2.0, step=min(0.1, interval_s / 2)):
            log.info("mlmon: no sample after the span's end yet; memory figures cover what there is")
        return samples

    def _memory_of(self, samples, span):
        before = [s for s in samples if s["ts"] < span.start_ms]
        after = [s for s in samples if s["ts"] >= span.end_ms]
        inside = [s for s in samples if span.start_ms <= s["ts"] < span.end_ms] + after[:1]
        last = after[0] if after else (inside[-1] if inside else None)
        peak = _max(s.get("rss_bytes") for s in inside)
        # The high-water mark (VmHWM) catches a peak between two samples:
        # when it rose during the span, the span's peak is the new mark.
        hwm_end = last.get("peak_rss_bytes") if last else None
        hwm_before = before[-1].get("peak_rss_bytes") if before else None
        if hwm_end is not None and (hwm_before is None or hwm_end > hwm_before):
            peak = hwm_end if peak is None else max(peak, hwm_end)
        gpu = _max(s.get("gpu_mem_bytes") for s in inside) if self.track_gpu else None
        energy = None
        if before and last and before[-1].get("energy_j") is not None and last.get("energy_j") is not None:
            energy = last["energy_j"] - before[-1]["energy_j"]
        return peak, (last or {}).get("rss_bytes"), gpu, energy

    def get_metrics(self, operation_name=None):
        """Metrics of the blocks named operation_name (all blocks when None):
        .timing (count, total_s, mean/min/max_ms, measured here),
        .memory (peak_ram_mb, final_ram_mb, peak_gpu_mb; MiB, from the
        run's samples), .carbon (energy_j, co2_g; with track_carbon, where
        known). Raises Unavailable without a daemon."""
        spans = self._spans_of(operation_name)
        ms = [s.seconds * 1000.0 for s in spans]
        timing = Timing(len(spans), sum(s.seconds for s in spans), sum(ms) / len(ms), min(ms), max(ms))
        run = self._run()
        if run.id is None:
            raise Unavailable("mlmond is not reachable: no memory figures")
        samples = self._samples(run, min(s.start_ms for s in spans) - 3000, max(s.end_ms for s in spans))
        figures = [self._memory_of(samples, s) for s in spans]
        memory = Memory(_mib(_max(f[0] for f in figures)), _mib(figures[-1][1]), _mib(_max(f[2] for f in figures)))
        carbon = Carbon()
        if self.track_carbon and all(f[3] is not None for f in figures):
            carbon.energy_j = sum(f[3] for f in figures)
            grid = _http.request("GET", "/v1/system").get("energy", {}).get("grid_g_per_kwh")
            if grid is not None:
                carbon.co2_g = carbon.energy_j / 3.6e6 * grid
        return Metrics(operation_name, timing, memory, carbon)

    def get_current_memory(self):
        """{"ram_mb","peak_ram_mb","gpu_mb","ts"} from the run's latest
        sample (MiB; None where unknown)."""
        latest = self._run().get().get("latest") or {}
        return {"ram_mb": _mib(latest.get("rss_bytes")), "peak_ram_mb": _mib(latest.get("peak_rss_bytes")),
                "gpu_mb": _mib(latest.get("gpu_mem_bytes")) if self.track_gpu else None, "ts": latest.get("ts")}

    def get_timing_breakdown(self):
        """{op: {"count","total_s","mean_ms","p50_ms","p90_ms","p99_ms",
        "share_pct"}} of the profiled ops, from mlmond's histograms since
        the first block; share_pct is of the profiled ops' total."""
        if not self._spans:
            return {}
        want = {}
        for s in self._spans:
            want[s.op] = want.get(s.op, 0) + 1
        run = self._run()
        from_ms = int(min(s.start_ms for s in self._spans))
        answer = {}

        def complete():
            nonlocal answer
            answer = run.latency(from_ms=from_ms)["ops"]
            return all((answer.get(op) or {}).get("count", 0) >= n for op, n in want.items())

        _wait(complete)
        total_ms = sum((answer.get(op) or {}).get("total_ms") or 0.0 for op in want)
        out = {}
        for op in want:
            o = answer.get(op)
            if not o:
                continue
            out[op] = {"count": o["count"], "total_s": o["total_ms"] / 1000.0, "mean_ms": o["mean_ms"],
                       "p50_ms": o.get("p50_ms"), "p90_ms": o.get("p90_ms"), "p99_ms": o.get("p99_ms"),
                       "share_pct": 100.0 * o["total_ms"] / total_ms if total_ms else None}
        return out


# ---- benchmark ---------------------------------------------------------------

_bench_last_end = {}


def _local_stats(ms):
    s = sorted(ms)
    n = len(s)
    mean = sum(s) / n
    var = sum((x - mean) ** 2 for x in s) / n

    def pct(q):  # the rank mlmond uses: floor(q * (n - 1))
        return s[int(math.floor(q / 100.0 * (n - 1)))]

    return {"mean_ms": mean, "std_ms": math.sqrt(var), "min_ms": s[0], "max_ms": s[-1],
            "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99)}


def benchmark(fn, *args, iterations=100, warmup=10, op=None, **kwargs):
    """Calls fn(*args, **kwargs) warmup times untimed, then iterations
    times, each timed as op ("benchmark.<fn's name>", category
    "benchmark") after a mark; returns {"mean_ms","std_ms","min_ms",
    "max_ms","p50_ms","p90_ms","p99_ms","throughput_fps"}, the figures of
    mlmond's histogram of those calls (throughput_fps = 1000 / mean_ms).
    Without a daemon, or if lines were lost, the same figures computed
    here from the calls (exact), and a warning."""
    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    name = op or "benchmark." + getattr(fn, "__qualname__", type(fn).__name__)
    for _ in range(warmup):
        fn(*args, **kwargs)
    run = _run.run()
    if run is None or run.id is None:
        run = _run.attach()
    # A window starts at a whole second: a previous benchmark of this op in
    # the same second would count in this one.
    last = _bench_last_end.get(name)
    if last is not None and math.floor(time.time()) <= math.floor(last):
        time.sleep(math.floor(last) + 1.001 - time.time())
    label = f"{name}#{len(_bench_last_end)}:{time.time_ns()}"[-MARK_LABEL_MAX:]
    marked = _run.mark(label) is not None
    ms = []
    for _ in range(iterations):
        t0 = perf_counter()
        fn(*args, **kwargs)
        d = (perf_counter() - t0) * 1000.0
        observe(name, d, category="benchmark")
        ms.append(d)
    out = _local_stats(ms)
    if marked:
        try:
            out = _daemon_stats(run, name, label, iterations) or out
        except (Unavailable, ApiError) as e:
            log.warning("mlmon: benchmark %s: figures computed locally (%s)", name, e)
    _bench_last_end[name] = time.time()
    out["throughput_fps"] = 1000.0 / out["mean_ms"] if out["mean_ms"] > 0 else None
    return out


def _daemon_stats(run, name, label, iterations):
    _S.flush_waiting()
    o = {}

    def complete():
        nonlocal o
        o = run.latency(since_mark=label, op=name).get("ops", {}).get(name) or {}
        return o.get("count", 0) >= iterations

    if not _wait(complete) or o["count"] != iterations:
        log.warning("mlmon: benchmark %s: mlmond saw %s of %d calls (mlmon.dropped() = %d); "
                    "figures computed locally", name, o.get("count", 0), iterations, _S.dropped)
        return None
    return {"mean_ms": o["mean_ms"], "std_ms": o["stddev_ms"], "min_ms": o["min_ms"], "max_ms": o["max_ms"],
            "p50_ms": o["p50_ms"], "p90_ms": o["p90_ms"], "p99_ms": o["p99_ms"]}

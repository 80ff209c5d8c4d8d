# SPDX-License-Identifier: MIT
"""PerformanceProfiler and benchmark(): the profiler API of the profiling
guides our users follow, answered by mlmond where a figure needs watching
between a block's edges, and measured in the process where its edges give
it exactly.

Each profile() block is one timing of its op (category "profile") and two
marks on the run (NAME:start, NAME:end), all sent over the datagram socket,
never waiting for mlmond. At the edges the process reads its own clocks and
CPU time and the host's counters (_host.py); get_metrics() adds what mlmond
saw of the run meanwhile: its samples and span summary (memory, GPU,
energy) and its leak verdict."""

import contextlib
import dataclasses
import logging
import math
import sys
import time
from time import perf_counter
from typing import Optional

from . import _host, _http, _run
from ._http import ApiError, Unavailable
from ._report import mib
from ._statsd import _S, observe

log = logging.getLogger("mlmon")

MARK_LABEL_MAX = 64
# How long a query waits for what was just sent to become visible
# (a sample taken after a span's end).
VISIBLE_TIMEOUT_S = 5.0


@dataclasses.dataclass
class MemoryMetrics:
    """MB are MiB (2^20 bytes), as the guides compute them (bytes / 1024 /
    1024). A tree run's (children) figures are its PSS where mlmond has it."""
    peak_ram_mb: Optional[float] = None
    final_ram_mb: Optional[float] = None
    peak_gpu_mb: Optional[float] = None
    memory_leak_detected: Optional[bool] = None
    initial_ram_mb: Optional[float] = None


@dataclasses.dataclass
class TimingMetrics:
    """wall_time_s is total_s: the blocks' wall time, summed."""
    wall_time_s: float = 0.0
    cpu_time_s: float = 0.0
    user_time_s: float = 0.0
    system_time_s: float = 0.0
    count: int = 0
    total_s: float = 0.0
    mean_ms: Optional[float] = None
    min_ms: Optional[float] = None
    max_ms: Optional[float] = None


@dataclasses.dataclass
class ComputeMetrics:
    estimated_flops: Optional[int] = None
    flops_per_second: Optional[float] = None
    gpu_utilization_percent: Optional[float] = None
    cpu_utilization_percent: Optional[float] = None


@dataclasses.dataclass
class SystemMetrics:
    """The host over the blocks (memory_percent: at the last one's end)."""
    cpu_percent: Optional[float] = None
    memory_percent: Optional[float] = None
    disk_io_percent: Optional[float] = None
    network_io_mb: Optional[float] = None


@dataclasses.dataclass
class CarbonMetrics:
    energy_j: Optional[float] = None
    co2_g: Optional[float] = None


@dataclasses.dataclass
class GoodputMetrics:
    """mlmond's goodput ledger of a span (doc/goodput.md) and the verdicts
    beside the leak: the parts add up to wall_s; None where not known (a
    span without timings of the step op has no split: reason says so)."""
    wall_s: Optional[float] = None
    goodput_pct: Optional[float] = None
    steps: Optional[float] = None
    ideal_step_ms: Optional[float] = None
    startup_s: Optional[float] = None
    step_s: Optional[float] = None
    data_wait_s: Optional[float] = None
    checkpoint_s: Optional[float] = None
    eval_s: Optional[float] = None
    idle_s: Optional[float] = None
    lost_s: Optional[float] = None
    other_s: Optional[float] = None
    energy_j: Optional[float] = None
    energy_per_step_j: Optional[float] = None
    energy_per_productive_hour_j: Optional[float] = None
    reason: Optional[str] = None
    input_bound: Optional[bool] = None
    input_bound_reason: Optional[str] = None
    gpu_idle: Optional[bool] = None
    gpu_idle_reason: Optional[str] = None
    oom_eta_s: Optional[float] = None
    oom_reason: Optional[str] = None

    def to_dict(self):
        return dataclasses.asdict(self)

    def summary(self):
        """"Goodput: 82.1% (1200 steps, ideal 95.2 ms); data wait 9.0%, idle
        3.1%", or why there is none."""
        if self.goodput_pct is None:
            return f"Goodput: n/a ({self.reason or 'no figures'})"
        parts = ", ".join(f"{k.replace('_s', '').replace('_', ' ')} {100.0 * v / self.wall_s:.1f}%"
                          for k, v in (("data_wait_s", self.data_wait_s), ("idle_s", self.idle_s),
                                       ("startup_s", self.startup_s), ("checkpoint_s", self.checkpoint_s))
                          if v and self.wall_s)
        return (f"Goodput: {self.goodput_pct:.1f}% ({self.steps:.0f} steps, ideal {self.ideal_step_ms:.1f} ms)"
                + (f"; {parts}" if parts else ""))


def _verdict(o):
    if not o or not o.get("evaluated"):
        return None, (o or {}).get("reason")
    return bool(o.get("flagged")), o.get("reason")


def _fmt_mb(mb):
    if mb is None:
        return "n/a"
    return f"{mb / 1024.0:.1f} GB" if mb >= 1024.0 else f"{mb:.1f} MB"


@dataclasses.dataclass
class PerformanceMetrics:
    operation_name: Optional[str]
    timing: TimingMetrics
    memory: MemoryMetrics
    compute: ComputeMetrics
    system: SystemMetrics
    carbon: CarbonMetrics

    def to_dict(self):
        """The metrics as nested dicts of plain values (json.dumps takes it)."""
        return dataclasses.asdict(self)

    def summary(self):
        """"Peak RAM: 2.4 GB, Wall Time: 45.2s, GPU Util: 78%" ("n/a" where
        unknown)."""
        gpu = self.compute.gpu_utilization_percent
        return (f"Peak RAM: {_fmt_mb(self.memory.peak_ram_mb)}, Wall Time: {self.timing.wall_time_s:.1f}s, "
                f"GPU Util: {'n/a' if gpu is None else f'{gpu:.0f}%'}")


@dataclasses.dataclass
class _Span:
    op: str
    seconds: float
    start: _host.Edge
    end: _host.Edge
    flops: Optional[int] = None


def _label(name, suffix):
    """A mark's label: name, its control characters replaced, cut to fit
    MARK_LABEL_MAX bytes of UTF-8 with suffix."""
    room = MARK_LABEL_MAX - len(suffix.encode())
    text = "".join("_" if ord(c) < 0x20 or c == "\x7f" else c for c in name)
    return text.encode("utf-8", "replace")[:room].decode("utf-8", "ignore") + suffix




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


def _delta(spans, field):
    """The sum over the spans of end - start of a counter, None if any edge
    lacks it."""
    total = 0
    for s in spans:
        a, b = getattr(s.start, field), getattr(s.end, field)
        if a is None or b is None:
            return None
        total += b - a
    return total


def _disk_pct(spans, wall_s):
    """The busiest disk's share of the blocks' time with I/O in flight."""
    if wall_s <= 0 or any(s.start.disk_busy_ms is None or s.end.disk_busy_ms is None for s in spans):
        return None
    busy = {}
    for s in spans:
        for d, ms in s.end.disk_busy_ms.items():
            if d in s.start.disk_busy_ms:
                busy[d] = busy.get(d, 0) + ms - s.start.disk_busy_ms[d]
    return min(100.0, 100.0 * max(busy.values()) / 1000.0 / wall_s) if busy else None


class _Flops:
    """torch's profiler around a block, counting the floating point
    operations of the operators it knows a formula for (matrix products,
    convolutions, element-wise add and mul). Only where the job imported
    torch: mlmon never imports it."""

    def __init__(self):
        self.prof = None
        torch = sys.modules.get("torch")
        if torch is None:
            return
        try:
            from torch.profiler import ProfilerActivity, profile
            self.prof = profile(activities=[ProfilerActivity.CPU], with_flops=True)
            self.prof.__enter__()
        except Exception as e:  # another profiler running, an old torch
            log.warning("mlmon: no FLOP count for this block: %s", e)
            self.prof = None

    def stop(self):
        if self.prof is None:
            return None
        try:
            self.prof.__exit__(None, None, None)
            counted = [e.flops for e in self.prof.events() if e.flops]
            # no operator torch has a formula for: the count is unknown, not 0
            return sum(counted) if counted else None
        except Exception as e:
            log.warning("mlmon: no FLOP count for this block: %s", e)
            return None


class PerformanceProfiler:
    """profiler = mlmon.PerformanceProfiler()
    with profiler.profile("inference"): ...
    profiler.get_metrics("inference").memory.peak_ram_mb

    track_gpu: report GPU memory and utilisation (else None). track_carbon:
    report the span's energy and CO2 where the host has energy counters.
    memory_interval: the sampling interval (s) when the profiler registers
    the process itself; a run that exists keeps its own. detailed_memory:
    accepted (the leak verdict is always there). estimate_flops: count the
    blocks' floating point operations with torch's profiler, where the job
    imported torch. enable_line_profiling raises NotImplementedError."""

    def __init__(self, track_gpu=True, track_carbon=False, detailed_memory=False, memory_interval=0.5,
                 enable_line_profiling=False, estimate_flops=False, device=None, output_dir=None,
                 category="profile"):
        if enable_line_profiling:
            raise NotImplementedError("mlmon: line profiling is not offered (mlmond times blocks, not lines)")
        self.track_gpu = track_gpu
        self.track_carbon = track_carbon
        self.detailed_memory = detailed_memory
        self.memory_interval = memory_interval
        self.estimate_flops = estimate_flops
        self.category = category
        self._spans = []

    def _run(self):
        r = _run.run()
        if r is None or r.id is None:
            r = _run.attach(interval=self.memory_interval)
        return r

    @contextlib.contextmanager
    def profile(self, operation_name):
        """Times the block as op operation_name (category "profile"), marks
        its start and end on the run, and reads the edges' counters. Never
        waits for mlmond once the process has a run, never raises for its
        sake; what the block raises goes on, and the block counts."""
        try:
            self._run()
        except Exception:
            pass
        name = str(operation_name)
        _run.mark(_label(name, ":start"))
        start = _host.read_edge(start=True)
        flops = _Flops() if self.estimate_flops else None
        t0 = perf_counter()
        try:
            yield self
        finally:
            seconds = perf_counter() - t0
            count = flops.stop() if flops is not None else None
            end = _host.read_edge(start=False)
            observe(name, seconds * 1000.0, category=self.category)
            _run.mark(_label(name, ":end"))
            self._spans.append(_Span(name, seconds, start, end, count))

    # ---- answers -----------------------------------------------------------

    def has_results(self):
        """Whether a profile() block has ended (also by an exception)."""
        return bool(self._spans)

    def _spans_of(self, operation_name):
        if operation_name is None and self._spans:
            operation_name = self._spans[-1].op  # the last operation
        spans = [s for s in self._spans if s.op == operation_name]
        if not spans:
            raise KeyError(f"mlmon: no profile() block named {operation_name!r} has ended")
        return operation_name, spans

    def _samples(self, run, from_ms, until_ms):
        """The run's samples from from_ms on, once one after until_ms
        exists (waiting for it up to a few intervals)."""
        interval_s = (run.info.get("interval_ms") or 1000) / 1000.0

        def fetch():
            out, since = [], int(from_ms)
            for _ in range(100):
                page = run._get("/samples", {"from": since}, timeout=_http.TIMEOUT_S)
                out += page["samples"]
                if not page.get("truncated") or not page["samples"]:
                    break
                since = page["samples"][-1]["ts"] + 1
            return out

        samples = []

        def after_end():
            nonlocal samples
            samples = fetch()
            return samples and samples[-1]["ts"] > until_ms

        if not _wait(after_end, timeout=3 * interval_s + 2.0, step=min(0.1, interval_s / 2)):
            log.info("mlmon: no sample after the span's end yet; memory figures cover what there is")
        if run.info.get("children") and not any(s.get("pss_bytes") is not None for s in samples
                                                if s["ts"] > until_ms):
            # A tree's PSS is read every pss_interval (5 s by default): a
            # sample asked for now reads it.
            try:
                _http.request("POST", f"/v1/runs/{run.id}/samples", {}, timeout=_http.TIMEOUT_S)
                samples = fetch()
            except (Unavailable, ApiError) as e:
                log.info("mlmon: no sample with the PSS after the span's end: %s", e)
        return samples

    def _from_daemon(self, spans, metrics):
        """The figures mlmond saw over the span from the first block's start
        to the first sample after the last block's end."""
        run = self._run()
        if run.id is None:
            raise Unavailable("mlmond is not reachable")
        first, last = spans[0].start.ts_ms, spans[-1].end.ts_ms
        samples = self._samples(run, first - 3000, last)
        # A tree's memory is its PSS while it has workers: their RSS would
        # count every page they share with the parent again. A tree of one
        # process has nothing counted twice, and its RSS and VmHWM catch a
        # peak between two readings of the PSS (read every pss_interval).
        tree = bool(run.info.get("children")) and any((s.get("processes") or 0) > 1 for s in samples)
        before = [s for s in samples if s["ts"] <= first]
        after = [s for s in samples if s["ts"] > last]
        until = after[0]["ts"] if after else int(last)
        span = run._get("/summary", {"from": int(first), "until": until}, timeout=_http.TIMEOUT_S)

        def ram(near):
            # a tree's footprint is its PSS, read every few samples: the
            # nearest reading; a run of one process, its RSS
            if not tree:
                return near[0].get("rss_bytes") if near else None
            return next((s["pss_bytes"] for s in near if s.get("pss_bytes") is not None), None)

        m = metrics.memory
        m.initial_ram_mb = mib(ram(before[::-1]))
        m.final_ram_mb = mib(ram(after))
        peak = _max([span.get("peak_pss_bytes"), ram(before[::-1]), ram(after)]) if tree else None
        if not tree:
            peak = span.get("peak_rss_bytes")
            # The high-water mark (VmHWM) catches a peak between two samples:
            # when it rose during the span, the span's peak is the new mark.
            hwm_end = after[0].get("peak_rss_bytes") if after else None
            hwm_before = before[-1].get("peak_rss_bytes") if before else None
            if hwm_end is not None and (hwm_before is None or hwm_end > hwm_before):
                peak = _max([peak, hwm_end])
        m.peak_ram_mb = mib(peak)
        if self.track_gpu:
            m.peak_gpu_mb = mib(span.get("peak_gpu_mem_bytes"))
            metrics.compute.gpu_utilization_percent = span.get("gpu_util_avg_pct")
        if self.track_carbon:
            metrics.carbon = CarbonMetrics(span.get("energy_j"), span.get("co2_g"))
        leak = run._get("", timeout=_http.TIMEOUT_S).get("leak") or {}
        m.memory_leak_detected = bool(leak.get("suspected")) if leak.get("evaluated") else None

    def get_metrics(self, operation_name=None):
        """PerformanceMetrics of the blocks named operation_name, or of the
        last operation's when None: .timing and .system measured at the
        blocks' edges, .compute, .memory and .carbon with mlmond's figures
        of the run. Where mlmond cannot be asked, its figures are None (and
        a warning says why, once). KeyError: no such block has ended."""
        name, spans = self._spans_of(operation_name)
        ms = [s.seconds * 1000.0 for s in spans]
        wall = sum(s.seconds for s in spans)
        user, system = _delta(spans, "user_s"), _delta(spans, "system_s")
        timing = TimingMetrics(wall, user + system, user, system, len(spans), wall, sum(ms) / len(ms), min(ms),
                               max(ms))
        compute = ComputeMetrics(cpu_utilization_percent=100.0 * (user + system) / wall if wall > 0 else None)
        if self.estimate_flops and all(s.flops is not None for s in spans):
            compute.estimated_flops = sum(s.flops for s in spans)
            compute.flops_per_second = compute.estimated_flops / wall if wall > 0 else None
        busy, total = _delta(spans, "cpu_busy"), _delta(spans, "cpu_all")
        net = _delta(spans, "net_bytes")
        end = spans[-1].end
        system = SystemMetrics(
            cpu_percent=100.0 * busy / total if busy is not None and total else None,
            memory_percent=(100.0 * (end.mem_total - end.mem_available) / end.mem_total
                            if end.mem_total and end.mem_available is not None else None),
            disk_io_percent=_disk_pct(spans, wall), network_io_mb=mib(net))
        metrics = PerformanceMetrics(name, timing, MemoryMetrics(), compute, system, CarbonMetrics())
        try:
            self._from_daemon(spans, metrics)
        except (Unavailable, ApiError) as e:
            _run._warn_once("profiler-metrics", "mlmon: profiler: no figures from mlmond (memory, GPU, leak "
                            "verdict): %s", e)
        return metrics

    def get_goodput(self, operation_name=None):
        """GoodputMetrics of the span from the first start to the last end
        of the blocks named operation_name, or of the whole run when None,
        with the run's verdicts now. Where mlmond cannot be asked, every
        figure is None (and a warning says why, once). KeyError: no such
        block has ended."""
        g = GoodputMetrics()
        try:
            run = self._run()
            if run.id is None:
                raise Unavailable("mlmond is not reachable")
            if operation_name is None:
                led = run.goodput()
            else:
                _, spans = self._spans_of(operation_name)
                led = run.goodput(from_ms=int(spans[0].start.ts_ms), until_ms=int(spans[-1].end.ts_ms))
            for f in dataclasses.fields(g):
                if f.name in led:
                    setattr(g, f.name, led[f.name])
            o = run.get()
            g.input_bound, g.input_bound_reason = _verdict(o.get("input_bound"))
            g.gpu_idle, g.gpu_idle_reason = _verdict(o.get("gpu_idle"))
            oom = (o.get("leak") or {}).get("oom") or {}
            g.oom_eta_s, g.oom_reason = oom.get("eta_s"), oom.get("reason")
        except (Unavailable, ApiError) as e:
            _run._warn_once("profiler-goodput", "mlmon: profiler: no goodput figures from mlmond: %s", e)
        return g

    def _latest(self):
        """The run's latest sample, with the summary's final_pss_bytes (a
        tree's latest PSS reading) as its pss_bytes; None where mlmond cannot
        be asked."""
        try:
            run = self._run()
            if run.id is not None:
                got = run._get("", timeout=_http.TIMEOUT_S)
                latest = dict(got.get("latest") or {})
                latest["pss_bytes"] = (got.get("summary") or {}).get("final_pss_bytes")
                return run, latest
        except (Unavailable, ApiError) as e:
            _run._warn_once("profiler-current", "mlmon: profiler: no current figures from mlmond: %s", e)
        return None, None

    def get_current_memory(self):
        """The run's RAM in MB (MiB) at its latest sample: its RSS, or the
        latest PSS of a tree run that has workers; None where unknown."""
        run, latest = self._latest()
        if latest is None:
            return None
        tree = run.info.get("children") and (latest.get("processes") or 0) > 1
        pss = latest.get("pss_bytes") if tree else None
        return mib(pss if pss is not None else latest.get("rss_bytes"))

    def get_current_gpu_memory(self):
        """The share (0 to 1) of its GPU's memory that the run holds at its
        latest sample, on the device where that share is largest: 0.0 when
        it holds none on a host with GPUs; None without track_gpu, without a
        GPU mlmond knows, or where mlmond cannot be asked."""
        if not self.track_gpu:
            return None
        run, latest = self._latest()
        if latest is None:
            return None
        try:
            devices = _http.request("GET", "/v1/system")["devices"]
        except (Unavailable, ApiError):
            return None
        total = {d.get("id"): d.get("mem_total_bytes") for d in devices if d.get("mem_total_bytes")}
        if not total:
            return None
        shares = [u["mem_bytes"] / total[u.get("device")] for u in latest.get("gpu") or ()
                  if u.get("mem_bytes") is not None and u.get("device") in total]
        return max(shares) if shares else 0.0

    def get_timing_breakdown(self):
        """{operation: seconds}: each profiled operation's blocks' wall time,
        summed, in the order of their first block (measured here: the same
        figures as mlmond's histograms, whose sums are exact)."""
        out = {}
        for s in self._spans:
            out[s.op] = out.get(s.op, 0.0) + s.seconds
        return out

    def get_timing_stats(self):
        """{op: {"count","total_s","mean_ms","p50_ms","p90_ms","p99_ms",
        "share_pct"}} of the profiled ops, from mlmond's histograms since
        the first block; share_pct is of the profiled ops' total. Raises
        Unavailable without a daemon."""
        if not self._spans:
            return {}
        want = {}
        for s in self._spans:
            want[s.op] = want.get(s.op, 0) + 1
        run = self._run()
        from_ms = int(min(s.start.ts_ms for s in self._spans))
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
    label = _label(name, f"#{len(_bench_last_end)}:{time.time_ns()}")
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
    o = {}

    def complete():
        nonlocal o
        o = run._get("/latency", {"since_mark": label, "op": name, "q": "50,90,99"},
                     timeout=_http.TIMEOUT_S).get("ops", {}).get(name) or {}
        return o.get("count", 0) >= iterations

    if not _wait(complete) or o["count"] != iterations:
        log.warning("mlmon: benchmark %s: mlmond saw %s of %d calls (mlmon.dropped() = %d); "
                    "figures computed locally", name, o.get("count", 0), iterations, _S.dropped)
        return None
    return {"mean_ms": o["mean_ms"], "std_ms": o["stddev_ms"], "min_ms": o["min_ms"], "max_ms": o["max_ms"],
            "p50_ms": o["p50_ms"], "p90_ms": o["p90_ms"], "p99_ms": o["p99_ms"]}

# SPDX-License-Identifier: MIT
"""Runs the profiler API reference's examples (data/profiler-api-examples.md)
in this one process, in order, with only the import changed, and prints one
JSON object: per example its printed output, the values it left behind and
the ground truth they are checked against.

The examples leave some names to the reader (model, train_epoch,
dataloader...): each is bound, just before the example that uses it, to a
stand-in that does known work and measures it itself: wall time
(perf_counter), CPU time (process_time), RSS and VmHWM (/proc/self).

Usage: profiler_examples.py EXAMPLES.md. It says "ready PID" and waits for a
line "go API_SOCKET STATSD_SOCKET" on stdin before it starts, so that the
caller can start mlmond with a stand-in GPU for this pid."""

import contextlib
import io
import json
import os
import re
import sys
import time

MIB = 1048576.0
PAGE = os.sysconf("SC_PAGESIZE")


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / MIB


def hwm_mib():
    with open("/proc/self/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) / 1024.0


def mem_percent():
    with open("/proc/meminfo") as f:
        m = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f)}
    return 100.0 * (m["MemTotal"] - m["MemAvailable"]) / m["MemTotal"]


class Work:
    """Known work, measured by itself: busy CPU for cpu_s, a sleep of
    sleep_s, alloc_mib MiB written and held for hold_s (then freed, unless
    keep)."""

    def __init__(self, log):
        self.log = log  # [{"wall_s", "cpu_s", "hwm_mib"}...]
        self.kept = []

    def __call__(self, cpu_s=0.0, sleep_s=0.0, alloc_mib=0, hold_s=0.0, keep=False, raises=None):
        w0, c0 = time.perf_counter(), time.process_time()
        block = None
        try:
            block = b"\x01" * (alloc_mib << 20) if alloc_mib else None
            while time.process_time() - c0 < cpu_s:
                pass
            time.sleep(sleep_s + hold_s)
            if keep and block is not None:
                self.kept.append(block)
            if raises:
                raise raises
        finally:
            block = None  # freed (unless kept) within the measure
            self.log.append({"wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0,
                             "hwm_mib": hwm_mib()})


class Batch:
    def cuda(self):
        return self


class LargeModel:
    """Stands for a model on a GPU; the GPU memory is the stand-in NVML's."""

    def __init__(self, work):
        self.work = work

    def cuda(self):
        return self

    def __call__(self, batch):
        self.work(cpu_s=0.01)
        return batch


def conv_model():
    import torch
    torch.set_num_threads(1)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 8, stride=8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(4, 10))


def stand_ins(work):
    """Per example (by its heading), the names it uses and leaves to the
    reader."""
    class FitModel:
        def fit(self, X, y):
            work(cpu_s=0.2, alloc_mib=150, hold_s=0.7)

    def batch_of(n):
        import torch
        return torch.randn(n, 3, 224, 224)

    return {
        "profile(": {"model": FitModel, "X_train": lambda: [0] * 10, "y_train": lambda: [1] * 10},
        "Basic Performance Profiling": {"train_epoch": lambda: (lambda: work(cpu_s=0.03))},
        "GPU Memory Monitoring": {"LargeModel": lambda: (lambda: LargeModel(work)),
                                  "dataloader": lambda: [Batch() for _ in range(5)]},
        "Multi-Operation Profiling": {"load_dataset": lambda: (lambda: work(sleep_s=0.05) or list(range(1000))),
                                      "preprocess": lambda: (lambda d: work(cpu_s=0.05) or d),
                                      "train_model": lambda: (lambda d: work(cpu_s=0.1) or "model")},
        "Memory Leak Detection": {"allocate_data": lambda: (lambda: work(alloc_mib=1, keep=True)),
                                  "process_data": lambda: (lambda d: None)},
        "Error Handling": {"risky_operation": lambda: (lambda: work(sleep_s=0.05, raises=ValueError("as planned")))},
        "3. Use descriptive": {"model": conv_model, "input_batch": lambda: batch_of(4)},
        "4. Profile representative": {"model": conv_model},
    }


def examples(path):
    with open(path) as f:
        text = f.read()
    return re.findall(r"^#+ ([^\n]*)\n\n```python\n(.*?)^```", text, re.M | re.S)


def values(ns):
    """What an example leaves behind that the test checks."""
    from mlmon import PerformanceMetrics
    out = {}
    for k, v in ns.items():
        if isinstance(v, PerformanceMetrics):
            out[k] = v.to_dict()
            out[k + ".summary"] = v.summary()
        elif k in ("current_ram", "timing_breakdown", "breakdown", "metrics_dict", "total_time"):
            out[k] = v
        elif type(v).__name__ == "ComputeMetrics":
            out[k] = {"estimated_flops": v.estimated_flops, "flops_per_second": v.flops_per_second}
    return out


def main():
    print("ready", os.getpid(), flush=True)
    _, api, statsd = sys.stdin.readline().split()
    import mlmon
    mlmon.configure(socket=api, statsd_socket=statsd)
    log = []
    work = Work(log)
    per_example = stand_ins(work)
    ns = {"__name__": "__example__"}
    results = []
    for title, code in examples(sys.argv[1]):
        code = code.replace("from cookbook.measure import PerformanceProfiler", "from mlmon import PerformanceProfiler")
        if "PerformanceProfiler" not in ns:  # the import, for the examples that leave it out
            exec("from mlmon import PerformanceProfiler", ns)
        for key, names in per_example.items():
            if title.startswith(key) or key in title:
                for name, make in names.items():
                    ns[name] = make()
        first = len(log)
        before = {k: ns[k] for k in list(ns)}
        prof = ns.get("profiler")
        blocks = len(prof._spans) if prof is not None else 0
        out = io.StringIO()
        t0 = time.time()
        rss0 = rss_mib()
        error = None
        with contextlib.redirect_stdout(out):
            try:
                exec(compile(code, title, "exec"), ns)
            except Exception as e:
                error = f"{type(e).__name__}: {e}"
        changed = {k: v for k, v in ns.items() if k not in before or before[k] is not v}
        prof = ns.get("profiler")
        last_block = None
        if error is None and prof is not None and (prof is not before.get("profiler") or len(prof._spans) > blocks):
            # the harness's look at a block the example did not ask about
            last_block = prof.get_metrics().to_dict() if prof.has_results() else None
        run = mlmon.run()
        leak = run.get()["leak"] if run is not None and run.id is not None else None
        results.append({"title": title, "error": error, "out": out.getvalue(), "values": values(changed),
                        "last_block": last_block,
                        "work": log[first:], "rss_before_mib": rss0, "rss_after_mib": rss_mib(),
                        "hwm_mib": hwm_mib(), "mem_percent": mem_percent(), "wall_s": time.time() - t0,
                        "leak": leak, "run": run.id if run is not None else None})
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()

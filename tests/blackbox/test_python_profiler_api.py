# SPDX-License-Identifier: MIT
"""The profiler API reference that mlmon's PerformanceProfiler implements:
every one of its examples (data/profiler-api-examples.md, copied verbatim)
runs, with only the import changed, in one process (helpers/
profiler_examples.py) against the real mlmond with the NVML stand-in as its
GPU, and each value the examples print or keep is checked against what the
examples' stand-ins measured themselves: wall and CPU time, RSS and the
high-water mark, the stand-in GPU's memory and utilisation, the FLOPs of
the layers run, the run's leak verdict."""

import json
import os
import re
import subprocess
import tempfile

import pytest

from conftest import MiB, Mlmond
from test_gpu import standin
from test_python import env_for

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "data", "profiler-api-examples.md")
HARNESS = os.path.join(HERE, "helpers", "profiler_examples.py")
TORCH_PYTHON = "/usr/bin/python3"

GIB = 1 << 30
GPU_BYTES = 73 * GIB  # of the stand-in device's 80 GiB: 91% of it
GPU_SM = 55
# nn.Linear(784, 512) and nn.Linear(512, 10) on a batch of 32: 2*M*N*K each
FLOPS = 2 * 32 * 784 * 512 + 2 * 32 * 512 * 10
# What the profiler's edges add to a block's wall and CPU time: its reads
# of /proc, and a preemption on a busy 2-core machine.
TIME_ABS_S = 0.02


def near(got, want, abs_tol, rel=0.0):
    return got is not None and abs(got - want) <= abs_tol + rel * abs(want)


@pytest.fixture(scope="module")
def ran():
    """Runs the examples once, against a daemon whose NVML stand-in gives
    the examples' process GPU_BYTES and GPU_SM % of device 0; yields
    (daemon, {title: result})."""
    nvml = standin()
    if subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True).returncode != 0:
        pytest.skip("the FLOPS example needs torch")
    p = subprocess.Popen([TORCH_PYTHON, HARNESS, EXAMPLES], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env_for(None))
    d = None
    saved = os.environ.get("NVML_STANDIN_PROCS")
    try:
        word, pid = p.stdout.readline().split()
        assert word == "ready"
        os.environ["NVML_STANDIN_PROCS"] = f"{pid}:{GPU_BYTES}:{GPU_SM}:c"
        try:
            d = Mlmond(tempfile.mkdtemp(prefix="mlmond-bb-", dir="/tmp"),
                       config_text=f"[gpu]\nnvml_library = {nvml}\n")
        finally:
            if saved is None:
                os.environ.pop("NVML_STANDIN_PROCS")
            else:
                os.environ["NVML_STANDIN_PROCS"] = saved
        p.stdin.write(f"go {d.socket_path} {d.statsd_path}\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=100)
        assert p.returncode == 0, err
        results = {r["title"]: r for r in json.loads(out.strip().splitlines()[-1])}
        yield d, results, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if d is not None:
            d.stop()
            d.check_stderr()


def example(ran, prefix):
    _, results, _ = ran
    titles = [t for t in results if t.startswith(prefix)]
    assert len(titles) == 1, (prefix, list(results))
    r = results[titles[0]]
    assert r["error"] is None, f"{titles[0]}: {r['error']}\n{r['out']}"
    return r


def test_every_example_runs(ran):
    _, results, err = ran
    assert len(results) == 16
    failed = {t: r["error"] for t, r in results.items() if r["error"]}
    assert not failed, f"{failed}\n{err}"


def check_block(m, work, r):
    """A block's timing against its stand-in's own measure, and memory
    against RSS and VmHWM read around the block."""
    t = m["timing"]
    wall = sum(w["wall_s"] for w in work)
    cpu = sum(w["cpu_s"] for w in work)
    assert near(t["wall_time_s"], wall, TIME_ABS_S, 0.01) and t["wall_time_s"] >= wall, (t, wall)
    assert t["total_s"] == t["wall_time_s"]
    assert near(t["cpu_time_s"], cpu, TIME_ABS_S, 0.05), (t, cpu)
    assert near(t["user_time_s"] + t["system_time_s"], t["cpu_time_s"], 1e-9)
    assert near(m["compute"]["cpu_utilization_percent"], 100.0 * t["cpu_time_s"] / t["wall_time_s"], 1e-6)
    mem = m["memory"]
    # the RSS just before and just after the block, from the run's samples
    assert near(mem["initial_ram_mb"], r["rss_before_mib"], 3.0, 0.05), (mem, r["rss_before_mib"])
    assert near(mem["final_ram_mb"], r["rss_after_mib"], 3.0, 0.05), (mem, r["rss_after_mib"])
    assert mem["peak_ram_mb"] >= max(mem["initial_ram_mb"], mem["final_ram_mb"])
    s = m["system"]
    assert 0 <= s["cpu_percent"] <= 100 and s["network_io_mb"] >= 0
    assert s["disk_io_percent"] is None or 0 <= s["disk_io_percent"] <= 100
    assert near(s["memory_percent"], r["mem_percent"], 2.0)


def test_profile_and_get_metrics(ran):
    fit = example(ran, "profile(")
    got = example(ran, "get_metrics(")
    m = got["values"]["metrics"]
    assert m["operation_name"] == "training_loop"  # no name: the last operation
    check_block(m, fit["work"], fit)
    # fit() wrote 150 MiB and held them 0.7 s: the block's peak is the
    # process's high-water mark
    assert near(m["memory"]["peak_ram_mb"], fit["work"][0]["hwm_mib"], 0, 0.03), (m["memory"], fit["work"])
    assert m["memory"]["peak_ram_mb"] > m["memory"]["initial_ram_mb"] + 140
    assert got["out"] == f"Peak RAM: {m['memory']['peak_ram_mb']} MB\n"
    assert m["memory"]["peak_gpu_mb"] == GPU_BYTES / MiB
    assert m["compute"]["gpu_utilization_percent"] == GPU_SM
    assert m["compute"]["estimated_flops"] is None  # not asked for


def test_get_current_memory_and_timing_breakdown(ran):
    cur = example(ran, "get_current_memory(")
    assert isinstance(cur["values"]["current_ram"], float)
    # the latest sample's RSS: within a sampling interval of now
    assert near(cur["values"]["current_ram"], cur["rss_after_mib"], 3.0, 0.05), cur
    br = example(ran, "get_timing_breakdown(")
    wall = example(ran, "get_metrics(")["values"]["metrics"]["timing"]["wall_time_s"]
    assert br["values"]["breakdown"] == {"training_loop": wall}
    assert br["out"] == f"training_loop: {wall:.3f}s\n"


def test_to_dict_and_summary(ran):
    m = example(ran, "get_metrics(")["values"]["metrics"]
    d = example(ran, "to_dict(")["values"]["metrics_dict"]
    assert d == m and set(d) == {"operation_name", "timing", "memory", "compute", "system", "carbon"}
    assert set(d["memory"]) >= {"peak_ram_mb", "final_ram_mb", "peak_gpu_mb", "memory_leak_detected",
                                "initial_ram_mb"}
    assert set(d["timing"]) >= {"wall_time_s", "cpu_time_s", "user_time_s", "system_time_s"}
    assert set(d["compute"]) == {"estimated_flops", "flops_per_second", "gpu_utilization_percent",
                                 "cpu_utilization_percent"}
    assert set(d["system"]) == {"cpu_percent", "memory_percent", "disk_io_percent", "network_io_mb"}
    s = example(ran, "summary(")["out"]
    peak = m["memory"]["peak_ram_mb"]
    assert s == f"Peak RAM: {peak:.1f} MB, Wall Time: {m['timing']['wall_time_s']:.1f}s, GPU Util: {GPU_SM}%\n"


def test_basic_profiling(ran):
    r = example(ran, "Basic Performance Profiling")
    m = r["values"]["metrics"]
    assert len(r["work"]) == 10
    check_block(m, r["work"], r)
    assert r["out"] == (f"Training completed in {m['timing']['wall_time_s']:.1f}s\n"
                        f"Peak memory usage: {m['memory']['peak_ram_mb']:.1f} MB\n")


def test_gpu_memory_monitoring(ran):
    r = example(ran, "GPU Memory Monitoring")
    # 73 of the stand-in device's 80 GiB: over 90%, at every batch
    assert r["out"].count("Warning: High GPU memory usage\n") == 5, r["out"]
    m = r["values"]["gpu_metrics"]
    assert m["memory"]["peak_gpu_mb"] == GPU_BYTES / MiB
    assert r["out"].endswith(f"Peak GPU memory: {GPU_BYTES / MiB} MB\n")
    check_block(m, r["work"], r)


def test_multi_operation_breakdown(ran):
    r = example(ran, "Multi-Operation Profiling")
    b = r["values"]["timing_breakdown"]
    assert list(b) == ["data_loading", "preprocessing", "training"]
    for (op, t), w in zip(b.items(), r["work"]):
        assert near(t, w["wall_s"], TIME_ABS_S, 0.01) and t >= w["wall_s"], (op, t, w)
    assert r["values"]["total_time"] == sum(b.values())
    lines = r["out"].splitlines()
    assert lines[0] == "Operation breakdown:" and len(lines) == 4
    shares = [float(re.search(r"\(([\d.]+)%\)", x).group(1)) for x in lines[1:]]
    assert near(sum(shares), 100.0, 0.2)


def test_memory_leak_detection(ran):
    r = example(ran, "Memory Leak Detection")
    m = r["values"]["metrics"]
    assert len(r["work"]) == 100
    check_block(m, r["work"], r)
    grew = m["memory"]["final_ram_mb"] - m["memory"]["initial_ram_mb"]
    assert near(grew, 100.0, 5.0, 0.05), m["memory"]  # 100 MiB kept
    # the run's own leak verdict, not one made up for the block
    leak = r["leak"]
    assert m["memory"]["memory_leak_detected"] == (leak["suspected"] if leak["evaluated"] else None), leak
    if m["memory"]["memory_leak_detected"]:
        assert "Potential memory leak detected" in r["out"]
    else:
        assert r["out"] == ""


def test_flops_estimation(ran):
    r = example(ran, "FLOPS Estimation")
    c = r["values"]["compute_metrics"]
    assert c["estimated_flops"] == FLOPS  # torch's count of the two addmm
    assert r["out"].splitlines() == [f"Estimated FLOPs: {FLOPS:,}", f"FLOPS per second: {c['flops_per_second']:,.0f}"]
    # flops_per_second is the count over the block's wall time
    assert c["flops_per_second"] > 0


def test_error_handling(ran):
    r = example(ran, "Error Handling")
    assert r["out"].startswith("Operation failed: as planned\n")
    m = r["values"]["partial_metrics"]
    assert m["operation_name"] == "potentially_failing_operation"
    check_block(m, r["work"], r)
    assert r["out"].endswith(f"Partial timing: {m['timing']['wall_time_s']:.2f}s\n")


def test_best_practices(ran):
    for prefix in ("1. Use appropriate", "2. Enable GPU"):
        example(ran, prefix)
    # the profiler of "2." has track_gpu=False (no CUDA here): no GPU figures
    m = example(ran, "3. Use descriptive")["last_block"]  # of its second block, the "bad" name
    assert m["operation_name"] == "operation" and m["timing"]["wall_time_s"] > 0
    assert m["memory"]["peak_gpu_mb"] is None and m["compute"]["gpu_utilization_percent"] is None
    # a batch of 128 x 3 x 224 x 224 float32 is 73.5 MiB, written in the block
    r = example(ran, "4. Profile representative")
    m = r["last_block"]
    assert m["operation_name"] == "production_inference"
    assert m["memory"]["peak_ram_mb"] >= m["memory"]["initial_ram_mb"] + 73, m["memory"]
    assert near(m["memory"]["final_ram_mb"], r["rss_after_mib"], 3.0, 0.05), (m["memory"], r["rss_after_mib"])

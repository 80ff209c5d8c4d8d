# SPDX-License-Identifier: MIT
"""What mlmond measures, checked against what the kernel says about the same
process over the same span: CPU %, bytes written, RSS, process trees, and
null (not 0) for what cannot be known."""

import ctypes
import math
import os
import sys

import pytest

from conftest import cpu_pct_between, Helper, MiB, now_ms, proc_io, read_proc, record_cpu, statm_rss_bytes



def daemon_cpu_over(mlmond, run_id, records):
    """Takes the daemon's samples inside the span of records; returns (the
    throughput endpoint's cpu_pct over [first, last] of them, what the
    readings say for exactly that span, the samples)."""
    t0, t1 = records[0][0], records[-1][0]
    mlmond.wait_sample_after(run_id, t1)
    s = mlmond.samples(run_id, f"?from={math.ceil(t0)}&until={math.floor(t1)}")
    assert len(s) >= 2, f"fewer than 2 samples in [{t0}, {t1}]: {s}"
    a, z = s[0], s[-1]
    span = z["ts"] - a["ts"]
    assert span >= 2000, f"the samples span only {span} ms of the {t1 - t0:.0f} ms recorded"
    st, tp = mlmond.get(f"/v1/runs/{run_id}/throughput?window={span}ms&until={z['ts']}")
    assert st == 200, tp
    w = tp["windows"][0]
    assert (w["from"], w["until"], w["samples"]) == (a["ts"], z["ts"], len(s)), w
    assert w["cpu_pct"] is not None, w
    # the per-sample cpu_pct, weighted by each sample's interval, must tell
    # the same story as the cumulative cpu_time_s
    weighted = sum(b["cpu_pct"] * (b["ts"] - p["ts"]) for p, b in zip(s, s[1:])) / span
    assert abs(weighted - w["cpu_pct"]) <= 2.0, (weighted, w["cpu_pct"])
    return w["cpu_pct"], cpu_pct_between(records, a["ts"], z["ts"]), s


def test_cpu_pct_matches_schedstat(mlmond, helpers):
    h = helpers("busy", 50, 0)
    h.expect("ready")
    run = mlmond.register(h.pid, interval="250ms")
    assert run["interval_ms"] == 250
    records = record_cpu([h.pid], 3.0)
    daemon, kernel, samples = daemon_cpu_over(mlmond, run["id"], records)
    # the helper really burned: otherwise the comparison proves little
    assert kernel > 15, f"the 50% burner got only {kernel:.1f}% of a CPU"
    assert abs(daemon - kernel) <= 3.0, f"mlmond says {daemon:.2f}% CPU, schedstat says {kernel:.2f}%"
    # on a 250 ms schedule: one tick late does not shift the ones after it
    gaps = [b["ts"] - a["ts"] for a, b in zip(samples, samples[1:])]
    assert abs(sum(gaps) / len(gaps) - 250) <= 15 and max(gaps) < 1000, gaps


def test_cpu_pct_counts_every_thread(mlmond, helpers):
    """Two burning threads, an idle main thread: the process's CPU is the sum
    of its threads (like top and pidstat), not its main thread's."""
    h = helpers("busy", 40, 0, 2)
    h.expect("ready")
    run = mlmond.register(h.pid, interval="250ms")
    records = record_cpu([h.pid], 3.0)
    daemon, kernel, _ = daemon_cpu_over(mlmond, run["id"], records)
    assert kernel > 15, f"the two 40% threads got only {kernel:.1f}% of a CPU"
    assert abs(daemon - kernel) <= 4.0, (
        f"mlmond says {daemon:.2f}% CPU for a process whose threads used {kernel:.2f}% "
        f"(/proc/PID/schedstat covers the main thread only)")


def test_write_bytes(mlmond, helpers, data_dir):
    size = 20 * MiB
    h = helpers("writer", os.path.join(data_dir, "written.bin"), size)
    h.expect("ready")
    io0 = proc_io(h.pid)
    run = mlmond.register(h.pid, interval="250ms")
    assert run["latest"]["write_bytes"] == 0, run["latest"]
    h.send("go")
    h.expect("done", timeout=30)
    io1 = proc_io(h.pid)
    run = mlmond.wait_sample_after(run["id"], now_ms())
    latest, summary = run["latest"], run["summary"]
    kernel_write = io1["write_bytes"] - io0["write_bytes"]
    # exactly the kernel's counters since registration (the writer was idle
    # between our reading and the registration, and is idle now)
    assert latest["write_bytes"] == kernel_write, (latest, io0, io1)
    assert latest["wchar_bytes"] == io1["wchar"] - io0["wchar"], (latest, io0, io1)
    assert latest["wchar_bytes"] >= size
    assert summary["write_bytes"] == latest["write_bytes"]
    if kernel_write == 0:
        pytest.skip(f"{data_dir}: this filesystem does not account write_bytes")
    assert abs(latest["write_bytes"] - size) <= 0.05 * size, f"write_bytes {latest['write_bytes']} for {size} written"


def test_rss_matches_statm(mlmond, helpers):
    h = helpers("grow", 64)
    h.expect("ready")
    run = mlmond.register(h.pid, interval="250ms")
    run = mlmond.wait_sample_after(run["id"], now_ms())
    kernel = statm_rss_bytes(h.pid)
    latest = run["latest"]
    assert kernel >= 64 * MiB
    assert abs(latest["rss_bytes"] - kernel) <= 0.02 * kernel, f"rss_bytes {latest['rss_bytes']}, statm {kernel}"
    status = dict(line.split(":", 1) for line in read_proc(h.pid, "status").decode().splitlines())
    rss_anon = int(status["RssAnon"].split()[0]) * 1024
    assert abs(latest["rss_anon_bytes"] - rss_anon) <= 0.02 * rss_anon, (latest["rss_anon_bytes"], rss_anon)
    assert latest["peak_rss_bytes"] >= latest["rss_bytes"]
    assert run["summary"]["peak_rss_bytes"] >= latest["rss_bytes"]
    assert latest["processes"] == 1 and latest["threads"] == 1


def test_children_tree(mlmond, helpers):
    h = helpers("tree", 32, 50)
    kids = [int(p) for p in h.expect("ready")]
    tree = [h.pid] + kids
    r = mlmond.ctl("register", h.pid, "--children", "--interval", "250ms")
    assert r.returncode == 0, r.stderr
    run_id = int(r.stdout.decode().strip())
    run = mlmond.wait_sample_after(run_id, now_ms())
    assert run["children"] is True
    latest = run["latest"]
    kernel_rss = sum(statm_rss_bytes(p) for p in tree)
    assert latest["processes"] == 3, latest
    assert latest["threads"] == 3, latest
    assert abs(latest["rss_bytes"] - kernel_rss) <= 0.05 * kernel_rss, (latest["rss_bytes"], kernel_rss)
    assert latest["rss_bytes"] > 64 * MiB  # both children's 32 MiB, not just the parent's

    records = record_cpu(tree, 3.0)
    daemon, kernel, _ = daemon_cpu_over(mlmond, run_id, records)
    assert kernel > 30, f"the two 50% children got only {kernel:.1f}% together"
    assert abs(daemon - kernel) <= 5.0, f"mlmond says {daemon:.2f}% for the tree, the kernel {kernel:.2f}%"


def test_unknown_is_null_never_zero(mlmond, helpers):
    h = helpers("busy", 30, 0)
    h.expect("ready")
    st, run = mlmond.post("/v1/runs", {"pid": h.pid, "interval": "250ms"})
    assert st == 201, run
    base = run["latest"]
    # the baseline reading has nothing to compute a rate from
    assert base is not None
    assert base["cpu_pct"] is None, base
    for k in ("read_bytes_per_s", "write_bytes_per_s", "netns_rx_bytes_per_s", "netns_tx_bytes_per_s"):
        assert base[k] is None, (k, base)
    assert base["ts"] == run["registered_ts"]
    # no GPU here: unknown, not 0
    assert base["gpu_mem_bytes"] is None and base["gpu_util_pct"] is None

    run = mlmond.wait_sample_after(run["id"], base["ts"])
    assert isinstance(run["latest"]["cpu_pct"], float) and run["latest"]["cpu_pct"] >= 0, run["latest"]
    # the stored baseline is null too, and later ones are numbers
    s = mlmond.samples(run["id"])
    assert s[0]["ts"] == base["ts"] and s[0]["cpu_pct"] is None, s[0]
    assert all(isinstance(x["cpu_pct"], float) for x in s[1:]), s

    # a window with no samples at all: every rate unknown
    st, tp = mlmond.get(f"/v1/runs/{run['id']}/throughput?window=1s&until={base['ts'] - 10000}")
    assert st == 200, tp
    w = tp["windows"][0]
    assert w["samples"] == 0
    for k in ("cpu_pct", "read_bytes_per_s", "write_bytes_per_s", "netns_rx_bytes_per_s", "netns_tx_bytes_per_s"):
        assert w[k] is None, (k, w)


# A process that maps a file, reads every page of it, says "ready", then
# waits on its stdin without running.
MAPPER = r"""
import mmap, sys
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
n = len(m)
sum(m[i] for i in range(0, n, mmap.PAGESIZE))
print("ready", flush=True)
sys.stdin.readline()
"""


def page_out(pid, start, length):
    """process_madvise(MADV_PAGEOUT) of [start, start + length) of pid: the
    kernel reclaims those pages while pid does not run."""

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.pidfd_open(pid)
    try:
        iov = Iovec(start, length)
        n = libc.syscall(440, fd, ctypes.byref(iov), 1, 21, 0)  # SYS_process_madvise, MADV_PAGEOUT
        assert n >= 0, f"process_madvise: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(fd)


def test_rss_drop_of_idle_process(mlmond, data_dir):
    """A process that does not run is not read again at every sample, but its
    statm is at every 4th (doc/figures.md): pages reclaimed from it
    meanwhile show within 4 samples."""
    path = os.path.join(data_dir, "mapped")
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20) * 64)
        f.flush()
        os.fsync(f.fileno())  # clean pages: reclaim drops them at once
    h = Helper([sys.executable, "-c", MAPPER, path])
    try:
        idle_rss_drop(mlmond, h, path)
    finally:
        h.close()


def idle_rss_drop(mlmond, h, path):
    h.expect("ready")
    maps = read_proc(h.pid, "maps").decode().splitlines()
    start, end = next(line.split()[0] for line in maps if line.endswith(path)).split("-")
    start, end = int(start, 16), int(end, 16)
    run = mlmond.register(h.pid, interval="250ms")
    before = statm_rss_bytes(h.pid)
    assert before >= 64 * MiB, before
    # samples enough that its stat and statm are reused (the clock stands still)
    ts = mlmond.wait_sample_after(run["id"], now_ms() + 2000, timeout=6.0)["latest"]["ts"]
    clock = read_proc(h.pid, "schedstat").split()[0]
    page_out(h.pid, start, end - start)
    t = now_ms()
    after = statm_rss_bytes(h.pid)
    assert after <= before - 48 * MiB, f"the kernel reclaimed only {(before - after) / MiB:.0f} MiB"
    mlmond.wait_sample_after(run["id"], t + 2000, timeout=6.0)
    assert read_proc(h.pid, "schedstat").split()[0] == clock, "the process ran: nothing was reused"
    s = [x for x in mlmond.samples(run["id"], f"?from={ts}") if x["ts"] > t]
    assert len(s) >= 4, s
    seen = [i for i, x in enumerate(s) if x["rss_bytes"] <= after + 4 * MiB]
    assert seen and seen[0] < 4, [(x["ts"] - t, x["rss_bytes"]) for x in s]
    assert all(x["rss_bytes"] <= after + 4 * MiB for x in s[seen[0]:]), s

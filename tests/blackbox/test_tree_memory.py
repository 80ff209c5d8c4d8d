# SPDX-License-Identifier: MIT
"""The memory of a forked tree (a training process and its DataLoader-style
workers, made with os.fork) counted with each shared page once:

- a tree run's pss_bytes, uss_bytes and pss_anon_bytes are the sums of its
  processes' /proc/PID/smaps_rollup as the test reads them, in the samples,
  the summary, mlmonctl show and /metrics, while its RSS sum counts the
  parent's 200 MiB once per process; a run of one process has none (null);
- the leak watch of a tree judges its Pss_Anon sum: a parent leaking 2 MiB/s
  that forks 2 new workers every 5 s is suspected with a slope within 25% of
  2 MiB/s (its RssAnon sum grows 3-4x faster); the same tree without the
  leak stays quiet; workers that copy the parent's shared pages (Python
  refcounts written as they read a dataset the parent built) are no leak of
  the parent, and the verdict's reason says so;
- the Python profiler's RAM figures of a tree with workers are its PSS;
- a real torch DataLoader with 2 workers reads its PSS (248 MiB where its
  RSS sum is 680 MiB), as the test sums it."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import Helper, MiB, needs, wait_for

CONFIG = "[daemon]\npss_interval = 1s\n"


def smaps(pid):
    """(Pss, Pss_Anon, Private_Clean + Private_Dirty) of one process, in bytes."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        v = {m.group(1): int(m.group(2)) * 1024 for m in re.finditer(r"^(\w+):\s+(\d+) kB", f.read(), re.M)}
    return v["Pss"], v["Pss_Anon"], v["Private_Clean"] + v["Private_Dirty"]


def statm_rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# The jobs' workers die with their parent, as the C helpers' do.
PRELUDE = """
import ctypes
def die_with_parent():
    ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
"""


def start(code, *args):
    return Helper([sys.executable, "-c", PRELUDE + code] + [str(a) for a in args])


# A parent holding 200 MiB, forked workers that only sleep.
HOLDING = r"""
import os, sys, time
b = bytearray(200 << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
kids = []
for _ in range(WORKERS):
    pid = os.fork()
    if pid == 0:
        die_with_parent()
        time.sleep(3600)
        os._exit(0)
    kids.append(pid)
"""

STATIC = "WORKERS = 3\n" + HOLDING + r"""
print("ready", *kids, flush=True)
sys.stdin.read()
"""

# A parent that forks 2 new workers every 5 s (as a DataLoader re-created
# each epoch), leaking LEAK_MIB MiB a second (0: none). Prints the time and
# bytes of each leak step, its own ground truth.
EPOCHS = r"""
import os, signal, sys, time
leak_mib = int(sys.argv[1])
held = [bytearray(100 << 20)]
for i in range(0, len(held[0]), 4096):
    held[0][i] = 1
kids = []
def refork():
    for k in kids:
        os.kill(k, signal.SIGKILL)
        os.waitpid(k, 0)
    kids.clear()
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            die_with_parent()
            time.sleep(3600)
            os._exit(0)
        kids.append(pid)
refork()
print("ready", flush=True)
t0 = last = time.monotonic()
grown = 0
while True:
    time.sleep(0.25)
    now = time.monotonic()
    if leak_mib:
        b = bytearray(leak_mib << 18)  # a quarter of a second's leak
        for i in range(0, len(b), 4096):
            b[i] = 1
        held.append(b)
        grown += len(b)
    if now - last >= 5:
        refork()
        last = now
        print("grown", now - t0, grown, flush=True)
"""

# A parent that builds a dataset of small Python objects, then forks 2
# workers that read it slice by slice, as DataLoader workers do: reading an
# object writes its refcount, so each page read is copied into the worker.
COPY = r"""
import os, sys, time
data = [(i, i + 1) for i in range(2_000_000)]
kids = []
for w in range(2):
    pid = os.fork()
    if pid == 0:
        die_with_parent()
        time.sleep(3)
        step = 40_000
        for k in range(0, len(data), step):
            for x in data[k:k + step]:
                pass
            time.sleep(1)
        time.sleep(3600)
        os._exit(0)
    kids.append(pid)
print("ready", *kids, flush=True)
sys.stdin.read()
for k in kids:
    os.kill(k, 9)
"""


def test_tree_pss_is_the_sum_of_smaps_rollup(make_mlmond):
    d = make_mlmond(interval="250ms", config_text=CONFIG)
    h = start(STATIC)
    try:
        kids = [int(p) for p in h.expect("ready", timeout=30)]
        pids = [h.pid] + kids
        tree = d.register(h.pid, children=True, name="tree")["id"]
        alone = d.register(kids[0], name="alone")["id"]

        def read():
            run = d.run(tree)
            s = run["summary"]
            return run if s["final_pss_bytes"] is not None and s["samples"] >= 8 else None
        run = wait_for(read, 10, what="two PSS readings")
        truth = [smaps(p) for p in pids]
        pss, anon, uss = (sum(t[i] for t in truth) for i in range(3))
        rss = sum(statm_rss(p) for p in pids)
        s = run["summary"]
        print(f"tree of 4: RSS sum {rss / MiB:.1f} MiB, PSS {pss / MiB:.1f} MiB (mlmond "
              f"{s['final_pss_bytes'] / MiB:.1f}), USS {uss / MiB:.1f} MiB")
        # the memory stands still: mlmond's last reading is the test's
        assert s["final_pss_bytes"] == pytest.approx(pss, rel=0.02), (s, pss)
        assert s["peak_pss_bytes"] >= s["final_pss_bytes"], s
        assert rss > 3 * pss, (rss, pss)  # the RSS sum counts the 200 MiB four times
        samples = d.samples(tree)
        read_ = [x for x in samples if x["pss_bytes"] is not None]
        assert read_ and len(read_) < len(samples), "PSS is read every pss_interval, not every sample"
        last = read_[-1]
        assert last["uss_bytes"] == pytest.approx(uss, rel=0.1, abs=2 * MiB), (last, uss)
        assert last["pss_anon_bytes"] == pytest.approx(anon, rel=0.02), (last, anon)
        assert last["uss_bytes"] < last["pss_anon_bytes"] <= last["pss_bytes"], last

        # a run of one process has no PSS: unknown, not 0
        one = d.run(alone)
        assert one["summary"]["peak_pss_bytes"] is None and one["latest"]["pss_bytes"] is None, one

        show = d.ctl("show", tree)
        assert show.returncode == 0, show.stderr
        m = re.search(rb"final PSS: +([\d.]+) MiB", show.stdout)
        assert m and float(m.group(1)) == pytest.approx(pss / MiB, rel=0.02), show.stdout.decode()
        assert b"PSS" not in d.ctl("show", alone).stdout

        text = d.request("GET", "/metrics").body.decode()
        m = re.search(rf'^mlmond_run_pss_bytes{{run="{tree}"[^}}]*}} (\S+)$', text, re.M)
        assert m and float(m.group(1)) == pytest.approx(pss, rel=0.02), text[:2000]
        assert re.search(rf'^mlmond_run_uss_bytes{{run="{tree}"', text, re.M)
        assert not re.search(rf'^mlmond_run_pss_bytes{{run="{alone}"', text, re.M)
    finally:
        h.close()


def test_tree_leak_is_judged_on_pss(make_mlmond):
    d = make_mlmond(interval="500ms", config_text=CONFIG + "[leak]\ngrace = 10s\n")
    jobs = {"leak": start(EPOCHS, 2), "quiet": start(EPOCHS, 0), "copy": start(COPY)}
    try:
        runs = {}
        for name, h in jobs.items():
            h.expect("ready", timeout=60)
            runs[name] = d.register(h.pid, children=True, name=name)["id"]
        t0 = time.monotonic()

        def flagged():
            v = d.run(runs["leak"])["leak"]
            return v if v["suspected"] else None
        leak = wait_for(flagged, 90, interval=0.5, what="the tree's 2 MiB/s leak to be flagged")
        print(f"tree leak flagged after {time.monotonic() - t0:.1f} s: {leak['reason']}")
        assert leak["metric"] == "pss_anon_bytes", leak
        assert leak["slope_bytes_per_s"] == pytest.approx(2 * MiB, rel=0.25), leak

        # the RssAnon sum the verdict no longer judges grew several times faster
        samples = d.samples(runs["leak"])
        a, z = samples[len(samples) // 3], samples[-1]
        rss_rate = (z["rss_anon_bytes"] - a["rss_anon_bytes"]) / ((z["ts"] - a["ts"]) / 1000)
        print(f"RssAnon sum grew {rss_rate / MiB:.2f} MiB/s")
        assert rss_rate > 2.5 * MiB, rss_rate

        said = None  # what the copying tree's verdict said while its workers copied
        while time.monotonic() - t0 < 75:
            for name in ("quiet", "copy"):
                v = d.run(runs[name])["leak"]
                assert not v["suspected"], f"{name} flagged: {v}"
                if name == "copy" and v["reason"].startswith("workers copy the parent's shared pages"):
                    said = said or v["reason"]
            time.sleep(1)
        quiet = d.run(runs["quiet"])
        assert quiet["leak"]["evaluated"] and quiet["summary"]["leak_detected"] is False, quiet["leak"]
        copy = d.run(runs["copy"])
        print("copy-on-access:", said)
        assert said, f"the copying tree's verdict never said so: {copy['leak']}"
        assert copy["summary"]["leak_detected"] is False, copy["summary"]
        # and the workers did copy: the tree's PSS grew by tens of MiB
        read = [x["pss_bytes"] for x in d.samples(runs["copy"]) if x["pss_bytes"] is not None]
        print(f"copy-on-access: the tree's PSS grew {(read[-1] - read[0]) / MiB:.1f} MiB")
        assert read[-1] - read[0] > 64 * MiB, read
    finally:
        for h in jobs.values():
            h.close()


# The profiler of a training process with two forked workers that hold the
# parent's 200 MiB: its RAM is the tree's PSS, as the job reads it itself.
PROFILED = "WORKERS = 2\n" + HOLDING + r"""
import json, re
from mlmon import PerformanceProfiler

def pss():
    total = 0
    for pid in [os.getpid()] + kids:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            total += int(re.search(r"^Pss:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024
    return total / 1048576.0

profiler = PerformanceProfiler()
time.sleep(1.5)
before = pss()
with profiler.profile("epoch"):
    time.sleep(1.5)
after = pss()
m = profiler.get_metrics().to_dict()["memory"]
print(json.dumps({"m": m, "before": before, "after": after, "current": profiler.get_current_memory()}))
"""


def test_profiler_ram_of_a_tree_is_its_pss(make_mlmond):
    from test_python import env_for
    d = make_mlmond(interval="250ms", config_text=CONFIG)
    r = subprocess.run([sys.executable, "-c", PRELUDE + PROFILED], capture_output=True, text=True,
                       env=env_for(d), timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    m = got["m"]
    print("profiler of a tree:", got)
    # about 205 MiB, where the RSS sum is about 615 MiB
    for key, truth in (("initial_ram_mb", got["before"]), ("final_ram_mb", got["after"]),
                       ("peak_ram_mb", got["after"])):
        assert m[key] == pytest.approx(truth, rel=0.05), (key, m, got)
    assert got["current"] == pytest.approx(got["after"], rel=0.05), got


# A real torch DataLoader with 2 persistent workers over a 64 MiB tensor.
LOADER = r"""
import os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __init__(self):
        self.x = torch.ones(16 << 20)  # 64 MiB, shared with the forked workers
    def __len__(self):
        return 1 << 20
    def __getitem__(self, i):
        time.sleep(0.005)
        return self.x[i % 1000]

if __name__ == "__main__":
    loader = DataLoader(Slow(), batch_size=4, num_workers=2, persistent_workers=True)
    it = iter(loader)
    next(it)
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
        workers = f.read().split()
    print("ready", *workers, flush=True)
    while True:
        next(it)
"""


def test_dataloader_pss(make_mlmond):
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        needs("torch", "the test runs a real torch DataLoader (Debian package python3-torch)")
    d = make_mlmond(interval="250ms", config_text=CONFIG)
    h = Helper(["/usr/bin/python3", "-c", LOADER])
    try:
        workers = [int(p) for p in h.expect("ready", timeout=60)]
        assert len(workers) == 2, workers
        run_id = d.register(h.pid, children=True, name="loader")["id"]

        def read():
            run = d.run(run_id)
            return run if run["summary"]["samples"] >= 8 and run["summary"]["final_pss_bytes"] else None
        run = wait_for(read, 10, what="PSS readings of the loader")
        pids = [h.pid] + workers
        pss = sum(smaps(p)[0] for p in pids)
        rss = sum(statm_rss(p) for p in pids)
        got = run["summary"]["final_pss_bytes"]
        print(f"DataLoader tree: RSS sum {rss / MiB:.1f} MiB, PSS {pss / MiB:.1f} MiB, mlmond {got / MiB:.1f} MiB")
        assert got == pytest.approx(pss, rel=0.05), (got, pss)
        assert rss > 1.5 * pss, (rss, pss)  # the workers map torch and the tensor again
    finally:
        h.close()

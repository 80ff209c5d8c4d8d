# SPDX-License-Identifier: MIT
"""GPU held but idle, GPU memory left behind by a run whose main process
exited, and energy per step, on the fixture /proc and /sys whose counters
move at known rates (tests/fixtures/gpu/mktree.py Live: pid 4242 holds
4.1 GiB of an AMD GPU at 50 % busy, pid 4343 1 GiB at 10 %, the package and
the card draw known power) and on the real /proc with the NVML stand-in
(per-process memory and SM utilisation as the test sets them)."""
import os
import re
import shutil
import sys
import time

import pytest

from conftest import wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures", "gpu"))
from mktree import Live  # noqa: E402

GIB = 1 << 30
AMD = "0000:03:00.0"
# idle below 15 % (pid 4343's 10 % is idle, 4242's 50 % is not) for 2 s
CONF = "[verdicts]\ngpu_idle_util_pct = 15\ngpu_idle_for = 2s\n"


@pytest.fixture
def live(tmp_path):
    lv = Live(str(tmp_path / "fx"))
    lv.start()
    yield lv
    lv.stop()


def fixture_daemon(make_mlmond, live, conf=CONF):
    return make_mlmond(interval="250ms", config_text=conf,
                       extra_args=["--proc-root", live.proc_root, "--sys-root", live.sys_root])


def test_idle_on_fixture(make_mlmond, live):
    d = fixture_daemon(make_mlmond, live)
    idle, busy = d.register(4343)["id"], d.register(4242)["id"]
    v = wait_for(lambda: (lambda g: g if g and g["flagged"] else None)(d.run(idle)["gpu_idle"]), 8.0,
                 what="pid 4343's GPU to be idle")
    assert v["evaluated"] and not v["lingering"] and v["device"] == AMD
    assert v["mem_bytes"] >= GIB and v["idle_s"] >= 2.0
    assert v["util_pct"] == pytest.approx(10.0, abs=3), v  # the fixture's rate
    assert re.match(r"GPU held but idle: holds 1\.\d GiB on GPU 0000:03:00\.0, \d+\.\d% busy for \d", v["reason"]), v
    b = d.run(busy)["gpu_idle"]
    assert b["evaluated"] and not b["flagged"] and b["since"] is None, b
    assert re.match(r"holds 4\.1 GiB on GPU 0000:03:00\.0, \d+\.\d% busy$", b["reason"]), b
    text = d.request("GET", "/metrics").body.decode()
    assert re.search(rf'^mlmond_run_gpu_idle{{run="{idle}",[^}}]*}} 1$', text, re.M), text
    assert re.search(rf'^mlmond_run_gpu_idle{{run="{busy}",[^}}]*}} 0$', text, re.M), text
    out = d.ctl("show", idle).stdout.decode()
    assert "GPU idle: YES (GPU held but idle: holds" in out, out
    # with the defaults (5 %, 10 min) neither is idle
    d2 = fixture_daemon(make_mlmond, live, conf="")
    r = d2.register(4343)["id"]
    v = wait_for(lambda: (lambda g: g if g and g["util_pct"] is not None else None)(d2.run(r)["gpu_idle"]), 8.0,
                 what="a judged GPU")
    assert not v["flagged"] and v["since"] is None, v


def test_child_lingers(make_mlmond, live):
    live.stop()  # files as they are now: the test changes them
    with open(os.path.join(live.proc_root, "4242", "task", "4242", "children"), "w") as f:
        f.write("4343 ")
    d = fixture_daemon(make_mlmond, live)
    rid = d.register(4242, children=True)["id"]
    # the tree holds both processes' memory
    wait_for(lambda: (d.run(rid)["latest"]["gpu_mem_bytes"] or 0) > 5 * GIB, 5.0, what="the tree's GPU memory")
    shutil.rmtree(os.path.join(live.proc_root, "4242"))  # the main process is gone, its child stays
    run = wait_for(lambda: (lambda r: r if r["state"] == "exited" else None)(d.run(rid)), 5.0, what="the run to end")
    v = run["gpu_idle"]
    assert v["flagged"] and v["lingering"] and v["lingering_pid"] == 4343 and v["device"] == AMD, v
    assert v["mem_bytes"] >= GIB and v["lingering_state"] in ("R", "S"), v
    assert re.match(r"GPU memory held after exit: the main process \(pid 4242\) exited, but pid 4343 \((running|"
                    r"sleeping)\) of its tree still holds 1\.\d GiB on GPU 0000:03:00\.0$", v["reason"]), v
    # kept with the run
    d.restart()
    assert d.run(rid)["gpu_idle"] == v


def test_zombie_holds(make_mlmond, live):
    live.stop()
    d = fixture_daemon(make_mlmond, live)
    rid = d.register(4242)["id"]
    wait_for(lambda: (d.run(rid)["latest"]["gpu_mem_bytes"] or 0) > 4 * GIB, 5.0, what="pid 4242's GPU memory")
    stat = os.path.join(live.proc_root, "4242", "stat")
    with open(stat) as f:
        text = f.read()
    head, tail = text.rsplit(")", 1)
    fields = tail.split()
    fields[0] = "Z"  # exited, not reaped: the driver still accounts its memory
    with open(stat + ".tmp", "w") as f:
        f.write(head + ") " + " ".join(fields) + "\n")
    os.rename(stat + ".tmp", stat)
    run = wait_for(lambda: (lambda r: r if r["state"] == "exited" else None)(d.run(rid)), 5.0, what="the run to end")
    v = run["gpu_idle"]
    assert v["flagged"] and v["lingering"] and v["lingering_pid"] == 4242 and v["lingering_state"] == "Z", v
    assert "the main process (pid 4242) is a zombie and still holds 4.1 GiB on GPU 0000:03:00.0" in v["reason"], v


def standin():
    path = os.environ.get("NVML_STANDIN")
    if not path:
        pytest.skip("NVML_STANDIN not set (run through meson)")
    return path


def test_nvml_idle(make_mlmond, helpers, monkeypatch):
    idle, busy = helpers("busy", "1", "0"), helpers("busy", "1", "0")
    idle.expect("ready")
    busy.expect("ready")
    # the stand-in reports these per-process figures: 2 GiB at 0 % SM, 2 GiB at 55 %
    monkeypatch.setenv("NVML_STANDIN_PROCS", f"{idle.pid}:{2 * GIB}:0:c,{busy.pid}:{2 * GIB}:55:c")
    d = make_mlmond(interval="250ms", config_text=f"[gpu]\nnvml_library = {standin()}\n"
                                                  "[verdicts]\ngpu_idle_for = 2s\n")
    a, b = d.register(idle.pid)["id"], d.register(busy.pid)["id"]
    v = wait_for(lambda: (lambda g: g if g and g["flagged"] else None)(d.run(a)["gpu_idle"]), 8.0,
                 what="the idle process's GPU to be idle")
    assert v["device"] == "0000:41:00.0" and v["mem_bytes"] == 2 * GIB and v["util_pct"] == 0, v
    assert v["reason"].startswith("GPU held but idle: holds 2.0 GiB on GPU 0000:41:00.0, 0.0% busy for "), v
    w = d.run(b)["gpu_idle"]
    assert w["evaluated"] and not w["flagged"] and w["util_pct"] == 55, w


def test_energy_per_step(make_mlmond, live):
    d = fixture_daemon(make_mlmond, live, conf="")
    rid = d.register(4242)["id"]
    for _ in range(30):  # 100 ms steps, one every 0.1 s
        st, _ = d.post(f"/v1/runs/{rid}/observations", [{"op": "step", "ms": 100.0}])
        assert st == 202
        time.sleep(0.1)
    time.sleep(1.2)  # the last slice closes
    before = d.run(rid)["summary"]["energy_j"]
    st, doc = d.get(f"/v1/runs/{rid}/goodput")
    after = d.run(rid)["summary"]["energy_j"]
    assert st == 200 and doc["steps"] == 29, doc
    assert doc["energy_j"] is not None and doc["energy_j"] > 0, doc
    assert doc["energy_per_step_j"] == pytest.approx(doc["energy_j"] / doc["steps"], rel=1e-3)
    assert doc["energy_per_productive_hour_j"] == pytest.approx(doc["energy_j"] / (doc["step_s"] / 3600), rel=1e-3)
    # the whole run's: the estimate since registration (test_gpu.py checks
    # it against the fixture's power)
    assert before <= doc["energy_j"] <= after, (before, doc, after)
    out = d.ctl("report", rid).stdout.decode()
    assert re.search(r"  energy: [\d.]+ k?J, [\d.]+ J per step, [\d.]+ [kM]?J per productive hour", out), out
    text = d.request("GET", "/metrics").body.decode()
    m = re.search(rf'^mlmond_run_energy_per_step_joules{{run="{rid}",[^}}]*}} ([\d.e+]+)$', text, re.M)
    assert m and float(m.group(1)) > 0, text
    # a span from the registration that ends before the last sample (the
    # run's totals have gone past it: `report` asks for its span after a
    # tick may have come): the estimate counts from 0 at the registration,
    # so its energy is the estimate at its end, not unknown for want of one
    # at the run's first sample
    reg = d.run(rid)["registered_ts"]
    mid = [x for x in d.samples(rid) if x["energy_j"] is not None][2]
    span = f"from={reg}&until={mid['ts']}"
    st, doc = d.get(f"/v1/runs/{rid}/goodput?{span}")
    assert st == 200 and doc["energy_j"] == pytest.approx(mid["energy_j"], rel=1e-9), (doc, mid)
    st, summ = d.get(f"/v1/runs/{rid}/summary?{span}")
    assert st == 200 and summ["energy_j"] == pytest.approx(mid["energy_j"], rel=1e-9), (summ, mid)

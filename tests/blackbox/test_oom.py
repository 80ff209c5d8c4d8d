# SPDX-License-Identifier: MIT
"""Time to OOM on a real leak: a process in a memory cgroup the test makes
and limits (cgroup v2 memory.max, or the v1 memory controller's
memory.limit_in_bytes on hybrid hosts like this project's own) grows by
4 MiB/s until the kernel kills it. mlmond's first forecast must come within
30 % of the time that was really left, its sentence must name the limit
and the cgroup, and /metrics must carry it."""
import os
import re
import signal
import sys
import time

import pytest

from conftest import helper, Helper, MiB, needs, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers"))
import memcg  # noqa: E402

LIMIT = 200 * MiB
# a verdict within seconds: 3 s of grace, windows of 10 and 20 s
CONF = "[leak]\ngrace = 3s\nwindows = 10s,20s\n"


@pytest.fixture
def cgroup():
    cg, why = memcg.make()
    if cg is None:
        needs("memcg", why)
    cg.limit(LIMIT)
    yield cg
    deadline = time.monotonic() + 5
    while os.path.exists(cg.dir) and time.monotonic() < deadline:
        cg.remove()  # empty once the killed process is reaped
        time.sleep(0.1)


def test_forecast_before_the_kill(make_mlmond, cgroup):
    d = make_mlmond(interval="250ms", config_text=CONF)
    procs = os.path.join(cgroup.dir, "cgroup.procs")
    # into the cgroup before it allocates anything: all its memory counts there
    h = Helper(["/bin/sh", "-c", f'echo $$ > {procs} && exec {helper("memshape")} leak 16 4096'])
    try:
        h.expect("ready")
        rid = d.register(h.pid)["id"]

        def forecast():
            leak = d.run(rid)["leak"]
            return leak if leak and leak.get("oom_eta_s") is not None else None
        leak = wait_for(forecast, 40.0, interval=0.1, what="a forecast")
        t_forecast = time.monotonic()
        oom = leak["oom"]
        text = d.request("GET", "/metrics").body.decode()
        rc = h.proc.wait(timeout=120)
        left = time.monotonic() - t_forecast
    finally:
        h.close()
    print(f"oom: forecast {leak['oom_eta_s']:.1f} s, killed {left:.1f} s later ({oom['reason']})")
    assert rc == -signal.SIGKILL, f"exited {rc}, not killed by the kernel"
    eta = leak["oom_eta_s"]
    assert abs(eta - left) <= 0.3 * left, f"forecast {eta:.1f} s, killed {left:.1f} s later"
    assert oom["limit"] == cgroup.limit_file() and oom["limit_bytes"] == LIMIT, oom
    assert oom["cgroup"] == cgroup.path and oom["usage_bytes"] < LIMIT, oom
    # the lower confidence bound: at most the rate it really grew at (4 MiB/s)
    assert 0 < oom["slope_lo_bytes_per_s"] <= 4.2 * MiB, oom
    assert re.match(rf"at [\d.]+ MiB/s \(at least\) it reaches {re.escape(cgroup.limit_file())} = 200\.0 MiB of "
                    rf"cgroup {re.escape(cgroup.path)} \([\d.]+ MiB used now\) in ~", oom["reason"]), oom
    assert re.search(rf'^mlmond_run_oom_eta_seconds{{run="{rid}",[^}}]*metric="rss_anon_bytes"}} [\d.e+]+$', text,
                     re.M), text
    # the run ended: no forecast any more, the last one said
    run = wait_for(lambda: (lambda r: r if r["state"] == "exited" else None)(d.run(rid)), 5.0, what="the run to end")
    assert run["leak"]["oom_eta_s"] is None and run["leak"]["oom"]["reason"].startswith("the run ended; the last "
                                                                                       "forecast: at "), run["leak"]
    out = d.ctl("show", rid).stdout.decode()
    assert "time to OOM: the run ended; the last forecast: at " in out, out


def test_no_forecast_for_a_flat_process(make_mlmond, helpers):
    d = make_mlmond(interval="250ms", config_text=CONF)
    h = helpers("memshape", "flat", "32")
    h.expect("ready")
    rid = d.register(h.pid)["id"]
    wait_for(lambda: d.run(rid)["leak"]["evaluated"], 20.0, what="a leak verdict")
    leak = d.run(rid)["leak"]
    assert leak["oom_eta_s"] is None and leak["oom"]["eta_s"] is None, leak
    assert leak["oom"]["reason"].startswith("no forecast: no steady growth"), leak
    assert "mlmond_run_oom_eta_seconds{" not in d.request("GET", "/metrics").body.decode()

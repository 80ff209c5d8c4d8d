# SPDX-License-Identifier: MIT
"""Leak verdicts on real processes: a process growing 2 MiB/s is flagged
within a minute; a flat 300 MiB process, one that grows for 10 s then stops,
a garbage-collector sawtooth and one whose peaks rise while its floor stays
flat are not flagged over two minutes. All five run at once under one
daemon at a 500 ms interval."""

import time

from conftest import MiB, wait_for



def test_leak_verdicts_on_real_processes(make_mlmond, helpers):
    d = make_mlmond(interval="500ms")
    procs = {
        "leak": helpers("memshape", "leak", 300, 2048),           # +2 MiB/s from the start
        "flat": helpers("memshape", "flat", 300),
        "ramp": helpers("memshape", "ramp", 300, 4096, 10),       # +40 MiB in 10 s, then flat
        "saw": helpers("memshape", "saw", 300, 100, 10),          # +100 MiB over 10 s, freed, again
        "peaks": helpers("memshape", "peaks", 300, 1024),         # peaks rising 1 MiB/s, the floor flat
    }
    runs = {}
    for name, h in procs.items():
        h.expect("ready", timeout=30)
        runs[name] = d.register(h.pid, name=name)["id"]
    t0 = time.monotonic()

    # the leak: flagged within 60 s of registration, with a slope near 2 MiB/s
    def flagged():
        leak = d.run(runs["leak"])["leak"]
        return leak if leak and leak["suspected"] else None
    leak = wait_for(flagged, 60, what="the 2 MiB/s leak to be flagged")
    delay = time.monotonic() - t0
    assert 1.4 * MiB <= leak["slope_bytes_per_s"] <= 2.6 * MiB, leak
    assert leak["metric"] == "rss_anon_bytes" and leak["reason"], leak
    assert leak["growth_bytes"] >= 16 * MiB and leak["window_s"] > 0, leak
    assert 0 < leak["confidence"] <= 1, leak
    print(f"2 MiB/s leak flagged after {delay:.1f} s: {leak['reason']}")

    # the quiet ones: never suspected over two minutes, checked every second
    quiet = ["flat", "ramp", "saw", "peaks"]
    while time.monotonic() - t0 < 120:
        for name in quiet:
            v = d.run(runs[name])["leak"]
            assert v is not None and not v["suspected"], f"{name} flagged: {v}"
        time.sleep(1)
    for name in quiet:
        v = d.run(runs[name])
        # flat and levelled-off series are judged (and found quiet); a sawtooth
        # is judged only by windows long enough to hold several of its cycles
        if name not in ("saw", "peaks"):
            assert v["leak"]["evaluated"], f"{name} was never evaluated: {v['leak']}"
        assert v["leak"]["reason"], v["leak"]
        assert v["summary"]["leak_detected"] is False, v["summary"]

    # /v1/leaks lists the leak and only it; its history says when
    st, body = d.get("/v1/leaks")
    assert st == 200
    assert [r["id"] for r in body["runs"]] == [runs["leak"]], body
    run = d.run(runs["leak"])
    assert run["summary"]["leak_detected"] is True
    hist = run["leak"]["history"]
    assert hist and hist[0]["verdict"] == "suspected", hist

    # growth stops: the verdict clears (clear_after 1m default is too long for
    # a test; the stopped leak is checked through its history in test-leak.c)
    # mlmonctl show says it in words
    out = d.ctl("show", runs["leak"])
    assert out.returncode == 0 and b"leak: SUSPECTED" in out.stdout, out

# SPDX-License-Identifier: MIT
"""What span each part of a report covers: the summary of a span
(GET .../summary, report --since-mark), a span that would be set twice
(since_mark with window or from) refused alike by the API and the CLI, and
the leak verdict of a run that ended before one was possible."""

import subprocess
import sys
import time

from conftest import MLMONCTL, strict_json, wait_for  # noqa: F401

# Burns BURN_S seconds of CPU time, then sleeps: the CPU time of a span
# after the burn is about 0, that of the whole run at least BURN_S.
BURN_S = 1.0
BURNER = f"""
import time
while time.process_time() < {BURN_S}:
    pass
print("idle", flush=True)
time.sleep(600)
"""


def out(r):
    return r.stdout.decode()


def err(r):
    return r.stderr.decode()


def burner():
    p = subprocess.Popen([sys.executable, "-c", BURNER], stdout=subprocess.PIPE)
    return p


def json_error(d, path):
    r = d.request("GET", path, None, unix=True)
    assert r.status == 400, (path, r.status, r.body[:300])
    e = r.json["error"]
    assert e["code"] == "bad_request" and e["message"], e
    return e["message"]


# ---- 4. the summary of a span ------------------------------------------------------

def test_report_since_mark_summarises_the_span(mlmond):
    p = burner()
    try:
        rid = mlmond.register(p.pid, name="scoped")["id"]
        assert p.stdout.readline() == b"idle\n"
        time.sleep(0.6)  # a sample after the burn, before the mark
        st, mk = mlmond.post(f"/v1/runs/{rid}/marks", {"label": "warm"})
        assert st == 201, mk
        time.sleep(1.5)
        assert mlmond.ctl("observe", "--id", rid, "step", "3").returncode == 0

        whole = mlmond.run(rid)["summary"]
        assert whole["cpu_time_s"] >= 0.95 * BURN_S, whole

        st, span = mlmond.get(f"/v1/runs/{rid}/summary?since_mark=warm")
        assert st == 200, span
        assert span["since_mark"] == {"label": "warm", "ts": mk["ts"]}
        assert span["from"] == mk["ts"] and span["until"] >= mk["ts"] + 1400, span
        assert span["wall_time_s"] == (span["until"] - span["from"]) / 1000.0
        assert span["cpu_time_s"] < 0.3, span
        assert 3 <= span["samples"] < whole["samples"], (span, whole)
        assert span["peak_rss_bytes"] > 0 and span["threads_max"] >= 1, span
        # a span before the run: counts known, figures unknown (null)
        st, empty = mlmond.get(f"/v1/runs/{rid}/summary?from=1000&until=2000")
        assert st == 200 and empty["samples"] == 0 and empty["cpu_time_s"] is None, empty
        assert empty["peak_rss_bytes"] is None and empty["wall_time_s"] == 1.0, empty
        # a window longer than the run is the run: its wall time, not the window's
        registered = mlmond.run(rid)["registered_ts"]
        st, young = mlmond.get(f"/v1/runs/{rid}/summary?window=1h")
        assert st == 200 and young["from"] == registered, (young, registered)
        assert young["wall_time_s"] == (young["until"] - registered) / 1000.0 < 60, young
        text = out(mlmond.ctl("report", rid, "--window", "1h"))
        wall = next(line.split() for line in text.splitlines() if line.strip().startswith("wall time:"))
        assert wall[3] == "s" and float(wall[2]) < 60, text
        assert next(line for line in text.splitlines() if line.strip().startswith("span:")).endswith(" s)"), text

        r = mlmond.ctl("--json", "report", rid, "--since-mark", "warm")
        assert r.returncode == 0, err(r)
        doc = strict_json(r.stdout)
        assert doc["summary"]["from"] == mk["ts"] and doc["summary"]["cpu_time_s"] < 0.3, doc["summary"]
        assert doc["run"]["summary"]["cpu_time_s"] >= 0.95 * BURN_S
        assert doc["latency"]["since_mark"]["label"] == "warm"
        # the throughput window covers the same span
        assert abs(doc["throughput"]["window_s"] - doc["latency"]["window_s"]) < 0.01, doc

        text = out(mlmond.ctl("report", rid, "--since-mark", "warm"))
        assert "since mark warm" in text, text
        assert any(line.split() == ["summary", "of:", "the", "span"] for line in text.splitlines()), text
        cpu_line = next(line for line in text.splitlines() if line.strip().startswith("CPU time:"))
        assert float(cpu_line.split()[2]) < 0.3, text
        assert "Operations over the span:" in text, text

        text = out(mlmond.ctl("report", rid))
        assert "the whole run" in text, text
        cpu_line = next(line for line in text.splitlines() if line.strip().startswith("CPU time:"))
        assert float(cpu_line.split()[2]) >= 0.95 * BURN_S, text
    finally:
        p.kill()
        p.wait()


# ---- 6. a span set twice is refused -------------------------------------------------

def test_since_mark_with_window_or_from_is_refused(mlmond):
    p = burner()
    try:
        rid = mlmond.register(p.pid)["id"]
        st, _ = mlmond.post(f"/v1/runs/{rid}/marks", {"label": "go"})
        assert st == 201
        for endpoint in ("latency", "summary"):
            m = json_error(mlmond, f"/v1/runs/{rid}/{endpoint}?since_mark=go&window=1m")
            assert "since_mark and window" in m, m
            m = json_error(mlmond, f"/v1/runs/{rid}/{endpoint}?since_mark=go&from=0")
            assert "since_mark and from" in m, m
            # until with since_mark is a span from the mark to until
            st, body = mlmond.get(f"/v1/runs/{rid}/{endpoint}?since_mark=go&until={int(time.time() * 1000) + 5}")
            assert st == 200 and body["since_mark"]["label"] == "go", body
        # /throughput has no since_mark
        r = mlmond.request("GET", f"/v1/runs/{rid}/throughput?since_mark=go", None, unix=True)
        assert r.status == 400 and r.json["error"]["message"], r.body

        r = mlmond.ctl("report", rid, "--window", "1m", "--since-mark", "go")
        assert r.returncode == 2 and out(r) == "", r
        lines = err(r).strip().splitlines()
        assert len(lines) >= 1 and "--window and --since-mark" in lines[0], err(r)
        r = mlmond.ctl("report", rid, "--since-mark", "go")
        assert r.returncode == 0, err(r)
    finally:
        p.kill()
        p.wait()


# ---- 5. the leak verdict of a run that ended too early ---------------------------------

def test_a_short_run_ends_without_a_verdict(mlmond):
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    rid = mlmond.register(p.pid)["id"]
    p.wait()
    run = wait_for(lambda: (lambda r: r if r["state"] == "exited" else None)(mlmond.run(rid)), 10,
                   what="the run to end")
    leak = run["leak"]
    assert leak["evaluated"] is False and leak["suspected"] is False, leak
    assert "judged in" not in leak["reason"] and "still filling" not in leak["reason"], leak
    assert leak["reason"].startswith("the run ended after"), leak
    assert "before a verdict was possible" in leak["reason"], leak
    # the time to OOM says the same, not "not judged yet"
    assert leak["oom"]["eta_s"] is None and leak["oom_eta_s"] is None, leak
    assert leak["oom"]["reason"] == f"no forecast: no steady growth ({leak['reason']})", leak

    q = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        rid2 = mlmond.register(q.pid)["id"]
        time.sleep(1.0)
        st, _ = mlmond.delete(f"/v1/runs/{rid2}")
        assert st in (200, 204)
        leak2 = mlmond.run(rid2)["leak"]
        assert "before a verdict was possible" in leak2["reason"], leak2
    finally:
        q.kill()
        q.wait()

    r = mlmond.ctl("show", rid)
    assert r.returncode == 0, err(r)
    assert "leak: no verdict (the run ended after" in out(r) and "judged in" not in out(r), out(r)

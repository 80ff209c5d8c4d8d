# SPDX-License-Identifier: MIT
"""The web page in a real browser: Debian's chromium (headless) loads GET /
and GET /runs/ID from a real mlmond watching real processes (a busy one, a
leaking one, one sending StatsD timings and one with a hostile name) and
dumps the DOM the page's scripts built. The pages load without a console
message, show the runs by name, the figures of the JSON API, drawn plots and
the leak flag, and the hostile name as text only."""

import atexit
import html.parser
import os
import sys
import tempfile
import time
from urllib.parse import quote

import pytest

from browser import Browser
from conftest import Helper, UnixHTTPConnection, wait_for
from test_jobs import start_job
from test_statsd import agents  # noqa: F401

HOSTILE = "<img src=x onerror=alert(1)>"

# The leak verdict quickly: a 10 s window judged 2 s after registration.
FAST_LEAK = "[leak]\nwindows = 10s\ngrace = 2s\n"

# A real process sending StatsD timings over the unix datagram socket (its
# run is found by its pid): each 'go' sends 200 timings of each op.
SENDER = r"""
import socket, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
print("ready", flush=True)
while sys.stdin.readline().strip() == "go":
    for i in range(200):
        s.sendto(b"infer:%d|ms|#category:model" % (5 + i % 20), path)
        s.sendto(b"load:%d|ms" % (100 + i % 7), path)
    print("sent", flush=True)
"""


class Dom(html.parser.HTMLParser):
    """The elements of a dumped DOM: (tag, attrs, text inside) for each."""

    def __init__(self, text):
        super().__init__()
        self.elements, self.stack = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        e = [tag, dict(attrs), ""]
        self.elements.append(e)
        if tag not in ("meta", "link", "br", "input", "img"):
            self.stack.append(e)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        for e in self.stack:
            e[2] += data

    def find(self, tag=None, **attrs):
        return [e for e in self.elements if (tag is None or e[0] == tag) and
                all(e[1].get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def text_of(self, **attrs):
        found = self.find(**attrs)
        assert found, f"no element with {attrs}"
        return found[0][2]


_browser = None


def chromium(url):
    """The DOM of url once the page has drawn what it loaded first (its
    body data-ready="1"), and the messages it logged meanwhile: one headless
    chromium for the file (browser.py), a tab per page. The browser's own
    request for /favicon.ico (404: mlmond has none) is not the page's."""
    global _browser
    if _browser is None:
        _browser = Browser()
        atexit.register(_browser.close)
    page = _browser.open(url)
    console = [line for line in page.console if not line.endswith("/favicon.ico")]
    return Dom(page.eval("document.documentElement.outerHTML")), console


def fmt_ms(ms):
    """mlmonctl's format of a duration in ms (client/output.c fmt_ms)."""
    a = abs(ms)
    if a < 0.99995:
        return f"{ms * 1000:.1f}us"
    if a < 999.995:
        return f"{ms:.2f}ms"
    return f"{ms / 1000:.3f}s"


@pytest.fixture
def scene(make_mlmond, helpers):
    """A daemon watching four real processes, once each has data to show."""
    d = make_mlmond(interval="250ms", config_text=FAST_LEAK)
    busy = helpers("busy", 40, 0)
    grow = helpers("memshape", "leak", 20, 4096)
    hostile = helpers("setname", HOSTILE)
    sender = Helper([sys.executable, "-c", SENDER, d.statsd_path])
    for h in (busy, grow, hostile, sender):
        h.expect("ready", timeout=30)
    runs = {
        "busy": d.register(busy.pid, name="busy-job", tags={"team": "vision"})["id"],
        "leak": d.register(grow.pid, name="leaky-job")["id"],
        "hostile": d.register(hostile.pid, name=HOSTILE, tags={"k": HOSTILE})["id"],
        "statsd": d.register(sender.pid, name="statsd-job")["id"],
    }
    try:
        def counted(n):
            st, lat = d.get(f"/v1/runs/{runs['statsd']}/latency?window=10m")
            ops = lat.get("ops", {})
            return ops.get("infer", {}).get("count") == n and ops.get("load", {}).get("count") == n

        # two rounds of timings, a mark between them (in a later 1 s slice)
        sender.send("go")
        sender.expect("sent", timeout=30)
        wait_for(lambda: counted(200), 10, what="the first round of timings")
        time.sleep(1.1)
        st, _ = d.post(f"/v1/runs/{runs['statsd']}/marks", {"label": "second-round"})
        assert st == 201
        sender.send("go")
        sender.expect("sent", timeout=30)
        wait_for(lambda: counted(400), 10, what="the second round of timings")

        def flagged():
            leak = d.run(runs["leak"])["leak"]
            return leak and leak["suspected"]

        wait_for(flagged, 60, what="the leak verdict")
        yield d, runs
    finally:
        sender.close()


def check_report(dom, lat, count):
    """The report table shows each op of the /latency answer lat as it is."""
    for op in ("infer", "load"):
        row = dom.find("tr", data_op=op)
        assert row, f"no report row for {op}"
        at = dom.elements.index(row[0])
        cells = {e[1]["data-field"]: e[2] for e in dom.elements[at:at + 12] if e[1].get("data-field")}
        assert cells["count"] == count, cells
        for q in ("p50", "p90", "p99"):
            assert cells[q] == fmt_ms(lat["ops"][op][q + "_ms"]), (op, q, cells, lat["ops"][op])


def test_pages_show_the_runs_safely(scene):
    d, runs = scene
    base = f"http://127.0.0.1:{d.port}"

    dom, console = chromium(base + "/")
    assert console == [], console
    assert dom.find("body", data_ready="1"), "the overview never finished loading"
    rows = {int(e[1]["data-run"]): e for e in dom.find("tr") if "data-run" in e[1]}
    assert set(rows) == set(runs.values()), rows.keys()
    assert "busy-job" in rows[runs["busy"]][2] and "team=vision" in rows[runs["busy"]][2]
    assert "statsd-job" in rows[runs["statsd"]][2]
    # the leak flag on the leaking run only
    flagged = {i for i, e in rows.items() if "leaking" in e[1].get("class", "")}
    assert flagged == {runs["leak"]}, flagged
    assert "leak suspected" in rows[runs["leak"]][2]
    # the hostile name (and tag) shown literally, never parsed into an element
    assert HOSTILE in rows[runs["hostile"]][2]
    assert dom.find("img") == [], "a process-supplied string became an element"
    # sparklines drawn from the samples: the minutes the runs have lived
    sparks = [e for e in dom.find("canvas") if "spark" in e[1].get("class", "")]
    assert len(sparks) == 2 * len(runs) and all(int(e[1]["data-points"]) >= 1 for e in sparks), sparks
    # the top op of the statsd run, the one that took the most time (200
    # loads of about 100 ms against 200 infers of 5 to 24 ms), and its p99
    # as /latency gives it
    st, lat = d.get(f"/v1/runs/{runs['statsd']}/latency?window=1m&q=99")
    assert st == 200
    at = dom.elements.index(rows[runs["statsd"]])
    top = [e for e in dom.elements[at:] if e[0] == "td" and "op" in e[1].get("class", "").split()][0]
    assert top[2] == "load" and fmt_ms(lat["ops"]["load"]["p99_ms"]) in rows[runs["statsd"]][2], top

    # the statsd run's page: plots drawn, the report table as /latency has it
    run = d.run(runs["statsd"])
    dom, console = chromium(f"{base}/runs/{runs['statsd']}")
    assert console == [], console
    assert dom.find("body", data_ready="1")
    assert dom.find("p", id="error")[0][1].get("hidden") is not None, dom.text_of(id="error")
    plots = {e[2].split("\n")[0]: int(e[1]["data-points"]) for e in dom.find("div") if "data-points" in e[1]}
    titles = " | ".join(plots)
    for title in ("CPU %", "Memory", "infer: latency", "infer: ops/s", "load: latency"):
        match = [k for k in plots if k.startswith(title)]
        assert match and plots[match[0]] > 0, f"{title} not drawn: {titles}"
    assert len(dom.find("canvas")) >= len(plots)
    st, lat = d.get(f"/v1/runs/{runs['statsd']}/latency?from={run['registered_ts']}&q=50,90,99")
    check_report(dom, lat, "400")
    assert "category model" in [e[2] for e in dom.find("h3")]
    # the mark drawn as an option of the window selector; the window since it
    dom, console = chromium(f"{base}/runs/{runs['statsd']}#since_mark=second-round")
    assert console == [], console
    assert "second-round" in dom.text_of(id="since-mark")
    st, lat = d.get(f"/v1/runs/{runs['statsd']}/latency?since_mark=second-round&q=50,90,99")
    check_report(dom, lat, "200")

    # the leaking run's page: the verdict, and its memory plot
    dom, console = chromium(f"{base}/runs/{runs['leak']}")
    assert console == [], console
    assert "suspected" in dom.find("section", id="leak")[0][1].get("class", "")
    assert "Leak suspected" in dom.text_of(id="leak")

    # the hostile run's page: the name as text, nothing executed
    dom, console = chromium(f"{base}/runs/{runs['hostile']}")
    assert console == [], console
    assert HOSTILE in dom.text_of(id="ident")
    assert dom.find("img") == []


def test_missing_library_says_what_to_install(make_mlmond, helpers, tmpdir_0755):
    empty = tempfile.mkdtemp(dir=tmpdir_0755)
    d = make_mlmond(config_text=f"[http]\njavascript_dir = {empty}\n")
    h = helpers("busy", 10, 0)
    h.expect("ready", timeout=30)
    rid = d.register(h.pid, name="plain")["id"]
    st, body = d.get("/javascript/dygraphs/dygraph.min.js")
    assert st == 404 and "libjs-dygraphs" in body["error"]["message"], body
    dom, console = chromium(f"http://127.0.0.1:{d.port}/runs/{rid}")
    note = dom.find("p", id="missing")
    assert note and note[0][1].get("hidden") is None, "no note about the missing library"
    assert "apt-get install libjs-dygraphs" in note[0][2]
    # the rest of the page still works
    assert "plain" in dom.text_of(id="ident")
    assert all("/javascript/dygraphs/" in line for line in console), console


def test_static_files_headers(mlmond):
    def head(path, unix=False, headers=None):
        if unix:
            conn = UnixHTTPConnection(mlmond.socket_path)
        else:
            conn = mlmond.tcp_connection(10)
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), body

    types = {"/": "text/html; charset=utf-8", "/runs/1": "text/html; charset=utf-8",
             "/web/run.js": "text/javascript; charset=utf-8", "/web/mlmon.css": "text/css; charset=utf-8",
             "/javascript/dygraphs/dygraph.min.js": "text/javascript; charset=utf-8"}
    if not os.path.exists("/usr/share/javascript/dygraphs/dygraph.min.js"):
        del types["/javascript/dygraphs/dygraph.min.js"]
    for path, ctype in types.items():
        for unix in (False, True):
            st, h, body = head(path, unix)
            assert st == 200, (path, st, body)
            assert h["content-type"] == ctype, (path, h)
            assert h["x-content-type-options"] == "nosniff"
            csp = h["content-security-policy"]
            assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
            assert h["cache-control"] == "no-cache" and h["etag"].startswith('"'), h
            st2, h2, body2 = head(path, unix, {"If-None-Match": h["etag"]})
            assert st2 == 304 and body2 == b"", (path, st2)
    # the API's answers carry the same policy
    st, h, _ = head("/v1/health")
    assert st == 200 and h["x-content-type-options"] == "nosniff" and "content-security-policy" in h
    # what is not a page is refused with the API's JSON errors
    for path, code in (("/web/nope.js", 404), ("/web/..%2Fweb.c", 404), ("/runs/abc", 400), ("/runs/0", 400),
                       ("/javascript/dygraphs/dygraph.js", 404), ("/javascript/dygraphs/..%2F..%2F..%2Fetc%2Fpasswd", 404),
                       ("/?x=1", 400)):
        st, h, body = head(path)
        assert st == code and h["content-type"] == "application/json" and b'"error"' in body, (path, st, body)
    r = mlmond.request("POST", "/", body="x")
    assert r.status == 405


def test_latency_steps(make_mlmond):
    d = make_mlmond()
    sender = Helper([sys.executable, "-c", SENDER, d.statsd_path])
    try:
        sender.expect("ready", timeout=30)
        rid = d.register(sender.pid, name="steps")["id"]
        sender.send("go")
        sender.expect("sent", timeout=30)
        wait_for(lambda: d.get(f"/v1/runs/{rid}/latency?window=1m")[1]["ops"].get("infer", {}).get("count") == 200,
                 10, what="the timings")
        st, lat = d.get(f"/v1/runs/{rid}/latency?window=1m&step=5s&q=99")
        assert st == 200, lat
        assert lat["step_s"] == 5.0 and len(lat["steps"]) in (12, 13), lat
        assert sum(s["ops"].get("infer", {}).get("count", 0) for s in lat["steps"]) == 200
        busy = [s for s in lat["steps"] if "infer" in s["ops"]]
        assert busy and all(s["ops"]["infer"]["per_s"] == s["ops"]["infer"]["count"] / 5.0 for s in busy[:-1])
        assert all("p99_ms" in s["ops"]["infer"] for s in busy)
        assert [s["ts"] for s in lat["steps"]] == sorted(s["ts"] for s in lat["steps"])
        # the span's figures are the same with steps as without
        rng = f"from={lat['from']}&until={lat['until']}&q=50,90,99"
        st, plain = d.get(f"/v1/runs/{rid}/latency?{rng}")
        st, stepped = d.get(f"/v1/runs/{rid}/latency?{rng}&step=7s")
        assert "steps" not in plain and len(stepped["steps"]) >= 8
        assert plain["from"] == stepped["from"] and plain["ops"].keys() == stepped["ops"].keys() == {"infer", "load"}
        for op, o in plain["ops"].items():
            for k in ("category", "count", "total_ms", "min_ms", "max_ms", "p50_ms", "p90_ms", "p99_ms"):
                assert stepped["ops"][op][k] == o[k], (op, k, stepped["ops"][op], o)
            assert abs(stepped["ops"][op]["mean_ms"] - o["mean_ms"]) < 1e-9
        for bad in ("window=1m&step=0s", "window=1m&step=500ms", "window=1m&step=x", "window=1h&step=1s"):
            st, body = d.get(f"/v1/runs/{rid}/latency?{bad}")
            assert st == 400 and body["error"]["code"] == "bad_request", (bad, body)
    finally:
        sender.close()


JOB_ID = "exp <b>1</b>"


def test_job_page_shows_the_ranks_and_the_straggler(mlmond, agents):
    """Four ranks of a job with a hostile id, rank 2 made 25 % slower: the
    job page shows the ranks, the merged figures of /v1/jobs/ID, the
    straggler on rank 2 only with its reason, and the id as text."""
    d = mlmond
    ids, _, _ = start_job(d, agents, JOB_ID, [1.0, 1.0, 1.25, 1.0])
    st, doc = d.get(f"/v1/jobs/{quote(JOB_ID, safe='')}?q=50,90,99")
    assert st == 200 and [s["run"] for s in doc["stragglers"]] == [ids[2]], doc
    base = f"http://127.0.0.1:{d.port}"

    dom, console = chromium(f"{base}/jobs/{quote(JOB_ID, safe='')}")
    assert console == [], console
    assert dom.find("body", data_ready="1")
    assert dom.find("p", id="error")[0][1].get("hidden") is not None, dom.text_of(id="error")
    assert dom.find("b") == [], "the job id became an element"
    assert JOB_ID in dom.text_of(id="title") and JOB_ID in dom.text_of(id="ident")
    # the runs, each linking to its page
    runs = [e for e in dom.find("tr") if "data-run" in e[1] and "data-rank-of" not in e[1]]
    assert [int(e[1]["data-run"]) for e in runs] == ids, runs
    assert all(f"rank{i}" in e[2] and "running" in e[2] for i, e in enumerate(runs)), runs
    for i in ids:
        assert dom.find("a", href=f"/runs/{i}"), f"no link to run {i}"
    # the merged op table: the same figures as the API's
    row = dom.find("tr", data_op="step")
    assert row
    at = dom.elements.index(row[0])
    cells = {e[1]["data-field"]: e[2] for e in dom.elements[at:at + 12] if e[1].get("data-field")}
    assert cells["count"] == "1600"
    for q in ("p50", "p90", "p99"):
        assert cells[q] == fmt_ms(doc["ops"]["step"][q + "_ms"]), (q, cells)
    # per rank: four rows, the straggler flagged on rank 2 only, its reason as text
    rank_rows = dom.find("tr", data_rank_of="step")
    assert [int(e[1]["data-run"]) for e in rank_rows] == ids, rank_rows
    flagged = [int(e[1]["data-run"]) for e in rank_rows if "STRAGGLER" in e[2]]
    tinted = [int(e[1]["data-run"]) for e in rank_rows if "straggler" in e[1].get("class", "")]
    assert flagged == tinted == [ids[2]], rank_rows
    for e, r in zip(rank_rows, doc["ranks"]["step"]):
        assert fmt_ms(r["p50_ms"]) in e[2] and fmt_ms(r["p99_ms"]) in e[2], (e, r)
    reason = doc["stragglers"][0]["reason"]
    assert reason in [e[2] for e in dom.find("p") if "reason" in e[1].get("class", "")]
    assert "1 straggler" in dom.text_of(id="stragglers")
    # each rank's p50 over time, one line per rank
    plots = [e for e in dom.find("div") if "data-points" in e[1] and e[2].startswith("step: p50 per rank")]
    assert plots and int(plots[0][1]["data-points"]) > 0, plots
    assert all(f"rank {i}" in plots[0][2] for i in range(4)), plots
    # a job that does not exist: the page says so
    dom, console = chromium(f"{base}/jobs/nope")
    assert dom.find("body", data_ready="1") and "no job 'nope'" in dom.text_of(id="error")
    assert all("/v1/jobs/nope" in line or "404" in line for line in console), console
    # what cannot be a job id is refused before any page
    for bad in ("%FF", "x" * 129):
        st, body = d.get("/jobs/" + bad)
        assert st == 400 and body["error"]["code"] == "bad_request", (bad, body)

    # the overview lists the job, flagged, with a link to its page
    dom, console = chromium(base + "/")
    assert console == [], console
    assert dom.find("section", id="jobs")[0][1].get("hidden") is None
    job = dom.find("tr", data_job=JOB_ID)
    assert job and "1 straggler" in job[0][2] and "running" in job[0][2], job
    assert dom.find("a", href="/jobs/" + quote(JOB_ID, safe=""))
    assert dom.find("b") == []

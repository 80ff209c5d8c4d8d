# SPDX-License-Identifier: MIT
"""Every string a process or a user hands mlmond reaches the web pages as
text, never as markup: hostile op names, categories, mark labels, rank tags
and a job id, each a piece of HTML, on the overview, a run's page and a
job's page, loaded in Debian's chromium (headless). Each page must show
each string literally where it belongs and hold no element made from one.

One scene for the module (a daemon, a run with hostile ops and a hostile
mark, a job of four ranks with hostile rank tags, one of them slower), one
test per page."""

import subprocess
from urllib.parse import quote

import pytest

from conftest import wait_for
from test_web import chromium

# Each a piece of markup that would become an element marked data-hostile
# if a page inserted it as HTML.
OP = '<i data-hostile="op">infer</i>'
CATEGORY = '<b data-hostile="category">model</b>'
MARK = '<u data-hostile="mark">warm</u>'
JOB = '<s data-hostile="job">exp</s>'
RANKS = [f'<em data-hostile="rank">{i}</em>' for i in range(4)]
SLOW_RANK = 3
TIMINGS = 200


def timings(scale):
    return [round((5 + i % 20) * scale, 3) for i in range(TIMINGS)]


def observe(d, run_id, values):
    st, body = d.post(f"/v1/runs/{run_id}/observations", [{"op": OP, "ms": v, "category": CATEGORY} for v in values])
    assert st == 202, body


@pytest.fixture(scope="module")
def scene(make_module_mlmond):
    d = make_module_mlmond(interval="250ms")
    procs = [subprocess.Popen(["sleep", "600"]) for _ in range(1 + len(RANKS))]
    try:
        run = d.register(procs[0].pid, name="hostile-ops")["id"]
        ranks = [d.register(p.pid, name=f"rank{i}", tags={"job_id": JOB, "rank": RANKS[i]})["id"]
                 for i, p in enumerate(procs[1:])]
        observe(d, run, timings(1.0))
        st, body = d.post(f"/v1/runs/{run}/marks", {"label": MARK})
        assert st == 201, body
        for i, rid in enumerate(ranks):
            observe(d, rid, timings(1.5 if i == SLOW_RANK else 1.0))

        def counted(rid):
            st, lat = d.get(f"/v1/runs/{rid}/latency?window=10m")
            return st == 200 and lat["ops"].get(OP, {}).get("count") == TIMINGS
        for rid in [run] + ranks:
            wait_for(lambda: counted(rid), 10, what=f"the timings of run {rid}")
        st, job = d.get(f"/v1/jobs/{quote(JOB, safe='')}")
        assert st == 200 and [s["run"] for s in job["stragglers"]] == [ranks[SLOW_RANK]], job
        yield d, run, ranks
    finally:
        for p in procs:
            p.kill()
            p.wait()


def load(d, path):
    dom, console = chromium(f"http://127.0.0.1:{d.port}{path}")
    assert dom.find("body", data_ready="1"), f"{path} never finished loading"
    assert dom.find("p", id="error")[0][1].get("hidden") is not None, dom.text_of(id="error")
    made = [e for e in dom.elements if "data-hostile" in e[1]]
    assert made == [], f"{path}: a hostile string became an element: {made}"
    return dom, console


def texts(dom, tag, **attrs):
    return [e[2] for e in dom.find(tag, **attrs)]


def test_overview_shows_hostile_strings_as_text(scene):
    d, run, ranks = scene
    dom, console = load(d, "/")
    assert console == [], console
    rows = {int(e[1]["data-run"]): e for e in dom.find("tr") if "data-run" in e[1]}
    # the run's top op, in its own cell
    at = dom.elements.index(rows[run])
    cells = [e for e in dom.elements[at:] if e[0] == "td" and "op" in e[1].get("class", "").split()]
    assert cells and cells[0][2] == OP, cells[:1]
    # the ranks' tags, and the job with its id
    for i, rid in enumerate(ranks):
        assert f"rank={RANKS[i]}" in rows[rid][2] and f"job_id={JOB}" in rows[rid][2], rows[rid]
    job = dom.find("tr", data_job=JOB)
    assert job and JOB in job[0][2] and "1 straggler" in job[0][2], job


def test_run_page_shows_hostile_strings_as_text(scene):
    d, run, _ = scene
    dom, console = load(d, f"/runs/{run}")
    assert console == [], console
    # the report table: the op's row and its category's heading
    row = dom.find("tr", data_op=OP)
    assert row, "no report row for the op"
    assert OP in texts(dom, "td", **{"class": "op"}), texts(dom, "td", **{"class": "op"})
    assert f"category {CATEGORY}" in texts(dom, "h3"), texts(dom, "h3")
    # the op's plots, titled by its name
    assert any(t.startswith(f"{OP}: latency") for t in texts(dom, "h3")), texts(dom, "h3")
    # the mark, an option of the window selector
    marks = [e for e in dom.find("option") if e[1].get("data-label") == MARK]
    assert marks and marks[0][2].startswith(MARK + " ("), marks
    # the window since the mark, asked by its label
    dom, console = load(d, f"/runs/{run}#since_mark={quote(MARK, safe='')}")
    assert console == [], console
    assert dom.find("tr", data_op=OP), "no report row since the mark"


def test_job_page_shows_hostile_strings_as_text(scene):
    d, _, ranks = scene
    dom, console = load(d, f"/jobs/{quote(JOB, safe='')}")
    assert console == [], console
    assert JOB in dom.text_of(id="title") and JOB in dom.text_of(id="ident")
    # the runs table and the per-rank table: each rank as text
    runs = [e for e in dom.find("tr") if "data-run" in e[1] and "data-rank-of" not in e[1]]
    assert [int(e[1]["data-run"]) for e in runs] == ranks, runs
    assert [e[2] for e in dom.find("td", **{"class": "rank"})] == RANKS
    rank_rows = dom.find("tr", data_rank_of=OP)
    assert [int(e[1]["data-run"]) for e in rank_rows] == ranks, rank_rows
    assert texts(dom, "td", data_field="rank") == RANKS
    # the op: its heading, its report row and its category
    assert OP in texts(dom, "h3") and f"category {CATEGORY}" in texts(dom, "h3"), texts(dom, "h3")
    assert dom.find("tr", data_op=OP)
    # the straggler's reason names the rank and the op, as text
    reasons = [t for t in texts(dom, "p") if RANKS[SLOW_RANK] in t]
    assert reasons and OP in reasons[0], texts(dom, "p")
    # the plot of each rank's p50, its legend naming the ranks
    plots = [e for e in dom.find("div") if "data-points" in e[1] and e[2].startswith(f"{OP}: p50 per rank")]
    assert plots and all(f"rank {r}" in plots[0][2] for r in RANKS), plots

# SPDX-License-Identifier: MIT
"""Every string a process or a user supplied is isolated on the pages: a
right-to-left override (U+202E) in a run's name, comm, command line, tags,
op names, categories, mark labels, job id or rank tags reverses its own text
at most, never the text around it (the next tag, the state badge, the time
after a mark's label). Each such string sits alone in an element whose
direction is isolated (<bdi>, unicode-bidi: isolate), as chromium computes
it; where no element can hold it (a tooltip, an <option>, the document's
title) the control is not there at all.

mlmond is about to refuse such characters at registration and in its JSON
observations: the strings are made where they still arrive. The comm and
command line are the process's own (prctl, argv); the rest stands in the
database as an older mlmond wrote it (the daemon stopped, the rows
rewritten, the daemon started again on them, its processes still alive)."""

import json
import sqlite3
import subprocess
from urllib.parse import quote

import pytest

from browser import Browser
from conftest import Helper, helper, wait_for

RLO = "\u202e"
COMM = RLO + "exe.live"  # 11 bytes: a comm holds 15
ARG = RLO + "gra"
NAME = RLO + "eman"
TAG = RLO + "live"
OP = RLO + "po"
CATEGORY = RLO + "tac"
MARK = RLO + "kram"
JOB = RLO + "boj"
RANKS = [RLO + "0", RLO + "1"]

# Each text node holding a direction control: is it one of the strings
# (units) whole, alone in its element, and is that element's direction
# isolated (as computed)? Then the places no element can isolate: tooltips,
# options, the title.
CHECK = r"""((units) => {
  const controls = /[\u202a-\u202e\u2066-\u2069]/, found = [], bad = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    if (!controls.test(n.data)) continue;
    const e = n.parentElement, ub = getComputedStyle(e).unicodeBidi;
    found.push(n.data);
    if (!['isolate', 'isolate-override', 'plaintext'].includes(ub) || e.textContent !== n.data || !units.includes(n.data))
      bad.push([e.tagName, ub, e.textContent]);
  }
  for (const e of document.querySelectorAll('[title]')) if (controls.test(e.title)) bad.push(['title', e.title]);
  for (const e of document.querySelectorAll('option')) if (controls.test(e.text)) bad.push(['option', e.text]);
  if (controls.test(document.title)) bad.push(['document.title', document.title]);
  return { found, bad };
})"""


@pytest.fixture(scope="module")
def scene(make_module_mlmond):
    d = make_module_mlmond(interval="250ms")
    named = Helper([helper("setname"), COMM, ARG, "after"])
    procs = [subprocess.Popen(["sleep", "600"]) for _ in range(3)]
    try:
        named.expect("ready", timeout=30)
        ids = {"named": d.register(named.pid)["id"],
               "tagged": d.register(procs[0].pid, name="tagged", tags={"k": "v", "z": "after"})["id"],
               "ranks": [d.register(p.pid, name=f"rank{i}", tags={"job_id": "job", "rank": str(i)})["id"]
                         for i, p in enumerate(procs[1:])]}
        for rid in [ids["tagged"]] + ids["ranks"]:
            st, body = d.post(f"/v1/runs/{rid}/observations",
                              [{"op": "op1", "ms": 5.0 + i % 3, "category": "cat1"} for i in range(30)])
            assert st == 202, body
        st, body = d.post(f"/v1/runs/{ids['tagged']}/marks", {"label": "mark1"})
        assert st == 201, body
        wait_for(lambda: d.get(f"/v1/runs/{ids['tagged']}/latency?window=10m")[1]["ops"].get("op1", {})
                 .get("count") == 30, 10, what="the timings")
        d.stop()
        db = sqlite3.connect(d.db_path)
        db.execute("UPDATE runs SET name = ?, tags = ? WHERE id = ?",
                   (NAME, json.dumps({"k": TAG, "z": "after"}), ids["tagged"]))
        for rid, rank in zip(ids["ranks"], RANKS):
            db.execute("UPDATE runs SET tags = ? WHERE id = ?", (json.dumps({"job_id": JOB, "rank": rank}), rid))
        for table in ("op_slices", "op_slices_1m"):
            db.execute(f"UPDATE {table} SET op = ?, category = ? WHERE op = 'op1'", (OP, CATEGORY))
        db.execute("UPDATE marks SET label = ? WHERE label = 'mark1'", (MARK,))
        db.commit()
        db.close()
        d.start()
        wait_for(lambda: d.get(f"/v1/runs/{ids['tagged']}/latency?window=10m")[1]["ops"].get(OP, {})
                 .get("count") == 30, 10, what="the timings under the rewritten name")
        with Browser() as b:
            yield d, ids, b
    finally:
        named.close()
        for p in procs:
            p.kill()
            p.wait()


def check(scene, path, units, error=False):
    """Loads path: each string with a direction control that it shows is one
    of units, alone in an isolating element, and each of units is shown;
    the page says it cannot show what it shows when error is true."""
    d, _, b = scene
    page = b.open(f"http://127.0.0.1:{d.port}{path}")
    assert page.eval("!document.getElementById('error').hidden") == error, \
        page.eval("document.getElementById('error').textContent")
    got = page.eval(f"{CHECK}({json.dumps(units)})")
    assert got["bad"] == [], f"{path}: strings not isolated: {got['bad']}"
    assert set(got["found"]) == set(units), f"{path}: shown {got['found']}, expected {units}"
    return page


def boxes(page, selector):
    return page.eval(f"""[...document.querySelectorAll({json.dumps(selector)})].map((e) => {{
        const r = e.getBoundingClientRect(); return [e.textContent, r.left, r.right]; }})""")


def test_overview_isolates_them(scene):
    _, ids, _ = scene
    tags = ["k=" + TAG, "job_id=" + JOB] + ["rank=" + r for r in RANKS]
    page = check(scene, "/", [COMM, NAME, OP, JOB] + tags)
    # the tag after the hostile one still reads after it
    (a, _, a_right), (z, z_left, _) = boxes(page, f'tr[data-run="{ids["tagged"]}"] td.tags bdi')
    assert (a, z) == ("k=" + TAG, "z=after") and z_left >= a_right, (a, z, a_right, z_left)


def test_run_pages_isolate_them(scene):
    _, ids, _ = scene
    page = check(scene, f"/runs/{ids['tagged']}", [NAME, "k=" + TAG, OP, CATEGORY, MARK])
    # the state badge after the name in the header
    (_, _, name_right), = boxes(page, "#title .run-name")
    (state, state_left, _), = boxes(page, "#title .state")
    assert state == "running" and state_left >= name_right
    # the mark, offered by its label (its control shown as U+FFFD) and found by it
    assert page.eval(f"[...document.querySelectorAll('#since-mark option')].some((o) => o.dataset.label === {json.dumps(MARK)})")
    d, _, _ = scene
    with open(f"/proc/{d.run(ids['named'])['pid']}/cmdline", "rb") as f:
        cmdline = f.read().rstrip(b"\0").replace(b"\0", b" ").decode()
    assert ARG in cmdline
    check(scene, f"/runs/{ids['named']}", [COMM, cmdline])


def test_job_page_isolates_them(scene):
    check(scene, f"/jobs/{quote(JOB, safe='')}", [JOB, OP, CATEGORY] + RANKS)
    # a job that does not exist: its id in the page's error, isolated too
    page = check(scene, f"/jobs/{quote(RLO + 'nope', safe='')}", [RLO + "nope"], error=True)
    assert "no job" in page.eval("document.getElementById('error').textContent")

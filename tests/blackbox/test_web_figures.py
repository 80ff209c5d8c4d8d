# SPDX-License-Identifier: MIT
"""What the pages say, in a real browser (Debian's chromium, driven over the
DevTools protocol: tests/blackbox/browser.py), against what is known from
outside mlmond: the timings sent, the clock around the requests, the
processes' own behaviour.

- The overview's top op is the op that cost the most time (many short waits
  do not beat fewer long steps) and its ops/s divides by the part of the
  minute the run has lived; a finished run that leaked stays flagged.
- Mark labels never overlap, and one at the plot's right edge is not cut.
- A plot of zeros has ticks with as many labels as values (not "1 B/s,
  1 B/s, 0 B/s").
- The state badge in the header can be read (WCAG contrast).
- The report's share of an op nested in another is its share of the wall
  time, not a part of a whole the nested ops are counted in twice.
- A process tree's PSS (its footprint, each shared page once) is in the
  summary and on the memory plot, labelled as such, and equals the sums of
  /proc/PID/smaps_rollup; a run of one process shows none."""

import subprocess
import time

import pytest

from browser import Browser
from conftest import helper, now_ms, wait_for
from test_tree_memory import CONFIG as PSS_CONFIG
from test_tree_memory import MiB, STATIC, smaps, start

FAST_LEAK = "[leak]\nwindows = 10s\ngrace = 2s\n"
WAITS, WAIT_MS = 100, 1.0
STEPS, STEP_MS = 10, 90.0
TRAIN_MS = 1000.0


def ignore_favicon(console):
    return [m for m in console if "favicon.ico" not in m]


@pytest.fixture(scope="module")
def scene(make_module_mlmond):
    d = make_module_mlmond(interval="250ms", config_text=FAST_LEAK)
    timed, profiled = subprocess.Popen(["sleep", "600"]), subprocess.Popen(["sleep", "600"])
    grow = subprocess.Popen([helper("memshape"), "leak", "20", "4096"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    try:
        assert grow.stdout.readline().split()[0] == b"ready"
        leaky = d.register(grow.pid, name="leaky")["id"]
        t0 = now_ms()
        ids = {"timed": d.register(timed.pid, name="timed")["id"]}
        t1 = now_ms()
        ids["profiled"] = d.register(profiled.pid, name="profiled")["id"]
        t2 = now_ms()
        # many short waits, fewer long steps: the steps cost the most time
        st, body = d.post(f"/v1/runs/{ids['timed']}/observations",
                          [{"op": "data_wait", "ms": WAIT_MS}] * WAITS + [{"op": "step", "ms": STEP_MS}] * STEPS)
        assert st == 202, body
        # a profiled block with the steps inside it, in one category
        st, body = d.post(f"/v1/runs/{ids['profiled']}/observations",
                          [{"op": "train", "ms": TRAIN_MS, "category": "profile"}] +
                          [{"op": "step", "ms": STEP_MS, "category": "profile"}] * STEPS)
        assert st == 202, body
        wait_for(lambda: (d.run(leaky)["leak"] or {}).get("suspected"), 60, what="the leak verdict")
        grow.kill()
        grow.wait()
        wait_for(lambda: d.run(leaky)["state"] == "exited", 10, what="the leaking run to end")
        ids["leaky"] = leaky
        yield d, ids, {"timed": (t0, t1), "profiled": (t1, t2)}
    finally:
        for p in (timed, profiled, grow):
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


def open_page(b, d, path):
    page = b.open(f"http://127.0.0.1:{d.port}{path}")
    assert page.eval("document.getElementById('error').hidden"), page.eval("document.getElementById('error').textContent")
    return page


@pytest.fixture(scope="module")
def overview(scene, browser):
    """The overview, loaded once: its rows by run (cells by heading, class),
    and the clock around the load."""
    d, ids, reg = scene
    l0 = now_ms()
    page = open_page(browser, d, "/")
    l1 = now_ms()
    assert ignore_favicon(page.console) == [], page.console
    rows = page.eval("""(() => {
        const heads = [...document.querySelectorAll('#runs thead th')].map((e) => e.textContent);
        return Object.fromEntries([...document.querySelectorAll('#runs tbody tr')].map((r) => [r.dataset.run,
            [Object.fromEntries([...r.cells].map((c, i) => [heads[i], c.textContent])), r.className]])); })()""")
    return {int(k): v for k, v in rows.items()}, (l0, l1)


def test_overview_top_op_is_the_costliest(scene, overview):
    _, ids, _ = scene
    row, _ = overview[0][ids["timed"]]
    # the op with the largest total time, not the one with the most timings
    assert row["top op (1 min)"] == "step", row
    assert row["p99"] == "90.00ms", row


def test_overview_ops_per_s_over_the_part_of_the_minute_lived(scene, overview):
    _, ids, reg = scene
    row, _ = overview[0][ids["timed"]]
    (l0, l1), (r0, r1) = overview[1], reg["timed"]
    # the count of the op shown, over the seconds the run has lived (not a minute)
    count = {"step": STEPS, "data_wait": WAITS}[row["top op (1 min)"]]
    lo, hi = count / ((l1 - r0) / 1000), count / ((l0 - r1) / 1000)
    assert lo - 0.05 <= float(row["ops/s"]) <= hi + 0.05, (row, lo, hi)


def test_overview_flags_a_finished_run_that_leaked(scene, overview):
    _, ids, _ = scene
    row, cls = overview[0][ids["leaky"]]
    assert row["state"] == "exited", row
    assert "leaking" in cls.split() and "leak suspected" in row["name"], (row, cls)
    row, cls = overview[0][ids["profiled"]]
    assert "leaking" not in cls.split() and "leak" not in row["name"], (row, cls)


# The boxes of each plot's mark labels and of its chart, in the page's pixels.
MARK_BOXES = """[...document.querySelectorAll('#plots .plot')].map((p) => {
  const c = p.querySelector('.chart').getBoundingClientRect();
  return { title: p.querySelector('h3').textContent, chart: [c.left, c.right],
           labels: [...p.querySelectorAll('.mark-label')].map((e) => {
             const r = e.getBoundingClientRect();
             return { text: e.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom }; }) }; })"""


def test_mark_labels_never_overlap_nor_leave_the_plot(scene, browser):
    d, ids, _ = scene
    run = ids["timed"]
    for label in ("train:start", "warmup-done"):  # a second apart, the last at the right edge
        st, body = d.post(f"/v1/runs/{run}/marks", {"label": label})
        assert st == 201, body
        time.sleep(1)
    page = open_page(browser, d, f"/runs/{run}")
    assert ignore_favicon(page.console) == [], page.console
    plots = page.eval(MARK_BOXES)
    assert len(plots) >= 4, plots
    for p in plots:
        labels = p["labels"]
        assert sorted(x["text"] for x in labels) == ["train:start", "warmup-done"], p
        a, z = labels
        assert a["right"] <= z["left"] or z["right"] <= a["left"] or a["bottom"] <= z["top"] or \
            z["bottom"] <= a["top"], f"{p['title']}: the labels overlap: {labels}"
        for x in labels:
            assert p["chart"][0] <= x["left"] and x["right"] <= p["chart"][1], f"{p['title']}: {x} leaves {p}"


def test_a_plot_of_zeros_has_sane_ticks(scene, browser):
    d, ids, _ = scene
    page = open_page(browser, d, f"/runs/{ids['timed']}")
    ticks = page.eval("""Object.fromEntries([...document.querySelectorAll('#plots .plot')].map((p) =>
        [p.querySelector('h3').textContent, [...p.querySelectorAll('.dygraph-axis-label-y')].map((e) => e.textContent)]))""")
    # a sleeping process reads and writes nothing
    disk = ticks["Disk I/O"]
    assert disk and disk[0] == "0 B/s" and len(set(disk)) == len(disk), ticks
    for title, labels in ticks.items():
        assert len(set(labels)) == len(labels), (title, labels)


# WCAG's contrast ratio of an element's text against the background it is
# drawn on (its own, else the nearest ancestor's that is not transparent).
CONTRAST = """((e) => {
  const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
  const lum = (c) => { const v = rgb(c).slice(0, 3).map((x) => x / 255).map((x) => x <= 0.03928 ? x / 12.92
      : Math.pow((x + 0.055) / 1.055, 2.4)); return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  let bg = e;
  while (bg && (getComputedStyle(bg).backgroundColor === 'rgba(0, 0, 0, 0)')) bg = bg.parentElement;
  const a = lum(getComputedStyle(e).color), b = lum(getComputedStyle(bg).backgroundColor);
  return [e.textContent, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)];
})(document.querySelector('#title .state'))"""


@pytest.mark.parametrize("which", ["leaky", "timed"])
def test_the_state_badge_can_be_read(scene, browser, which):
    d, ids, _ = scene
    page = open_page(browser, d, f"/runs/{ids[which]}")
    text, ratio = page.eval(CONTRAST)
    assert text == ("exited" if which == "leaky" else "running")
    assert ratio >= 4.5, f"the {text} badge: contrast {ratio:.2f}, WCAG AA asks 4.5"


def test_the_share_of_nested_ops_is_of_the_wall_time(scene, browser):
    d, ids, reg = scene
    l0 = now_ms()
    page = open_page(browser, d, f"/runs/{ids['profiled']}")
    l1 = now_ms()
    share = page.eval("""Object.fromEntries([...document.querySelectorAll('#report tr[data-op]')].map((r) =>
        [r.dataset.op, r.querySelector('[data-field=share]').textContent]))""")
    # the span is the whole run: from its registration to the page's load
    r0, r1 = reg["profiled"]
    for op, total in (("train", TRAIN_MS), ("step", STEPS * STEP_MS)):
        lo, hi = total / (l1 - r0) * 100, total / (l0 - r1) * 100
        assert share[op].endswith("%") and lo - 0.05 <= float(share[op][:-1]) <= hi + 0.05, (op, share, lo, hi)
    note = page.eval("document.getElementById('share-note').textContent")
    assert "wall time" in note and "100%" in note, note


def test_a_tree_s_pss_is_its_footprint(make_mlmond, browser):
    d = make_mlmond(interval="250ms", config_text=PSS_CONFIG)
    h = start(STATIC)  # a parent holding 200 MiB and 3 forked workers
    try:
        kids = [int(p) for p in h.expect("ready", timeout=30)]
        tree = d.register(h.pid, children=True, name="tree")["id"]
        alone = d.register(kids[0], name="alone")["id"]
        wait_for(lambda: d.run(tree)["summary"]["final_pss_bytes"] is not None and
                 len([x for x in d.samples(tree) if x["pss_bytes"] is not None]) >= 3, 15, what="three PSS readings")
        pss = sum(smaps(p)[0] for p in [h.pid] + kids)
        page = open_page(browser, d, f"/runs/{tree}")
        cards = page.eval("""Object.fromEntries([...document.querySelectorAll('#summary .card')].map((c) =>
            [c.querySelector('.card-title').textContent, c.querySelector('.card-value').textContent]))""")
        # the memory stands still: the page's final PSS is the test's sum
        value, unit = cards["final PSS (footprint)"].split()
        assert unit == "MiB" and float(value) == pytest.approx(pss / MiB, rel=0.02, abs=0.1), (cards, pss)
        assert "peak PSS (footprint)" in cards, cards
        note = page.eval("document.getElementById('summary-note').hidden ? '' : "
                         "document.getElementById('summary-note').textContent")
        assert "real memory footprint" in note and "once per process" in note, note
        memory = page.eval("""[...document.querySelectorAll('#plots .plot')].filter((p) =>
            p.querySelector('h3').textContent === 'Memory').map((p) => [p.dataset.points,
            p.querySelector('.legend').textContent])[0]""")
        assert int(memory[0]) > 0 and "PSS (the tree\u2019s footprint)" in memory[1], memory
        # one process: no PSS, no note
        page = open_page(browser, d, f"/runs/{alone}")
        titles = page.eval("[...document.querySelectorAll('#summary .card-title')].map((e) => e.textContent)")
        assert not [t for t in titles if "PSS" in t], titles
        assert page.eval("document.getElementById('summary-note').hidden")
        assert "PSS" not in page.eval("document.getElementById('plots').textContent")
    finally:
        h.close()

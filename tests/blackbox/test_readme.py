# SPDX-License-Identifier: MIT
"""The README's five-minute tour still works, and the docs' relative links
still lead somewhere.

The tour is the ```console blocks under "## A five-minute tour" in
README.md: each "$ " line is a command, the lines after it (up to the next
"$ " line or the end of the block) what it printed. The commands run in
order, in one bash (so exports, $$ and open fds carry over as in a
terminal), against a real mlmond laid out as tools/run-local.sh lays it
out: a scratch directory stands for the repository root, with
build/client/mlmonctl and the sockets under build/local/run/ linked to the
build's binary and the daemon's sockets, and the TCP and UDP ports
substituted. Each command must exit 0 and print output of the shape shown:
the same JSON keys at every level where both have an object, the very
same line where a line holds no figure (a table's header: "p99" is no
figure), and the same first word (digits aside) on every other line.
Figures that differ from run to run are not compared there.

Where the tour's inputs are known, its figures are checked against ground
truth, in the real output and in the README alike: the StatsD timings the
tour sends (counts, totals, means, minima, maxima exact to the digits
printed, percentiles within 1% of the exact ones, shares) in mlmonctl's
report, the /latency JSON and /metrics; and the CPU time mlmonctl run
prints for its job against what the shell's getrusage(RUSAGE_CHILDREN)
(bash's `times`) says the job used."""

import json
import math
import os
import re
import shutil
import signal
import subprocess

import pytest

from conftest import MLMONCTL, ROOT
from test_latency import exact_quantile
from test_statsd import start_udp_mlmond

README = os.path.join(ROOT, "README.md")
DOC = os.path.join(ROOT, "doc")
TOUR_HEADING = "## A five-minute tour"
PACE_S = 1.0  # a reader's typing pace: samples and StatsD lines land meanwhile


def tour(text):
    """[(command, [shown output lines])] of the tour's console blocks."""
    section = text.split("\n" + TOUR_HEADING + "\n", 1)
    assert len(section) == 2, f"README.md has no {TOUR_HEADING!r} section"
    body = re.split(r"\n## ", section[1], maxsplit=1)[0]
    steps = []
    for block in re.findall(r"^```console\n(.*?)^```$", body, re.S | re.M):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
            else:
                raise AssertionError(f"output before any command in the tour: {line!r}")
    assert len(steps) >= 8, f"the tour has only {len(steps)} commands"
    return steps


def scratch_root(d, daemon):
    """A directory laid out like the repository after tools/run-local.sh."""
    root = os.path.join(d, "repo")
    os.makedirs(os.path.join(root, "build", "client"))
    os.makedirs(os.path.join(root, "build", "local", "run"))
    os.symlink(MLMONCTL, os.path.join(root, "build", "client", "mlmonctl"))
    os.symlink(daemon.socket_path, os.path.join(root, "build", "local", "run", "mlmond.sock"))
    os.symlink(daemon.statsd_path, os.path.join(root, "build", "local", "run", "statsd.sock"))
    return root


def run_tour(steps, daemon, root):
    """Runs the commands in one bash; returns [(exit status, output, (user
    s, system s) of the children the shell reaped meanwhile)]."""
    def local(cmd):
        cmd = cmd.replace("127.0.0.1:9477", f"127.0.0.1:{daemon.port}")
        return cmd.replace("/dev/udp/127.0.0.1/8125", f"/dev/udp/127.0.0.1/{daemon.udp_port}")

    out = os.path.join(root, "..", "out")
    os.mkdir(out)
    # bash's `times`: the shell's own user and system time, then its reaped
    # children's (getrusage(RUSAGE_CHILDREN)), before and after each command
    script = "".join(f"sleep {PACE_S}\ntimes >{out}/{i}.t0\n{{ {local(cmd)}\n}} </dev/null >{out}/{i} 2>&1\n"
                     f"echo $? >{out}/{i}.rc\ntimes >{out}/{i}.t1\n"
                     for i, (cmd, _) in enumerate(steps))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLMON_")}
    proc = subprocess.Popen(["bash"], stdin=subprocess.PIPE, cwd=root, env=env, start_new_session=True)
    try:
        proc.communicate(script.encode(), timeout=120)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the tour left running
        except ProcessLookupError:
            pass
    keep = os.environ.get("README_OUT")  # to refresh the README: the tour's real output
    if keep:
        shutil.copytree(out, keep, dirs_exist_ok=True)
    results = []
    for i in range(len(steps)):
        with open(f"{out}/{i}.rc") as f:
            rc = int(f.read())
        with open(f"{out}/{i}", "rb") as f:
            text = f.read().decode("utf-8", "replace")
        t0, t1 = children_times(f"{out}/{i}.t0"), children_times(f"{out}/{i}.t1")
        results.append((rc, text, (t1[0] - t0[0], t1[1] - t0[1])))
    return results


def children_times(path):
    """(user s, system s) of the second line of bash's `times`: "0m1.234s 0m0.056s"."""
    with open(path) as f:
        line = f.read().splitlines()[1]
    return tuple(int(m) * 60 + float(sec) for m, sec in re.findall(r"(\d+)m([\d.]+)s", line))


def key_mismatch(shown, real, where="$"):
    """Where the JSON objects' keys differ (None if nowhere): objects are
    compared key by key at every level where both sides have one."""
    if isinstance(shown, dict) and isinstance(real, dict):
        if set(shown) != set(real):
            return f"{where}: keys {sorted(shown)} shown, {sorted(real)} real"
        for k in shown:
            m = key_mismatch(shown[k], real[k], f"{where}.{k}")
            if m:
                return m
    if isinstance(shown, list) and isinstance(real, list) and shown and real:
        return key_mismatch(shown[0], real[0], where + "[0]")
    return None


def first_word(line):
    words = line.split()
    return re.sub(r"[0-9]+", "N", words[0]) if words else ""


def shape_mismatch(shown, real):
    """Why the real output does not have the shape of the shown one (None
    if it does)."""
    text = "\n".join(shown).strip()
    if text.startswith("{"):
        try:
            want, got = json.loads(text), json.loads(real)
        except ValueError as e:
            return f"not JSON: {e}"
        return key_mismatch(want, got)
    real_lines = {" ".join(line.split()) for line in real.splitlines()}
    real_words = {first_word(line) for line in real.splitlines()}
    for line in shown:
        if not line.strip() or line.strip() == "...":
            continue
        if all(re.fullmatch(r"[A-Za-z]+[0-9.]+", w) for w in line.split() if re.search(r"[0-9]", w)):
            # no figures (a header such as "... p50 p90 p99"): the very line
            if " ".join(line.split()) not in real_lines:
                return f"no line {line.strip()!r}"
        elif first_word(line) not in real_words:
            return f"no line starting like {line.strip()!r}"
    return None


@pytest.fixture(scope="module")
def tour_run(make_module_mlmond):
    """The tour, run once for the module's tests: [(command, shown lines,
    exit status, real output, children's (user s, system s))]."""
    with open(README) as f:
        steps = tour(f.read())
    with open(os.path.join(ROOT, "etc", "mlmond.conf")) as f:
        conf = f.read()  # what tools/run-local.sh runs with: the defaults
    daemon = start_udp_mlmond(make_module_mlmond, interval=None, config_text=conf)
    root = scratch_root(os.path.dirname(daemon.dir), daemon)
    results = run_tour(steps, daemon, root)
    return [(cmd, shown, rc, real, cpu) for (cmd, shown), (rc, real, cpu) in zip(steps, results)]


def test_readme_tour(tour_run):
    for cmd, shown, rc, real, _ in tour_run:
        assert rc == 0, f"`{cmd}` exited {rc}:\n{real}"
        why = shape_mismatch(shown, real)
        assert why is None, f"`{cmd}`: {why}\n--- README shows ---\n" + "\n".join(shown) + f"\n--- real ---\n{real}"


# ---- figures against ground truth ----------------------------------------------------------------


def step(tour_run, pattern):
    """(shown output, real output, children's CPU) of the one command matching pattern."""
    found = [("\n".join(shown), real, cpu) for cmd, shown, _, real, cpu in tour_run if re.search(pattern, cmd)]
    assert len(found) == 1, f"the tour has {len(found)} commands matching {pattern!r}, not one"
    return found[0]


def sent_timings(tour_run):
    """{op: (category, [ms, ...])} of the StatsD timings the tour's commands
    send: `for V in LIST; do echo "OP:$V|ms[|#category:C]" >&3; done` and
    `printf 'OP:MS|ms\\n...' >&3`."""
    sent = {}
    for cmd, *_ in tour_run:
        for values, op, cat in re.findall(r'for \w+ in ([\d. ]+); do echo "([\w.]+):\$\w+\|ms(?:\|#category:(\w+))?"',
                                          cmd):
            sent.setdefault(op, (cat or None, []))[1].extend(float(v) for v in values.split())
        for body in re.findall(r"printf '([^']*)'", cmd):
            for line in body.split("\\n"):
                for op, ms, cat in re.findall(r"^([\w.]+):([\d.]+)\|ms(?:\|#category:(\w+))?$", line):
                    sent.setdefault(op, (cat or None, []))[1].append(float(ms))
    assert len(sent) >= 2, f"the tour sends StatsD timings of {sorted(sent)}: is this parser broken?"
    return sent


def ms_of(text):
    """mlmonctl's duration ("1.2us", "12.89ms", "1.234s") in ms, and how far
    its rounding may lie from the figure."""
    m = re.fullmatch(r"(-?[\d.]+)(us|ms|s)", text)
    assert m, f"not a duration: {text!r}"
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    decimals = len(m.group(1).partition(".")[2])
    return float(m.group(1)) * scale, 0.5 * 10 ** -decimals * scale


def check_figure(what, got, want, rel=0.0, rounding=0.0):
    assert abs(got - want) <= rel * abs(want) + rounding + 1e-9 * abs(want), f"{what}: {got} printed, {want} sent"


def report_tables(text):
    """{op: (category, {column: cell})} of mlmonctl report's op tables, and
    {op: ops/s} of their ops/s lines."""
    ops, rates, cat, heads = {}, {}, None, None
    for line in text.split("Operations over the span:", 1)[-1].splitlines():
        words = line.split()
        if line.startswith("category "):
            cat = line[len("category "):].strip()
        elif words[:1] == ["Operation"]:
            heads = words
        elif words[:1] == ["ops/s:"]:
            for name, v in re.findall(r"(\S+) ([\d.e+-]+)(?:,|$)", line.split(":", 1)[1]):
                rates[name] = float(v)
        elif heads and len(words) == len(heads):
            ops[words[0]] = (None if cat == "(none)" else cat, dict(zip(heads, words)))
    return ops, rates


def check_report(text, sent):
    ops, rates = report_tables(text)
    assert set(ops) == set(sent), (sorted(ops), sorted(sent))
    every = sum(math.fsum(v) for _, v in sent.values())
    span = re.search(r"Throughput over ([\d.]+) s", text)
    for op, (cat, values) in sent.items():
        got_cat, cells = ops[op]
        s = sorted(values)
        assert got_cat == cat, (op, got_cat, cat)
        assert int(cells["Count"]) == len(values), (op, cells)
        for col, want in (("Total", math.fsum(values)), ("Avg", math.fsum(values) / len(values)), ("Min", s[0]),
                          ("Max", s[-1])):
            got, rounding = ms_of(cells[col])
            check_figure(f"{op} {col}", got, want, rounding=rounding)
        for p in (50, 90, 99):
            got, rounding = ms_of(cells[f"p{p}"])
            check_figure(f"{op} p{p}", got, exact_quantile(s, p), rel=0.01, rounding=rounding)
        check_figure(f"{op} Share", float(cells["Share"].rstrip("%")), math.fsum(values) / every * 100, rounding=0.05)
        if span:
            check_figure(f"{op} ops/s", rates[op], len(values) / float(span.group(1)), rel=0.03)


def check_latency_json(text, sent):
    doc = json.loads(text)
    assert set(doc["ops"]) == set(sent), (sorted(doc["ops"]), sorted(sent))
    for op, (cat, values) in sent.items():
        o, s = doc["ops"][op], sorted(values)
        mean = math.fsum(values) / len(values)
        assert o["category"] == cat and o["count"] == len(values), (op, o)
        for key, want in (("total_ms", math.fsum(values)), ("mean_ms", mean), ("min_ms", s[0]), ("max_ms", s[-1]),
                          ("stddev_ms", math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)))):
            check_figure(f"{op} {key}", o[key], want, rel=1e-6)
        for p in (50, 90, 99):
            check_figure(f"{op} p{p}_ms", o[f"p{p}_ms"], exact_quantile(s, p), rel=0.01)


def check_metrics(text, sent):
    series = {}
    for name, labels, value in re.findall(r"^(\w+)\{([^}]*)\} (\S+)$", text, re.M):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        series[(name, lab.get("op"), lab.get("quantile"))] = float(value)
    shown = [op for op in sent if ("mlmond_run_ops_total", op, None) in series]
    assert shown, "no op of the tour in the /metrics lines it prints"
    for op in shown:  # the tour's grep keeps some ops only
        s = sorted(sent[op][1])
        assert series[("mlmond_run_ops_total", op, None)] == len(s)
        assert series[("mlmond_run_op_duration_seconds_count", op, None)] == len(s)
        check_figure(f"{op} _sum", series[("mlmond_run_op_duration_seconds_sum", op, None)], math.fsum(s) / 1000,
                     rel=1e-9)
        for q in ("0.5", "0.9", "0.99"):
            check_figure(f"{op} quantile {q}", series[("mlmond_run_op_duration_seconds", op, q)],
                         exact_quantile(s, float(q) * 100) / 1000, rel=0.01)


def test_readme_timings_are_the_ones_sent(tour_run):
    """The StatsD timings the tour sends, as mlmonctl report, /latency and
    /metrics give them back: in the real output, and in the README."""
    sent = sent_timings(tour_run)
    for pattern, check in ((r"^mlmonctl report 1$", check_report), (r"/latency\b", check_latency_json),
                           (r"/metrics\b", check_metrics)):
        shown, real, _ = step(tour_run, pattern)
        for which, text in (("real", real), ("README", shown)):
            try:
                check(text, sent)
            except (AssertionError, KeyError, ValueError) as e:
                raise AssertionError(f"`{pattern}`, {which} output: {e!r}\n--- {which} ---\n{text}") from e


def cpu_time(text):
    """(total, user, system) of a summary's "CPU time:  1.23 s (user 1.00 s, system 0.23 s)"."""
    m = re.search(r"CPU time: +([\d.]+) s \(user ([\d.]+) s, system ([\d.]+) s\)", text)
    assert m, f"no CPU time in:\n{text}"
    return tuple(float(x) for x in m.groups())


def test_readme_job_cpu_is_what_the_job_used(tour_run):
    """mlmonctl run's summary of the gzip pipeline: its CPU time is the CPU
    the job's processes used, as the shell that ran mlmonctl got it back
    from reaping them (mlmonctl's own few ms included), within 0.05 s + 5%.
    The README's own figures come from another machine: there the pipeline,
    which only computes, used at least half its wall time in CPU."""
    shown, real, (user, system) = step(tour_run, r"^mlmonctl run ")
    total, got_user, got_system = cpu_time(real)
    truth = user + system
    assert truth > 0.2, f"the job used {truth:.3f} s of CPU: too little to compare"
    for what, got, want in (("CPU time", total, truth), ("user", got_user, user), ("system", got_system, system)):
        assert abs(got - want) <= 0.05 + 0.05 * want, f"{what}: mlmond says {got} s, getrusage {want:.3f} s\n{real}"
    wall = re.search(r"wall time: +([\d.]+) s", shown)
    assert wall, shown
    assert cpu_time(shown)[0] >= 0.5 * float(wall.group(1)), f"the README's figures:\n{shown}"


# ---- links between the pages ---------------------------------------------------------------------


def pages():
    return [README] + sorted(os.path.join(DOC, f) for f in os.listdir(DOC) if f.endswith(".md"))


def prose(text):
    """The text without fenced code blocks and inline code spans."""
    text = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path):
    """GitHub's anchors of a page's headings: lower case, punctuation but
    '-' and '_' dropped, spaces to '-', repeats numbered -1, -2, ..."""
    with open(path) as f:
        text = re.sub(r"^```.*?^```$", "", f.read(), flags=re.S | re.M)
    seen, out = {}, set()
    for heading in re.findall(r"^#{1,6} +(.*?) *#*$", text, re.M):
        a = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def test_doc_links():
    bad, checked = [], 0
    for page in pages():
        with open(page) as f:
            text = prose(f.read())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            checked += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            name = os.path.relpath(page, ROOT)
            if not os.path.exists(dest):
                bad.append(f"{name}: {target}: no such file")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append(f"{name}: {target}: no such heading")
    assert checked >= 10, f"only {checked} relative links found: is the parser broken?"
    assert not bad, "broken links:\n" + "\n".join(bad)

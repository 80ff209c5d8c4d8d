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
Figures differ from run to run and are not compared."""

import json
import os
import re
import shutil
import signal
import subprocess

from conftest import MLMONCTL, ROOT
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
    """Runs the commands in one bash; returns [(exit status, output)]."""
    def local(cmd):
        cmd = cmd.replace("127.0.0.1:9477", f"127.0.0.1:{daemon.port}")
        return cmd.replace("/dev/udp/127.0.0.1/8125", f"/dev/udp/127.0.0.1/{daemon.udp_port}")

    out = os.path.join(root, "..", "out")
    os.mkdir(out)
    script = "".join(f"sleep {PACE_S}\n{{ {local(cmd)}\n}} </dev/null >{out}/{i} 2>&1\necho $? >{out}/{i}.rc\n"
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
            results.append((rc, f.read().decode("utf-8", "replace")))
    return results


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


def test_readme_tour(make_mlmond, tmpdir_0755):
    with open(README) as f:
        steps = tour(f.read())
    with open(os.path.join(ROOT, "etc", "mlmond.conf")) as f:
        conf = f.read()  # what tools/run-local.sh runs with: the defaults
    daemon = start_udp_mlmond(make_mlmond, interval=None, config_text=conf)
    root = scratch_root(tmpdir_0755, daemon)
    results = run_tour(steps, daemon, root)
    for (cmd, shown), (rc, real) in zip(steps, results):
        assert rc == 0, f"`{cmd}` exited {rc}:\n{real}"
        why = shape_mismatch(shown, real)
        assert why is None, f"`{cmd}`: {why}\n--- README shows ---\n" + "\n".join(shown) + f"\n--- real ---\n{real}"


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

#!/usr/bin/env python3
"""Runs the mutants of tests/mutants/: small, plausible breaks of the code,
each with the tests that must catch it. Prints one line per mutant,
caught, MISSED, STALE or BROKEN, and a last line with the catch rate.

Usage: tools/mutants.py [--dir DIR] [-j JOBS] [--baseline] [--each] [-v [LINES]] [--list] [NAME...]

A mutant is a file tests/mutants/NAME.mutant:

    # What breaks, in a sentence or two (comment lines start with '#').
    file: daemon/http/request.c
    tests: request tests/blackbox/test_remote.py::test_the_token_must_match_exactly
    --- find
            return ct_equal(given, strlen(given), token, token_len) ? AUTH_OK : AUTH_WRONG;
    --- replace
            return strncmp(given, token, token_len) == 0 ? AUTH_OK : AUTH_WRONG;

"find" is the exact text to break (one or more whole lines, or part of
one), which must occur exactly once in the file; "replace" is what it
becomes. "tests" names meson tests (as in tests/meson.build: straggler,
blackbox-test_auth) and pytest node ids of the black-box files
(tests/blackbox/test_x.py::test_y, run alone with the environment meson
gives their file). A mutant is caught when one of its tests fails (the
rest are not run, unless --each).

The tree (what git tracks and the files it does not ignore, as they are in
the working tree) is copied once to DIR/src (default build-mutants/, kept
between runs: only files that changed are copied again) and built in
DIR/build; each mutant is applied there, the targets its tests need are
built (incrementally), the tests run, and the file is put back. So the
working tree is never touched, and a run is quick after the first. With
-j JOBS (default 2, or $MUTANTS_JOBS) that many mutants are judged at a
time, each worker in a copy of its own (DIR/src and DIR/build, then
DIR/src2 and DIR/build2, ...): their tests mostly wait, as the black-box
files that run beside each other in the suite do.

A mutant whose find text no longer occurs exactly once is STALE: the code
it breaks has moved or changed, and the mutant must follow it. One that
does not build is BROKEN. Both count as failures, as does a MISSED one.
--baseline first runs every test the mutants name on the unbroken tree
(all must pass, or "caught" would mean nothing). Exit status: 0 only when
every mutant was caught."""
import argparse
import filecmp
import glob
import json
import os
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MUTANTS = os.path.join(ROOT, "tests", "mutants")
TEST_TIMEOUT_S = 300


class Mutant:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)[:-len(".mutant")]
        self.what, self.file, self.tests, self.find, self.replace = [], None, [], None, None
        section = None
        blocks = {"find": [], "replace": []}
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # the file's last newline ends the last line, it adds none
        for n, line in enumerate(lines, 1):
            if line in ("--- find", "--- replace"):
                section = line[4:]
            elif section:
                blocks[section].append(line)
            elif line.startswith("#"):
                self.what.append(line[1:].strip())
            elif line.startswith("file:"):
                self.file = line[5:].strip()
            elif line.startswith("tests:"):
                self.tests += line[6:].split()
            elif line.strip():
                raise ValueError(f"{path}:{n}: not a mutant's line: {line!r}")
        self.find, self.replace = "\n".join(blocks["find"]), "\n".join(blocks["replace"])
        if not (self.file and self.tests and self.find) or self.find == self.replace:
            raise ValueError(f"{path}: needs file:, tests:, a --- find block and a different --- replace block")


def syntax_ok(path, text):
    """(ok, why) for a Python file (compile()) or, where node is installed,
    a JavaScript one (node --check); True for anything else."""
    if path.endswith(".py"):
        try:
            compile(text, path, "exec")
        except SyntaxError as e:
            return False, str(e)
    elif path.endswith(".js") and shutil.which("node"):
        r = subprocess.run(["node", "--check", path], capture_output=True, text=True)
        return r.returncode == 0, r.stderr
    return True, ""


def log(text):
    print(text, flush=True)


def sync_tree(src):
    """Copies the working tree's files into src, only those that differ
    (unchanged files keep their times: the build stays incremental)."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True).stdout.decode()
    files = {f for f in out.split("\0") if f and os.path.lexists(os.path.join(ROOT, f))}
    copied = 0
    for f in sorted(files):
        a, b = os.path.join(ROOT, f), os.path.join(src, f)
        if os.path.islink(a) or not os.path.isfile(a):
            continue
        if os.path.isfile(b) and filecmp.cmp(a, b, shallow=False):
            continue
        os.makedirs(os.path.dirname(b), exist_ok=True)
        shutil.copyfile(a, b)
        shutil.copymode(a, b)
        copied += 1
    removed = 0
    for d, _, names in os.walk(src):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), src)
            if rel not in files:
                os.unlink(os.path.join(d, n))
                removed += 1
    return copied, removed


def meson_tests(build):
    tests = json.loads(subprocess.run(["meson", "introspect", build, "--tests"], check=True,
                                      capture_output=True).stdout)
    targets = json.loads(subprocess.run(["meson", "introspect", build, "--targets"], check=True,
                                        capture_output=True).stdout)
    files = {t["id"]: [os.path.relpath(f, build) for f in t["filename"]] for t in targets}
    by_name = {}
    for t in tests:
        need = [f for d in t["depends"] for f in files.get(d, [])]
        if t["cmd"][0].startswith(build + os.sep):
            need.append(os.path.relpath(t["cmd"][0], build))
        if "MLMONCTL" in t["env"]:  # the black-box files run mlmonctl too
            need.append(os.path.relpath(t["env"]["MLMONCTL"], build))
        by_name[t["name"]] = (t, need)
    return by_name


class Runner:
    def __init__(self, src, build):
        self.src, self.build = src, build
        self.tests = meson_tests(build)

    def resolve(self, ref):
        """(argv, env, timeout, targets) of a test reference."""
        if "::" in ref:
            path, node = ref.split("::", 1)
            name = "blackbox-" + os.path.basename(path)[:-len(".py")]
            if name not in self.tests:
                raise KeyError(f"{ref}: no meson test {name} runs its file")
            t, need = self.tests[name]
            argv = t["cmd"][:-1] + [t["cmd"][-1] + "::" + node]
            return argv, t["env"], TEST_TIMEOUT_S, need
        if ref not in self.tests:
            raise KeyError(f"{ref}: no such meson test")
        t, need = self.tests[ref]
        return None, None, t["timeout"] or TEST_TIMEOUT_S, need

    def targets(self, refs):
        return sorted({f for r in refs for f in self.resolve(r)[3]})

    def build_targets(self, targets):
        r = subprocess.run(["ninja", "-C", self.build] + targets, capture_output=True, text=True)
        return r.returncode == 0, r.stdout + r.stderr

    def run(self, ref):
        """(passed, output, skipped): one test against the tree as it is."""
        argv, env, timeout, _ = self.resolve(ref)
        if argv is None:
            cmd = ["meson", "test", "-C", self.build, "--no-rebuild", "--print-errorlogs", ref]
            e = dict(os.environ)
        else:
            cmd = argv
            e = dict(os.environ, **env)
            e["MLMON_SKIP_LOG"] = os.path.join(self.build, "mutant-skips.txt")
        skiplog = os.path.join(self.build, "mutant-skips.txt")
        if os.path.exists(skiplog):
            os.unlink(skiplog)
        try:
            r = subprocess.run(cmd, cwd=self.src, env=e, capture_output=True, text=True, timeout=timeout)
            out, ok = r.stdout + r.stderr, r.returncode == 0
        except subprocess.TimeoutExpired as x:
            out, ok = f"timed out after {timeout} s\n{x.stdout or ''}", False
        skipped = ""
        if argv is None and ok:  # meson's log of this one test says whether it skipped (77)
            with open(os.path.join(self.build, "meson-logs", "testlog.json"), encoding="utf-8") as f:
                if any(json.loads(line).get("result") == "SKIP" for line in f if line.strip()):
                    skipped = "exit status 77"
        if os.path.exists(skiplog):
            with open(skiplog) as f:
                skipped = f.read().strip()
        return ok, out, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.environ.get("MUTANTS_DIR", os.path.join(ROOT, "build-mutants")))
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("MUTANTS_JOBS", "2")),
                    help="mutants judged at a time, each in a tree of its own (default 2)")
    ap.add_argument("--baseline", action="store_true", help="first run every named test on the unbroken tree")
    ap.add_argument("--each", action="store_true", help="run every test of a mutant, not only until one fails")
    ap.add_argument("--list", action="store_true", help="list the mutants and their tests, run nothing")
    ap.add_argument("-v", "--verbose", type=int, nargs="?", const=30, default=0, metavar="LINES",
                    help="print the end of each failing test's output (default 30 lines)")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()

    paths = sorted(glob.glob(os.path.join(MUTANTS, "*.mutant")))
    mutants = [Mutant(p) for p in paths]
    if args.names:
        unknown = set(args.names) - {m.name for m in mutants}
        if unknown:
            sys.exit(f"mutants: no such mutant: {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.name in args.names]
    if args.list:
        for m in mutants:
            log(f"{m.name}: {m.file}: {' '.join(m.what)}\n    tests: {' '.join(m.tests)}")
        return 0

    t_start = time.monotonic()
    jobs = max(1, min(args.jobs, len(mutants)))
    trees = [(os.path.join(args.dir, "src" + (str(k + 1) if k else "")),
              os.path.join(args.dir, "build" + (str(k + 1) if k else ""))) for k in range(jobs)]
    setups = [None] * jobs

    def set_up(k):
        src, build = trees[k]
        os.makedirs(src, exist_ok=True)
        copied, removed = sync_tree(src)
        if not os.path.exists(os.path.join(build, "meson-private", "coredata.dat")):
            r = subprocess.run(["meson", "setup", "--werror", build, src], capture_output=True, text=True)
            if r.returncode != 0:
                setups[k] = (copied, removed, None, r.stdout + r.stderr + "\nmutants: meson setup failed")
                return
        else:  # a meson.build may have changed: the introspection below must see it
            subprocess.run(["ninja", "-C", build, "build.ninja"], capture_output=True, text=True)
        runner = Runner(src, build)
        for m in mutants:
            for ref in m.tests:
                try:
                    runner.resolve(ref)
                except KeyError as e:
                    setups[k] = (copied, removed, None, f"mutants: {m.name}: {e}\n"
                                 f"mutants: 0 caught, {len(mutants)} not run: fix the tests the mutants name")
                    return
        ok, out = runner.build_targets(runner.targets([r for m in mutants for r in m.tests]))
        setups[k] = (copied, removed, runner, None if ok else out[-3000:] + "\nmutants: the unbroken tree does not build")

    threads = [threading.Thread(target=set_up, args=(k,)) for k in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    copied, removed = setups[0][0], setups[0][1]
    log(f"mutants: {len(mutants)} mutants, {jobs} at a time; the tree in {trees[0][0]} "
        f"({copied} files copied, {removed} removed)")
    for _, _, _, err in setups:
        if err:
            log(err)
            return 1
    runners = [x[2] for x in setups]
    log(f"mutants: built in {time.monotonic() - t_start:.0f} s")

    if args.baseline:
        for ref in sorted({r for m in mutants for r in m.tests}):
            passed, out, skipped = runners[0].run(ref)
            if not passed or skipped:
                log(out[-3000:])
                log(f"mutants: {ref} {'skips' if passed else 'fails'} without any mutant: no mutant is judged")
                return 1
        log(f"mutants: every test passes on the unbroken tree ({time.monotonic() - t_start:.0f} s)")

    counts = {"caught": 0, "MISSED": 0, "STALE": 0, "BROKEN": 0}
    # the black-box ones first: they take longest, and the short ones fill in behind them
    queue = sorted(mutants, key=lambda m: not any("::" in t or t.startswith("blackbox-") for t in m.tests))
    lock = threading.Lock()

    def judge(runner, m):
        t0 = time.monotonic()
        path = os.path.join(runner.src, m.file)
        try:
            with open(path, encoding="utf-8") as f:
                original = f.read()
        except FileNotFoundError:
            original = ""
        n = original.count(m.find)
        if n != 1:
            where = "is gone" if not original else f"holds its find text {n} times, not once"
            return "STALE", [f"mutants: STALE   {m.name}: {m.file} {where}: update tests/mutants/{m.name}.mutant"]
        status, note, lines = None, "", []
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original.replace(m.find, m.replace))
            ok, out = runner.build_targets(runner.targets(m.tests))
            if ok:  # nothing compiles Python or JavaScript: a syntax error would look caught
                ok, out = syntax_ok(path, original.replace(m.find, m.replace))
            if not ok:
                status, note = "BROKEN", "it does not build:\n" + out[-2000:]
            else:
                caught_by, passed_by, skips = [], [], []
                for ref in m.tests:
                    passed, out, skipped = runner.run(ref)
                    (passed_by if passed else caught_by).append(ref)
                    if args.verbose and not passed:
                        lines.append("\n".join("         | " + x for x in out.rstrip().splitlines()[-args.verbose:]))
                    if passed and skipped:
                        skips.append(f"{ref} skipped: {skipped}")
                    if caught_by and not args.each:
                        break
                if caught_by:
                    status = "caught"
                    note = "by " + ", ".join(caught_by) + ("; not by " + ", ".join(passed_by) if passed_by else "")
                else:
                    status = "MISSED"
                    note = "; ".join(skips) or f"{', '.join(m.tests)} passed"
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original)
        lines.append(f"mutants: {status:7} {m.name} ({time.monotonic() - t0:.0f} s): {note}")
        if status != "caught":
            lines.append("         " + " ".join(m.what))
        return status, lines

    def worker(runner):
        while True:
            with lock:
                if not queue:
                    return
                m = queue.pop(0)
            status, lines = judge(runner, m)
            with lock:
                counts[status] += 1
                log("\n".join(lines))

    threads = [threading.Thread(target=worker, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = len(mutants)
    rate = 100.0 * counts["caught"] / total if total else 0.0
    log(f"mutants: {counts['caught']} caught, {counts['MISSED']} missed, {counts['STALE']} stale, "
        f"{counts['BROKEN']} broken of {total}: catch rate {rate:.0f}% in {time.monotonic() - t_start:.0f} s")
    return 0 if counts["caught"] == total else 1


if __name__ == "__main__":
    sys.exit(main())

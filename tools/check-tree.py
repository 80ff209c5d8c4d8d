#!/usr/bin/env python3
"""Checks the rules of the source tree that the compiler cannot:

- layers: what each daemon folder may include (collect/ and analyze/ know
  neither SQLite nor libmicrohttpd nor the layers above them; only the top
  level includes manager.h), and tests/analyze/ as daemon/analyze/ (its
  tests link only the analyze library);
- ownership: the manager owns struct run (daemon/run.h); the layers it
  serves (http/, ingest/, store/) include neither run.h nor the collector's
  probe, and name no `struct run`: they ask through manager-ops.h and get
  copies;
- no #include cycle among the daemon's modules (a .c and its .h) nor its
  layers (the folders under daemon/);
- size: no C file over 900 lines, no function over 120 lines;
- comments stand alone: no source file cites a document outside the
  repository or a tracker number.

Usage: tools/check-tree.py [ROOT]. Prints one line per violation and exits 1
if there is any, 0 otherwise.
"""
import os
import re
import sys

MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 120
# Functions allowed to be longer, each with its reason (none today).
LONG_FUNCTIONS = set()

# folder -> include prefixes it must not use
FORBIDDEN = {
    "daemon/analyze": ["<sqlite3.h>", "<microhttpd.h>", "<systemd/", "collect/", "store/", "ingest/", "http/",
                       "manager", "config.h"],
    "daemon/collect": ["<sqlite3.h>", "<microhttpd.h>", "store/", "ingest/", "http/", "manager", "config.h"],
    "daemon/ingest": ["<sqlite3.h>", "<microhttpd.h>", "store/", "http/", "manager.h", "run.h", "collect/probe.h"],
    "daemon/http": ["<sqlite3.h>", "ingest/", "manager.h", "run.h", "collect/probe.h"],
    "daemon/store": ["<microhttpd.h>", "ingest/", "http/", "manager", "run.h", "collect/probe.h"],
}
FORBIDDEN["tests/analyze"] = FORBIDDEN["daemon/analyze"]
# the manager's run, which the layers it serves never see
RUN_STRUCT = re.compile(r"\bstruct run\b(?!_)")
NO_RUN_STRUCT = ("daemon/http/", "daemon/ingest/", "daemon/store/", "daemon/collect/", "daemon/analyze/")
# only server.c may talk to libmicrohttpd within http/
MHD_ONLY = "daemon/http/server.c"

CITATION = re.compile(r"research/|DESIGN\.md|STYLE\.md|\.\./shared|[Ii]ssue #?\d|§")
SKIP_DIRS = {".git", "fixtures", "corpus", "__pycache__"}


def sources(root, suffixes=(".c", ".h")):
    for top in ("daemon", "client", "lib", "tests", "tools", ".ci"):
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build"))
            for f in sorted(files):
                if f.endswith(suffixes):
                    yield os.path.relpath(os.path.join(d, f), root)


def scripts(root):
    """The other code: Python, shell, meson, CI (all of whose lines count)."""
    for path in sources(root, (".py", ".sh", "meson.build", "run")):
        if path != "tools/check-tree.py":
            yield path


def includes(text):
    return re.findall(r'^#include\s+([<"][^>"]+[>"])', text, re.M)


def functions(lines):
    """(name, first line, length) of each top-level function: a signature
    starting in column 0 (maybe over several lines), a body ending with a
    '}' in column 0."""
    start = name = None
    in_sig = False
    for i, line in enumerate(lines):
        if start is None:
            if re.match(r"^[A-Za-z_][\w\s\*]*\b\w+\s*\(", line) and not line.rstrip().endswith(";") and not line.startswith(
                    ("struct", "enum", "union", "typedef", "static const", "const", "return")):
                m = re.search(r"(\w+)\s*\(", line)
                start, name = i, m.group(1)
                in_sig = not line.rstrip().endswith("{")
        elif in_sig:
            if line.rstrip().endswith(";"):
                start = None  # a prototype over several lines
            elif line.rstrip().endswith("{"):
                in_sig = False
        elif line.startswith("}"):
            yield name, start + 1, i - start + 1
            start = None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    errors = []
    graph = {}
    for path in sources(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.split("\n")
        if len(lines) - 1 > MAX_FILE_LINES:
            errors.append(f"{path}: {len(lines) - 1} lines (at most {MAX_FILE_LINES})")
        if path.endswith(".c"):
            for name, first, n in functions(lines):
                if n > MAX_FUNCTION_LINES and (path, name) not in LONG_FUNCTIONS:
                    errors.append(f"{path}:{first}: {name}() is {n} lines (at most {MAX_FUNCTION_LINES})")
        for i, line in enumerate(lines):
            if CITATION.search(line) and ("/*" in line or line.lstrip().startswith(("*", "//", "#"))):
                errors.append(f"{path}:{i + 1}: cites a document outside the repository or a tracker number")
        incs = includes(text)
        for folder, bad in FORBIDDEN.items():
            if path.startswith(folder + "/"):
                for inc in incs:
                    name = inc.strip('<>"')
                    if any(inc.startswith(b) or name.startswith(b) for b in bad):
                        errors.append(f"{path}: includes {inc}, which {folder}/ must not use")
        if path.startswith(NO_RUN_STRUCT):
            for i, line in enumerate(lines):
                if RUN_STRUCT.search(line):
                    errors.append(f"{path}:{i + 1}: names struct run, which only the manager's files may")
        if path.startswith("daemon/http/") and path != MHD_ONLY and "<microhttpd.h>" in incs:
            errors.append(f"{path}: includes <microhttpd.h>; only {MHD_ONLY} may")
        if path.startswith("daemon/"):
            module = os.path.splitext(os.path.relpath(path, "daemon"))[0]
            deps = graph.setdefault(module, set())
            for inc in incs:
                name = inc.strip('<>"')
                if inc.startswith('"') and os.path.exists(os.path.join(root, "daemon", name)):
                    dep = os.path.splitext(name)[0]
                    if dep != module:
                        deps.add(dep)

    for path in scripts(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if CITATION.search(line):
                    errors.append(f"{path}:{i + 1}: cites a document outside the repository or a tracker number")

    # Cycles: between modules (a .c and its .h; the manager including the
    # API that includes the manager, say), and between layers (the folders
    # under daemon/; the top level is the wiring that includes them all).
    layers = {}
    for module, deps in graph.items():
        for dep in deps:
            a, b = module.split("/")[0], dep.split("/")[0]
            if "/" in module and "/" in dep and a != b:
                layers.setdefault(a, set()).add(b)
    for what, g in (("modules", graph), ("layers", layers)):
        state = {}

        def visit(node, stack):
            state[node] = 1
            for dep in sorted(g.get(node, ())):
                if state.get(dep) == 1:
                    cycle = stack[stack.index(dep):] + [dep]
                    errors.append(f"include cycle between {what}: " + " -> ".join(cycle))
                elif dep not in state:
                    visit(dep, stack + [dep])
            state[node] = 2

        for node in sorted(g):
            if node not in state:
                visit(node, [node])

    for e in errors:
        print(e)
    print(f"check-tree: {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

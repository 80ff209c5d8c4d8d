#!/usr/bin/env python3
"""Puts the real output of the README's five-minute tour into README.md.

Usage: README_OUT=DIR meson test -C build blackbox-test_readme
       tools/refresh-readme.py DIR

DIR holds what test_readme.py's run of the tour printed (N, the output of
the tour's N-th command). Each shown output is replaced by the real one; a
shown output with "..." lines (shortened) keeps its shape: each line it
shows is replaced by the next real line that starts with the same word."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TOUR_HEADING = "## A five-minute tour"


def first_word(line):
    words = line.split()
    return words[0] if words else ""


def shortened(shown, real):
    out, lines, k = [], real.splitlines(), 0
    for line in shown:
        if line.strip() in ("", "..."):
            out.append(line)
            continue
        while k < len(lines) and first_word(lines[k]) != first_word(line):
            k += 1
        if k == len(lines):
            sys.exit(f"refresh-readme: no real line like {line!r}")
        out.append(lines[k])
        k += 1
    return out


def main():
    outdir = sys.argv[1]
    path = os.path.join(ROOT, "README.md")
    with open(path) as f:
        text = f.read()
    head, rest = text.split("\n" + TOUR_HEADING + "\n", 1)
    parts = re.split(r"(\n## )", rest, maxsplit=1)
    body = parts[0]
    step = 0

    def block(m):
        nonlocal step
        out, shown, cmd = [], [], None

        def flush():
            nonlocal step
            if cmd is None:
                return
            with open(os.path.join(outdir, str(step))) as f:
                real = f.read().rstrip("\n")
            if any(line.strip() == "..." for line in shown):
                out.extend(shortened(shown, real))
            elif shown:
                out.extend(real.splitlines())
            step += 1

        for line in m.group(1).splitlines():
            if line.startswith("$ "):
                flush()
                out.append(line)
                cmd, shown = line, []
            else:
                shown.append(line)
        flush()
        return "```console\n" + "\n".join(out) + "\n```"

    body = re.sub(r"^```console\n(.*?)^```$", block, body, flags=re.S | re.M)
    with open(path, "w") as f:
        f.write(head + "\n" + TOUR_HEADING + "\n" + body + "".join(parts[1:]))
    print(f"refresh-readme: {step} outputs")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What a sample costs on disk: the raw tier's bytes per sample, per value
and per run-day, against the same samples stored as rows, one a sample, as
every sample was before the blocks.

  tests/bench/disk.py [--storegen build/tests/storegen] [--runs 200] [--minutes 14]

`storegen disk` (tests/bench/storegen.c) writes RUNS runs sampled every
second for MINUTES through the store's own code, a tick at a time, and
compacts each minute as the daemon's maintenance does: a quarter of the runs
busy like a training job (a core of CPU in nanoseconds, RSS moving by pages,
data read, a checkpoint written now and then), a quarter like a server
(a little CPU, a log line now and then), half asleep (nothing moves but the
host namespace's network counters, which every run reports). `storegen rows`
writes the same samples and never compacts them: each stays a row of the
head table, whose columns are those of the rows before the blocks (plus the
sample's interval). Then each kind alone, the same way.

A value is a figure the sample stores that is not a rate (a rate is its
counter's delta over the interval): the time, the interval, the CPU times,
RSS and anonymous RSS, the peak, threads, processes, the four I/O counters
and the two network counters, 16 for these processes (a PSS or GPU figure
would add to them). The raw tier's bytes are the pages of sample_blocks and
its two indexes (dbstat), once the head is compacted; the rows' bytes, the
pages of the head table alone (the index by run it has now did not exist
before). A run-day is the bytes per sample times 86 400."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import SRC  # noqa: E402


def storegen(exe, mode, db, runs, minutes, kind=None):
    args = [exe, mode, db, str(runs), str(minutes)] + ([kind] if kind else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def table_bytes(db, table, indexes=True):
    import sqlite3
    c = sqlite3.connect(db)
    names = [table] + ([r[0] for r in c.execute("SELECT name FROM sqlite_schema WHERE type = 'index' AND "
                                                 "tbl_name = ?", (table,))] if indexes else [])
    n = sum(c.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?", (x,)).fetchone()[0]
            for x in names)
    c.close()
    return n


def line(what, nbytes, samples, values):
    per_sample = nbytes / samples
    print(f"  {what:<34} {nbytes / 1e6:8.2f} MB {per_sample:7.1f} B/sample {nbytes / values:5.2f} B/value "
          f"{per_sample * 86400 / 1e6:6.2f} MB/run-day")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--storegen", default=os.path.join(SRC, "build", "tests", "storegen"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--minutes", type=int, default=14)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-disk-")
    try:
        for kind in (None, "busy", "server", "asleep"):
            blocks, rows = os.path.join(tmp, "blocks.db"), os.path.join(tmp, "rows.db")
            k = storegen(a.storegen, "disk", blocks, a.runs, a.minutes, kind)
            storegen(a.storegen, "rows", rows, a.runs, a.minutes, kind)
            n, v = k["samples"], k["values"]
            print(f"{kind or 'mixed'}: {a.runs} runs, {a.minutes} min at 1 s, {n:,} samples, "
                  f"{v / n:.1f} values a sample")
            line("rows (one a sample, before)", table_bytes(rows, "samples", indexes=False), n, v)
            line("raw tier: blocks (now)", table_bytes(blocks, "sample_blocks"), n, v)
            line("  the blocks' own bytes", k["block_data_bytes"], n, v)
            line("minute tier", table_bytes(blocks, "samples_1m"), n, v)
            for f in (blocks, rows):
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(f + suffix):
                        os.unlink(f + suffix)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

-- Schema version 3: what applications report (StatsD timings, counters, gauges).
-- Per run, per op, per 1-second slice: how many (timings + counter
-- increments / sample rate) and, for timings, a mergeable log-bucketed
-- histogram (daemon/analyze/histogram.c encoding), so a window's percentiles are a
-- merge of its slices. Clustered by time like samples.
CREATE TABLE op_slices (
        ts        INTEGER NOT NULL,  -- slice start, Unix ms, a multiple of 1000
        run_id    INTEGER NOT NULL,
        op        TEXT    NOT NULL,
        category  TEXT,
        count     REAL    NOT NULL,  -- timings + counter increments, sample rates applied
        timings   INTEGER NOT NULL,  -- timings only (the histogram's count)
        hist      BLOB,              -- NULL when the slice had no timings
        PRIMARY KEY (ts, run_id, op)
) WITHOUT ROWID;

-- The same merged per minute, kept for retention_rollup.
CREATE TABLE op_slices_1m (
        ts        INTEGER NOT NULL,  -- minute start, Unix ms
        run_id    INTEGER NOT NULL,
        op        TEXT    NOT NULL,
        category  TEXT,
        count     REAL    NOT NULL,
        timings   INTEGER NOT NULL,
        hist      BLOB,
        PRIMARY KEY (ts, run_id, op)
) WITHOUT ROWID;

-- StatsD gauges ("g"), one row per reported value.
CREATE TABLE gauges (
        ts      INTEGER NOT NULL,
        run_id  INTEGER NOT NULL,
        name    TEXT    NOT NULL,
        value   REAL    NOT NULL,
        PRIMARY KEY (ts, run_id, name)
) WITHOUT ROWID;

-- Phase markers ("warmup-done"); windows can start at one.
CREATE TABLE marks (
        run_id  INTEGER NOT NULL,
        ts      INTEGER NOT NULL,
        label   TEXT    NOT NULL,
        PRIMARY KEY (run_id, label, ts)
) WITHOUT ROWID;

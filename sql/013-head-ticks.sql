-- Schema version 13: the head without an index by run.
--
-- The head (samples: the rows of the minutes not compacted yet, keyed by
-- time, then run) had an index by run (samples_run) for a run's own rows.
-- A tick appends one row per run at the right edge of the table, but one
-- entry per run all over that index: at 1 000 runs each tick rewrote about
-- 360 of its pages into the WAL, and a stored sample cost about twice as
-- much as without it. A run's head rows are now found through the times
-- the head holds, one row per tick in head_ticks: for each of them, the
-- row (ts, run_id) by the table's own key. The compaction reads the head in
-- the table's order.
DROP INDEX samples_run;
CREATE TABLE head_ticks (ts INTEGER PRIMARY KEY);
INSERT INTO head_ticks SELECT DISTINCT ts FROM samples;

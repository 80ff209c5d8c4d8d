-- Schema version 11: what the goodput ledger needs of a run, and the verdicts
-- beside the leak verdict (input-bound, GPU held but idle, time to OOM) as
-- typed rows: the latest of each run, kept so that a finished run still shows
-- how it ended. Figures are NULL where they are not known.

-- The op whose timings are the run's steps, when the registration named one
-- (NULL: [goodput] step_op); when the first of them arrived (Unix ms) and
-- how long it took: the run's startup ends there.
ALTER TABLE runs ADD COLUMN step_op TEXT;
ALTER TABLE runs ADD COLUMN first_step_ts INTEGER;
ALTER TABLE runs ADD COLUMN first_step_ms REAL;

CREATE TABLE run_input_bound (
        run_id           INTEGER PRIMARY KEY,
        flagged          INTEGER NOT NULL,
        evaluated        INTEGER NOT NULL,
        share_pct        REAL,     -- the data wait's share of the step time
        data_wait_s      REAL,
        step_s           REAL,
        window_s         REAL     NOT NULL,
        workers          INTEGER,  -- loader workers (the tree's children); NULL: the run is no tree
        workers_cpu_pct  REAL,     -- per worker, 100 = one core
        gpu_util_pct     REAL,
        since_ts         INTEGER,  -- Unix ms: flagged since
        evaluated_ts     INTEGER,
        reason           TEXT     NOT NULL
);

CREATE TABLE run_gpu_idle (
        run_id           INTEGER PRIMARY KEY,
        flagged          INTEGER NOT NULL,
        evaluated        INTEGER NOT NULL,
        lingering        INTEGER NOT NULL, -- held by a member after the main process exited
        device           TEXT,
        mem_bytes        INTEGER,
        util_pct         REAL,
        idle_s           REAL,
        since_ts         INTEGER,
        lingering_pid    INTEGER,
        lingering_state  TEXT,             -- /proc/PID/stat state letter
        evaluated_ts     INTEGER,
        reason           TEXT     NOT NULL
);

CREATE TABLE run_oom (
        run_id                INTEGER NOT NULL,
        metric                TEXT    NOT NULL,  -- rss_anon_bytes | gpu_mem_bytes
        known                 INTEGER NOT NULL,
        eta_s                 REAL,
        slope_lo_bytes_per_s  REAL,
        source                TEXT,              -- memory.max | memory.limit_in_bytes | MemAvailable | device
        limit_bytes           INTEGER,
        usage_bytes           INTEGER,
        high_bytes            INTEGER,
        high_eta_s            REAL,
        location              TEXT,              -- the cgroup's path, or the device
        evaluated_ts          INTEGER,
        reason                TEXT    NOT NULL,
        PRIMARY KEY (run_id, metric)
) WITHOUT ROWID;

-- Schema version 4: leak verdicts.
-- Each change of a run's verdict (suspected / cleared), with the figures
-- that decided it, is the run's leak history.
CREATE TABLE leak_events (
        run_id             INTEGER NOT NULL,
        ts                 INTEGER NOT NULL,  -- Unix ms
        suspected          INTEGER NOT NULL,  -- 1 suspected, 0 cleared
        metric             TEXT    NOT NULL,  -- "rss_anon_bytes"
        slope_bytes_per_s  REAL,
        growth_bytes       REAL,
        window_s           REAL,
        confidence         REAL,
        reason             TEXT    NOT NULL,
        PRIMARY KEY (run_id, ts, metric)
) WITHOUT ROWID;

-- The latest verdict of each run as the API renders it (JSON), kept with
-- the totals so a finished run still shows how it ended.
ALTER TABLE runs ADD COLUMN leak TEXT;

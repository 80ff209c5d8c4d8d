-- Schema version 7: a run's leak verdicts, its per-device use and the devices' details as
-- typed rows.
-- Until now both were the API's JSON text, stored as it was rendered: renaming a
-- field changed what was on disk, and every read parsed it back.

-- The latest verdict of each run on each watched series, kept with the totals so
-- a finished run still shows how it ended. Figures are NULL while not evaluated.
CREATE TABLE run_leak (
        run_id             INTEGER NOT NULL,
        metric             TEXT    NOT NULL,  -- rss_anon_bytes | gpu_mem_bytes
        suspected          INTEGER NOT NULL,
        evaluated          INTEGER NOT NULL,
        ended              INTEGER NOT NULL,  -- the run ended: the verdict is final
        slope_bytes_per_s  REAL,
        growth_bytes       REAL,
        window_s           REAL,
        confidence         REAL,
        since_ts           INTEGER,           -- Unix ms: start of the reported window
        suspected_ts       INTEGER,           -- Unix ms: when it became suspected
        evaluated_ts       INTEGER,           -- Unix ms: the last evaluation
        reason             TEXT    NOT NULL,
        PRIMARY KEY (run_id, metric)
) WITHOUT ROWID;

INSERT INTO run_leak
SELECT id, 'rss_anon_bytes', coalesce(json_extract(leak, '$.suspected'), 0),
       coalesce(json_extract(leak, '$.evaluated'), 0), state <> 'running',
       json_extract(leak, '$.slope_bytes_per_s'), json_extract(leak, '$.growth_bytes'),
       json_extract(leak, '$.window_s'), json_extract(leak, '$.confidence'), json_extract(leak, '$.since'),
       json_extract(leak, '$.suspected_at'), json_extract(leak, '$.evaluated_ts'),
       coalesce(json_extract(leak, '$.reason'), '')
FROM runs WHERE leak IS NOT NULL AND json_valid(leak);

INSERT INTO run_leak
SELECT id, 'gpu_mem_bytes', coalesce(json_extract(leak, '$.gpu_mem.suspected'), 0),
       coalesce(json_extract(leak, '$.gpu_mem.evaluated'), 0), state <> 'running',
       json_extract(leak, '$.gpu_mem.slope_bytes_per_s'), json_extract(leak, '$.gpu_mem.growth_bytes'),
       json_extract(leak, '$.gpu_mem.window_s'), json_extract(leak, '$.gpu_mem.confidence'),
       json_extract(leak, '$.gpu_mem.since'), json_extract(leak, '$.gpu_mem.suspected_at'),
       json_extract(leak, '$.gpu_mem.evaluated_ts'), coalesce(json_extract(leak, '$.gpu_mem.reason'), '')
FROM runs WHERE leak IS NOT NULL AND json_valid(leak) AND json_type(leak, '$.gpu_mem') = 'object';

ALTER TABLE runs DROP COLUMN leak;

-- Per sample, the run's use of each device it holds (only where it holds one).
CREATE TABLE sample_gpu (
        ts         INTEGER NOT NULL,  -- the sample's
        run_id     INTEGER NOT NULL,
        device     TEXT    NOT NULL,  -- PCI address or node
        driver     TEXT,
        estimated  INTEGER NOT NULL,  -- apportioned from device counters, not the client's own
        clients    INTEGER NOT NULL,  -- distinct DRM clients counted
        mem_bytes  INTEGER,
        util_pct   REAL,              -- the busiest engine's
        PRIMARY KEY (ts, run_id, device)
) WITHOUT ROWID;

-- The engines (busy %) and memory regions (resident bytes) of each such use.
CREATE TABLE sample_gpu_parts (
        ts         INTEGER NOT NULL,
        run_id     INTEGER NOT NULL,
        device     TEXT    NOT NULL,
        kind       TEXT    NOT NULL CHECK (kind IN ('engine', 'region')),
        name       TEXT    NOT NULL,
        value      REAL,              -- engine: busy %, NULL when unknown; region: bytes
        PRIMARY KEY (ts, run_id, device, kind, name)
) WITHOUT ROWID;

INSERT INTO sample_gpu
SELECT s.ts, s.run_id, json_extract(u.value, '$.device'), json_extract(u.value, '$.driver'),
       coalesce(json_extract(u.value, '$.estimated'), 0), coalesce(json_extract(u.value, '$.clients'), 0),
       json_extract(u.value, '$.mem_bytes'), json_extract(u.value, '$.util_pct')
FROM samples s, json_each(s.gpu) u
WHERE s.gpu IS NOT NULL AND json_valid(s.gpu) AND json_type(u.value, '$.device') = 'text';

INSERT INTO sample_gpu_parts
SELECT s.ts, s.run_id, json_extract(u.value, '$.device'), 'engine', e.key, e.value
FROM samples s, json_each(s.gpu) u, json_each(u.value, '$.engines') e
WHERE s.gpu IS NOT NULL AND json_valid(s.gpu) AND json_type(u.value, '$.device') = 'text';

INSERT INTO sample_gpu_parts
SELECT s.ts, s.run_id, json_extract(u.value, '$.device'), 'region', r.key, r.value
FROM samples s, json_each(s.gpu) u, json_each(u.value, '$.regions') r
WHERE s.gpu IS NOT NULL AND json_valid(s.gpu) AND json_type(u.value, '$.device') = 'text';

-- samples.gpu is no longer written or read. Dropping it would rewrite every raw
-- sample at start (minutes for a large database, past systemd's start timeout);
-- the column goes with the rows, by retention.

-- A device's figures beside device_samples' columns, until now a JSON "detail";
-- the busy share of each GT (Intel) in a table of its own.
ALTER TABLE device_samples ADD COLUMN gtt_used_bytes INTEGER;
ALTER TABLE device_samples ADD COLUMN gtt_total_bytes INTEGER;
ALTER TABLE device_samples ADD COLUMN freq_max_mhz REAL;
ALTER TABLE device_samples ADD COLUMN suspended INTEGER;
CREATE TABLE device_gt_samples (
        ts        INTEGER NOT NULL,
        device    TEXT    NOT NULL,
        gt        TEXT    NOT NULL,
        busy_pct  REAL,
        PRIMARY KEY (ts, device, gt)
) WITHOUT ROWID;
UPDATE device_samples SET gtt_used_bytes = json_extract(detail, '$.gtt_used_bytes'),
       gtt_total_bytes = json_extract(detail, '$.gtt_total_bytes'), freq_max_mhz = json_extract(detail, '$.freq_max_mhz'),
       suspended = json_extract(detail, '$.suspended'), detail = NULL
WHERE detail IS NOT NULL AND json_valid(detail);

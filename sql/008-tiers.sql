-- Schema version 8: the read path by tier, each tier clustered by run.
--
-- A question about one run used to scan every run's rows of its span: the
-- tables were keyed by time first, so a week of one run read a week of all
-- of them. Now the raw samples of each completed minute are packed into one
-- block per run (store/block.c), and the minute and hour tiers keep, per run,
-- what a step or a span needs to be answered from them alone. samples stays
-- as the head: the rows of the minute being sampled, which the tick appends.

-- what a sample's rates are over (0: none): the blocks recompute the rates
-- from their counters with it
ALTER TABLE samples ADD COLUMN interval_us INTEGER;
-- the head read a run at a time: a run's page, the compaction
CREATE INDEX samples_run ON samples (run_id, ts);

CREATE TABLE sample_blocks (
        run_id  INTEGER NOT NULL,
        ts      INTEGER NOT NULL,  -- the minute it holds, Unix ms
        n       INTEGER NOT NULL,  -- samples in it
        data    BLOB    NOT NULL,  -- store/block.c, version 1
        PRIMARY KEY (run_id, ts)
) WITHOUT ROWID;
CREATE INDEX sample_blocks_ts ON sample_blocks (ts);

-- One row per run and minute (and per run and hour): enough to merge rows
-- into any longer step exactly as the raw samples would be merged: counts
-- and sums for the averages, maxima, and counters at their last (largest)
-- value. NULL where no sample had the figure.
CREATE TABLE samples_1m_new (
        run_id          INTEGER NOT NULL,
        ts              INTEGER NOT NULL,  -- start of the minute, Unix ms
        samples         INTEGER NOT NULL,
        cpu_pct_n       INTEGER NOT NULL DEFAULT 0,
        cpu_pct_sum     REAL,
        cpu_pct_max     REAL,
        cpu_time_ns     INTEGER,
        user_time_ns    INTEGER,
        system_time_ns  INTEGER,
        rss_n           INTEGER NOT NULL DEFAULT 0,
        rss_sum         REAL,
        rss_max         INTEGER,
        rss_anon_sum    REAL,
        rss_anon_max    INTEGER,
        peak_rss_bytes  INTEGER,
        threads_max     INTEGER,
        processes_max   INTEGER,
        read_bytes      INTEGER,
        write_bytes     INTEGER,
        rchar_bytes     INTEGER,
        wchar_bytes     INTEGER,
        io_rate_n       INTEGER NOT NULL DEFAULT 0,
        read_rate_sum   REAL,
        write_rate_sum  REAL,
        netns_rx_bytes  INTEGER,
        netns_tx_bytes  INTEGER,
        net_rate_n      INTEGER NOT NULL DEFAULT 0,
        rx_rate_sum     REAL,
        tx_rate_sum     REAL,
        gpu_mem_max     INTEGER,
        gpu_util_n      INTEGER NOT NULL DEFAULT 0,
        gpu_util_sum    REAL,
        energy_j        REAL,
        PRIMARY KEY (run_id, ts)
) WITHOUT ROWID;

-- What version 1's minute rows had goes over; the figures they did not keep
-- (user and system time, processes, rchar/wchar, network rates) stay NULL.
INSERT INTO samples_1m_new (run_id, ts, samples, cpu_pct_n, cpu_pct_sum, cpu_pct_max, cpu_time_ns, rss_n, rss_sum,
                            rss_max, rss_anon_max, threads_max, read_bytes, write_bytes, io_rate_n, read_rate_sum,
                            write_rate_sum, netns_rx_bytes, netns_tx_bytes, gpu_mem_max, gpu_util_n, gpu_util_sum,
                            energy_j)
SELECT run_id, ts, samples, CASE WHEN cpu_pct_avg IS NULL THEN 0 ELSE samples END, cpu_pct_avg * samples, cpu_pct_max,
       cpu_time_ns, CASE WHEN rss_bytes_avg IS NULL THEN 0 ELSE samples END, rss_bytes_avg * samples, rss_bytes_max,
       rss_anon_bytes_max, threads_max, read_bytes, write_bytes,
       CASE WHEN read_bytes_per_s_avg IS NULL THEN 0 ELSE samples END, read_bytes_per_s_avg * samples,
       write_bytes_per_s_avg * samples, netns_rx_bytes, netns_tx_bytes, gpu_mem_bytes_max,
       CASE WHEN gpu_util_pct_avg IS NULL THEN 0 ELSE samples END, gpu_util_pct_avg * samples, energy_j
FROM samples_1m;
DROP TABLE samples_1m;
ALTER TABLE samples_1m_new RENAME TO samples_1m;
CREATE INDEX samples_1m_ts ON samples_1m (ts);

CREATE TABLE samples_1h (
        run_id          INTEGER NOT NULL,
        ts              INTEGER NOT NULL,  -- start of the hour, Unix ms
        samples         INTEGER NOT NULL,
        cpu_pct_n       INTEGER NOT NULL DEFAULT 0,
        cpu_pct_sum     REAL,
        cpu_pct_max     REAL,
        cpu_time_ns     INTEGER,
        user_time_ns    INTEGER,
        system_time_ns  INTEGER,
        rss_n           INTEGER NOT NULL DEFAULT 0,
        rss_sum         REAL,
        rss_max         INTEGER,
        rss_anon_sum    REAL,
        rss_anon_max    INTEGER,
        peak_rss_bytes  INTEGER,
        threads_max     INTEGER,
        processes_max   INTEGER,
        read_bytes      INTEGER,
        write_bytes     INTEGER,
        rchar_bytes     INTEGER,
        wchar_bytes     INTEGER,
        io_rate_n       INTEGER NOT NULL DEFAULT 0,
        read_rate_sum   REAL,
        write_rate_sum  REAL,
        netns_rx_bytes  INTEGER,
        netns_tx_bytes  INTEGER,
        net_rate_n      INTEGER NOT NULL DEFAULT 0,
        rx_rate_sum     REAL,
        tx_rate_sum     REAL,
        gpu_mem_max     INTEGER,
        gpu_util_n      INTEGER NOT NULL DEFAULT 0,
        gpu_util_sum    REAL,
        energy_j        REAL,
        PRIMARY KEY (run_id, ts)
) WITHOUT ROWID;
CREATE INDEX samples_1h_ts ON samples_1h (ts);

-- Op slices: the raw 1-second slices stay keyed by time (the tick appends
-- them) with an index by run; the minute tier moves to a run-first key, and
-- an hour tier joins it.
CREATE INDEX op_slices_run ON op_slices (run_id, ts);

CREATE TABLE op_slices_1m_new (
        run_id    INTEGER NOT NULL,
        ts        INTEGER NOT NULL,  -- minute start, Unix ms
        op        TEXT    NOT NULL,
        category  TEXT,
        count     REAL    NOT NULL,
        timings   INTEGER NOT NULL,
        hist      BLOB,
        PRIMARY KEY (run_id, ts, op)
) WITHOUT ROWID;
INSERT INTO op_slices_1m_new SELECT run_id, ts, op, category, count, timings, hist FROM op_slices_1m;
DROP TABLE op_slices_1m;
ALTER TABLE op_slices_1m_new RENAME TO op_slices_1m;
CREATE INDEX op_slices_1m_ts ON op_slices_1m (ts);

CREATE TABLE op_slices_1h (
        run_id    INTEGER NOT NULL,
        ts        INTEGER NOT NULL,  -- hour start, Unix ms
        op        TEXT    NOT NULL,
        category  TEXT,
        count     REAL    NOT NULL,
        timings   INTEGER NOT NULL,
        hist      BLOB,
        PRIMARY KEY (run_id, ts, op)
) WITHOUT ROWID;
CREATE INDEX op_slices_1h_ts ON op_slices_1h (ts);

-- Gauges are read a run at a time too.
CREATE INDEX gauges_run ON gauges (run_id, ts);

-- How far each tier is complete: the head's minutes before compact_until
-- are in blocks and in the minute tier, the hours before hour_until in the
-- hour tier. The compaction starts from the oldest row of each (the head's
-- minutes rolled up before are rolled up again, with the figures the minute
-- tier keeps now); version 1's rollup_until is no longer used.
DELETE FROM meta WHERE key = 'rollup_until';
INSERT INTO meta (key, value) SELECT 'hour_until', min(ts) / 3600000 * 3600000 FROM samples_1m HAVING count(*) > 0;

-- Schema version 12: the raw tier's blocks and the tiers' rows, compact.
--
-- A sample block becomes a row of a rowid table. In a WITHOUT ROWID table a
-- row keeps at most about a quarter of a page (1 002 bytes of 4 096) in its
-- b-tree page and puts the rest on an overflow page of its own: a busy run's
-- minute (about 1.6 KB) took a whole 4 KiB overflow page for its last
-- 1.1 KB, and the blocks' pages were 2.5 times their data. A rowid table's
-- leaf keeps up to 4 061 bytes of a row, and its rows are appended at the
-- end in the order the compaction writes them, so its pages fill up; the key
-- by run is an index beside it.
CREATE TABLE sample_blocks_new (
        run_id  INTEGER NOT NULL,
        ts      INTEGER NOT NULL,  -- the minute it holds, Unix ms
        n       INTEGER NOT NULL,  -- samples in it
        data    BLOB    NOT NULL   -- store/block.c
);
INSERT INTO sample_blocks_new (run_id, ts, n, data) SELECT run_id, ts, n, data FROM sample_blocks ORDER BY ts, run_id;
DROP TABLE sample_blocks;
ALTER TABLE sample_blocks_new RENAME TO sample_blocks;
CREATE UNIQUE INDEX sample_blocks_run ON sample_blocks (run_id, ts);
CREATE INDEX sample_blocks_ts ON sample_blocks (ts);

-- A row of the minute and hour tiers holds its 39 figures in one blob
-- (store/tier.c, sample_agg_pack()): reading a week of minutes (10 080 rows)
-- stepped SQLite through 39 columns a row, most of the time of the answer.
-- tier_pack() is mlmond's own function, there while it migrates; the two
-- tiers have the same columns.
CREATE TEMP TABLE packed AS
SELECT tier, run_id, ts,
       tier_pack(samples, cpu_pct_n, cpu_pct_sum, cpu_pct_max, cpu_time_ns, user_time_ns, system_time_ns,
                 rss_n, rss_sum, rss_max, rss_anon_sum, rss_anon_max, peak_rss_bytes, threads_max, processes_max,
                 read_bytes, write_bytes, rchar_bytes, wchar_bytes, io_rate_n, read_rate_sum, write_rate_sum,
                 netns_rx_bytes, netns_tx_bytes, net_rate_n, rx_rate_sum, tx_rate_sum, gpu_mem_max, gpu_util_n,
                 gpu_util_sum, energy_j, pss_n, pss_sum, pss_max, uss_sum, uss_max, pss_anon_n, pss_anon_sum,
                 pss_anon_max) AS agg
FROM (SELECT 'm' AS tier, * FROM samples_1m UNION ALL SELECT 'h', * FROM samples_1h);
DROP TABLE samples_1m;
DROP TABLE samples_1h;
CREATE TABLE samples_1m (run_id INTEGER NOT NULL, ts INTEGER NOT NULL, agg BLOB NOT NULL, PRIMARY KEY (run_id, ts))
        WITHOUT ROWID; -- ts: the minute's start, Unix ms
CREATE TABLE samples_1h (run_id INTEGER NOT NULL, ts INTEGER NOT NULL, agg BLOB NOT NULL, PRIMARY KEY (run_id, ts))
        WITHOUT ROWID; -- ts: the hour's start
INSERT INTO samples_1m SELECT run_id, ts, agg FROM packed WHERE tier = 'm';
INSERT INTO samples_1h SELECT run_id, ts, agg FROM packed WHERE tier = 'h';
DROP TABLE packed;
CREATE INDEX samples_1m_ts ON samples_1m (ts);
CREATE INDEX samples_1h_ts ON samples_1h (ts);

-- Schema version 14: the head's figures in one column.
--
-- A head row (samples: the rows of the minutes not compacted yet) had a
-- column for each of its 26 figures, and SQLite stepped through all of them
-- on every insert (one row per run a tick) and again when the compaction
-- read the minute back. At 1 000 runs sampled every second, storing a
-- sample took 3.2 us of the 22 us a sample cost, and the compaction 3.6 us
-- a sample; with the figures packed into data, 1.2 and 2.3 us
-- (tests/bench/cost.py under perf). data is packed as a tier row is
-- (store/head.c, through store/pack.c: which flags are set, which figures
-- are not 0, then those); head_pack() is mlmond's own function, there
-- while it migrates. The unused gpu column (sql/007) goes with the rest.
CREATE TABLE samples_packed (
        ts      INTEGER NOT NULL,  -- Unix ms
        run_id  INTEGER NOT NULL,
        data    BLOB    NOT NULL,  -- store/head.c
        PRIMARY KEY (ts, run_id)
) WITHOUT ROWID;
INSERT INTO samples_packed (ts, run_id, data)
SELECT ts, run_id,
       head_pack(cpu_pct, cpu_time_ns, user_time_ns, system_time_ns, rss_bytes, rss_anon_bytes, peak_rss_bytes,
                 threads, processes, read_bytes, write_bytes, rchar_bytes, wchar_bytes, read_bytes_per_s,
                 write_bytes_per_s, netns_rx_bytes, netns_tx_bytes, netns_rx_bytes_per_s, netns_tx_bytes_per_s,
                 gpu_mem_bytes, gpu_util_pct, energy_j, interval_us, pss_bytes, uss_bytes, pss_anon_bytes)
FROM samples;
DROP TABLE samples;
ALTER TABLE samples_packed RENAME TO samples;

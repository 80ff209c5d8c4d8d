-- mlmond schema, version 1.
-- Runs are few and updated every tick (their running totals); samples are
-- many and append-only, clustered by time: the key starts with ts so each
-- tick appends to the right edge of the b-tree (about 1 us/row, measured; a
-- key starting with run_id costs 10x more).

CREATE TABLE runs (
        id               INTEGER PRIMARY KEY,
        pid              INTEGER NOT NULL,
        start_time_ticks INTEGER NOT NULL,   -- /proc/PID/stat field 22
        boot_id          TEXT    NOT NULL,
        uid              INTEGER,
        name             TEXT,
        comm             TEXT,
        cmdline          TEXT,
        tags             TEXT    NOT NULL DEFAULT '{}',   -- JSON object
        interval_ms      INTEGER NOT NULL,
        children         INTEGER NOT NULL DEFAULT 0,
        state            TEXT    NOT NULL CHECK (state IN ('running', 'exited', 'unregistered')),
        registered_ts    INTEGER NOT NULL,   -- Unix ms
        ended_ts         INTEGER,
        -- running totals since registration, refreshed each tick
        last_ts          INTEGER,
        samples          INTEGER NOT NULL DEFAULT 0,
        cpu_time_ns      INTEGER NOT NULL DEFAULT 0,
        user_time_ns     INTEGER NOT NULL DEFAULT 0,
        system_time_ns   INTEGER NOT NULL DEFAULT 0,
        peak_rss_bytes   INTEGER,
        final_rss_bytes  INTEGER,
        threads_max      INTEGER,
        read_bytes       INTEGER,
        write_bytes      INTEGER,
        netns_rx_bytes   INTEGER,
        netns_tx_bytes   INTEGER
);
CREATE INDEX runs_state ON runs (state);

CREATE TABLE samples (
        ts                     INTEGER NOT NULL,  -- Unix ms
        run_id                 INTEGER NOT NULL,
        cpu_pct                REAL,
        cpu_time_ns            INTEGER,
        user_time_ns           INTEGER,
        system_time_ns         INTEGER,
        rss_bytes              INTEGER,
        rss_anon_bytes         INTEGER,
        peak_rss_bytes         INTEGER,
        threads                INTEGER,
        processes              INTEGER,
        read_bytes             INTEGER,
        write_bytes            INTEGER,
        rchar_bytes            INTEGER,
        wchar_bytes            INTEGER,
        read_bytes_per_s       REAL,
        write_bytes_per_s      REAL,
        netns_rx_bytes         INTEGER,
        netns_tx_bytes         INTEGER,
        netns_rx_bytes_per_s   REAL,
        netns_tx_bytes_per_s   REAL,
        gpu_mem_bytes          INTEGER,
        gpu_util_pct           REAL,
        PRIMARY KEY (ts, run_id)
) WITHOUT ROWID;

-- One row per run per minute: averages of rates, maxima of gauges, last
-- values of counters. Kept for retention_rollup (90 d by default).
CREATE TABLE samples_1m (
        ts                     INTEGER NOT NULL,  -- start of the minute, Unix ms
        run_id                 INTEGER NOT NULL,
        samples                INTEGER NOT NULL,
        cpu_pct_avg            REAL,
        cpu_pct_max            REAL,
        cpu_time_ns            INTEGER,
        rss_bytes_avg          REAL,
        rss_bytes_max          INTEGER,
        rss_anon_bytes_max     INTEGER,
        threads_max            INTEGER,
        read_bytes             INTEGER,
        write_bytes            INTEGER,
        read_bytes_per_s_avg   REAL,
        write_bytes_per_s_avg  REAL,
        netns_rx_bytes         INTEGER,
        netns_tx_bytes         INTEGER,
        gpu_mem_bytes_max      INTEGER,
        gpu_util_pct_avg       REAL,
        PRIMARY KEY (ts, run_id)
) WITHOUT ROWID;

-- Bookkeeping: how far rollups have been computed.
CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT
) WITHOUT ROWID;

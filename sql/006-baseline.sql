-- Schema version 6: each run's baseline.

-- The kernel's counters are absolute: the counters of the run's processes at
-- registration let a restarted mlmond count what they used while it was down.
-- One row per process of the run at registration (one for a run without
-- children). NULL I/O: /proc/PID/io was unreadable.
CREATE TABLE run_baseline (
        run_id           INTEGER NOT NULL,
        pid              INTEGER NOT NULL,
        start_time_ticks INTEGER NOT NULL,  -- /proc/PID/stat field 22
        cpu_ns           INTEGER NOT NULL,
        utime_ticks      INTEGER NOT NULL,
        stime_ticks      INTEGER NOT NULL,
        read_bytes       INTEGER,
        write_bytes      INTEGER,
        rchar_bytes      INTEGER,
        wchar_bytes      INTEGER,
        PRIMARY KEY (run_id, pid, start_time_ticks)
) WITHOUT ROWID;

-- What the run's processes that have exited used since registration (their
-- counters when last seen less their baseline), for runs with children.
ALTER TABLE runs ADD COLUMN left_cpu_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN left_utime_ticks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN left_stime_ticks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN left_read_bytes INTEGER;
ALTER TABLE runs ADD COLUMN left_write_bytes INTEGER;
ALTER TABLE runs ADD COLUMN left_rchar_bytes INTEGER;
ALTER TABLE runs ADD COLUMN left_wchar_bytes INTEGER;

-- The network namespaces the run's processes are in, with their counters
-- (every interface but lo) when the run first saw them there; and what the
-- namespaces the run has left carried meanwhile.
CREATE TABLE run_netns (
        run_id           INTEGER NOT NULL,
        inode            INTEGER NOT NULL,
        rx_bytes         INTEGER NOT NULL,
        tx_bytes         INTEGER NOT NULL,
        PRIMARY KEY (run_id, inode)
) WITHOUT ROWID;
ALTER TABLE runs ADD COLUMN left_netns_rx_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN left_netns_tx_bytes INTEGER NOT NULL DEFAULT 0;

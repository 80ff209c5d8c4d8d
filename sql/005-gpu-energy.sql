-- Schema version 5: accelerators and energy.

-- Per sample: the run's estimated energy since registration (J) and its use of
-- each device as JSON: [{"device","driver","estimated","clients","mem_bytes",
-- "util_pct","engines":{name:pct},"regions":{name:bytes}}, ...] (NULL: none).
ALTER TABLE samples ADD COLUMN energy_j REAL;
ALTER TABLE samples ADD COLUMN gpu TEXT;
ALTER TABLE samples_1m ADD COLUMN energy_j REAL;

-- The summary's accelerator and energy totals.
ALTER TABLE runs ADD COLUMN peak_gpu_mem_bytes INTEGER;
ALTER TABLE runs ADD COLUMN gpu_util_samples INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN gpu_util_sum_pct REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN energy_j REAL;

-- Each device's counters every [gpu] device_interval (GPUs, NPUs, and the CPU
-- package as device "package" of kind "cpu"); raw retention applies.
CREATE TABLE device_samples (
        ts               INTEGER NOT NULL,  -- Unix ms
        device           TEXT    NOT NULL,  -- PCI address, node name, or "package"
        kind             TEXT    NOT NULL,  -- gpu | npu | cpu
        driver           TEXT,
        busy_pct         REAL,
        mem_used_bytes   INTEGER,
        mem_total_bytes  INTEGER,
        power_w          REAL,
        energy_j         REAL,              -- accumulated since the daemon began watching
        temp_c           REAL,
        freq_mhz         REAL,
        detail           TEXT,              -- JSON: the rest (GTs, GTT, max frequency, ...)
        PRIMARY KEY (ts, device)
) WITHOUT ROWID;

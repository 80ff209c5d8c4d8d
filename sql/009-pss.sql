-- Schema version 9: a tree's memory with each shared page counted once.

-- The sums of the members' /proc/PID/smaps_rollup: Pss, Private_Clean +
-- Private_Dirty (the USS) and Pss_Anon, read every pss_interval for tree
-- runs; NULL in the samples between two readings and for runs of one
-- process.
ALTER TABLE samples ADD COLUMN pss_bytes INTEGER;
ALTER TABLE samples ADD COLUMN uss_bytes INTEGER;
ALTER TABLE samples ADD COLUMN pss_anon_bytes INTEGER;

-- The tiers keep their count, sum and maximum, as of RSS.
ALTER TABLE samples_1m ADD COLUMN pss_n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples_1m ADD COLUMN pss_sum REAL;
ALTER TABLE samples_1m ADD COLUMN pss_max INTEGER;
ALTER TABLE samples_1m ADD COLUMN uss_sum REAL;
ALTER TABLE samples_1m ADD COLUMN uss_max INTEGER;
ALTER TABLE samples_1m ADD COLUMN pss_anon_n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples_1m ADD COLUMN pss_anon_sum REAL;
ALTER TABLE samples_1m ADD COLUMN pss_anon_max INTEGER;
ALTER TABLE samples_1h ADD COLUMN pss_n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples_1h ADD COLUMN pss_sum REAL;
ALTER TABLE samples_1h ADD COLUMN pss_max INTEGER;
ALTER TABLE samples_1h ADD COLUMN uss_sum REAL;
ALTER TABLE samples_1h ADD COLUMN uss_max INTEGER;
ALTER TABLE samples_1h ADD COLUMN pss_anon_n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE samples_1h ADD COLUMN pss_anon_sum REAL;
ALTER TABLE samples_1h ADD COLUMN pss_anon_max INTEGER;

-- The summary: the highest PSS read, and the last reading's PSS and USS.
ALTER TABLE runs ADD COLUMN peak_pss_bytes INTEGER;
ALTER TABLE runs ADD COLUMN final_pss_bytes INTEGER;
ALTER TABLE runs ADD COLUMN final_uss_bytes INTEGER;

-- Schema version 2: GET /v1/runs?pid=N and the restore-at-start lookup
-- filter runs by pid; without an index that is a scan of every run ever
-- registered (runs are kept until deleted).
CREATE INDEX runs_pid ON runs (pid, start_time_ticks);

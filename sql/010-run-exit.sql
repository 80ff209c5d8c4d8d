-- Schema version 10: how a run's process ended.

-- Where mlmond could see it: the exit status of /proc/PID/stat (field 52)
-- read while the process was a zombie, or what its parent (mlmonctl run)
-- handed over. An exit leaves exit_code set, a fatal signal exit_signal;
-- both NULL: not known (the parent reaped it first, the run was
-- unregistered, or it ended while mlmond was down).
ALTER TABLE runs ADD COLUMN exit_code INTEGER;
ALTER TABLE runs ADD COLUMN exit_signal INTEGER;

/* SPDX-License-Identifier: MIT */
/* [storage] ended_runs_per_uid: a user's ended runs past the newest N are
 * deleted, oldest first, with every row they hold. max_runs_per_uid bounds
 * what one user can have running, and the time retention what each run
 * keeps; without this, a user who registers and ends processes in a loop
 * grows the runs table, the database and every list of runs for good. A
 * running run is never deleted, and a run that is kept keeps all its data
 * (until the time retention takes it), queryable by id. */
#include "store/compact.h"

#include <errno.h>

#include "store/param.h"

/* The tables that hold a run's rows and find them by an index that starts
 * with run_id (a run's delete reads its rows, no table). sample_gpu and
 * sample_gpu_parts have none (their keys start with ts): their rows of a
 * deleted run go with the raw retention, like everyone's. */
static const char *const run_tables[] = {
        "samples", "sample_blocks", "samples_1m",  "samples_1h", "op_slices",    "op_slices_1m", "op_slices_1h",
        "gauges",  "marks",         "leak_events", "run_leak",   "run_baseline", "run_netns",
};

/* The ended runs past the newest per_uid of their owner's, oldest first. */
#define PRUNE_SELECT                                                                                       \
        "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY uid ORDER BY id DESC) AS k FROM runs " \
        "WHERE state != 'running') WHERE k > ?1 ORDER BY id LIMIT ?2"

static int delete_run(struct store *s, int64_t id) {
        char sql[96];
        for (size_t i = 0; i < ELEMENTSOF(run_tables); i++) {
                snprintf(sql, sizeof sql, "DELETE FROM %s WHERE run_id = ?", run_tables[i]);
                int r = store_exec(s, sql, PARAMS(p_int(id)));
                if (r < 0)
                        return r;
        }
        return store_exec(s, "DELETE FROM runs WHERE id = ? AND state != 'running'", PARAMS(p_int(id)));
}

int store_prune_ended_runs(struct store *s, unsigned per_uid, unsigned batch, unsigned *ret_deleted) {
        int64_t ids[STORE_PRUNE_BATCH_MAX];
        size_t n = 0;
        *ret_deleted = 0;
        if (per_uid == 0)
                return 0;
        if (batch > STORE_PRUNE_BATCH_MAX)
                batch = STORE_PRUNE_BATCH_MAX;
        {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                if (sqlite3_prepare_v2(store_writer(s), PRUNE_SELECT, -1, &st, NULL) != SQLITE_OK)
                        return log_warning_errno(EIO, "retention of ended runs: %s", sqlite3_errmsg(store_writer(s)));
                bind_params(st, PARAMS(p_int(per_uid), p_int(batch)));
                while (n < batch && sqlite3_step(st) == SQLITE_ROW)
                        ids[n++] = sqlite3_column_int64(st, 0);
        }
        /* a run a transaction: each pass stays short, and a failure loses
         * no half of a run */
        for (size_t i = 0; i < n; i++) {
                if (store_begin(s) < 0)
                        return -EIO;
                if (delete_run(s, ids[i]) < 0) {
                        store_rollback(s);
                        return log_warning_errno(EIO, "retention of ended runs: cannot delete run %lld",
                                                 (long long)ids[i]);
                }
                if (store_commit(s) < 0)
                        return -EIO;
                (*ret_deleted)++;
        }
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include "store-util.h"

#include <stdio.h>
#include <stdlib.h>

int64_t db_scalar(sqlite3 *db, const char *sql) {
        sqlite3_stmt *st = NULL;
        int64_t v = -1;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

struct store *test_store_open(const char *dir, const char *name) {
        char path[512], err[256];
        struct store *s = NULL;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (store_open(path, false, &s, err, sizeof err) < 0)
                fprintf(stderr, "%s: %s\n", path, err);
        return s;
}

int64_t test_store_add_run(struct store *s, int pid, int64_t registered_ts_ms) {
        struct run_info ri = { .pid = pid,
                               .start_time_ticks = 1,
                               .interval_ms = 1000,
                               .state = RUN_RUNNING,
                               .registered_ts_ms = registered_ts_ms };
        snprintf(ri.boot_id, sizeof ri.boot_id, "boot");
        if (store_insert_run(s, &ri) < 0) {
                fprintf(stderr, "store_insert_run failed\n");
                return -1;
        }
        return ri.id;
}

void test_scratch_remove(const char *dir) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", dir);
}

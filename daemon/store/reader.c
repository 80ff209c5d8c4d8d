/* SPDX-License-Identifier: MIT */
/* The reader connection's queries under a time budget, and the one row
 * reader every query of the store uses. */
#include "store/reader.h"

#include <errno.h>
#include <time.h>

static int progress(void *userdata) {
        struct budget *b = userdata;
        return now_usec(CLOCK_MONOTONIC) > b->deadline; /* nonzero interrupts */
}

/* Installs the time budget on the reader for the duration of one query. */
sqlite3 *reader_begin(struct store *s, const struct query_limits *l, struct budget *b) {
        sqlite3 *db = store_reader(s);
        b->deadline = now_usec(CLOCK_MONOTONIC) + l->timeout_usec;
        sqlite3_progress_handler(db, 1000, progress, b);
        return db;
}

void reader_end(struct store *s) {
        sqlite3_progress_handler(store_reader(s), 0, NULL, NULL);
}

int step_error(sqlite3 *db, int rc) {
        if (rc == SQLITE_INTERRUPT)
                return -ETIMEDOUT;
        log_warning("query failed: %s", sqlite3_errmsg(db));
        return -EIO;
}

/* Prepares sql on the reader: 0 or -EIO. */
int reader_prepare(struct store *s, sqlite3 *db, const char *sql, sqlite3_stmt **ret) {
        return store_reader_prepare(s, sql, ret) == SQLITE_OK ? 0 : step_error(db, SQLITE_ERROR);
}

/* Steps st once: 1 with a row, 0 without, or -ETIMEDOUT / -EIO. */
int step_one(sqlite3 *db, sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                return 1;
        return rc == SQLITE_DONE ? 0 : step_error(db, rc);
}

/* Reads row i of st; 0, or a negative errno that stops the reading. */

/* The one row reader: steps st to its end under the reader's time budget,
 * calling row() on each row. max_rows > 0: a row beyond them stops the
 * reading and sets *ret_truncated (when not NULL). *ret_n: the rows row()
 * took, also on error (for the caller to free). Returns 0, row()'s error,
 * -ETIMEDOUT or -EIO. */
int read_rows(sqlite3 *db, sqlite3_stmt *st, size_t max_rows, row_fn row, void *userdata, size_t *ret_n,
              bool *ret_truncated) {
        size_t n = 0;
        int rc, r = 0;
        if (ret_truncated)
                *ret_truncated = false;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (max_rows > 0 && n == max_rows) {
                        if (ret_truncated)
                                *ret_truncated = true;
                        break;
                }
                r = row(st, n, userdata);
                if (r < 0)
                        break;
                n++;
        }
        *ret_n = n;
        if (r < 0)
                return r;
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : step_error(db, rc);
}

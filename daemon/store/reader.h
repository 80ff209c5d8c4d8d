/* SPDX-License-Identifier: MIT */
/* What the store's read-only questions share (query.c, raw.c, querier.c):
 * the time budget on the reader connection, preparing from its cache, and
 * stepping rows with the errors mapped to -ETIMEDOUT and -EIO. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

#include "util.h"
#include "store/store.h"

struct budget {
        usec_t deadline;
};

/* Installs the time budget of l on the reader for the duration of one
 * question (reader_end() removes it); returns the reader. */
sqlite3 *reader_begin(struct store *s, const struct query_limits *l, struct budget *b);
void reader_end(struct store *s);

/* An SQLite result code as -ETIMEDOUT (the budget ran out) or -EIO (logged). */
int step_error(sqlite3 *db, int rc);
/* Prepares sql (a string constant) on the reader, from its cache: 0 or -EIO. */
int reader_prepare(struct store *s, sqlite3 *db, const char *sql, sqlite3_stmt **ret);
/* Steps st once: 1 with a row, 0 without, or -ETIMEDOUT / -EIO. */
int step_one(sqlite3 *db, sqlite3_stmt *st);

/* Reads row i of st; 0, or a negative errno that stops the reading. */
typedef int (*row_fn)(sqlite3_stmt *st, size_t i, void *userdata);
/* The one row reader: steps st to its end under the reader's time budget,
 * calling row() on each row. max_rows > 0: a row beyond them stops the
 * reading and sets *ret_truncated (when not NULL). *ret_n: the rows row()
 * took, also on error (for the caller to free). Returns 0, row()'s error,
 * -ETIMEDOUT or -EIO. */
int read_rows(sqlite3 *db, sqlite3_stmt *st, size_t max_rows, row_fn row, void *userdata, size_t *ret_n,
              bool *ret_truncated);

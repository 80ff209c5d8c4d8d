/* SPDX-License-Identifier: MIT */
/* What the store's tests share: a scalar of a query, a store opened in a
 * scratch folder, a run to hang rows on, the folder's removal. They say what failed on stderr and
 * leave the checking to the test (tap.h counts a file's own checks). */
#pragma once

#include <sqlite3.h>
#include <stdint.h>

#include "store/store.h"

/* The first column of sql's first row as an integer; -1 if there is none. */
int64_t db_scalar(sqlite3 *db, const char *sql);
/* The store in dir/name, opened; NULL if it could not be. */
struct store *test_store_open(const char *dir, const char *name);
/* A running run of pid registered at registered_ts_ms: its id, or -1 if it
 * could not be stored. */
int64_t test_store_add_run(struct store *s, int pid, int64_t registered_ts_ms);
/* Removes the scratch folder dir and all in it (rm -rf); says so on stderr
 * if it cannot. */
void test_scratch_remove(const char *dir);

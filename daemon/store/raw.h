/* SPDX-License-Identifier: MIT */
/* A run's raw samples over a span, in time order: the blocks of the minutes
 * compacted already, then the head's rows (the minute being sampled). A row
 * of the head older than a block's last sample (the wall clock stepped
 * back) is left out until the next compaction merges it into its block. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "collect/sample.h"
#include "store/store.h"

/* One sample: 0 goes on, > 0 stops the reading (raw_samples() returns
 * it), < 0 is an error that stops it too. */
typedef int (*raw_fn)(const struct sample *s, void *userdata);

/* The samples of run_id with ts in [from, until], oldest first (newest
 * first with newest_first), through db (the reader, or the writer inside
 * its transaction). Returns 0 at the end, what fn stopped with, -EBADMSG
 * for a block that does not decode (logged), -ENOMEM, -ETIMEDOUT or -EIO. */
int raw_samples(struct store *s, sqlite3 *db, int64_t run_id, int64_t from, int64_t until, bool newest_first, raw_fn fn,
                void *userdata);

/* Folds the run's samples newer than its stored totals into them (after an
 * unclean stop the totals row lags the samples by a few ticks). */
int store_catch_up_totals(struct store *s, struct run_info *ri);

/* The run's sample taken at ts_ms (writer connection); -ENOENT if none. */
int store_load_sample(struct store *s, int64_t run_id, int64_t ts_ms, struct sample *ret);

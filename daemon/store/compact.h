/* SPDX-License-Identifier: MIT */
/* The store's upkeep, one bounded pass at a time (the manager's maintenance
 * calls them): completed minutes of the head packed into blocks and rolled
 * into the minute tier, completed hours into the hour tier, and data past
 * its retention deleted. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* The minutes before now_ms's that the head still holds (a few at most per
 * pass), then the hours the minute tier completed. *ret_more: more is
 * waiting (a daemon that was down for a while catches up over several
 * passes instead of stalling one). 0 or -EIO (rolled back, logged). */
int store_compact(struct store *s, int64_t now_ms, bool *ret_more);

/* Deletes at most `batch` rows past the retention (store_set_retention()),
 * each table's in a transaction of its own. *ret_deleted == batch: more
 * remain. */
int store_retention(struct store *s, int64_t now_ms, unsigned batch, unsigned *ret_deleted);

/* [storage] ended_runs_per_uid: deletes, with all their rows, at most
 * batch (up to STORE_PRUNE_BATCH_MAX) of the ended runs past the newest
 * per_uid of their owner's (uid), oldest first, a run a transaction
 * (prune.c). per_uid 0: none. *ret_deleted == batch: more remain. 0 or
 * -EIO (logged; the runs deleted before it stay deleted). */
#define STORE_PRUNE_BATCH_MAX 256
int store_prune_ended_runs(struct store *s, unsigned per_uid, unsigned batch, unsigned *ret_deleted);

/* How far the tiers are complete: the minute tier (and the blocks) before
 * *ret_minutes, the hour tier before *ret_hours (0: nothing yet). */
int store_tiers_until(struct store *s, sqlite3 *db, int64_t *ret_minutes, int64_t *ret_hours);

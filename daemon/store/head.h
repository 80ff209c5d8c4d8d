/* SPDX-License-Identifier: MIT */
/* The head: the samples of the minutes not compacted yet, one row each in
 * samples (ts, run_id, data), keyed by time, then run. data holds the
 * sample's figures packed (store/pack.h): SQLite steps through one column
 * where it stepped through 26 on every tick's insert and again on the
 * compaction's read (sql/014 has what that cost). */
#pragma once

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/sample.h"
#include "store/pack.h"

#define HEAD_FIELDS 26
#define HEAD_PACKED_MAX PACK_MAX(HEAD_FIELDS)

/* m's figures (all but its time, the row's key) into buf: their length. */
size_t head_pack(const struct sample *m, uint8_t buf[static HEAD_PACKED_MAX]);
/* The sample of a head row: its time and its data. -EBADMSG for anything
 * head_pack() did not write (then *ret is left as it was). */
int head_unpack(int64_t ts, const void *data, size_t len, struct sample *ret);
/* The SQL function head_pack(<the 26 figures' columns of version 13's
 * samples>) of the migration to version 14, on db. */
int head_register_pack(sqlite3 *db);

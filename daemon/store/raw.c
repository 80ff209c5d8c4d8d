/* SPDX-License-Identifier: MIT */
#include "store/raw.h"

#include <errno.h>
#include <stdlib.h>

#include "store/block.h"
#include "store/param.h"
#include "store/reader.h"

#define MINUTE_MS 60000

/* sql prepared on db: from the reader's cache, or once on the writer
 * (*owned: finalize it). */
static int raw_prepare(struct store *s, sqlite3 *db, const char *sql, sqlite3_stmt **ret, bool *owned) {
        *owned = db != store_reader(s);
        int rc = *owned ? sqlite3_prepare_v2(db, sql, -1, ret, NULL) : store_reader_prepare(s, sql, ret);
        return rc == SQLITE_OK ? 0 : step_error(db, rc);
}

static void raw_release(sqlite3_stmt *st, bool owned) {
        if (!st)
                return;
        if (owned)
                sqlite3_finalize(st);
        else {
                sqlite3_reset(st);
                sqlite3_clear_bindings(st);
        }
}

struct walk {
        int64_t from, until;
        bool newest_first;
        int64_t last; /* ts of the last sample handed on: the next must be past it */
        raw_fn fn;
        void *userdata;
};

/* Hands s on if it lies in the span and past the last one: 0 or fn's. */
static int walk_one(struct walk *w, const struct sample *s) {
        if (s->ts_ms < w->from || s->ts_ms > w->until)
                return 0;
        if (w->newest_first ? s->ts_ms >= w->last : s->ts_ms <= w->last)
                return 0;
        w->last = s->ts_ms;
        return w->fn(s, w->userdata);
}

/* Each row of asc (desc when walking back) for run_id in [from,
 * w->until], through row(): 0 or what stopped the walk. */
static int walk_rows(struct store *s, sqlite3 *db, const char *asc, const char *desc, int64_t run_id, int64_t from,
                     struct walk *w, int (*row)(sqlite3_stmt *st, int64_t run_id, struct walk *w)) {
        sqlite3_stmt *st = NULL;
        bool owned;
        int r = raw_prepare(s, db, w->newest_first ? desc : asc, &st, &owned);
        if (r < 0)
                return r;
        bind_params(st, PARAMS(p_int(run_id), p_int(from), p_int(w->until)));
        while (r == 0 && (r = step_one(db, st)) == 1)
                r = row(st, run_id, w);
        raw_release(st, owned);
        return r;
}

static int block_row(sqlite3_stmt *st, int64_t run_id, struct walk *w) {
        struct sample *v = NULL;
        size_t n = 0;
        int r = block_decode(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &v, &n);
        if (r == -EBADMSG)
                log_warning("store: run %lld: the block of minute %lld does not decode; its samples are left out",
                            (long long)run_id, (long long)sqlite3_column_int64(st, 1));
        for (size_t i = 0; i < n && r == 0; i++)
                r = walk_one(w, &v[w->newest_first ? n - 1 - i : i]);
        free(v);
        return r;
}

static int walk_blocks(struct store *s, sqlite3 *db, int64_t run_id, struct walk *w) {
        static const char asc[] =
                "SELECT data, ts FROM sample_blocks WHERE run_id=?1 AND ts>=?2 AND ts<=?3 ORDER BY ts";
        static const char desc[] =
                "SELECT data, ts FROM sample_blocks WHERE run_id=?1 AND ts>=?2 AND ts<=?3 ORDER BY ts DESC";
        /* a block is keyed by its minute: the one holding from starts before it */
        int64_t first_minute = w->from >= 0 ? w->from / MINUTE_MS * MINUTE_MS : w->from;
        return walk_rows(s, db, asc, desc, run_id, first_minute, w, block_row);
}

static int head_row(sqlite3_stmt *st, int64_t run_id, struct walk *w) {
        struct sample m;
        if (store_row_to_sample(st, 0, &m) < 0) {
                log_warning("store: run %lld: the head row of %lld does not unpack; it is left out", (long long)run_id,
                            (long long)sqlite3_column_int64(st, 0));
                return 0;
        }
        return walk_one(w, &m);
}

/* A run's head rows: for each time the head holds (head_ticks), the row of
 * that time and run by the table's key; the head has no index by run
 * (sql/013). */
static int walk_head(struct store *s, sqlite3 *db, int64_t run_id, struct walk *w) {
        static const char asc[] = "SELECT " STORE_SAMPLE_COLUMNS " FROM samples WHERE run_id=?1 AND ts IN "
                                  "(SELECT ts FROM head_ticks WHERE ts>=?2 AND ts<=?3) ORDER BY ts";
        static const char desc[] = "SELECT " STORE_SAMPLE_COLUMNS " FROM samples WHERE run_id=?1 AND ts IN "
                                   "(SELECT ts FROM head_ticks WHERE ts>=?2 AND ts<=?3) ORDER BY ts DESC";
        return walk_rows(s, db, asc, desc, run_id, w->from, w, head_row);
}

int raw_samples(struct store *s, sqlite3 *db, int64_t run_id, int64_t from, int64_t until, bool newest_first, raw_fn fn,
                void *userdata) {
        struct walk w = { .from = from,
                          .until = until,
                          .newest_first = newest_first,
                          .last = newest_first ? INT64_MAX : INT64_MIN,
                          .fn = fn,
                          .userdata = userdata };
        if (from > until)
                return 0;
        /* the head is the newest: first when walking back */
        int r = newest_first ? walk_head(s, db, run_id, &w) : walk_blocks(s, db, run_id, &w);
        if (r == 0)
                r = newest_first ? walk_blocks(s, db, run_id, &w) : walk_head(s, db, run_id, &w);
        return r;
}

static int add_to_totals(const struct sample *s, void *userdata) {
        run_totals_add(userdata, s);
        return 0;
}

int store_catch_up_totals(struct store *s, struct run_info *ri) {
        int r = store_flush(s); /* the samples of this transaction, read back */
        if (r == 0)
                r = raw_samples(s, store_writer(s), ri->id, ri->totals.last_ts_ms + 1, INT64_MAX, false, add_to_totals,
                                &ri->totals);
        return r < 0 ? r : 0;
}

static int take_first(const struct sample *s, void *userdata) {
        *(struct sample *)userdata = *s;
        return 1;
}

int store_load_sample(struct store *s, int64_t run_id, int64_t ts_ms, struct sample *ret) {
        int r = store_flush(s); /* the samples of this transaction, read back */
        if (r == 0)
                r = raw_samples(s, store_writer(s), run_id, ts_ms, ts_ms, false, take_first, ret);
        return r < 0 ? r : r == 0 ? -ENOENT : 0;
}

/* SPDX-License-Identifier: MIT */
/* A pass of compaction, in one transaction:
 *
 *   1. each run's head rows of the completed minutes, read for a batch of
 *      runs at a time in the head's own order, become one block per minute
 *      and one row of the minute tier; a late row (the wall clock stepped
 *      back into a minute compacted already) is merged into its block;
 *   2. those head rows are deleted, and their times from head_ticks;
 *   3. the op slices of the same minutes are merged per run and op into
 *      the minute tier (the raw slices stay: they are the 1-second tier);
 *
 * then each hour the minute tier completed is rolled into the hour tier, a
 * run at a time, an hour a transaction. */
#include "store/compact.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/histogram.h"
#include "analyze/ops.h"
#include "store/block.h"
#include "store/param.h"
#include "store/tier.h"

#define MINUTE_MS 60000
#define HOUR_MS (60 * MINUTE_MS)
/* A pass compacts at most this much of the head: minutes of 4 000 runs at
 * 1 s are 240 000 rows each, and the pass must end well before the next
 * tick is due; a daemon that was down catches up pass by pass. */
#define COMPACT_MAX_SPAN_MS (5 * MINUTE_MS)
/* and rolls at most this many hours */
#define COMPACT_MAX_HOURS 4

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **ret) {
        if (sqlite3_prepare_v2(db, sql, -1, ret, NULL) != SQLITE_OK)
                return log_warning_errno(EIO, "compact: %s (%s)", sqlite3_errmsg(db), sql);
        return 0;
}

static int done_step(sqlite3 *db, sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE)
                return log_warning_errno(EIO, "compact: %s", sqlite3_errmsg(db));
        return 0;
}

static int meta_get_i64(sqlite3 *db, const char *key, int64_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (prepare(db, "SELECT value FROM meta WHERE key=?", &st) < 0)
                return -EIO;
        bind_params(st, PARAMS(p_text(key)));
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE || (rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_NULL))
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return -EIO;
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

static int meta_set_i64(sqlite3 *db, const char *key, int64_t v) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (prepare(db, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", &st) < 0)
                return -EIO;
        bind_params(st, PARAMS(p_text(key), p_int(v)));
        return done_step(db, st);
}

int store_tiers_until(struct store *s, sqlite3 *db, int64_t *ret_minutes, int64_t *ret_hours) {
        int64_t m = 0, h = 0;
        int r = meta_get_i64(db, "compact_until", &m);
        if (r == 0 || r == -ENOENT)
                r = meta_get_i64(db, "hour_until", &h);
        if (r < 0 && r != -ENOENT)
                return r;
        *ret_minutes = m;
        *ret_hours = h < m ? h : m;
        return 0;
}

/* ---- minutes: the head into blocks and the minute tier ------------------- */

struct compaction {
        sqlite3 *db;
        sqlite3_stmt *block_get, *block_put, *tier_put;
        int64_t from; /* minutes before it were compacted by earlier passes */
};

static int by_ts(const void *a, const void *b) {
        int64_t x = ((const struct sample *)a)->ts_ms, y = ((const struct sample *)b)->ts_ms;
        return (x > y) - (x < y);
}

/* A minute compacted before gets late rows: its block's samples join
 * them (a row of the same ts replaces the block's). */
static int merge_old_block(struct compaction *c, int64_t run_id, int64_t minute, struct sample **v, size_t *n) {
        bind_params(c->block_get, PARAMS(p_int(run_id), p_int(minute)));
        int rc = sqlite3_step(c->block_get), r = 0;
        if (rc == SQLITE_ROW) {
                struct sample *old = NULL;
                size_t k = 0;
                r = block_decode(sqlite3_column_blob(c->block_get, 0), (size_t)sqlite3_column_bytes(c->block_get, 0),
                                 &old, &k);
                if (r == 0 && GREEDY_REALLOC(*v, *n + k)) {
                        for (size_t i = 0; i < k; i++) {
                                bool dup = false;
                                for (size_t j = 0; j < *n && !dup; j++)
                                        dup = (*v)[j].ts_ms == old[i].ts_ms;
                                if (!dup)
                                        (*v)[(*n)++] = old[i];
                        }
                        sort_array(*v, *n, sizeof **v, by_ts);
                } else if (r == 0)
                        r = -ENOMEM;
                free(old);
        } else if (rc != SQLITE_DONE)
                r = -EIO;
        sqlite3_reset(c->block_get);
        return r == -EBADMSG ? 0 : r; /* a block that does not decode is replaced */
}

/* One run's minute: its block and its row of the minute tier. */
static int put_minute(struct compaction *c, int64_t run_id, int64_t minute, struct sample **v, size_t *n) {
        int r = minute < c->from ? merge_old_block(c, run_id, minute, v, n) : 0;
        if (r < 0)
                return r;
        size_t first = *n > BLOCK_MAX_SAMPLES ? *n - BLOCK_MAX_SAMPLES : 0; /* cannot be, at 100 ms */
        _cleanup_free_ uint8_t *blob = NULL;
        size_t len = 0;
        r = block_encode(*v + first, *n - first, &blob, &len);
        if (r < 0)
                return r;
        bind_params(c->block_put,
                    PARAMS(p_int(run_id), p_int(minute), p_int((int64_t)(*n - first)), p_blob(blob, len)));
        r = done_step(c->db, c->block_put);
        struct sample_agg a = {};
        for (size_t i = first; i < *n; i++)
                sample_agg_add(&a, &(*v)[i]);
        uint8_t agg[SAMPLE_AGG_PACKED_MAX];
        bind_params(c->tier_put, PARAMS(p_int(run_id), p_int(minute), p_blob(agg, sample_agg_pack(&a, agg))));
        if (r == 0)
                r = done_step(c->db, c->tier_put);
        *n = 0;
        return r;
}

/* The head rows of a batch of runs, a run's in time order from at[k]
 * (the runs ascending in id, n_rows[k] rows each). */
struct head_batch {
        const int64_t *ids;
        const size_t *n_rows;
        size_t n_runs;
        struct sample *v;
        size_t *at, *got;
};

struct id_key {
        const int64_t *ids;
        int64_t id;
};

static bool id_below(size_t i, const void *ctx) {
        const struct id_key *k = ctx;
        return k->ids[i] < k->id;
}

/* The index of run_id in the batch, or -1. */
static ssize_t batch_find(const struct head_batch *b, int64_t run_id) {
        size_t i = lower_bound(b->n_runs, id_below, &(struct id_key){ .ids = b->ids, .id = run_id });
        return i < b->n_runs && b->ids[i] == run_id ? (ssize_t)i : -1;
}

static int64_t minute_of(int64_t ts) {
        return ts >= 0 ? ts / MINUTE_MS * MINUTE_MS : ts;
}

/* Each run's rows of the batch, a minute at a time, into blocks. */
static int put_batch(struct compaction *c, struct head_batch *b) {
        int r = 0;
        for (size_t k = 0; r == 0 && k < b->n_runs; k++) {
                struct sample *v = b->v + b->at[k];
                for (size_t first = 0, end; r == 0 && first < b->got[k]; first = end) {
                        int64_t minute = minute_of(v[first].ts_ms);
                        for (end = first + 1; end < b->got[k] && minute_of(v[end].ts_ms) == minute;)
                                end++;
                        size_t n = end - first;
                        if (minute >= c->from) {
                                struct sample *m = v + first;
                                r = put_minute(c, b->ids[k], minute, &m, &n);
                        } else {
                                /* an old block's samples join them: a copy that can grow */
                                _cleanup_free_ struct sample *m = malloc(n * sizeof *m);
                                if (m)
                                        memcpy(m, v + first, n * sizeof *m);
                                r = m ? put_minute(c, b->ids[k], minute, &m, &n) : -ENOMEM;
                        }
                }
        }
        return r;
}

/* One batch: the head read once in its own order (time, then run), which
 * reads each page once. */
static int compact_batch(struct compaction *c, sqlite3_stmt *scan, struct head_batch *b, int64_t until) {
        size_t total = 0;
        for (size_t k = 0; k < b->n_runs; k++) {
                b->at[k] = total;
                b->got[k] = 0;
                total += b->n_rows[k];
        }
        _cleanup_free_ struct sample *v = calloc(total ? total : 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        b->v = v;
        bind_params(scan, PARAMS(p_int(until), p_int(b->ids[0]), p_int(b->ids[b->n_runs - 1])));
        int rc, r = 0;
        while ((rc = sqlite3_step(scan)) == SQLITE_ROW) {
                ssize_t k = batch_find(b, sqlite3_column_int64(scan, 0));
                if (k < 0 || b->got[k] == b->n_rows[k])
                        continue; /* cannot be: counted in the same transaction */
                if (store_row_to_sample(scan, 1, &v[b->at[k] + b->got[k]]) == 0)
                        b->got[k]++;
                else /* it goes with the rest of the minute: nothing can be made of it */
                        log_warning("compact: run %lld: the head row of %lld does not unpack; it is dropped",
                                    (long long)b->ids[k], (long long)sqlite3_column_int64(scan, 1));
        }
        if (rc != SQLITE_DONE)
                r = log_warning_errno(EIO, "compact: %s", sqlite3_errmsg(c->db));
        sqlite3_reset(scan);
        if (r == 0)
                r = put_batch(c, b);
        b->v = NULL;
        return r;
}

/* Runs are compacted in batches of about this many rows (struct sample's
 * 280 bytes each: 9 MiB at most, freed after the pass): each batch reads
 * the head once, two batches for a minute of 1 000 runs. */
#define COMPACT_BATCH_ROWS 32768

/* The runs with head rows before until, ascending, and how many each. */
static int head_runs(sqlite3 *db, int64_t until, int64_t **ret_ids, size_t **ret_rows, size_t *ret_n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (prepare(db, "SELECT run_id, count(*) FROM samples WHERE ts < ? GROUP BY run_id ORDER BY run_id", &st) < 0)
                return -EIO;
        bind_params(st, PARAMS(p_int(until)));
        _cleanup_free_ int64_t *ids = NULL;
        _cleanup_free_ size_t *rows = NULL;
        size_t n = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (!GREEDY_REALLOC(ids, n + 1) || !GREEDY_REALLOC(rows, n + 1))
                        return -ENOMEM;
                ids[n] = sqlite3_column_int64(st, 0);
                rows[n++] = (size_t)sqlite3_column_int64(st, 1);
        }
        if (rc != SQLITE_DONE)
                return log_warning_errno(EIO, "compact: %s", sqlite3_errmsg(db));
        *ret_ids = TAKE_PTR(ids);
        *ret_rows = TAKE_PTR(rows);
        *ret_n = n;
        return 0;
}

static int compact_samples(sqlite3 *db, int64_t from, int64_t until) {
        _cleanup_stmt_ sqlite3_stmt *scan = NULL, *del = NULL, *del_ticks = NULL;
        struct compaction c = { .db = db, .from = from };
        _cleanup_free_ int64_t *ids = NULL;
        _cleanup_free_ size_t *n_rows = NULL, *at = NULL, *got = NULL;
        size_t n = 0;
        int r = head_runs(db, until, &ids, &n_rows, &n);
        if (r == 0)
                r = prepare(db,
                            "SELECT run_id, " STORE_SAMPLE_COLUMNS
                            " FROM samples WHERE ts < ?1 AND run_id BETWEEN ?2 AND ?3 ORDER BY ts",
                            &scan);
        if (r == 0)
                r = prepare(db, "SELECT data FROM sample_blocks WHERE run_id=? AND ts=?", &c.block_get);
        if (r == 0)
                r = prepare(db, "INSERT OR REPLACE INTO sample_blocks (run_id, ts, n, data) VALUES (?,?,?,?)",
                            &c.block_put);
        if (r == 0)
                r = prepare(db, "INSERT OR REPLACE INTO samples_1m (run_id, ts, agg) VALUES (?,?,?)", &c.tier_put);
        if (r == 0)
                r = prepare(db, "DELETE FROM samples WHERE ts < ?", &del);
        if (r == 0)
                r = prepare(db, "DELETE FROM head_ticks WHERE ts < ?", &del_ticks);
        if (r == 0 && n > 0) {
                at = calloc(n, sizeof *at);
                got = calloc(n, sizeof *got);
                if (!at || !got)
                        r = -ENOMEM;
        }
        for (size_t first = 0, end; r == 0 && first < n; first = end) {
                size_t rows = 0;
                end = first;
                do
                        rows += n_rows[end++];
                while (end < n && rows + n_rows[end] <= COMPACT_BATCH_ROWS);
                struct head_batch b = {
                        .ids = ids + first, .n_rows = n_rows + first, .n_runs = end - first, .at = at, .got = got
                };
                r = compact_batch(&c, scan, &b, until);
        }
        if (r == 0) {
                bind_params(del, PARAMS(p_int(until)));
                r = done_step(db, del);
        }
        if (r == 0) {
                bind_params(del_ticks, PARAMS(p_int(until)));
                r = done_step(db, del_ticks);
        }
        sqlite3_finalize(c.block_get);
        sqlite3_finalize(c.block_put);
        sqlite3_finalize(c.tier_put);
        return r;
}

/* ---- op slices: merged per run and op into a tier ------------------------ */

/* One tier row of merged op data through st. */
static int put_op_row(sqlite3 *db, sqlite3_stmt *st, int64_t run_id, int64_t ts, const struct op_agg *g) {
        _cleanup_free_ uint8_t *blob = NULL;
        size_t len = 0;
        if (g->h.count > 0 && hist_encode(&g->h, &blob, &len) < 0)
                return -ENOMEM;
        bind_params(st, PARAMS(p_int(run_id), p_int(ts), p_text(g->op), p_text(g->category), p_double(true, g->count),
                               p_int((int64_t)g->h.count), p_blob(blob, len)));
        return done_step(db, st);
}

/* Rows of (bucket, run_id, op, category, count, hist), grouped by bucket
 * and run (their order), merged per op into the tier table `into`. */
static int merge_op_rows(sqlite3 *db, sqlite3_stmt *sel, const char *into) {
        char sql[160];
        snprintf(sql, sizeof sql,
                 "INSERT OR REPLACE INTO %s (run_id, ts, op, category, count, timings, hist) VALUES (?,?,?,?,?,?,?)",
                 into);
        _cleanup_stmt_ sqlite3_stmt *ins = NULL;
        if (prepare(db, sql, &ins) < 0)
                return -EIO;
        struct op_aggs group = {};
        int64_t g_bucket = 0, g_run = 0;
        int rc, r = 0;
        struct hist h;
        hist_init(&h);
        while (r == 0 && (rc = sqlite3_step(sel)) == SQLITE_ROW) {
                int64_t bucket = sqlite3_column_int64(sel, 0), run = sqlite3_column_int64(sel, 1);
                const char *op = (const char *)sqlite3_column_text(sel, 2);
                const char *cat = (const char *)sqlite3_column_text(sel, 3);
                if (group.n > 0 && (bucket != g_bucket || run != g_run)) {
                        for (size_t i = 0; i < group.n && r == 0; i++)
                                r = put_op_row(db, ins, g_run, g_bucket, &group.v[i]);
                        op_aggs_done(&group);
                }
                g_bucket = bucket;
                g_run = run;
                const void *blob = sqlite3_column_blob(sel, 5);
                bool has_h = blob && hist_decode(&h, blob, (size_t)sqlite3_column_bytes(sel, 5)) == 0;
                if (r == 0 && op)
                        r = op_aggs_add(&group, op, cat, sqlite3_column_double(sel, 4), has_h ? &h : NULL);
        }
        for (size_t i = 0; i < group.n && r == 0; i++)
                r = put_op_row(db, ins, g_run, g_bucket, &group.v[i]);
        op_aggs_done(&group);
        hist_done(&h);
        if (r == 0 && rc != SQLITE_DONE)
                r = log_warning_errno(EIO, "compact: %s", sqlite3_errmsg(db));
        return r;
}

static int compact_ops(sqlite3 *db, int64_t from, int64_t until) {
        _cleanup_stmt_ sqlite3_stmt *sel = NULL;
        if (prepare(db,
                    "SELECT (ts / 60000) * 60000 AS minute, run_id, op, category, count, hist FROM op_slices "
                    "WHERE ts >= ? AND ts < ? ORDER BY minute, run_id, op",
                    &sel) < 0)
                return -EIO;
        bind_params(sel, PARAMS(p_int(from), p_int(until)));
        return merge_op_rows(db, sel, "op_slices_1m");
}

/* Where the first pass starts: the oldest minute of the head or of the raw
 * op slices, or -ENOENT when both are empty. */
static int first_minute(sqlite3 *db, int64_t *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (prepare(db, "SELECT min(m) FROM (SELECT min(ts) AS m FROM samples UNION ALL SELECT min(ts) FROM op_slices)",
                    &st) < 0 ||
            sqlite3_step(st) != SQLITE_ROW)
                return -EIO;
        if (sqlite3_column_type(st, 0) == SQLITE_NULL)
                return -ENOENT;
        *ret = sqlite3_column_int64(st, 0) / MINUTE_MS * MINUTE_MS;
        return 0;
}

static bool has_late_rows(sqlite3 *db, int64_t before) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (prepare(db, "SELECT 1 FROM samples WHERE ts < ? LIMIT 1", &st) < 0)
                return false;
        bind_params(st, PARAMS(p_int(before)));
        return sqlite3_step(st) == SQLITE_ROW;
}

static int compact_minutes(struct store *s, int64_t now_ms, bool *ret_more) {
        sqlite3 *db = store_writer(s);
        int64_t from, until = now_ms / MINUTE_MS * MINUTE_MS;
        int r = meta_get_i64(db, "compact_until", &from);
        if (r == -ENOENT)
                r = first_minute(db, &from);
        if (r == -ENOENT)
                return 0; /* nothing stored yet */
        if (r < 0)
                return r;
        if (from >= until) {
                /* nothing new; rows the wall clock stepped back into compacted
                 * minutes still join their blocks */
                if (!has_late_rows(db, from))
                        return 0;
                until = from;
        }
        if (until - from > COMPACT_MAX_SPAN_MS) {
                until = from + COMPACT_MAX_SPAN_MS;
                *ret_more = true;
        }
        if (store_begin(s) < 0)
                return -EIO;
        r = compact_samples(db, from, until);
        if (r == 0)
                r = compact_ops(db, from, until);
        if (r == 0)
                r = meta_set_i64(db, "compact_until", until);
        /* the hour tier starts where the minute tier does */
        int64_t h;
        if (r == 0 && meta_get_i64(db, "hour_until", &h) == -ENOENT)
                r = meta_set_i64(db, "hour_until", from / HOUR_MS * HOUR_MS);
        if (r < 0) {
                store_rollback(s);
                return r;
        }
        return store_commit(s);
}

/* ---- hours: the minute tier into the hour tier ---------------------------- */

/* Writes a run's hour of the hour tier, merged from its minutes. */
static int put_hour(sqlite3 *db, sqlite3_stmt *ins, int64_t run_id, int64_t hour, const struct sample_agg *a) {
        uint8_t agg[SAMPLE_AGG_PACKED_MAX];
        bind_params(ins, PARAMS(p_int(run_id), p_int(hour), p_blob(agg, sample_agg_pack(a, agg))));
        return done_step(db, ins);
}

static int roll_hour_samples(sqlite3 *db, int64_t hour) {
        _cleanup_stmt_ sqlite3_stmt *sel = NULL, *ins = NULL;
        /* the minute tier is keyed by run: a run's hour is one range */
        int r = prepare(db,
                        "SELECT run_id, agg FROM samples_1m WHERE run_id IN "
                        "(SELECT DISTINCT run_id FROM samples_1m WHERE ts >= ?1 AND ts < ?1 + 3600000) "
                        "AND ts >= ?1 AND ts < ?1 + 3600000 ORDER BY run_id, ts",
                        &sel);
        if (r == 0)
                r = prepare(db, "INSERT OR REPLACE INTO samples_1h (run_id, ts, agg) VALUES (?,?,?)", &ins);
        if (r < 0)
                return r;
        bind_params(sel, PARAMS(p_int(hour)));
        struct sample_agg sum = {};
        int64_t run = 0;
        bool any = false;
        int rc;
        while (r == 0 && (rc = sqlite3_step(sel)) == SQLITE_ROW) {
                struct sample_agg m;
                if (any && sqlite3_column_int64(sel, 0) != run) {
                        r = put_hour(db, ins, run, hour, &sum);
                        sum = (struct sample_agg){};
                }
                run = sqlite3_column_int64(sel, 0);
                any = true;
                /* a row that does not unpack is left out of its hour */
                if (sample_agg_unpack(sqlite3_column_blob(sel, 1), (size_t)sqlite3_column_bytes(sel, 1), &m) == 0)
                        sample_agg_merge(&sum, &m);
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = log_warning_errno(EIO, "compact: %s", sqlite3_errmsg(db));
        if (r == 0 && any)
                r = put_hour(db, ins, run, hour, &sum);
        return r;
}

static int roll_hour_ops(sqlite3 *db, int64_t hour) {
        _cleanup_stmt_ sqlite3_stmt *sel = NULL;
        /* the minute tier is keyed by run: a run's hour is one range */
        if (prepare(db,
                    "SELECT ?1, run_id, op, category, count, hist FROM op_slices_1m WHERE run_id IN "
                    "(SELECT DISTINCT run_id FROM op_slices_1m WHERE ts >= ?1 AND ts < ?1 + 3600000) "
                    "AND ts >= ?1 AND ts < ?1 + 3600000 ORDER BY run_id, ts",
                    &sel) < 0)
                return -EIO;
        bind_params(sel, PARAMS(p_int(hour)));
        return merge_op_rows(db, sel, "op_slices_1h");
}

static int compact_hours(struct store *s, bool *ret_more) {
        sqlite3 *db = store_writer(s);
        int64_t minutes, hour;
        if (meta_get_i64(db, "compact_until", &minutes) < 0 || meta_get_i64(db, "hour_until", &hour) < 0)
                return 0;
        int64_t until = minutes / HOUR_MS * HOUR_MS;
        for (int k = 0; hour < until; k++, hour += HOUR_MS) {
                if (k == COMPACT_MAX_HOURS) {
                        *ret_more = true;
                        break;
                }
                if (store_begin(s) < 0)
                        return -EIO;
                int r = roll_hour_samples(db, hour);
                if (r == 0)
                        r = roll_hour_ops(db, hour);
                if (r == 0)
                        r = meta_set_i64(db, "hour_until", hour + HOUR_MS);
                if (r < 0) {
                        store_rollback(s);
                        return r;
                }
                if (store_commit(s) < 0)
                        return -EIO;
        }
        return 0;
}

int store_compact(struct store *s, int64_t now_ms, bool *ret_more) {
        *ret_more = false;
        int r = compact_minutes(s, now_ms, ret_more);
        if (r == 0)
                r = compact_hours(s, ret_more);
        if (r < 0)
                log_warning_errno(r, "compaction failed: %m");
        return r;
}

/* ---- retention -------------------------------------------------------------- */

static int delete_batch(struct store *s, const char *table, const char *key, int64_t cutoff, unsigned batch,
                        unsigned *ret) {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "DELETE FROM %s WHERE (ts, %s) IN (SELECT ts, %s FROM %s WHERE ts < ? ORDER BY ts LIMIT ?)", table,
                 key, key, table);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (prepare(store_writer(s), sql, &st) < 0)
                return -EIO;
        bind_params(st, PARAMS(p_int(cutoff), p_int(batch)));
        if (store_begin(s) < 0)
                return -EIO;
        if (sqlite3_step(st) != SQLITE_DONE) {
                store_rollback(s);
                return log_warning_errno(EIO, "retention on %s failed: %s", table, sqlite3_errmsg(store_writer(s)));
        }
        *ret = (unsigned)sqlite3_changes(store_writer(s));
        return store_commit(s);
}

int store_retention(struct store *s, int64_t now_ms, unsigned batch, unsigned *ret_deleted) {
        static const struct {
                const char *table, *key; /* rows are deleted by (ts, key) */
                bool raw;
        } tables[] = {
                { "samples", "run_id", true },          { "sample_blocks", "run_id", true },
                { "op_slices", "run_id", true },        { "gauges", "run_id", true },
                { "device_samples", "device", true },   { "sample_gpu", "run_id", true },
                { "sample_gpu_parts", "run_id", true }, { "device_gt_samples", "device", true },
                { "samples_1m", "run_id", false },      { "samples_1h", "run_id", false },
                { "op_slices_1m", "run_id", false },    { "op_slices_1h", "run_id", false },
        };
        int64_t raw_cut = now_ms - store_retention_raw_ms(s), roll_cut = now_ms - store_retention_rollup_ms(s);
        unsigned total = 0;
        for (size_t i = 0; i < ELEMENTSOF(tables) && total < batch; i++) {
                unsigned n = 0;
                int r = delete_batch(s, tables[i].table, tables[i].key, tables[i].raw ? raw_cut : roll_cut,
                                     batch - total, &n);
                if (r < 0)
                        return r;
                total += n;
        }
        *ret_deleted = total;
        return 0;
}

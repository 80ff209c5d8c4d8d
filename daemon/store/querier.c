/* SPDX-License-Identifier: MIT */
#include "store/querier.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/histogram.h"
#include "store/compact.h"
#include "store/param.h"
#include "store/raw.h"
#include "store/reader.h"
#include "store/tier.h"

#define MINUTE_MS 60000
#define HOUR_MS (60 * MINUTE_MS)
/* How far back a run's op table can hold slices the store does not have:
 * the tick writes them every interval (a second by default); ten minutes
 * cover a daemon that could not write for a while. */
#define LIVE_SPAN_MS (10 * MINUTE_MS)

/* ---- where a span's data lives ---------------------------------------------- */

enum tier { T_RAW, T_MINUTE, T_HOUR };

/* [from, until) of one tier. */
struct piece {
        enum tier tier;
        int64_t from, until;
};

static int64_t floor_to(int64_t t, int64_t unit) {
        int64_t q = t / unit * unit;
        return q > t ? q - unit : q;
}

static int64_t ceil_to(int64_t t, int64_t unit) {
        int64_t f = floor_to(t, unit);
        return f == t ? t : f + unit;
}

static size_t add_piece(struct piece *p, size_t n, enum tier t, int64_t from, int64_t until) {
        if (from >= until)
                return n;
        if (n > 0 && p[n - 1].tier == t && p[n - 1].until == from) {
                p[n - 1].until = until;
                return n;
        }
        p[n] = (struct piece){ t, from, until };
        return n + 1;
}

/* Cuts [from, until) into at most 7 pieces (the raw ones past the raw
 * retention become minute pieces) and returns how many. resolution: the
 * coarsest tier the answer may use (a step shorter than a minute reads
 * raw data only). */
static int cut_span(struct store *s, sqlite3 *db, int64_t from, int64_t until, int64_t resolution, struct piece *p,
                    size_t *ret_n) {
        int64_t minutes, hours;
        int r = store_tiers_until(s, db, &minutes, &hours);
        if (r < 0)
                return r;
        size_t n = 0;
        int64_t a = ceil_to(from, MINUTE_MS), d = floor_to(until, MINUTE_MS);
        if (d > minutes)
                d = minutes > a ? minutes / MINUTE_MS * MINUTE_MS : a;
        if (resolution < MINUTE_MS || a >= d) {
                n = add_piece(p, n, T_RAW, from, until);
        } else {
                int64_t b = ceil_to(a, HOUR_MS), c = floor_to(d, HOUR_MS);
                if (c > hours)
                        c = floor_to(hours, HOUR_MS);
                n = add_piece(p, n, T_RAW, from, a);
                if (resolution < HOUR_MS || b >= c)
                        n = add_piece(p, n, T_MINUTE, a, d);
                else {
                        n = add_piece(p, n, T_MINUTE, a, b);
                        n = add_piece(p, n, T_HOUR, b, c);
                        n = add_piece(p, n, T_MINUTE, c, d);
                }
                n = add_piece(p, n, T_RAW, d, until);
        }
        /* raw data before the retention's cut is gone: its minutes stand in */
        int64_t cut = now_realtime_ms() - store_retention_raw_ms(s);
        struct piece q[8];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                if (p[i].tier != T_RAW || p[i].from >= cut) {
                        m = add_piece(q, m, p[i].tier, p[i].from, p[i].until);
                        continue;
                }
                int64_t old_until = p[i].until < cut ? p[i].until : cut;
                m = add_piece(q, m, T_MINUTE, floor_to(p[i].from, MINUTE_MS), ceil_to(old_until, MINUTE_MS));
                m = add_piece(q, m, T_RAW, ceil_to(old_until, MINUTE_MS), p[i].until);
        }
        memcpy(p, q, m * sizeof *p);
        *ret_n = m;
        return 0;
}

/* ---- samples ----------------------------------------------------------------- */

/* Points of a stepped answer, in bucket order. */
struct buckets {
        int64_t step;
        int64_t *ts;
        struct sample_agg *agg;
        size_t n;
};

static struct sample_agg *bucket_of(struct buckets *b, int64_t ts) {
        int64_t k = floor_to(ts, b->step);
        if (b->n > 0 && b->ts[b->n - 1] == k)
                return &b->agg[b->n - 1];
        for (size_t i = b->n; i > 0; i--) /* out of order: a piece before overlaps */
                if (b->ts[i - 1] == k)
                        return &b->agg[i - 1];
        if (!GREEDY_REALLOC(b->ts, b->n + 1) || !GREEDY_REALLOC(b->agg, b->n + 1))
                return NULL;
        b->ts[b->n] = k;
        b->agg[b->n] = (struct sample_agg){};
        return &b->agg[b->n++];
}

static int bucket_sample(const struct sample *s, void *userdata) {
        struct sample_agg *a = bucket_of(userdata, s->ts_ms);
        if (!a)
                return -ENOMEM;
        sample_agg_add(a, s);
        return 0;
}

/* The rows of a tier in [from, until), in key order (the run's, by time),
 * merged into their buckets in C: a GROUP BY over the step's expression
 * would sort them first. A row that does not unpack is left out. */
static int bucket_tier(struct store *s, sqlite3 *db, enum tier t, int64_t run_id, int64_t from, int64_t until,
                       struct buckets *b) {
        static const char minute[] = "SELECT ts, agg FROM samples_1m WHERE run_id=?1 AND ts>=?2 AND ts<?3 ORDER BY ts";
        static const char hour[] = "SELECT ts, agg FROM samples_1h WHERE run_id=?1 AND ts>=?2 AND ts<?3 ORDER BY ts";
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = reader_prepare(s, db, t == T_HOUR ? hour : minute, &st);
        if (r < 0)
                return r;
        bind_params(st, PARAMS(p_int(run_id), p_int(from), p_int(until)));
        while ((r = step_one(db, st)) == 1) {
                struct sample_agg row, *a = bucket_of(b, sqlite3_column_int64(st, 0));
                if (!a)
                        return -ENOMEM;
                if (sample_agg_unpack(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1), &row) == 0)
                        sample_agg_merge(a, &row);
        }
        return r;
}

/* Every piece of [from, until) into buckets of b->step (an infinite step:
 * one bucket). */
static int bucket_span(struct store *s, sqlite3 *db, int64_t run_id, int64_t from, int64_t until, struct buckets *b) {
        struct piece p[8];
        size_t n = 0;
        int r = cut_span(s, db, from, until, b->step, p, &n);
        for (size_t i = 0; i < n && r == 0; i++)
                r = p[i].tier == T_RAW ? raw_samples(s, db, run_id, p[i].from, p[i].until - 1, false, bucket_sample, b)
                                       : bucket_tier(s, db, p[i].tier, run_id, p[i].from, p[i].until, b);
        return r;
}

/* Raw samples into an array, at most max + 1 (to see a truncation). */
struct sample_list {
        struct sample *v;
        size_t n, max;
};

static int take_sample(const struct sample *s, void *userdata) {
        struct sample_list *x = userdata;
        if (!GREEDY_REALLOC(x->v, x->n + 1))
                return -ENOMEM;
        x->v[x->n++] = *s;
        return x->n > x->max ? 1 : 0;
}

static int take_one(const struct sample *s, void *userdata) {
        *(struct sample *)userdata = *s;
        return 1;
}

/* The newest sample with a PSS reading, looking back over at most a few
 * hundred samples (PSS is read every few): past those, none is taken. */
struct last_pss {
        unsigned looked;
        bool found;
        struct sample s;
};

static int take_last_pss(const struct sample *s, void *userdata) {
        struct last_pss *l = userdata;
        if (s->has_pss) {
                l->found = true;
                l->s = *s;
                return 1;
        }
        return ++l->looked >= 512;
}

/* Buckets into points, at most limit. */
static int points_of(const struct buckets *b, size_t limit, struct sample **ret, size_t *ret_n, bool *ret_truncated) {
        size_t n = b->n < limit ? b->n : limit;
        struct sample *v = calloc(n ? n : 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                sample_agg_point(&b->agg[i], b->ts[i], &v[i]);
        *ret = v;
        *ret_n = n;
        *ret_truncated = b->n > limit;
        return 0;
}

int querier_samples(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                    unsigned limit, int64_t step_ms, struct sample **ret, size_t *ret_n, bool *ret_truncated) {
        struct budget bg;
        sqlite3 *db = reader_begin(s, l, &bg);
        if (limit == 0 || limit > l->max_rows)
                limit = l->max_rows;
        struct buckets b = { .step = step_ms };
        struct sample_list x = { .max = limit };
        int r = step_ms > 0 ? bucket_span(s, db, run_id, from, until + 1, &b)
                            : raw_samples(s, db, run_id, from, until, false, take_sample, &x);
        reader_end(s);
        if (r >= 0 && step_ms > 0)
                r = points_of(&b, limit, ret, ret_n, ret_truncated);
        else if (r >= 0) {
                *ret = x.v;
                *ret_n = x.n < limit ? x.n : limit;
                *ret_truncated = x.n > limit;
                x.v = NULL;
        }
        free(b.ts);
        free(b.agg);
        free(x.v);
        return r < 0 ? r : 0;
}

/* The span's aggregate, one bucket. */
static int span_agg(struct store *s, sqlite3 *db, int64_t run_id, int64_t from, int64_t until, struct sample_agg *ret) {
        struct buckets b = { .step = INT64_MAX };
        int r = bucket_span(s, db, run_id, from, until + 1, &b);
        *ret = r == 0 && b.n > 0 ? b.agg[0] : (struct sample_agg){};
        free(b.ts);
        free(b.agg);
        return r;
}

/* The first (last: the newest) raw sample in [from, until]: -ENOENT if
 * none. */
static int edge_sample(struct store *s, sqlite3 *db, int64_t run_id, int64_t from, int64_t until, bool last,
                       struct sample *ret) {
        struct sample got;
        int r = raw_samples(s, db, run_id, from, until, last, take_one, &got);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        *ret = got;
        return 0;
}

void window_rates_from(const struct sample *a, const struct sample *z, struct window_rates *w) {
        double dt = (double)(z->ts_ms - a->ts_ms) / 1000.0;
        w->from_ms = a->ts_ms;
        w->until_ms = z->ts_ms;
        w->has_cpu = w->has_io = w->has_net = false;
        if (dt <= 0)
                return;
        w->has_cpu = true;
        w->cpu_pct = (double)sat_sub_u64(z->cpu_time_ns, a->cpu_time_ns) / 1e9 / dt * 100.0;
        if (a->has_io && z->has_io) {
                w->has_io = true;
                w->read_bytes_per_s = (double)sat_sub_u64(z->read_bytes, a->read_bytes) / dt;
                w->write_bytes_per_s = (double)sat_sub_u64(z->write_bytes, a->write_bytes) / dt;
        }
        if (a->has_net && z->has_net) {
                w->has_net = true;
                w->netns_rx_bytes_per_s = (double)sat_sub_u64(z->netns_rx_bytes, a->netns_rx_bytes) / dt;
                w->netns_tx_bytes_per_s = (double)sat_sub_u64(z->netns_tx_bytes, a->netns_tx_bytes) / dt;
        }
}

int querier_window(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                   struct window_rates *ret) {
        struct budget bg;
        sqlite3 *db = reader_begin(s, l, &bg);
        struct window_rates w = { .from_ms = from, .until_ms = until };
        struct sample a, z;
        struct sample_agg g;
        int r = edge_sample(s, db, run_id, from, until, false, &a);
        if (r == 0)
                r = edge_sample(s, db, run_id, from, until, true, &z);
        if (r == 0)
                r = span_agg(s, db, run_id, from, until, &g);
        if (r == 0) {
                window_rates_from(&a, &z, &w);
                w.samples = g.samples;
                w.has_gpu = g.gpu_util_n > 0;
                w.gpu_util_pct = g.gpu_util_n ? g.gpu_util_sum / (double)g.gpu_util_n : 0;
        } else if (r == -ENOENT)
                r = 0; /* no samples in the window: every rate unknown */
        reader_end(s);
        if (r == 0)
                *ret = w;
        return r;
}

/* What changed between two cumulative samples: the counters of z less
 * those of a (a may be z itself). a_first: a is the run's first sample,
 * which has no energy estimate yet; the estimate counts from 0 at the
 * run's registration, so z's is all of the span's. */
static void totals_between(const struct sample *a, const struct sample *z, bool a_first, struct run_totals *t) {
        t->last_ts_ms = z->ts_ms;
        t->cpu_time_ns = sat_sub_u64(z->cpu_time_ns, a->cpu_time_ns);
        t->user_time_ns = sat_sub_u64(z->user_time_ns, a->user_time_ns);
        t->system_time_ns = sat_sub_u64(z->system_time_ns, a->system_time_ns);
        t->has_rss = z->has_rss;
        t->final_rss_bytes = z->rss_bytes;
        t->has_io = a->has_io && z->has_io;
        t->read_bytes = sat_sub_u64(z->read_bytes, a->read_bytes);
        t->write_bytes = sat_sub_u64(z->write_bytes, a->write_bytes);
        t->has_net = a->has_net && z->has_net;
        t->netns_rx_bytes = sat_sub_u64(z->netns_rx_bytes, a->netns_rx_bytes);
        t->netns_tx_bytes = sat_sub_u64(z->netns_tx_bytes, a->netns_tx_bytes);
        if (a_first && !a->has_energy) {
                t->has_energy = z->has_energy;
                t->energy_j = z->has_energy ? z->energy_j : 0;
                return;
        }
        t->has_energy = a->has_energy && z->has_energy && z->energy_j >= a->energy_j;
        t->energy_j = t->has_energy ? z->energy_j - a->energy_j : 0;
}

int querier_span_totals(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                        struct run_totals *ret, int64_t *ret_base_ts) {
        struct budget bg;
        sqlite3 *db = reader_begin(s, l, &bg);
        struct run_totals t = {};
        struct sample a, z;
        struct sample_agg g;
        bool a_first = false;
        int r = edge_sample(s, db, run_id, from, until, true, &z);
        if (r == 0) {
                /* the counters at the span's start: the last sample at or
                 * before it, else the first inside it */
                r = edge_sample(s, db, run_id, INT64_MIN, from, true, &a);
                if (r == -ENOENT)
                        r = edge_sample(s, db, run_id, from, until, false, &a);
        }
        if (r == 0 && !a.has_energy && z.has_energy) {
                /* is a the run's first sample (the estimate's start)? */
                struct sample x;
                r = edge_sample(s, db, run_id, INT64_MIN, a.ts_ms - 1, true, &x);
                a_first = r == -ENOENT;
                if (r == -ENOENT)
                        r = 0;
        }
        if (r == 0)
                r = span_agg(s, db, run_id, from, until, &g);
        if (r == 0) {
                totals_between(&a, &z, a_first, &t);
                t.samples = g.samples;
                /* the sampled maximum: VmHWM would count peaks before the span */
                t.peak_rss_bytes = g.rss_max;
                t.threads_max = g.threads_max;
                t.has_gpu_mem = g.has_gpu_mem;
                t.peak_gpu_mem_bytes = g.gpu_mem_max;
                t.gpu_util_samples = g.gpu_util_n;
                t.gpu_util_sum_pct = g.gpu_util_sum;
                struct last_pss lp = {};
                if (g.pss_n > 0 && (r = raw_samples(s, db, run_id, from, until, true, take_last_pss, &lp)) >= 0) {
                        r = 0;
                        t.has_pss = true;
                        t.peak_pss_bytes = g.pss_max;
                        t.has_final_pss = lp.found;
                        t.final_pss_bytes = lp.s.pss_bytes;
                        t.final_uss_bytes = lp.s.uss_bytes;
                }
        } else if (r == -ENOENT)
                r = 0; /* no samples in the span */
        reader_end(s);
        if (r == 0) {
                *ret = t;
                *ret_base_ts = t.samples > 0 ? a.ts_ms : 0;
        }
        return r;
}

/* ---- ops ------------------------------------------------------------------------ */

/* Steps of ops: one op_aggs per step of `step` from `from`. */
struct op_buckets {
        int64_t from, step;
        struct op_aggs *v;
        size_t n; /* steps so far (the last one with data decides) */
        size_t max;
};

static struct op_aggs *op_bucket(struct op_buckets *b, int64_t ts) {
        if (ts < b->from)
                ts = b->from;
        uint64_t k = b->step == INT64_MAX ? 0 : (uint64_t)(ts - b->from) / (uint64_t)b->step;
        if (k >= b->max)
                return NULL;
        if (k >= b->n) {
                if (!GREEDY_REALLOC(b->v, k + 1))
                        return NULL;
                memset(b->v + b->n, 0, (k + 1 - b->n) * sizeof *b->v);
                b->n = k + 1;
        }
        return &b->v[k];
}

/* Rows of (ts, op, category, count, hist) into their steps. */
static int op_rows(sqlite3 *db, sqlite3_stmt *st, struct op_buckets *b) {
        int r;
        while ((r = step_one(db, st)) == 1) {
                const char *op = (const char *)sqlite3_column_text(st, 1);
                const char *cat = (const char *)sqlite3_column_text(st, 2);
                const void *blob = sqlite3_column_blob(st, 4);
                struct op_aggs *a = op_bucket(b, sqlite3_column_int64(st, 0));
                if (a && op &&
                    (r = op_aggs_add_encoded(a, op, cat, sqlite3_column_double(st, 3), blob,
                                             (size_t)sqlite3_column_bytes(st, 4))) < 0)
                        break;
        }
        return r;
}

/* One piece's op data, row by row in key order, each row into its step
 * (op_rows()): a GROUP BY of the steps in SQL would sort the rows, blobs
 * and all, before merging them. */
static int op_piece(struct store *s, sqlite3 *db, const struct piece *p, int64_t run_id, const char *op_filter,
                    struct op_buckets *b) {
        static const char raw[] = "SELECT ts, op, category, count, hist FROM op_slices "
                                  "WHERE run_id = ?1 AND ts >= ?2 AND ts < ?3 AND (?4 IS NULL OR op = ?4)";
        static const char minute[] = "SELECT ts, op, category, count, hist FROM op_slices_1m "
                                     "WHERE run_id = ?1 AND ts >= ?2 AND ts < ?3 AND (?4 IS NULL OR op = ?4)";
        static const char hour[] = "SELECT ts, op, category, count, hist FROM op_slices_1h "
                                   "WHERE run_id = ?1 AND ts >= ?2 AND ts < ?3 AND (?4 IS NULL OR op = ?4)";
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = reader_prepare(s, db, p->tier == T_RAW ? raw : p->tier == T_MINUTE ? minute : hour, &st);
        if (r < 0)
                return r;
        bind_params(st, PARAMS(p_int(run_id), p_int(p->from), p_int(p->until), p_text(op_filter)));
        return op_rows(db, st, b);
}

/* The live slices (the current minute and the closed ones not stored yet)
 * of [from, until), a step at a time. */
static int op_live(const struct live_source *live, int64_t run_id, int64_t from, int64_t until, const char *op_filter,
                   struct op_buckets *b) {
        if (!live || !live->ops || from >= until)
                return 0;
        for (int64_t t = from; t < until;) {
                int64_t end = b->step == INT64_MAX ? until : b->from + ((t - b->from) / b->step + 1) * b->step;
                if (end > until)
                        end = until;
                struct op_aggs *a = op_bucket(b, t);
                if (!a)
                        return -ENOMEM;
                int r = live->ops(live->userdata, run_id, t, end, op_filter, a);
                if (r < 0)
                        return r;
                t = end;
        }
        return 0;
}

static int op_span(struct store *s, const struct query_limits *l, const struct live_source *live, int64_t run_id,
                   int64_t from, int64_t until, const char *op_filter, struct op_buckets *b) {
        struct budget bg;
        sqlite3 *db = reader_begin(s, l, &bg);
        struct piece p[8];
        size_t n = 0;
        int r = cut_span(s, db, from, until, b->step, p, &n);
        for (size_t i = 0; i < n && r == 0; i++)
                r = op_piece(s, db, &p[i], run_id, op_filter, b);
        reader_end(s);
        /* What the run holds in memory was not stored: its open slices and
         * those closed since the last tick. The tick stores them every
         * interval, so with steps only the last minutes are asked for. */
        if (r == 0 && live) {
                int64_t live_from = b->step == INT64_MAX ? from : now_realtime_ms() - LIVE_SPAN_MS;
                r = op_live(live, run_id, live_from > from ? live_from : from, until, op_filter, b);
        }
        return r;
}

int querier_ops(struct store *s, const struct query_limits *l, const struct live_source *live, int64_t run_id,
                int64_t from, int64_t until, const char *op_filter, struct op_aggs *a) {
        struct op_buckets b = { .from = from, .step = INT64_MAX, .max = 1 };
        int r = op_span(s, l, live, run_id, from, until, op_filter, &b);
        if (r == 0 && b.n > 0) {
                /* into the caller's: it may hold some already */
                for (size_t i = 0; i < b.v[0].n && r == 0; i++)
                        r = op_aggs_add(a, b.v[0].v[i].op, b.v[0].v[i].category, b.v[0].v[i].count, &b.v[0].v[i].h);
        }
        op_steps_free(b.v, b.n);
        return r;
}

int querier_op_steps(struct store *s, const struct query_limits *l, const struct live_source *live, int64_t run_id,
                     int64_t from, int64_t until, int64_t step_ms, const char *op_filter, struct op_aggs **ret,
                     size_t *ret_n) {
        if (step_ms <= 0 || until <= from)
                return -EINVAL;
        size_t steps = (size_t)((until - 1 - from) / step_ms) + 1;
        struct op_buckets b = { .from = from, .step = step_ms, .max = steps };
        int r = op_span(s, l, live, run_id, from, until, op_filter, &b);
        if (r == 0 && b.n < steps) { /* every step, the empty ones too */
                if (GREEDY_REALLOC(b.v, steps)) {
                        memset(b.v + b.n, 0, (steps - b.n) * sizeof *b.v);
                        b.n = steps;
                } else
                        r = -ENOMEM;
        }
        if (r < 0) {
                op_steps_free(b.v, b.n);
                return r;
        }
        *ret = b.v;
        *ret_n = b.n;
        return 0;
}

void op_steps_free(struct op_aggs *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                op_aggs_done(&v[i]);
        free(v);
}

/* ---- many runs at once ----------------------------------------------------- */

/* The ids as a JSON array, the text SQL reads them from with json_each():
 * one statement for any number of runs. */
static char *ids_json(const int64_t *ids, size_t n) {
        size_t size = 2 + n * 21, len = 1;
        char *t = malloc(size);
        if (!t)
                return NULL;
        t[0] = '[';
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(t + len, size - len, i ? ",%lld" : "%lld", (long long)ids[i]);
        snprintf(t + len, size - len, "]");
        return t;
}

static int id_cmp(const void *a, const void *b) {
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

/* The index of id in ids, or -1. */
static ssize_t id_index(const int64_t *ids, size_t n, int64_t id) {
        const int64_t *p = bsearch(&id, ids, n, sizeof *ids, id_cmp);
        return p ? p - ids : -1;
}

#define IN_IDS "run_id IN (SELECT value FROM json_each(?1))"

int querier_sparks(struct store *s, const struct query_limits *l, const int64_t *ids, size_t n, int64_t from,
                   int64_t until, bool head, size_t stride, struct spark_point *ret) {
        /* the minute tier, and the head's rows added up by minute: a minute
         * is in one or the other (the compaction moves it in one
         * transaction), save late rows, which add up */
        static const char *const sql[] = {
                "SELECT run_id, ts, agg FROM samples_1m WHERE " IN_IDS " AND ts >= ?2 AND ts < ?3",
                "SELECT run_id, " STORE_SAMPLE_COLUMNS " FROM samples WHERE " IN_IDS " AND ts >= ?2 AND ts < ?3",
        };
        if (n == 0 || until <= from)
                return 0;
        _cleanup_free_ char *list = ids_json(ids, n);
        if (!list)
                return -ENOMEM;
        struct budget bg;
        sqlite3 *db = reader_begin(s, l, &bg);
        int r = 0;
        for (size_t q = 0; q < (head ? 2 : 1) && r == 0; q++) {
                _cleanup_reset_ sqlite3_stmt *st = NULL;
                r = reader_prepare(s, db, sql[q], &st);
                if (r < 0)
                        break;
                bind_params(st, PARAMS(p_text(list), p_int(from), p_int(until)));
                while ((r = step_one(db, st)) == 1) {
                        ssize_t i = id_index(ids, n, sqlite3_column_int64(st, 0));
                        int64_t k = (sqlite3_column_int64(st, 1) - from) / SPARK_STEP_MS;
                        if (i < 0 || k < 0 || (size_t)k >= stride)
                                continue;
                        struct spark_point *p = &ret[(size_t)i * stride + (size_t)k];
                        struct sample_agg a = {};
                        if (q == 0) { /* a tier row, packed: one that does not unpack is left out */
                                if (sample_agg_unpack(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
                                                      &a) < 0)
                                        continue;
                        } else { /* a head row: one that does not unpack is left out */
                                struct sample m;
                                if (store_row_to_sample(st, 1, &m) < 0)
                                        continue;
                                sample_agg_add(&a, &m);
                        }
                        p->cpu_n += a.cpu_pct_n;
                        p->cpu_sum += a.cpu_pct_sum;
                        p->rss_n += a.rss_n;
                        p->rss_sum += a.rss_sum;
                }
        }
        reader_end(s);
        return r;
}

/* Rows of (run_id, op, category, count, hist) into the aggregates of their
 * runs, merged in C as op_rows() merges one run's. */
static int runs_op_rows(sqlite3 *db, sqlite3_stmt *st, const int64_t *ids, size_t n, struct op_aggs *ret) {
        int r;
        while ((r = step_one(db, st)) == 1) {
                ssize_t i = id_index(ids, n, sqlite3_column_int64(st, 0));
                const char *op = (const char *)sqlite3_column_text(st, 1);
                const char *cat = (const char *)sqlite3_column_text(st, 2);
                if (i >= 0 && op &&
                    (r = op_aggs_add_encoded(&ret[i], op, cat, sqlite3_column_double(st, 3), sqlite3_column_blob(st, 4),
                                             (size_t)sqlite3_column_bytes(st, 4))) < 0)
                        break;
        }
        return r;
}

int querier_runs_ops(struct store *s, const struct query_limits *l, const struct live_source *live, const int64_t *ids,
                     size_t n, int64_t from, int64_t until, struct op_aggs *ret) {
        static const char *const sql[] = {
                [T_RAW] = "SELECT run_id, op, category, count, hist FROM op_slices WHERE " IN_IDS
                          " AND ts >= ?2 AND ts < ?3",
                [T_MINUTE] = "SELECT run_id, op, category, count, hist FROM op_slices_1m WHERE " IN_IDS
                             " AND ts >= ?2 AND ts < ?3",
                [T_HOUR] = "SELECT run_id, op, category, count, hist FROM op_slices_1h WHERE " IN_IDS
                           " AND ts >= ?2 AND ts < ?3",
        };
        if (n == 0 || until <= from)
                return 0;
        _cleanup_free_ char *list = ids_json(ids, n);
        if (!list)
                return -ENOMEM;
        struct budget bg;
        sqlite3 *db = reader_begin(s, l, &bg);
        struct piece p[8];
        size_t np = 0;
        int r = cut_span(s, db, from, until, INT64_MAX, p, &np);
        for (size_t k = 0; k < np && r == 0; k++) {
                _cleanup_reset_ sqlite3_stmt *st = NULL;
                r = reader_prepare(s, db, sql[p[k].tier], &st);
                if (r == 0) {
                        bind_params(st, PARAMS(p_text(list), p_int(p[k].from), p_int(p[k].until)));
                        r = runs_op_rows(db, st, ids, n, ret);
                }
        }
        reader_end(s);
        /* what the runs hold in memory was not stored (0 for one that ended) */
        for (size_t i = 0; i < n && r == 0 && live && live->ops; i++)
                r = live->ops(live->userdata, ids[i], from, until, NULL, &ret[i]);
        return r;
}

/* SPDX-License-Identifier: MIT */
#include "analyze/ops.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static char *strndup_or_null(const char *s, size_t len) {
        return s && len ? strndup(s, len) : NULL;
}

/* Is have (NULL: none) the category of len bytes? */
static bool same_category(const char *have, const char *category, size_t len) {
        return have && strncmp(have, category, len) == 0 && have[len] == 0;
}

int ops_category(const struct op_table *t, const char *op, const char **ret_category) {
        for (size_t i = 0; i < t->n_open; i++)
                if (streq(t->open[i].op, op)) {
                        *ret_category = t->open[i].category;
                        return 1;
                }
        return 0;
}

int64_t ops_last_ms(const struct op_table *t, const char *op) {
        int64_t last = 0;
        for (size_t i = 0; i < t->n_open; i++)
                if ((!op || streq(t->open[i].op, op)) && t->open[i].last > last)
                        last = t->open[i].last;
        return last;
}

static void slice_done(struct op_slice *s) {
        free(s->op);
        free(s->category);
        hist_done(&s->h);
        memset(s, 0, sizeof *s);
}

static struct op_slice *find_open(struct op_table *t, const char *op, size_t len) {
        for (size_t i = 0; i < t->n_open; i++)
                if (strncmp(t->open[i].op, op, len) == 0 && t->open[i].op[len] == 0)
                        return &t->open[i];
        return NULL;
}

/* Room for element n of an array of at most max: 0, -ENOSPC (counted as
 * dropped) or -ENOMEM. */
static int make_room(struct op_table *t, void **array, size_t n, size_t max, size_t size) {
        if (n >= max) {
                t->dropped++;
                return -ENOSPC;
        }
        return greedy_realloc(array, n + 1, size) ? 0 : -ENOMEM;
}
#define MAKE_ROOM(t, array, n, max) make_room((t), (void **)&(array), (n), (max), sizeof((array)[0]))

/* Moves an open slice with data to the done list and empties it. */
static int close_slice(struct op_table *t, struct op_slice *s) {
        if (s->count <= 0 && s->h.count == 0)
                return 0;
        if (!GREEDY_REALLOC(t->done, t->n_done + 1))
                return -ENOMEM;
        struct op_slice *d = &t->done[t->n_done];
        d->op = strdup(s->op);
        d->category = s->category ? strdup(s->category) : NULL;
        if (!d->op || (s->category && !d->category)) {
                free(d->op);
                free(d->category);
                return -ENOMEM;
        }
        d->ts = s->ts;
        d->last = s->last;
        d->count = s->count;
        d->h = s->h; /* the histogram moves; the open slice gets a fresh one */
        hist_init(&s->h);
        s->count = 0;
        t->n_done++;
        return 0;
}

/* The last value of gauge op, a new entry (value 0) if it has none. */
static int gauge_last_of(struct op_table *t, const char *op, size_t op_len, struct gauge_value **ret) {
        for (size_t i = 0; i < t->n_gauge_last; i++)
                if (strncmp(t->gauge_last[i].name, op, op_len) == 0 && t->gauge_last[i].name[op_len] == 0) {
                        *ret = &t->gauge_last[i];
                        return 0;
                }
        int r = MAKE_ROOM(t, t->gauge_last, t->n_gauge_last, OPS_MAX_PER_RUN);
        if (r < 0)
                return r;
        struct gauge_value *last = &t->gauge_last[t->n_gauge_last];
        *last = (struct gauge_value){ .name = strndup(op, op_len) };
        if (!last->name)
                return -ENOMEM;
        t->n_gauge_last++;
        *ret = last;
        return 0;
}

int ops_gauge_restore(struct op_table *t, const char *name, double value, int64_t ts_ms) {
        struct gauge_value *last;
        int r = gauge_last_of(t, name, strlen(name), &last);
        if (r < 0)
                return r;
        if (last->ts <= ts_ms) {
                last->value = value;
                last->ts = ts_ms;
        }
        return 0;
}

bool ops_value_valid(enum op_kind kind, double value, double rate) {
        if (!(rate >= OPS_RATE_MIN && rate <= 1) || !isfinite(value))
                return false;
        if (kind == OP_TIMING)
                return value >= 0 && value <= OPS_TIMING_MAX_MS;
        return fabs(value) <= OPS_VALUE_MAX;
}

int ops_observe(struct op_table *t, const char *op, size_t op_len, const char *category, size_t category_len,
                enum op_kind kind, double value, double rate, int64_t now_ms) {
        if (op_len == 0 || op_len > OPS_NAME_MAX || !ops_value_valid(kind, value, rate))
                return -EINVAL;
        if (kind == OP_GAUGE || kind == OP_GAUGE_DELTA) {
                struct gauge_value *last;
                int q = gauge_last_of(t, op, op_len, &last);
                if (q < 0)
                        return q;
                value = kind == OP_GAUGE_DELTA ? last->value + value : value;
                if (!isfinite(value))
                        return -EINVAL;
                last->value = value;
                last->ts = now_ms;
                int r = MAKE_ROOM(t, t->gauges, t->n_gauges, OPS_MAX_PENDING_GAUGES);
                if (r < 0)
                        return r;
                char *name = strndup(op, op_len);
                if (!name)
                        return -ENOMEM;
                t->gauges[t->n_gauges++] = (struct gauge_value){ .ts = now_ms, .name = name, .value = value };
                return 0;
        }
        if (kind == OP_TIMING && value < 0)
                return -EINVAL;

        int64_t slice = ops_slice_of(now_ms);
        /* a slice opened in the second of a mark, after it, starts at it */
        int64_t start = t->cut_ms > slice && ops_slice_of(t->cut_ms) == slice ? t->cut_ms : slice;
        struct op_slice *s = find_open(t, op, op_len);
        if (s && category && category_len && !same_category(s->category, category, category_len))
                return -EEXIST; /* the op's first observation set another */
        if (!s) {
                int r = MAKE_ROOM(t, t->open, t->n_open, OPS_MAX_PER_RUN);
                if (r < 0)
                        return r;
                s = &t->open[t->n_open];
                memset(s, 0, sizeof *s);
                s->op = strndup(op, op_len);
                s->category = strndup_or_null(category, category_len);
                if (!s->op || (category && category_len && !s->category)) {
                        free(s->op);
                        free(s->category);
                        memset(s, 0, sizeof *s);
                        return -ENOMEM;
                }
                hist_init(&s->h);
                s->ts = start;
                t->n_open++;
        } else if (ops_slice_of(s->ts) != slice) { /* (a mark may have cut it: s->ts inside the slice) */
                int r = close_slice(t, s);
                if (r < 0)
                        return r;
                s = find_open(t, op, op_len); /* close_slice may not move open[], but be safe */
                s->ts = start;
        }
        s->last = now_ms;
        if (kind == OP_TIMING) {
                /* a timing sampled at rate r stands for 1/r timings */
                uint64_t weight = (uint64_t)llround(1.0 / rate);
                int r = hist_add(&s->h, value, weight ? weight : 1);
                if (r < 0)
                        return r;
                s->count += (double)(weight ? weight : 1);
        } else
                s->count += value / rate;
        return 0;
}

int ops_rotate(struct op_table *t, int64_t now_ms) {
        int64_t slice = now_ms == INT64_MAX ? INT64_MAX : ops_slice_of(now_ms);
        for (size_t i = 0; i < t->n_open; i++)
                if (t->open[i].ts < slice) {
                        int r = close_slice(t, &t->open[i]);
                        if (r < 0)
                                return r;
                        t->open[i].ts = slice == INT64_MAX ? t->open[i].ts : slice;
                }
        return 0;
}

int ops_cut(struct op_table *t, int64_t ts_ms) {
        if (ts_ms > t->cut_ms)
                t->cut_ms = ts_ms;
        for (size_t i = 0; i < t->n_open; i++)
                if (t->open[i].ts < ts_ms) {
                        int r = close_slice(t, &t->open[i]);
                        if (r < 0)
                                return r;
                        t->open[i].ts = ts_ms;
                }
        return 0;
}

void ops_clear_done(struct op_table *t) {
        for (size_t i = 0; i < t->n_done; i++)
                slice_done(&t->done[i]);
        t->n_done = 0;
        for (size_t i = 0; i < t->n_gauges; i++)
                free(t->gauges[i].name);
        t->n_gauges = 0;
}

void ops_table_done(struct op_table *t) {
        ops_clear_done(t);
        for (size_t i = 0; i < t->n_open; i++)
                slice_done(&t->open[i]);
        for (size_t i = 0; i < t->n_gauge_last; i++)
                free(t->gauge_last[i].name);
        free(t->gauge_last);
        free(t->open);
        free(t->done);
        free(t->gauges);
        memset(t, 0, sizeof *t);
}

/* The aggregate of op in a (a new one if none), its count added. */
static int op_agg_add_count(struct op_aggs *a, const char *op, const char *category, double count,
                            struct op_agg **ret) {
        struct op_agg *g = NULL;
        for (size_t i = 0; i < a->n; i++)
                if (streq(a->v[i].op, op))
                        g = &a->v[i];
        if (!g) {
                if (!GREEDY_REALLOC(a->v, a->n + 1))
                        return -ENOMEM;
                g = &a->v[a->n];
                memset(g, 0, sizeof *g);
                g->op = strdup(op);
                if (!g->op)
                        return -ENOMEM;
                hist_init(&g->h);
                a->n++;
        }
        if (category && !g->category)
                g->category = strdup(category);
        g->count += count;
        *ret = g;
        return 0;
}

int op_aggs_add(struct op_aggs *a, const char *op, const char *category, double count, const struct hist *h) {
        struct op_agg *g;
        int r = op_agg_add_count(a, op, category, count, &g);
        return r == 0 && h ? hist_merge(&g->h, h) : r;
}

int op_aggs_add_encoded(struct op_aggs *a, const char *op, const char *category, double count, const void *hist,
                        size_t len) {
        struct op_agg *g;
        int r = op_agg_add_count(a, op, category, count, &g);
        if (r == 0 && hist)
                r = hist_merge_encoded(&g->h, hist, len);
        return r == -EINVAL ? 0 : r; /* a histogram that does not decode is left out; the count stands */
}

static bool slice_in(const struct op_slice *s, int64_t from, int64_t until, const char *op_filter) {
        return s->ts >= from && s->ts < until && (!op_filter || streq(op_filter, s->op)) &&
               (s->count > 0 || s->h.count > 0);
}

int op_aggs_add_live(struct op_aggs *a, const struct op_table *t, int64_t from, int64_t until, const char *op_filter) {
        for (size_t i = 0; i < t->n_done; i++)
                if (slice_in(&t->done[i], from, until, op_filter)) {
                        int r = op_aggs_add(a, t->done[i].op, t->done[i].category, t->done[i].count, &t->done[i].h);
                        if (r < 0)
                                return r;
                }
        for (size_t i = 0; i < t->n_open; i++)
                if (slice_in(&t->open[i], from, until, op_filter)) {
                        int r = op_aggs_add(a, t->open[i].op, t->open[i].category, t->open[i].count, &t->open[i].h);
                        if (r < 0)
                                return r;
                }
        return 0;
}

void op_aggs_done(struct op_aggs *a) {
        for (size_t i = 0; i < a->n; i++) {
                free(a->v[i].op);
                free(a->v[i].category);
                hist_done(&a->v[i].h);
        }
        free(a->v);
        a->v = NULL;
        a->n = 0;
}

/* True when x costs more than y by key (a sum or a count), or as much
 * with a name earlier in byte order. */
static bool op_before(const struct op_agg *x, double kx, const struct op_agg *y, double ky) {
        return !y || kx > ky || (kx == ky && strcmp(x->op, y->op) < 0);
}

const struct op_agg *op_aggs_top(const struct op_aggs *a) {
        const struct op_agg *timed = NULL, *counted = NULL;
        for (size_t i = 0; i < a->n; i++) {
                const struct op_agg *x = &a->v[i];
                if (x->h.count > 0 && op_before(x, x->h.sum, timed, timed ? timed->h.sum : 0))
                        timed = x;
                else if (x->h.count == 0 && x->count > 0 &&
                         op_before(x, x->count, counted, counted ? counted->count : 0))
                        counted = x;
        }
        return timed ? timed : counted;
}

int gauge_values_copy(const struct gauge_value *v, size_t n, struct gauge_value **ret) {
        struct gauge_value *c = calloc(n ? n : 1, sizeof *c);
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                c[i] = (struct gauge_value){ .ts = v[i].ts, .name = strdup(v[i].name), .value = v[i].value };
                if (!c[i].name) {
                        gauge_values_free(c, i);
                        return -ENOMEM;
                }
        }
        *ret = c;
        return 0;
}

void gauge_values_free(struct gauge_value *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].name);
        free(v);
}

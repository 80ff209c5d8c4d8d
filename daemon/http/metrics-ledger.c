/* SPDX-License-Identifier: MIT */
/* The op totals GET /metrics exports, kept between scrapes. */
#include "http/metrics-ledger.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static struct metrics_op_total *ledger_find(struct metrics_op_ledger *l, const char *op) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->v[i].op, op))
                        return &l->v[i];
        return NULL;
}

/* op's totals, new if need be: -ENOSPC past max_ops (the op is not
 * exported), -ENOMEM. */
static int ledger_get(struct metrics_op_ledger *l, const char *op, struct metrics_op_total **ret) {
        struct metrics_op_total *t = ledger_find(l, op);
        if (t) {
                *ret = t;
                return 0;
        }
        if (l->max_ops && l->n >= l->max_ops)
                return -ENOSPC;
        if (!GREEDY_REALLOC(l->v, l->n + 1))
                return -ENOMEM;
        t = &l->v[l->n];
        *t = (struct metrics_op_total){ .op = strdup(op) };
        if (!t->op)
                return -ENOMEM;
        l->n++;
        *ret = t;
        return 0;
}

const struct op_agg *metrics_aggs_find(const struct op_aggs *a, const char *op) {
        for (size_t i = 0; a && i < a->n; i++)
                if (streq(a->v[i].op, op))
                        return &a->v[i];
        return NULL;
}

/* *ret = a + b (a fresh histogram). */
static int hist_sum_of(struct hist *ret, const struct hist *a, const struct hist *b) {
        hist_init(ret);
        int q = hist_merge(ret, a);
        if (q == 0 && b)
                q = hist_merge(ret, b);
        if (q < 0)
                hist_done(ret);
        return q;
}

int metrics_ledger_fold(struct metrics_op_ledger *l, const struct op_aggs *closed, int64_t until_ms) {
        /* every op's entry and bucket counts first, so a failure adds
         * nothing to any total */
        _cleanup_free_ struct hist *merged = calloc(closed->n ? closed->n : 1, sizeof *merged);
        if (!merged)
                return -ENOMEM;
        for (size_t i = 0; i < closed->n; i++) {
                struct metrics_op_total *t = NULL;
                int q = ledger_get(l, closed->v[i].op, &t);
                if (q == -ENOSPC) /* past max_ops: not exported at all */
                        continue;
                if (q == 0)
                        q = hist_sum_of(&merged[i], &t->closed_h, &closed->v[i].h);
                if (q == -ERANGE) /* a sum past any double: the buckets stay as they were */
                        q = hist_sum_of(&merged[i], &t->closed_h, NULL);
                if (q < 0) {
                        while (i > 0)
                                hist_done(&merged[--i]);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < closed->n; i++) {
                const struct op_agg *a = &closed->v[i];
                struct metrics_op_total *t = ledger_find(l, a->op);
                if (!t)
                        continue;
                hist_done(&t->closed_h);
                t->closed_h = merged[i];
                t->closed_count += a->count;
                t->closed_timings += a->h.count;
                t->closed_sum_ms += a->h.sum;
        }
        l->folded_until_ms = until_ms;
        l->caught_up = true;
        return 0;
}

static int op_total_cmp(const void *a, const void *b) {
        return strcmp(((const struct metrics_op_total *)a)->op, ((const struct metrics_op_total *)b)->op);
}

int metrics_ledger_export(struct metrics_op_ledger *l, const struct op_aggs *open) {
        for (size_t i = 0; open && i < open->n; i++) {
                struct metrics_op_total *t;
                if (ledger_get(l, open->v[i].op, &t) == -ENOMEM)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < l->n; i++) {
                struct metrics_op_total *t = &l->v[i];
                const struct op_agg *a = metrics_aggs_find(open, t->op);
                double count = t->closed_count + (a ? a->count : 0);
                uint64_t timings = t->closed_timings + (a ? a->h.count : 0);
                double sum = t->closed_sum_ms + (a ? a->h.sum : 0);
                if (count > t->out_count)
                        t->out_count = count;
                if (timings > t->out_timings)
                        t->out_timings = timings;
                if (sum > t->out_sum_ms)
                        t->out_sum_ms = sum;
                struct hist h;
                int q = hist_sum_of(&h, &t->closed_h, a ? &a->h : NULL);
                if (q == -ENOMEM)
                        return q;
                if (q < 0) /* -ERANGE: a sum past any double; the last buckets stay */
                        continue;
                if (h.count >= t->out_h.count) {
                        hist_done(&t->out_h);
                        t->out_h = h;
                } else
                        hist_done(&h);
        }
        /* by name: a stable order from scrape to scrape */
        if (l->n > 1)
                sort_array(l->v, l->n, sizeof *l->v, op_total_cmp);
        return 0;
}

struct metrics_op_ledger *metrics_ledger_ref(struct metrics_op_ledger *l) {
        l->refs++;
        return l;
}

void metrics_ledger_unref(struct metrics_op_ledger *l) {
        if (l && --l->refs == 0) {
                metrics_ledger_done(l);
                free(l);
        }
}

void metrics_ledger_done(struct metrics_op_ledger *l) {
        for (size_t i = 0; i < l->n; i++) {
                free(l->v[i].op);
                hist_done(&l->v[i].closed_h);
                hist_done(&l->v[i].out_h);
        }
        free(l->v);
        l->v = NULL;
        l->n = 0;
}

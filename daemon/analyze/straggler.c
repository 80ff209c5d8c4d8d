/* SPDX-License-Identifier: MIT */
#include "analyze/straggler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "util.h"

/* Terms below this share of the sum change no digit a verdict reads. */
#define SF_TERM_EPSILON 1e-17

/* Sum of C(n, j) / 2^n for j = k..n, for k >= n / 2, where the terms only
 * shrink: term(j + 1) = term(j) * (n - j) / (j + 1). */
static double upper_tail(uint64_t n, uint64_t k) {
        double dn = (double)n, dk = (double)k;
        double term = exp(lgamma(dn + 1) - lgamma(dk + 1) - lgamma(dn - dk + 1) - dn * M_LN2), sum = 0;
        for (uint64_t j = k; j <= n && term > 0; j++) {
                sum += term;
                if (term < sum * SF_TERM_EPSILON)
                        break;
                term *= (double)(n - j) / (double)(j + 1);
        }
        return sum > 1 ? 1 : sum;
}

double binomial_half_sf(uint64_t n, uint64_t k) {
        if (k == 0)
                return 1;
        if (k > n)
                return 0;
        if (2 * k >= n)
                return upper_tail(n, k);
        /* P(X >= k) = 1 - P(X <= k - 1) = 1 - P(X >= n - k + 1) by symmetry */
        return 1 - upper_tail(n, n - k + 1);
}

static int double_cmp(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* The median of the medians of ranks[j], j != i, with enough timings: the
 * mean of the middle two for an even count; NaN when there are none. Of
 * exactly two, the slower (two_side > 0) or the faster (< 0): see
 * straggler.h. */
static int others_median(const struct hist *ranks, size_t n, size_t i, int two_side, double *ret) {
        double *m = calloc(n ? n : 1, sizeof *m);
        size_t k = 0;
        if (!m)
                return -ENOMEM;
        for (size_t j = 0; j < n; j++)
                if (j != i && ranks[j].count >= STRAGGLER_MIN_COUNT)
                        m[k++] = hist_quantile(&ranks[j], 0.5);
        sort_array(m, k, sizeof *m, double_cmp);
        *ret = k == 0 ? NAN : k % 2 ? m[k / 2] : (m[k / 2 - 1] + m[k / 2]) / 2;
        if (k == 2 && two_side != 0)
                *ret = two_side > 0 ? m[1] : m[0];
        free(m);
        return 0;
}

/* Rank i's median and m, with the figures of a test unknown. */
static int verdict_begin(const struct hist *ranks, size_t n, size_t i, int two_side, struct straggler_verdict *v) {
        *v = (struct straggler_verdict){
                .p50_ms = hist_quantile(&ranks[i], 0.5),
                .slower_pct = NAN,
                .n = ranks[i].count,
                .p_value = NAN,
        };
        return others_median(ranks, n, i, two_side, &v->others_p50_ms);
}

int straggler_test(const struct hist *ranks, size_t n, size_t i, double threshold_pct, struct straggler_verdict *ret) {
        const struct hist *h = &ranks[i];
        struct straggler_verdict v;
        int r = verdict_begin(ranks, n, i, +1, &v);
        if (r < 0)
                return r;
        if (h->count >= STRAGGLER_MIN_COUNT && v.others_p50_ms > 0) {
                /* above m by more than m's bucket: see the header */
                v.above = hist_count_above(h, v.others_p50_ms * (1 + 2 * HIST_RELATIVE_ACCURACY));
                v.p_value = binomial_half_sf(v.n, v.above);
                v.slower_pct = (v.p50_ms / v.others_p50_ms - 1) * 100;
                v.tested = true;
                v.straggler = v.p_value < STRAGGLER_MAX_P && v.slower_pct > threshold_pct;
        }
        *ret = v;
        return 0;
}

int straggler_test_collective(const struct hist *ranks, size_t n, size_t i, double threshold_pct,
                              struct straggler_verdict *ret) {
        const struct hist *h = &ranks[i];
        struct straggler_verdict v;
        int r = verdict_begin(ranks, n, i, -1, &v);
        if (r < 0)
                return r;
        if (h->count >= STRAGGLER_MIN_COUNT && v.others_p50_ms > 0 && v.p50_ms > 0) {
                /* below m by more than m's bucket, as straggler_test() counts above */
                v.above = h->count - hist_count_above(h, v.others_p50_ms * (1 - 2 * HIST_RELATIVE_ACCURACY));
                v.p_value = binomial_half_sf(v.n, v.above);
                v.slower_pct = (v.p50_ms / v.others_p50_ms - 1) * 100;
                v.tested = true;
                /* the others spend more than threshold_pct longer in the op than it does */
                v.straggler = v.p_value < STRAGGLER_MAX_P && (v.others_p50_ms / v.p50_ms - 1) * 100 > threshold_pct;
        }
        *ret = v;
        return 0;
}

/* An op's ranks with enough timings, as a compact array (borrowed
 * histograms) and their indices. */
struct comparable {
        struct hist *h;
        size_t *who, n;
};

static int comparable_of(const struct straggler_op *op, size_t nranks, struct comparable *ret) {
        ret->h = calloc(nranks ? nranks : 1, sizeof *ret->h);
        ret->who = calloc(nranks ? nranks : 1, sizeof *ret->who);
        ret->n = 0;
        if (!ret->h || !ret->who)
                return -ENOMEM;
        for (size_t j = 0; j < nranks; j++)
                if (op->ranks[j].count >= STRAGGLER_MIN_COUNT) {
                        ret->h[ret->n] = op->ranks[j]; /* a shallow copy: only read */
                        ret->who[ret->n++] = j;
                }
        return 0;
}

static void comparable_done(struct comparable *c) {
        free(c->h);
        free(c->who);
}

static int add_finding(struct straggler_finding **v, size_t *n, struct straggler_finding f) {
        if (!GREEDY_REALLOC(*v, *n + 1))
                return -ENOMEM;
        (*v)[(*n)++] = f;
        return 0;
}

/* Is rank named as the one its peer waits for in some collective op of
 * two ranks? */
static bool waited_for_in(const struct straggler_finding *v, size_t n, size_t rank) {
        for (size_t i = 0; i < n; i++)
                if (v[i].kind == STRAGGLER_WAITED_FOR && v[i].rank == rank)
                        return true;
        return false;
}

/* One op's findings. pass 0: the collective ops, pass 1: the others (with
 * two ranks, they lean on what the collective ops said). */
static int judge_op(const struct straggler_op *ops, size_t o, size_t nranks, double threshold_pct,
                    struct straggler_finding **v, size_t *nv) {
        struct comparable c;
        int r = comparable_of(&ops[o], nranks, &c);
        for (size_t i = 0; r == 0 && c.n >= 2 && i < c.n; i++) {
                struct straggler_finding f = { .op = o, .rank = c.who[i], .kind = STRAGGLER_SLOWER };
                if (ops[o].collective) {
                        f.kind = STRAGGLER_WAITED_FOR;
                        r = straggler_test_collective(c.h, c.n, i, threshold_pct, &f.v);
                } else
                        r = straggler_test(c.h, c.n, i, threshold_pct, &f.v);
                if (r < 0 || !f.v.straggler)
                        continue;
                if (c.n == 2 && !ops[o].collective) {
                        size_t other = c.who[1 - i];
                        if (waited_for_in(*v, *nv, other))
                                continue; /* the other makes this one wait: it is its victim */
                        if (!waited_for_in(*v, *nv, f.rank)) {
                                f.kind = STRAGGLER_UNDECIDED;
                                f.other = other;
                        }
                }
                r = add_finding(v, nv, f);
        }
        comparable_done(&c);
        return r;
}

int straggler_judge(const struct straggler_op *ops, size_t nops, size_t nranks, double threshold_pct,
                    struct straggler_finding **ret, size_t *ret_n) {
        struct straggler_finding *v = NULL;
        size_t nv = 0;
        int r = 0;
        for (int pass = 0; pass < 2 && r == 0; pass++)
                for (size_t o = 0; o < nops && r == 0; o++)
                        if (ops[o].collective == (pass == 0))
                                r = judge_op(ops, o, nranks, threshold_pct, &v, &nv);
        if (r < 0) {
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = nv;
        return 0;
}

double straggler_relative_score(const struct hist *ranks, size_t n, size_t i) {
        if (ranks[i].count < STRAGGLER_MIN_COUNT)
                return NAN;
        double best = INFINITY, mine = hist_quantile(&ranks[i], 0.5);
        for (size_t j = 0; j < n; j++)
                if (ranks[j].count >= STRAGGLER_MIN_COUNT) {
                        double m = hist_quantile(&ranks[j], 0.5);
                        best = m < best ? m : best;
                }
        return mine > 0 ? best / mine : 1;
}

double straggler_individual_score(const struct hist *windows, size_t n) {
        if (n == 0 || windows[n - 1].count < STRAGGLER_MIN_COUNT)
                return NAN;
        double best = INFINITY, now = hist_quantile(&windows[n - 1], 0.5);
        for (size_t j = 0; j < n; j++)
                if (windows[j].count >= STRAGGLER_MIN_COUNT) {
                        double m = hist_quantile(&windows[j], 0.5);
                        best = m < best ? m : best;
                }
        return now > 0 ? best / now : 1;
}

/* SPDX-License-Identifier: MIT */
#include "analyze/straggler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

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
 * mean of the middle two for an even count; NaN when there are none. */
static int others_median(const struct hist *ranks, size_t n, size_t i, double *ret) {
        double *m = calloc(n ? n : 1, sizeof *m);
        size_t k = 0;
        if (!m)
                return -ENOMEM;
        for (size_t j = 0; j < n; j++)
                if (j != i && ranks[j].count >= STRAGGLER_MIN_COUNT)
                        m[k++] = hist_quantile(&ranks[j], 0.5);
        qsort(m, k, sizeof *m, double_cmp);
        *ret = k == 0 ? NAN : k % 2 ? m[k / 2] : (m[k / 2 - 1] + m[k / 2]) / 2;
        free(m);
        return 0;
}

int straggler_test(const struct hist *ranks, size_t n, size_t i, double threshold_pct, struct straggler_verdict *ret) {
        const struct hist *h = &ranks[i];
        struct straggler_verdict v = {
                .p50_ms = hist_quantile(h, 0.5),
                .slower_pct = NAN,
                .n = h->count,
                .p_value = NAN,
        };
        int r = others_median(ranks, n, i, &v.others_p50_ms);
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

/* SPDX-License-Identifier: MIT */
/* The straggler verdict of a job: is one rank's median of an op slower
 * than the other ranks' by more than a threshold, and by more than noise?
 *
 * Only histograms are at hand, not the timings, so a rank-sum test (Mann-
 * Whitney U) cannot be done exactly. A sign test can. The reference m is
 * the median of the other ranks' medians (each rank with at least
 * STRAGGLER_MIN_COUNT timings counts once): a single fast or slow rank
 * moves it little, where it would move a pooled median and make its
 * healthy peers look slow. If the rank's timings came from the same
 * distribution as a typical rank's, each is above m with probability 1/2,
 * so the count of its timings above m is Binomial(n, 1/2); the one-sided
 * p-value is P(X >= k). A histogram cannot tell which side of m the
 * values in m's own bucket lie: k counts only the timings above m by more
 * than a bucket's width, so bucketing can only make the test more
 * cautious, never raise a false alarm. A rank is a straggler when
 * p < STRAGGLER_MAX_P, it has at least STRAGGLER_MIN_COUNT timings, and
 * its median is more than threshold_pct above m. Comparing with the others
 * (never a fixed baseline) means ranks that are all equally slow have no
 * straggler. Pure: no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/histogram.h"

/* With fewer timings even all of them above m is not significant
 * (2^-10 ~ 0.001), and a median of a dozen values moves by more than
 * any threshold worth setting. */
#define STRAGGLER_MIN_COUNT 20
/* One test per rank and op: a few dozen in a job, so 0.001 keeps a false
 * alarm on a healthy job rare. */
#define STRAGGLER_MAX_P 0.001

/* P(X >= k) for X ~ Binomial(n, 1/2): 1 for k == 0, 0 for k > n. From
 * lgamma, so within about 1e-5 relative even for n near 2^32; the sum
 * stops when its terms no longer matter, O(sqrt(n)) of them. */
double binomial_half_sf(uint64_t n, uint64_t k);

struct straggler_verdict {
        bool straggler;
        bool tested;          /* false: too few timings, or no other rank with enough */
        double p50_ms;        /* the rank's median */
        double others_p50_ms; /* m: the median of the other ranks' medians; NaN if none */
        double slower_pct;    /* (p50 / others_p50 - 1) * 100; NaN when not tested */
        uint64_t n, above;    /* the rank's timings, and how many are above others_p50 */
        double p_value;       /* of the sign test; NaN when not tested */
};

/* The verdict of rank i among ranks[0..n) (histograms of one op).
 * -ENOMEM, else 0. */
int straggler_test(const struct hist *ranks, size_t n, size_t i, double threshold_pct, struct straggler_verdict *ret);

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
        uint64_t n, above;    /* the rank's timings, and how many are on the far side of
                               * others_p50: above it, below it in a collective op */
        double p_value;       /* of the sign test; NaN when not tested */
};

/* The verdict of rank i among ranks[0..n) (histograms of one op) in an op
 * of the ranks' own work: is it slower than the others? m is the median of
 * the others' medians; with exactly two others the slower of the two, for
 * one of them may be the rank the other waits for (see below), and a mean
 * would be pulled halfway to it. -ENOMEM, else 0. */
int straggler_test(const struct hist *ranks, size_t n, size_t i, double threshold_pct, struct straggler_verdict *ret);

/* The same in an op that holds a collective (an all-reduce, a barrier):
 * there the rank that the others wait for arrives last and waits least, so
 * it is the fastest, and its peers' timings hold the wait. Rank i is named
 * (straggler) when m, the median of the others' medians (with two others,
 * the faster), is more than threshold_pct above its median, and a sign test
 * on its timings below m rejects "a typical rank" at p < STRAGGLER_MAX_P.
 * slower_pct is then negative: how much less it spends in the op. */
int straggler_test_collective(const struct hist *ranks, size_t n, size_t i, double threshold_pct,
                              struct straggler_verdict *ret);

/* What a job's verdict says of one rank in one op. */
enum straggler_kind {
        STRAGGLER_SLOWER,     /* slower than the others in an op of its own work */
        STRAGGLER_WAITED_FOR, /* in a collective op, the others wait for it */
        STRAGGLER_UNDECIDED,  /* two ranks differ, and nothing tells which is slow */
};

/* One op of a job: each rank's histogram (count 0: the rank has no
 * timings of it), the same rank order in every op. */
struct straggler_op {
        const struct hist *ranks;
        bool collective;
};

struct straggler_finding {
        size_t op, rank; /* indices into ops[] and ranks */
        enum straggler_kind kind;
        size_t other; /* UNDECIDED: the other of the two ranks */
        struct straggler_verdict v;
};

/* The verdicts of a job: in each op the ranks with at least
 * STRAGGLER_MIN_COUNT timings are compared. With three or more, a rank
 * slower than the others in an op of its own work, or one the others wait
 * for in a collective op, is named; the ranks that wait for it are not.
 * With two, a slower rank and a waiting one look alike: a rank is named in
 * a collective op where the other waits for it, and in an op of its own
 * work only when a collective op names it too; a difference nothing
 * settles is UNDECIDED (its v: the slower rank's test). *ret: the
 * findings, free() them. -ENOMEM. */
int straggler_judge(const struct straggler_op *ops, size_t nops, size_t nranks, double threshold_pct,
                    struct straggler_finding **ret, size_t *ret_n);

/* The straggler scores of NVIDIA's resiliency extension, so that the
 * thresholds people use with those carry over: a reference median over
 * the rank's median, in (0, 1], 1 being as fast as the reference.
 * Relative: the reference is the fastest rank's median (of ranks with at
 * least STRAGGLER_MIN_COUNT timings); NaN when rank i has fewer. */
double straggler_relative_score(const struct hist *ranks, size_t n, size_t i);
/* Individual: the reference is the rank's own best median over recent
 * windows (windows[0..n), oldest first, each with STRAGGLER_MIN_COUNT
 * timings or left out), over its median in the latest window (the last);
 * NaN when the latest has too few. */
double straggler_individual_score(const struct hist *windows, size_t n);

/* SPDX-License-Identifier: MIT */
/* A mergeable log-bucketed histogram (DDSketch family) for latencies in
 * milliseconds. Bucket i holds values in (gamma^(i-1), gamma^i] with
 * gamma = (1 + a) / (1 - a), a = HIST_RELATIVE_ACCURACY, so any quantile is
 * returned within a relative error of a (0.5%); count, sum, min and max are
 * exact; sum of squares gives the standard deviation. Merging two
 * histograms adds their buckets: the merge of the slices of a window is
 * the histogram of the window, in any order.
 *
 * Values below HIST_MIN_VALUE_MS (1 ns) go to a zero bucket; values above
 * HIST_MAX_VALUE_MS (about 11.6 days) are clamped into the last bucket
 * (min/max/sum stay exact). NaN, infinities and negatives are rejected by
 * hist_add (-EINVAL).
 *
 * Counts live in a dense window [lo, lo + n) of bucket indexes that grows
 * as needed: latencies cluster, so a few hundred buckets at most. Pure
 * data structure: no I/O, no globals. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HIST_RELATIVE_ACCURACY 0.005
#define HIST_MIN_VALUE_MS 1e-6
#define HIST_MAX_VALUE_MS 1e9

struct hist {
        uint64_t count;      /* all values, zero bucket included */
        uint64_t zero_count; /* values < HIST_MIN_VALUE_MS */
        double sum, sum_sq, min, max;
        int32_t lo;       /* bucket index of counts[0] */
        uint32_t n;       /* buckets in the window */
        uint64_t *counts; /* malloc'ed, n entries */
};

void hist_init(struct hist *h);
void hist_done(struct hist *h);
void hist_reset(struct hist *h); /* empty, keeps the allocation */

/* Adds `weight` values equal to v_ms (weight 1 normally; StatsD sample
 * rates give more). -EINVAL for NaN/inf/negative, -ENOMEM. */
int hist_add(struct hist *h, double v_ms, uint64_t weight);
/* dst += src. */
int hist_merge(struct hist *dst, const struct hist *src);

/* q in [0, 1]. Returns NaN for an empty histogram. The result is within
 * HIST_RELATIVE_ACCURACY of the exact q-quantile (the value of rank
 * floor(q * (count - 1)) in sorted order, "lower" interpolation), and
 * always within [min, max]. */
double hist_quantile(const struct hist *h, double q);
/* How many values are above v: exact when v is below min or at or above
 * max; otherwise a bucket whose range straddles v counts whole, on the side
 * of its representative value (the value quantiles return for it), so a
 * value within HIST_RELATIVE_ACCURACY of v may be counted on the wrong
 * side. Consistent with hist_quantile: at least one value (max) is above
 * v when max > v, at least one (min) is not when min <= v. */
uint64_t hist_count_above(const struct hist *h, double v);
double hist_mean(const struct hist *h);   /* NaN if empty */
double hist_stddev(const struct hist *h); /* population stddev; NaN if empty */

/* Compact byte encoding for storage (varints; only non-empty buckets):
 * hist_encode returns a malloc'ed buffer; hist_decode validates everything
 * (-EINVAL on any malformed input, never reads past len) and replaces *h. */
int hist_encode(const struct hist *h, uint8_t **ret, size_t *ret_len);
int hist_decode(struct hist *h, const uint8_t *buf, size_t len);

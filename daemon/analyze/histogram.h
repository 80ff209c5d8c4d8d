/* SPDX-License-Identifier: MIT */
/* A mergeable base-2 exponential histogram for latencies in milliseconds:
 * the bucket scheme of Prometheus native histograms and OpenTelemetry
 * exponential histograms, so a bucket is the same bucket here, in
 * Prometheus and in any OTLP backend, and merging is exact.
 *
 * The promise exporters rely on: counts[i] is the Prometheus bucket of
 * index k = lo + i at schema HIST_SCHEMA over SECONDS, i.e. it counts the
 * values v_ms with 2^((k-1)/2^HIST_SCHEMA) < v_ms / 1000 <= 2^(k/2^HIST_SCHEMA)
 * (upper-inclusive; hist_bucket_upper_s(k) is that upper bound).
 * zero_count counts the values below HIST_ZERO_THRESHOLD_S seconds
 * (HIST_MIN_VALUE_MS, 1 ns), zero included; they are in no other bucket.
 *
 * Any quantile is returned within a relative error of
 * HIST_RELATIVE_ACCURACY (0.271%); count, sum, min and max are exact; sum
 * of squares gives the standard deviation. Merging two histograms adds
 * their buckets: the merge of the slices of a window is the histogram of
 * the window, in any order.
 *
 * Values above HIST_MAX_VALUE_MS (about 11.6 days) are clamped into the
 * bucket of HIST_MAX_VALUE_MS (min/max/sum stay exact). NaN, infinities
 * and negatives are rejected by hist_add (-EINVAL).
 *
 * Counts live in a dense window [lo, lo + n) of bucket indexes that grows
 * as needed: latencies cluster, so a few hundred buckets at most. Pure
 * data structure: no I/O, no globals. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HIST_SCHEMA 7 /* 2^HIST_SCHEMA buckets per doubling */
/* (2^(1/128) - 1) / (2^(1/128) + 1) = 0.0027076, rounded up */
#define HIST_RELATIVE_ACCURACY 0.002708
#define HIST_MIN_VALUE_MS 1e-6
#define HIST_ZERO_THRESHOLD_S 1e-9 /* HIST_MIN_VALUE_MS in seconds */
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
/* The upper bound in seconds of bucket k, 2^(k/2^HIST_SCHEMA): the largest
 * double not above it, so v <= hist_bucket_upper_s(k) exactly when v is at
 * most the real bound. */
double hist_bucket_upper_s(int32_t k);
/* The value quantiles give for the values of counts[i] (within [min, max]). */
double hist_bucket_rep_ms(const struct hist *h, uint32_t i);
double hist_mean(const struct hist *h);   /* NaN if empty */
double hist_stddev(const struct hist *h); /* population stddev; NaN if empty */

/* Compact byte encoding for storage (varints; only non-empty buckets):
 * hist_encode returns a malloc'ed buffer, HIST_ENCODING_VERSION in its first
 * byte; hist_decode validates everything (-EINVAL on any malformed input,
 * never reads past len) and replaces *h. hist_decode also reads version 1,
 * the log buckets of gamma = 1.005/0.995 over milliseconds that came before:
 * each old bucket's count goes whole to the bucket of the value quantiles
 * gave for it (count, sum, min, max stay exact), so quantiles of such a
 * histogram are within (1.005 * (1 + HIST_RELATIVE_ACCURACY) - 1), 0.78%. */
#define HIST_ENCODING_VERSION 2
int hist_encode(const struct hist *h, uint8_t **ret, size_t *ret_len);
int hist_decode(struct hist *h, const uint8_t *buf, size_t len);
/* hist_merge() of what buf encodes, without decoding it into a histogram
 * of its own: -EINVAL (dst untouched) for anything hist_decode refuses. */
int hist_merge_encoded(struct hist *dst, const uint8_t *buf, size_t len);

/* SPDX-License-Identifier: MIT */
/* daemon/analyze/histogram.c: every bucket bound of schema 7 against
 * 2^(k/128) s and values exactly on them, Prometheus's index of known
 * values, quantile accuracy against exact sorted quantiles on four
 * distributions, exact count/sum/min/max/mean/stddev, merge order, extreme
 * values and rejected values (test-histogram-encoding.c: the encoding, and
 * the older one). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/histogram.h"
#include "hist-values.h"
#include "tap.h"
#include "util.h"

#define N_VALUES 100000
#define EPS_REL 1e-9 /* on top of HIST_RELATIVE_ACCURACY: floating error at bucket edges */

static const double quantiles[] = { 0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1 };

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double exact_quantile(const double *sorted, size_t n, double q) {
        return sorted[(size_t)floor(q * (double)(n - 1))];
}

static double rel_err(double got, double want) {
        if (got == want)
                return 0;
        return fabs(got - want) / fabs(want);
}

/* ---- helpers ------------------------------------------------------------ */

/* bucket_at(), same_buckets() and same_bits() come with the fuzz target. */
#include "fuzz/fuzz-histogram.c"

static bool hist_equal(const struct hist *a, const struct hist *b) {
        return same_buckets(a, b) && same_bits(a->sum, b->sum) && same_bits(a->sum_sq, b->sum_sq) &&
               same_bits(a->min, b->min) && same_bits(a->max, b->max);
}

/* The one bucket index a histogram of a single value >= 1 ns holds. */
static int64_t only_bucket(const struct hist *h) {
        int64_t idx = INT64_MIN;
        for (uint32_t k = 0; k < h->n; k++)
                if (h->counts[k]) {
                        if (idx != INT64_MIN)
                                return INT64_MAX;
                        idx = (int64_t)h->lo + k;
                }
        return idx;
}

/* ---- accuracy and exact statistics --------------------------------------- */

static void test_distribution(const struct dist *d, uint64_t seed) {
        double *v = gen_values(d, seed, N_VALUES);
        struct hist h;
        hist_init(&h);
        fill(&h, v, N_VALUES);

        /* exact statistics, computed apart */
        long double sum = 0, sum_sq = 0;
        for (size_t i = 0; i < N_VALUES; i++)
                sum += v[i];
        long double mean = sum / N_VALUES;
        for (size_t i = 0; i < N_VALUES; i++)
                sum_sq += (v[i] - mean) * (v[i] - mean);
        double sd = (double)sqrtl(sum_sq / N_VALUES);

        qsort(v, N_VALUES, sizeof v[0], cmp_double);
        CHECK_EQ_INT(h.count, N_VALUES);
        CHECK_EQ_INT(h.zero_count, 0);
        CHECK_EQ_INT(bucket_total(&h), N_VALUES);
        CHECK(h.min == v[0]);
        CHECK(h.max == v[N_VALUES - 1]);
        CHECK(rel_err(h.sum, (double)sum) <= 1e-9);
        CHECK(rel_err(hist_mean(&h), (double)mean) <= 1e-6);
        CHECK(rel_err(hist_stddev(&h), sd) <= 1e-6);

        double worst = 0, worst_q = 0;
        for (size_t k = 0; k < ELEMENTSOF(quantiles); k++) {
                double q = quantiles[k];
                double want = exact_quantile(v, N_VALUES, q), got = hist_quantile(&h, q);
                double e = rel_err(got, want);
                if (e > HIST_RELATIVE_ACCURACY + EPS_REL)
                        fprintf(stderr, "%s q=%g: got %.9g, exact %.9g, error %.6f\n", d->name, q, got, want, e);
                CHECK(e <= HIST_RELATIVE_ACCURACY + EPS_REL);
                CHECK(got >= h.min && got <= h.max);
                if (e > worst) {
                        worst = e;
                        worst_q = q;
                }
        }
        /* and every percentile in between, not just the listed ones */
        double worst_all = 0;
        for (int p = 0; p <= 1000; p++) {
                double q = p / 1000.0;
                double e = rel_err(hist_quantile(&h, q), exact_quantile(v, N_VALUES, q));
                CHECK(e <= HIST_RELATIVE_ACCURACY + EPS_REL);
                if (e > worst_all)
                        worst_all = e;
        }
        printf("%-18s worst relative error %.5f (q=%g), over 1001 quantiles %.7f; buckets %u (window), "
               "mean %.4g sd %.4g\n",
               d->name, worst, worst_q, worst_all, h.n, hist_mean(&h), hist_stddev(&h));

        /* round trip */
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        CHECK_EQ_INT(hist_encode(&h, &buf, &len), 0);
        struct hist back;
        hist_init(&back);
        CHECK_EQ_INT(hist_decode(&back, buf, len), 0);
        CHECK(hist_equal(&h, &back));
        for (size_t k = 0; k < ELEMENTSOF(quantiles); k++)
                CHECK(same_bits(hist_quantile(&h, quantiles[k]), hist_quantile(&back, quantiles[k])));
        printf("%-18s encoded %zu bytes\n", d->name, len);

        hist_done(&back);
        hist_done(&h);
        free(v);
}

/* Bucket k of schema 7 in seconds: (2^((k-1)/128), 2^(k/128)], from the
 * formula in long double. */
static long double bound_exact(int32_t k) {
        return exp2l((long double)k / 128.0L);
}

/* A millisecond value whose /1000 is exactly s, if there is one near. */
static bool ms_for_seconds(double s, double *ret) {
        double v = s * 1000.0;
        for (int k = 0; k < 4; k++, v = nextafter(v, 0))
                ;
        for (int k = 0; k < 8; k++, v = nextafter(v, INFINITY))
                if (v / 1000.0 == s) {
                        *ret = v;
                        return true;
                }
        return false;
}

static int64_t index_of(struct hist *h, double v_ms) {
        hist_reset(h);
        CHECK_EQ_INT(hist_add(h, v_ms, 1), 0);
        return only_bucket(h);
}

/* Every upper bound against the formula; values exactly on a bound (in
 * seconds) go to the lower bucket, the next double up to the next one. */
static void test_bounds(void) {
        struct hist h;
        hist_init(&h);
        unsigned on_bound = 0;
        for (int32_t k = -3826; k <= 2552; k++) {
                double up = hist_bucket_upper_s(k);
                long double exact = bound_exact(k);
                CHECK((long double)up <= exact && (long double)nextafter(up, INFINITY) > exact);
                if (k % 128 == 0)
                        CHECK(up == ldexp(1.0, k / 128)); /* powers of two, exactly */
                double v;
                if (k > -3826 && k < 2552 && ms_for_seconds(up, &v)) {
                        on_bound++;
                        CHECK_EQ_INT(index_of(&h, v), k);
                        while (v / 1000.0 == up) /* the next value up, in seconds */
                                v = nextafter(v, INFINITY);
                        CHECK(v / 1000.0 <= nextafter(nextafter(up, INFINITY), INFINITY));
                        CHECK_EQ_INT(index_of(&h, v), k + 1);
                }
        }
        printf("bounds: %u values exactly on a bound\n", on_bound);
        CHECK(on_bound > 1000);

        /* Prometheus's index for known values: 1 s is bucket 0's upper bound,
         * 2 s bucket 128's */
        static const struct {
                double ms;
                int64_t k;
        } known[] = {
                { 1000, 0 },        { 2000, 128 },     { 500, -128 },        { 250, -256 },  { 1e6, 1276 },
                { 1, -1275 },       { 100, -425 },     { 3000, 203 },        { 12.3, -812 }, { 60000, 757 },
                { 1000.000001, 1 }, { 999.999999, 0 }, { 2000.000001, 129 },
        };
        for (size_t k = 0; k < ELEMENTSOF(known); k++) {
                if (index_of(&h, known[k].ms) != known[k].k)
                        fprintf(stderr, "%g ms: bucket %" PRIi64 ", want %" PRIi64 "\n", known[k].ms, only_bucket(&h),
                                known[k].k);
                CHECK_EQ_INT(only_bucket(&h), known[k].k);
        }
        hist_done(&h);
}

/* Bucket indexes of random values, the range's ends, representative values. */
static void test_buckets(void) {
        struct hist h;
        hist_init(&h);

        CHECK_EQ_INT(index_of(&h, HIST_MIN_VALUE_MS), -3826);
        CHECK_EQ_INT(h.zero_count, 0);
        CHECK_EQ_INT(index_of(&h, HIST_MAX_VALUE_MS), 2552);
        CHECK(rel_err(HIST_ZERO_THRESHOLD_S * 1000.0, HIST_MIN_VALUE_MS) < 1e-15);
        CHECK(fabs(HIST_RELATIVE_ACCURACY - (exp2(1.0 / 128) - 1) / (exp2(1.0 / 128) + 1)) < 1e-6);
        CHECK(HIST_RELATIVE_ACCURACY >= (exp2(1.0 / 128) - 1) / (exp2(1.0 / 128) + 1));

        /* index(v) = ceil(128 log2(v / 1000)), away from the edges where the
         * last bit of log2() may go either way */
        rng_seed(7);
        for (int k = 0; k < 20000; k++) {
                double v = exp((rng_unit() * 35.0 - 13.8)); /* 1e-6 .. 1.6e9 */
                if (v < HIST_MIN_VALUE_MS || v > HIST_MAX_VALUE_MS)
                        continue;
                double x = 128.0 * log2(v / 1000.0);
                if (fabs(x - nearbyint(x)) < 1e-9)
                        continue;
                CHECK_EQ_INT(index_of(&h, v), (int64_t)ceil(x));
                CHECK(rel_err(hist_quantile(&h, 0.5), v) == 0); /* clamped to min == max */
        }
        /* and the definition itself, edges included: upper(k - 1) < v <= upper(k) */
        for (int k = 0; k < 200000; k++) {
                double v = exp((rng_unit() * 34.5 - 13.8)), s = v / 1000.0;
                int64_t i = index_of(&h, v);
                CHECK(s <= hist_bucket_upper_s((int32_t)i) && s > hist_bucket_upper_s((int32_t)i - 1));
        }

        /* representative value of a bucket, seen through a wide histogram:
         * 2 lo hi / (lo + hi), within the accuracy of all its values */
        hist_reset(&h);
        CHECK_EQ_INT(hist_add(&h, 1e-3, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 1e6, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 7.0, 1), 0);
        double hi = 1000.0 * exp2(ceil(128.0 * log2(7.0 / 1000.0)) / 128.0), lo = hi / exp2(1.0 / 128);
        double rep = 2 * lo * hi / (lo + hi);
        CHECK(rel_err(hist_quantile(&h, 0.5), rep) < 1e-12);
        CHECK(rel_err(hist_quantile(&h, 0.5), 7.0) <= HIST_RELATIVE_ACCURACY + EPS_REL);
        CHECK(rel_err(rep, lo) <= HIST_RELATIVE_ACCURACY && rel_err(rep, hi) <= HIST_RELATIVE_ACCURACY);
        CHECK(hist_quantile(&h, 0) == 1e-3);
        CHECK(hist_quantile(&h, 1) == 1e6);
        hist_done(&h);
}

/* Windows that grow downwards, upwards and both, value by value. */
static void test_growth(void) {
        struct hist up, down, zig, all;
        hist_init(&up);
        hist_init(&down);
        hist_init(&zig);
        hist_init(&all);
        for (int k = 0; k <= 3000; k++) {
                double v = 1e-6 * pow(10.0, k * 15.0 / 3000.0); /* 1e-6 .. 1e9 */
                CHECK_EQ_INT(hist_add(&up, v, 1), 0);
                double w = 1e-6 * pow(10.0, (3000 - k) * 15.0 / 3000.0);
                CHECK_EQ_INT(hist_add(&down, w, 1), 0);
                double z = 1e-6 * pow(10.0, (k % 2 ? k : 3000 - k) * 15.0 / 3000.0);
                CHECK_EQ_INT(hist_add(&zig, z, 1), 0);
        }
        CHECK(same_buckets(&up, &down));
        CHECK(same_buckets(&up, &zig));
        CHECK(up.n <= 2552 + 3826 + 1);
        CHECK(up.lo >= -3826 && down.lo >= -3826);
        CHECK_EQ_INT(bucket_total(&up), 3001);
        CHECK(hist_quantile(&up, 0) == up.min && hist_quantile(&up, 1) == up.max);
        CHECK_EQ_INT(hist_merge(&all, &up), 0);
        CHECK_EQ_INT(hist_merge(&all, &down), 0);
        CHECK_EQ_INT(all.count, 6002);
        CHECK_EQ_INT(bucket_total(&all), 6002);
        hist_done(&up);
        hist_done(&down);
        hist_done(&zig);
        hist_done(&all);
}

/* ---- merge ---------------------------------------------------------------- */

static void test_merge(void) {
        enum { SHARDS = 10, PER = N_VALUES / SHARDS };
        double *v = gen_values(&dists[1], 42, N_VALUES);
        struct hist shard[SHARDS], whole;

        hist_init(&whole);
        fill(&whole, v, N_VALUES);
        for (int s = 0; s < SHARDS; s++) {
                hist_init(&shard[s]);
                fill(&shard[s], v + (size_t)s * PER, PER);
        }

        static const int orders[3][SHARDS] = {
                { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 },
                { 9, 8, 7, 6, 5, 4, 3, 2, 1, 0 },
                { 4, 0, 7, 2, 9, 5, 1, 8, 3, 6 },
        };
        struct hist merged[4];
        for (int o = 0; o < 3; o++) {
                hist_init(&merged[o]);
                for (int s = 0; s < SHARDS; s++)
                        CHECK_EQ_INT(hist_merge(&merged[o], &shard[orders[o][s]]), 0);
        }
        /* as a tree: ((0 1)(2 3))((4 5)(6 7))(8 9), on copies */
        struct hist level[SHARDS];
        for (int s = 0; s < SHARDS; s++) {
                hist_init(&level[s]);
                CHECK_EQ_INT(hist_merge(&level[s], &shard[s]), 0);
                CHECK(hist_equal(&level[s], &shard[s]));
        }
        for (int width = 1; width < SHARDS; width *= 2)
                for (int s = 0; s + width < SHARDS; s += 2 * width)
                        CHECK_EQ_INT(hist_merge(&level[s], &level[s + width]), 0);
        merged[3] = level[0];
        for (int s = 1; s < SHARDS; s++)
                hist_done(&level[s]);

        for (int o = 0; o < 4; o++) {
                CHECK(same_buckets(&merged[o], &whole));
                CHECK(merged[o].min == whole.min && merged[o].max == whole.max);
                CHECK(rel_err(merged[o].sum, whole.sum) <= 1e-12);
                CHECK(rel_err(merged[o].sum_sq, whole.sum_sq) <= 1e-12);
                for (size_t k = 0; k < ELEMENTSOF(quantiles); k++)
                        CHECK(same_bits(hist_quantile(&merged[o], quantiles[k]), hist_quantile(&whole, quantiles[k])));
                CHECK(rel_err(hist_stddev(&merged[o]), hist_stddev(&whole)) <= 1e-9);
        }

        /* empty source, empty destination */
        struct hist empty, copy;
        hist_init(&empty);
        hist_init(&copy);
        CHECK_EQ_INT(hist_merge(&copy, &empty), 0);
        CHECK_EQ_INT(copy.count, 0);
        CHECK_EQ_INT(hist_merge(&copy, &whole), 0);
        CHECK(hist_equal(&copy, &whole));
        CHECK_EQ_INT(hist_merge(&copy, &empty), 0);
        CHECK(hist_equal(&copy, &whole));
        /* self-merge doubles */
        CHECK_EQ_INT(hist_merge(&copy, &copy), 0);
        CHECK_EQ_INT(copy.count, 2 * N_VALUES);
        CHECK(copy.min == whole.min && copy.max == whole.max);
        CHECK(same_bits(hist_quantile(&copy, 0.5), hist_quantile(&whole, 0.5)));
        for (int64_t i = whole.lo; i < (int64_t)whole.lo + whole.n; i++)
                CHECK(bucket_at(&copy, i) == 2 * bucket_at(&whole, i));

        /* disjoint windows, both ways round, zero buckets included */
        struct hist a, b, ab, ba;
        hist_init(&a);
        hist_init(&b);
        hist_init(&ab);
        hist_init(&ba);
        CHECK_EQ_INT(hist_add(&a, 1e-3, 3), 0);
        CHECK_EQ_INT(hist_add(&a, 0, 2), 0);
        CHECK_EQ_INT(hist_add(&b, 3.6e6, 5), 0);
        CHECK_EQ_INT(hist_add(&b, 1e12, 1), 0);
        CHECK_EQ_INT(hist_merge(&ab, &a), 0);
        CHECK_EQ_INT(hist_merge(&ab, &b), 0);
        CHECK_EQ_INT(hist_merge(&ba, &b), 0);
        CHECK_EQ_INT(hist_merge(&ba, &a), 0);
        CHECK(hist_equal(&ab, &ba));
        CHECK_EQ_INT(ab.count, 11);
        CHECK_EQ_INT(ab.zero_count, 2);
        CHECK(ab.min == 0 && ab.max == 1e12);
        CHECK(hist_quantile(&ab, 0) == 0);
        CHECK(rel_err(hist_quantile(&ab, 0.2), 1e-3) <= HIST_RELATIVE_ACCURACY + EPS_REL); /* rank 2 */
        CHECK(rel_err(hist_quantile(&ab, 0.5), 3.6e6) <= HIST_RELATIVE_ACCURACY + EPS_REL);
        /* b's window stays where it is, a's gets added below */
        CHECK_EQ_INT(hist_merge(&b, &a), 0);
        CHECK(hist_equal(&b, &ab));

        hist_done(&a);
        hist_done(&b);
        hist_done(&ab);
        hist_done(&ba);
        hist_done(&empty);
        hist_done(&copy);
        for (int o = 0; o < 4; o++)
                hist_done(&merged[o]);
        for (int s = 0; s < SHARDS; s++)
                hist_done(&shard[s]);
        hist_done(&whole);
        free(v);
}

/* ---- extremes and rejected values ---------------------------------------- */

/* The empty histogram; rejected values leave it alone. */
static void test_empty_and_rejected(void) {
        struct hist h;
        hist_init(&h);
        CHECK(isnan(hist_quantile(&h, 0.5)));
        CHECK(isnan(hist_quantile(&h, 0)));
        CHECK(isnan(hist_mean(&h)));
        CHECK(isnan(hist_stddev(&h)));

        /* rejected values leave the histogram alone */
        static const double bad[] = { NAN, -NAN, INFINITY, -INFINITY, -1.0, -1e-300, -5e-324, -1e300 };
        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                CHECK_EQ_INT(hist_add(&h, bad[k], 1), -EINVAL);
                CHECK_EQ_INT(hist_add(&h, bad[k], 0), -EINVAL);
        }
        CHECK_EQ_INT(h.count, 0);
        CHECK(h.sum == 0 && h.min == 0 && h.max == 0);
        CHECK_EQ_INT(hist_add(&h, 5.0, 0), 0); /* weight 0: nothing */
        CHECK_EQ_INT(h.count, 0);
        hist_done(&h);
}

/* 0, sub-nanosecond values and -0.0: the zero bucket. */
static void test_zero_bucket(void) {
        struct hist h;
        hist_init(&h);
        /* 0 and sub-nanosecond: zero bucket, quantile clamped to min */
        CHECK_EQ_INT(hist_add(&h, 1e-7, 1), 0);
        CHECK_EQ_INT(h.zero_count, 1);
        CHECK_EQ_INT(bucket_total(&h), 0);
        CHECK(hist_quantile(&h, 0.5) == 1e-7);
        CHECK(hist_quantile(&h, 0) == 1e-7 && hist_quantile(&h, 1) == 1e-7);
        CHECK_EQ_INT(hist_add(&h, 0, 1), 0);
        CHECK_EQ_INT(h.zero_count, 2);
        CHECK(h.min == 0 && h.max == 1e-7);
        CHECK(hist_quantile(&h, 1) == 1e-7); /* the last rank is max, exactly */
        CHECK_EQ_INT(hist_add(&h, 1e-7, 1), 0);
        CHECK(hist_quantile(&h, 0.5) == 0); /* rank 1 of 3: the zero bucket's value is 0 */
        CHECK_EQ_INT(hist_add(&h, 5.0, 1), 0);
        CHECK(hist_quantile(&h, 0) == 0);
        CHECK(rel_err(hist_quantile(&h, 1), 5.0) <= HIST_RELATIVE_ACCURACY + EPS_REL);
        CHECK(hist_quantile(&h, 1) <= 5.0);

        /* -0.0 is stored as +0 */
        hist_reset(&h);
        CHECK_EQ_INT(hist_add(&h, -0.0, 1), 0);
        CHECK(h.min == 0 && !signbit(h.min) && !signbit(h.max) && !signbit(h.sum));
        CHECK(hist_quantile(&h, 0.5) == 0);
        hist_done(&h);
}

/* From a microsecond to beyond HIST_MAX_VALUE_MS. */
static void test_value_range(void) {
        struct hist h;
        hist_init(&h);
        CHECK_EQ_INT(hist_add(&h, 1e-3, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 1e-3, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 3.6e6, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 3.6e6, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 3.6e6, 1), 0);
        CHECK(rel_err(hist_quantile(&h, 0.25), 1e-3) <= HIST_RELATIVE_ACCURACY + EPS_REL);
        CHECK(rel_err(hist_quantile(&h, 0.5), 3.6e6) <= HIST_RELATIVE_ACCURACY + EPS_REL);
        CHECK(hist_quantile(&h, 0) == 1e-3 && hist_quantile(&h, 1) == 3.6e6);
        CHECK(rel_err(h.sum, 2e-3 + 3 * 3.6e6) < 1e-15);

        /* beyond HIST_MAX_VALUE_MS: last bucket, max and sum exact */
        hist_reset(&h);
        CHECK_EQ_INT(hist_add(&h, 1e12, 1), 0);
        CHECK_EQ_INT(only_bucket(&h), 2552);
        CHECK(h.max == 1e12 && h.min == 1e12 && h.sum == 1e12);
        CHECK(hist_quantile(&h, 0.5) == 1e12); /* clamped into [min, max] */
        CHECK_EQ_INT(hist_add(&h, 2e9, 1), 0);
        CHECK_EQ_INT(only_bucket(&h), 2552);
        CHECK_EQ_INT(hist_add(&h, 1.0, 1), 0);
        CHECK(h.max == 1e12 && h.min == 1.0 && h.sum == 1e12 + 2e9 + 1.0);
        CHECK_EQ_INT(bucket_at(&h, 2552), 2);
        CHECK(hist_quantile(&h, 1) == 1e12);
        CHECK_EQ_INT(hist_add(&h, 2e9, 1), 0);
        double top = hist_quantile(&h, 0.5); /* rank 1 of 4: 2e9, in the last bucket */
        CHECK(top >= HIST_MAX_VALUE_MS * (1 - HIST_RELATIVE_ACCURACY) &&
              top <= HIST_MAX_VALUE_MS * (1 + HIST_RELATIVE_ACCURACY) * (1 + HIST_RELATIVE_ACCURACY));
        CHECK(hist_quantile(&h, 0) == 1.0);
        hist_done(&h);
}

/* Weights, a single value, quantiles out of range. */
static void test_weights(void) {
        struct hist h;
        hist_init(&h);
        CHECK_EQ_INT(hist_add(&h, 5.0, 1000), 0);
        CHECK_EQ_INT(hist_add(&h, 10.0, 1), 0);
        CHECK_EQ_INT(h.count, 1001);
        CHECK(h.sum == 5010.0 && h.sum_sq == 25100.0);
        CHECK(rel_err(hist_quantile(&h, 0.5), 5.0) <= HIST_RELATIVE_ACCURACY + EPS_REL);
        CHECK(rel_err(hist_quantile(&h, 0.999), 5.0) <= HIST_RELATIVE_ACCURACY + EPS_REL); /* rank 999 */
        CHECK(rel_err(hist_quantile(&h, 1), 10.0) <= HIST_RELATIVE_ACCURACY + EPS_REL);
        CHECK(rel_err(hist_mean(&h), 5010.0 / 1001) < 1e-15);
        double m = 5010.0 / 1001, sd = sqrt((1000 * (5 - m) * (5 - m) + (10 - m) * (10 - m)) / 1001);
        CHECK(rel_err(hist_stddev(&h), sd) < 1e-9);
        CHECK_EQ_INT(hist_add(&h, 0, 7), 0);
        CHECK_EQ_INT(h.zero_count, 7);
        CHECK(hist_quantile(&h, 0) == 0);

        /* a single value: stddev 0, every quantile exact */
        hist_reset(&h);
        CHECK_EQ_INT(hist_add(&h, 3.3, 1), 0);
        CHECK(hist_stddev(&h) == 0 && hist_mean(&h) == 3.3 && hist_quantile(&h, 0.7) == 3.3);

        /* quantile argument out of range */
        CHECK(isnan(hist_quantile(&h, -0.1)));
        CHECK(isnan(hist_quantile(&h, 1.1)));
        CHECK(isnan(hist_quantile(&h, NAN)));
        hist_done(&h);
}

/* Overflows refused; reset keeps the allocation. */
static void test_overflow(void) {
        struct hist h;
        hist_init(&h);
        /* count overflow and non-finite sums: -ERANGE, nothing changed */
        CHECK_EQ_INT(hist_add(&h, 1.0, UINT64_MAX), 0);
        CHECK_EQ_INT(hist_add(&h, 1.0, 1), -ERANGE);
        CHECK(h.count == UINT64_MAX);
        CHECK(hist_quantile(&h, 1) == 1.0);
        struct hist h2;
        hist_init(&h2);
        CHECK_EQ_INT(hist_add(&h2, 2.0, 1), 0);
        CHECK_EQ_INT(hist_merge(&h, &h2), -ERANGE);
        CHECK_EQ_INT(hist_merge(&h2, &h), -ERANGE);
        CHECK(h.count == UINT64_MAX && h2.count == 1 && h2.max == 2.0);
        hist_reset(&h);
        CHECK_EQ_INT(hist_add(&h, 1e200, 1), -ERANGE); /* its square is not finite */
        CHECK_EQ_INT(h.count, 0);
        CHECK_EQ_INT(hist_add(&h, 1e150, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 1e300 / 1e150, 1), 0);
        CHECK(h.count == 2 && isfinite(h.sum_sq));

        /* reset keeps the allocation, the histogram works on */
        hist_reset(&h);
        uint64_t *kept = h.counts;
        CHECK_EQ_INT(hist_add(&h, 1e150, 1), 0);
        CHECK(h.counts == kept);
        CHECK(hist_quantile(&h, 0.5) == 1e150);
        hist_done(&h2);
        hist_done(&h);
        CHECK(h.counts == NULL && h.n == 0 && h.count == 0);
}

/* hist_count_above against the exact count over 1..1000: exact outside
 * [min, max), else off by at most the values within the accuracy of the
 * target; consistent with the percentiles and with the extremes. */
static void test_count_above(void) {
        struct hist h;
        hist_init(&h);
        CHECK(hist_count_above(&h, 1) == 0);
        for (int v = 1; v <= 1000; v++)
                CHECK(hist_add(&h, v, 1) == 0);
        static const double targets[] = { 0.5, 1, 1.5, 50, 99.9, 100, 500, 950, 990, 999, 999.5, 1000, 2000 };
        for (size_t i = 0; i < ELEMENTSOF(targets); i++) {
                double t = targets[i];
                uint64_t got = hist_count_above(&h, t), lo = 0, hi = 0, exact = 0;
                for (int v = 1; v <= 1000; v++) {
                        exact += v > t;
                        lo += v > t * (1 + 2 * HIST_RELATIVE_ACCURACY);
                        hi += v > t * (1 - 2 * HIST_RELATIVE_ACCURACY);
                }
                if (t < 1 || t >= 1000)
                        CHECK(got == exact);
                CHECK(got >= lo && got <= hi);
                CHECK((got > 0) == (t < 1000) && (got < 1000) == (t >= 1));
        }
        /* the share over the target agrees with the percentile's side of it */
        double p95 = hist_quantile(&h, 0.95);
        CHECK(hist_count_above(&h, p95) <= 50 + 10);
        CHECK(hist_count_above(&h, p95 * 0.98) > 50);
        hist_done(&h);
}

int main(void) {
        for (size_t k = 0; k < N_DISTS; k++)
                test_distribution(&dists[k], 1000 + k);
        test_bounds();
        test_buckets();
        test_growth();
        test_merge();
        test_empty_and_rejected();
        test_zero_bucket();
        test_value_range();
        test_weights();
        test_overflow();
        test_count_above();
        TEST_DONE();
}

/* SPDX-License-Identifier: MIT */
/* daemon/analyze/histogram.c: quantile accuracy against exact sorted quantiles on
 * four distributions, exact count/sum/min/max/mean/stddev, merge order,
 * extreme values, rejected values, and the encoding (round trip, every
 * truncation, random bit flips, crafted bad inputs).
 *
 *   test-histogram                    run the checks
 *   test-histogram --write-corpus DIR write the fuzz seed corpus */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/histogram.h"
#include "tap.h"
#include "util.h"

#define N_VALUES 100000
#define EPS_REL 1e-9 /* on top of HIST_RELATIVE_ACCURACY: floating error at bucket edges */

static const double quantiles[] = { 0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1 };

/* ---- fixed-seed random numbers ------------------------------------------ */

static uint64_t rng_state;

static void rng_seed(uint64_t s) {
        rng_state = s ? s : 0x9e3779b97f4a7c15ull;
}

static uint64_t rng_next(void) { /* xorshift64* */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dull;
}

/* uniform in (0, 1] */
static double rng_unit(void) {
        return ((double)(rng_next() >> 11) + 1.0) * 0x1p-53;
}

static double rng_normal(void) { /* Box-Muller, one of the pair */
        double u1 = rng_unit(), u2 = rng_unit();
        return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static double gen_uniform(void) {
        return 1.0 + 99.0 * (rng_unit() - 0x1p-53);
}
static double gen_lognormal(void) {
        return exp(log(5.0) + rng_normal());
}
static double gen_bimodal(void) {
        double v = rng_unit() <= 0.9 ? 5.0 + 0.5 * rng_normal() : 50.0 + 5.0 * rng_normal();
        return v > 0 ? v : 1e-3;
}
static double gen_pareto(void) {
        return 1.0 / pow(rng_unit(), 1.0 / 1.2);
}

static const struct dist {
        const char *name;
        double (*gen)(void);
} dists[] = {
        { "uniform[1,100]", gen_uniform },
        { "lognormal(ln5,1)", gen_lognormal },
        { "bimodal", gen_bimodal },
        { "pareto(1,1.2)", gen_pareto },
};

static double *gen_values(const struct dist *d, uint64_t seed, size_t n) {
        double *v = malloc(n * sizeof v[0]);
        if (!v)
                abort();
        rng_seed(seed);
        for (size_t i = 0; i < n; i++)
                v[i] = d->gen();
        return v;
}

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

static uint64_t bucket_at(const struct hist *h, int64_t idx) {
        if (idx < h->lo || idx >= (int64_t)h->lo + h->n)
                return 0;
        return h->counts[idx - h->lo];
}

/* Same buckets (whatever the windows), same count and zero count. */
static bool same_buckets(const struct hist *a, const struct hist *b) {
        if (a->count != b->count || a->zero_count != b->zero_count)
                return false;
        int64_t lo = a->lo < b->lo ? a->lo : b->lo;
        int64_t hi = (int64_t)a->lo + a->n > (int64_t)b->lo + b->n ? (int64_t)a->lo + a->n : (int64_t)b->lo + b->n;
        for (int64_t i = lo; i < hi; i++)
                if (bucket_at(a, i) != bucket_at(b, i))
                        return false;
        return true;
}

static bool same_bits(double a, double b) {
        return memcmp(&a, &b, sizeof a) == 0;
}

static bool hist_equal(const struct hist *a, const struct hist *b) {
        return same_buckets(a, b) && same_bits(a->sum, b->sum) && same_bits(a->sum_sq, b->sum_sq) &&
               same_bits(a->min, b->min) && same_bits(a->max, b->max);
}

static uint64_t bucket_total(const struct hist *h) {
        uint64_t t = 0;
        for (uint32_t k = 0; k < h->n; k++)
                t += h->counts[k];
        return t;
}

static void fill(struct hist *h, const double *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                CHECK_EQ_INT(hist_add(h, v[i], 1), 0);
}

static double log_gamma_exact(void) {
        return log((1.0 + HIST_RELATIVE_ACCURACY) / (1.0 - HIST_RELATIVE_ACCURACY));
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

/* Bucket boundaries and the hard-coded ln(gamma). */
static void test_buckets(void) {
        double lg = log_gamma_exact();
        struct hist h;
        hist_init(&h);

        CHECK_EQ_INT(hist_add(&h, HIST_MIN_VALUE_MS, 1), 0);
        CHECK_EQ_INT(h.zero_count, 0);
        CHECK_EQ_INT(only_bucket(&h), (int64_t)ceil(log(HIST_MIN_VALUE_MS) / lg));
        CHECK_EQ_INT(only_bucket(&h), -1381);
        hist_reset(&h);
        CHECK_EQ_INT(hist_add(&h, HIST_MAX_VALUE_MS, 1), 0);
        CHECK_EQ_INT(only_bucket(&h), (int64_t)ceil(log(HIST_MAX_VALUE_MS) / lg));
        CHECK_EQ_INT(only_bucket(&h), 2073);

        /* index(v) = ceil(ln v / ln gamma), away from the edges where the
         * last bit of log() may go either way */
        rng_seed(7);
        for (int k = 0; k < 20000; k++) {
                double v = exp((rng_unit() * 35.0 - 13.8)); /* 1e-6 .. 1.6e9 */
                if (v < HIST_MIN_VALUE_MS || v > HIST_MAX_VALUE_MS)
                        continue;
                double x = log(v) / lg;
                if (fabs(x - nearbyint(x)) < 1e-9)
                        continue;
                hist_reset(&h);
                CHECK_EQ_INT(hist_add(&h, v, 1), 0);
                CHECK_EQ_INT(only_bucket(&h), (int64_t)ceil(x));
                /* the representative value: within a of v */
                CHECK(rel_err(hist_quantile(&h, 0.5), v) == 0); /* clamped to min == max */
        }

        /* representative value of a bucket, seen through a wide histogram */
        hist_reset(&h);
        CHECK_EQ_INT(hist_add(&h, 1e-3, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 1e6, 1), 0);
        CHECK_EQ_INT(hist_add(&h, 7.0, 1), 0);
        double rep = 2.0 * pow((1.0 + HIST_RELATIVE_ACCURACY) / (1.0 - HIST_RELATIVE_ACCURACY), ceil(log(7.0) / lg)) /
                     ((1.0 + HIST_RELATIVE_ACCURACY) / (1.0 - HIST_RELATIVE_ACCURACY) + 1.0);
        CHECK(rel_err(hist_quantile(&h, 0.5), rep) < 1e-12);
        CHECK(rel_err(hist_quantile(&h, 0.5), 7.0) <= HIST_RELATIVE_ACCURACY + EPS_REL);
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
        CHECK(up.n <= 2073 + 1381 + 1);
        CHECK(up.lo >= -1381 && down.lo >= -1381);
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

        /* empty */
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

        /* a microsecond and an hour */
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
        CHECK_EQ_INT(only_bucket(&h), 2073);
        CHECK(h.max == 1e12 && h.min == 1e12 && h.sum == 1e12);
        CHECK(hist_quantile(&h, 0.5) == 1e12); /* clamped into [min, max] */
        CHECK_EQ_INT(hist_add(&h, 2e9, 1), 0);
        CHECK_EQ_INT(only_bucket(&h), 2073);
        CHECK_EQ_INT(hist_add(&h, 1.0, 1), 0);
        CHECK(h.max == 1e12 && h.min == 1.0 && h.sum == 1e12 + 2e9 + 1.0);
        CHECK_EQ_INT(bucket_at(&h, 2073), 2);
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

        /* weights */
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

/* ---- encoding ------------------------------------------------------------- */

/* A tiny writer for crafted inputs. */
struct wbuf {
        uint8_t b[256];
        size_t n;
};

static void w_u8(struct wbuf *w, uint8_t v) {
        w->b[w->n++] = v;
}
static void w_varint(struct wbuf *w, uint64_t v) {
        while (v >= 0x80) {
                w_u8(w, (uint8_t)(v | 0x80));
                v >>= 7;
        }
        w_u8(w, (uint8_t)v);
}
static void w_zigzag(struct wbuf *w, int64_t v) {
        w_varint(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}
static void w_double(struct wbuf *w, double d) {
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        for (int k = 0; k < 8; k++)
                w_u8(w, (uint8_t)(u >> (8 * k)));
}
static void w_doubles(struct wbuf *w, double sum, double sum_sq, double min, double max) {
        w_double(w, sum);
        w_double(w, sum_sq);
        w_double(w, min);
        w_double(w, max);
}

/* After a failed decode: empty, usable, still consistent. */
static void check_empty_valid(struct hist *h) {
        CHECK_EQ_INT(h->count, 0);
        CHECK_EQ_INT(h->zero_count, 0);
        CHECK_EQ_INT(bucket_total(h), 0);
        CHECK(h->sum == 0 && h->sum_sq == 0 && h->min == 0 && h->max == 0);
        CHECK(isnan(hist_quantile(h, 0.5)));
}

static int decode_bytes(struct hist *h, const struct wbuf *w) {
        return hist_decode(h, w->b, w->n);
}

/* A good encoding by hand: 3 values, 1 zero, buckets 100 (x1) and 103 (x1). */
static void good_encoding(struct wbuf *w, double *ret_v100, double *ret_v103) {
        double v100 = exp(99.5 * log_gamma_exact()), v103 = exp(102.5 * log_gamma_exact());
        w->n = 0;
        w_u8(w, 1);
        w_varint(w, 3);
        w_varint(w, 1);
        w_zigzag(w, 100);
        w_varint(w, 2);
        w_varint(w, 0);
        w_varint(w, 1);
        w_varint(w, 3);
        w_varint(w, 1);
        w_doubles(w, v100 + v103, v100 * v100 + v103 * v103, 0, v103);
        if (ret_v100)
                *ret_v100 = v100;
        if (ret_v103)
                *ret_v103 = v103;
}

static void test_encoding_good(void) {
        struct hist h;
        hist_init(&h);
        struct wbuf w;
        double v100, v103;
        good_encoding(&w, &v100, &v103);
        CHECK_EQ_INT(decode_bytes(&h, &w), 0);
        CHECK_EQ_INT(h.count, 3);
        CHECK_EQ_INT(h.zero_count, 1);
        CHECK_EQ_INT(bucket_at(&h, 100), 1);
        CHECK_EQ_INT(bucket_at(&h, 103), 1);
        CHECK_EQ_INT(bucket_total(&h), 2);
        {
                struct hist same;
                hist_init(&same);
                CHECK_EQ_INT(hist_add(&same, 0, 1), 0);
                CHECK_EQ_INT(hist_add(&same, v100, 1), 0);
                CHECK_EQ_INT(hist_add(&same, v103, 1), 0);
                CHECK(same_buckets(&same, &h));
                _cleanup_free_ uint8_t *enc = NULL;
                size_t len;
                CHECK_EQ_INT(hist_encode(&same, &enc, &len), 0);
                CHECK(len == w.n && memcmp(enc, w.b, len) == 0); /* the format, byte for byte */
                hist_done(&same);
        }

        /* the empty histogram */
        w.n = 0;
        w_u8(&w, 1);
        for (int k = 0; k < 4; k++)
                w_varint(&w, 0);
        w_doubles(&w, 0, 0, 0, 0);
        CHECK_EQ_INT(decode_bytes(&h, &w), 0);
        check_empty_valid(&h);
        CHECK_EQ_INT(w.n, 37);

        hist_done(&h);
}

/* Inputs hist_decode() must refuse. */
struct bad_case {
        const char *label;
        uint8_t b[128];
        size_t n;
};

static size_t bad_cases(struct bad_case *cases) {
        struct wbuf w;
        size_t ncases = 0;
#define ADD_CASE(lbl, ...)                         \
        do {                                       \
                w.n = 0;                           \
                __VA_ARGS__;                       \
                cases[ncases].label = (lbl);       \
                memcpy(cases[ncases].b, w.b, w.n); \
                cases[ncases].n = w.n;             \
                ncases++;                          \
        } while (0)
#define HDR(ver, count, zero, lo, nb) \
        w_u8(&w, ver), w_varint(&w, count), w_varint(&w, zero), w_zigzag(&w, lo), w_varint(&w, nb)
#define DBL_OK w_doubles(&w, 10, 100, 1, 9)

        ADD_CASE("version 0", HDR(0, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("version 2", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("zero > count", HDR(1, 1, 2, 0, 0), DBL_OK);
        ADD_CASE("counts short", HDR(1, 3, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 2), DBL_OK);
        ADD_CASE("counts over", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 2), DBL_OK);
        ADD_CASE("no buckets, lo", HDR(1, 1, 1, 5, 0), DBL_OK);
        ADD_CASE("lo below range", HDR(1, 1, 0, -1382, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("lo above range", HDR(1, 1, 0, 2074, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("lo huge", HDR(1, 1, 0, INT64_MIN, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("index beyond range", HDR(1, 2, 0, 2073, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, 1),
                 w_varint(&w, 1), DBL_OK);
        ADD_CASE("delta wraps", HDR(1, 2, 0, 5, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, UINT64_MAX),
                 w_varint(&w, 1), DBL_OK);
        ADD_CASE("first delta not 0", HDR(1, 1, 0, 5, 1), w_varint(&w, 1), w_varint(&w, 1), DBL_OK);
        ADD_CASE("repeated index", HDR(1, 2, 0, 5, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, 0),
                 w_varint(&w, 1), DBL_OK);
        ADD_CASE("empty bucket listed", HDR(1, 1, 0, 5, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, 1),
                 w_varint(&w, 0), DBL_OK);
        ADD_CASE("bucket counts overflow", HDR(1, 0, 0, 5, 2), w_varint(&w, 0), w_varint(&w, 1ull << 63),
                 w_varint(&w, 1), w_varint(&w, 1ull << 63), w_doubles(&w, 0, 0, 0, 0));
        ADD_CASE("nb huge", HDR(1, 1, 0, 5, UINT64_MAX), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("nb beyond the bytes", HDR(1, 1, 0, 5, 3000), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("overlong varint", w_u8(&w, 1), w_u8(&w, 0x81), w_u8(&w, 0x00), w_varint(&w, 0), w_zigzag(&w, 5),
                 w_varint(&w, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("varint 11 bytes", w_u8(&w, 1), memset(w.b + w.n, 0xff, 10), w.n += 10, w_u8(&w, 0x01),
                 w_varint(&w, 0), w_zigzag(&w, 0), w_varint(&w, 0), DBL_OK);
        ADD_CASE("varint over 64 bits", w_u8(&w, 1), memset(w.b + w.n, 0xff, 9), w.n += 9, w_u8(&w, 0x02),
                 w_varint(&w, 0), w_zigzag(&w, 0), w_varint(&w, 0), DBL_OK);
        ADD_CASE("trailing byte", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK, w_u8(&w, 0));
        ADD_CASE("doubles short", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_double(&w, 1),
                 w_double(&w, 1), w_double(&w, 1));
        ADD_CASE("sum NaN", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, NAN, 1, 1, 1));
        ADD_CASE("sum_sq inf", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, INFINITY, 1, 1));
        ADD_CASE("min -inf", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, -INFINITY, 1));
        ADD_CASE("max NaN", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, 1, NAN));
        ADD_CASE("min negative", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, -1, 1));
        ADD_CASE("min -0", HDR(1, 1, 1, 0, 0), w_doubles(&w, 0, 0, -0.0, 0));
        ADD_CASE("sum negative", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, -1, 1, 1, 1));
        ADD_CASE("min > max", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, 2, 1));
        ADD_CASE("empty with a sum", HDR(1, 0, 0, 0, 0), w_doubles(&w, 1, 0, 0, 0));
        ADD_CASE("empty with a max", HDR(1, 0, 0, 0, 0), w_doubles(&w, 0, 0, 0, 1));
        ADD_CASE("nothing", (void)0);
        ADD_CASE("version only", w_u8(&w, 1));

#undef ADD_CASE
#undef HDR
#undef DBL_OK
        return ncases;
}

/* Each bad input decoded over a good histogram leaves it empty and usable. */
static void test_encoding_crafted(void) {
        struct hist h;
        hist_init(&h);
        struct wbuf w;
        struct bad_case cases[64];
        size_t ncases = bad_cases(cases);
        for (size_t c = 0; c < ncases; c++) {
                good_encoding(&w, NULL, NULL);
                CHECK_EQ_INT(decode_bytes(&h, &w), 0);
                CHECK_EQ_INT(h.count, 3);
                int r = hist_decode(&h, cases[c].b, cases[c].n);
                if (r != -EINVAL)
                        fprintf(stderr, "crafted input \"%s\" decoded: %d\n", cases[c].label, r);
                CHECK_EQ_INT(r, -EINVAL);
                check_empty_valid(&h);
                CHECK_EQ_INT(hist_add(&h, 2.0, 1), 0); /* still usable */
                CHECK_EQ_INT(h.count, 1);
        }
        CHECK_EQ_INT(hist_decode(&h, NULL, 0), -EINVAL);
        check_empty_valid(&h);

        hist_done(&h);
}

/* Every prefix of good encodings, then random bit flips. */
static void test_encoding_damage(void) {
        double *v = gen_values(&dists[1], 99, 2000);
        struct hist h[4];
        for (int k = 0; k < 4; k++)
                hist_init(&h[k]);
        fill(&h[0], v, 2000);
        CHECK_EQ_INT(hist_add(&h[0], 0, 3), 0);
        CHECK_EQ_INT(hist_add(&h[0], 1e12, 2), 0);
        CHECK_EQ_INT(hist_add(&h[1], 1e-7, 1), 0);
        CHECK_EQ_INT(hist_add(&h[2], 42.0, 1ull << 40), 0);
        /* h[3] empty */

        struct hist d;
        hist_init(&d);
        rng_seed(1234);
        unsigned decoded_flips = 0, flips = 0;
        for (int k = 0; k < 4; k++) {
                _cleanup_free_ uint8_t *buf = NULL;
                size_t len;
                CHECK_EQ_INT(hist_encode(&h[k], &buf, &len), 0);
                CHECK_EQ_INT(hist_decode(&d, buf, len), 0);
                CHECK(hist_equal(&d, &h[k]));

                for (size_t cut = 0; cut < len; cut++) {
                        /* an exact-size copy so ASan sees any read past the end */
                        uint8_t *p = malloc(cut ? cut : 1);
                        memcpy(p, buf, cut);
                        CHECK_EQ_INT(hist_decode(&d, p, cut), -EINVAL);
                        check_empty_valid(&d);
                        free(p);
                }

                uint8_t *p = malloc(len);
                for (int t = 0; t < 20000; t++) {
                        memcpy(p, buf, len);
                        int nflips = 1 + (int)(rng_next() % 3);
                        for (int f = 0; f < nflips; f++) {
                                size_t bit = rng_next() % (len * 8);
                                p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                        }
                        if (memcmp(p, buf, len) == 0)
                                continue;
                        flips++;
                        int r = hist_decode(&d, p, len);
                        CHECK(r == 0 || r == -EINVAL);
                        if (r < 0) {
                                check_empty_valid(&d);
                                continue;
                        }
                        /* it decoded (a flipped double, say): canonical, consistent */
                        decoded_flips++;
                        _cleanup_free_ uint8_t *again = NULL;
                        size_t alen;
                        CHECK_EQ_INT(hist_encode(&d, &again, &alen), 0);
                        CHECK(alen == len && memcmp(again, p, len) == 0);
                        CHECK_EQ_INT(bucket_total(&d), d.count - d.zero_count);
                        if (d.count) {
                                double q = hist_quantile(&d, 0.5);
                                CHECK(q >= d.min && q <= d.max);
                        }
                }
                free(p);
        }
        printf("bit flips: %u tried, %u still decoded (all canonical)\n", flips, decoded_flips);

        hist_done(&d);
        for (int k = 0; k < 4; k++)
                hist_done(&h[k]);
        free(v);
}

/* ---- fuzz seed corpus ------------------------------------------------------ */

static int write_file(const char *dir, const char *name, const void *p, size_t len) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
                perror(path);
                return -1;
        }
        return 0;
}

static int write_encoded(const char *dir, const char *name, const struct hist *h) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        if (hist_encode(h, &buf, &len) < 0)
                return -1;
        return write_file(dir, name, buf, len);
}

static int write_corpus(const char *dir) {
        struct hist h;
        int r = 0;
        hist_init(&h);

        r |= write_encoded(dir, "empty", &h);
        hist_add(&h, 5.0, 1);
        r |= write_encoded(dir, "one-value", &h);
        hist_add(&h, 0, 2);
        hist_add(&h, 1e-7, 1);
        hist_add(&h, 1e12, 3);
        hist_add(&h, 1e-3, 1);
        r |= write_encoded(dir, "extremes", &h);

        hist_reset(&h);
        double *v = gen_values(&dists[1], 5, 500);
        for (int k = 0; k < 500; k++)
                hist_add(&h, v[k], 1 + (uint64_t)(k % 3));
        free(v);
        r |= write_encoded(dir, "lognormal-500", &h);

        hist_reset(&h);
        v = gen_values(&dists[2], 6, 200);
        for (int k = 0; k < 200; k++)
                hist_add(&h, v[k], 1);
        free(v);
        r |= write_encoded(dir, "bimodal-200", &h);

        /* raw doubles, for the second half of the target */
        static const double raw[] = { 1.5, 0.25, 1000.0, 3.6e6, 0, 1e-7, 42.0, 1e12, 7.0, 0.001 };
        uint8_t rb[sizeof raw];
        for (size_t k = 0; k < ELEMENTSOF(raw); k++) {
                uint64_t u;
                memcpy(&u, &raw[k], 8);
                for (int b = 0; b < 8; b++)
                        rb[k * 8 + b] = (uint8_t)(u >> (8 * b));
        }
        r |= write_file(dir, "doubles", rb, sizeof rb);

        hist_done(&h);
        return r ? 1 : 0;
}

int main(int argc, char *argv[]) {
        if (argc == 3 && streq(argv[1], "--write-corpus"))
                return write_corpus(argv[2]);

        for (size_t k = 0; k < ELEMENTSOF(dists); k++)
                test_distribution(&dists[k], 1000 + k);
        test_buckets();
        test_growth();
        test_merge();
        test_empty_and_rejected();
        test_zero_bucket();
        test_value_range();
        test_weights();
        test_overflow();
        test_encoding_good();
        test_encoding_crafted();
        test_encoding_damage();
        TEST_DONE();
}

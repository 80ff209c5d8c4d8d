/* SPDX-License-Identifier: MIT */
/* The straggler test: the sign test's binomial tail, and verdicts on
 * ranks with known distributions. */
#include <math.h>

#include "analyze/straggler.h"
#include "tap.h"
#include "xorshift.h"

/* Within rel relative of want (absolute near 0). */
#define CHECK_REL(a, want, rel)                                                     \
        do {                                                                        \
                double _a = (a), _w = (want);                                       \
                if (!(fabs(_a - _w) <= (rel) * (fabs(_w) > 1e-300 ? fabs(_w) : 1))) \
                        TAP_FAIL("%s == %.15g, expected %.15g", #a, _a, _w);        \
        } while (0)

static void test_binomial(void) {
        static const struct {
                uint64_t n, k;
                double want; /* sums of binomial coefficients, by hand */
        } rows[] = {
                { 10, 0, 1 },
                { 10, 11, 0 },
                { 10, 10, 1.0 / 1024 },
                { 4, 2, 11.0 / 16 },                                          /* 6 + 4 + 1 */
                { 5, 2, 26.0 / 32 },                                          /* 1 - (5 + 1) / 32: the lower branch */
                { 20, 15, (15504.0 + 4845 + 1140 + 190 + 20 + 1) / 1048576 }, /* C(20, 15..20) */
                { 1, 1, 0.5 },
        };
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
                CHECK_REL(binomial_half_sf(rows[i].n, rows[i].k), rows[i].want, 1e-9);
        /* large n: the median splits the mass; 3 standard deviations
         * (sqrt(n)/2 = 500) out is the normal tail, 0.00135 */
        double mid = binomial_half_sf(1000000, 500000);
        CHECK(mid > 0.5 && mid < 0.501);
        CHECK_REL(binomial_half_sf(1000000, 501500), 0.00135, 0.03);
        CHECK(binomial_half_sf(1000000, 1000000) == 0); /* 2^-1e6 underflows to 0, not NaN */
}

/* n timings of a spread distribution (uniform in [0.8, 1.2] * base_ms). */
static void fill(struct hist *h, uint64_t *seed, size_t n, double base_ms) {
        hist_init(h);
        for (size_t i = 0; i < n; i++) {
                double u = (double)(xorshift64s(seed) >> 11) / 9007199254740992.0;
                CHECK_EQ_INT(hist_add(h, base_ms * (0.8 + 0.4 * u), 1), 0);
        }
}

struct scenario {
        const char *name;
        size_t count[4];
        double base_ms[4];
        double threshold_pct;
        bool want[4];
};

static void test_verdicts(void) {
        static const struct scenario rows[] = {
                { "one rank 25% slower", { 500, 500, 500, 500 }, { 10, 10, 10, 12.5 }, 10, { 0, 0, 0, 1 } },
                { "all equal", { 500, 500, 500, 500 }, { 10, 10, 10, 10 }, 10, { 0, 0, 0, 0 } },
                { "all equally slow", { 500, 500, 500, 500 }, { 40, 40, 40, 40 }, 10, { 0, 0, 0, 0 } },
                /* significant but under the threshold */
                { "5% slower", { 5000, 5000, 5000, 5000 }, { 10, 10, 10, 10.5 }, 10, { 0, 0, 0, 0 } },
                { "5% slower, threshold 2%", { 5000, 5000, 5000, 5000 }, { 10, 10, 10, 10.5 }, 2, { 0, 0, 0, 1 } },
                /* far slower, but too few timings to say */
                { "few timings", { 500, 500, 500, 10 }, { 10, 10, 10, 20 }, 10, { 0, 0, 0, 0 } },
                /* 20 timings all above the others' median: p = 2^-20 */
                { "twenty timings", { 500, 500, 500, 20 }, { 10, 10, 10, 20 }, 10, { 0, 0, 0, 1 } },
                /* a faster rank is never a straggler, and does not make the others ones */
                { "one rank faster", { 500, 500, 500, 500 }, { 10, 10, 10, 5 }, 10, { 0, 0, 0, 0 } },
        };
        for (size_t s = 0; s < sizeof rows / sizeof rows[0]; s++) {
                const struct scenario *sc = &rows[s];
                struct hist h[4];
                uint64_t seed = 0x9e3779b97f4a7c15ull + s;
                for (size_t i = 0; i < 4; i++)
                        fill(&h[i], &seed, sc->count[i], sc->base_ms[i]);
                for (size_t i = 0; i < 4; i++) {
                        struct straggler_verdict v;
                        CHECK_EQ_INT(straggler_test(h, 4, i, sc->threshold_pct, &v), 0);
                        CHECK_CASE(sc->name, v.straggler == sc->want[i]);
                        CHECK_CASE(sc->name, v.n == sc->count[i]);
                        CHECK_CASE(sc->name, v.tested == (sc->count[i] >= STRAGGLER_MIN_COUNT));
                        if (v.tested)
                                CHECK_CASE(sc->name,
                                           fabs(v.slower_pct - (v.p50_ms / v.others_p50_ms - 1) * 100) < 1e-9);
                        else
                                CHECK_CASE(sc->name, isnan(v.slower_pct) && isnan(v.p_value));
                        if (v.straggler)
                                CHECK_CASE(sc->name, v.p_value < STRAGGLER_MAX_P && v.above <= v.n);
                }
                for (size_t i = 0; i < 4; i++)
                        hist_done(&h[i]);
        }
}

/* A rank whose median is far over the threshold, but whose timings spread
 * so widely, and are so few, that a sign test cannot tell it from its
 * peers: k of its n timings above the others' median m, where a typical
 * rank has n/2. No verdict, whatever the threshold says. */
static void test_over_threshold_not_significant(void) {
        static const struct {
                const char *name;
                unsigned low, high; /* timings below m (2..6 ms), above m (12..) */
                double p;           /* P(X >= high), X ~ Binomial(low + high, 1/2), by hand */
        } rows[] = {
                { "25 timings, 16 above", 9, 16, 3850756.0 / 33554432 },
                { "60 timings, 36 above", 24, 36, 0.0775009520016303 },
                { "20 timings, 14 above", 6, 14, 60460.0 / 1048576 },
        };
        for (size_t s = 0; s < sizeof rows / sizeof rows[0]; s++) {
                struct hist h[4];
                uint64_t seed = 0x5eed + s;
                for (size_t i = 0; i < 3; i++)
                        fill(&h[i], &seed, 500, 10); /* m is about 10 ms */
                hist_init(&h[3]);
                for (unsigned k = 0; k < rows[s].low; k++)
                        CHECK_EQ_INT(hist_add(&h[3], 2 + 4.0 * k / rows[s].low, 1), 0);
                for (unsigned k = 0; k < rows[s].high; k++)
                        CHECK_EQ_INT(hist_add(&h[3], 12 + 2.0 * k, 1), 0);
                struct straggler_verdict v;
                CHECK_EQ_INT(straggler_test(h, 4, 3, 10, &v), 0);
                CHECK_CASE(rows[s].name, v.tested);
                CHECK_CASE(rows[s].name, v.slower_pct > 10); /* over the threshold ... */
                CHECK_CASE(rows[s].name, v.above == rows[s].high);
                CHECK_REL(v.p_value, rows[s].p, 1e-5); /* ... by noise */
                CHECK_CASE(rows[s].name, !v.straggler);
                for (size_t i = 0; i < 4; i++)
                        hist_done(&h[i]);
        }
}

/* One rank alone has no others to be slower than. */
static void test_alone(void) {
        struct hist h[1];
        uint64_t seed = 7;
        fill(&h[0], &seed, 100, 10);
        struct straggler_verdict v;
        CHECK_EQ_INT(straggler_test(h, 1, 0, 10, &v), 0);
        CHECK(!v.tested && !v.straggler && isnan(v.others_p50_ms));
        hist_done(&h[0]);
}

int main(void) {
        test_binomial();
        test_verdicts();
        test_over_threshold_not_significant();
        test_alone();
        TEST_DONE();
}

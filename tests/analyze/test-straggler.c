/* SPDX-License-Identifier: MIT */
/* The straggler test: the sign test's binomial tail, and verdicts on
 * ranks with known distributions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/straggler.h"
#include "tap.h"
#include "util.h"
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

/* A job of DDP's shape: per step, an op of each rank's own work, then an
 * op holding the all-reduce, where the ranks that arrive early wait for the
 * last. Each scenario gives every rank's median in each op (timings spread
 * +-20% around it, 400 of them) and the findings the verdict must make, as
 * "op:rank:kind" (s slower, w waited for, u undecided), in order. */
#define JOB_RANKS_MAX 4
struct job_scenario {
        const char *name;
        size_t nranks, nops;
        bool collective[2];
        double base_ms[2][JOB_RANKS_MAX];
        const char *want; /* the findings, space-separated; "" none */
};

static void check_findings(const char *name, const struct straggler_finding *f, size_t n, const char *want) {
        char got[256] = "";
        size_t len = 0;
        for (size_t i = 0; i < n; i++) {
                char k = f[i].kind == STRAGGLER_SLOWER ? 's' : f[i].kind == STRAGGLER_WAITED_FOR ? 'w' : 'u';
                len += (size_t)snprintf(got + len, sizeof got - len, "%s%zu:%zu:%c", i ? " " : "", f[i].op, f[i].rank,
                                        k);
                if (f[i].kind == STRAGGLER_UNDECIDED)
                        CHECK_CASE(name, f[i].other != f[i].rank);
                CHECK_CASE(name, f[i].v.tested && f[i].v.p_value < STRAGGLER_MAX_P);
        }
        if (strcmp(got, want) != 0)
                TAP_FAIL("[%s] findings '%s', expected '%s'", name, got, want);
}

static void test_job_verdicts(void) {
        /* compute (own work) 1 ms, backward (all-reduce) 5 ms; a slowed rank
         * spends 10 ms more in compute, and the others wait 10 ms more in
         * backward */
        static const struct job_scenario rows[] = {
                { "3 ranks, rank 2 slow before the all-reduce",
                  3,
                  2,
                  { false, true },
                  { { 1, 1, 11 }, { 15, 15, 5 } },
                  "1:2:w 0:2:s" },
                /* not told that backward holds a collective: the victims are
                 * two of three, the typical rank; only the cause is named */
                { "3 ranks, the collective not declared",
                  3,
                  2,
                  { false, false },
                  { { 1, 1, 11 }, { 15, 15, 5 } },
                  "0:2:s" },
                { "3 ranks, all equally slow", 3, 2, { false, true }, { { 11, 11, 11 }, { 5, 5, 5 } }, "" },
                { "4 ranks, rank 0 slow",
                  4,
                  2,
                  { false, true },
                  { { 11, 1, 1, 1 }, { 5, 15, 15, 15 } },
                  "1:0:w 0:0:s" },
                /* a rank faster at its own work waits longer: it is named nowhere */
                { "4 ranks, rank 3 fast", 4, 2, { false, true }, { { 10, 10, 10, 5 }, { 5, 5, 5, 10 } }, "" },
                /* two ranks: the collective op says who waits for whom */
                { "2 ranks, rank 1 slow", 2, 2, { false, true }, { { 1, 11 }, { 15, 5 } }, "1:1:w 0:1:s" },
                /* two ranks and no collective declared: a slower rank and a
                 * waiting one look alike */
                { "2 ranks, nothing declared", 2, 2, { false, false }, { { 1, 11 }, { 15, 5 } }, "0:1:u 1:0:u" },
                /* the slowness inside the collective op, before the all-reduce:
                 * both ranks spend the same time there, nothing to see */
                { "2 ranks, slow inside the collective op", 2, 1, { true }, { { 15, 15 } }, "" },
                /* the collective names rank 0; rank 1's longer wait in an
                 * undeclared op is its victim's, not a finding */
                { "2 ranks, a second waiting op", 2, 2, { true, false }, { { 5, 15 }, { 8, 18 } }, "0:0:w" },
        };
        for (size_t s = 0; s < ELEMENTSOF(rows); s++) {
                const struct job_scenario *sc = &rows[s];
                struct hist h[2][JOB_RANKS_MAX];
                struct straggler_op ops[2];
                uint64_t seed = 0x51ed + s;
                for (size_t o = 0; o < sc->nops; o++) {
                        for (size_t i = 0; i < sc->nranks; i++)
                                fill(&h[o][i], &seed, 400, sc->base_ms[o][i]);
                        ops[o] = (struct straggler_op){ .ranks = h[o], .collective = sc->collective[o] };
                }
                struct straggler_finding *f = NULL;
                size_t n = 0;
                CHECK_EQ_INT(straggler_judge(ops, sc->nops, sc->nranks, 10, &f, &n), 0);
                check_findings(sc->name, f, n, sc->want);
                free(f);
                for (size_t o = 0; o < sc->nops; o++)
                        for (size_t i = 0; i < sc->nranks; i++)
                                hist_done(&h[o][i]);
        }
}

/* In a collective op the rank the others wait for: its median, theirs and
 * how much less it spends. */
static void test_collective_figures(void) {
        struct hist h[3];
        uint64_t seed = 99;
        fill(&h[0], &seed, 400, 15);
        fill(&h[1], &seed, 400, 15);
        fill(&h[2], &seed, 400, 5);
        struct straggler_verdict v;
        CHECK_EQ_INT(straggler_test_collective(h, 3, 2, 10, &v), 0);
        CHECK(v.straggler && v.tested && v.n == 400 && v.above > 390);
        CHECK_REL(v.p50_ms, 5, 0.05);
        CHECK_REL(v.others_p50_ms, 15, 0.05);
        CHECK_REL(v.slower_pct, (v.p50_ms / v.others_p50_ms - 1) * 100, 1e-12);
        CHECK(v.slower_pct < -60);
        /* the ranks that wait are never named there */
        for (size_t i = 0; i < 2; i++) {
                CHECK_EQ_INT(straggler_test_collective(h, 3, i, 10, &v), 0);
                CHECK(v.tested && !v.straggler);
        }
        for (size_t i = 0; i < 3; i++)
                hist_done(&h[i]);
}

/* NVIDIA's scores: the reference median over the rank's, in (0, 1]. */
static void test_scores(void) {
        struct hist h[3], w[4];
        uint64_t seed = 5;
        fill(&h[0], &seed, 400, 10);
        fill(&h[1], &seed, 400, 10);
        fill(&h[2], &seed, 400, 20);
        double fastest = fmin(hist_quantile(&h[0], 0.5), hist_quantile(&h[1], 0.5));
        CHECK_REL(straggler_relative_score(h, 3, 2), fastest / hist_quantile(&h[2], 0.5), 1e-12);
        CHECK(straggler_relative_score(h, 3, 2) < 0.75 && straggler_relative_score(h, 3, 2) > 0.45);
        CHECK(straggler_relative_score(h, 3, 0) > 0.9 && straggler_relative_score(h, 3, 0) <= 1);
        hist_done(&h[2]);
        fill(&h[2], &seed, 10, 20); /* too few to score, and left out of the others' */
        CHECK(isnan(straggler_relative_score(h, 3, 2)));
        CHECK(straggler_relative_score(h, 3, 0) > 0.9);
        /* individual: the best window over the latest; a window of too few
         * timings is no reference, a latest one of too few no score */
        fill(&w[0], &seed, 400, 10);
        fill(&w[1], &seed, 5, 1);
        fill(&w[2], &seed, 400, 12);
        fill(&w[3], &seed, 400, 20);
        CHECK_REL(straggler_individual_score(w, 4), hist_quantile(&w[0], 0.5) / hist_quantile(&w[3], 0.5), 1e-12);
        CHECK_REL(straggler_individual_score(w, 1), 1, 1e-12);
        CHECK(isnan(straggler_individual_score(w, 2)));
        CHECK(isnan(straggler_individual_score(w, 0)));
        for (size_t i = 0; i < 4; i++)
                hist_done(&w[i]);
        for (size_t i = 0; i < 3; i++)
                hist_done(&h[i]);
}

int main(void) {
        test_binomial();
        test_verdicts();
        test_over_threshold_not_significant();
        test_alone();
        test_job_verdicts();
        test_collective_figures();
        test_scores();
        TEST_DONE();
}

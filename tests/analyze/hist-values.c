/* SPDX-License-Identifier: MIT */
#include "hist-values.h"

#include <math.h>
#include <stdlib.h>

#include "tap.h"
#include "xorshift.h"

/* ---- fixed-seed random numbers ------------------------------------------ */

static uint64_t rng_state;

void rng_seed(uint64_t s) {
        rng_state = s ? s : 0x9e3779b97f4a7c15ull;
}

uint64_t rng_next(void) {
        return xorshift64s(&rng_state);
}

/* uniform in (0, 1] */
double rng_unit(void) {
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

const struct dist dists[N_DISTS] = {
        { "uniform[1,100]", gen_uniform },
        { "lognormal(ln5,1)", gen_lognormal },
        { "bimodal", gen_bimodal },
        { "pareto(1,1.2)", gen_pareto },
};

double *gen_values(const struct dist *d, uint64_t seed, size_t n) {
        double *v = malloc(n * sizeof v[0]);
        if (!v)
                abort();
        rng_seed(seed);
        for (size_t i = 0; i < n; i++)
                v[i] = d->gen();
        return v;
}

void fill(struct hist *h, const double *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                CHECK_EQ_INT(hist_add(h, v[i], 1), 0);
}

uint64_t bucket_total(const struct hist *h) {
        uint64_t t = 0;
        for (uint32_t k = 0; k < h->n; k++)
                t += h->counts[k];
        return t;
}

/* SPDX-License-Identifier: MIT */
/* Values for the histogram tests (test-histogram.c,
 * test-histogram-encoding.c): four distributions drawn from a fixed-seed
 * generator, and small helpers. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "analyze/histogram.h"

void rng_seed(uint64_t s);
uint64_t rng_next(void);
double rng_unit(void); /* (0, 1] */

#define N_DISTS 4
extern const struct dist {
        const char *name;
        double (*gen)(void);
} dists[N_DISTS];

/* n values of d from seed; free() them. */
double *gen_values(const struct dist *d, uint64_t seed, size_t n);
/* Adds v[0..n) to h, each checked. */
void fill(struct hist *h, const double *v, size_t n);
/* The sum of the buckets' counts (the zero bucket not included). */
uint64_t bucket_total(const struct hist *h);

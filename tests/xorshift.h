/* SPDX-License-Identifier: MIT */
/* xorshift64*, the fixed-seed generator of the tests and benchmarks: the
 * same numbers on every run and every machine. */
#pragma once

#include <stdint.h>

/* Steps the state (never 0) and returns the next number. */
static inline uint64_t xorshift64s(uint64_t *state) {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        return *state * 0x2545f4914f6cdd1dull;
}

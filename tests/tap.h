/* SPDX-License-Identifier: MIT */
/* Minimal checks for the C unit tests: each failed check prints file:line
 * and the expression; main returns the failure count (0 = pass, 77 = skip). */
#pragma once

#include <math.h>
#include <stdio.h>
#include <string.h>

static int tap_failures;

#define CHECK(cond)                                                                              \
        do {                                                                                     \
                if (!(cond)) {                                                                   \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
                        tap_failures++;                                                          \
                }                                                                                \
        } while (0)

#define CHECK_EQ_INT(a, b)                                                                                          \
        do {                                                                                                        \
                long long _a = (long long)(a), _b = (long long)(b);                                                 \
                if (_a != _b) {                                                                                     \
                        fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, _a, #b, \
                                _b);                                                                                \
                        tap_failures++;                                                                             \
                }                                                                                                   \
        } while (0)

/* Within 1e-9 relative (1e-9 absolute near 0): figures computed from
 * integer inputs are exact up to the last bit or two. */
#define CHECK_NEAR(a, b)                                                                                         \
        do {                                                                                                     \
                double _a = (a), _b = (b);                                                                       \
                if (!(fabs(_a - _b) <= 1e-9 * (fabs(_b) > 1 ? fabs(_b) : 1))) {                                  \
                        fprintf(stderr, "%s:%d: %s == %.12g, expected %.12g\n", __FILE__, __LINE__, #a, _a, _b); \
                        tap_failures++;                                                                          \
                }                                                                                                \
        } while (0)

#define CHECK_STR(a, b)                                                                                   \
        do {                                                                                              \
                const char *_a = (a), *_b = (b);                                                          \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                                  \
                        fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
                                _a ? _a : "(null)", _b ? _b : "(null)");                                  \
                        tap_failures++;                                                                   \
                }                                                                                         \
        } while (0)

#define TEST_DONE()                                                            \
        do {                                                                   \
                if (tap_failures)                                              \
                        fprintf(stderr, "%d check(s) failed\n", tap_failures); \
                else                                                           \
                        printf("all checks passed\n");                         \
                return tap_failures ? 1 : 0;                                   \
        } while (0)

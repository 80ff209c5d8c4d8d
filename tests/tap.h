/* SPDX-License-Identifier: MIT */
/* Minimal checks for the C unit tests: each failed check prints file:line
 * and the expression; main returns the failure count (0 = pass, 77 = skip). */
#pragma once

#include <stdio.h>

static int tap_failures;

#define CHECK(cond)                                                                   \
        do {                                                                          \
                if (!(cond)) {                                                        \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
                        tap_failures++;                                               \
                }                                                                     \
        } while (0)

#define CHECK_EQ_INT(a, b)                                                                          \
        do {                                                                                        \
                long long _a = (long long)(a), _b = (long long)(b);                                 \
                if (_a != _b) {                                                                     \
                        fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, _a, #b, _b); \
                        tap_failures++;                                                     \
                }                                                                           \
        } while (0)

#define TEST_DONE()                                                                \
        do {                                                                       \
                if (tap_failures)                                                  \
                        fprintf(stderr, "%d check(s) failed\n", tap_failures);     \
                else                                                               \
                        printf("all checks passed\n");                             \
                return tap_failures ? 1 : 0;                                       \
        } while (0)

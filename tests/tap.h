/* SPDX-License-Identifier: MIT */
/* Minimal checks for the C unit tests: each failed check prints file:line
 * and the expression; main returns the failure count (0 = pass, 77 = skip). */
#pragma once

#include <math.h>
#include <stdio.h>
#include <string.h>

static int tap_failures;

/* One failed check: "file:line: " and the printf-style message. */
#define TAP_FAIL(...)                                           \
        do {                                                    \
                fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);                   \
                fputc('\n', stderr);                            \
                tap_failures++;                                 \
        } while (0)

#define CHECK(cond)                                          \
        do {                                                 \
                if (!(cond))                                 \
                        TAP_FAIL("check failed: %s", #cond); \
        } while (0)

/* Like CHECK, naming the table row. */
#define CHECK_CASE(name, cond)                                          \
        do {                                                            \
                if (!(cond))                                            \
                        TAP_FAIL("[%s] check failed: %s", name, #cond); \
        } while (0)

#define CHECK_EQ_INT(a, b)                                                           \
        do {                                                                         \
                long long _a = (long long)(a), _b = (long long)(b);                  \
                if (_a != _b)                                                        \
                        TAP_FAIL("%s == %lld, expected %s == %lld", #a, _a, #b, _b); \
        } while (0)

#define CHECK_U64(a, b)                                                                        \
        do {                                                                                   \
                unsigned long long _a = (unsigned long long)(a), _b = (unsigned long long)(b); \
                if (_a != _b)                                                                  \
                        TAP_FAIL("%s == %llu, expected %llu", #a, _a, _b);                     \
        } while (0)

/* A 0 / -errno return against the one expected. */
#define CHECK_R(expr, want)                                                                               \
        do {                                                                                              \
                int _r = (expr), _w = (want);                                                             \
                if (_r != _w)                                                                             \
                        TAP_FAIL("%s = %d (%s), want %d (%s)", #expr, _r, strerror(_r < 0 ? -_r : 0), _w, \
                                 strerror(_w < 0 ? -_w : 0));                                             \
        } while (0)

/* Within 1e-9 relative (1e-9 absolute near 0): figures computed from
 * integer inputs are exact up to the last bit or two. */
#define CHECK_NEAR(a, b)                                                      \
        do {                                                                  \
                double _a = (a), _b = (b);                                    \
                if (!(fabs(_a - _b) <= 1e-9 * (fabs(_b) > 1 ? fabs(_b) : 1))) \
                        TAP_FAIL("%s == %.12g, expected %.12g", #a, _a, _b);  \
        } while (0)

#define CHECK_STR(a, b)                                                                                        \
        do {                                                                                                   \
                const char *_a = (a), *_b = (b);                                                               \
                if (!_a || !_b || strcmp(_a, _b) != 0)                                                         \
                        TAP_FAIL("%s == \"%s\", expected \"%s\"", #a, _a ? _a : "(null)", _b ? _b : "(null)"); \
        } while (0)

#define TEST_DONE()                                                            \
        do {                                                                   \
                if (tap_failures)                                              \
                        fprintf(stderr, "%d check(s) failed\n", tap_failures); \
                else                                                           \
                        printf("all checks passed\n");                         \
                return tap_failures ? 1 : 0;                                   \
        } while (0)

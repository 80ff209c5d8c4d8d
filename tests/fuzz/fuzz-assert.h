/* SPDX-License-Identifier: MIT */
/* The fuzz targets' check: abort (which libFuzzer reports with the input)
 * naming the condition that failed. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define fuzz_assert(x)                                                          \
        do {                                                                    \
                if (!(x)) {                                                     \
                        fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #x); \
                        abort();                                                \
                }                                                               \
        } while (0)

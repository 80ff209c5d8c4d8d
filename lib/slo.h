/* SPDX-License-Identifier: MIT */
/* Service-level objectives on an op's latency, "OP:TARGET@PCT": at least
 * PCT % of the op's timings take at most TARGET (a duration in us, ms or
 * s). The API's slo= takes them comma-separated; mlmonctl's --slo writes
 * OP=TARGET@pPCT. One parser for both, so they accept the same words. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Op names are at most this long (the daemon keeps no longer ones). */
#define SLO_OP_MAX 200
#define SLO_MAX 16

struct slo {
        char op[SLO_OP_MAX + 1];
        double target_ms;  /* > 0 */
        double percentile; /* in (0, 100) */
};

/* One objective: op, then `sep` (the last one before the '@'), target,
 * '@', percentile (a 'p' before it is allowed). Returns 0, or -EINVAL
 * with a one-line reason in err (which does not repeat the text). */
int slo_parse(const char *text, char sep, struct slo *ret, char *err, size_t errlen);

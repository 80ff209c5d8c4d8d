/* SPDX-License-Identifier: MIT */
/* Samples shaped like the probe's, for the store's tests: counters that
 * grow, the rates over each interval computed from them as the probe does,
 * an interval with a little jitter, one sample a second from 2027-01-15. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/sample.h"

/* n samples of a process burning cpu_per_s ns of CPU a second (0: idle),
 * with about rss bytes resident, reading and writing when io. */
void sample_series(struct sample *v, size_t n, uint64_t cpu_per_s, uint64_t rss, bool io, uint64_t *seed);

/* SPDX-License-Identifier: MIT */
/* The verdicts beside the leak as typed rows (run_input_bound, run_gpu_idle,
 * run_oom): the latest of each run, written when they change and when the
 * run ends, read back for a run that is no longer in memory. */
#pragma once

#include <stdint.h>

#include "analyze/verdict.h"
#include "store/store.h"

/* Writes the parts r has (inside the caller's transaction). */
int store_update_run_verdicts(struct store *s, int64_t run_id, const struct verdict_report *r);
/* The stored verdicts of run id (parts not stored: has_* false). */
int query_run_verdicts(struct store *s, const struct query_limits *l, int64_t id, struct verdict_report *ret);

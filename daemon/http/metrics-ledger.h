/* SPDX-License-Identifier: MIT */
/* What GET /metrics keeps of each running run's ops between scrapes
 * (metrics-ledger.c): totals that only go up. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/ops.h"

/* ---- op totals that only go up ------------------------------------------- */

/* One op's totals since registration: `closed_*` over the slices folded in
 * so far (closed slices never change), `out_*` what was last exported.
 * A Prometheus counter (and a summary's _count and _sum) must never
 * decrease; the exported value is the running maximum of closed + the
 * still-open slice, which a StatsD counter decrement ("x:-1|c") cannot
 * pull down. */
struct metrics_op_total {
        char *op;
        double closed_count, closed_sum_ms;
        uint64_t closed_timings;
        double out_count, out_sum_ms;
        uint64_t out_timings;
        struct hist closed_h, out_h; /* the timings' buckets, likewise */
};

struct metrics_op_ledger {
        unsigned refs; /* the scrapes that hold it (and the struct metrics that keeps it) */
        int64_t run_id, registered_ts_ms;
        size_t max_ops;          /* ops past this many are not exported (0: no limit) */
        int64_t folded_until_ms; /* slices with ts < this are in closed_* */
        bool caught_up;          /* folded up to a recent slice at least once */
        struct metrics_op_total *v;
        size_t n;
};

/* Adds the merged closed slices of [folded_until, until) and moves
 * folded_until on (and sets caught_up); an op new past max_ops is left
 * out. -ENOMEM leaves the totals as they were. */
int metrics_ledger_fold(struct metrics_op_ledger *l, const struct op_aggs *closed, int64_t until_ms);
/* out_* = max(out_*, closed_* + the open slices' figures in open (may be
 * NULL)); ops seen only in open are added. -ENOMEM. */
int metrics_ledger_export(struct metrics_op_ledger *l, const struct op_aggs *open);
/* Frees what l holds (not l). */
void metrics_ledger_done(struct metrics_op_ledger *l);
/* A ledger on the heap is shared by the scrapes in flight: the last
 * unref frees it. */
struct metrics_op_ledger *metrics_ledger_ref(struct metrics_op_ledger *l);
void metrics_ledger_unref(struct metrics_op_ledger *l);
/* The aggregate of op in a (may be NULL), or NULL. */
const struct op_agg *metrics_aggs_find(const struct op_aggs *a, const char *op);

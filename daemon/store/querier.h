/* SPDX-License-Identifier: MIT */
/* The one querier for a span of a run's data: the caller asks for a span
 * (and a step); the querier picks the tiers that answer it and merges what
 * is stored with what the run still holds in memory, the way a TSDB's
 * querier reads its head and its blocks.
 *
 * A span is cut where the tiers change: the raw 1-second data (op slices,
 * sample blocks and the head) for the part before the first whole minute
 * and after the last one the minute tier holds, the minute tier for the
 * whole minutes, the hour tier for the whole hours in between when the step
 * (or no step: one answer for the whole span) is an hour or more. Each piece
 * is one query. A tier row lies wholly inside its piece, so a span's totals
 * are exact; with a step, a row goes to the step its start lies in. Raw data
 * past its retention is read from the minute tier over the minutes around
 * it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "analyze/ops.h"
#include "collect/sample.h"
#include "store/store.h"

/* What the owner of the live data (the manager) answers: the op slices a
 * run holds in memory within [from, until), added to *a. */
struct live_source {
        int (*ops)(void *userdata, int64_t run_id, int64_t from, int64_t until, const char *op_filter,
                   struct op_aggs *a);
        void *userdata;
};

/* Samples of run_id in [from, until], oldest first, at most limit: the raw
 * samples, or with step_ms > 0 one point per step (buckets of step_ms from
 * the epoch: averages of rates and gauges, counters at their last value). */
int querier_samples(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                    unsigned limit, int64_t step_ms, struct sample **ret, size_t *ret_n, bool *ret_truncated);

/* Rates over [from, until] from the first and last samples inside it. */
struct window_rates {
        int64_t from_ms, until_ms;
        uint64_t samples;
        bool has_cpu;
        double cpu_pct;
        bool has_io;
        double read_bytes_per_s, write_bytes_per_s;
        bool has_net;
        double netns_rx_bytes_per_s, netns_tx_bytes_per_s;
        bool has_gpu;
        double gpu_util_pct;
};
int querier_window(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                   struct window_rates *ret);
/* Pure: rates between two cumulative samples (exposed for tests). */
void window_rates_from(const struct sample *first, const struct sample *last, struct window_rates *w);

/* The totals of run_id over [from, until], as for a whole run but from its
 * samples: counters (CPU, I/O, network, energy) as the change from the last
 * sample at or before `from` (else the first in the span) to the last in
 * the span, peaks as the sampled maxima in the span. *ret_base_ts: the
 * sample the counters start from; 0 (and totals of 0 samples) when the span
 * has no sample. */
int querier_span_totals(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                        struct run_totals *ret, int64_t *ret_base_ts);

/* The op data of run_id within [from, until), stored and live (live may be
 * NULL), merged per op into *a; op_filter NULL: every op. */
int querier_ops(struct store *s, const struct query_limits *l, const struct live_source *live, int64_t run_id,
                int64_t from, int64_t until, const char *op_filter, struct op_aggs *a);

/* The same cut into steps [from + k step_ms, from + (k + 1) step_ms) up to
 * until: *ret_n = the number of steps, each its ops (op_steps_free()). */
int querier_op_steps(struct store *s, const struct query_limits *l, const struct live_source *live, int64_t run_id,
                     int64_t from, int64_t until, int64_t step_ms, const char *op_filter, struct op_aggs **ret,
                     size_t *ret_n);
void op_steps_free(struct op_aggs *v, size_t n);

/* ---- many runs at once ----------------------------------------------------- */
/* For a page that shows every running run: one query per tier for all of
 * them, never one per run. ids: the runs, in ascending order; ret: one
 * result per run, in the same order. */

/* A minute of a run's CPU and RSS: sums and how many samples had each
 * figure, so that the minute's averages are cpu_sum / cpu_n (unknown with
 * cpu_n 0). */
struct spark_point {
        uint64_t cpu_n, rss_n;
        double cpu_sum, rss_sum;
};
#define SPARK_STEP_MS 60000
/* The minutes [from, until) (both whole minutes, at most stride of them)
 * of each run: point k of run i (the minute from + k minutes) added to
 * ret[i * stride + k]. The minutes compacted come from the minute tier,
 * the others from the head with head (else they stay empty: the head holds
 * a row per run and sample of the minutes not compacted yet, 60 000 a
 * minute for 1 000 runs at 1 s, too many to read for every page). */
int querier_sparks(struct store *s, const struct query_limits *l, const int64_t *ids, size_t n, int64_t from,
                   int64_t until, bool head, size_t stride, struct spark_point *ret);

/* The op data of each run within [from, until), stored and live (live may
 * be NULL), merged per op into ret[i]. */
int querier_runs_ops(struct store *s, const struct query_limits *l, const struct live_source *live, const int64_t *ids,
                     size_t n, int64_t from, int64_t until, struct op_aggs *ret);

/* SPDX-License-Identifier: MIT */
/* The one place that names JSON fields. */
#pragma once

#include <json-c/json.h>
#include <stdio.h>

#include "manager-ops.h"
#include "store/querier.h"
#include "store/query.h"
#include "collect/sample.h"
#include "slo.h"

/* gpu: the sample's per-device use (render_gpu_uses(), an empty array for
 * none), taken over; NULL renders null (not known, e.g. a merged step). */
json_object *render_sample(const struct sample *s, json_object *gpu);
/* The same written as text (a stepped answer's thousands of points). */
struct json_text;
void render_sample_text(struct json_text *t, const struct sample *s, json_object *gpu);
/* A run's use of each device ([{"device", "engines": {...}, ...}]). */
struct gpu_use;
struct gpu_device;
json_object *render_gpu_uses(const struct gpu_use *u, size_t n);
/* A device's latest counters (/v1/system), and the part of them that
 * device_samples keeps as JSON. */
json_object *render_device(const struct gpu_device *d);
json_object *render_device_detail(const struct gpu_device *d);
/* latest may be NULL (JSON null); latest_gpu as render_sample's gpu. */
json_object *render_run(const struct run_info *ri, const struct sample *latest, json_object *latest_gpu);
/* co2_g = energy_j in kWh times grid_g_per_kwh ([energy] grid_g_per_kwh). */
json_object *render_summary(const struct run_info *ri, int64_t now_ms, double grid_g_per_kwh);
/* The summary of [from, until] (totals from query_span_totals, counters
 * from the sample at base_ts on), with "from" and "until"; every figure
 * but wall_time_s and samples null when the span has no sample. */
json_object *render_span_summary(const struct run_totals *t, int64_t from, int64_t until, int64_t base_ts,
                                 double grid_g_per_kwh);
/* ops may be NULL (no op data); span_s: what per_s divides by. */
json_object *render_window(const struct window_rates *w, double window_s, const struct op_aggs *ops, double span_s);
/* One op's latency: count, total, mean, stddev, min, max and the asked
 * percentiles (qs in (0, 100]). */
json_object *render_latency_op(const struct op_agg *a, const double *qs, size_t nq);
/* The same written as text, with "per_s" (a step of /latency?step=). */
void render_latency_step_op(struct json_text *t, const struct op_agg *a, const double *qs, size_t nq, double per_s);
/* One gauge: {"value", "ts"}, and with stats {"min", "max", "count"} over
 * the span g covers. */
json_object *render_gauge(const struct gauge_stat *g, bool stats);
/* One stored value of a gauge: {"ts", "name", "value"}, as text. */
void render_gauge_point_text(struct json_text *t, const struct gauge_point *g);

/* One objective over the span's histogram of its op (NULL: no timings):
 * op, target_ms, percentile, count, over (timings above the target, see
 * hist_count_above), over_share, percentile_ms, met (percentile_ms <=
 * target_ms); the last four null without timings. */
json_object *render_slo(const struct slo *o, const struct hist *h);
/* "p50_ms", "p99.9_ms". */
void render_quantile_key(double q, char *buf, size_t size);
json_object *render_health(const struct manager_stats *st);
/* One leak verdict, of the series named metric. */
struct leak_state;
struct leak_report;
json_object *render_leak(const struct leak_state *l, const char *metric);
/* A run's "leak": the anonymous RSS verdict, with the GPU memory one as
 * "gpu_mem" (null while the run has no GPU memory). */
json_object *render_run_leak(const struct leak_report *r);
json_object *render_system(const struct manager_stats *st);

/* A span's goodput ledger, as api-goodput.c works it out. */
struct goodput_ledger {
        int64_t from_ms, until_ms;
        double wall_ms; /* until - from; for a job the mean of its ranks' */
        const char *step_op;
        bool has_split;   /* the step op had timings: the parts are known */
        bool has_startup; /* when the first step ended is known (else its time is other's) */
        double ms[_GOODPUT_KIND_MAX];
        double steps;
        double ideal_step_ms; /* NaN: unknown */
        bool has_energy;
        double energy_j;
        const char *reason; /* why there is no split; NULL when there is */
};
/* wall_s, step_op, the parts as KIND_s (rounded to the millisecond, other_s
 * taking what rounding leaves, so that they add up to wall_s exactly), steps,
 * ideal_step_ms, goodput_pct, the energy per step and per productive hour,
 * and reason. */
json_object *render_goodput(const struct goodput_ledger *l);
/* One point of a ledger's series: {"ts", KIND_s...}, adding up to span_ms. */
json_object *render_goodput_point(int64_t ts_ms, const double *ms, double span_ms);
/* The verdicts beside the leak. */
struct input_bound_verdict;
struct gpu_idle_verdict;
struct oom_forecast;
json_object *render_input_bound(const struct input_bound_verdict *v);
json_object *render_gpu_idle(const struct gpu_idle_verdict *v);
json_object *render_oom(const struct oom_forecast *f);
/* One run of GET /v1/overview, as its handler gathered it. */
struct overview_run {
        struct run_info info; /* info.leak_detected: a leak was suspected at some point */
        bool has_last;
        struct sample last;
        bool has_leak; /* the verdicts now (the last stored ones for a run that ended) */
        struct leak_report leak;
        int64_t spark_from; /* the minute of the first point of spark */
        const struct spark_point *spark;
        const struct op_agg *top; /* the op that cost the most time in the window; NULL: none */
        double covered_s;         /* the part of the window the run covers (what per_s divides by) */
};
/* The answer of GET /v1/overview. */
struct overview_doc {
        int64_t ts_ms;
        double window_s;
        const struct overview_run *runs; /* the running ones first */
        size_t n, n_running;
        size_t npoints; /* of each run's spark */
        bool truncated;
        json_object *jobs; /* an array of GET /v1/jobs items + "stragglers" */
        size_t jobs_total;
};
/* As JSON text (1 000 runs are 600 KB: json-c objects cost 30 to 70 ms of
 * a 2-core machine); each run with its identity, latest figures, leak
 * flags, CPU and RSS a minute at a time and its top op. */
void render_overview(FILE *f, const struct overview_doc *d);

/* SPDX-License-Identifier: MIT */
/* Read-only questions to the store, on its reader connection, each bounded
 * in time (a progress handler) and in rows. Knows nothing of /proc or HTTP. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "analyze/ops.h"
#include "collect/sample.h"
#include "util.h"
#include "store/store.h"

/* The run and (ret->leak, NULL if none) its stored verdicts. -ENOENT: no
 * such run; -ETIMEDOUT: over the time budget; -EIO. */
int query_run(struct store *s, const struct query_limits *l, int64_t id, struct run_info *ret);

/* The run's stored verdicts: -ENOENT if none were stored. */
struct leak_report;
int query_run_leak(struct store *s, const struct query_limits *l, int64_t id, struct leak_report *ret);

struct runs_filter {
        int state;          /* enum run_state, or -1 for all */
        bool ended;         /* only runs that ended (exited or unregistered) */
        const char *name;   /* NULL = any */
        int pid;            /* 0 = any */
        const char *job_id; /* NULL = any; else the runs tagged job_id=job_id */
        int64_t after_id;   /* only runs after this one (a larger id, or a smaller newest first; 0: from the
                               first): a list read in pages */
        bool newest_first;  /* in descending id order */
};
int query_runs(struct store *s, const struct query_limits *l, const struct runs_filter *f, struct run_info **ret,
               size_t *ret_n, bool *ret_truncated);
void run_infos_free(struct run_info *v, size_t n);
/* The runs that ended (exited or unregistered), the last to end first, at
 * most max of them. */
int query_runs_ended(struct store *s, const struct query_limits *l, size_t max, struct run_info **ret, size_t *ret_n);

/* A job: the runs that share a job_id tag. */
struct job_info {
        int64_t first_registered_ts_ms; /* first: query.c frees no string at offset 0 */
        char *job_id;
        uint64_t runs, ranks;     /* ranks: distinct rank tags */
        uint64_t running;         /* runs still running */
        int64_t last_ended_ts_ms; /* the latest end; meaningful only when running == 0 */
};
void job_infos_free(struct job_info *v, size_t n);
/* The jobs with at least one run, oldest first. */
int query_jobs(struct store *s, const struct query_limits *l, struct job_info **ret, size_t *ret_n,
               bool *ret_truncated);

/* The sample of run_id at exactly ts (the latest of a finished run). */
int query_sample_at(struct store *s, const struct query_limits *l, int64_t run_id, int64_t ts, struct sample *ret);

/* The use of each device the run held at one sample (only samples that
 * held one have an entry), oldest first, devices by name. */
struct gpu_use;
struct sample_gpu {
        int64_t ts_ms;
        struct gpu_use *uses;
        size_t n;
};
void sample_gpus_free(struct sample_gpu *v, size_t n);
int query_sample_gpu(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                     struct sample_gpu **ret, size_t *ret_n);

struct mark {
        int64_t ts_ms;
        char *label;
};
void marks_free(struct mark *v, size_t n);
int query_marks(struct store *s, const struct query_limits *l, int64_t run_id, struct mark **ret, size_t *ret_n);
/* The latest mark with that label: -ENOENT if none. */
int query_mark_ts(struct store *s, const struct query_limits *l, int64_t run_id, const char *label, int64_t *ret_ts);

struct gauge_point {
        int64_t ts_ms;
        char *name;
        double value;
};
void gauge_points_free(struct gauge_point *v, size_t n);
int query_gauges(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                 unsigned limit, struct gauge_point **ret, size_t *ret_n, bool *ret_truncated);

/* One gauge over a span: its latest value (and when), the smallest and
 * largest, and how many values were stored. */
struct gauge_stat {
        int64_t ts_ms; /* first: query.c frees no string at offset 0 */
        char *name;
        double value, min, max;
        uint64_t count;
};
void gauge_stats_free(struct gauge_stat *v, size_t n);
/* Per gauge name of run_id with ts in [from, until], by name. */
int query_gauge_stats(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                      struct gauge_stat **ret, size_t *ret_n);

struct leak_event {
        int64_t ts_ms;
        bool suspected;
        char *metric;
        char *reason;
};
void leak_events_free(struct leak_event *v, size_t n);
int query_leak_events(struct store *s, const struct query_limits *l, int64_t run_id, struct leak_event **ret,
                      size_t *ret_n);

/* SPDX-License-Identifier: MIT */
/* What the API's handlers share: the context every request reaches through
 * rq->userdata, and helpers over the manager's operations and the store. */
#pragma once

#include "config.h"
#include "http/request.h"
#include "manager-ops.h"
#include "store/querier.h"
#include "store/query.h"

struct api {
        struct manager_link manager;
        struct live_source live; /* the manager's live op slices, for the querier */
        const struct config *config;
        struct store *store;
        struct metrics *metrics; /* GET /metrics: op totals kept between scrapes */
        struct server *server;
};

static inline struct api *api_of(struct request *rq) {
        return rq->userdata;
}
/* A running run's state in memory (manager_ops.live): -ENOENT if it is
 * not running. */
static inline int api_live(struct api *a, int64_t id, unsigned what, struct run_live *ret) {
        return a->manager.ops->live(a->manager.userdata, id, what, ret);
}
/* Calls fn with each running run's state in memory (RUN_LIVE_* bits in
 * what), in id order; a run that ends meanwhile is left out. Stops at fn's
 * first nonzero return and returns it. */
int api_each_running(struct api *a, unsigned what, int (*fn)(struct run_live *live, void *userdata), void *userdata);
/* Lets a tick that is due run now (manager_ops.yield): between the pieces
 * of a long answer. */
static inline void api_yield(struct api *a) {
        a->manager.ops->yield(a->manager.userdata);
}

/* The query limits of [http] (query_timeout, max_rows). */
struct query_limits limits(struct request *rq);
/* 503 for a timeout or out of memory, else 500. */
void respond_query_error(struct request *rq, int r);
/* 200 with the JSON text t holds (taken), or 503 if it ran out of memory. */
struct json_text;
void respond_json_written(struct request *rq, struct json_text *t);
/* The op data of run id over the 1-second slices overlapping [from,
 * until] (op: only that op; NULL: all): the stored slices, plus those still
 * in memory for a running run. *ret_span_from: the start of the slice
 * holding from, where the data really begins; at_mark: from is a mark's
 * time, where its slices were cut, so the span begins there. */
int run_ops(struct request *rq, int64_t id, int64_t from, int64_t until, bool at_mark, const char *op,
            struct op_aggs *ret, int64_t *ret_span_from);
/* Windows and ranges longer than the raw retention cannot be answered from
 * raw samples anyway; cap what a client can ask for. */
#define MAX_WINDOW_USEC (3650 * USEC_PER_DAY)
/* window=: a duration of 1 ms to MAX_WINDOW_USEC; on false the response
 * is already set. */
bool parse_window(struct request *rq, const char *w, usec_t *ret);
/* q=: "50,90,99.9" -> at most MAX_QUANTILES percentiles in (0, 100]; on
 * false the response is already set. */
#define MAX_QUANTILES 10
bool parse_quantiles(struct request *rq, const char *spec, double *qs, size_t *ret_n);
/* The span [from, until] a question about a run is about: window (ending
 * at until; default 1 minute, or the whole run with whole_run), or
 * from/until, or since_mark (*ret_mark: {label, ts}). False: answered. */
bool parse_run_span(struct request *rq, const struct run_info *ri, bool whole_run, int64_t *ret_from,
                    int64_t *ret_until, double *ret_window_s, json_object **ret_mark);
/* The end of the run's data: now while it runs. */
int64_t run_end(const struct run_info *ri, int64_t now_ms);
/* [*from, *until) cut to the run's life, registration to run_end(). */
void span_within_run(const struct run_info *ri, int64_t now_ms, int64_t *from, int64_t *until);
/* Looks the run up; on failure the response is already set. */
bool load_run(struct request *rq, const char *idtext, struct run_info *ri);
/* A running run's totals are kept in memory and written at intervals. */
void overlay_live(struct request *rq, struct run_info *ri);
/* The run with its latest sample: an item of a list. A run of a list holds
 * no gauges: a run may have hundreds, and a list thousands of runs. */
json_object *run_with_latest(struct request *rq, const struct run_info *ri);
/* The same with the latest value of each gauge: a run's own answers. */
json_object *run_with_gauges(struct request *rq, const struct run_info *ri);
/* The leak verdict: live for a running run, as stored otherwise;
 * with_history adds the stored verdict changes. */
json_object *run_leak(struct request *rq, const struct run_info *ri, bool with_history);
/* step_op, input_bound, gpu_idle and, in its "leak" (added before), the
 * time to OOM: live for a running run, as stored otherwise. */
void run_add_verdicts(struct request *rq, const struct run_info *ri, json_object *o);
/* The run with its latest sample, summary and leak verdict. */
json_object *run_full(struct request *rq, const struct run_info *ri);

/* How many jobs are stalled now (analyze/stall.h), for /v1/health. */
int api_jobs_stalled(struct request *rq, unsigned *ret);
/* One job as GET /v1/jobs lists it (a running one judged now). */
struct job_info;
int api_job_item(struct request *rq, const struct job_info *v, json_object **ret);
/* The stragglers of the latest attempt of the job over its whole span (as
 * GET /v1/jobs/{job_id} names them): -ENOENT no such job. */
int api_job_stragglers(struct request *rq, const char *job_id, json_object **ret);

/* The handlers of the route table (api.c), by file. */
handler_fn h_runs_list, h_runs_post, h_run_get, h_run_delete, h_leaks;                               /* api-runs.c */
handler_fn h_run_samples, h_run_throughput, h_run_latency, h_run_summary, h_run_marks_get;           /* api-series.c */
handler_fn h_run_observations, h_observations, h_run_marks_post, h_run_sample_post, h_run_exit_post; /* api-feed.c */
/* A job id as a run's job_id tag may hold it: 1 to TAG_VALUE_MAX bytes of
 * UTF-8. Not plain text alone: a job stored by an mlmond that took any text
 * stays reachable (its pages isolate what they show). */
bool valid_job_id(const char *s);
handler_fn h_jobs_list, h_job_get;                                           /* api-jobs.c */
handler_fn h_run_goodput, h_job_goodput;                                     /* api-goodput.c */
handler_fn h_overview;                                                       /* api-overview.c */
handler_fn h_web_overview, h_web_run, h_web_job, h_web_asset, h_web_library; /* web.c */

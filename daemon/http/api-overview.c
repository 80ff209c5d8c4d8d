/* SPDX-License-Identifier: MIT */
/* GET /v1/overview: what the overview page shows, in one answer: the
 * running runs and the latest finished ones, each with its latest figures,
 * its leak flags, its CPU and RSS a minute at a time and the op that cost it
 * the most time, and the jobs with their stragglers.
 *
 * The running runs are copied from the manager's memory; their minutes and
 * ops are read for all of them at once (one query per tier). The finished
 * runs, a few, end at different times: each is read on its own. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/handlers.h"
#include "http/render.h"
#include "json-util.h"

/* The sparklines: the last 10 minutes by default, at most an hour (a
 * minute a point). */
#define SPARK_DEFAULT_USEC (10 * USEC_PER_MINUTE)
#define SPARK_MAX_USEC USEC_PER_HOUR
/* The top op's window: the last minute by default, at most an hour. */
#define WINDOW_DEFAULT_USEC USEC_PER_MINUTE
#define WINDOW_MAX_USEC USEC_PER_HOUR
/* Finished runs and jobs shown: each finished run is read on its own, and
 * each job's stragglers cost a merge of its ranks' histograms. */
#define FINISHED_DEFAULT 20
#define JOBS_DEFAULT 20
#define SHOWN_MAX 100

struct overview {
        struct overview_run *v;
        size_t n, n_running;
        bool truncated;
        size_t npoints;
        struct spark_point *points; /* n * npoints */
        struct op_aggs *ops;        /* n */
};

static void overview_done(struct overview *o) {
        for (size_t i = 0; i < o->n; i++) {
                run_info_done(&o->v[i].info);
                if (o->ops)
                        op_aggs_done(&o->ops[i]);
        }
        free(o->v);
        free(o->points);
        free(o->ops);
}

static struct overview_run *overview_add(struct overview *o) {
        if (!GREEDY_REALLOC(o->v, o->n + 1))
                return NULL;
        o->v[o->n] = (struct overview_run){};
        return &o->v[o->n++];
}

/* A running run's copy, taken over (at most max: then 1, truncated). */
struct running_ctx {
        struct overview *o;
        size_t max;
};

static int add_running(struct run_live *live, void *userdata) {
        struct running_ctx *c = userdata;
        struct overview *o = c->o;
        if (o->n == c->max) {
                o->truncated = true;
                return 1;
        }
        struct overview_run *v = overview_add(o);
        if (!v)
                return -ENOMEM;
        v->info = live->info;
        live->info = (struct run_info){};
        v->has_last = live->has_last;
        v->last = live->last;
        v->has_leak = live->has_leak;
        v->leak = live->leak;
        o->n_running = o->n;
        return 0;
}

static bool listed(const struct overview *o, int64_t id) {
        for (size_t i = 0; i < o->n_running; i++)
                if (o->v[i].info.id == id)
                        return true;
        return false;
}

/* The latest finished runs, the last to end first, each with its last
 * sample and its last stored verdicts. */
static int add_finished(struct request *rq, struct overview *o, size_t max) {
        struct query_limits lim = limits(rq);
        struct run_info *v = NULL;
        size_t n = 0;
        int r = query_runs_ended(api_of(rq)->store, &lim, max, &v, &n);
        for (size_t i = 0; i < n && r == 0; i++) {
                if (listed(o, v[i].id)) /* it ended after the running ones were listed */
                        continue;
                struct overview_run *x = overview_add(o);
                if (!x) {
                        r = -ENOMEM;
                        break;
                }
                x->info = v[i];
                v[i] = (struct run_info){};
                const struct run_info *ri = &x->info;
                int q = ri->totals.last_ts_ms
                                ? query_sample_at(api_of(rq)->store, &lim, ri->id, ri->totals.last_ts_ms, &x->last)
                                : -ENOENT;
                x->has_last = q == 0;
                if (q == 0 || q == -ENOENT)
                        q = query_run_leak(api_of(rq)->store, &lim, ri->id, &x->leak);
                x->has_leak = q == 0;
                if (q < 0 && q != -ENOENT)
                        r = q;
        }
        run_infos_free(v, n);
        return r;
}

/* Where a run's data ends: now while it runs, else its end. */
static int64_t end_of(const struct run_info *ri, int64_t now_ms) {
        if (ri->state == RUN_RUNNING)
                return now_ms;
        return ri->ended_ts_ms ? ri->ended_ts_ms : ri->totals.last_ts_ms ? ri->totals.last_ts_ms : now_ms;
}

/* The minutes and the ops of runs [first, first + n) of o, all ending at
 * end: one query per tier for them all. The running runs' minutes are the
 * minute tier's, and the minute being sampled is their latest sample: the
 * store's head has a row per run and sample, too many to read on every
 * refresh of the page, so a minute just ended shows once compacted (a few
 * seconds later). */
static int read_series(struct request *rq, struct overview *o, size_t first, size_t n, int64_t end, int64_t window_ms,
                       int64_t now_ms) {
        struct api *a = api_of(rq);
        struct query_limits lim = limits(rq);
        _cleanup_free_ int64_t *ids = calloc(n ? n : 1, sizeof *ids);
        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                ids[i] = o->v[first + i].info.id;
        /* the minute holding end is the last point */
        int64_t last = end / SPARK_STEP_MS * SPARK_STEP_MS, from = last - (int64_t)(o->npoints - 1) * SPARK_STEP_MS;
        bool running = first < o->n_running;
        int r = querier_sparks(a->store, &lim, ids, n, from, running ? last : last + SPARK_STEP_MS, !running,
                               o->npoints, &o->points[first * o->npoints]);
        /* the ops over the slices of [end - window, end] */
        int64_t span_from = ops_slice_of(end - window_ms);
        if (r == 0)
                r = querier_runs_ops(a->store, &lim, running ? &a->live : NULL, ids, n, span_from, end + 1,
                                     &o->ops[first]);
        for (size_t i = 0; i < n && r == 0; i++) {
                struct overview_run *v = &o->v[first + i];
                const struct run_info *ri = &v->info;
                /* per_s divides by the part of the window the run covers */
                int64_t cf = span_from > ri->registered_ts_ms ? span_from : ri->registered_ts_ms;
                int64_t cu = ri->state == RUN_RUNNING || !ri->ended_ts_ms ? now_ms : ri->ended_ts_ms;
                if (cu > end)
                        cu = end;
                v->spark_from = from;
                v->spark = &o->points[(first + i) * o->npoints];
                struct spark_point *now = &o->points[(first + i + 1) * o->npoints - 1];
                if (running && v->has_last && v->last.has_cpu_pct)
                        *now = (struct spark_point){ .cpu_n = 1, .cpu_sum = v->last.cpu_pct };
                if (running && v->has_last && v->last.has_rss) {
                        now->rss_n = 1;
                        now->rss_sum = (double)v->last.rss_bytes;
                }
                v->top = op_aggs_top(&o->ops[first + i]);
                v->covered_s = cu > cf ? (double)(cu - cf) / 1000.0 : 0;
        }
        return r;
}

/* The jobs as the page lists them: the running ones, the latest first,
 * then the finished ones, the latest first; at most max, each with the
 * stragglers of the whole job (null when they cannot be had). */
static int jobs_shown(struct request *rq, size_t max, json_object **ret, size_t *ret_total) {
        struct query_limits lim = limits(rq);
        struct job_info *v = NULL;
        size_t n = 0;
        bool truncated;
        int r = query_jobs(api_of(rq)->store, &lim, &v, &n, &truncated);
        if (r < 0)
                return r;
        json_object *arr = json_object_new_array();
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = n; i > 0 && r == 0 && json_object_array_length(arr) < max; i--) {
                        const struct job_info *j = &v[i - 1];
                        if ((j->running > 0) != (pass == 0))
                                continue;
                        json_object *o = NULL, *stragglers = NULL;
                        r = api_job_item(rq, j, &o);
                        if (r == 0 && api_job_stragglers(rq, j->job_id, &stragglers) < 0)
                                stragglers = NULL;
                        json_object_object_add(o, "stragglers", stragglers);
                        json_object_array_add(arr, o);
                }
        job_infos_free(v, n);
        if (r < 0) {
                json_object_put(arr);
                return r;
        }
        *ret = arr;
        *ret_total = n;
        return 0;
}

/* A count of 0 to SHOWN_MAX; false: answered. */
static bool parse_count(struct request *rq, const char *key, unsigned def, size_t *ret) {
        const char *v = arg(rq, key);
        unsigned u = def;
        if (v && (safe_atou(v, &u) < 0 || u > SHOWN_MAX)) {
                respond_error(rq, 400, "bad_request", "%s: must be a whole number from 0 to %d", key, SHOWN_MAX);
                return false;
        }
        *ret = u;
        return true;
}

/* A duration of min to max; false: answered. */
static bool parse_span_arg(struct request *rq, const char *key, usec_t def, usec_t min, usec_t max, int64_t *ret_ms) {
        const char *v = arg(rq, key);
        usec_t d = def;
        if (v && (parse_duration(v, &d) < 0 || d < min || d > max)) {
                _cleanup_free_ char *clean = utf8_sanitize(v, strnlen(v, 64));
                respond_error(rq, 400, "bad_request", "%s: '%s' is not a duration from %llus to %llus", key,
                              clean ? clean : "?", (unsigned long long)(min / USEC_PER_SEC),
                              (unsigned long long)(max / USEC_PER_SEC));
                return false;
        }
        *ret_ms = (int64_t)(d / USEC_PER_MSEC);
        return true;
}

void h_overview(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "spark", "window", "finished", "jobs", NULL };
        int64_t spark_ms, window_ms;
        size_t finished, jobs;
        if (!check_args(rq, allowed) ||
            !parse_span_arg(rq, "spark", SPARK_DEFAULT_USEC, USEC_PER_MINUTE, SPARK_MAX_USEC, &spark_ms) ||
            !parse_span_arg(rq, "window", WINDOW_DEFAULT_USEC, USEC_PER_SEC, WINDOW_MAX_USEC, &window_ms) ||
            !parse_count(rq, "finished", FINISHED_DEFAULT, &finished) || !parse_count(rq, "jobs", JOBS_DEFAULT, &jobs))
                return;
        struct api *a = api_of(rq);
        int64_t now_ms = now_realtime_ms();
        struct overview o = { .npoints = (size_t)(spark_ms / SPARK_STEP_MS) + 1 };
        struct running_ctx rc = { &o, a->config->http_max_rows };
        int r = api_each_running(a, RUN_LIVE_INFO | RUN_LIVE_LAST | RUN_LIVE_LEAK, add_running, &rc);
        if (r > 0)
                r = 0;
        if (r == 0)
                r = add_finished(rq, &o, finished);
        if (r == 0) {
                o.points = calloc(o.n ? o.n * o.npoints : 1, sizeof *o.points);
                o.ops = calloc(o.n ? o.n : 1, sizeof *o.ops);
                r = o.points && o.ops ? 0 : -ENOMEM;
        }
        if (r == 0)
                r = read_series(rq, &o, 0, o.n_running, now_ms, window_ms, now_ms);
        for (size_t i = o.n_running; i < o.n && r == 0; i++)
                r = read_series(rq, &o, i, 1, end_of(&o.v[i].info, now_ms), window_ms, now_ms);
        struct overview_doc doc = { .ts_ms = now_ms,
                                    .window_s = (double)window_ms / 1000.0,
                                    .runs = o.v,
                                    .n = o.n,
                                    .n_running = o.n_running,
                                    .npoints = o.npoints,
                                    .truncated = o.truncated };
        if (r == 0)
                r = jobs_shown(rq, jobs, &doc.jobs, &doc.jobs_total);
        char *text = NULL;
        size_t len = 0;
        if (r == 0) {
                FILE *f = open_memstream(&text, &len);
                if (f) {
                        render_overview(f, &doc);
                        if (fclose(f) < 0 || !text)
                                r = -ENOMEM;
                } else
                        r = -ENOMEM;
        }
        json_object_put(doc.jobs);
        overview_done(&o);
        if (r < 0) {
                free(text);
                respond_query_error(rq, r);
                return;
        }
        respond_json_text(rq, 200, text, len);
}

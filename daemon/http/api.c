/* SPDX-License-Identifier: MIT */
#include "http/api.h"

#include <string.h>

#include "http/handlers.h"
#include "http/metrics.h"
#include "http/render.h"
#include "http/server.h"
#include "json-util.h"
#include "store/verdicts.h"

struct query_limits limits(struct request *rq) {
        const struct config *c = api_of(rq)->config;
        return (struct query_limits){ .timeout_usec = c->http_query_timeout_usec, .max_rows = c->http_max_rows };
}

void respond_query_error(struct request *rq, int r) {
        if (r == -ETIMEDOUT)
                respond_error(rq, 503, "unavailable", "the query took longer than query_timeout; ask for less");
        else if (r == -ENOMEM)
                respond_error(rq, 503, "unavailable", "out of memory");
        else
                respond_error(rq, 500, "internal", "database error");
}

void respond_json_written(struct request *rq, struct json_text *t) {
        size_t len = 0;
        char *text = json_text_take(t, &len);
        if (text)
                respond_json_text(rq, 200, text, len);
        else
                respond_query_error(rq, -ENOMEM);
}

/* The op data of run id over the slices overlapping [from, until]: stored
 * slices, plus the ones still in memory for a running run. Slices are 1 s,
 * so the span really starts at the slice holding `from` (*ret_span_from);
 * a rate divides by that span clipped to the part the run covers. A mark
 * cut its run's slices where it was made, so a span from a mark (at_mark)
 * starts right there. */
int run_ops(struct request *rq, int64_t id, int64_t from, int64_t until, bool at_mark, const char *op,
            struct op_aggs *ret, int64_t *ret_span_from) {
        struct api *a = api_of(rq);
        struct query_limits lim = limits(rq);
        int64_t span_from = at_mark ? from : ops_slice_of(from < 0 ? 0 : from);
        int r = querier_ops(a->store, &lim, &a->live, id, span_from, until + 1, op, ret);
        *ret_span_from = span_from;
        return r;
}

/* The manager's running runs are copied this many at a time. */
#define RUNNING_PER_PAGE 64

int api_each_running(struct api *a, unsigned what, int (*fn)(struct run_live *live, void *userdata), void *userdata) {
        struct run_ref page[RUNNING_PER_PAGE];
        size_t n;
        for (int64_t after = 0; (n = a->manager.ops->running(a->manager.userdata, after, page, RUNNING_PER_PAGE)) > 0;
             after = page[n - 1].id)
                for (size_t i = 0; i < n; i++) {
                        struct run_live live;
                        int r = api_live(a, page[i].id, what, &live);
                        if (r == -ENOENT)
                                continue; /* it ended meanwhile */
                        if (r == 0)
                                r = fn(&live, userdata);
                        run_live_done(&live);
                        if (r != 0)
                                return r;
                }
        return 0;
}

bool parse_window(struct request *rq, const char *w, usec_t *ret) {
        if (parse_duration(w, ret) < 0 || *ret < USEC_PER_MSEC || *ret > MAX_WINDOW_USEC) {
                _cleanup_free_ char *clean = utf8_sanitize(w, strnlen(w, 64));
                respond_error(rq, 400, "bad_request", "window: '%s' is not a duration", clean ? clean : "?");
                return false;
        }
        return true;
}

/* "50,90,99.9" -> percentiles in (0, 100], at most 3 decimals. */
bool parse_quantiles(struct request *rq, const char *spec, double *qs, size_t *ret_n) {
        char buf[256];
        size_t n = 0;
        if (strlen(spec) >= sizeof buf) {
                respond_error(rq, 400, "bad_request", "q: too long");
                return false;
        }
        snprintf(buf, sizeof buf, "%s", spec);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                double q;
                const char *dot = strchr(t, '.');
                /* plain decimals only: strtod would also take 1e-4 or 0x10 */
                bool plain = strspn(t, "0123456789.") == strlen(t) && (!dot || !strchr(dot + 1, '.')) && t[0] != '.';
                if (n == MAX_QUANTILES || !plain || safe_atod(t, &q) < 0 || !(q > 0 && q <= 100) ||
                    (dot && strlen(dot + 1) > 3)) {
                        _cleanup_free_ char *clean = utf8_sanitize(t, strnlen(t, 64));
                        respond_error(rq, 400, "bad_request",
                                      "q: '%s' is not a percentile in (0, 100] (at most %d, e.g. q=50,90,99.9)",
                                      clean ? clean : "?", MAX_QUANTILES);
                        return false;
                }
                qs[n++] = q;
        }
        if (n == 0) {
                respond_error(rq, 400, "bad_request", "q: at least one percentile is required");
                return false;
        }
        *ret_n = n;
        return true;
}

static void api_stats(struct api *a, struct manager_stats *ret) {
        a->manager.ops->stats(a->manager.userdata, ret);
        if (metrics_recently_limited(a->metrics))
                ret->health |= HEALTH_METRICS_LIMITED;
}

/* GET of a document rendered from the daemon's own figures alone. */
static void respond_stats(struct request *rq, json_object *(*render)(const struct manager_stats *st)) {
        struct manager_stats st;
        if (!check_args(rq, NULL))
                return;
        api_stats(api_of(rq), &st);
        respond_json(rq, 200, render(&st));
}

static void h_health(struct request *rq, const char *const *parts, size_t nparts) {
        struct manager_stats st;
        if (!check_args(rq, NULL))
                return;
        api_stats(api_of(rq), &st);
        /* the jobs are judged here, where their data is: a query too slow
         * for the health answer leaves the count out (null) */
        st.has_jobs_stalled = api_jobs_stalled(rq, &st.jobs_stalled) == 0;
        respond_json(rq, 200, render_health(&st));
}

/* POST /v1/health/ack: root has seen to what health reports (a damaged
 * write-ahead log); the answer is the health that follows. */
static void h_health_ack(struct request *rq, const char *const *parts, size_t nparts) {
        if (!check_args(rq, NULL) || !caller_known(rq))
                return;
        struct api *a = api_of(rq);
        int r = a->manager.ops->health_ack(a->manager.userdata,
                                           &(struct caller){ .is_root = rq->caller_root, .uid = rq->caller_uid });
        if (r == -EPERM) {
                respond_error(rq, 403, "forbidden", "only root may acknowledge what /v1/health reports");
                return;
        }
        if (r < 0) {
                respond_error(rq, 503, "unavailable", "the acknowledgement could not be stored");
                return;
        }
        respond_stats(rq, render_health);
}

static void h_system(struct request *rq, const char *const *parts, size_t nparts) {
        respond_stats(rq, render_system);
}

/* Latest sample: from memory for a running run, else the stored last one;
 * *ret_gpu: its per-device use (a JSON array, or NULL for none). */
static bool latest_sample(struct request *rq, const struct run_info *ri, const struct run_live *live,
                          struct sample *ret, json_object **ret_gpu) {
        *ret_gpu = NULL;
        if (live && live->has_last) {
                *ret = live->last;
                if (live->n_uses)
                        *ret_gpu = render_gpu_uses(live->uses, live->n_uses);
                return true;
        }
        struct query_limits lim = limits(rq);
        if (!ri->totals.last_ts_ms || query_sample_at(api_of(rq)->store, &lim, ri->id, ri->totals.last_ts_ms, ret) < 0)
                return false;
        struct sample_gpu *g = NULL;
        size_t n = 0;
        if (query_sample_gpu(api_of(rq)->store, &lim, ri->id, ret->ts_ms, ret->ts_ms, &g, &n) == 0 && n > 0)
                *ret_gpu = render_gpu_uses(g[0].uses, g[0].n);
        sample_gpus_free(g, n);
        return true;
}

/* A running run's totals are kept in memory and written to its row only
 * every few ticks: the live ones are the truth. */
void overlay_live(struct request *rq, struct run_info *ri) {
        struct run_live live;
        if (ri->state != RUN_RUNNING || api_live(api_of(rq), ri->id, 0, &live) < 0)
                return;
        ri->totals = live.info.totals;
        ri->leak_detected = ri->leak_detected || live.info.leak_detected;
        ri->has_left_out = live.info.has_left_out;
        ri->left_out = live.info.left_out;
        run_live_done(&live);
}

/* The latest value of each gauge: from memory for a running run that has
 * them all there (a list of thousands of runs asks no query), else from the
 * store; null when the store cannot say. */
static json_object *run_gauges(struct request *rq, const struct run_info *ri, const struct run_live *live) {
        json_object *o = json_object_new_object();
        if (live && (live->gauges_live || live->n_gauges > 0)) {
                for (size_t i = 0; i < live->n_gauges; i++) {
                        const struct gauge_value *g = &live->gauges[i];
                        struct gauge_stat st = { .name = g->name, .ts_ms = g->ts, .value = g->value };
                        json_object_object_add(o, g->name, render_gauge(&st, false));
                }
                return o;
        }
        struct query_limits lim = limits(rq);
        struct gauge_stat *v = NULL;
        size_t n = 0;
        if (query_gauge_stats(api_of(rq)->store, &lim, ri->id, ri->registered_ts_ms, INT64_MAX, &v, &n) < 0) {
                json_object_put(o);
                return NULL;
        }
        for (size_t i = 0; i < n; i++)
                json_object_object_add(o, v[i].name, render_gauge(&v[i], false));
        gauge_stats_free(v, n);
        return o;
}

static json_object *run_object(struct request *rq, const struct run_info *ri, bool with_gauges) {
        struct sample s;
        json_object *gpu = NULL;
        struct run_live live;
        bool running = ri->state == RUN_RUNNING &&
                       api_live(api_of(rq), ri->id, RUN_LIVE_LAST | (with_gauges ? RUN_LIVE_GAUGES : 0), &live) == 0;
        bool has = latest_sample(rq, ri, running ? &live : NULL, &s, &gpu);
        json_object *o = render_run(ri, has ? &s : NULL, has && !gpu ? json_object_new_array() : gpu);
        if (with_gauges)
                json_object_object_add(o, "gauges", run_gauges(rq, ri, running ? &live : NULL));
        if (running)
                run_live_done(&live);
        return o;
}

json_object *run_with_latest(struct request *rq, const struct run_info *ri) {
        return run_object(rq, ri, false);
}

json_object *run_with_gauges(struct request *rq, const struct run_info *ri) {
        return run_object(rq, ri, true);
}

/* Looks the run up; on failure the response is already set. */
bool load_run(struct request *rq, const char *idtext, struct run_info *ri) {
        int64_t id;
        if (!parse_id(rq, idtext, &id))
                return false;
        struct query_limits lim = limits(rq);
        int r = query_run(api_of(rq)->store, &lim, id, ri);
        if (r == -ENOENT) {
                respond_error(rq, 404, "not_found", "no run %lld", (long long)id);
                return false;
        }
        if (r < 0) {
                respond_query_error(rq, r);
                return false;
        }
        overlay_live(rq, ri);
        return true;
}

/* The verdict: live for a running run, as stored for a finished one; with
 * the history of its changes. */
json_object *run_leak(struct request *rq, const struct run_info *ri, bool with_history) {
        struct run_live live = {};
        struct leak_report stored;
        struct query_limits lim = limits(rq);
        json_object *leak = NULL;
        if (ri->state == RUN_RUNNING && api_live(api_of(rq), ri->id, RUN_LIVE_LEAK, &live) == 0 && live.has_leak)
                leak = render_run_leak(&live.leak);
        else if (ri->leak)
                leak = render_run_leak(ri->leak);
        else if (query_run_leak(api_of(rq)->store, &lim, ri->id, &stored) == 0) /* a run of a list */
                leak = render_run_leak(&stored);
        run_live_done(&live);
        if (!leak || !with_history)
                return leak;
        struct leak_event *ev = NULL;
        size_t n = 0;
        json_object *hist = json_object_new_array();
        if (query_leak_events(api_of(rq)->store, &lim, ri->id, &ev, &n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        json_object *e = json_object_new_object();
                        json_add_i64(e, "ts", true, ev[i].ts_ms);
                        json_add_string(e, "verdict", ev[i].suspected ? "suspected" : "cleared");
                        json_add_string(e, "metric", ev[i].metric);
                        json_add_string(e, "reason", ev[i].reason);
                        json_object_array_add(hist, e);
                }
                leak_events_free(ev, n);
        }
        json_object_object_add(leak, "history", hist);
        return leak;
}

/* A forecast into a leak verdict's object: oom_eta_s and the oom that
 * says why. */
static void leak_add_oom(json_object *leak, bool has, const struct oom_forecast *f) {
        if (!leak)
                return;
        json_add_double(leak, "oom_eta_s", has && f->known, f->eta_s);
        json_object_object_add(leak, "oom", has ? render_oom(f) : NULL);
}

void run_add_verdicts(struct request *rq, const struct run_info *ri, json_object *o) {
        struct run_live live = {};
        struct verdict_report rep = {};
        struct query_limits lim = limits(rq);
        if (ri->state == RUN_RUNNING && api_live(api_of(rq), ri->id, RUN_LIVE_VERDICTS, &live) == 0 &&
            live.has_verdicts)
                rep = live.verdicts;
        else if (query_run_verdicts(api_of(rq)->store, &lim, ri->id, &rep) < 0)
                rep = (struct verdict_report){};
        run_live_done(&live);
        json_add_string(o, "step_op", ri->step_op ? ri->step_op : api_of(rq)->config->goodput_step_op);
        json_object_object_add(o, "input_bound", rep.has_input_bound ? render_input_bound(&rep.input_bound) : NULL);
        json_object_object_add(o, "gpu_idle", rep.has_gpu_idle ? render_gpu_idle(&rep.gpu_idle) : NULL);
        json_object *leak, *gpu;
        if (json_object_object_get_ex(o, "leak", &leak) && leak) {
                leak_add_oom(leak, rep.has_oom[OOM_RSS], &rep.oom[OOM_RSS]);
                if (json_object_object_get_ex(leak, "gpu_mem", &gpu) && gpu)
                        leak_add_oom(gpu, rep.has_oom[OOM_GPU], &rep.oom[OOM_GPU]);
        }
}

json_object *run_full(struct request *rq, const struct run_info *ri) {
        json_object *o = run_with_gauges(rq, ri);
        json_object_object_add(o, "summary", render_summary(ri, now_realtime_ms(), api_of(rq)->config->grid_g_per_kwh));
        json_object_object_add(o, "leak", run_leak(rq, ri, true));
        run_add_verdicts(rq, ri, o);
        return o;
}

static ssize_t scrape_read(void *ctx, char *buf, size_t max) {
        return metrics_scrape_read(ctx, buf, max);
}

static void scrape_free(void *ctx) {
        metrics_scrape_free(ctx);
}

static void h_metrics(struct request *rq, const char *const *parts, size_t nparts) {
        struct api *a = api_of(rq);
        struct manager_stats st;
        if (!check_args(rq, NULL))
                return;
        api_stats(a, &st);
        enum metrics_format format = metrics_negotiate(rq->accept);
        struct metrics_scrape *x = NULL;
        if (metrics_scrape_new(a->metrics, &a->manager, &st, a->store, a->config, format, &x) < 0) {
                respond_error(rq, 503, "unavailable", "out of memory");
                return;
        }
        rq->stream_read = scrape_read;
        rq->stream_free = scrape_free;
        rq->stream_ctx = x;
        rq->content_type = format == METRICS_PROTO ? METRICS_PROTO_CONTENT_TYPE : METRICS_CONTENT_TYPE;
        rq->status = 200;
}

const struct route api_routes[] = {
        { { "v1", "health" }, "GET", h_health },
        { { "v1", "health", "ack" }, "POST", h_health_ack },
        { { "v1", "system" }, "GET", h_system },
        { { "v1", "runs" }, "GET", h_runs_list },
        { { "v1", "runs" }, "POST", h_runs_post },
        { { "v1", "runs", "*" }, "GET", h_run_get },
        { { "v1", "runs", "*" }, "DELETE", h_run_delete },
        { { "v1", "runs", "*", "samples" }, "GET", h_run_samples },
        { { "v1", "runs", "*", "samples" }, "POST", h_run_sample_post },
        { { "v1", "runs", "*", "exit" }, "POST", h_run_exit_post },
        { { "v1", "runs", "*", "throughput" }, "GET", h_run_throughput },
        { { "v1", "runs", "*", "latency" }, "GET", h_run_latency },
        { { "v1", "runs", "*", "summary" }, "GET", h_run_summary },
        { { "v1", "runs", "*", "goodput" }, "GET", h_run_goodput },
        { { "v1", "runs", "*", "observations" }, "POST", h_run_observations },
        { { "v1", "runs", "*", "marks" }, "POST", h_run_marks_post },
        { { "v1", "runs", "*", "marks" }, "GET", h_run_marks_get },
        { { "v1", "observations" }, "POST", h_observations },
        { { "v1", "leaks" }, "GET", h_leaks },
        { { "v1", "jobs" }, "GET", h_jobs_list },
        { { "v1", "jobs", "*" }, "GET", h_job_get },
        { { "v1", "jobs", "*", "goodput" }, "GET", h_job_goodput },
        { { "v1", "overview" }, "GET", h_overview },
        { { "metrics" }, "GET", h_metrics },
        /* the web page, built on the routes above */
        { { NULL }, "GET", h_web_overview },
        { { "runs", "*" }, "GET", h_web_run },
        { { "jobs", "*" }, "GET", h_web_job },
        { { "web", "*" }, "GET", h_web_asset },
        { { "javascript", "dygraphs", "*" }, "GET", h_web_library },
};

const size_t api_n_routes = ELEMENTSOF(api_routes);

static uint64_t api_generation(void *userdata) {
        struct api *a = userdata;
        return a->manager.ops->data_generation(a->manager.userdata);
}

static void api_yield_cb(void *userdata) {
        api_yield(userdata);
}

int api_new(const struct api_options *o, struct api **ret, char *err, size_t errlen) {
        struct api *a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        a->manager = o->manager;
        a->live = (struct live_source){ .ops = o->manager.ops->live_ops, .userdata = o->manager.userdata };
        a->config = o->config;
        a->store = o->store;
        int q = metrics_new(&a->metrics);
        if (q < 0) {
                free(a);
                return q;
        }
        const struct server_options so = {
                .event = o->event,
                .config = o->config,
                .tcp_fd = o->tcp_fd,
                .routes = api_routes,
                .n_routes = api_n_routes,
                .userdata = a,
                .generation = api_generation,
                .yield = api_yield_cb,
        };
        q = server_new(&so, &a->server, err, errlen);
        if (q < 0) {
                api_free(a);
                return q;
        }
        *ret = a;
        return 0;
}

bool api_accepting(struct api *a, char *why, size_t len) {
        return !a || server_accepting(a->server, why, len);
}

void api_free(struct api *a) {
        if (!a)
                return;
        server_free(a->server);
        metrics_free(a->metrics);
        free(a);
}

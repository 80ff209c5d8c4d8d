/* SPDX-License-Identifier: MIT */
/* A run's series: samples, throughput windows, latency percentiles, marks. */
#include <math.h>
#include <string.h>

#include "http/handlers.h"
#include "http/render.h"
#include "json-util.h"
#include "slo.h"

#define MAX_WINDOWS 16

#define DEFAULT_SAMPLES_LIMIT 1000

/* Adds a value not yet stored to the stats of its gauge in *v. */
static int gauge_stats_add(struct gauge_stat **v, size_t *n, const struct gauge_value *p) {
        struct gauge_stat *g = NULL;
        for (size_t i = 0; i < *n && !g; i++)
                if (streq((*v)[i].name, p->name))
                        g = &(*v)[i];
        if (!g) {
                if (!GREEDY_REALLOC(*v, *n + 1))
                        return -ENOMEM;
                g = &(*v)[*n];
                *g = (struct gauge_stat){
                        .name = strdup(p->name), .ts_ms = p->ts, .value = p->value, .min = p->value, .max = p->value
                };
                if (!g->name)
                        return -ENOMEM;
                (*n)++;
        } else {
                g->min = fmin(g->min, p->value);
                g->max = fmax(g->max, p->value);
                if (p->ts >= g->ts_ms) {
                        g->ts_ms = p->ts;
                        g->value = p->value;
                }
        }
        g->count++;
        return 0;
}

/* The gauges of run id over [from, until], with min, max and count: the
 * stored values, plus a running run's values that wait for the next tick. */
static int window_gauges(struct request *rq, int64_t id, int64_t from, int64_t until, json_object **ret) {
        struct query_limits lim = limits(rq);
        struct gauge_stat *v = NULL;
        size_t n = 0;
        int r = query_gauge_stats(api_of(rq)->store, &lim, id, from, until, &v, &n);
        if (r < 0)
                return r;
        struct api *a = api_of(rq);
        struct gauge_value *live = NULL;
        size_t nlive = 0;
        if (r == 0)
                r = a->manager.ops->live_gauges(a->manager.userdata, id, from, until, &live, &nlive);
        for (size_t i = 0; r == 0 && i < nlive; i++)
                r = gauge_stats_add(&v, &n, &live[i]);
        gauge_values_free(live, nlive);
        if (r == 0) {
                json_object *o = json_object_new_object();
                for (size_t i = 0; i < n; i++)
                        json_object_object_add(o, v[i].name, render_gauge(&v[i], true));
                *ret = o;
        }
        gauge_stats_free(v, n);
        return r;
}

void h_run_samples(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "from", "until", "limit", "step", NULL };
        struct run_info ri;
        if (!check_args(rq, allowed) || !load_run(rq, parts[2], &ri))
                return;
        int64_t now_ms = now_realtime_ms(), from = ri.registered_ts_ms, until = now_ms;
        unsigned limit = DEFAULT_SAMPLES_LIMIT;
        usec_t step = 0;
        int64_t id = ri.id;
        run_info_done(&ri);
        if (!parse_time_arg(rq, "from", now_ms, &from) || !parse_time_arg(rq, "until", now_ms, &until))
                return;
        if (from > until) {
                respond_error(rq, 400, "bad_request", "from must not be after until");
                return;
        }
        const char *v = arg(rq, "limit");
        if (v && (safe_atou(v, &limit) < 0 || limit == 0)) {
                respond_error(rq, 400, "bad_request", "limit: must be a positive integer");
                return;
        }
        v = arg(rq, "step");
        if (v && (parse_duration(v, &step) < 0 || step < USEC_PER_MSEC || step > MAX_WINDOW_USEC)) {
                respond_error(rq, 400, "bad_request", "step: must be a duration of at least 1ms, such as 10s");
                return;
        }
        struct query_limits lim = limits(rq);
        _cleanup_free_ struct sample *s = NULL;
        size_t n = 0;
        bool truncated = false;
        struct sample_gpu *gpu = NULL;
        size_t ngpu = 0;
        int r = querier_samples(api_of(rq)->store, &lim, id, from, until, limit, (int64_t)(step / USEC_PER_MSEC), &s,
                                &n, &truncated);
        if (r == 0 && step == 0 && n > 0)
                r = query_sample_gpu(api_of(rq)->store, &lim, id, s[0].ts_ms, s[n - 1].ts_ms, &gpu, &ngpu);
        if (r < 0) {
                respond_query_error(rq, r);
                return;
        }
        /* written as text: 1 500 points as json-c objects took 60 ms */
        struct json_text t = {};
        json_text_open(&t, '{');
        json_text_key(&t, "samples");
        json_text_open(&t, '[');
        for (size_t i = 0, k = 0; i < n; i++) {
                while (k < ngpu && gpu[k].ts_ms < s[i].ts_ms)
                        k++;
                bool has = k < ngpu && gpu[k].ts_ms == s[i].ts_ms;
                /* a merged step has no breakdown (null); a raw sample without GPU use, [] */
                render_sample_text(&t, &s[i],
                                   has        ? render_gpu_uses(gpu[k].uses, gpu[k].n)
                                   : step > 0 ? NULL
                                              : json_object_new_array());
        }
        json_text_close(&t, ']');
        sample_gpus_free(gpu, ngpu);
        struct gauge_point *g = NULL;
        size_t ng = 0;
        bool gtrunc = false;
        r = query_gauges(api_of(rq)->store, &lim, id, from, until, limit, &g, &ng, &gtrunc);
        if (r < 0) {
                json_text_done(&t);
                respond_query_error(rq, r);
                return;
        }
        json_text_key(&t, "gauges");
        json_text_open(&t, '[');
        for (size_t i = 0; i < ng; i++)
                render_gauge_point_text(&t, &g[i]);
        json_text_close(&t, ']');
        gauge_points_free(g, ng);
        json_text_key(&t, "truncated");
        json_text_bool(&t, truncated || gtrunc);
        json_text_close(&t, '}');
        respond_json_written(rq, &t);
}

void h_run_throughput(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "until", NULL };
        struct run_info ri;
        if (!check_args(rq, allowed) || !load_run(rq, parts[2], &ri))
                return;
        int64_t now_ms = now_realtime_ms();
        /* a finished run's windows end where its data ends */
        int64_t until = ri.state == RUN_RUNNING || !ri.totals.last_ts_ms ? now_ms : ri.totals.last_ts_ms;
        /* the run covers [registered, end]: ops cannot come before or after */
        int64_t covered_from = ri.registered_ts_ms,
                covered_until = ri.state == RUN_RUNNING || !ri.ended_ts_ms ? now_ms : ri.ended_ts_ms;
        int64_t id = ri.id;
        run_info_done(&ri);
        if (!parse_time_arg(rq, "until", now_ms, &until))
                return;
        const char *spec = arg(rq, "window");
        if (!spec)
                spec = "10s,1m,5m";
        usec_t windows[MAX_WINDOWS];
        const char *words[MAX_WINDOWS];
        size_t nw = 0;
        char buf[512];
        int q = split_into(spec, ",", buf, sizeof buf, words, MAX_WINDOWS, &nw);
        if (q < 0) {
                if (q == -E2BIG)
                        respond_error(rq, 400, "bad_request", "window: too long");
                else
                        respond_error(rq, 400, "bad_request", "window: at most %d windows", MAX_WINDOWS);
                return;
        }
        for (size_t i = 0; i < nw; i++)
                if (parse_duration(words[i], &windows[i]) < 0 || windows[i] < USEC_PER_MSEC ||
                    windows[i] > MAX_WINDOW_USEC) {
                        _cleanup_free_ char *clean = utf8_sanitize(words[i], strnlen(words[i], 64));
                        respond_error(rq, 400, "bad_request", "window: '%s' is not a duration", clean ? clean : "?");
                        return;
                }
        if (nw == 0) {
                respond_error(rq, 400, "bad_request", "window: at least one duration is required");
                return;
        }
        struct query_limits lim = limits(rq);
        json_object *root = json_object_new_object(), *arr = json_object_new_array();
        json_object_object_add(root, "windows", arr);
        for (size_t i = 0; i < nw; i++) {
                struct window_rates w;
                struct op_aggs ops = {};
                json_object *gauges = NULL;
                int64_t from = until - (int64_t)(windows[i] / USEC_PER_MSEC), span_from;
                int r = querier_window(api_of(rq)->store, &lim, id, from, until, &w);
                if (r == 0)
                        r = run_ops(rq, id, from, until, false, NULL, &ops, &span_from);
                if (r == 0)
                        r = window_gauges(rq, id, from, until, &gauges);
                if (r < 0) {
                        op_aggs_done(&ops);
                        json_object_put(root);
                        respond_query_error(rq, r);
                        return;
                }
                /* per_s divides by the part of the window the run covers */
                int64_t span_until = until;
                if (span_from < covered_from)
                        span_from = covered_from;
                if (span_until > covered_until)
                        span_until = covered_until;
                json_object *jw = render_window(&w, (double)windows[i] / 1e6, &ops,
                                                (double)(span_until - span_from) / 1000.0);
                json_object_object_add(jw, "gauges", gauges);
                json_object_array_add(arr, jw);
                op_aggs_done(&ops);
        }
        respond_json(rq, 200, root);
}

bool parse_run_span(struct request *rq, const struct run_info *ri, bool whole_run, int64_t *ret_from,
                    int64_t *ret_until, double *ret_window_s, json_object **ret_mark) {
        int64_t now_ms = now_realtime_ms();
        int64_t until = ri->state == RUN_RUNNING || !ri->ended_ts_ms ? now_ms : ri->ended_ts_ms;
        if (!parse_time_arg(rq, "until", now_ms, &until))
                return false;
        const char *w = arg(rq, "window"), *f = arg(rq, "from"), *mark = arg(rq, "since_mark");
        if (w && f) {
                respond_error(rq, 400, "bad_request", "window and from cannot both be given");
                return false;
        }
        /* each of the three sets where the span starts: a second one would
         * be ignored, or would have to mean something else */
        if (mark && (w || f)) {
                respond_error(rq, 400, "bad_request",
                              "since_mark and %s cannot both be given: the span starts at the mark and ends at until "
                              "(or now)",
                              w ? "window" : "from");
                return false;
        }
        usec_t window = USEC_PER_MINUTE;
        int64_t from;
        if (whole_run && !w && !f && !mark)
                from = ri->registered_ts_ms;
        else if (f) {
                if (!parse_time_arg(rq, "from", now_ms, &from))
                        return false;
        } else {
                if (w && !parse_window(rq, w, &window))
                        return false;
                from = until - (int64_t)(window / USEC_PER_MSEC);
        }
        *ret_mark = NULL;
        if (mark) {
                int64_t ts;
                struct query_limits lim = limits(rq);
                int r = query_mark_ts(api_of(rq)->store, &lim, ri->id, mark, &ts);
                if (r == -ENOENT) {
                        _cleanup_free_ char *clean = utf8_sanitize(mark, strnlen(mark, 64));
                        respond_error(rq, 404, "not_found", "run %lld has no mark '%s'", (long long)ri->id,
                                      clean ? clean : "?");
                        return false;
                }
                if (r < 0) {
                        respond_query_error(rq, r);
                        return false;
                }
                from = ts;
                json_object *jm = json_object_new_object();
                json_add_string(jm, "label", mark);
                json_add_i64(jm, "ts", true, ts);
                *ret_mark = jm;
        }
        if (from > until) {
                json_object_put(*ret_mark);
                *ret_mark = NULL;
                respond_error(rq, 400, "bad_request", "the span starts after it ends");
                return false;
        }
        *ret_from = from;
        *ret_until = until;
        *ret_window_s = (double)(until - from) / 1000.0;
        return true;
}

int64_t run_end(const struct run_info *ri, int64_t now_ms) {
        if (ri->state == RUN_RUNNING)
                return now_ms;
        return ri->ended_ts_ms ? ri->ended_ts_ms : ri->totals.last_ts_ms ? ri->totals.last_ts_ms : now_ms;
}

void span_within_run(const struct run_info *ri, int64_t now_ms, int64_t *from, int64_t *until) {
        int64_t end = run_end(ri, now_ms);
        *from = *from < ri->registered_ts_ms ? ri->registered_ts_ms : *from;
        *until = *until > end ? end : *until < *from ? *from : *until;
}

/* "inference:50ms@95,load:200ms@99" -> objectives. */
static bool parse_slos(struct request *rq, const char *spec, struct slo *v, size_t *ret_n) {
        char buf[2048], err[128];
        const char *words[SLO_MAX];
        size_t n = 0;
        int q = split_into(spec, ",", buf, sizeof buf, words, SLO_MAX, &n);
        if (q < 0) {
                respond_error(rq, 400, "bad_request", q == -E2BIG ? "slo: too long" : "slo: at most %d objectives",
                              SLO_MAX);
                return false;
        }
        for (size_t i = 0; i < n; i++)
                if (slo_parse(words[i], ':', &v[i], err, sizeof err) < 0) {
                        _cleanup_free_ char *clean = utf8_sanitize(words[i], strnlen(words[i], 64));
                        respond_error(rq, 400, "bad_request", "slo: '%s': %s", clean ? clean : "?", err);
                        return false;
                }
        if (n == 0) {
                respond_error(rq, 400, "bad_request",
                              "slo: at least one objective is required, such as inference:50ms@95");
                return false;
        }
        *ret_n = n;
        return true;
}

static json_object *render_slos(const struct slo *v, size_t n, const struct op_aggs *ops) {
        json_object *arr = json_object_new_array_ext((int)n);
        for (size_t i = 0; i < n; i++) {
                const struct op_agg *a = NULL;
                for (size_t k = 0; k < ops->n && !a; k++)
                        if (streq(ops->v[k].op, v[i].op))
                                a = &ops->v[k];
                json_object_array_add(arr, render_slo(&v[i], a ? &a->h : NULL));
        }
        return arr;
}

/* A plot needs no more points than a screen has pixels across. */
#define MAX_STEPS 2000

/* The span cut into steps of step_ms from span_from, each with its ops, read
 * in one pass of the querier; their merge (the span) is added to *total. */
static int latency_steps(struct request *rq, int64_t id, int64_t span_from, int64_t until, int64_t step_ms,
                         const char *op, struct op_aggs *total, struct op_aggs **ret, size_t *ret_n) {
        struct api *a = api_of(rq);
        struct query_limits lim = limits(rq);
        struct op_aggs *steps = NULL;
        size_t n = 0;
        int r = querier_op_steps(a->store, &lim, &a->live, id, span_from, until + 1, step_ms, op, &steps, &n);
        for (size_t k = 0; r == 0 && k < n; k++)
                for (size_t i = 0; r == 0 && i < steps[k].n; i++)
                        r = op_aggs_add(total, steps[k].v[i].op, steps[k].v[i].category, steps[k].v[i].count,
                                        &steps[k].v[i].h);
        if (r < 0) {
                op_steps_free(steps, n);
                return r;
        }
        *ret = steps;
        *ret_n = n;
        return 0;
}

/* "steps": each step's ops' counts, rates and percentiles (only the ops
 * that had timings), written as text (300 steps as json-c objects took
 * 30 ms). */
static void write_steps(struct json_text *t, const struct op_aggs *steps, size_t n, int64_t span_from, int64_t until,
                        int64_t step_ms, const double *qs, size_t nq) {
        json_text_open(t, '[');
        for (size_t k = 0; k < n; k++) {
                const struct op_aggs *ops = &steps[k];
                int64_t ts = span_from + (int64_t)k * step_ms;
                int64_t end = ts + step_ms - 1 < until ? ts + step_ms - 1 : until;
                json_text_open(t, '{');
                json_text_key(t, "ts");
                json_text_i64(t, ts);
                json_text_key(t, "ops");
                json_text_open(t, '{');
                for (size_t i = 0; i < ops->n; i++) {
                        if (ops->v[i].h.count == 0)
                                continue;
                        json_text_key(t, ops->v[i].op);
                        render_latency_step_op(t, &ops->v[i], qs, nq,
                                               ops->v[i].count / ((double)(end + 1 - ts) / 1000.0));
                }
                json_text_close(t, '}');
                json_text_close(t, '}');
        }
        json_text_close(t, ']');
}

/* step=DUR: how many steps the span has, at most MAX_STEPS. False: answered. */
static bool parse_step(struct request *rq, int64_t from, int64_t until, int64_t *ret_step_ms) {
        const char *v = arg(rq, "step");
        usec_t step = 0;
        *ret_step_ms = 0;
        if (!v)
                return true;
        if (parse_duration(v, &step) < 0 || step < USEC_PER_SEC || step > MAX_WINDOW_USEC) {
                respond_error(rq, 400, "bad_request", "step: must be a duration of at least 1s, such as 10s");
                return false;
        }
        int64_t step_ms = (int64_t)(step / USEC_PER_MSEC);
        if ((until - from) / step_ms + 1 > MAX_STEPS) {
                respond_error(rq, 400, "bad_request", "step: the span would have more than %d steps", MAX_STEPS);
                return false;
        }
        *ret_step_ms = step_ms;
        return true;
}

void h_run_latency(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = {
                "window", "from", "until", "op", "q", "since_mark", "step", "slo", NULL
        };
        struct run_info ri;
        if (!check_args(rq, allowed) || !load_run(rq, parts[2], &ri))
                return;
        int64_t from, until, span_from, step_ms = 0;
        double window_s, qs[MAX_QUANTILES];
        size_t nq = 0, nslo = 0;
        struct slo slos[SLO_MAX];
        json_object *mark = NULL;
        const char *qspec = arg(rq, "q"), *op = arg(rq, "op"), *slo = arg(rq, "slo");
        bool ok = parse_run_span(rq, &ri, false, &from, &until, &window_s, &mark) &&
                  parse_quantiles(rq, qspec ? qspec : "50,90,99", qs, &nq) && parse_step(rq, from, until, &step_ms) &&
                  (!slo || parse_slos(rq, slo, slos, &nslo));
        int64_t id = ri.id;
        run_info_done(&ri);
        if (!ok) {
                json_object_put(mark);
                return;
        }
        struct op_aggs ops = {}, *steps = NULL;
        size_t nsteps = 0;
        /* the objectives may name other ops than op= */
        const char *only = slo ? NULL : op;
        int r;
        if (step_ms > 0) {
                span_from = mark ? from : ops_slice_of(from < 0 ? 0 : from);
                r = latency_steps(rq, id, span_from, until, step_ms, only, &ops, &steps, &nsteps);
        } else
                r = run_ops(rq, id, from, until, mark != NULL, only, &ops, &span_from);
        if (r < 0) {
                op_aggs_done(&ops);
                json_object_put(mark);
                respond_query_error(rq, r);
                return;
        }
        struct json_text t = {};
        struct json_fields f = { .text = &t };
        json_text_open(&t, '{');
        json_field_double(&f, "window_s", true, window_s);
        json_field_i64(&f, "from", true, span_from);
        json_field_i64(&f, "until", true, until);
        json_text_key(&t, "since_mark");
        json_text_json(&t, mark);
        json_text_key(&t, "ops");
        json_text_open(&t, '{');
        for (size_t i = 0; i < ops.n; i++)
                if (ops.v[i].h.count > 0 && (!op || streq(op, ops.v[i].op))) {
                        json_text_key(&t, ops.v[i].op);
                        json_text_json(&t, render_latency_op(&ops.v[i], qs, nq));
                }
        json_text_close(&t, '}');
        if (step_ms > 0) {
                json_field_double(&f, "step_s", true, (double)step_ms / 1000.0);
                json_text_key(&t, "steps");
                write_steps(&t, steps, nsteps, span_from, until, step_ms, qs, nq);
        }
        if (slo) {
                json_text_key(&t, "slo");
                json_text_json(&t, render_slos(slos, nslo, &ops));
        }
        json_text_close(&t, '}');
        op_steps_free(steps, nsteps);
        op_aggs_done(&ops);
        respond_json_written(rq, &t);
}

/* The summary of the run over the span, from its samples. */
void h_run_summary(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "from", "until", "since_mark", NULL };
        struct run_info ri;
        if (!check_args(rq, allowed) || !load_run(rq, parts[2], &ri))
                return;
        int64_t from, until, base_ts;
        double window_s;
        json_object *mark = NULL;
        bool ok = parse_run_span(rq, &ri, false, &from, &until, &window_s, &mark);
        if (ok && until > ri.registered_ts_ms) /* a window longer than the run: its wall time is the run's */
                span_within_run(&ri, now_realtime_ms(), &from, &until);
        int64_t id = ri.id;
        run_info_done(&ri);
        if (!ok)
                return;
        struct query_limits lim = limits(rq);
        struct run_totals t;
        int r = querier_span_totals(api_of(rq)->store, &lim, id, from, until, &t, &base_ts);
        if (r < 0) {
                json_object_put(mark);
                respond_query_error(rq, r);
                return;
        }
        json_object *root = render_span_summary(&t, from, until, base_ts, api_of(rq)->config->grid_g_per_kwh);
        json_object_object_add(root, "since_mark", mark);
        respond_json(rq, 200, root);
}

void h_run_marks_get(struct request *rq, const char *const *parts, size_t nparts) {
        struct run_info ri;
        if (!check_args(rq, NULL) || !load_run(rq, parts[2], &ri))
                return;
        struct query_limits lim = limits(rq);
        struct mark *v = NULL;
        size_t n = 0;
        int r = query_marks(api_of(rq)->store, &lim, ri.id, &v, &n);
        run_info_done(&ri);
        if (r < 0) {
                respond_query_error(rq, r);
                return;
        }
        json_object *root = json_object_new_object(), *arr = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                json_object *j = json_object_new_object();
                json_add_string(j, "label", v[i].label);
                json_add_i64(j, "ts", true, v[i].ts_ms);
                json_object_array_add(arr, j);
        }
        marks_free(v, n);
        json_object_object_add(root, "marks", arr);
        respond_json(rq, 200, root);
}

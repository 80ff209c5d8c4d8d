/* SPDX-License-Identifier: MIT */
/* /v1/jobs: the runs that share a job_id tag, their ops merged exactly
 * (histograms add), each rank against the others, and the stragglers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/straggler.h"
#include "http/handlers.h"
#include "http/render.h"
#include "json-util.h"

void h_jobs_list(struct request *rq, const char *const *parts, size_t nparts) {
        if (!check_args(rq, NULL))
                return;
        struct query_limits lim = limits(rq);
        struct job_info *v = NULL;
        size_t n = 0;
        bool truncated;
        int r = query_jobs(api_of(rq)->store, &lim, &v, &n, &truncated);
        if (r < 0) {
                respond_query_error(rq, r);
                return;
        }
        json_object *root = json_object_new_object(), *arr = json_object_new_array_ext((int)n);
        for (size_t i = 0; i < n; i++)
                json_object_array_add(arr, render_job_info(&v[i]));
        job_infos_free(v, n);
        json_object_object_add(root, "jobs", arr);
        json_object_object_add(root, "truncated", json_object_new_boolean(truncated));
        respond_json(rq, 200, root);
}

/* One run of the job. */
struct job_member {
        struct run_info *ri;
        json_object *tags; /* owns rank */
        const char *rank;  /* the rank tag; NULL: none */
        bool in_span;      /* false: since_mark was asked and the run has no such mark */
        int64_t mark_ts;
        int64_t span_from; /* where its op data starts (a slice start) */
        struct op_aggs ops;
};

/* The ranks in numeric order when both are numbers ("2" before "10"),
 * else by text; runs without a rank last; then by run id. */
static int member_cmp(const void *a, const void *b) {
        const struct job_member *x = a, *y = b;
        if (!x->rank != !y->rank)
                return x->rank ? -1 : 1;
        if (x->rank) {
                unsigned rx, ry;
                bool nx = safe_atou(x->rank, &rx) == 0, ny = safe_atou(y->rank, &ry) == 0;
                int c = nx && ny ? (rx > ry) - (rx < ry) : nx != ny ? (nx ? -1 : 1) : strcmp(x->rank, y->rank);
                if (c != 0)
                        return c;
        }
        return (x->ri->id > y->ri->id) - (x->ri->id < y->ri->id);
}

static void job_members_free(struct job_member *m, size_t n) {
        for (size_t i = 0; m && i < n; i++) {
                json_object_put(m[i].tags);
                op_aggs_done(&m[i].ops);
        }
        free(m);
}

/* The question: the span [from, until] (each member's own start with
 * since_mark), the percentiles. */
struct job_span {
        int64_t from, until;
        const char *mark;
        double qs[MAX_QUANTILES];
        size_t nq;
};

/* The whole job: from the first registration to now, or to the last end
 * when no run is running. */
static void job_whole_span(const struct job_member *m, size_t n, struct job_span *ret) {
        int64_t first = INT64_MAX, last = 0;
        bool running = false;
        for (size_t i = 0; i < n; i++) {
                const struct run_info *ri = m[i].ri;
                first = ri->registered_ts_ms < first ? ri->registered_ts_ms : first;
                running = running || ri->state == RUN_RUNNING || !ri->ended_ts_ms;
                last = ri->ended_ts_ms > last ? ri->ended_ts_ms : last;
        }
        ret->until = running ? now_realtime_ms() : last;
        ret->from = first;
        ret->mark = NULL;
}

/* Default: the whole job. window=DUR ends at until. False: answered. */
static bool parse_job_span(struct request *rq, const struct job_member *m, size_t n, struct job_span *ret) {
        const char *w = arg(rq, "window"), *q = arg(rq, "q");
        job_whole_span(m, n, ret);
        ret->mark = arg(rq, "since_mark");
        if (w && ret->mark) {
                respond_error(rq, 400, "bad_request",
                              "since_mark and window cannot both be given: the span starts at each run's mark");
                return false;
        }
        usec_t window;
        if (w) {
                if (!parse_window(rq, w, &window))
                        return false;
                ret->from = ret->until - (int64_t)(window / USEC_PER_MSEC);
        }
        return parse_quantiles(rq, q ? q : "50,90,99", ret->qs, &ret->nq);
}

/* Each member's start (its own latest mark with since_mark) and op data
 * over the span. -ENOENT: no run has the mark. */
static int collect_members(struct request *rq, struct job_member *m, size_t n, struct job_span *sp) {
        struct query_limits lim = limits(rq);
        bool any = false;
        for (size_t i = 0; i < n; i++) {
                int64_t from = sp->from;
                m[i].in_span = true;
                if (sp->mark) {
                        int r = query_mark_ts(api_of(rq)->store, &lim, m[i].ri->id, sp->mark, &m[i].mark_ts);
                        if (r == -ENOENT) {
                                m[i].in_span = false;
                                continue;
                        }
                        if (r < 0)
                                return r;
                        from = m[i].mark_ts;
                }
                if (from > sp->until)
                        from = sp->until;
                int r = run_ops(rq, m[i].ri->id, from, sp->until, sp->mark && from == m[i].mark_ts, NULL, &m[i].ops,
                                &m[i].span_from);
                if (r < 0)
                        return r;
                any = true;
        }
        return any || !sp->mark ? 0 : -ENOENT;
}

static const struct op_agg *find_op(const struct op_aggs *a, const char *op) {
        for (size_t i = 0; i < a->n; i++)
                if (streq(a->v[i].op, op))
                        return &a->v[i];
        return NULL;
}

static json_object *render_members(const struct job_member *m, size_t n, const char *mark) {
        json_object *arr = json_object_new_array_ext((int)n);
        for (size_t i = 0; i < n; i++) {
                const struct run_info *ri = m[i].ri;
                json_object *j = json_object_new_object();
                json_add_i64(j, "id", true, ri->id);
                json_add_string(j, "rank", m[i].rank);
                json_add_string(j, "name", ri->name);
                json_add_i64(j, "pid", true, ri->pid);
                json_add_string(j, "state", run_state_to_string(ri->state));
                json_add_i64(j, "registered_ts", true, ri->registered_ts_ms);
                json_add_i64(j, "ended_ts", ri->ended_ts_ms > 0, ri->ended_ts_ms);
                if (mark)
                        json_add_i64(j, "since_mark_ts", m[i].in_span, m[i].mark_ts);
                json_object_array_add(arr, j);
        }
        return arr;
}

/* "rank 2 (run 3): median of step 12.49 ms, 24.6% slower than the other
 * ranks' 10.02 ms; 393 of its 400 timings are above 10.02 ms (sign test,
 * p = 1.2e-106)" */
static json_object *render_straggler(const struct job_member *m, const char *op, const struct straggler_verdict *v) {
        char who[96], p[32];
        _cleanup_free_ char *reason = NULL;
        if (m->rank)
                snprintf(who, sizeof who, "rank %.40s (run %lld)", m->rank, (long long)m->ri->id);
        else
                snprintf(who, sizeof who, "run %lld", (long long)m->ri->id);
        snprintf(p, sizeof p, v->p_value > 0 ? "p = %.2g" : "p < 1e-300", v->p_value);
        if (asprintf(&reason,
                     "%s: median of %s %.4g ms, %.1f%% slower than the other ranks' %.4g ms; %llu of its %llu "
                     "timings are above %.4g ms (sign test, %s)",
                     who, op, v->p50_ms, v->slower_pct, v->others_p50_ms, (unsigned long long)v->above,
                     (unsigned long long)v->n, v->others_p50_ms, p) < 0)
                reason = NULL;
        json_object *j = json_object_new_object();
        json_add_i64(j, "run", true, m->ri->id);
        json_add_string(j, "rank", m->rank);
        json_add_string(j, "op", op);
        json_object_object_add(j, "p50_ms", json_double_or_null(v->p50_ms));
        json_object_object_add(j, "job_p50_ms", json_double_or_null(v->others_p50_ms));
        json_object_object_add(j, "slower_pct", json_double_round(v->slower_pct, 1));
        json_object_object_add(j, "p_value", json_double_or_null(v->p_value));
        json_add_string(j, "reason", reason);
        return j;
}

/* For one op: each member's figures into *ranks, the stragglers into
 * *stragglers. */
static int compare_ranks(const struct job_member *m, size_t n, const char *op, double threshold_pct, json_object *ranks,
                         json_object *stragglers) {
        _cleanup_free_ struct hist *h = calloc(n ? n : 1, sizeof *h);
        _cleanup_free_ size_t *who = calloc(n ? n : 1, sizeof *who);
        size_t k = 0;
        if (!h || !who)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const struct op_agg *a = m[i].in_span ? find_op(&m[i].ops, op) : NULL;
                if (!a || a->h.count == 0)
                        continue;
                h[k] = a->h; /* borrowed: straggler_test only reads */
                who[k++] = i;
                json_object *j = json_object_new_object();
                json_add_i64(j, "run", true, m[i].ri->id);
                json_add_string(j, "rank", m[i].rank);
                json_add_u64(j, "count", true, a->h.count);
                json_object_object_add(j, "p50_ms", json_double_or_null(hist_quantile(&a->h, 0.5)));
                json_object_object_add(j, "p99_ms", json_double_or_null(hist_quantile(&a->h, 0.99)));
                json_object_array_add(ranks, j);
        }
        for (size_t i = 0; i < k; i++) {
                struct straggler_verdict v;
                int r = straggler_test(h, k, i, threshold_pct, &v);
                if (r < 0)
                        return r;
                if (v.straggler)
                        json_object_array_add(stragglers, render_straggler(&m[who[i]], op, &v));
        }
        return 0;
}

/* The document of the job over the span, from its members' op data. */
static int render_job(struct request *rq, const char *job_id, const struct job_member *m, size_t n,
                      const struct job_span *sp, json_object **ret) {
        struct op_aggs merged = {};
        int64_t from = INT64_MAX;
        int r = 0;
        for (size_t i = 0; i < n; i++) {
                if (!m[i].in_span)
                        continue;
                from = m[i].span_from < from ? m[i].span_from : from;
                for (size_t k = 0; k < m[i].ops.n && r == 0; k++) {
                        const struct op_agg *a = &m[i].ops.v[k];
                        r = op_aggs_add(&merged, a->op, a->category, a->count, &a->h);
                }
        }
        json_object *root = json_object_new_object(), *ops = json_object_new_object(),
                    *ranks = json_object_new_object(), *stragglers = json_object_new_array();
        json_add_string(root, "job_id", job_id);
        json_add_i64(root, "from", true, from == INT64_MAX ? sp->from : from);
        json_add_i64(root, "until", true, sp->until);
        json_add_string(root, "since_mark", sp->mark);
        json_object_object_add(root, "runs", render_members(m, n, sp->mark));
        json_object_object_add(root, "ops", ops);
        json_object_object_add(root, "ranks", ranks);
        json_object_object_add(root, "stragglers", stragglers);
        double threshold = api_of(rq)->config->jobs_straggler_pct;
        json_add_double(root, "straggler_pct", true, threshold);
        for (size_t i = 0; i < merged.n && r == 0; i++) {
                if (merged.v[i].h.count == 0)
                        continue;
                json_object_object_add(ops, merged.v[i].op, render_latency_op(&merged.v[i], sp->qs, sp->nq));
                json_object *arr = json_object_new_array();
                json_object_object_add(ranks, merged.v[i].op, arr);
                r = compare_ranks(m, n, merged.v[i].op, threshold, arr, stragglers);
        }
        op_aggs_done(&merged);
        if (r < 0) {
                json_object_put(root);
                return r;
        }
        *ret = root;
        return 0;
}

/* The runs tagged job_id, live totals overlaid, in rank order. -ENOENT:
 * none. */
static int load_members(struct request *rq, const char *job_id, struct run_info **ret_runs, size_t *ret_nruns,
                        struct job_member **ret) {
        struct query_limits lim = limits(rq);
        struct runs_filter f = { .state = -1, .job_id = job_id };
        bool truncated;
        int r = query_runs(api_of(rq)->store, &lim, &f, ret_runs, ret_nruns, &truncated);
        if (r < 0)
                return r;
        size_t n = *ret_nruns;
        struct job_member *m = n ? calloc(n, sizeof *m) : NULL;
        if (n == 0 || !m)
                return n == 0 ? -ENOENT : -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct run_info *ri = &(*ret_runs)[i];
                json_object *rank;
                overlay_live(rq, ri);
                m[i].ri = ri;
                m[i].tags = ri->tags_json ? json_tokener_parse(ri->tags_json) : NULL;
                if (json_object_object_get_ex(m[i].tags, "rank", &rank) && json_object_is_type(rank, json_type_string))
                        m[i].rank = json_object_get_string(rank);
        }
        qsort(m, n, sizeof *m, member_cmp);
        *ret = m;
        return 0;
}

void h_job_get(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "q", "since_mark", NULL };
        const char *job_id = parts[2];
        if (!check_args(rq, allowed))
                return;
        struct run_info *runs = NULL;
        size_t nruns = 0;
        struct job_member *m = NULL;
        struct job_span sp;
        json_object *doc = NULL;
        _cleanup_free_ char *clean = utf8_sanitize(job_id, strnlen(job_id, 256));
        int r = load_members(rq, job_id, &runs, &nruns, &m);
        if (r == -ENOENT)
                respond_error(rq, 404, "not_found", "no job '%s' (no run is tagged job_id=%s)", clean ? clean : "?",
                              clean ? clean : "?");
        else if (r < 0)
                respond_query_error(rq, r);
        else if (parse_job_span(rq, m, nruns, &sp)) {
                r = collect_members(rq, m, nruns, &sp);
                if (r == 0)
                        r = render_job(rq, job_id, m, nruns, &sp, &doc);
                if (r == -ENOENT) {
                        _cleanup_free_ char *label = utf8_sanitize(sp.mark, strnlen(sp.mark, 64));
                        respond_error(rq, 404, "not_found", "no run of job '%s' has a mark '%s'", clean ? clean : "?",
                                      label ? label : "?");
                } else if (r < 0)
                        respond_query_error(rq, r);
                else
                        respond_json(rq, 200, doc);
        }
        job_members_free(m, nruns);
        run_infos_free(runs, nruns);
}

int job_stragglers(struct request *rq, const char *job_id, json_object **ret) {
        struct run_info *runs = NULL;
        size_t nruns = 0;
        struct job_member *m = NULL;
        json_object *doc = NULL;
        struct job_span sp = { .qs = { 50 }, .nq = 1 };
        int r = load_members(rq, job_id, &runs, &nruns, &m);
        if (r == 0) {
                job_whole_span(m, nruns, &sp);
                r = collect_members(rq, m, nruns, &sp);
        }
        if (r == 0)
                r = render_job(rq, job_id, m, nruns, &sp, &doc);
        if (r == 0)
                *ret = json_object_get(json_object_object_get(doc, "stragglers"));
        json_object_put(doc);
        job_members_free(m, nruns);
        run_infos_free(runs, nruns);
        return r;
}

/* SPDX-License-Identifier: MIT */
/* /v1/jobs: the runs that share a job_id tag, attempt by attempt, their ops
 * merged exactly (histograms add), each rank against the others, and the
 * verdicts (job-verdicts.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collect/procfs.h"
#include "http/jobs.h"
#include "http/render.h"
#include "json-util.h"

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

void job_members_free(struct job_member *m, size_t n) {
        for (size_t i = 0; m && i < n; i++) {
                json_object_put(m[i].tags);
                op_aggs_done(&m[i].ops);
        }
        free(m);
}

/* A tag's value: its string (NULL: none), and as a number (0: none, or
 * not one). */
static const char *tag_of(json_object *tags, const char *key, unsigned *ret_number) {
        json_object *v;
        unsigned u = 0;
        const char *s = json_object_object_get_ex(tags, key, &v) && json_object_is_type(v, json_type_string)
                                ? json_object_get_string(v)
                                : NULL;
        if (ret_number)
                *ret_number = s && safe_atou(s, &u) == 0 ? u : 0;
        return s;
}

/* The runs tagged job_id, live totals overlaid, in rank order. -ENOENT:
 * none. */
int job_load_members(struct request *rq, const char *job_id, struct run_info **ret_runs, size_t *ret_nruns,
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
                overlay_live(rq, ri);
                m[i].ri = ri;
                m[i].tags = ri->tags_json ? json_tokener_parse(ri->tags_json) : NULL;
                m[i].rank = tag_of(m[i].tags, "rank", NULL);
                (void)tag_of(m[i].tags, "attempt", &m[i].attempt);
                (void)tag_of(m[i].tags, "world_size", &m[i].world_size);
                const char *role = tag_of(m[i].tags, "role", NULL);
                m[i].launcher = role && streq(role, "launcher");
        }
        sort_array(m, n, sizeof *m, member_cmp);
        *ret = m;
        return 0;
}

/* The latest attempt among the ranks (the launcher has none of its own). */
static unsigned latest_attempt(const struct job_member *m, size_t n) {
        unsigned a = 0;
        for (size_t i = 0; i < n; i++)
                if (!m[i].launcher && m[i].attempt > a)
                        a = m[i].attempt;
        return a;
}

static void mark_attempt(struct job_member *m, size_t n, unsigned attempt) {
        for (size_t i = 0; i < n; i++)
                m[i].in_attempt = !m[i].launcher && m[i].attempt == attempt;
}

/* Every rank of every attempt; *ret the latest. */
static bool every_attempt(struct job_member *m, size_t n, unsigned *ret) {
        for (size_t i = 0; i < n; i++)
                m[i].in_attempt = !m[i].launcher;
        *ret = latest_attempt(m, n);
        return true;
}

/* attempt=N, else the latest; false: answered (400 not a number, 404 no
 * run of that attempt). */
static bool select_attempt(struct request *rq, struct job_member *m, size_t n, unsigned *ret) {
        const char *a = arg(rq, "attempt");
        unsigned want = latest_attempt(m, n);
        if (a && safe_atou(a, &want) < 0) {
                respond_error(rq, 400, "bad_request", "attempt: not a whole number");
                return false;
        }
        mark_attempt(m, n, want);
        for (size_t i = 0; i < n; i++)
                if (m[i].in_attempt) {
                        *ret = want;
                        return true;
                }
        respond_error(rq, 404, "not_found", "the job has no attempt %u", want);
        return false;
}

/* The whole attempt: from its first registration to now, or to its last
 * end when none of its runs is running. */
static void job_whole_span(const struct job_member *m, size_t n, struct job_span *ret) {
        int64_t first = INT64_MAX, last = 0;
        bool running = false;
        for (size_t i = 0; i < n; i++) {
                const struct run_info *ri = m[i].ri;
                if (!m[i].in_attempt)
                        continue;
                first = ri->registered_ts_ms < first ? ri->registered_ts_ms : first;
                running = running || ri->state == RUN_RUNNING || !ri->ended_ts_ms;
                last = ri->ended_ts_ms > last ? ri->ended_ts_ms : last;
        }
        ret->until = running ? now_realtime_ms() : last;
        ret->from = first;
        ret->mark = NULL;
}

/* Default: the whole attempt. window=DUR ends at until. False: answered. */
bool job_parse_span(struct request *rq, const struct job_member *m, size_t n, struct job_span *ret) {
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

/* Each of the attempt's members' start (its own latest mark with
 * since_mark) and op data over the span. -ENOENT: no run has the mark. */
static int collect_members(struct request *rq, struct job_member *m, size_t n, struct job_span *sp) {
        struct query_limits lim = limits(rq);
        bool any = false;
        for (size_t i = 0; i < n; i++) {
                int64_t from = sp->from;
                if (!m[i].in_attempt)
                        continue;
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

/* The runs of the attempt, and the launcher. */
static json_object *render_members(const struct job_member *m, size_t n, const char *mark) {
        json_object *arr = json_object_new_array_ext((int)n);
        for (size_t i = 0; i < n; i++) {
                const struct run_info *ri = m[i].ri;
                if (!m[i].in_attempt && !m[i].launcher)
                        continue;
                json_object *j = json_object_new_object();
                json_add_i64(j, "id", true, ri->id);
                json_add_string(j, "rank", m[i].rank);
                json_add_string(j, "attempt", tag_of(m[i].tags, "attempt", NULL));
                json_object_object_add(j, "launcher", json_object_new_boolean(m[i].launcher));
                json_add_string(j, "name", ri->name);
                json_add_i64(j, "pid", true, ri->pid);
                json_add_string(j, "state", run_state_to_string(ri->state));
                json_add_string(j, "proc_state", ri->state == RUN_RUNNING ? proc_state_name(m[i].proc_state) : NULL);
                json_add_i64(j, "registered_ts", true, ri->registered_ts_ms);
                json_add_i64(j, "ended_ts", ri->ended_ts_ms > 0, ri->ended_ts_ms);
                json_add_i64(j, "exit_code", ri->has_exit_code, ri->exit_code);
                json_add_i64(j, "exit_signal", ri->has_exit_signal, ri->exit_signal);
                if (mark)
                        json_add_i64(j, "since_mark_ts", m[i].in_span, m[i].mark_ts);
                json_object_array_add(arr, j);
        }
        return arr;
}

/* Every attempt of the job, oldest first: its runs, its span and how its
 * ranks ended. */
static json_object *render_attempts(const struct job_member *m, size_t n) {
        json_object *arr = json_object_new_array();
        unsigned last = latest_attempt(m, n);
        for (unsigned a = 0; a <= last; a++) {
                size_t runs = 0, running = 0;
                int64_t first = INT64_MAX, ended = 0;
                for (size_t i = 0; i < n; i++) {
                        if (m[i].launcher || m[i].attempt != a)
                                continue;
                        runs++;
                        running += m[i].ri->state == RUN_RUNNING;
                        first = m[i].ri->registered_ts_ms < first ? m[i].ri->registered_ts_ms : first;
                        ended = m[i].ri->ended_ts_ms > ended ? m[i].ri->ended_ts_ms : ended;
                }
                if (runs == 0)
                        continue; /* a restart this host saw none of */
                _cleanup_free_ char *reason = job_end_reason(m, n, a);
                json_object *j = json_object_new_object();
                json_add_u64(j, "attempt", true, a);
                json_add_u64(j, "runs", true, runs);
                json_add_string(j, "state", running ? "running" : "finished");
                json_add_i64(j, "first_registered_ts", true, first);
                json_add_i64(j, "last_ended_ts", running == 0, ended);
                json_add_string(j, "end_reason", reason);
                json_object_array_add(arr, j);
        }
        return arr;
}

/* How much of the job this host sees: the attempt's world_size (the
 * largest its ranks were started with) and its distinct ranks here. *view
 * is "2 of 4 ranks on this host" when that is part of the job, else "". */
static void job_view(const struct job_member *m, size_t n, unsigned *ret_world, size_t *ret_here, char *view,
                     size_t size) {
        unsigned world = 0;
        size_t here = 0;
        for (size_t i = 0; i < n; i++) {
                if (!m[i].in_attempt)
                        continue;
                world = m[i].world_size > world ? m[i].world_size : world;
                bool seen = false;
                for (size_t j = 0; j < i && !seen; j++)
                        seen = m[j].in_attempt && m[j].rank && m[i].rank && streq(m[j].rank, m[i].rank);
                here += m[i].rank && !seen;
        }
        *ret_world = world;
        *ret_here = here;
        if (world > here)
                snprintf(view, size, "%zu of %u ranks on this host", here, world);
        else
                view[0] = 0;
}

static void add_view(json_object *root, unsigned world, size_t here, const char *view) {
        char all[64];
        snprintf(all, sizeof all, "all %u ranks on this host", world);
        json_add_u64(root, "world_size", world > 0, world);
        json_add_u64(root, "ranks_here", true, here);
        json_object_object_add(root, "partial", json_object_new_boolean(*view != 0));
        json_add_string(root, "view", *view ? view : world > 0 ? all : NULL);
}

/* The ops of the attempt's ranks over the span, merged. */
static int merge_members(const struct job_member *m, size_t n, struct op_aggs *merged, int64_t *ret_from) {
        int r = 0;
        *ret_from = INT64_MAX;
        for (size_t i = 0; i < n && r == 0; i++) {
                if (!m[i].in_attempt || !m[i].in_span)
                        continue;
                *ret_from = m[i].span_from < *ret_from ? m[i].span_from : *ret_from;
                for (size_t k = 0; k < m[i].ops.n && r == 0; k++) {
                        const struct op_agg *a = &m[i].ops.v[k];
                        r = op_aggs_add(merged, a->op, a->category, a->count, &a->h);
                }
        }
        return r;
}

/* The document of the attempt over the span, from its members' op data. */
static int render_job(struct request *rq, const char *job_id, unsigned attempt, struct job_member *m, size_t n,
                      const struct job_span *sp, json_object **ret) {
        const struct config *cfg = api_of(rq)->config;
        const char *collective = arg(rq, "collective") ? arg(rq, "collective") : cfg->jobs_collective_ops;
        struct op_aggs merged = {};
        struct job_stall stall = {};
        int64_t from, now = now_realtime_ms();
        unsigned world;
        size_t here;
        char view[64];
        int r = merge_members(m, n, &merged, &from);
        if (r == 0)
                r = job_stall_judge(rq, m, n, now, &stall);
        job_view(m, n, &world, &here, view, sizeof view);
        json_object *root = json_object_new_object(), *ops = json_object_new_object();
        json_add_string(root, "job_id", job_id);
        json_add_u64(root, "attempt", true, attempt);
        json_object_object_add(root, "attempts", render_attempts(m, n));
        add_view(root, world, here, view);
        if (r == 0)
                job_stall_render(&stall, m, n, cfg->goodput_step_op, now, root);
        _cleanup_free_ char *ended = job_end_reason(m, n, attempt);
        json_add_string(root, "end_reason", ended);
        json_add_i64(root, "from", true, from == INT64_MAX ? sp->from : from);
        json_add_i64(root, "until", true, sp->until);
        json_add_string(root, "since_mark", sp->mark);
        json_object_object_add(root, "runs", render_members(m, n, sp->mark));
        json_object_object_add(root, "ops", ops);
        for (size_t i = 0; i < merged.n && r == 0; i++)
                if (merged.v[i].h.count > 0)
                        json_object_object_add(ops, merged.v[i].op, render_latency_op(&merged.v[i], sp->qs, sp->nq));
        if (r == 0)
                r = job_compare(rq, m, n, &merged, collective, *view ? view : NULL, sp->until, root);
        json_add_double(root, "straggler_pct", true, cfg->jobs_straggler_pct);
        json_add_double(root, "score_threshold", true, cfg->jobs_score_threshold);
        op_aggs_done(&merged);
        job_stall_done(&stall);
        if (r < 0) {
                json_object_put(root);
                return r;
        }
        *ret = root;
        return 0;
}

bool valid_job_id(const char *s) {
        size_t l = strlen(s);
        return l > 0 && l <= TAG_VALUE_MAX && utf8_is_valid(s, l);
}

/* False: answered 400, as the web page's /jobs/{id} does. */
static bool check_job_id(struct request *rq, const char *job_id) {
        if (valid_job_id(job_id))
                return true;
        respond_error(rq, 400, "bad_request", "not a job id (1 to %d bytes of UTF-8 text)", TAG_VALUE_MAX);
        return false;
}

void job_answer(struct request *rq, const char *job_id, bool by_attempt, job_answer_fn answer) {
        struct run_info *runs = NULL;
        size_t nruns = 0;
        struct job_member *m = NULL;
        struct job_span sp;
        unsigned attempt;
        json_object *doc = NULL;
        if (!check_job_id(rq, job_id))
                return;
        _cleanup_free_ char *clean = utf8_sanitize(job_id, strnlen(job_id, 256));
        int r = job_load_members(rq, job_id, &runs, &nruns, &m);
        if (r == -ENOENT)
                respond_error(rq, 404, "not_found", "no job '%s' (no run is tagged job_id=%s)", clean ? clean : "?",
                              clean ? clean : "?");
        else if (r < 0)
                respond_query_error(rq, r);
        else if ((by_attempt ? select_attempt(rq, m, nruns, &attempt) : every_attempt(m, nruns, &attempt)) &&
                 job_parse_span(rq, m, nruns, &sp)) {
                r = answer(rq, job_id, attempt, m, nruns, &sp, &doc);
                if (r == -ENOENT) {
                        _cleanup_free_ char *label = utf8_sanitize(sp.mark, strnlen(sp.mark, 64));
                        respond_error(rq, 404, "not_found", "no run of job '%s' has a mark '%s'", clean ? clean : "?",
                                      label ? label : "?");
                } else if (r == -ECANCELED)
                        ; /* answered */
                else if (r < 0)
                        respond_query_error(rq, r);
                else
                        respond_json(rq, 200, doc);
        }
        job_members_free(m, nruns);
        run_infos_free(runs, nruns);
}

static int job_doc(struct request *rq, const char *job_id, unsigned attempt, struct job_member *m, size_t n,
                   struct job_span *sp, json_object **ret) {
        int r = collect_members(rq, m, n, sp);
        return r < 0 ? r : render_job(rq, job_id, attempt, m, n, sp, ret);
}

void h_job_get(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "q", "since_mark", "attempt", "collective", NULL };
        if (check_args(rq, allowed))
                job_answer(rq, parts[2], true, job_doc);
}

/* ---- the list, and the count /v1/health gives ----------------------------- */

/* A job's latest attempt now: its world size, whether it is stalled and
 * since when. */
struct job_now {
        unsigned attempt, world_size;
        bool stalled;
        int64_t stalled_since;
};

static int judge_job_now(struct request *rq, const char *job_id, struct job_now *ret) {
        struct run_info *runs = NULL;
        size_t nruns = 0, here;
        struct job_member *m = NULL;
        struct job_stall stall = {};
        char view[64];
        int r = job_load_members(rq, job_id, &runs, &nruns, &m);
        if (r == 0) {
                *ret = (struct job_now){ .attempt = latest_attempt(m, nruns) };
                mark_attempt(m, nruns, ret->attempt);
                job_view(m, nruns, &ret->world_size, &here, view, sizeof view);
                r = job_stall_judge(rq, m, nruns, now_realtime_ms(), &stall);
                ret->stalled = r == 0 && stall.v.stalled;
                ret->stalled_since = stall.v.last_step_ms;
        }
        job_stall_done(&stall);
        job_members_free(m, nruns);
        run_infos_free(runs, nruns);
        return r;
}

int api_job_item(struct request *rq, const struct job_info *v, json_object **ret) {
        struct job_now now = {};
        /* only a job with a running run can stall; a finished one is judged
         * from its stored rows alone */
        int r = v->running > 0 ? judge_job_now(rq, v->job_id, &now) : 0;
        json_object *j = json_object_new_object();
        json_add_string(j, "job_id", v->job_id);
        json_add_u64(j, "runs", true, v->runs);
        json_add_u64(j, "ranks", true, v->ranks);
        json_add_string(j, "state", now.stalled ? "stalled" : v->running > 0 ? "running" : "finished");
        json_add_i64(j, "stalled_since", now.stalled, now.stalled_since);
        json_add_u64(j, "attempt", v->running > 0, now.attempt);
        json_add_u64(j, "world_size", now.world_size > 0, now.world_size);
        json_add_i64(j, "first_registered_ts", true, v->first_registered_ts_ms);
        json_add_i64(j, "last_ended_ts", v->running == 0, v->last_ended_ts_ms);
        *ret = j;
        return r;
}

int api_job_stragglers(struct request *rq, const char *job_id, json_object **ret) {
        struct run_info *runs = NULL;
        size_t nruns = 0;
        struct job_member *m = NULL;
        json_object *doc = NULL;
        struct job_span sp = { .qs = { 50 }, .nq = 1 };
        unsigned attempt = 0;
        int r = job_load_members(rq, job_id, &runs, &nruns, &m);
        if (r == 0) {
                attempt = latest_attempt(m, nruns);
                mark_attempt(m, nruns, attempt);
                job_whole_span(m, nruns, &sp);
                r = collect_members(rq, m, nruns, &sp);
        }
        if (r == 0)
                r = render_job(rq, job_id, attempt, m, nruns, &sp, &doc);
        if (r == 0)
                *ret = json_object_get(json_object_object_get(doc, "stragglers"));
        json_object_put(doc);
        job_members_free(m, nruns);
        run_infos_free(runs, nruns);
        return r;
}

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
        for (size_t i = 0; i < n && r >= 0; i++) {
                json_object *j = NULL;
                r = api_job_item(rq, &v[i], &j);
                json_object_array_add(arr, j);
                api_yield(api_of(rq));
        }
        job_infos_free(v, n);
        if (r < 0) {
                json_object_put(root);
                json_object_put(arr);
                respond_query_error(rq, r);
                return;
        }
        json_object_object_add(root, "jobs", arr);
        json_object_object_add(root, "truncated", json_object_new_boolean(truncated));
        respond_json(rq, 200, root);
}

int api_jobs_stalled(struct request *rq, unsigned *ret) {
        struct query_limits lim = limits(rq);
        struct job_info *v = NULL;
        size_t n = 0;
        bool truncated;
        unsigned count = 0;
        int r = query_jobs(api_of(rq)->store, &lim, &v, &n, &truncated);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                struct job_now now = {};
                if (v[i].running > 0 && (r = judge_job_now(rq, v[i].job_id, &now)) == 0)
                        count += now.stalled;
        }
        job_infos_free(v, n);
        if (r < 0)
                return r;
        *ret = count;
        return 0;
}

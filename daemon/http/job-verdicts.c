/* SPDX-License-Identifier: MIT */
/* The verdicts in a job's document: each rank against the others (the
 * straggler verdict and NVIDIA's scores, analyze/straggler.h), the stall
 * verdict (analyze/stall.h), and how the ranks of an attempt ended. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/straggler.h"
#include "http/jobs.h"
#include "http/render.h"
#include "json-util.h"

/* The individual score looks back at most this many windows. */
#define SCORE_WINDOWS 10

void job_member_name(const struct job_member *m, char *buf, size_t size) {
        if (m->rank)
                snprintf(buf, size, "rank %.40s (run %lld)", m->rank, (long long)m->ri->id);
        else
                snprintf(buf, size, "run %lld", (long long)m->ri->id);
}

static const struct op_agg *find_op(const struct op_aggs *a, const char *op) {
        for (size_t i = 0; a && i < a->n; i++)
                if (streq(a->v[i].op, op))
                        return &a->v[i];
        return NULL;
}

static const char *p_text(double p, char *buf, size_t size) {
        snprintf(buf, size, p > 0 ? "p = %.2g" : "p < 1e-300", p);
        return buf;
}

/* The ranks compared (the attempt's, in the span) and, per op, their
 * histograms (borrowed; an empty one for a rank without timings of it),
 * and each rank's windows for the individual score. */
struct comparison {
        size_t *idx, n; /* members compared */
        size_t nops;
        struct hist **h; /* [op][rank] */
        struct straggler_op *ops;
        struct op_aggs **windows; /* [rank]: its ops per window, oldest first */
        size_t *nwindows;
        struct hist empty;
};

static void comparison_done(struct comparison *c) {
        for (size_t i = 0; c->h && i < c->nops; i++)
                free(c->h[i]);
        for (size_t k = 0; c->windows && k < c->n; k++)
                op_steps_free(c->windows[k], c->nwindows[k]);
        free(c->h);
        free(c->ops);
        free(c->windows);
        free(c->nwindows);
        free(c->idx);
}

/* Each compared rank's ops in the span's last whole windows of [jobs]
 * score_window (at most SCORE_WINDOWS); a span shorter than one is one
 * window, its ops over the span. */
static int load_windows(struct request *rq, const struct job_member *m, int64_t until, struct comparison *c) {
        struct api *a = api_of(rq);
        struct query_limits lim = limits(rq);
        int64_t w = (int64_t)(a->config->jobs_score_window_usec / USEC_PER_MSEC);
        for (size_t k = 0; k < c->n; k++) {
                const struct job_member *x = &m[c->idx[k]];
                int64_t span = until + 1 - x->span_from, nw = span / w;
                nw = nw > SCORE_WINDOWS ? SCORE_WINDOWS : nw;
                if (nw == 0)
                        continue; /* the span's ops are its one window */
                int r = querier_op_steps(a->store, &lim, &a->live, x->ri->id, until + 1 - nw * w, until + 1, w, NULL,
                                         &c->windows[k], &c->nwindows[k]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int comparison_init(struct request *rq, const struct job_member *m, size_t n, const struct op_aggs *merged,
                           const char *collective, int64_t until, struct comparison *c) {
        *c = (struct comparison){ .nops = merged->n };
        hist_init(&c->empty);
        c->idx = calloc(n ? n : 1, sizeof *c->idx);
        c->h = calloc(merged->n ? merged->n : 1, sizeof *c->h);
        c->ops = calloc(merged->n ? merged->n : 1, sizeof *c->ops);
        c->windows = calloc(n ? n : 1, sizeof *c->windows);
        c->nwindows = calloc(n ? n : 1, sizeof *c->nwindows);
        if (!c->idx || !c->h || !c->ops || !c->windows || !c->nwindows)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (m[i].in_attempt && m[i].in_span)
                        c->idx[c->n++] = i;
        for (size_t o = 0; o < merged->n; o++) {
                const struct op_agg *op = &merged->v[o];
                c->h[o] = calloc(c->n ? c->n : 1, sizeof *c->h[o]);
                if (!c->h[o])
                        return -ENOMEM;
                for (size_t k = 0; k < c->n; k++) {
                        const struct op_agg *x = find_op(&m[c->idx[k]].ops, op->op);
                        c->h[o][k] = x ? x->h : c->empty; /* borrowed: only read */
                }
                c->ops[o] = (struct straggler_op){
                        .ranks = c->h[o],
                        .collective = (op->category && streq(op->category, "collective")) ||
                                      op_matches_list(collective, op->op),
                };
        }
        return load_windows(rq, m, until, c);
}

/* Rank k's individual score in op: its windows' histograms of the op. */
static double individual_score(const struct comparison *c, size_t o, size_t k, const struct job_member *x,
                               const char *op) {
        if (!c->windows[k]) {
                const struct op_agg *a = find_op(&x->ops, op);
                return a ? straggler_individual_score(&a->h, 1) : NAN;
        }
        _cleanup_free_ struct hist *w = calloc(c->nwindows[k] ? c->nwindows[k] : 1, sizeof *w);
        if (!w)
                return NAN;
        for (size_t j = 0; j < c->nwindows[k]; j++) {
                const struct op_agg *a = find_op(&c->windows[k][j], op);
                w[j] = a ? a->h : c->empty;
        }
        return straggler_individual_score(w, c->nwindows[k]);
}

/* Per rank of op o: count, p50, p99, its p50 against the others' (the
 * figure the verdict compares with), and the two scores. */
static int render_op_ranks(struct request *rq, const struct comparison *c, const struct job_member *m, size_t o,
                           const char *op, json_object *arr) {
        double thr = api_of(rq)->config->jobs_score_threshold;
        for (size_t k = 0; k < c->n; k++) {
                const struct hist *h = &c->h[o][k];
                const struct job_member *x = &m[c->idx[k]];
                struct straggler_verdict v;
                if (h->count == 0)
                        continue;
                int r = straggler_test(c->h[o], c->n, k, 0, &v);
                if (r < 0)
                        return r;
                double rel = straggler_relative_score(c->h[o], c->n, k), ind = individual_score(c, o, k, x, op);
                json_object *j = json_object_new_object();
                json_add_i64(j, "run", true, x->ri->id);
                json_add_string(j, "rank", x->rank);
                json_add_u64(j, "count", true, h->count);
                json_object_object_add(j, "p50_ms", json_double_or_null(hist_quantile(h, 0.5)));
                json_object_object_add(j, "p99_ms", json_double_or_null(hist_quantile(h, 0.99)));
                json_object_object_add(j, "vs_others_pct",
                                       isfinite(v.slower_pct) ? json_double_round(v.slower_pct, 1) : NULL);
                json_object_object_add(j, "relative_score", isfinite(rel) ? json_double_round(rel, 3) : NULL);
                json_object_object_add(j, "individual_score", isfinite(ind) ? json_double_round(ind, 3) : NULL);
                /* NVIDIA leaves collectives out of its scores: waiting there is no slowness */
                json_object_object_add(
                        j, "score_flagged",
                        json_object_new_boolean(!c->ops[o].collective &&
                                                ((isfinite(rel) && rel < thr) || (isfinite(ind) && ind < thr))));
                json_object_array_add(arr, j);
        }
        return 0;
}

static char *straggler_reason(const struct job_member *x, const char *op, const struct straggler_finding *f, bool two,
                              const char *view) {
        const struct straggler_verdict *v = &f->v;
        char who[96], p[32];
        char *reason = NULL;
        job_member_name(x, who, sizeof who);
        p_text(v->p_value, p, sizeof p);
        int r;
        if (f->kind == STRAGGLER_WAITED_FOR)
                r = asprintf(&reason,
                             "%s: the other ranks wait for it in %s, which holds a collective: its median there is "
                             "%.4g ms, theirs %.4g ms (%.4g ms more); %llu of its %llu timings are below %.4g ms "
                             "(sign test, %s)%s%s",
                             who, op, v->p50_ms, v->others_p50_ms, v->others_p50_ms - v->p50_ms,
                             (unsigned long long)v->above, (unsigned long long)v->n, v->others_p50_ms, p,
                             view ? "; judged among the " : "", view ? view : "");
        else
                r = asprintf(&reason,
                             "%s: median of %s %.4g ms, %.1f%% slower than the other ranks' %.4g ms; %llu of its %llu "
                             "timings are above %.4g ms (sign test, %s)%s%s%s",
                             who, op, v->p50_ms, v->slower_pct, v->others_p50_ms, (unsigned long long)v->above,
                             (unsigned long long)v->n, v->others_p50_ms, p,
                             two ? "; of 2 ranks, named since the other waits for it in an op that holds a collective"
                                 : "",
                             view ? "; judged among the " : "", view ? view : "");
        return r < 0 ? NULL : reason;
}

/* "rank 2 (run 3): median of step 12.49 ms, 24.6% slower than the other
 * ranks' 10.02 ms; ...", with the figures it rests on. */
static json_object *render_straggler(const struct job_member *x, const char *op, bool collective, bool two,
                                     const struct straggler_finding *f, const char *view) {
        const struct straggler_verdict *v = &f->v;
        _cleanup_free_ char *reason = straggler_reason(x, op, f, two, view);
        json_object *j = json_object_new_object();
        json_add_i64(j, "run", true, x->ri->id);
        json_add_string(j, "rank", x->rank);
        json_add_string(j, "op", op);
        json_add_string(j, "kind", f->kind == STRAGGLER_WAITED_FOR ? "waited_for" : "slower");
        json_object_object_add(j, "collective", json_object_new_boolean(collective));
        json_object_object_add(j, "p50_ms", json_double_or_null(v->p50_ms));
        json_object_object_add(j, "job_p50_ms", json_double_or_null(v->others_p50_ms));
        json_object_object_add(j, "slower_pct", json_double_round(v->slower_pct, 1));
        json_object_object_add(j, "wait_ms",
                               f->kind == STRAGGLER_WAITED_FOR ? json_double_or_null(v->others_p50_ms - v->p50_ms)
                                                               : NULL);
        json_object_object_add(j, "p_value", json_double_or_null(v->p_value));
        json_object_object_add(j, "local", json_object_new_boolean(view != NULL));
        json_add_string(j, "reason", reason);
        return j;
}

/* Two ranks differ in op, and nothing says which is slow. */
static json_object *render_undecided(const struct job_member *slow, const struct job_member *other, const char *op,
                                     const struct straggler_finding *f) {
        char a[96], b[96];
        _cleanup_free_ char *reason = NULL;
        job_member_name(slow, a, sizeof a);
        job_member_name(other, b, sizeof b);
        if (asprintf(&reason,
                     "2 ranks: cannot tell which is slow in %s: the median of %s is %.4g ms, of %s %.4g ms; a rank "
                     "slower at its own work and one that waits for the other in a collective look the same, and no "
                     "op that holds a collective tells them apart (see [jobs] collective_ops)",
                     op, a, f->v.p50_ms, b, f->v.others_p50_ms) < 0)
                reason = NULL;
        json_object *j = json_object_new_object(), *runs = json_object_new_array(), *ranks = json_object_new_array();
        json_add_string(j, "op", op);
        json_object_array_add(runs, json_object_new_int64(slow->ri->id));
        json_object_array_add(runs, json_object_new_int64(other->ri->id));
        json_object_array_add(ranks, slow->rank ? json_object_new_string(slow->rank) : NULL);
        json_object_array_add(ranks, other->rank ? json_object_new_string(other->rank) : NULL);
        json_object_object_add(j, "runs", runs);
        json_object_object_add(j, "ranks", ranks);
        json_object_object_add(j, "slower_pct", json_double_round(f->v.slower_pct, 1));
        json_add_string(j, "reason", reason);
        return j;
}

/* The ranks an op compares: those with enough timings of it. */
static size_t comparable_ranks(const struct comparison *c, size_t o) {
        size_t k = 0;
        for (size_t i = 0; i < c->n; i++)
                k += c->h[o][i].count >= STRAGGLER_MIN_COUNT;
        return k;
}

static int finding_cmp(const void *a, const void *b) {
        const struct straggler_finding *x = a, *y = b;
        if (x->op != y->op)
                return x->op < y->op ? -1 : 1;
        return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The verdicts, by op in the document's order, then by rank. */
static int render_findings(struct request *rq, const struct comparison *c, const struct job_member *m,
                           const struct op_aggs *merged, const char *view, json_object *root) {
        json_object *stragglers = json_object_new_array(), *undecided = json_object_new_array();
        json_object_object_add(root, "stragglers", stragglers);
        json_object_object_add(root, "undecided", undecided);
        _cleanup_free_ struct straggler_finding *f = NULL;
        size_t nf = 0;
        int r = straggler_judge(c->ops, c->nops, c->n, api_of(rq)->config->jobs_straggler_pct, &f, &nf);
        if (r < 0)
                return r;
        sort_array(f, nf, sizeof *f, finding_cmp);
        for (size_t i = 0; i < nf; i++) {
                const struct job_member *x = &m[c->idx[f[i].rank]];
                const char *op = merged->v[f[i].op].op;
                if (f[i].kind == STRAGGLER_UNDECIDED)
                        json_object_array_add(undecided, render_undecided(x, &m[c->idx[f[i].other]], op, &f[i]));
                else
                        json_object_array_add(stragglers,
                                              render_straggler(x, op, c->ops[f[i].op].collective,
                                                               comparable_ranks(c, f[i].op) == 2, &f[i], view));
        }
        return 0;
}

int job_compare(struct request *rq, const struct job_member *m, size_t n, const struct op_aggs *merged,
                const char *collective, const char *view, int64_t until, json_object *root) {
        struct comparison c;
        int r = comparison_init(rq, m, n, merged, collective, until, &c);
        json_object *ranks = json_object_new_object(), *coll = json_object_new_array();
        json_object_object_add(root, "ranks", ranks);
        for (size_t o = 0; r == 0 && o < merged->n; o++) {
                if (merged->v[o].h.count == 0)
                        continue;
                json_object *arr = json_object_new_array();
                json_object_object_add(ranks, merged->v[o].op, arr);
                if (c.ops[o].collective)
                        json_object_array_add(coll, json_object_new_string(merged->v[o].op));
                r = render_op_ranks(rq, &c, m, o, merged->v[o].op, arr);
        }
        json_object_object_add(root, "collective_ops", coll);
        if (r == 0)
                r = render_findings(rq, &c, m, merged, view, root);
        comparison_done(&c);
        return r;
}

/* ---- the stall verdict ---------------------------------------------------- */

/* What the manager knows of a running member now: its process's state, its
 * latest timings. */
static void member_live(struct request *rq, struct job_member *x, const char *step_op) {
        struct api *a = api_of(rq);
        struct run_live live;
        if (x->ri->state != RUN_RUNNING)
                return;
        if (api_live(a, x->ri->id, RUN_LIVE_LAST, &live) == 0) {
                x->proc_state = live.has_last ? live.last.proc_state : 0;
                run_live_done(&live);
        }
        (void)a->manager.ops->op_last(a->manager.userdata, x->ri->id, step_op, &x->last_step_ms, &x->last_op_ms);
}

int job_stall_judge(struct request *rq, struct job_member *m, size_t n, int64_t now_ms, struct job_stall *ret) {
        const struct config *cfg = api_of(rq)->config;
        _cleanup_free_ struct stall_rank *ranks = calloc(n ? n : 1, sizeof *ranks);
        _cleanup_free_ enum stall_cause *causes = calloc(n ? n : 1, sizeof *causes);
        _cleanup_free_ size_t *idx = calloc(n ? n : 1, sizeof *idx);
        *ret = (struct job_stall){ .p99_ms = NAN, .causes = calloc(n ? n : 1, sizeof *ret->causes) };
        if (!ranks || !causes || !idx || !ret->causes)
                return -ENOMEM;
        struct hist step;
        size_t k = 0;
        int r = 0;
        hist_init(&step);
        for (size_t i = 0; i < n && r == 0; i++) {
                struct job_member *x = &m[i];
                if (!x->in_attempt)
                        continue;
                member_live(rq, x, cfg->goodput_step_op);
                ranks[k] = (struct stall_rank){ .running = x->ri->state == RUN_RUNNING,
                                                .proc_state = x->proc_state,
                                                .last_step_ms = x->last_step_ms,
                                                .last_op_ms = x->last_op_ms,
                                                .ended_ms = x->ri->ended_ts_ms };
                idx[k++] = i;
                struct op_aggs recent = {};
                int64_t from;
                r = run_ops(rq, x->ri->id, now_ms - STALL_P99_WINDOW_MS, now_ms, false, cfg->goodput_step_op, &recent,
                            &from);
                for (size_t j = 0; r == 0 && j < recent.n; j++)
                        r = hist_merge(&step, &recent.v[j].h);
                op_aggs_done(&recent);
        }
        ret->p99_ms = step.count ? hist_quantile(&step, 0.99) : NAN;
        hist_done(&step);
        if (r < 0)
                return r;
        stall_judge(ranks, k, ret->p99_ms, cfg->jobs_stall_factor,
                    (int64_t)(cfg->jobs_stall_floor_usec / USEC_PER_MSEC), now_ms, causes, &ret->v);
        for (size_t j = 0; j < k; j++)
                ret->causes[idx[j]] = causes[j];
        return 0;
}

void job_stall_done(struct job_stall *s) {
        free(s->causes);
        s->causes = NULL;
}

/* "killed by SIGKILL", "exited with status 1". */
static void exit_text(const struct run_info *ri, char *buf, size_t size) {
        const char *sig = ri->has_exit_signal ? sigabbrev_np(ri->exit_signal) : NULL;
        if (ri->has_exit_signal && sig)
                snprintf(buf, size, "killed by SIG%s", sig);
        else if (ri->has_exit_signal)
                snprintf(buf, size, "killed by signal %d", ri->exit_signal);
        else if (ri->has_exit_code)
                snprintf(buf, size, "exited with status %d", ri->exit_code);
        else if (ri->state == RUN_UNREGISTERED)
                snprintf(buf, size, "unregistered");
        else
                snprintf(buf, size, "how is not known");
}

static char *stall_reason(const struct job_member *m, size_t n, size_t i, enum stall_cause c, int64_t now_ms) {
        char who[96], how[64];
        char *s = NULL;
        int r = -1;
        int64_t latest = 0;
        job_member_name(&m[i], who, sizeof who);
        for (size_t j = 0; j < n; j++)
                if (j != i && m[j].in_attempt && m[j].ri->state == RUN_RUNNING && m[j].last_op_ms > latest)
                        latest = m[j].last_op_ms;
        switch (c) {
        case STALL_STOPPED:
                r = asprintf(&s, "%s is stopped (by SIGSTOP, a debugger or job control): the others wait for it", who);
                break;
        case STALL_DISK_SLEEP:
                r = asprintf(&s, "%s is in uninterruptible sleep (disk-sleep: waiting on storage or a driver)", who);
                break;
        case STALL_EXITED:
                exit_text(m[i].ri, how, sizeof how);
                r = asprintf(&s, "%s ended %.1f s ago (%s) while the others still run", who,
                             (double)(now_ms - m[i].ri->ended_ts_ms) / 1000, how);
                break;
        case STALL_BEHIND:
                r = asprintf(&s,
                             "%s sent its last timing %.2f s before the latest of the other ranks: they went on to "
                             "their next collective and wait for it there",
                             who, (double)(latest - m[i].last_op_ms) / 1000);
                break;
        case STALL_NONE:
                break;
        }
        return r < 0 ? NULL : s;
}

void job_stall_render(const struct job_stall *s, const struct job_member *m, size_t n, const char *step_op,
                      int64_t now_ms, json_object *root) {
        static const char *const cause_names[] = { [STALL_STOPPED] = "stopped",
                                                   [STALL_DISK_SLEEP] = "disk-sleep",
                                                   [STALL_EXITED] = "exited",
                                                   [STALL_BEHIND] = "behind" };
        bool running = false;
        for (size_t i = 0; i < n; i++)
                running = running || (m[i].in_attempt && m[i].ri->state == RUN_RUNNING);
        json_add_string(root, "state", s->v.stalled ? "stalled" : running ? "running" : "finished");
        json_add_i64(root, "stalled_since", s->v.stalled, s->v.last_step_ms);
        json_object *arr = json_object_new_array();
        for (size_t i = 0; s->v.stalled && i < n; i++) {
                if (s->causes[i] == STALL_NONE)
                        continue;
                _cleanup_free_ char *reason = stall_reason(m, n, i, s->causes[i], now_ms);
                json_object *j = json_object_new_object();
                json_add_i64(j, "run", true, m[i].ri->id);
                json_add_string(j, "rank", m[i].rank);
                json_add_string(j, "cause", cause_names[s->causes[i]]);
                json_add_string(j, "reason", reason);
                json_object_array_add(arr, j);
        }
        json_object_object_add(root, "stalled_ranks", arr);
        json_object *st = json_object_new_object();
        json_add_string(st, "step_op", step_op);
        json_add_i64(st, "last_step_ts", s->v.last_step_ms > 0, s->v.last_step_ms);
        json_object_object_add(st, "p99_ms", json_double_or_null(s->p99_ms));
        json_add_i64(st, "threshold_ms", true, s->v.threshold_ms);
        json_object_object_add(root, "stall", st);
}

/* ---- how an attempt ended ------------------------------------------------- */

static int ended_cmp(const void *a, const void *b) {
        const struct job_member *x = *(const struct job_member *const *)a, *y = *(const struct job_member *const *)b;
        return (x->ri->ended_ts_ms > y->ri->ended_ts_ms) - (x->ri->ended_ts_ms < y->ri->ended_ts_ms);
}

/* What ended members did, after their names: "was killed by SIGKILL",
 * "were killed by SIGTERM", "exited with status 1". */
static void exit_predicate(const struct run_info *ri, bool plural, char *buf, size_t size) {
        char how[64];
        exit_text(ri, how, sizeof how);
        if (ri->has_exit_code)
                snprintf(buf, size, "%s", how);
        else if (ri->has_exit_signal || ri->state == RUN_UNREGISTERED)
                snprintf(buf, size, "%s %s", plural ? "were" : "was", how);
        else
                snprintf(buf, size, "ended (how, mlmond could not see)");
}

/* "rank 1", "ranks 0, 2", "runs 7, 8" of the members in v[0..k) that ended
 * as how says (all of them when how is NULL), into a growing text. */
static void append_group(char **text, struct job_member **v, size_t k, const char *how, const char *tail) {
        size_t count = 0;
        bool ranks = true;
        const struct run_info *one = NULL;
        for (size_t i = 0; i < k; i++) {
                char h[64];
                exit_text(v[i]->ri, h, sizeof h);
                if (!how || streq(h, how)) {
                        count++;
                        ranks = ranks && v[i]->rank;
                        one = one ? one : v[i]->ri;
                }
        }
        if (!one)
                return;
        char pred[96];
        exit_predicate(one, count > 1, pred, sizeof pred);
        char *s = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&s, &len);
        if (!f)
                return;
        fprintf(f, "%s%s%s ", *text ? *text : "", *text ? "; " : "",
                ranks ? (count > 1 ? "ranks" : "rank") : (count > 1 ? "runs" : "run"));
        /* named in rank order: the members are, so are pointers to them */
        for (const struct job_member *prev = NULL, *next;; prev = next) {
                next = NULL;
                for (size_t i = 0; i < k; i++) {
                        char h[64];
                        exit_text(v[i]->ri, h, sizeof h);
                        if ((!how || streq(h, how)) && v[i] > prev && (!next || v[i] < next))
                                next = v[i];
                }
                if (!next)
                        break;
                if (ranks)
                        fprintf(f, "%s%.40s", prev ? ", " : "", next->rank);
                else
                        fprintf(f, "%s%lld", prev ? ", " : "", (long long)next->ri->id);
        }
        fprintf(f, " %s %s", pred, tail);
        if (fclose(f) == 0) {
                free(*text);
                *text = s;
        } else
                free(s);
}

char *job_end_reason(const struct job_member *m, size_t n, unsigned attempt) {
        _cleanup_free_ struct job_member **v = calloc(n ? n : 1, sizeof *v);
        size_t k = 0, still = 0;
        if (!v)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                if (m[i].launcher || m[i].attempt != attempt)
                        continue;
                if (m[i].ri->state == RUN_RUNNING)
                        still++;
                else
                        v[k++] = (struct job_member *)&m[i];
        }
        if (k == 0)
                return NULL;
        sort_array(v, k, sizeof *v, ended_cmp);
        char *text = NULL, tail[96], first[64];
        bool alike = true;
        exit_text(v[0]->ri, first, sizeof first);
        for (size_t i = 1; i < k && alike; i++) {
                char h[64];
                exit_text(v[i]->ri, h, sizeof h);
                alike = streq(h, first);
        }
        if (alike && k > 1) {
                /* "ranks 0, 1, 2 exited with status 0 within 0.1 s" */
                snprintf(tail, sizeof tail, "within %.1f s",
                         (double)(v[k - 1]->ri->ended_ts_ms - v[0]->ri->ended_ts_ms) / 1000);
                append_group(&text, v, k, NULL, tail);
                k = 1;
        } else
                append_group(&text, v, 1, NULL, "first");
        /* the others by how they ended, in the order each way came first */
        for (size_t i = 1; i < k; i++) {
                char h[64];
                bool seen = false;
                exit_text(v[i]->ri, h, sizeof h);
                for (size_t j = 1; j < i && !seen; j++) {
                        char g[64];
                        exit_text(v[j]->ri, g, sizeof g);
                        seen = streq(g, h);
                }
                if (seen)
                        continue;
                int64_t last = v[i]->ri->ended_ts_ms;
                for (size_t j = i; j < k; j++) {
                        char g[64];
                        exit_text(v[j]->ri, g, sizeof g);
                        if (streq(g, h) && v[j]->ri->ended_ts_ms > last)
                                last = v[j]->ri->ended_ts_ms;
                }
                snprintf(tail, sizeof tail, "%.1f s later", (double)(last - v[0]->ri->ended_ts_ms) / 1000);
                append_group(&text, v + 1, k - 1, h, tail);
        }
        if (still > 0 && text) {
                char *s = NULL;
                if (asprintf(&s, "%s; %zu still running", text, still) >= 0) {
                        free(text);
                        text = s;
                }
        }
        return text;
}

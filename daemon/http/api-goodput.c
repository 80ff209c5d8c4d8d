/* SPDX-License-Identifier: MIT */
/* /v1/runs/{id}/goodput and /v1/jobs/{id}/goodput: the goodput ledger of a
 * span (analyze/goodput.h), worked out from the run's op slices as the
 * querier gives them, its marks, its first step and its energy. A job's
 * ledger is the mean of its ranks': each rank's runs one after the other,
 * an attempt that a restart ended counted as lost from its last checkpoint
 * mark on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/goodput.h"
#include "http/handlers.h"
#include "http/jobs.h"
#include "http/render.h"
#include "json-util.h"

/* Seconds of 1-second slices asked for at once: an hour of a run's op
 * data, after which a tick that came due runs (api_yield). */
#define CHUNK_SLICES 3600
/* A span longer than this is read in minutes: each minute's timings go into
 * its last second and fill the seconds before it, so the split holds and
 * only gaps shorter than a minute go unseen; a week is then 10 080 minutes,
 * not 604 800 seconds. */
#define FINE_SPAN_MS (6 * 3600 * 1000LL)
/* A chart needs no more points than a screen has pixels across. */
#define MAX_SERIES 2000

/* A ledger's series: ms per kind per step of step_ms from from. */
struct series {
        int64_t from, step_ms;
        size_t n;
        double (*ms)[_GOODPUT_KIND_MAX];
};

static void series_add(struct series *s, int64_t a, int64_t b, const double *ms, enum goodput_kind only) {
        if (!s || !s->n || b <= a)
                return;
        int64_t k = (a - s->from) / s->step_ms;
        size_t i = k < 0 ? 0 : (size_t)k >= s->n ? s->n - 1 : (size_t)k;
        if (ms)
                for (int j = 0; j < _GOODPUT_KIND_MAX; j++)
                        s->ms[i][j] += ms[j];
        else /* an interval of one kind, cut at the steps */
                for (int64_t t = a; t < b;) {
                        int64_t kk = (t - s->from) / s->step_ms, end = s->from + (kk + 1) * s->step_ms;
                        size_t ii = kk < 0 ? 0 : (size_t)kk >= s->n ? s->n - 1 : (size_t)kk;
                        end = end > b ? b : end;
                        s->ms[ii][only] += (double)(end - t);
                        t = end;
                }
}

static void series_emit(void *userdata, const struct goodput_cell *c) {
        series_add(userdata, c->ts_ms, c->ts_ms + GOODPUT_SLICE_MS, c->ms, 0);
}

/* One slice of op data by what its ops are for; the step op's histogram
 * merged into *steps when asked. */
static void slice_of_ops(const struct goodput_rules *rules, const struct op_aggs *a, int64_t ts,
                         struct goodput_slice *ret) {
        *ret = (struct goodput_slice){ .ts_ms = ts };
        for (size_t i = 0; i < a->n; i++) {
                const struct hist *h = &a->v[i].h;
                if (h->count == 0)
                        continue;
                switch (goodput_classify(rules, a->v[i].op, a->v[i].category)) {
                case GOODPUT_STEP:
                        ret->step_ms += h->sum;
                        ret->steps += (double)h->count;
                        break;
                case GOODPUT_DATA:
                        ret->data_ms += h->sum;
                        break;
                case GOODPUT_CHECKPOINT:
                        ret->checkpoint_ms += h->sum;
                        break;
                case GOODPUT_EVAL:
                        ret->eval_ms += h->sum;
                        break;
                default:
                        ret->other_ms += h->sum;
                        break;
                }
        }
}

/* The run's op data over [from, until) into the stream, an hour (or, for a
 * long span, a few days of minutes) at a time. */
static int feed_ops(struct request *rq, const struct run_info *ri, const struct goodput_rules *rules, int64_t from,
                    int64_t until, struct goodput_stream *s) {
        struct api *a = api_of(rq);
        struct query_limits lim = limits(rq);
        int64_t res = until - from > FINE_SPAN_MS ? 60 * GOODPUT_SLICE_MS : GOODPUT_SLICE_MS;
        for (int64_t t = from - from % res; t < until;) {
                int64_t end = t + CHUNK_SLICES * res < until ? t + CHUNK_SLICES * res : until;
                struct op_aggs *steps = NULL;
                size_t n = 0;
                int r = querier_op_steps(a->store, &lim, &a->live, ri->id, t, end, res, NULL, &steps, &n);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++) {
                        struct goodput_slice in;
                        /* a minute's timings end in its last second */
                        slice_of_ops(rules, &steps[i], t + (int64_t)i * res + res - GOODPUT_SLICE_MS, &in);
                        goodput_stream_add(s, &in);
                }
                op_steps_free(steps, n);
                t = end;
                if (t < until)
                        api_yield(a);
        }
        return 0;
}

/* The phase in force at from (the last phase mark before it) and the
 * changes in the span; or (s NULL) the last checkpoint mark into
 * *ret_checkpoint (the registration without one). */
static int feed_marks(struct request *rq, const struct run_info *ri, const struct goodput_rules *rules, int64_t from,
                      int64_t until, struct goodput_stream *s, int64_t *ret_checkpoint) {
        struct query_limits lim = limits(rq);
        struct mark *v = NULL;
        size_t n = 0;
        int r = query_marks(api_of(rq)->store, &lim, ri->id, &v, &n);
        if (r < 0)
                return r;
        if (!s) {
                *ret_checkpoint = ri->registered_ts_ms;
                for (size_t i = 0; i < n; i++)
                        if (goodput_match_list(rules->checkpoint_marks, v[i].label) && v[i].ts_ms > *ret_checkpoint)
                                *ret_checkpoint = v[i].ts_ms;
                marks_free(v, n);
                return 0;
        }
        enum goodput_phase at_from = GOODPUT_PHASE_NONE;
        for (size_t i = 0; i < n; i++)
                if (v[i].ts_ms <= from)
                        at_from = goodput_mark_phase(rules, v[i].label);
        goodput_stream_phase(s, INT64_MIN, at_from);
        for (size_t i = 0; i < n; i++)
                if (v[i].ts_ms > from && v[i].ts_ms < until)
                        goodput_stream_phase(s, v[i].ts_ms, goodput_mark_phase(rules, v[i].label));
        marks_free(v, n);
        return 0;
}

/* The ledger of one run over [from, until) (within the run's life), its
 * progress lost from lost_from on; the step op's timings merged into
 * *steps; cells into series (may be NULL). */
static int run_ledger(struct request *rq, const struct run_info *ri, int64_t from, int64_t until, int64_t lost_from,
                      struct series *series, struct hist *steps, struct goodput_ledger *ret) {
        struct api *a = api_of(rq);
        struct query_limits lim = limits(rq);
        struct goodput_rules rules;
        struct goodput_params p = { .idle_k = a->config->goodput_idle_k,
                                    .parts_in_step = streq(a->config->goodput_parts_in_step, "yes") };
        rules = (struct goodput_rules){
                .step_op = ri->step_op ? ri->step_op : a->config->goodput_step_op,
                .data_categories = a->config->goodput_data_categories,
                .data_ops = a->config->goodput_data_ops,
                .checkpoint_categories = a->config->goodput_checkpoint_categories,
                .eval_categories = a->config->goodput_eval_categories,
                .checkpoint_marks = a->config->goodput_checkpoint_marks,
                .eval_marks = a->config->goodput_eval_marks,
        };
        *ret = (struct goodput_ledger){ .from_ms = from,
                                        .until_ms = until,
                                        .wall_ms = (double)(until - from),
                                        .step_op = rules.step_op,
                                        .ideal_step_ms = NAN };
        if (until <= from)
                return 0;
        struct op_aggs mine = {};
        int r = querier_ops(a->store, &lim, &a->live, ri->id, ops_slice_of(from), until, rules.step_op, &mine);
        for (size_t i = 0; r == 0 && i < mine.n; i++)
                r = hist_merge(steps, &mine.v[i].h);
        uint64_t n_steps = mine.n ? mine.v[0].h.count : 0;
        double ideal = mine.n ? goodput_ideal_step_ms(&mine.v[0].h, NULL) : NAN;
        op_aggs_done(&mine);
        if (r < 0)
                return r;
        int64_t su = ri->first_step_ts_ms ? (ri->first_step_ts_ms <= from ? INT64_MIN : ri->first_step_ts_ms)
                                          : INT64_MIN; /* not known: no startup */
        struct goodput_stream *s = malloc(sizeof *s);
        if (!s)
                return -ENOMEM;
        goodput_stream_init(s, &p, from, until, su, ri->first_step_ms, lost_from);
        goodput_stream_set_typical(s, ideal);
        s->emit = series ? series_emit : NULL;
        s->userdata = series;
        r = feed_marks(rq, ri, &rules, from, until, s, NULL);
        if (r == 0)
                r = feed_ops(rq, ri, &rules, from, until, s);
        if (r == 0) {
                goodput_stream_finish(s);
                memcpy(ret->ms, s->total_ms, sizeof ret->ms);
                ret->steps = s->steps;
                ret->has_split = n_steps > 0;
                ret->has_startup = ri->first_step_ts_ms != 0;
                ret->ideal_step_ms = ideal;
        }
        free(s);
        if (r < 0)
                return r;
        /* the whole run: its estimate since registration (its first sample
         * has none yet); else the change over the span's samples */
        struct run_totals t;
        int64_t base;
        if (from <= ri->registered_ts_ms && until >= ri->totals.last_ts_ms) {
                ret->has_energy = ri->totals.has_energy;
                ret->energy_j = ri->totals.energy_j;
        } else if (querier_span_totals(a->store, &lim, ri->id, from, until, &t, &base) == 0 && t.samples > 0) {
                ret->has_energy = t.has_energy;
                ret->energy_j = t.energy_j;
        }
        return 0;
}

/* step=DUR for the series: at least 1 s, at most MAX_SERIES steps in the
 * span. False: answered. */
static bool parse_series_step(struct request *rq, int64_t from, int64_t until, struct series *ret) {
        const char *v = arg(rq, "step");
        usec_t step = 0;
        *ret = (struct series){};
        if (!v)
                return true;
        if (parse_duration(v, &step) < 0 || step < USEC_PER_SEC || step > MAX_WINDOW_USEC) {
                respond_error(rq, 400, "bad_request", "step: must be a duration of at least 1s, such as 1m");
                return false;
        }
        ret->step_ms = (int64_t)(step / USEC_PER_MSEC);
        /* steps of whole slices from the slice holding from: each holds the
         * slices that start in it (the first may begin before from) */
        ret->from = ops_slice_of(from);
        int64_t n = until > ret->from ? (until - ret->from + ret->step_ms - 1) / ret->step_ms : 1;
        if (n > MAX_SERIES) {
                respond_error(rq, 400, "bad_request", "step: the span would have more than %d steps", MAX_SERIES);
                return false;
        }
        ret->n = (size_t)n;
        ret->ms = calloc(ret->n, sizeof *ret->ms);
        if (!ret->ms) {
                respond_errno(rq, -ENOMEM, "out of memory");
                return false;
        }
        return true;
}

static void series_render(json_object *root, const struct series *s, double scale) {
        if (!s->n)
                return;
        json_object *arr = json_object_new_array_ext((int)s->n);
        for (size_t i = 0; i < s->n; i++) {
                /* a step holds the slices that start in it: its parts add
                 * up to their time, not quite the step's */
                double ms[_GOODPUT_KIND_MAX], all = 0;
                for (int k = 0; k < _GOODPUT_KIND_MAX; k++) {
                        ms[k] = s->ms[i][k] * scale;
                        all += ms[k];
                }
                json_object_array_add(arr, render_goodput_point(s->from + (int64_t)i * s->step_ms, ms, all));
        }
        json_add_double(root, "series_step_s", true, (double)s->step_ms / 1000);
        json_object_object_add(root, "series", arr);
}

static const char *tag_of(json_object *tags, const char *key) {
        json_object *v;
        return json_object_object_get_ex(tags, key, &v) && json_object_is_type(v, json_type_string)
                       ? json_object_get_string(v)
                       : NULL;
}

/* A later attempt of the same rank: this run ended in a restart. */
static bool restarted(const struct run_info *ri, json_object *tags, const struct run_info *all, size_t n) {
        const char *rank = tag_of(tags, "rank"), *att = tag_of(tags, "attempt");
        unsigned mine, other;
        if (!rank || !att || safe_atou(att, &mine) < 0)
                return false;
        bool later = false;
        for (size_t i = 0; i < n && !later; i++) {
                _cleanup_json_ json_object *t = all[i].tags_json ? json_tokener_parse(all[i].tags_json) : NULL;
                const char *r2 = tag_of(t, "rank"), *a2 = tag_of(t, "attempt");
                later = all[i].id != ri->id && r2 && streq(r2, rank) && a2 && safe_atou(a2, &other) == 0 &&
                        other > mine;
        }
        return later;
}

/* Where the run's progress was lost, INT64_MAX when it was not. */
static int lost_from_of(struct request *rq, const struct run_info *ri, const struct run_info *all, size_t n,
                        int64_t *ret) {
        _cleanup_json_ json_object *tags = ri->tags_json ? json_tokener_parse(ri->tags_json) : NULL;
        *ret = INT64_MAX;
        if (!restarted(ri, tags, all, n))
                return 0;
        const struct config *c = api_of(rq)->config;
        struct goodput_rules rules = { .checkpoint_marks = c->goodput_checkpoint_marks };
        return feed_marks(rq, ri, &rules, 0, 0, NULL, ret);
}

void h_run_goodput(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "from", "until", "since_mark", "step", NULL };
        struct run_info ri;
        if (!check_args(rq, allowed) || !load_run(rq, parts[2], &ri))
                return;
        int64_t from, until, lost = INT64_MAX;
        double window_s;
        json_object *mark = NULL;
        struct series series = {};
        struct goodput_ledger l;
        struct hist steps;
        hist_init(&steps);
        bool ok = parse_run_span(rq, &ri, true, &from, &until, &window_s, &mark);
        if (ok) {
                span_within_run(&ri, now_realtime_ms(), &from, &until);
                ok = parse_series_step(rq, from, until, &series);
        }
        int r = 0;
        if (ok) {
                _cleanup_json_ json_object *tags = ri.tags_json ? json_tokener_parse(ri.tags_json) : NULL;
                struct run_info *all = NULL;
                size_t n = 0;
                bool truncated;
                struct query_limits lim = limits(rq);
                struct runs_filter f = { .state = -1, .job_id = tag_of(tags, "job_id") };
                if (f.job_id && tag_of(tags, "attempt"))
                        r = query_runs(api_of(rq)->store, &lim, &f, &all, &n, &truncated);
                if (r == 0)
                        r = lost_from_of(rq, &ri, all, n, &lost);
                run_infos_free(all, n);
        }
        if (ok && r == 0)
                r = run_ledger(rq, &ri, from, until, lost, series.n ? &series : NULL, &steps, &l);
        if (ok && r < 0)
                respond_query_error(rq, r);
        else if (ok) {
                l.reason = l.has_split ? NULL
                                       : "no timings of the step op in this span: send them (mlmon.timer(), "
                                         "StatsD) or name the run's step op (--step-op)";
                json_object *root = render_goodput(&l);
                json_add_i64(root, "run", true, ri.id);
                json_object_object_add(root, "since_mark", mark);
                mark = NULL;
                series_render(root, &series, 1);
                respond_json(rq, 200, root);
        }
        json_object_put(mark);
        free(series.ms);
        hist_done(&steps);
        run_info_done(&ri);
}

/* ---- jobs --------------------------------------------------------------------- */

/* One rank's runs, one after the other over the span. */
struct slot {
        const char *rank;
        size_t first, n; /* members[first .. first + n), by registration */
        struct goodput_ledger l;
        struct hist steps;
};

static int member_by_rank_then_time(const void *a, const void *b) {
        const struct job_member *x = a, *y = b;
        int c = !x->rank != !y->rank ? (x->rank ? -1 : 1) : x->rank ? strcmp(x->rank, y->rank) : 0;
        if (c == 0 && !x->rank)
                c = (x->ri->id > y->ri->id) - (x->ri->id < y->ri->id);
        if (c == 0)
                c = (x->ri->registered_ts_ms > y->ri->registered_ts_ms) -
                    (x->ri->registered_ts_ms < y->ri->registered_ts_ms);
        return c;
}

static void ledger_add(struct goodput_ledger *sum, const struct goodput_ledger *l) {
        for (int k = 0; k < _GOODPUT_KIND_MAX; k++)
                sum->ms[k] += l->ms[k];
        sum->steps += l->steps;
        sum->has_split = sum->has_split || l->has_split;
        sum->has_startup = sum->has_startup || l->has_startup;
        if (l->has_energy) {
                sum->has_energy = true;
                sum->energy_j += l->energy_j;
        }
}

/* A rank's ledger: before its first run, startup (the job was starting);
 * between its runs, lost (a restart); after its last, other. */
static int slot_ledger(struct request *rq, struct job_member *m, struct slot *sl, const struct job_span *sp,
                       int64_t now_ms, const struct run_info *all, size_t nall, struct series *series) {
        int64_t from = sp->from, cursor;
        if (sp->mark) { /* each rank from its own mark */
                from = INT64_MAX;
                for (size_t i = sl->first; i < sl->first + sl->n; i++)
                        if (m[i].in_span && m[i].mark_ts < from)
                                from = m[i].mark_ts;
        }
        if (from > sp->until)
                from = sp->until;
        sl->l = (struct goodput_ledger){
                .from_ms = from, .until_ms = sp->until, .wall_ms = (double)(sp->until - from), .ideal_step_ms = NAN
        };
        cursor = from;
        for (size_t i = sl->first; i < sl->first + sl->n; i++) {
                const struct run_info *ri = m[i].ri;
                int64_t a = ri->registered_ts_ms > cursor ? ri->registered_ts_ms : cursor;
                int64_t b = run_end(ri, now_ms) < sp->until ? run_end(ri, now_ms) : sp->until;
                if (a > sp->until)
                        a = sp->until;
                enum goodput_kind before = i == sl->first ? GOODPUT_STARTUP : GOODPUT_LOST;
                sl->l.ms[before] += (double)(a - cursor);
                series_add(series, cursor, a, NULL, before);
                if (b <= a) {
                        cursor = a;
                        continue;
                }
                int64_t lost;
                struct goodput_ledger l;
                int r = lost_from_of(rq, ri, all, nall, &lost);
                if (r == 0)
                        r = run_ledger(rq, ri, a, b, lost, series, &sl->steps, &l);
                if (r < 0)
                        return r;
                ledger_add(&sl->l, &l);
                sl->l.step_op = l.step_op;
                cursor = b;
        }
        sl->l.ms[GOODPUT_OTHER] += (double)(sp->until - cursor);
        series_add(series, cursor, sp->until, NULL, GOODPUT_OTHER);
        sl->l.ideal_step_ms = goodput_ideal_step_ms(&sl->steps, NULL);
        return 0;
}

/* The mean of the ranks' ledgers, the ranks', and the series. */
static json_object *render_job_goodput(const char *job_id, const struct job_span *sp, struct slot *sl, size_t ns,
                                       const struct hist *all_steps, const struct series *series) {
        struct goodput_ledger job = { .from_ms = sp->from, .until_ms = sp->until, .ideal_step_ms = NAN };
        json_object *ranks = json_object_new_array_ext((int)ns);
        for (size_t i = 0; i < ns; i++) {
                ledger_add(&job, &sl[i].l);
                job.wall_ms += sl[i].l.wall_ms;
                job.step_op = job.step_op ? job.step_op : sl[i].l.step_op;
                sl[i].l.reason = sl[i].l.has_split ? NULL : "no timings of the step op from this rank";
                json_object *o = render_goodput(&sl[i].l);
                json_add_string(o, "rank", sl[i].rank);
                json_object_array_add(ranks, o);
        }
        double k = ns ? 1.0 / (double)ns : 0;
        for (int j = 0; j < _GOODPUT_KIND_MAX; j++)
                job.ms[j] *= k;
        job.wall_ms *= k;
        job.steps *= k;
        /* a job's step is every rank's: its energy per step is all of theirs */
        job.ideal_step_ms = goodput_ideal_step_ms(all_steps, NULL);
        job.reason = job.has_split ? NULL : "no timings of the step op from any rank in this span";
        json_object *root = render_goodput(&job);
        if (job.has_energy && job.steps >= 1)
                json_add_double(root, "energy_per_step_j", true, job.energy_j / job.steps);
        json_add_string(root, "job_id", job_id);
        json_add_string(root, "since_mark", sp->mark);
        json_add_u64(root, "ranks_n", true, ns);
        json_object_object_add(root, "ranks", ranks);
        series_render(root, series, k);
        return root;
}

static int job_goodput(struct request *rq, const char *job_id, unsigned attempt, struct job_member *m, size_t n,
                       struct job_span *sp, json_object **ret) {
        (void)attempt; /* every attempt: the time between them is lost */
        struct query_limits lim = limits(rq);
        int64_t now = now_realtime_ms();
        bool any = false;
        for (size_t i = 0; i < n; i++) {
                m[i].in_span = true;
                if (!sp->mark)
                        continue;
                int r = query_mark_ts(api_of(rq)->store, &lim, m[i].ri->id, sp->mark, &m[i].mark_ts);
                if (r < 0 && r != -ENOENT)
                        return r;
                m[i].in_span = r == 0;
                any = any || r == 0;
        }
        if (sp->mark && !any)
                return -ENOENT;
        sort_array(m, n, sizeof *m, member_by_rank_then_time);
        _cleanup_free_ struct slot *sl = calloc(n ? n : 1, sizeof *sl);
        struct run_info *all = calloc(n ? n : 1, sizeof *all);
        if (!sl || !all) {
                free(all);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                all[i] = *m[i].ri; /* borrowed: lost_from_of() only reads */
        size_t ns = 0;
        for (size_t i = 0; i < n; i++) {
                if ((sp->mark && !m[i].in_span) || !m[i].in_attempt) /* the launcher is no rank */
                        continue;
                if (ns == 0 || !m[i].rank || !sl[ns - 1].rank || !streq(sl[ns - 1].rank, m[i].rank))
                        sl[ns++] = (struct slot){ .rank = m[i].rank, .first = i };
                sl[ns - 1].n = i - sl[ns - 1].first + 1;
        }
        struct series series = {};
        struct hist steps;
        hist_init(&steps);
        int r = parse_series_step(rq, sp->from, sp->until, &series) ? 0 : -ECANCELED;
        for (size_t i = 0; r == 0 && i < ns; i++) {
                hist_init(&sl[i].steps);
                r = slot_ledger(rq, m, &sl[i], sp, now, all, n, series.n ? &series : NULL);
                if (r == 0)
                        r = hist_merge(&steps, &sl[i].steps);
        }
        if (r == 0)
                *ret = render_job_goodput(job_id, sp, sl, ns, &steps, &series);
        for (size_t i = 0; i < ns; i++)
                hist_done(&sl[i].steps);
        hist_done(&steps);
        free(series.ms);
        free(all);
        return r;
}

void h_job_goodput(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "since_mark", "step", NULL };
        if (check_args(rq, allowed))
                job_answer(rq, parts[2], false, job_goodput);
}

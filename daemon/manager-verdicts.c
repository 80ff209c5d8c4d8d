/* SPDX-License-Identifier: MIT */
/* A running run's goodput ledger and the verdicts beside the leak: fed by
 * the tick (the op slices it closes, the samples it takes) and by what the
 * application reports (its first step, its marks); the pure parts are in
 * analyze/goodput.c and analyze/verdict.c. Verdicts that change are stored
 * in the tick's transaction, and all of them when the run ends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "collect/accel/accel.h"
#include "collect/cgroup.h"
#include "manager.h"
#include "store/verdicts.h"

/* The typical step is worked out again this often: a merge and a sort of
 * a few hundred buckets, not worth doing every second. */
#define TYPICAL_EVERY_MS 10000
/* A cgroup's limit and usage are read again this often for a run whose
 * memory grows (a few small files up the path). */
#define LIMIT_EVERY_MS 10000

const char *manager_step_op(const struct manager *m, const struct run_info *ri) {
        return ri->step_op ? ri->step_op : m->config.goodput_step_op;
}

void manager_goodput_rules(const struct manager *m, const struct run_info *ri, struct goodput_rules *ret) {
        const struct config *c = &m->config;
        *ret = (struct goodput_rules){
                .step_op = manager_step_op(m, ri),
                .data_categories = c->goodput_data_categories,
                .data_ops = c->goodput_data_ops,
                .checkpoint_categories = c->goodput_checkpoint_categories,
                .eval_categories = c->goodput_eval_categories,
                .checkpoint_marks = c->goodput_checkpoint_marks,
                .eval_marks = c->goodput_eval_marks,
        };
}

void manager_goodput_params(const struct manager *m, struct goodput_params *ret) {
        *ret = (struct goodput_params){ .idle_k = m->config.goodput_idle_k,
                                        .parts_in_step = streq(m->config.goodput_parts_in_step, "yes") };
}

/* The ledger of a run from registration on (or from when mlmond started
 * again: what happened while it was down is not in memory). */
static int gp_start(struct manager *m, struct run *r) {
        if (r->v.gp)
                return 0;
        r->v.gp = malloc(sizeof *r->v.gp);
        if (!r->v.gp)
                return -ENOMEM;
        struct goodput_params p;
        manager_goodput_params(m, &p);
        int64_t from = r->v.gp_from_ms ? r->v.gp_from_ms : r->info.registered_ts_ms;
        int64_t su = !r->info.first_step_ts_ms ? INT64_MAX : r->info.first_step_ts_ms;
        goodput_stream_init(r->v.gp, &p, from, INT64_MAX, su, r->info.first_step_ms, INT64_MAX);
        return 0;
}

void manager_verdicts_observed(struct manager *m, struct run *r, enum op_kind kind, const char *op, size_t op_len,
                               double value) {
        if (kind != OP_TIMING || r->info.first_step_ts_ms)
                return;
        const char *step = manager_step_op(m, &r->info);
        if (strlen(step) != op_len || memcmp(step, op, op_len) != 0)
                return;
        r->info.first_step_ts_ms = now_realtime_ms();
        r->info.first_step_ms = value;
        r->v.first_step_dirty = true;
        if (r->v.gp)
                goodput_stream_first_step(r->v.gp, r->info.first_step_ts_ms, value);
}

void manager_verdicts_mark(struct manager *m, struct run *r, const char *label, int64_t ts_ms) {
        struct goodput_rules rules;
        manager_goodput_rules(m, &r->info, &rules);
        enum goodput_phase ph = goodput_mark_phase(&rules, label);
        if ((ph != GOODPUT_PHASE_NONE || r->v.gp) && gp_start(m, r) == 0)
                goodput_stream_phase(r->v.gp, ts_ms, ph);
}

/* ---- the input-bound window ------------------------------------------------- */

static size_t window_slots(const struct manager *m) {
        return (size_t)(m->config.input_bound_window_usec / USEC_PER_SEC) + 1;
}

/* Seconds up to (not including) until_ms enter the window: the one at
 * in->ts_ms with what its ops took, the others empty. */
static void window_push(struct manager *m, struct run *r, int64_t until_ms, const struct goodput_slice *in) {
        struct run_verdicts *v = &r->v;
        size_t cap = window_slots(m);
        if (v->win_cap != cap) { /* new, or the window changed at a reload */
                free(v->win);
                v->win = calloc(cap, sizeof *v->win);
                v->win_cap = v->win ? cap : 0;
                v->win_head = v->win_n = 0;
                if (!v->win)
                        return;
        }
        if (!v->win_next_ms || until_ms - v->win_next_ms > (int64_t)cap * OPS_SLICE_MS)
                v->win_next_ms = until_ms - (int64_t)cap * OPS_SLICE_MS; /* a gap longer than the window */
        for (; v->win_next_ms < until_ms; v->win_next_ms += OPS_SLICE_MS) {
                struct verdict_second *e;
                if (v->win_n == cap) {
                        e = &v->win[v->win_head];
                        v->win_head = (v->win_head + 1) % cap;
                } else
                        e = &v->win[(v->win_head + v->win_n++) % cap];
                *e = v->cum;
                v->cum.workers = v->workers; /* the next second starts from those there now */
                e->ts_ms = v->win_next_ms;
                e->data_ms = e->step_ms = e->steps = 0;
                if (in && in->ts_ms == v->win_next_ms) {
                        e->data_ms = in->data_ms;
                        e->step_ms = in->step_ms;
                        e->steps = in->steps;
                }
        }
}

/* The window's sums, and the verdict on them. */
static void input_bound_eval(struct manager *m, struct run *r, int64_t now_ms) {
        struct run_verdicts *v = &r->v;
        struct input_bound_params p;
        input_bound_params_default(&p);
        p.share_pct = m->config.input_bound_pct;
        p.window_s = (double)m->config.input_bound_window_usec / USEC_PER_SEC;
        /* the workers: the most the window saw (they leave when the loader
         * is done, the verdict stays about them) */
        struct input_bound_in in = { .step_op = manager_step_op(m, &r->info),
                                     .tree = r->info.children,
                                     .workers = v->workers };
        const struct verdict_second *first = NULL;
        int64_t since = ops_slice_of(now_ms) - (int64_t)(p.window_s * 1000);
        size_t n = 0;
        _cleanup_free_ double *sums = malloc(3 * (v->win_n ? v->win_n : 1) * sizeof *sums);
        if (!sums)
                return;
        double *data = sums, *step = sums + v->win_n, *steps = sums + 2 * v->win_n;
        for (size_t i = 0; i < v->win_n; i++) {
                const struct verdict_second *e = &v->win[(v->win_head + i) % v->win_cap];
                if (e->ts_ms < since)
                        continue;
                first = first ? first : e;
                in.workers = e->workers > in.workers ? e->workers : in.workers;
                data[n] = e->data_ms;
                step[n] = e->step_ms;
                steps[n++] = e->steps;
        }
        input_bound_sum(&p, data, step, steps, n, streq(m->config.goodput_parts_in_step, "yes"), &in);
        int64_t start = v->gp_from_ms ? v->gp_from_ms : r->info.registered_ts_ms;
        double covered = (double)(now_ms - (since > start ? since : start)) / 1000;
        in.covered_s = covered < 0 ? 0 : covered > p.window_s ? p.window_s : covered;
        if (first) {
                double child_ns = v->cum.child_ns - first->child_ns, gpu_ms = v->cum.gpu_ms - first->gpu_ms;
                in.has_workers_cpu = in.workers > 0 && child_ns > 0;
                if (in.has_workers_cpu)
                        in.workers_cpu_pct = 100 * (v->cum.child_cpu_ns - first->child_cpu_ns) / child_ns;
                in.has_gpu = gpu_ms > 0;
                if (in.has_gpu)
                        in.gpu_util_pct = (v->cum.gpu_util_ms - first->gpu_util_ms) / gpu_ms;
        }
        struct input_bound_verdict *old = &v->report.input_bound, nv;
        input_bound_evaluate(&p, &in, &nv);
        nv.evaluated_ms = now_ms;
        nv.since_ms = nv.flagged ? (old->flagged ? old->since_ms : now_ms) : 0;
        if (nv.flagged != old->flagged || !v->report.has_input_bound) {
                v->dirty = true;
                if (nv.flagged || old->flagged)
                        log_notice("run %lld (pid %d): %s", (long long)r->info.id, r->info.pid, nv.reason);
        }
        *old = nv;
        v->report.has_input_bound = true;
}

/* ---- the tick ---------------------------------------------------------------- */

/* The slices closed in the second at ts_ms, by what their ops are for (a
 * mark cuts a second's slice in two). */
static void slice_at(struct run *r, const struct goodput_rules *rules, int64_t ts_ms, struct goodput_slice *ret) {
        *ret = (struct goodput_slice){ .ts_ms = ts_ms };
        for (size_t j = 0; j < r->ops.n_done; j++) {
                const struct op_slice *x = &r->ops.done[j];
                if (ops_slice_of(x->ts) != ts_ms || x->h.count == 0)
                        continue;
                switch (goodput_classify(rules, x->op, x->category)) {
                case GOODPUT_STEP:
                        ret->step_ms += x->h.sum;
                        ret->steps += (double)x->h.count;
                        (void)hist_merge(&r->v.steps, &x->h);
                        break;
                case GOODPUT_DATA:
                        ret->data_ms += x->h.sum;
                        break;
                case GOODPUT_CHECKPOINT:
                        ret->checkpoint_ms += x->h.sum;
                        break;
                case GOODPUT_EVAL:
                        ret->eval_ms += x->h.sum;
                        break;
                default:
                        ret->other_ms += x->h.sum;
                        break;
                }
        }
}

void manager_verdicts_rotated(struct manager *m, struct run *r, int64_t now_ms) {
        struct run_verdicts *v = &r->v;
        int64_t open = ops_slice_of(now_ms);
        if (r->ops.n_done > 0 && gp_start(m, r) < 0)
                return;
        if (!v->gp) {
                if (!v->report.has_input_bound)
                        input_bound_eval(m, r, now_ms); /* says why there is no verdict */
                return;
        }
        struct goodput_rules rules;
        manager_goodput_rules(m, &r->info, &rules);
        /* the closed slices in time order (a tick closes one per op, or a
         * few after a late tick) */
        int64_t done_to = INT64_MIN;
        for (;;) {
                int64_t ts = INT64_MAX;
                for (size_t j = 0; j < r->ops.n_done; j++) {
                        int64_t s = ops_slice_of(r->ops.done[j].ts);
                        if (s > done_to && s < ts)
                                ts = s;
                }
                if (ts == INT64_MAX)
                        break;
                struct goodput_slice in;
                slice_at(r, &rules, ts, &in);
                goodput_stream_add(v->gp, &in);
                window_push(m, r, ts + OPS_SLICE_MS, &in);
                done_to = ts;
        }
        goodput_stream_advance(v->gp, open);
        window_push(m, r, open, NULL);
        if (v->steps.count > 0 && now_ms - v->typical_ms >= TYPICAL_EVERY_MS) {
                goodput_stream_set_typical(v->gp, goodput_ideal_step_ms(&v->steps, NULL));
                v->typical_ms = now_ms;
        }
        input_bound_eval(m, r, now_ms);
}

/* ---- the samples --------------------------------------------------------------- */

/* The children's CPU since the previous sample (members seen in both), and
 * the GPU's utilisation, into the running sums. */
static void sample_sums(struct run *r, const struct sample *s) {
        struct run_verdicts *v = &r->v;
        const struct probe *p = r->probe;
        double dt_ns = (double)s->interval_us * 1000;
        size_t n = p->n_members > 1 ? p->n_members - 1 : 0;
        double cpu = 0, matched = 0;
        for (size_t i = 1; i < p->n_members; i++) {
                const struct member *x = &p->members[i];
                for (size_t k = 0; k < v->n_prev; k++)
                        if (v->prev[k].pid == x->pid && v->prev[k].start_ticks == x->start_ticks) {
                                cpu += x->now.cpu_ns > v->prev[k].cpu_ns ? (double)(x->now.cpu_ns - v->prev[k].cpu_ns)
                                                                         : 0;
                                matched++;
                                break;
                        }
        }
        if (dt_ns > 0) {
                v->cum.child_cpu_ns += cpu;
                v->cum.child_ns += matched * dt_ns;
                if (s->has_gpu_util) {
                        v->cum.gpu_util_ms += s->gpu_util_pct * dt_ns / 1e6;
                        v->cum.gpu_ms += dt_ns / 1e6;
                }
        }
        v->workers = (unsigned)n;
        if (n > v->cum.workers) /* the most since the window's last second */
                v->cum.workers = (unsigned)n;
        if (!GREEDY_REALLOC(v->prev, n ? n : 1)) {
                v->n_prev = 0;
                return;
        }
        for (size_t i = 0; i < n; i++) {
                const struct member *x = &p->members[i + 1];
                v->prev[i].pid = x->pid;
                v->prev[i].start_ticks = x->start_ticks;
                v->prev[i].cpu_ns = x->now.cpu_ns;
        }
        v->n_prev = n;
}

static void gpu_idle_sample(struct manager *m, struct run *r, const struct sample *s) {
        const struct accel_run *a = &r->probe->accel;
        struct gpu_idle_use uses[GPU_IDLE_DEVICES];
        size_t n = 0;
        for (size_t i = 0; i < a->n_uses && n < GPU_IDLE_DEVICES; i++)
                uses[n++] = (struct gpu_idle_use){ a->uses[i].device, a->uses[i].has_mem, a->uses[i].mem_bytes,
                                                   a->uses[i].has_util, a->uses[i].util_pct };
        struct gpu_idle_params p = { .min_mem_bytes = m->config.gpu_idle_mem_bytes,
                                     .max_util_pct = m->config.gpu_idle_util_pct,
                                     .for_s = (double)m->config.gpu_idle_for_usec / USEC_PER_SEC };
        struct verdict_report *rep = &r->v.report;
        if (rep->gpu_idle.lingering)
                return;
        bool changed = gpu_idle_step(&r->v.gpu_watch, &p, s->ts_ms, s->has_gpu_mem, uses, n, &rep->gpu_idle);
        if (changed || !rep->has_gpu_idle) {
                r->v.dirty = true;
                if (changed)
                        log_notice("run %lld (pid %d): %s", (long long)r->info.id, r->info.pid, rep->gpu_idle.reason);
        }
        rep->has_gpu_idle = true;
}

/* What stops the run's memory: its cgroup's limit, else the host's
 * available memory. */
static void read_limit(struct manager *m, struct run *r, struct oom_limit *ret) {
        struct cgroup_memory cm;
        *ret = (struct oom_limit){ .source = OOM_NONE };
        if (r->probe->dirfd >= 0 && cgroup_memory_of(r->probe->dirfd, m->config.sys_root, &cm) == 0 &&
            cm.version != CGROUP_NONE) {
                ret->source = cm.version == CGROUP_V2 ? OOM_MEMORY_MAX : OOM_LIMIT_IN_BYTES;
                ret->limit_bytes = cm.limit_bytes;
                ret->has_usage = cm.has_usage;
                ret->usage_bytes = cm.usage_bytes;
                ret->has_high = cm.has_high;
                ret->high_bytes = cm.high_bytes;
                snprintf(ret->where, sizeof ret->where, "%.255s", cm.path);
        } else if (m->host.has_mem && m->host.mem.has_available) {
                ret->source = OOM_MEM_AVAILABLE;
                ret->limit_bytes = m->host.mem.available_bytes;
        }
}

/* The free memory of the device the run holds most on. */
static void device_limit(struct manager *m, struct run *r, struct oom_limit *ret) {
        const struct accel_run *a = &r->probe->accel;
        *ret = (struct oom_limit){ .source = OOM_NONE };
        const struct gpu_use *most = NULL;
        for (size_t i = 0; i < a->n_uses; i++)
                if (a->uses[i].has_mem && (!most || a->uses[i].mem_bytes > most->mem_bytes))
                        most = &a->uses[i];
        size_t n = 0;
        const struct gpu_device *d = accel_devices(m->accel, &n);
        for (size_t i = 0; most && i < n; i++)
                if (streq(d[i].id, most->device) && d[i].has_mem_total && d[i].has_mem_used) {
                        ret->source = OOM_DEVICE;
                        ret->limit_bytes = d[i].mem_total_bytes > d[i].mem_used_bytes
                                                   ? d[i].mem_total_bytes - d[i].mem_used_bytes
                                                   : 0;
                        snprintf(ret->where, sizeof ret->where, "%s", d[i].id);
                }
}

static void oom_sample(struct manager *m, struct run *r, int metric, const struct leakwatch *w, int64_t ts_ms) {
        struct verdict_report *rep = &r->v.report;
        bool judged = w->pts && w->evaluated_ms != 0 && w->v.evaluated;
        double slope_lo = judged ? w->v.slope_lo_bytes_per_s : 0;
        /* no growth to forecast from, and the leak verdict that says why is
         * the one the forecast was made from: it would say the same */
        if (!(slope_lo > 0) && rep->has_oom[metric] && r->v.oom_leak_ms[metric] == w->evaluated_ms) {
                rep->oom_evaluated_ms[metric] = ts_ms;
                return;
        }
        r->v.oom_leak_ms[metric] = w->evaluated_ms;
        struct oom_limit lim = { .source = OOM_NONE };
        if (slope_lo > 0 && metric == OOM_RSS) {
                if (!r->v.limit_read_ms || ts_ms - r->v.limit_read_ms >= LIMIT_EVERY_MS) {
                        read_limit(m, r, &r->v.limit);
                        r->v.limit_read_ms = ts_ms;
                }
                lim = r->v.limit;
        } else if (slope_lo > 0)
                device_limit(m, r, &lim);
        bool was = rep->has_oom[metric] && rep->oom[metric].known;
        oom_forecast_make(&lim, slope_lo, w->pts ? w->v.reason : NULL, &rep->oom[metric]);
        rep->oom_evaluated_ms[metric] = ts_ms;
        if (was != rep->oom[metric].known || !rep->has_oom[metric]) {
                r->v.dirty = true;
                if (rep->oom[metric].known)
                        log_notice("run %lld (pid %d): %s: %s", (long long)r->info.id, r->info.pid,
                                   oom_metric_name(metric), rep->oom[metric].reason);
        }
        rep->has_oom[metric] = true;
}

void manager_verdicts_sample(struct manager *m, struct run *r, const struct sample *s) {
        sample_sums(r, s);
        gpu_idle_sample(m, r, s);
        oom_sample(m, r, OOM_RSS, &r->leak, s->ts_ms);
        if (r->leak_gpu.pts)
                oom_sample(m, r, OOM_GPU, &r->leak_gpu, s->ts_ms);
}

/* ---- storing, the end --------------------------------------------------------- */

void manager_verdicts_store(struct manager *m, struct run *r) {
        if (r->v.first_step_dirty &&
            store_update_run_first_step(m->store, r->info.id, r->info.first_step_ts_ms, r->info.first_step_ms) == 0)
                r->v.first_step_dirty = false;
        if (r->v.dirty && store_update_run_verdicts(m->store, r->info.id, &r->v.report) == 0)
                r->v.dirty = false;
}

void manager_verdicts_end(struct manager *m, struct run *r, bool exited, int64_t now_ms) {
        struct verdict_report *rep = &r->v.report;
        const struct sample *last = r->probe->has_last ? &r->probe->last : NULL;
        struct probe_linger l;
        if (exited && last && last->has_gpu_mem && last->gpu_mem_bytes > 0 &&
            probe_lingering_gpu(&m->collect, r->probe, &l) == 1) {
                gpu_idle_lingering(&rep->gpu_idle, r->info.pid, l.pid, l.state, l.device, l.mem_bytes);
                rep->gpu_idle.evaluated_ms = now_ms;
                rep->has_gpu_idle = true;
                log_notice("run %lld (pid %d): %s", (long long)r->info.id, r->info.pid, rep->gpu_idle.reason);
        }
        /* an ended run has no time left: the last forecast is said, not kept as
         * one; where there was none, the leak watch's last word says why */
        for (int k = 0; k < _OOM_METRIC_MAX; k++)
                if (rep->has_oom[k] && rep->oom[k].known) {
                        char was[VERDICT_REASON_MAX - 64];
                        snprintf(was, sizeof was, "%s", rep->oom[k].reason);
                        rep->oom[k].known = false;
                        snprintf(rep->oom[k].reason, sizeof rep->oom[k].reason, "the run ended; the last forecast: %s",
                                 was);
                } else if (rep->has_oom[k]) {
                        const struct leakwatch *w = k == OOM_RSS ? &r->leak : &r->leak_gpu;
                        struct oom_limit lim = rep->oom[k].limit;
                        if (w->pts)
                                oom_forecast_make(&lim, 0, w->v.reason, &rep->oom[k]);
                }
        r->v.dirty = true;
        manager_verdicts_store(m, r);
}

void manager_verdicts_restored(struct run *r, int64_t now_ms) {
        r->v.gp_from_ms = now_ms;
}

void manager_verdicts_live(const struct run *r, struct run_live *ret) {
        ret->has_verdicts = true;
        ret->verdicts = r->v.report;
        if (!r->v.gp)
                return;
        ret->has_goodput = true;
        memcpy(ret->goodput_ms, r->v.gp->total_ms, sizeof ret->goodput_ms);
        ret->goodput_steps = r->v.gp->steps;
        ret->step_timings = r->v.steps.count;
        ret->goodput_since_registration = r->v.gp_from_ms == 0;
}

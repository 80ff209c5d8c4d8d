/* SPDX-License-Identifier: MIT */
#include "analyze/verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "util.h"

#define MIB 1048576.0

void verdict_fmt_duration(char *buf, size_t size, double s) {
        if (!(s >= 0) || !isfinite(s))
                snprintf(buf, size, "?");
        else if (s < 10)
                snprintf(buf, size, "%.1f s", s);
        else if (s < 60)
                snprintf(buf, size, "%.0f s", s);
        else if (s < 3600) {
                long m = (long)(s / 60), r = (long)(s - 60.0 * (double)m);
                if (r > 0 && m < 10)
                        snprintf(buf, size, "%ld min %ld s", m, r);
                else
                        snprintf(buf, size, "%ld min", (long)lround(s / 60));
        } else if (s < 86400) {
                long h = (long)(s / 3600), m = (long)((s - 3600.0 * (double)h) / 60);
                snprintf(buf, size, m > 0 ? "%ld h %ld min" : "%ld h", h, m);
        } else
                snprintf(buf, size, "%.1f days", s / 86400);
}

void verdict_fmt_bytes(char *buf, size_t size, double b) {
        format_bytes(buf, size, b, "", 0);
}

/* ---- input-bound ---------------------------------------------------------- */

void input_bound_params_default(struct input_bound_params *p) {
        *p = (struct input_bound_params){
                /* a fifth of each step waiting: enough to be worth a look
                 * (more workers, pinned memory, prefetch), well above the
                 * few percent that handing a ready batch over costs */
                .share_pct = 20,
                .window_s = 60,
                /* ten steps: a share of fewer says little */
                .min_steps = 10,
                .min_busy = 0.1,
                /* a few seconds of a job say little about a minute of it: one
                 * slow batch is then half of what there is */
                .min_coverage = 0.5,
                /* a worker process at 80% of a core or more is busy all
                 * the time it is not handing over a batch */
                .saturated_pct = 80,
                /* at 30% or less it mostly waits itself */
                .idle_worker_pct = 30,
        };
}

/* What the loader workers and the GPU say, appended to the sentence. */
static void workers_clause(const struct input_bound_params *p, const struct input_bound_in *in, bool flagged, char *buf,
                           size_t size) {
        char gpu[64] = "";
        if (in->has_gpu)
                snprintf(gpu, sizeof gpu, "; the GPU was %.0f%% busy meanwhile", in->gpu_util_pct);
        if (!in->tree)
                snprintf(buf, size,
                         "%s (its loader workers are not known: the run does not count its children; register it "
                         "with --children)",
                         gpu);
        else if (in->workers == 0)
                snprintf(buf, size, "; it has no loader workers: the data is loaded in the training process itself%s%s",
                         flagged ? " (DataLoader num_workers=0?): add workers" : "", gpu);
        else if (!in->has_workers_cpu)
                snprintf(buf, size, "; its %u loader workers' CPU is not known%s", in->workers, gpu);
        else if (in->workers_cpu_pct >= p->saturated_pct)
                snprintf(buf, size, "; its %u loader worker%s used %.0f%% of a core each: saturated%s%s", in->workers,
                         in->workers == 1 ? "" : "s", in->workers_cpu_pct,
                         flagged ? ", add workers (DataLoader num_workers) or make loading cheaper" : "", gpu);
        else if (in->workers_cpu_pct <= p->idle_worker_pct)
                snprintf(buf, size, "; its %u loader worker%s used %.0f%% of a core each: they wait too%s%s",
                         in->workers, in->workers == 1 ? "" : "s", in->workers_cpu_pct,
                         flagged ? ", for I/O or a slow source (storage, network, a lock)" : "", gpu);
        else
                snprintf(buf, size, "; its %u loader worker%s used %.0f%% of a core each%s", in->workers,
                         in->workers == 1 ? "" : "s", in->workers_cpu_pct, gpu);
}

void input_bound_sum(const struct input_bound_params *p, const double *data_ms, const double *step_ms,
                     const double *steps, size_t n, bool parts_in_step, struct input_bound_in *in) {
        in->data_ms = in->step_ms = in->steps = 0;
        in->parts = in->parts_over = 0;
        size_t nparts = n < INPUT_BOUND_PARTS ? n : INPUT_BOUND_PARTS;
        for (size_t k = 0; k < nparts; k++) {
                double d = 0, s = 0;
                for (size_t i = k * n / nparts; i < (k + 1) * n / nparts; i++) {
                        d += data_ms[i];
                        s += parts_in_step ? (step_ms[i] > data_ms[i] ? step_ms[i] - data_ms[i] : 0) : step_ms[i];
                        in->steps += steps[i];
                }
                in->data_ms += d;
                in->step_ms += s;
                if (d + s > 0) {
                        in->parts++;
                        in->parts_over += 100 * d >= p->share_pct * (d + s);
                }
        }
}

void input_bound_evaluate(const struct input_bound_params *p, const struct input_bound_in *in,
                          struct input_bound_verdict *ret) {
        char win[32], a[32], b[32];
        *ret = (struct input_bound_verdict){
                .window_s = p->window_s,
                .workers = in->workers,
                .has_workers_cpu = in->has_workers_cpu,
                .workers_cpu_pct = in->workers_cpu_pct,
                .has_gpu = in->has_gpu,
                .gpu_util_pct = in->gpu_util_pct,
        };
        verdict_fmt_duration(win, sizeof win, p->window_s);
        const char *op = in->step_op ? in->step_op : "step";
        double busy_ms = in->data_ms + in->step_ms;
        if (in->steps <= 0) {
                snprintf(ret->reason, sizeof ret->reason,
                         "not judged: no timings of the step op '%.64s' in the last %s", op, win);
                return;
        }
        if (in->data_ms <= 0) {
                snprintf(ret->reason, sizeof ret->reason,
                         "not judged: no data wait timed in the last %s (time the wait for the next batch as an op "
                         "of category data, or named data_wait)",
                         win);
                return;
        }
        if (in->covered_s < p->min_coverage * p->window_s) {
                verdict_fmt_duration(a, sizeof a, in->covered_s);
                snprintf(ret->reason, sizeof ret->reason,
                         "not judged yet: %s of the %s window so far, half of it is needed", a, win);
                return;
        }
        if (in->steps < p->min_steps) {
                snprintf(ret->reason, sizeof ret->reason,
                         "not judged: %.0f steps in the last %s, at least %.0f are needed", in->steps, win,
                         p->min_steps);
                return;
        }
        if (busy_ms < p->min_busy * in->covered_s * 1000) {
                verdict_fmt_duration(a, sizeof a, busy_ms / 1000);
                snprintf(ret->reason, sizeof ret->reason,
                         "not judged: steps and data wait took %s of the last %s, less than %.0f%% of it", a, win,
                         p->min_busy * 100);
                return;
        }
        ret->evaluated = true;
        ret->data_wait_s = in->data_ms / 1000;
        ret->step_s = in->step_ms / 1000;
        ret->share_pct = 100 * in->data_ms / busy_ms;
        bool steady = 3 * in->parts_over >= 2 * in->parts;
        ret->flagged = ret->share_pct >= p->share_pct && steady;
        char clause[224];
        workers_clause(p, in, ret->flagged, clause, sizeof clause);
        verdict_fmt_duration(a, sizeof a, ret->data_wait_s);
        verdict_fmt_duration(b, sizeof b, busy_ms / 1000);
        if (ret->flagged)
                snprintf(ret->reason, sizeof ret->reason,
                         "input-bound: waiting for data took %.0f%% of the step time over the last %s (%s of %s)%s",
                         ret->share_pct, win, a, b, clause);
        else if (ret->share_pct >= p->share_pct)
                snprintf(ret->reason, sizeof ret->reason,
                         "not input-bound: waiting for data took %.0f%% of the step time over the last %s (%s of %s), "
                         "but %u of its %u parts with steps were below %.0f%%: a stall, not a steady wait%s",
                         ret->share_pct, win, a, b, in->parts - in->parts_over, in->parts, p->share_pct, clause);
        else
                snprintf(ret->reason, sizeof ret->reason,
                         "not input-bound: waiting for data took %.1f%% of the step time over the last %s (%s of %s), "
                         "below %.0f%%%s",
                         ret->share_pct, win, a, b, p->share_pct, clause);
}

/* ---- GPU held but idle ---------------------------------------------------- */

void gpu_idle_params_default(struct gpu_idle_params *p) {
        *p = (struct gpu_idle_params){
                /* a CUDA context alone holds a few hundred MiB: below 1 GiB
                 * a process holds a context, not a model */
                .min_mem_bytes = 1024 * MIB,
                /* a job that computes at all keeps its GPU above 5% */
                .max_util_pct = 5,
                /* longer than a checkpoint save, an evaluation on the CPU
                 * or a data stall: a GPU idle for 10 min is held, not used */
                .for_s = 600,
        };
}

static size_t idle_slot(struct gpu_idle_watch *w, const char *device) {
        for (size_t i = 0; i < w->n; i++)
                if (streq(w->dev[i].device, device))
                        return i;
        if (w->n == GPU_IDLE_DEVICES)
                return SIZE_MAX;
        snprintf(w->dev[w->n].device, GPU_IDLE_ID_MAX, "%s", device);
        w->dev[w->n].since_ms = 0;
        return w->n++;
}

bool gpu_idle_step(struct gpu_idle_watch *w, const struct gpu_idle_params *p, int64_t ts_ms, bool has_gpu,
                   const struct gpu_idle_use *uses, size_t n, struct gpu_idle_verdict *ret) {
        char mem[32], dur[32], need[32], forx[32];
        bool was = w->flagged;
        *ret = (struct gpu_idle_verdict){ .evaluated_ms = ts_ms };
        bool seen[GPU_IDLE_DEVICES] = { false };
        /* the device that decides: flagged first, then the longest idle
         * stretch, then the most memory */
        const struct gpu_idle_use *best = NULL;
        size_t best_slot = SIZE_MAX;
        bool unknown_util = false;
        for (size_t i = 0; i < n; i++) {
                const struct gpu_idle_use *u = &uses[i];
                if (!u->device || !u->has_mem || (double)u->mem_bytes < p->min_mem_bytes)
                        continue;
                size_t k = idle_slot(w, u->device);
                if (k == SIZE_MAX)
                        continue;
                seen[k] = true;
                if (!u->has_util) {
                        unknown_util = true;
                        w->dev[k].since_ms = 0;
                        continue;
                }
                if (u->util_pct < p->max_util_pct) {
                        if (w->dev[k].since_ms == 0) {
                                w->dev[k].since_ms = ts_ms;
                                w->dev[k].util_sum = 0;
                                w->dev[k].n = 0;
                        }
                        w->dev[k].util_sum += u->util_pct;
                        w->dev[k].n++;
                } else
                        w->dev[k].since_ms = 0;
                bool better = !best;
                if (best) {
                        int64_t s0 = w->dev[best_slot].since_ms, s1 = w->dev[k].since_ms;
                        better = (s1 && (!s0 || s1 < s0)) || (s1 == s0 && u->mem_bytes > best->mem_bytes);
                }
                if (better) {
                        best = u;
                        best_slot = k;
                }
        }
        for (size_t k = 0; k < w->n; k++)
                if (!seen[k])
                        w->dev[k].since_ms = 0;
        if (!best) {
                w->flagged = false;
                if (!has_gpu) { /* most runs: no figure to format, and this runs every sample */
                        snprintf(ret->reason, sizeof ret->reason,
                                 "not judged: the run's GPU memory is not known (no GPU, or NVML off)");
                        return was != w->flagged;
                }
                verdict_fmt_bytes(need, sizeof need, p->min_mem_bytes);
                if (unknown_util)
                        snprintf(ret->reason, sizeof ret->reason,
                                 "not judged: the run holds %s or more of GPU memory, but the GPU's utilisation is not "
                                 "known",
                                 need);
                else {
                        ret->evaluated = true;
                        snprintf(ret->reason, sizeof ret->reason, "holds less than %s of GPU memory on any device",
                                 need);
                }
                return was != w->flagged;
        }
        ret->evaluated = true;
        snprintf(ret->device, sizeof ret->device, "%s", best->device);
        ret->has_mem = ret->has_util = true;
        ret->mem_bytes = best->mem_bytes;
        verdict_fmt_bytes(mem, sizeof mem, (double)best->mem_bytes);
        int64_t since = w->dev[best_slot].since_ms;
        if (!since) {
                ret->util_pct = best->util_pct;
                w->flagged = false;
                snprintf(ret->reason, sizeof ret->reason, "holds %s on GPU %s, %.1f%% busy", mem, best->device,
                         best->util_pct);
                return was != w->flagged;
        }
        ret->since_ms = since;
        ret->idle_s = (double)(ts_ms - since) / 1000;
        ret->util_pct = w->dev[best_slot].util_sum / (double)w->dev[best_slot].n;
        w->flagged = ret->idle_s >= p->for_s;
        ret->flagged = w->flagged;
        verdict_fmt_duration(dur, sizeof dur, ret->idle_s);
        if (ret->flagged)
                snprintf(ret->reason, sizeof ret->reason, "GPU held but idle: holds %s on GPU %s, %.1f%% busy for %s",
                         mem, best->device, ret->util_pct, dur);
        else {
                verdict_fmt_duration(forx, sizeof forx, p->for_s);
                snprintf(ret->reason, sizeof ret->reason,
                         "holds %s on GPU %s, %.1f%% busy for %s (idle once that lasts %s)", mem, best->device,
                         ret->util_pct, dur, forx);
        }
        return was != w->flagged;
}

void gpu_idle_lingering(struct gpu_idle_verdict *v, int main_pid, int pid, char state, const char *device,
                        uint64_t mem_bytes) {
        char mem[32];
        static const struct {
                char c;
                const char *name;
        } states[] = { { 'R', "running" }, { 'S', "sleeping" }, { 'D', "disk-sleep" }, { 'Z', "zombie" },
                       { 'T', "stopped" }, { 't', "stopped" },  { 'I', "idle" } };
        const char *st = "alive";
        for (size_t i = 0; i < ELEMENTSOF(states); i++)
                if (states[i].c == state)
                        st = states[i].name;
        verdict_fmt_bytes(mem, sizeof mem, (double)mem_bytes);
        v->flagged = v->evaluated = v->lingering = true;
        v->has_mem = true;
        v->mem_bytes = mem_bytes;
        v->lingering_pid = pid;
        v->lingering_state = state;
        snprintf(v->device, sizeof v->device, "%s", device);
        if (pid == main_pid)
                snprintf(v->reason, sizeof v->reason,
                         "GPU memory held after exit: the main process (pid %d) is a %s and still holds %s on GPU %s",
                         pid, st, mem, device);
        else
                snprintf(v->reason, sizeof v->reason,
                         "GPU memory held after exit: the main process (pid %d) exited, but pid %d (%s) of its tree "
                         "still holds %s on GPU %s",
                         main_pid, pid, st, mem, device);
}

/* ---- time to OOM ------------------------------------------------------------ */

static const char *const oom_names[_OOM_SOURCE_MAX] = {
        [OOM_NONE] = NULL,
        [OOM_MEMORY_MAX] = "memory.max",
        [OOM_LIMIT_IN_BYTES] = "memory.limit_in_bytes",
        [OOM_MEM_AVAILABLE] = "MemAvailable",
        [OOM_DEVICE] = "device",
};

const char *oom_metric_name(int metric) {
        return metric == OOM_RSS ? "rss_anon_bytes" : metric == OOM_GPU ? "gpu_mem_bytes" : NULL;
}

const char *oom_source_name(enum oom_source s) {
        return s >= 0 && s < _OOM_SOURCE_MAX ? oom_names[s] : NULL;
}

void oom_forecast_make(const struct oom_limit *l, double slope_lo, const char *why_not, struct oom_forecast *ret) {
        char rate[32], lim[32], used[32], eta[32];
        *ret = (struct oom_forecast){ .limit = *l };
        if (!(slope_lo > 0) || !isfinite(slope_lo)) {
                snprintf(ret->reason, sizeof ret->reason, "no forecast: no steady growth (%.200s)",
                         why_not && *why_not ? why_not : "not judged yet");
                return;
        }
        ret->slope_lo_bytes_per_s = slope_lo;
        verdict_fmt_bytes(rate, sizeof rate, slope_lo);
        if (l->source == OOM_NONE) {
                snprintf(ret->reason, sizeof ret->reason,
                         "no forecast: grows at %s/s or more, but no limit could be read", rate);
                return;
        }
        double room = (double)l->limit_bytes;
        if (l->has_usage)
                room = l->usage_bytes < l->limit_bytes ? (double)(l->limit_bytes - l->usage_bytes) : 0;
        ret->known = true;
        ret->eta_s = room / slope_lo;
        verdict_fmt_bytes(lim, sizeof lim, (double)l->limit_bytes);
        verdict_fmt_duration(eta, sizeof eta, ret->eta_s);
        char high[160] = "";
        if (l->has_high && l->has_usage && l->high_bytes < l->limit_bytes) {
                char hb[32], he[32];
                double hroom = l->usage_bytes < l->high_bytes ? (double)(l->high_bytes - l->usage_bytes) : 0;
                ret->has_high_eta = true;
                ret->high_eta_s = hroom / slope_lo;
                verdict_fmt_bytes(hb, sizeof hb, (double)l->high_bytes);
                verdict_fmt_duration(he, sizeof he, ret->high_eta_s);
                snprintf(high, sizeof high, "; memory.high = %s throttles it from ~%s on", hb, he);
        }
        switch (l->source) {
        case OOM_MEMORY_MAX:
        case OOM_LIMIT_IN_BYTES:
                verdict_fmt_bytes(used, sizeof used, (double)l->usage_bytes);
                snprintf(ret->reason, sizeof ret->reason,
                         "at %s/s (at least) it reaches %s = %s of cgroup %.100s (%s used now) in ~%s%s", rate,
                         oom_source_name(l->source), lim, l->where, used, eta, high);
                break;
        case OOM_MEM_AVAILABLE:
                snprintf(ret->reason, sizeof ret->reason,
                         "at %s/s (at least) it fills the host's available memory (%s, no cgroup limit) in ~%s", rate,
                         lim, eta);
                break;
        default:
                snprintf(ret->reason, sizeof ret->reason, "at %s/s (at least) it fills GPU %.64s (%s free) in ~%s",
                         rate, l->where, lim, eta);
                break;
        }
}

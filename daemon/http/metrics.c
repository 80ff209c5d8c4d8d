/* SPDX-License-Identifier: MIT */
#include "http/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/procfs.h"
#include "config.h"
#include "http/metrics-host.h"
#include "http/tag-labels.h"
#include "json-util.h"
#include "manager-ops.h"
#include "store/querier.h"

#define NS_PER_SEC 1e9

/* The summaries' quantiles are over the last minute of slices plus the
 * open one: the default window of GET /v1/runs/ID/latency, so the two
 * agree, and long enough to hold a few hundred timings of a slow op. Their
 * _sum and _count are totals since registration (counters). */
#define QUANTILE_WINDOW_MS 60000
/* A text answer is written in pieces of about this size (a protobuf one a
 * family at a time: a family is one message). */
#define PIECE_BYTES (256 * 1024)
/* How long a scrape that left series out keeps /v1/health degraded. */
#define LIMITED_HEALTH_USEC (5 * USEC_PER_MINUTE)

const char *const metrics_left_out_reasons[_LEFT_OUT_MAX] = {
        [LEFT_OUT_TAGS] = "tags",
        [LEFT_OUT_OPS] = "ops",
        [LEFT_OUT_GAUGES] = "gauges",
        [LEFT_OUT_UID] = "series_per_uid",
};

struct metrics {
        struct metrics_op_ledger **ledgers; /* one per running run, by run id */
        size_t n;
        uint64_t left_out[_LEFT_OUT_MAX]; /* series, since mlmond started */
        usec_t limited_mono;              /* when a scrape last left some out */
};

int metrics_new(struct metrics **ret) {
        struct metrics *x = calloc(1, sizeof *x);
        if (!x)
                return -ENOMEM;
        *ret = x;
        return 0;
}

void metrics_free(struct metrics *x) {
        if (!x)
                return;
        for (size_t i = 0; i < x->n; i++)
                metrics_ledger_unref(x->ledgers[i]);
        free(x->ledgers);
        free(x);
}

bool metrics_recently_limited(const struct metrics *x) {
        return x->limited_mono && now_usec(CLOCK_MONOTONIC) - x->limited_mono < LIMITED_HEALTH_USEC;
}

/* ---- one run ---------------------------------------------------------------- */

/* The per-run gauges and counters, in the order they are written. */
enum run_metric {
        RM_REGISTERED,
        RM_CPU,
        RM_CPU_USER,
        RM_CPU_SYSTEM,
        RM_RSS,
        RM_RSS_ANON,
        RM_RSS_PEAK,
        RM_PSS,
        RM_USS,
        RM_THREADS,
        RM_PROCESSES,
        RM_READ,
        RM_WRITE,
        RM_NET_RX,
        RM_NET_TX,
        RM_GPU_MEM,
        RM_GPU_UTIL,
        RM_ENERGY,
        RM_LEAK,
        RM_LEAK_GPU,
        RM_INPUT_BOUND,
        RM_GPU_IDLE,
        RM_GOODPUT_STEPS,
        RM_ENERGY_PER_STEP,
        _RM_MAX,
};

static const struct metric_family run_families[_RM_MAX] = {
        [RM_REGISTERED] = { "mlmond_run_registered_time_seconds", METRIC_GAUGE,
                            "Unix time the run was registered (its counters count from then).", NULL },
        [RM_CPU] = { "mlmond_run_cpu_seconds_total", METRIC_COUNTER,
                     "CPU time of the run's processes since registration (schedstat, exact).", NULL },
        [RM_CPU_USER] = { "mlmond_run_cpu_user_seconds_total", METRIC_COUNTER,
                          "User-mode CPU time since registration (stat, clock-tick resolution).", NULL },
        [RM_CPU_SYSTEM] = { "mlmond_run_cpu_system_seconds_total", METRIC_COUNTER,
                            "Kernel-mode CPU time since registration (stat, clock-tick resolution).", NULL },
        [RM_RSS] = { "mlmond_run_resident_memory_bytes", METRIC_GAUGE, "Resident memory (RSS) of the run's processes.",
                     NULL },
        [RM_RSS_ANON] = { "mlmond_run_resident_memory_anon_bytes", METRIC_GAUGE,
                          "Anonymous resident memory (RssAnon) of the run's processes.", NULL },
        [RM_RSS_PEAK] = { "mlmond_run_resident_memory_peak_bytes", METRIC_GAUGE,
                          "Highest resident memory seen since registration (samples and VmHWM).", NULL },
        [RM_PSS] = { "mlmond_run_pss_bytes", METRIC_GAUGE,
                     "Proportional set size of a tree run (smaps_rollup: each shared page counted once over the "
                     "tree), as last read.",
                     NULL },
        [RM_USS] = { "mlmond_run_uss_bytes", METRIC_GAUGE,
                     "Unique set size of a tree run (memory no process outside each member maps), as last read.",
                     NULL },
        [RM_THREADS] = { "mlmond_run_threads", METRIC_GAUGE, "Threads of the run's processes.", NULL },
        [RM_PROCESSES] = { "mlmond_run_processes", METRIC_GAUGE, "Processes in the run (more than 1 with children).",
                           NULL },
        [RM_READ] = { "mlmond_run_read_bytes_total", METRIC_COUNTER,
                      "Bytes read from storage since registration (/proc/PID/io read_bytes).", NULL },
        [RM_WRITE] = { "mlmond_run_write_bytes_total", METRIC_COUNTER,
                       "Bytes written to storage since registration (/proc/PID/io write_bytes).", NULL },
        [RM_NET_RX] = { "mlmond_run_netns_receive_bytes_total", METRIC_COUNTER,
                        "Bytes received by the run's network namespace since registration (loopback excluded).", NULL },
        [RM_NET_TX] = { "mlmond_run_netns_transmit_bytes_total", METRIC_COUNTER,
                        "Bytes sent by the run's network namespace since registration (loopback excluded).", NULL },
        [RM_GPU_MEM] = { "mlmond_run_gpu_memory_bytes", METRIC_GAUGE, "GPU/NPU memory held by the run's processes.",
                         NULL },
        [RM_GPU_UTIL] = { "mlmond_run_gpu_utilization_ratio", METRIC_GAUGE,
                          "GPU/NPU busy share of the run over its last interval (1 = one device fully busy).", NULL },
        [RM_ENERGY] = { "mlmond_run_energy_joules_total", METRIC_COUNTER,
                        "Estimated energy used since registration: the run's share of the CPU package and of "
                        "each device it uses.",
                        NULL },
        [RM_LEAK] = { "mlmond_run_leak_suspected", METRIC_GAUGE,
                      "1 while the leak watch suspects steady growth of anonymous memory, else 0.", NULL },
        [RM_LEAK_GPU] = { "mlmond_run_gpu_memory_leak_suspected", METRIC_GAUGE,
                          "1 while the leak watch suspects steady growth of GPU memory, else 0 (runs with GPU memory).",
                          NULL },
        [RM_INPUT_BOUND] = { "mlmond_run_input_bound", METRIC_GAUGE,
                             "1 while waiting for data takes at least [verdicts] input_bound_pct of the step time, "
                             "else 0 (runs that time their steps and their data wait).",
                             NULL },
        [RM_GPU_IDLE] = { "mlmond_run_gpu_idle", METRIC_GAUGE,
                          "1 while the run holds GPU memory on a device it leaves idle, else 0 (runs whose GPU memory "
                          "and utilisation are known).",
                          NULL },
        [RM_GOODPUT_STEPS] = { "mlmond_run_goodput_steps_total", METRIC_COUNTER,
                               "Steps the goodput ledger counts as productive (the step op's timings after the "
                               "first), final 2 minutes after the fact.",
                               NULL },
        [RM_ENERGY_PER_STEP] = { "mlmond_run_energy_per_step_joules", METRIC_GAUGE,
                                 "Estimated energy since registration divided by the step op's timings since then.",
                                 NULL },
};

static const struct metric_family goodput_family = {
        "mlmond_run_goodput_seconds_total", METRIC_COUNTER,
        "The run's wall time by what it was spent on (kind: startup, step, data_wait, checkpoint, eval, idle, lost, "
        "other), since registration or since mlmond started; final 2 minutes after the fact.",
        NULL
};
static const struct metric_family oom_family = {
        "mlmond_run_oom_eta_seconds", METRIC_GAUGE,
        "Forecast seconds until the run's memory reaches what will stop it (metric rss_anon_bytes: its cgroup's "
        "memory.max or memory.limit_in_bytes, else the host's available memory; gpu_mem_bytes: the device's free "
        "memory), at the growth's lower confidence bound.",
        NULL
};

static const struct metric_family info_family = {
        "mlmond_run_info", METRIC_GAUGE, "Identity of each running run: always 1, with the process's comm as a label.",
        NULL
};
static const struct metric_family ops_family = {
        "mlmond_run_ops_total", METRIC_COUNTER,
        "Operations the application reported since registration: timings plus counter increments (StatsD sample "
        "rates applied).",
        NULL
};
static const struct metric_family latency_family = {
        "mlmond_run_op_duration_seconds", METRIC_LATENCY,
        "Latency of each op: quantiles over the last minute, sum and count since registration.",
        "Latency of each op since registration (native histogram)."
};
static const struct metric_family op_last_family = {
        "mlmond_run_op_last_timestamp_seconds", METRIC_GAUGE,
        "Unix time of the latest timing or count of each op the application reported (none before the first "
        "since the run was registered or mlmond started).",
        NULL
};
static const struct metric_family state_family = {
        "mlmond_run_process_state", METRIC_GAUGE,
        "1 for the state the run's process is in (a tree's worst member's): running, sleeping, disk-sleep, stopped "
        "or zombie.",
        NULL
};
static const struct metric_family gauges_family = {
        "mlmond_run_app_value", METRIC_GAUGE,
        "Latest value of each gauge the application reported (StatsD g lines), by gauge name.", NULL
};

/* One op's figures as this answer writes them. */
struct op_view {
        char *op;
        struct metric_label label; /* op="..." */
        double count, sum_s;
        uint64_t timings;
        int64_t last_ms; /* its latest timing or count; 0: none known */
        struct hist h;   /* its buckets since registration (the protobuf format) */
        bool has_quantiles;
        double quantile_s[METRIC_QUANTILES];
};

struct run_view {
        struct run_live r;                /* the run's state in memory, copied for this answer */
        struct metrics_op_ledger *ledger; /* a reference */
        bool ops_read;                    /* ops (and ops_known) are set */
        char run_text[24], pid_text[16];
        char *name, *comm; /* valid UTF-8 */
        json_object *tags;
        struct tag_label tl[TAGS_MAX];
        struct metric_label labels[3 + TAGS_MAX]; /* run, name, pid, tag_KEY... */
        size_t n_labels;
        struct metric_label comm_label;
        bool known[_RM_MAX];
        double value[_RM_MAX];
        struct op_view *ops; /* at most [metrics] ops_per_run; NULL: not known in this answer */
        size_t n_ops;
        bool ops_known;
        struct metric_label *gauge_labels; /* gauge="..." of the gauges written */
        size_t n_gauges;
};

static void set(struct run_view *v, enum run_metric k, bool known, double value) {
        /* a counter is a finite number: one that overflowed is left out */
        v->known[k] = known && (run_families[k].type != METRIC_COUNTER || isfinite(value));
        v->value[k] = known ? value : 0;
}

/* Everything but the ops, from memory: the latest sample, the live totals
 * and the leak watch. */
static void run_view_values(struct run_view *v) {
        const struct run_live *r = &v->r;
        const struct sample *s = r->has_last ? &r->last : NULL;
        const struct run_totals *t = &r->info.totals;
        bool has = s != NULL;
        set(v, RM_REGISTERED, true, (double)r->info.registered_ts_ms / 1000.0);
        set(v, RM_CPU, has, has ? (double)s->cpu_time_ns / NS_PER_SEC : 0);
        set(v, RM_CPU_USER, has, has ? (double)s->user_time_ns / NS_PER_SEC : 0);
        set(v, RM_CPU_SYSTEM, has, has ? (double)s->system_time_ns / NS_PER_SEC : 0);
        set(v, RM_RSS, has && s->has_rss, has ? (double)s->rss_bytes : 0);
        set(v, RM_RSS_ANON, has && s->has_rss, has ? (double)s->rss_anon_bytes : 0);
        set(v, RM_RSS_PEAK, t->has_rss, (double)t->peak_rss_bytes);
        set(v, RM_PSS, t->has_final_pss, (double)t->final_pss_bytes);
        set(v, RM_USS, t->has_final_pss, (double)t->final_uss_bytes);
        set(v, RM_THREADS, has, has ? s->threads : 0);
        set(v, RM_PROCESSES, has, has ? s->processes : 0);
        set(v, RM_READ, has && s->has_io, has ? (double)s->read_bytes : 0);
        set(v, RM_WRITE, has && s->has_io, has ? (double)s->write_bytes : 0);
        set(v, RM_NET_RX, has && s->has_net, has ? (double)s->netns_rx_bytes : 0);
        set(v, RM_NET_TX, has && s->has_net, has ? (double)s->netns_tx_bytes : 0);
        set(v, RM_GPU_MEM, has && s->has_gpu_mem, has ? (double)s->gpu_mem_bytes : 0);
        set(v, RM_GPU_UTIL, has && s->has_gpu_util, has ? s->gpu_util_pct / 100.0 : 0);
        set(v, RM_ENERGY, has && s->has_energy, has ? s->energy_j : 0);
        set(v, RM_LEAK, r->has_leak, r->leak.rss.suspected ? 1 : 0);
        set(v, RM_LEAK_GPU, r->has_leak && r->leak.has_gpu, r->leak.gpu.suspected ? 1 : 0);
        const struct verdict_report *vr = &r->verdicts;
        set(v, RM_INPUT_BOUND, r->has_verdicts && vr->has_input_bound && vr->input_bound.evaluated,
            vr->input_bound.flagged ? 1 : 0);
        set(v, RM_GPU_IDLE, r->has_verdicts && vr->has_gpu_idle && vr->gpu_idle.evaluated,
            vr->gpu_idle.flagged ? 1 : 0);
        set(v, RM_GOODPUT_STEPS, r->has_goodput, r->goodput_steps);
        set(v, RM_ENERGY_PER_STEP, has && s->has_energy && r->goodput_since_registration && r->step_timings > 0,
            has && r->step_timings ? s->energy_j / (double)r->step_timings : 0);
}

/* A copy of s in valid UTF-8 (a process's comm is raw bytes). */
static char *utf8_dup(const char *s) {
        return s ? utf8_sanitize(s, strlen(s)) : NULL;
}

/* run="ID", name, pid (unless [metrics] pid_label is off), then the tags in
 * key order while their bytes fit [metrics] label_bytes_per_run; *ret_left:
 * the tags left out. */
static int run_view_labels(struct run_view *v, const struct config *c, uint64_t *ret_left) {
        snprintf(v->run_text, sizeof v->run_text, "%lld", (long long)v->r.info.id);
        snprintf(v->pid_text, sizeof v->pid_text, "%d", v->r.info.pid);
        v->name = utf8_dup(v->r.info.name);
        v->comm = utf8_dup(v->r.info.comm);
        if ((v->r.info.name && !v->name) || (v->r.info.comm && !v->comm))
                return -ENOMEM;
        v->labels[v->n_labels++] = (struct metric_label){ "run", v->run_text };
        v->labels[v->n_labels++] = (struct metric_label){ "name", v->name };
        if (streq(c->metrics_pid_label, "yes"))
                v->labels[v->n_labels++] = (struct metric_label){ "pid", v->pid_text };
        v->comm_label = (struct metric_label){ "comm", v->comm };
        v->tags = v->r.info.tags_json ? json_tokener_parse(v->r.info.tags_json) : NULL;
        size_t n = tag_labels(v->tags, v->tl), bytes = 0;
        for (size_t i = 0; i < n; i++) {
                bytes += strlen(v->tl[i].name) + strlen(v->tl[i].value);
                if (bytes > c->metrics_label_bytes_per_run || !utf8_is_valid(v->tl[i].value, strlen(v->tl[i].value))) {
                        *ret_left += n - i;
                        break;
                }
                v->labels[v->n_labels++] = (struct metric_label){ v->tl[i].name, v->tl[i].value };
        }
        return 0;
}

static void run_view_done(struct run_view *v) {
        run_live_done(&v->r);
        metrics_ledger_unref(v->ledger);
        free(v->name);
        free(v->comm);
        json_object_put(v->tags);
        for (size_t i = 0; v->ops && i < v->n_ops; i++) {
                free(v->ops[i].op);
                hist_done(&v->ops[i].h);
        }
        free(v->ops);
        free(v->gauge_labels);
}

/* What a scrape reads the op data with. */
struct scrape_ctx {
        const struct manager_link *manager;
        struct store *store;
        const struct config *config;
        enum metrics_format format;
};

/* The ledger brought up to the open slice (stored closed slices since the
 * last scrape, plus those still in memory), the open slices on top, and
 * for a run that ever reported a timing the merge of the quantile window
 * (*window_known: it could be read). A query that fails (over the time
 * budget) leaves the figures out of this scrape, never writes them as 0:
 * -ENOMEM is the only error returned; *ret_known says whether the ledger's
 * figures may be exported. */
static int ledger_update(struct metrics_op_ledger *l, const struct scrape_ctx *m, int64_t run_id, int64_t now_ms,
                         struct op_aggs *window, bool *window_known, bool *ret_known) {
        const struct live_source live = { .ops = m->manager->ops->live_ops, .userdata = m->manager->userdata };
        struct query_limits lim = { .timeout_usec = m->config->http_query_timeout_usec,
                                    .max_rows = m->config->http_max_rows };
        int64_t open_from = ops_slice_of(now_ms);
        int q;
        *ret_known = *window_known = false;
        if (l->folded_until_ms < open_from) {
                struct op_aggs closed = {};
                q = querier_ops(m->store, &lim, &live, run_id, l->folded_until_ms, open_from, NULL, &closed);
                if (q == 0)
                        q = metrics_ledger_fold(l, &closed, open_from);
                op_aggs_done(&closed);
                if (q == -ENOMEM)
                        return q;
                if (q < 0)
                        log_debug_errno(q, "metrics: run %lld: op totals not read: %m", (long long)run_id);
        } else
                l->caught_up = true; /* registered within this slice: nothing to fold yet */
        if (!l->caught_up)
                return 0;
        struct op_aggs open = {};
        q = live.ops(live.userdata, run_id, open_from, INT64_MAX, NULL, &open);
        if (q == 0)
                q = metrics_ledger_export(l, &open);
        op_aggs_done(&open);
        if (q < 0)
                return q;
        *ret_known = true;
        bool timings = false;
        for (size_t i = 0; i < l->n; i++)
                timings = timings || l->v[i].out_timings > 0;
        if (!timings)
                return 0; /* no timing ever: nothing in any window either */
        int64_t from = ops_slice_of(now_ms - QUANTILE_WINDOW_MS);
        q = querier_ops(m->store, &lim, &live, run_id, from, INT64_MAX, NULL, window);
        if (q == -ENOMEM)
                return q;
        if (q < 0)
                log_debug_errno(q, "metrics: run %lld: latency window not read: %m", (long long)run_id);
        *window_known = q == 0;
        return 0;
}

/* The ledger's figures copied into the view, at most max_ops of them. */
static int run_view_ops(struct run_view *v, const struct metrics_op_ledger *l, const struct op_aggs *window,
                        bool window_known, const struct scrape_ctx *m, unsigned max_ops, uint64_t *ret_left) {
        size_t n = l->n < max_ops ? l->n : max_ops;
        *ret_left += l->n - n;
        v->ops = calloc(n ? n : 1, sizeof *v->ops);
        if (!v->ops)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const struct metrics_op_total *t = &l->v[i];
                struct op_view *o = &v->ops[i];
                hist_init(&o->h);
                v->n_ops = i + 1;
                o->op = utf8_dup(t->op);
                if (!o->op || (m->format == METRICS_PROTO && hist_merge(&o->h, &t->out_h) < 0))
                        return -ENOMEM;
                o->label = (struct metric_label){ "op", o->op };
                int64_t any;
                if (m->manager->ops->op_last(m->manager->userdata, v->r.info.id, t->op, &o->last_ms, &any) < 0)
                        o->last_ms = 0;
                o->count = t->out_count;
                o->timings = t->out_timings;
                o->sum_s = t->out_sum_ms / 1000.0;
                const struct op_agg *w = window_known ? metrics_aggs_find(window, t->op) : NULL;
                o->has_quantiles = w && w->h.count > 0;
                for (int k = 0; o->has_quantiles && k < METRIC_QUANTILES; k++)
                        o->quantile_s[k] = hist_quantile(&w->h, metric_quantiles[k]) / 1000.0;
        }
        v->ops_known = true;
        return 0;
}

static int run_view_gauges(struct run_view *v, unsigned max_gauges, uint64_t *ret_left) {
        size_t n = v->r.n_gauges < max_gauges ? v->r.n_gauges : max_gauges;
        *ret_left += v->r.n_gauges - n;
        for (size_t i = n; i < v->r.n_gauges; i++) /* what is not written is not kept */
                free(v->r.gauges[i].name);
        v->r.n_gauges = n;
        v->gauge_labels = calloc(n ? n : 1, sizeof *v->gauge_labels);
        if (!v->gauge_labels)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                v->gauge_labels[i] = (struct metric_label){ "gauge", v->r.gauges[i].name };
        v->n_gauges = n;
        return 0;
}

/* The series of an op: its total, its latest time, and its latency's
 * (three quantiles, a sum and a count in the text format; counted so in
 * both formats). */
#define OP_SERIES (1 + 1 + 2 + METRIC_QUANTILES)

/* The forecasts a view writes (mlmond_run_oom_eta_seconds). */
static bool oom_known(const struct run_view *v, int metric) {
        return v->r.has_verdicts && v->r.verdicts.has_oom[metric] && v->r.verdicts.oom[metric].known;
}

/* The series a view writes at most: its ops are not read yet, so each of
 * those it will write counts as a timed op. */
static size_t view_series(const struct run_view *v, unsigned max_ops) {
        size_t n = 2 + v->n_gauges + (v->r.n_ops < max_ops ? v->r.n_ops : max_ops) * OP_SERIES; /* info, state */
        n += (v->r.has_goodput ? _GOODPUT_KIND_MAX : 0) + oom_known(v, OOM_RSS) + oom_known(v, OOM_GPU);
        for (int k = 0; k < _RM_MAX; k++)
                n += v->known[k];
        return n;
}

/* Every running run's state in memory, in id order: *ret_n views. */
static int take_views(const struct manager_link *ml, struct run_view **ret, size_t *ret_n) {
        struct run_view *views = NULL;
        size_t n = 0;
        struct run_ref page[64];
        size_t k;
        for (int64_t after = 0; (k = ml->ops->running(ml->userdata, after, page, ELEMENTSOF(page))) > 0;
             after = page[k - 1].id)
                for (size_t i = 0; i < k; i++) {
                        if (!GREEDY_REALLOC(views, n + 1)) {
                                for (size_t j = 0; j < n; j++)
                                        run_view_done(&views[j]);
                                free(views);
                                return -ENOMEM;
                        }
                        views[n] = (struct run_view){};
                        if (ml->ops->live(ml->userdata, page[i].id,
                                          RUN_LIVE_INFO | RUN_LIVE_LAST | RUN_LIVE_LEAK | RUN_LIVE_GAUGES |
                                                  RUN_LIVE_VERDICTS,
                                          &views[n].r) == 0)
                                n++;
                }
        *ret = views;
        *ret_n = n;
        return 0;
}

/* Pairs each running run (views in id order) with its ledger, kept from
 * the last scrape when the run is the same; the ledgers of runs that ended
 * are let go (a scrape still writing holds its own references). */
static int attach_ledgers(struct metrics *x, struct run_view *views, size_t n, unsigned max_ops) {
        struct metrics_op_ledger **nl = calloc(n ? n : 1, sizeof *nl);
        if (!nl)
                return -ENOMEM;
        for (size_t i = 0, j = 0; i < n; i++) {
                const struct run_info *ri = &views[i].r.info;
                while (j < x->n && x->ledgers[j]->run_id < ri->id)
                        j++;
                if (j < x->n && x->ledgers[j]->run_id == ri->id &&
                    x->ledgers[j]->registered_ts_ms == ri->registered_ts_ms)
                        nl[i] = metrics_ledger_ref(x->ledgers[j++]);
                else if ((nl[i] = calloc(1, sizeof *nl[i])))
                        *nl[i] = (struct metrics_op_ledger){ .refs = 1,
                                                             .run_id = ri->id,
                                                             .registered_ts_ms = ri->registered_ts_ms,
                                                             .max_ops = max_ops,
                                                             .folded_until_ms = ops_slice_of(ri->registered_ts_ms) };
                else {
                        for (size_t k = 0; k < i; k++)
                                metrics_ledger_unref(nl[k]);
                        free(nl);
                        return -ENOMEM;
                }
        }
        for (size_t j = 0; j < x->n; j++)
                metrics_ledger_unref(x->ledgers[j]);
        free(x->ledgers);
        x->ledgers = nl;
        x->n = n;
        for (size_t i = 0; i < n; i++)
                views[i].ledger = metrics_ledger_ref(nl[i]);
        return 0;
}

/* ---- one answer ---------------------------------------------------------------- */

/* The families in the order they are written; a run family's stage is
 * S_RUN + its enum run_metric. */
enum stage {
        S_INFO,
        S_RUN,
        S_GOODPUT = S_RUN + _RM_MAX,
        S_OOM,
        S_OPS,
        S_LATENCY,
        S_OP_LAST,
        S_GAUGES,
        S_STATE,
        S_REST,
        S_DONE
};

struct metrics_scrape {
        struct metrics *metrics;
        struct scrape_ctx ctx;
        struct manager_stats st;
        enum metrics_format format;
        struct run_view *views;
        size_t n;
        struct metrics_out out;
        size_t sent; /* of out, handed out already */
        struct metrics_encoder *enc;
        enum stage stage;
        size_t run; /* the next view to write in a stage */
        bool begun; /* the stage's family has begun */
};

void metrics_scrape_free(struct metrics_scrape *x) {
        if (!x)
                return;
        for (size_t i = 0; i < x->n; i++)
                run_view_done(&x->views[i]);
        free(x->views);
        if (x->enc)
                x->enc->free(x->enc);
        metrics_out_done(&x->out);
        free(x);
}

/* Series a uid's runs wrote so far in this answer. */
struct uid_budget {
        uid_t uid;
        bool has_uid;
        size_t series;
};

static struct uid_budget *budget_of(struct uid_budget **v, size_t *n, const struct run_info *ri) {
        for (size_t i = 0; i < *n; i++)
                if ((*v)[i].has_uid == ri->has_uid && (!ri->has_uid || (*v)[i].uid == ri->uid))
                        return &(*v)[i];
        if (!GREEDY_REALLOC(*v, *n + 1))
                return NULL;
        (*v)[*n] = (struct uid_budget){ .uid = ri->uid, .has_uid = ri->has_uid };
        return &(*v)[(*n)++];
}

static void left_out(struct metrics *x, enum metrics_left_out why, uint64_t n) {
        if (n == 0)
                return;
        x->left_out[why] += n;
        x->limited_mono = now_usec(CLOCK_MONOTONIC);
}

/* A run whose series would take its uid past [metrics] series_per_uid
 * writes its own families only: its ops and gauges are left out (ops_read
 * with none). root's runs are counted too: the limit is on an answer's
 * size, whoever makes it. */
static void apply_uid_budget(struct metrics *x, struct run_view *v, struct uid_budget *b, const struct config *c) {
        size_t own = view_series(v, c->metrics_ops_per_run);
        if (b->series + own <= c->metrics_series_per_uid) {
                b->series += own;
                return;
        }
        size_t ops = v->r.n_ops < c->metrics_ops_per_run ? v->r.n_ops : c->metrics_ops_per_run;
        left_out(x, LEFT_OUT_UID, v->n_gauges + ops * OP_SERIES);
        b->series += own - v->n_gauges - ops * OP_SERIES;
        v->n_gauges = 0;
        v->ops_read = true;
        v->ops_known = false;
}

/* A view's labels, values and gauges now; its ops when they are written. */
static int fill_view(struct metrics *x, struct run_view *v, const struct config *c) {
        uint64_t tags = 0, gauges = 0;
        run_view_values(v);
        int q = run_view_labels(v, c, &tags);
        if (q == 0)
                q = run_view_gauges(v, c->metrics_gauges_per_run, &gauges);
        left_out(x, LEFT_OUT_TAGS, tags);
        left_out(x, LEFT_OUT_GAUGES, gauges);
        return q;
}

/* A view's op figures, read when its first op family is written (the
 * ledger brought up to date, the quantile window): one run at a time, so
 * that the daemon answers others between the pieces of a long answer. */
static int view_ops(struct metrics_scrape *x, struct run_view *v) {
        if (v->ops_read)
                return 0;
        struct op_aggs window = {};
        bool window_known, known;
        uint64_t ops = 0;
        int q = ledger_update(v->ledger, &x->ctx, v->r.info.id, now_realtime_ms(), &window, &window_known, &known);
        if (q == 0 && known)
                q = run_view_ops(v, v->ledger, &window, window_known, &x->ctx, x->ctx.config->metrics_ops_per_run,
                                 &ops);
        op_aggs_done(&window);
        /* the ops the ledger could not take */
        if (q == 0 && v->r.n_ops > v->ledger->n)
                ops += v->r.n_ops - v->ledger->n;
        left_out(x->metrics, LEFT_OUT_OPS, ops);
        v->ops_read = true;
        return q;
}

int metrics_scrape_new(struct metrics *x, const struct manager_link *ml, const struct manager_stats *st,
                       struct store *store, const struct config *config, enum metrics_format format,
                       struct metrics_scrape **ret) {
        struct metrics_scrape *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->metrics = x;
        s->ctx = (struct scrape_ctx){ .manager = ml, .store = store, .config = config, .format = format };
        s->st = *st;
        s->format = format;
        int q = take_views(ml, &s->views, &s->n);
        if (q == 0)
                q = attach_ledgers(x, s->views, s->n, config->metrics_ops_per_run);
        _cleanup_free_ struct uid_budget *budgets = NULL;
        size_t n_budgets = 0;
        for (size_t i = 0; q == 0 && i < s->n; i++) {
                q = fill_view(x, &s->views[i], config);
                struct uid_budget *b = q == 0 ? budget_of(&budgets, &n_budgets, &s->views[i].r.info) : NULL;
                if (q == 0 && !b)
                        q = -ENOMEM;
                if (q == 0)
                        apply_uid_budget(x, &s->views[i], b, config);
        }
        if (q == 0)
                q = format == METRICS_PROTO ? metrics_proto_encoder(&s->out, &s->enc)
                                            : metrics_text_encoder(&s->out, &s->enc);
        if (q < 0) {
                metrics_scrape_free(s);
                return q;
        }
        *ret = s;
        return 0;
}

/* The family of a stage that writes runs. */
static const struct metric_family *stage_family(enum stage st) {
        return st == S_INFO      ? &info_family
               : st < S_GOODPUT  ? &run_families[st - S_RUN]
               : st == S_GOODPUT ? &goodput_family
               : st == S_OOM     ? &oom_family
               : st == S_OPS     ? &ops_family
               : st == S_LATENCY ? &latency_family
               : st == S_OP_LAST ? &op_last_family
               : st == S_STATE   ? &state_family
                                 : &gauges_family;
}

static void write_view(struct metrics_scrape *x, const struct metric_family *f, struct run_view *v) {
        struct metrics_encoder *e = x->enc;
        struct metric_series s = { .labels = v->labels, .n_labels = v->n_labels };
        switch (x->stage) {
        case S_INFO:
                s.extra = &v->comm_label;
                s.n_extra = 1;
                s.value = 1;
                e->series(e, f, &s);
                break;
        case S_OPS:
        case S_LATENCY:
                if (view_ops(x, v) == -ENOMEM)
                        x->out.oom = true;
                for (size_t i = 0; v->ops_known && i < v->n_ops; i++) {
                        const struct op_view *o = &v->ops[i];
                        if (x->stage == S_OPS ? !isfinite(o->count) : o->timings == 0)
                                continue;
                        s.extra = &o->label;
                        s.n_extra = 1;
                        s.value = o->count;
                        s.h = &o->h;
                        s.sum_s = o->sum_s;
                        s.count = o->timings;
                        s.has_quantiles = o->has_quantiles;
                        memcpy(s.quantile_s, o->quantile_s, sizeof s.quantile_s);
                        e->series(e, f, &s);
                }
                break;
        case S_OP_LAST:
                for (size_t i = 0; v->ops_known && i < v->n_ops; i++) {
                        if (v->ops[i].last_ms <= 0)
                                continue;
                        s.extra = &v->ops[i].label;
                        s.n_extra = 1;
                        s.value = (double)v->ops[i].last_ms / 1000.0;
                        e->series(e, f, &s);
                }
                break;
        case S_STATE: {
                struct metric_label state = { "state", v->r.has_last ? proc_state_name(v->r.last.proc_state) : NULL };
                if (!state.value)
                        break;
                s.extra = &state;
                s.n_extra = 1;
                s.value = 1;
                e->series(e, f, &s);
                break;
        }
        case S_GOODPUT:
                for (int k = 0; v->r.has_goodput && k < _GOODPUT_KIND_MAX; k++) {
                        struct metric_label kind = { "kind", goodput_kind_name(k) };
                        s.extra = &kind;
                        s.n_extra = 1;
                        s.value = v->r.goodput_ms[k] / 1000;
                        e->series(e, f, &s);
                }
                break;
        case S_OOM:
                for (int k = 0; k < _OOM_METRIC_MAX; k++)
                        if (oom_known(v, k)) {
                                struct metric_label metric = { "metric", oom_metric_name(k) };
                                s.extra = &metric;
                                s.n_extra = 1;
                                s.value = v->r.verdicts.oom[k].eta_s;
                                e->series(e, f, &s);
                        }
                break;
        case S_GAUGES:
                for (size_t i = 0; i < v->n_gauges; i++) {
                        s.extra = &v->gauge_labels[i];
                        s.n_extra = 1;
                        s.value = v->r.gauges[i].value;
                        e->series(e, f, &s);
                }
                break;
        default:
                if (v->known[x->stage - S_RUN]) {
                        s.value = v->value[x->stage - S_RUN];
                        e->series(e, f, &s);
                }
        }
}

/* Writes the next piece of the answer: a few dozen runs of a family (all
 * of it in the protobuf format), or the families that are not a run's. */
static void produce(struct metrics_scrape *x) {
        struct metrics_encoder *e = x->enc;
        if (x->stage == S_REST) {
                metrics_put_host(e, &x->st);
                metrics_put_devices(e, &x->st);
                metrics_put_daemon(e, &x->st, x->metrics->left_out);
                x->stage = S_DONE;
                return;
        }
        const struct metric_family *f = stage_family(x->stage);
        if (!x->begun) {
                e->begin(e, f);
                x->begun = true;
                x->run = 0;
        }
        /* a piece of the text format ends at PIECE_BYTES (a family of the
         * protobuf format is one message: it is written whole) */
        size_t start = x->out.len;
        while (x->run < x->n && (x->format == METRICS_PROTO || x->out.len - start < PIECE_BYTES))
                write_view(x, f, &x->views[x->run++]);
        if (x->run == x->n) {
                e->end(e, f);
                x->begun = false;
                x->stage++;
        }
}

ssize_t metrics_scrape_read(struct metrics_scrape *x, char *buf, size_t max) {
        while (x->out.len - x->sent < max && x->stage != S_DONE && !x->out.oom)
                produce(x);
        if (x->out.oom)
                return -ENOMEM;
        size_t n = x->out.len - x->sent < max ? x->out.len - x->sent : max;
        memcpy(buf, x->out.data + x->sent, n);
        x->sent += n;
        if (x->sent == x->out.len) /* all handed out: the buffer is written again from its start */
                x->sent = x->out.len = 0;
        return (ssize_t)n;
}

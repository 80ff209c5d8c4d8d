/* SPDX-License-Identifier: MIT */
#include "http/metrics.h"
#include "store/querier.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/accel/accel.h"
#include "json-util.h"
#include "config.h"
#include "manager-ops.h"
#include "collect/procfs.h"
#include "http/tag-labels.h"
#include "store/query.h"
#include "version.h"

#define NS_PER_SEC 1e9

/* The summaries' quantiles are over the last minute of slices plus the
 * open one: the default window of GET /v1/runs/ID/latency, so the two
 * agree, and long enough to hold a few hundred timings of a slow op. Their
 * _sum and _count are totals since registration (counters). */
#define QUANTILE_WINDOW_MS 60000
static const struct {
        double q;
        const char *label;
} quantiles[] = { { 0.5, "0.5" }, { 0.9, "0.9" }, { 0.99, "0.99" } };

/* ---- text ------------------------------------------------------------------ */

void metrics_buf_done(struct metrics_buf *b) {
        free(b->data);
        *b = (struct metrics_buf){};
}

static bool buf_reserve(struct metrics_buf *b, size_t extra) {
        if (b->oom)
                return false;
        if (b->len + extra < b->cap)
                return true;
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->len + extra) {
                if (cap > SIZE_MAX / 2) {
                        b->oom = true;
                        return false;
                }
                cap *= 2;
        }
        char *n = realloc(b->data, cap);
        if (!n) {
                b->oom = true;
                return false;
        }
        b->data = n;
        b->cap = cap;
        return true;
}

void metrics_buf_put(struct metrics_buf *b, const char *s, size_t len) {
        if (!buf_reserve(b, len))
                return;
        memcpy(b->data + b->len, s, len);
        b->len += len;
        b->data[b->len] = 0;
}

void metrics_buf_puts(struct metrics_buf *b, const char *s) {
        if (s)
                metrics_buf_put(b, s, strlen(s));
}

/* Text format 0.0.4: "label_value can be any sequence of UTF-8 characters,
 * but the backslash (\), double-quote ("), and line feed (\n) characters
 * have to be escaped as \\, \", and \n, respectively." */
static void put_escaped(struct metrics_buf *b, const char *s, size_t len) {
        size_t start = 0;
        for (size_t i = 0; i < len; i++) {
                const char *rep = s[i] == '\\' ? "\\\\" : s[i] == '"' ? "\\\"" : s[i] == '\n' ? "\\n" : NULL;
                if (!rep)
                        continue;
                metrics_buf_put(b, s + start, i - start);
                metrics_buf_put(b, rep, 2);
                start = i + 1;
        }
        metrics_buf_put(b, s + start, len - start);
}

void metrics_put_label_value(struct metrics_buf *b, const char *s) {
        if (!s)
                return;
        size_t len = strlen(s);
        if (utf8_is_valid(s, len)) {
                put_escaped(b, s, len);
                return;
        }
        _cleanup_free_ char *clean = utf8_sanitize(s, len);
        if (!clean) {
                b->oom = true;
                return;
        }
        put_escaped(b, clean, strlen(clean));
}

void metrics_format_value(double v, char *buf, size_t size) {
        if (isnan(v))
                snprintf(buf, size, "NaN");
        else if (isinf(v))
                snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
        else if (v == 0)
                snprintf(buf, size, "0"); /* and not "-0" */
        else if (v == trunc(v) && fabs(v) < 0x1p53)
                snprintf(buf, size, "%.0f", v); /* counters and bytes: exact, no exponent */
        else
                /* the fewest digits that read back as v (%.17g always does) */
                for (int prec = 15; prec <= 17; prec++) {
                        snprintf(buf, size, "%.*g", prec, v);
                        if (strtod(buf, NULL) == v)
                                break;
                }
}

static void put_value(struct metrics_buf *b, double v) {
        char num[40];
        metrics_format_value(v, num, sizeof num);
        metrics_buf_puts(b, num);
}

enum family_type { GAUGE, COUNTER, SUMMARY, HISTOGRAM };

/* A buffer with proto set takes the families in the protobuf format:
 * put_header and put_sample hand them over, with the same label text. */
static void put_header(struct metrics_buf *b, const char *name, enum family_type type, const char *help) {
        static const char *const type_names[] = {
                [GAUGE] = "gauge", [COUNTER] = "counter", [SUMMARY] = "summary", [HISTOGRAM] = "histogram"
        };
        if (b->proto) {
                metrics_proto_family(b->proto, name,
                                     type == COUNTER     ? METRICS_PROTO_COUNTER
                                     : type == HISTOGRAM ? METRICS_PROTO_HISTOGRAM
                                                         : METRICS_PROTO_GAUGE,
                                     help);
                return;
        }
        metrics_buf_puts(b, "# HELP ");
        metrics_buf_puts(b, name);
        metrics_buf_puts(b, " ");
        metrics_buf_puts(b, help); /* ours: no backslash or line feed to escape */
        metrics_buf_puts(b, "\n# TYPE ");
        metrics_buf_puts(b, name);
        metrics_buf_puts(b, " ");
        metrics_buf_puts(b, type_names[type]);
        metrics_buf_puts(b, "\n");
}

/* name+suffix{labels,extra} value. labels and extra are written already
 * escaped (either may be NULL or ""). */
static void put_sample(struct metrics_buf *b, const char *name, const char *suffix, const char *labels,
                       const char *extra, double v) {
        bool has_labels = labels && *labels, has_extra = extra && *extra;
        if (b->proto) {
                metrics_proto_sample(b->proto, labels, extra, v);
                return;
        }
        metrics_buf_puts(b, name);
        if (suffix)
                metrics_buf_puts(b, suffix);
        if (has_labels || has_extra) {
                metrics_buf_puts(b, "{");
                if (has_labels)
                        metrics_buf_puts(b, labels);
                if (has_labels && has_extra)
                        metrics_buf_puts(b, ",");
                if (has_extra)
                        metrics_buf_puts(b, extra);
                metrics_buf_puts(b, "}");
        }
        metrics_buf_puts(b, " ");
        put_value(b, v);
        metrics_buf_puts(b, "\n");
}

/* A counter is a finite number: one that overflowed (a sum of huge
 * observations) is no count any more, and its sample is left out rather
 * than written as +Inf (or NaN), which no rate() survives. */
static bool counter_ok(enum family_type type, double v) {
        return type != COUNTER || isfinite(v);
}

/* A family of one series without labels, left out when unknown. */
static void put_single(struct metrics_buf *b, const char *name, enum family_type type, const char *help, bool known,
                       double v) {
        if (!known || !counter_ok(type, v))
                return;
        put_header(b, name, type, help);
        put_sample(b, name, NULL, NULL, NULL, v);
}

/* key="escaped value" (a label pair for put_sample's labels or extra) */
static void put_label(struct metrics_buf *b, const char *key, const char *value) {
        metrics_buf_puts(b, key);
        metrics_buf_puts(b, "=\"");
        metrics_put_label_value(b, value);
        metrics_buf_puts(b, "\"");
}

struct metrics {
        struct metrics_op_ledger *ledgers; /* one per running run, by run id */
        size_t n;
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
                metrics_ledger_done(&x->ledgers[i]);
        free(x->ledgers);
        free(x);
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
        _RM_MAX,
};

static const struct {
        const char *name;
        enum family_type type;
        const char *help;
} run_families[_RM_MAX] = {
        [RM_REGISTERED] = { "mlmond_run_registered_time_seconds", GAUGE,
                            "Unix time the run was registered (its counters count from then)." },
        [RM_CPU] = { "mlmond_run_cpu_seconds_total", COUNTER,
                     "CPU time of the run's processes since registration (schedstat, exact)." },
        [RM_CPU_USER] = { "mlmond_run_cpu_user_seconds_total", COUNTER,
                          "User-mode CPU time since registration (stat, clock-tick resolution)." },
        [RM_CPU_SYSTEM] = { "mlmond_run_cpu_system_seconds_total", COUNTER,
                            "Kernel-mode CPU time since registration (stat, clock-tick resolution)." },
        [RM_RSS] = { "mlmond_run_resident_memory_bytes", GAUGE, "Resident memory (RSS) of the run's processes." },
        [RM_RSS_ANON] = { "mlmond_run_resident_memory_anon_bytes", GAUGE,
                          "Anonymous resident memory (RssAnon) of the run's processes." },
        [RM_RSS_PEAK] = { "mlmond_run_resident_memory_peak_bytes", GAUGE,
                          "Highest resident memory seen since registration (samples and VmHWM)." },
        [RM_THREADS] = { "mlmond_run_threads", GAUGE, "Threads of the run's processes." },
        [RM_PROCESSES] = { "mlmond_run_processes", GAUGE, "Processes in the run (more than 1 with children)." },
        [RM_READ] = { "mlmond_run_read_bytes_total", COUNTER,
                      "Bytes read from storage since registration (/proc/PID/io read_bytes)." },
        [RM_WRITE] = { "mlmond_run_write_bytes_total", COUNTER,
                       "Bytes written to storage since registration (/proc/PID/io write_bytes)." },
        [RM_NET_RX] = { "mlmond_run_netns_receive_bytes_total", COUNTER,
                        "Bytes received by the run's network namespace since registration (loopback excluded)." },
        [RM_NET_TX] = { "mlmond_run_netns_transmit_bytes_total", COUNTER,
                        "Bytes sent by the run's network namespace since registration (loopback excluded)." },
        [RM_GPU_MEM] = { "mlmond_run_gpu_memory_bytes", GAUGE, "GPU/NPU memory held by the run's processes." },
        [RM_GPU_UTIL] = { "mlmond_run_gpu_utilization_ratio", GAUGE,
                          "GPU/NPU busy share of the run over its last interval (1 = one device fully busy)." },
        [RM_ENERGY] = { "mlmond_run_energy_joules_total", COUNTER,
                        "Estimated energy used since registration: the run's share of the CPU package and of "
                        "each device it uses." },
        [RM_LEAK] = { "mlmond_run_leak_suspected", GAUGE,
                      "1 while the leak watch suspects steady growth of anonymous memory, else 0." },
        [RM_LEAK_GPU] = { "mlmond_run_gpu_memory_leak_suspected", GAUGE,
                          "1 while the leak watch suspects steady growth of GPU memory, else 0 (runs with GPU memory)." },
};

struct run_view {
        struct run_live r; /* the run's state in memory, copied for this scrape */
        struct metrics_op_ledger *ledger;
        char *labels; /* run="ID",name="...",pid="PID",tag_KEY="..." escaped */
        bool known[_RM_MAX];
        double value[_RM_MAX];
        bool ops_known;    /* ledger figures may be exported */
        bool window_known; /* window holds the quantile window's ops */
        struct op_aggs window;
};

static void set(struct run_view *v, enum run_metric k, bool known, double value) {
        v->known[k] = known;
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
}

static int run_view_labels(struct run_view *v) {
        struct metrics_buf b = {};
        char num[32];
        snprintf(num, sizeof num, "%lld", (long long)v->r.info.id);
        put_label(&b, "run", num);
        metrics_buf_puts(&b, ",");
        put_label(&b, "name", v->r.info.name);
        snprintf(num, sizeof num, "%d", v->r.info.pid);
        metrics_buf_puts(&b, ",");
        put_label(&b, "pid", num);
        _cleanup_json_ json_object *tags = v->r.info.tags_json ? json_tokener_parse(v->r.info.tags_json) : NULL;
        struct tag_label tl[TAGS_MAX];
        for (size_t i = 0, n = tag_labels(tags, tl); i < n; i++) {
                metrics_buf_puts(&b, ",");
                put_label(&b, tl[i].name, tl[i].value);
        }
        if (b.oom) {
                metrics_buf_done(&b);
                return -ENOMEM;
        }
        v->labels = b.data;
        return 0;
}

/* The run's op figures: the ledger brought up to the open slice (stored
 * closed slices since the last scrape, plus those still in memory), the
 * open slices on top, and for a run that ever reported a timing the merge
 * of the quantile window. A query that fails (over the time budget) leaves
 * the figures out of this scrape, never writes them as 0: -ENOMEM is the
 * only error returned. */
/* What a scrape reads the op data with. */
struct scrape {
        const struct manager_link *manager;
        const struct manager_stats *st;
        struct store *store;
        const struct config *config;
};

static int run_view_ops(struct run_view *v, const struct scrape *m, int64_t now_ms) {
        struct metrics_op_ledger *l = v->ledger;
        const struct run_live *r = &v->r;
        const struct manager_ops *ops = m->manager->ops;
        void *ud = m->manager->userdata;
        const struct live_source live = { .ops = ops->live_ops, .userdata = ud };
        struct query_limits lim = { .timeout_usec = m->config->http_query_timeout_usec,
                                    .max_rows = m->config->http_max_rows };
        int64_t open_from = ops_slice_of(now_ms);
        int q;

        if (l->folded_until_ms < open_from) {
                struct op_aggs closed = {};
                q = querier_ops(m->store, &lim, &live, r->info.id, l->folded_until_ms, open_from, NULL, &closed);
                if (q == 0)
                        q = metrics_ledger_fold(l, &closed, open_from);
                op_aggs_done(&closed);
                if (q == -ENOMEM)
                        return q;
                if (q < 0)
                        log_debug_errno(q, "metrics: run %lld: op totals not read: %m", (long long)r->info.id);
        } else
                l->caught_up = true; /* registered within this slice: nothing to fold yet */
        if (!l->caught_up)
                return 0;

        struct op_aggs open = {};
        q = ops->live_ops(ud, r->info.id, open_from, INT64_MAX, NULL, &open);
        if (q == 0)
                q = metrics_ledger_export(l, &open);
        op_aggs_done(&open);
        if (q < 0)
                return q;
        v->ops_known = true;

        bool timings = false;
        for (size_t i = 0; i < l->n; i++)
                timings = timings || l->v[i].out_timings > 0;
        if (!timings)
                return 0; /* no timing ever: nothing in any window either */
        int64_t from = ops_slice_of(now_ms - QUANTILE_WINDOW_MS);
        q = querier_ops(m->store, &lim, &live, r->info.id, from, INT64_MAX, NULL, &v->window);
        if (q == -ENOMEM)
                return q;
        if (q < 0) {
                log_debug_errno(q, "metrics: run %lld: latency window not read: %m", (long long)r->info.id);
                op_aggs_done(&v->window);
                return 0;
        }
        v->window_known = true;
        return 0;
}

static void run_view_done(struct run_view *v) {
        run_live_done(&v->r);
        free(v->labels);
        op_aggs_done(&v->window);
}

static int run_id_cmp(const void *a, const void *b) {
        int64_t x = ((const struct run_view *)a)->r.info.id, y = ((const struct run_view *)b)->r.info.id;
        return (x > y) - (x < y);
}

/* Pairs each running run (views sorted by id) with its ledger, kept from
 * the last scrape when the run is the same; the ledgers of runs that ended
 * are dropped. */
static int attach_ledgers(struct metrics *x, struct run_view *views, size_t n) {
        struct metrics_op_ledger *nl = calloc(n ? n : 1, sizeof *nl);
        if (!nl)
                return -ENOMEM;
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
                const struct run_info *ri = &views[i].r.info;
                while (j < x->n && x->ledgers[j].run_id < ri->id)
                        metrics_ledger_done(&x->ledgers[j++]);
                if (j < x->n && x->ledgers[j].run_id == ri->id &&
                    x->ledgers[j].registered_ts_ms == ri->registered_ts_ms)
                        nl[i] = x->ledgers[j++];
                else
                        nl[i] = (struct metrics_op_ledger){ .run_id = ri->id,
                                                            .registered_ts_ms = ri->registered_ts_ms,
                                                            .folded_until_ms = ops_slice_of(ri->registered_ts_ms) };
        }
        for (; j < x->n; j++)
                metrics_ledger_done(&x->ledgers[j]);
        free(x->ledgers);
        x->ledgers = nl;
        x->n = n;
        for (size_t i = 0; i < n; i++)
                views[i].ledger = &nl[i];
        return 0;
}

/* ---- families ---------------------------------------------------------------- */

static void put_runs(struct metrics_buf *b, struct run_view *views, size_t n) {
        if (n > 0)
                put_header(b, "mlmond_run_info", GAUGE,
                           "Identity of each running run: always 1, with the process's comm as a label.");
        for (size_t i = 0; i < n; i++) {
                struct metrics_buf extra = {};
                put_label(&extra, "comm", views[i].r.info.comm);
                put_sample(b, "mlmond_run_info", NULL, views[i].labels, extra.data, 1);
                b->oom = b->oom || extra.oom;
                metrics_buf_done(&extra);
        }
        for (int k = 0; k < _RM_MAX; k++) {
                bool header = false;
                for (size_t i = 0; i < n; i++) {
                        if (!views[i].known[k] || !counter_ok(run_families[k].type, views[i].value[k]))
                                continue;
                        if (!header)
                                put_header(b, run_families[k].name, run_families[k].type, run_families[k].help);
                        header = true;
                        put_sample(b, run_families[k].name, NULL, views[i].labels, NULL, views[i].value[k]);
                }
        }
}

/* What the applications report (StatsD, observations), per op. */
/* A family whose series carry a run's labels and one label of their own
 * (op="...", gauge="..."); its header comes before its first sample. */
struct keyed_family {
        const char *name;
        enum family_type type;
        const char *help;
        const char *key;
        bool header; /* written already */
        struct metrics_buf extra;
};

static void put_keyed(struct metrics_buf *b, struct keyed_family *f, const char *run_labels, const char *value,
                      double v) {
        if (!f->header)
                put_header(b, f->name, f->type, f->help);
        f->header = true;
        f->extra.len = 0;
        put_label(&f->extra, f->key, value);
        put_sample(b, f->name, NULL, run_labels, f->extra.data, v);
}

static void keyed_family_done(struct metrics_buf *b, struct keyed_family *f) {
        b->oom = b->oom || f->extra.oom;
        metrics_buf_done(&f->extra);
}

static void put_ops(struct metrics_buf *b, struct run_view *views, size_t n) {
        static const char duration[] = "mlmond_run_op_duration_seconds";
        struct keyed_family total = { "mlmond_run_ops_total", COUNTER,
                                      "Operations the application reported since registration: timings plus "
                                      "counter increments (StatsD sample rates applied).",
                                      "op" };
        struct metrics_buf op = {}, q = {};
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; views[i].ops_known && j < views[i].ledger->n; j++) {
                        const struct metrics_op_total *t = &views[i].ledger->v[j];
                        if (counter_ok(COUNTER, t->out_count))
                                put_keyed(b, &total, views[i].labels, t->op, t->out_count);
                }
        keyed_family_done(b, &total);
        bool header = false;
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; views[i].ops_known && j < views[i].ledger->n; j++) {
                        const struct metrics_op_total *t = &views[i].ledger->v[j];
                        if (t->out_timings == 0)
                                continue;
                        if (!header && b->proto)
                                put_header(b, duration, HISTOGRAM,
                                           "Latency of each op since registration (native histogram).");
                        else if (!header)
                                put_header(b, duration, SUMMARY,
                                           "Latency of each op: quantiles over the last minute, sum and count "
                                           "since registration.");
                        header = true;
                        op.len = 0;
                        put_label(&op, "op", t->op);
                        if (b->proto && op.data) {
                                metrics_proto_native(b->proto, views[i].labels, op.data, &t->out_h,
                                                     t->out_sum_ms / 1000.0);
                                continue;
                        }
                        const struct op_agg *w = views[i].window_known ? metrics_aggs_find(&views[i].window, t->op)
                                                                       : NULL;
                        for (size_t k = 0; w && w->h.count > 0 && k < ELEMENTSOF(quantiles); k++) {
                                q.len = 0;
                                metrics_buf_puts(&q, op.data);
                                metrics_buf_puts(&q, ",quantile=\"");
                                metrics_buf_puts(&q, quantiles[k].label);
                                metrics_buf_puts(&q, "\"");
                                put_sample(b, duration, NULL, views[i].labels, q.data,
                                           hist_quantile(&w->h, quantiles[k].q) / 1000.0);
                        }
                        if (counter_ok(COUNTER, t->out_sum_ms))
                                put_sample(b, duration, "_sum", views[i].labels, op.data, t->out_sum_ms / 1000.0);
                        put_sample(b, duration, "_count", views[i].labels, op.data, (double)t->out_timings);
                }
        b->oom = b->oom || op.oom || q.oom;
        metrics_buf_done(&op);
        metrics_buf_done(&q);
}

/* The latest value of each gauge a running run reported (StatsD "g", a
 * "gauge" observation), in the order the names first came. */
static void put_gauges(struct metrics_buf *b, struct run_view *views, size_t n) {
        struct keyed_family f = { "mlmond_run_app_value", GAUGE,
                                  "Latest value of each gauge the application reported (StatsD g lines), by gauge "
                                  "name.",
                                  "gauge" };
        for (size_t i = 0; i < n; i++) {
                const struct run_live *r = &views[i].r;
                for (size_t j = 0; j < r->n_gauges; j++)
                        put_keyed(b, &f, views[i].labels, r->gauges[j].name, r->gauges[j].value);
        }
        keyed_family_done(b, &f);
}

static void put_host(struct metrics_buf *b, const struct manager_stats *m) {
        const struct host_sample *h = &m->host;
        const struct proc_meminfo *mem = &h->mem;
        bool avail = h->has_mem && mem->has_available;
        put_single(b, "mlmond_host_cpus", GAUGE, "CPUs of the host (as /proc/stat lists them).", h->ncpus > 0,
                   h->ncpus);
        if (m->has_host_cpu) {
                const struct proc_cpu_total *c = &m->host_cpu;
                const struct {
                        const char *mode;
                        uint64_t ticks;
                } modes[] = { { "user", c->user },       { "nice", c->nice },     { "system", c->system },
                              { "idle", c->idle },       { "iowait", c->iowait }, { "irq", c->irq },
                              { "softirq", c->softirq }, { "steal", c->steal } };
                double tck = (double)(m->clk_tck > 0 ? m->clk_tck : 100);
                put_header(b, "mlmond_host_cpu_seconds_total", COUNTER,
                           "CPU time of the whole host by mode, all CPUs together (/proc/stat).");
                for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                        char label[32];
                        snprintf(label, sizeof label, "mode=\"%s\"", modes[i].mode);
                        put_sample(b, "mlmond_host_cpu_seconds_total", NULL, NULL, label, (double)modes[i].ticks / tck);
                }
        }
        put_single(b, "mlmond_host_memory_total_bytes", GAUGE, "Memory of the host (MemTotal).", h->has_mem,
                   (double)mem->total_bytes);
        put_single(b, "mlmond_host_memory_available_bytes", GAUGE, "Memory available for new work (MemAvailable).",
                   avail, (double)mem->available_bytes);
        put_single(b, "mlmond_host_memory_used_bytes", GAUGE, "MemTotal - MemAvailable.", avail,
                   (double)sat_sub_u64(mem->total_bytes, mem->available_bytes));
        put_single(b, "mlmond_host_swap_total_bytes", GAUGE, "Swap space of the host (SwapTotal).", h->has_mem,
                   (double)mem->swap_total_bytes);
        put_single(b, "mlmond_host_swap_used_bytes", GAUGE, "SwapTotal - SwapFree.", h->has_mem,
                   (double)sat_sub_u64(mem->swap_total_bytes, mem->swap_free_bytes));
        put_single(b, "mlmond_host_load1", GAUGE, "1-minute load average.", h->has_load, h->load.load1);
        put_single(b, "mlmond_host_load5", GAUGE, "5-minute load average.", h->has_load, h->load.load5);
        put_single(b, "mlmond_host_load15", GAUGE, "15-minute load average.", h->has_load, h->load.load15);
}

/* The host's GPU/NPU devices: one family per figure (mlmond_device_*),
 * labelled by device, from the latest device read (accel.h), each series
 * left out while unknown; and the CPU package's power and energy (RAPL). */
enum device_metric { DM_BUSY, DM_MEM_USED, DM_MEM_TOTAL, DM_POWER, DM_ENERGY, DM_TEMP, DM_FREQ, _DM_MAX };

static bool device_value(const struct gpu_device *d, enum device_metric k, double *ret) {
        switch (k) {
        case DM_BUSY:
                *ret = d->busy_pct / 100.0;
                return d->has_busy;
        case DM_MEM_USED:
                *ret = (double)d->mem_used_bytes;
                return d->has_mem_used;
        case DM_MEM_TOTAL:
                *ret = (double)d->mem_total_bytes;
                return d->has_mem_total;
        case DM_POWER:
                *ret = d->power_w;
                return d->has_power;
        case DM_ENERGY:
                *ret = d->energy_j;
                return d->has_energy;
        case DM_TEMP:
                *ret = d->temp_c;
                return d->has_temp;
        case DM_FREQ:
                *ret = d->freq_mhz * 1e6;
                return d->has_freq;
        default:
                return false;
        }
}

static void metrics_devices(struct metrics_buf *b, const struct manager_stats *m) {
        static const struct {
                const char *name;
                enum family_type type;
                const char *help;
        } fam[_DM_MAX] = {
                [DM_BUSY] = { "mlmond_device_busy_ratio", GAUGE,
                              "Busy share of the device over the last device interval (sysfs, NVML)." },
                [DM_MEM_USED] = { "mlmond_device_memory_used_bytes", GAUGE,
                                  "Device memory in use (VRAM, NPU buffers)." },
                [DM_MEM_TOTAL] = { "mlmond_device_memory_total_bytes", GAUGE, "Device memory in all." },
                [DM_POWER] = { "mlmond_device_power_watts", GAUGE, "Power drawn by the device (hwmon, NVML)." },
                [DM_ENERGY] = { "mlmond_device_energy_joules_total", COUNTER,
                                "Energy used by the device since mlmond began watching it." },
                [DM_TEMP] = { "mlmond_device_temperature_celsius", GAUGE, "Device temperature (edge)." },
                [DM_FREQ] = { "mlmond_device_frequency_hertz", GAUGE, "Current clock of the device's engines." },
        };
        size_t n = 0;
        const struct gpu_device *d = m->accel ? accel_devices(m->accel, &n) : NULL;
        struct metrics_buf lab = {};
        if (n > 0) {
                put_header(b, "mlmond_device_info", GAUGE,
                           "The host's GPUs and NPUs (value 1), by PCI address or node.");
                for (size_t i = 0; i < n; i++) {
                        lab.len = 0;
                        put_label(&lab, "device", d[i].id);
                        metrics_buf_puts(&lab, ",");
                        put_label(&lab, "kind", d[i].kind);
                        metrics_buf_puts(&lab, ",");
                        put_label(&lab, "driver", d[i].driver);
                        metrics_buf_puts(&lab, ",");
                        put_label(&lab, "node", d[i].node);
                        metrics_buf_puts(&lab, ",");
                        put_label(&lab, "name", d[i].name);
                        if (lab.data)
                                put_sample(b, "mlmond_device_info", NULL, lab.data, NULL, 1);
                }
        }
        for (int k = 0; k < _DM_MAX; k++) {
                bool header = false;
                for (size_t i = 0; i < n; i++) {
                        double v;
                        if (!device_value(&d[i], (enum device_metric)k, &v))
                                continue;
                        if (!header)
                                put_header(b, fam[k].name, fam[k].type, fam[k].help);
                        header = true;
                        lab.len = 0;
                        put_label(&lab, "device", d[i].id);
                        if (lab.data)
                                put_sample(b, fam[k].name, NULL, lab.data, NULL, v);
                }
        }
        bool header = false;
        for (size_t i = 0; i < n; i++)
                for (size_t g = 0; g < d[i].n_gts; g++) {
                        if (!d[i].gts[g].has_busy)
                                continue;
                        if (!header)
                                put_header(b, "mlmond_device_gt_busy_ratio", GAUGE,
                                           "Busy share of each GT of an Intel GPU (render/compute and media).");
                        header = true;
                        lab.len = 0;
                        put_label(&lab, "device", d[i].id);
                        metrics_buf_puts(&lab, ",");
                        put_label(&lab, "gt", d[i].gts[g].name);
                        if (lab.data)
                                put_sample(b, "mlmond_device_gt_busy_ratio", NULL, lab.data, NULL,
                                           d[i].gts[g].busy_pct / 100.0);
                }
        metrics_buf_done(&lab);
        const struct gpu_device *pkg = m->accel ? accel_package(m->accel) : NULL;
        put_single(b, "mlmond_host_package_power_watts", GAUGE, "CPU package power (RAPL, packages summed).",
                   pkg && pkg->has_power, pkg ? pkg->power_w : 0);
        put_single(b, "mlmond_host_package_energy_joules_total", COUNTER,
                   "CPU package energy since mlmond started (RAPL, packages summed, wrap-around handled).",
                   pkg && pkg->has_energy, pkg ? pkg->energy_j : 0);
}

/* mlmond's own: the kernel's /proc, whatever --proc-root says */
static bool self_rss(uint64_t *ret) {
        _cleanup_close_ int dir = proc_open_pid_dir("/proc", getpid());
        struct proc_statm st;
        if (dir < 0 || proc_read_statm(dir, &st) < 0)
                return false;
        *ret = st.resident_pages * (uint64_t)sysconf(_SC_PAGESIZE);
        return true;
}

/* The daemon's own health: what GET /v1/health says. */
static void put_daemon(struct metrics_buf *b, const struct manager_stats *m) {
        struct timespec ts = {};
        bool has_cpu = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0;
        uint64_t rss = 0;
        bool has_rss = self_rss(&rss);
        put_header(b, "mlmond_build_info", GAUGE, "Always 1, with mlmond's version as a label.");
        put_sample(b, "mlmond_build_info", NULL, NULL, "version=\"" MLMOND_VERSION "\"", 1);
        put_single(b, "mlmond_uptime_seconds", GAUGE, "Time since mlmond started.", true, (double)m->uptime_usec / 1e6);
        put_single(b, "mlmond_runs_active", GAUGE, "Running runs (the ones exported here).", true, m->n_runs);
        put_single(b, "mlmond_ticks_total", COUNTER, "Sampler ticks since mlmond started.", true, m->ticks);
        put_single(b, "mlmond_tick_overruns_total", COUNTER,
                   "Times a run's sampling fell a whole interval behind its schedule.", true, m->overruns);
        put_single(b, "mlmond_last_tick_duration_seconds", GAUGE, "How long the last sampler tick took.", m->ticks > 0,
                   m->last_tick_ms / 1000.0);
        put_single(b, "mlmond_db_write_errors_total", COUNTER, "Failed database writes since mlmond started.", true,
                   (double)m->db_write_errors);
        put_single(b, "mlmond_statsd_received_total", COUNTER, "StatsD lines received.", true, m->statsd_received);
        put_single(b, "mlmond_statsd_malformed_total", COUNTER, "StatsD lines (and datagrams) dropped as malformed.",
                   true, m->statsd_malformed);
        put_single(b, "mlmond_statsd_unmatched_total", COUNTER, "StatsD lines dropped: no running run matched.", true,
                   m->statsd_unmatched);
        put_single(b, "mlmond_statsd_refused_total", COUNTER,
                   "StatsD lines dropped: a #run:/#pid: tag named a run the sender may not write to.", true,
                   m->statsd_refused);
        put_single(b, "mlmond_process_cpu_seconds_total", COUNTER, "CPU time mlmond itself has used.", has_cpu,
                   (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_SEC);
        put_single(b, "mlmond_process_resident_memory_bytes", GAUGE, "Resident memory of mlmond itself.", has_rss,
                   (double)rss);
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
                                        run_live_done(&views[j].r);
                                free(views);
                                return -ENOMEM;
                        }
                        views[n] = (struct run_view){};
                        if (ml->ops->live(ml->userdata, page[i].id,
                                          RUN_LIVE_INFO | RUN_LIVE_LAST | RUN_LIVE_LEAK | RUN_LIVE_GAUGES,
                                          &views[n].r) == 0)
                                n++;
                }
        *ret = views;
        *ret_n = n;
        return 0;
}

int metrics_render(struct metrics *x, const struct manager_link *ml, const struct manager_stats *m, struct store *store,
                   const struct config *config, enum metrics_format format, char **ret, size_t *ret_len) {
        const struct scrape sc = { .manager = ml, .st = m, .store = store, .config = config };
        int64_t now_ms = now_realtime_ms();
        size_t n = 0;
        struct run_view *views = NULL;
        struct metrics_buf b = {};
        int q = take_views(ml, &views, &n);

        struct metrics_proto *proto = NULL;
        if (q == 0 && format == METRICS_PROTO)
                q = metrics_proto_new(&proto);
        b.proto = proto;

        if (q == 0) {
                qsort(views, n, sizeof *views, run_id_cmp);
                q = attach_ledgers(x, views, n);
        }
        for (size_t i = 0; q == 0 && i < n; i++) {
                run_view_values(&views[i]);
                q = run_view_labels(&views[i]);
                if (q == 0)
                        q = run_view_ops(&views[i], &sc, now_ms);
        }
        if (q == 0) {
                put_runs(&b, views, n);
                put_ops(&b, views, n);
                put_gauges(&b, views, n);
                put_host(&b, m);
                metrics_devices(&b, m);
                put_daemon(&b, m);
                if (b.oom)
                        q = -ENOMEM;
        }
        if (q == 0 && proto) {
                metrics_buf_done(&b); /* held nothing: it all went to proto */
                q = metrics_proto_finish(proto, &b.data, &b.len);
        }
        metrics_proto_free(proto);
        for (size_t i = 0; views && i < n; i++)
                run_view_done(&views[i]);
        free(views);
        if (q < 0) {
                metrics_buf_done(&b);
                return q;
        }
        *ret_len = b.len;
        *ret = b.data;
        return 0;
}

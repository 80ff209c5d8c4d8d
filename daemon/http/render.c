/* SPDX-License-Identifier: MIT */
#include "http/render.h"
#include "http/metrics-host.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "collect/accel/accel.h"
#include "collect/procfs.h"
#include "json-util.h"
#include "analyze/goodput.h"
#include "analyze/leakwatch.h"
#include "analyze/verdict.h"
#include "version.h"

#define NS_PER_SEC 1e9

/* A sample's fields, into a json-c object or as text. */
static void sample_fields(const struct json_fields *f, const struct sample *s, json_object *gpu) {
        json_field_i64(f, "ts", true, s->ts_ms);
        json_field_double(f, "cpu_pct", s->has_cpu_pct, s->cpu_pct);
        json_field_double(f, "cpu_time_s", true, (double)s->cpu_time_ns / NS_PER_SEC);
        json_field_double(f, "user_time_s", true, (double)s->user_time_ns / NS_PER_SEC);
        json_field_double(f, "system_time_s", true, (double)s->system_time_ns / NS_PER_SEC);
        json_field_u64(f, "rss_bytes", s->has_rss, s->rss_bytes);
        json_field_u64(f, "rss_anon_bytes", s->has_rss, s->rss_anon_bytes);
        json_field_u64(f, "peak_rss_bytes", s->has_peak_rss, s->peak_rss_bytes);
        json_field_u64(f, "pss_bytes", s->has_pss, s->pss_bytes);
        json_field_u64(f, "uss_bytes", s->has_pss, s->uss_bytes);
        json_field_u64(f, "pss_anon_bytes", s->has_pss_anon, s->pss_anon_bytes);
        json_field_u64(f, "threads", true, s->threads);
        json_field_u64(f, "processes", true, s->processes);
        json_field_u64(f, "read_bytes", s->has_io, s->read_bytes);
        json_field_u64(f, "write_bytes", s->has_io, s->write_bytes);
        json_field_u64(f, "rchar_bytes", s->has_io, s->rchar_bytes);
        json_field_u64(f, "wchar_bytes", s->has_io, s->wchar_bytes);
        json_field_double(f, "read_bytes_per_s", s->has_io_rate, s->read_bytes_per_s);
        json_field_double(f, "write_bytes_per_s", s->has_io_rate, s->write_bytes_per_s);
        json_field_u64(f, "netns_rx_bytes", s->has_net, s->netns_rx_bytes);
        json_field_u64(f, "netns_tx_bytes", s->has_net, s->netns_tx_bytes);
        json_field_double(f, "netns_rx_bytes_per_s", s->has_net_rate, s->netns_rx_bytes_per_s);
        json_field_double(f, "netns_tx_bytes_per_s", s->has_net_rate, s->netns_tx_bytes_per_s);
        json_field_u64(f, "gpu_mem_bytes", s->has_gpu_mem, s->gpu_mem_bytes);
        json_field_double(f, "gpu_util_pct", s->has_gpu_util, s->gpu_util_pct);
        json_field_double(f, "energy_j", s->has_energy, s->energy_j);
        json_field_json(f, "gpu", gpu);
}

json_object *render_sample(const struct sample *s, json_object *gpu) {
        json_object *o = json_object_new_object();
        sample_fields(&(struct json_fields){ .obj = o }, s, gpu);
        return o;
}

void render_sample_text(struct json_text *t, const struct sample *s, json_object *gpu) {
        json_text_open(t, '{');
        sample_fields(&(struct json_fields){ .text = t }, s, gpu);
        json_text_close(t, '}');
}

json_object *render_gpu_uses(const struct gpu_use *u, size_t n) {
        json_object *arr = json_object_new_array_ext((int)n);
        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_new_object();
                json_add_string(o, "device", u[i].device);
                json_add_string(o, "driver", u[i].driver[0] ? u[i].driver : NULL);
                json_object_object_add(o, "estimated", json_object_new_boolean(u[i].estimated));
                json_add_u64(o, "clients", true, u[i].clients);
                json_add_u64(o, "mem_bytes", u[i].has_mem, u[i].mem_bytes);
                json_add_double(o, "util_pct", u[i].has_util, u[i].util_pct);
                json_object *e = json_object_new_object();
                for (size_t j = 0; j < u[i].n_engines; j++)
                        json_add_double(e, u[i].engines[j].name, u[i].engines[j].has_util, u[i].engines[j].util_pct);
                json_object_object_add(o, "engines", e);
                json_object *r = json_object_new_object();
                for (size_t j = 0; j < u[i].n_regions; j++) /* empty regions (amdgpu lists 7) left out */
                        if (u[i].regions[j].resident_bytes > 0)
                                json_add_u64(r, u[i].regions[j].name, true, u[i].regions[j].resident_bytes);
                json_object_object_add(o, "regions", r);
                json_object_array_add(arr, o);
        }
        return arr;
}

/* What device_samples keeps beside its columns. */
json_object *render_device_detail(const struct gpu_device *d) {
        json_object *o = json_object_new_object();
        json_add_u64(o, "gtt_used_bytes", d->has_gtt_used, d->gtt_used_bytes);
        json_add_u64(o, "gtt_total_bytes", d->has_gtt_total, d->gtt_total_bytes);
        json_add_double(o, "freq_max_mhz", d->has_freq_max, d->freq_max_mhz);
        json_object_object_add(o, "suspended", json_object_new_boolean(d->suspended));
        json_object *gts = json_object_new_array_ext((int)d->n_gts);
        for (size_t i = 0; i < d->n_gts; i++) {
                json_object *g = json_object_new_object();
                json_add_string(g, "name", d->gts[i].name);
                json_add_double(g, "busy_pct", d->gts[i].has_busy, d->gts[i].busy_pct);
                json_object_array_add(gts, g);
        }
        json_object_object_add(o, "gts", gts);
        return o;
}

json_object *render_device(const struct gpu_device *d) {
        json_object *o = json_object_new_object();
        json_add_string(o, "id", d->id);
        json_add_string(o, "kind", d->kind);
        json_add_string(o, "driver", d->driver[0] ? d->driver : NULL);
        json_add_string(o, "node", d->node[0] ? d->node : NULL);
        json_add_string(o, "vendor", d->vendor[0] ? d->vendor : NULL);
        json_add_string(o, "model", d->model[0] ? d->model : NULL);
        json_add_string(o, "name", d->name[0] ? d->name : NULL);
        json_add_double(o, "busy_pct", d->has_busy, d->busy_pct);
        json_add_u64(o, "mem_used_bytes", d->has_mem_used, d->mem_used_bytes);
        json_add_u64(o, "mem_total_bytes", d->has_mem_total, d->mem_total_bytes);
        json_add_double(o, "power_w", d->has_power, d->power_w);
        json_add_double(o, "energy_j", d->has_energy, d->energy_j);
        json_add_double(o, "temp_c", d->has_temp, d->temp_c);
        json_add_double(o, "freq_mhz", d->has_freq, d->freq_mhz);
        /* the detail fields, flat */
        json_object *det = render_device_detail(d);
        json_object_object_foreach(det, k, v) json_object_object_add(o, k, json_object_get(v));
        json_object_put(det);
        return o;
}

json_object *render_run(const struct run_info *ri, const struct sample *latest, json_object *latest_gpu) {
        json_object *o = json_object_new_object();
        json_add_i64(o, "id", true, ri->id);
        json_add_i64(o, "pid", true, ri->pid);
        json_add_u64(o, "start_time_ticks", true, ri->start_time_ticks);
        json_add_string(o, "name", ri->name);
        json_add_string(o, "comm", ri->comm);
        json_add_string(o, "cmdline", ri->cmdline);
        json_add_u64(o, "uid", ri->has_uid, ri->uid);
        json_add_string(o, "state", run_state_to_string(ri->state));
        json_add_i64(o, "interval_ms", true, ri->interval_ms);
        json_object_object_add(o, "children", json_object_new_boolean(ri->children));
        json_object *tags = ri->tags_json ? json_tokener_parse(ri->tags_json) : NULL;
        json_object_object_add(o, "tags", tags ? tags : json_object_new_object());
        json_add_i64(o, "registered_ts", true, ri->registered_ts_ms);
        json_add_i64(o, "ended_ts", ri->ended_ts_ms != 0, ri->ended_ts_ms);
        /* the state of a process that runs; an ended run's is how it ended */
        json_add_string(o, "proc_state",
                        ri->state == RUN_RUNNING && latest ? proc_state_name(latest->proc_state) : NULL);
        json_add_i64(o, "exit_code", ri->has_exit_code, ri->exit_code);
        json_add_i64(o, "exit_signal", ri->has_exit_signal, ri->exit_signal);
        json_object_object_add(o, "latest", latest ? render_sample(latest, latest_gpu) : NULL);
        /* a running tree's processes that are not the owner's to see */
        json_object *left = NULL;
        if (ri->has_left_out) {
                left = json_object_new_object();
                json_add_u64(left, "count", true, ri->left_out);
                json_add_string(left, "reason",
                                ri->left_out ? "another user's or not dumpable (su, sudo, a setuid program): what "
                                               "they do is not the run owner's to see, and they are not counted"
                                             : NULL);
        }
        json_object_object_add(o, "processes_left_out", left);
        if (!latest)
                json_object_put(latest_gpu);
        return o;
}

json_object *render_run_leak(const struct leak_report *r) {
        json_object *o = render_leak(&r->rss, r->pss ? "pss_anon_bytes" : "rss_anon_bytes");
        json_object_object_add(o, "gpu_mem", r->has_gpu ? render_leak(&r->gpu, "gpu_mem_bytes") : NULL);
        return o;
}

json_object *render_leak(const struct leak_state *l, const char *metric) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "suspected", json_object_new_boolean(l->suspected));
        json_object_object_add(o, "evaluated", json_object_new_boolean(l->evaluated));
        json_add_string(o, "metric", metric);
        json_add_double(o, "slope_bytes_per_s", l->evaluated, l->slope_bytes_per_s);
        json_add_double(o, "growth_bytes", l->evaluated, l->growth_bytes);
        json_add_double(o, "window_s", l->evaluated, l->window_s);
        json_add_double(o, "confidence", l->evaluated, l->confidence);
        json_add_i64(o, "since", l->evaluated && l->suspected, l->since_ms);
        json_add_i64(o, "suspected_at", l->suspected, l->suspected_at_ms);
        json_add_i64(o, "evaluated_ts", l->evaluated_ts_ms != 0, l->evaluated_ts_ms);
        json_add_string(o, "reason", l->reason);
        return o;
}

/* The fields of a summary from totals over wall_s seconds; cpu_s_over: the
 * span the CPU time was measured over (the average CPU divides by it);
 * leak_detected NULL leaves that field out. */
static json_object *render_totals(const struct run_totals *t, double wall, double cpu_over, const bool *leak_detected,
                                  double grid_g_per_kwh) {
        json_object *o = json_object_new_object();
        double cpu = (double)t->cpu_time_ns / NS_PER_SEC;
        json_add_double(o, "wall_time_s", wall >= 0, wall);
        json_add_double(o, "cpu_time_s", true, cpu);
        json_add_double(o, "user_time_s", true, (double)t->user_time_ns / NS_PER_SEC);
        json_add_double(o, "system_time_s", true, (double)t->system_time_ns / NS_PER_SEC);
        json_add_double(o, "cpu_util_avg_pct", cpu_over > 0, cpu_over > 0 ? cpu / cpu_over * 100.0 : 0);
        json_add_u64(o, "peak_rss_bytes", t->has_rss, t->peak_rss_bytes);
        json_add_u64(o, "final_rss_bytes", t->has_rss, t->final_rss_bytes);
        json_add_u64(o, "peak_pss_bytes", t->has_pss, t->peak_pss_bytes);
        json_add_u64(o, "final_pss_bytes", t->has_final_pss, t->final_pss_bytes);
        json_add_u64(o, "peak_gpu_mem_bytes", t->has_gpu_mem, t->peak_gpu_mem_bytes);
        json_add_double(o, "gpu_util_avg_pct", t->gpu_util_samples > 0,
                        t->gpu_util_samples ? t->gpu_util_sum_pct / (double)t->gpu_util_samples : 0);
        json_add_u64(o, "read_bytes", t->has_io, t->read_bytes);
        json_add_u64(o, "write_bytes", t->has_io, t->write_bytes);
        json_add_u64(o, "netns_rx_bytes", t->has_net, t->netns_rx_bytes);
        json_add_u64(o, "netns_tx_bytes", t->has_net, t->netns_tx_bytes);
        json_add_u64(o, "threads_max", t->samples > 0, t->threads_max);
        json_add_u64(o, "samples", true, t->samples);
        if (leak_detected)
                json_object_object_add(o, "leak_detected", json_object_new_boolean(*leak_detected));
        json_add_double(o, "energy_j", t->has_energy, t->energy_j);
        json_add_double(o, "co2_g", t->has_energy, t->energy_j / 3.6e6 * grid_g_per_kwh);
        return o;
}

json_object *render_summary(const struct run_info *ri, int64_t now_ms, double grid_g_per_kwh) {
        int64_t end = ri->ended_ts_ms ? ri->ended_ts_ms : now_ms;
        double wall = (double)(end - ri->registered_ts_ms) / 1000.0;
        return render_totals(&ri->totals, wall, wall, &ri->leak_detected, grid_g_per_kwh);
}

json_object *render_span_summary(const struct run_totals *t, int64_t from, int64_t until, int64_t base_ts,
                                 double grid_g_per_kwh) {
        bool any = t->samples > 0;
        json_object *o = render_totals(t, (double)(until - from) / 1000.0,
                                       any ? (double)(t->last_ts_ms - base_ts) / 1000.0 : 0, NULL, grid_g_per_kwh);
        /* no sample: nothing is known, not 0 */
        json_object_object_foreach(o, key, val) {
                (void)val;
                if (!any && !streq(key, "wall_time_s") && !streq(key, "samples"))
                        json_object_object_add(o, key, NULL);
        }
        json_add_i64(o, "from", true, from);
        json_add_i64(o, "until", true, until);
        return o;
}

json_object *render_window(const struct window_rates *w, double window_s, const struct op_aggs *ops, double span_s) {
        json_object *o = json_object_new_object();
        json_add_double(o, "window_s", true, window_s);
        json_add_i64(o, "from", true, w->from_ms);
        json_add_i64(o, "until", true, w->until_ms);
        json_add_u64(o, "samples", true, w->samples);
        json_add_double(o, "cpu_pct", w->has_cpu, w->cpu_pct);
        json_add_double(o, "read_bytes_per_s", w->has_io, w->read_bytes_per_s);
        json_add_double(o, "write_bytes_per_s", w->has_io, w->write_bytes_per_s);
        json_add_double(o, "netns_rx_bytes_per_s", w->has_net, w->netns_rx_bytes_per_s);
        json_add_double(o, "netns_tx_bytes_per_s", w->has_net, w->netns_tx_bytes_per_s);
        json_add_double(o, "gpu_util_pct", w->has_gpu, w->gpu_util_pct);
        json_object *jops = json_object_new_object();
        for (size_t i = 0; ops && i < ops->n; i++) {
                json_object *j = json_object_new_object();
                json_add_double(j, "count", true, ops->v[i].count);
                json_add_double(j, "per_s", span_s > 0, span_s > 0 ? ops->v[i].count / span_s : 0);
                json_object_object_add(jops, ops->v[i].op, j);
        }
        json_object_object_add(o, "ops", jops);
        return o;
}

json_object *render_gauge(const struct gauge_stat *g, bool stats) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "value", json_double_or_null(g->value));
        json_add_i64(o, "ts", true, g->ts_ms);
        if (stats) {
                json_object_object_add(o, "min", json_double_or_null(g->min));
                json_object_object_add(o, "max", json_double_or_null(g->max));
                json_add_u64(o, "count", true, g->count);
        }
        return o;
}

void render_gauge_point_text(struct json_text *t, const struct gauge_point *g) {
        struct json_fields f = { .text = t };
        json_text_open(t, '{');
        json_field_i64(&f, "ts", true, g->ts_ms);
        json_field_string(&f, "name", g->name);
        json_field_precise(&f, "value", true, g->value);
        json_text_close(t, '}');
}

void render_quantile_key(double q, char *buf, size_t size) {
        char num[32];
        snprintf(num, sizeof num, "%.3f", q);
        char *e = num + strlen(num);
        while (e > num && e[-1] == '0')
                *--e = 0;
        if (e > num && e[-1] == '.')
                *--e = 0;
        snprintf(buf, size, "p%s_ms", num);
}

/* Latencies keep 10 significant digits (the serializer's %.10g), not 3
 * decimals: a sub-microsecond timing must not print as 0. */
static void add_precise(json_object *o, const char *key, bool known, double v) {
        json_field_precise(&(struct json_fields){ .obj = o }, key, known, v);
}

/* An op's latency fields, into a json-c object or as text; per_s only
 * when per_s_known. */
static void latency_fields(const struct json_fields *f, const struct op_agg *a, const double *qs, size_t nq,
                           bool per_s_known, double per_s) {
        const struct hist *h = &a->h;
        bool any = h->count > 0;
        json_field_string(f, "category", a->category);
        json_field_u64(f, "count", true, h->count);
        json_field_precise(f, "total_ms", any, h->sum);
        json_field_precise(f, "mean_ms", any, hist_mean(h));
        json_field_precise(f, "stddev_ms", any, hist_stddev(h));
        json_field_precise(f, "min_ms", any, h->min);
        json_field_precise(f, "max_ms", any, h->max);
        for (size_t i = 0; i < nq; i++) {
                char key[40];
                render_quantile_key(qs[i], key, sizeof key);
                json_field_precise(f, key, any, hist_quantile(h, qs[i] / 100.0));
        }
        if (per_s_known)
                json_field_double(f, "per_s", true, per_s);
}

json_object *render_latency_op(const struct op_agg *a, const double *qs, size_t nq) {
        json_object *o = json_object_new_object();
        latency_fields(&(struct json_fields){ .obj = o }, a, qs, nq, false, 0);
        return o;
}

void render_latency_step_op(struct json_text *t, const struct op_agg *a, const double *qs, size_t nq, double per_s) {
        json_text_open(t, '{');
        latency_fields(&(struct json_fields){ .text = t }, a, qs, nq, true, per_s);
        json_text_close(t, '}');
}

json_object *render_slo(const struct slo *o, const struct hist *h) {
        bool any = h && h->count > 0;
        uint64_t over = any ? hist_count_above(h, o->target_ms) : 0;
        double p = any ? hist_quantile(h, o->percentile / 100.0) : 0;
        json_object *j = json_object_new_object();
        json_add_string(j, "op", o->op);
        add_precise(j, "target_ms", true, o->target_ms);
        add_precise(j, "percentile", true, o->percentile);
        json_add_u64(j, "count", true, any ? h->count : 0);
        json_add_u64(j, "over", any, over);
        add_precise(j, "over_share", any, any ? (double)over / (double)h->count : 0);
        add_precise(j, "percentile_ms", any, p);
        if (any)
                json_object_object_add(j, "met", json_object_new_boolean(p <= o->target_ms));
        else
                json_object_object_add(j, "met", NULL);
        return j;
}

json_object *render_health(const struct manager_stats *m) {
        json_object *o = json_object_new_object();
        uint64_t rss = 0;
        bool has_rss = metrics_self_rss(&rss);
        static const char *const reasons[] = { "database writes failing", "a listener is not accepting", "sampler late",
                                               "GET /metrics left series out over its limits "
                                               "(mlmond_metrics_left_out_total)",
                                               "the write-ahead log was damaged: committed data was lost (wal_damage; "
                                               "POST /v1/health/ack once seen to)" };
        json_object *why = json_object_new_array();
        for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
                if (m->health & (1u << i))
                        json_object_array_add(why, json_object_new_string(reasons[i]));
        json_add_string(o, "status", m->health ? "degraded" : "ok");
        json_object_object_add(o, "reasons", why);
        json_add_string(o, "version", MLMOND_VERSION);
        json_add_double(o, "uptime_s", true, (double)m->uptime_usec / 1e6);
        json_add_u64(o, "runs_active", true, m->n_runs);
        json_add_u64(o, "ticks", true, m->ticks);
        json_add_u64(o, "overruns", true, m->overruns);
        json_add_double(o, "last_tick_ms", m->ticks > 0, m->last_tick_ms);
        json_add_double(o, "self_cpu_pct", m->has_self_cpu, m->self_cpu_pct);
        json_add_u64(o, "self_rss_bytes", has_rss, rss);
        json_add_u64(o, "db_write_errors", true, m->db_write_errors);
        json_add_u64(o, "statsd_received", true, m->statsd_received);
        json_add_u64(o, "statsd_malformed", true, m->statsd_malformed);
        json_add_u64(o, "statsd_unmatched", true, m->statsd_unmatched);
        json_add_u64(o, "statsd_refused", true, m->statsd_refused);
        json_add_u64(o, "jobs_stalled", m->has_jobs_stalled, m->jobs_stalled);
        json_object *wal = NULL;
        if (m->wal.damaged) {
                /* with the header gone, where the log broke is unknown */
                bool frames = !m->wal.header;
                wal = json_object_new_object();
                json_add_i64(wal, "ts", true, m->wal.ts_ms);
                json_object_object_add(wal, "header_damaged", json_object_new_boolean(m->wal.header));
                json_add_u64(wal, "log_bytes", true, m->wal.log_bytes);
                json_add_u64(wal, "frames_replayed", frames, m->wal.replayed);
                json_add_u64(wal, "frames_lost", frames, m->wal.frames_lost);
                json_add_u64(wal, "transactions_lost", frames, m->wal.transactions_lost);
                json_add_string(wal, "copy", m->wal.copy && m->wal.copy[0] ? m->wal.copy : NULL);
        }
        json_object_object_add(o, "wal_damage", wal);
        return o;
}

json_object *render_system(const struct manager_stats *m) {
        const struct host_sample *h = &m->host;
        json_object *o = json_object_new_object();
        json_add_i64(o, "ts", h->ts_ms != 0, h->ts_ms);
        json_add_u64(o, "ncpus", h->ncpus > 0, h->ncpus);
        json_add_double(o, "cpu_pct", h->has_cpu_pct, h->cpu_pct);
        json_object *mem = json_object_new_object();
        json_add_u64(mem, "total_bytes", h->has_mem, h->mem.total_bytes);
        json_add_u64(mem, "available_bytes", h->has_mem && h->mem.has_available, h->mem.available_bytes);
        json_add_u64(mem, "used_bytes", h->has_mem && h->mem.has_available,
                     sat_sub_u64(h->mem.total_bytes, h->mem.available_bytes));
        json_add_u64(mem, "swap_total_bytes", h->has_mem, h->mem.swap_total_bytes);
        json_add_u64(mem, "swap_used_bytes", h->has_mem, sat_sub_u64(h->mem.swap_total_bytes, h->mem.swap_free_bytes));
        json_object_object_add(o, "memory", mem);
        json_object *load = json_object_new_object();
        json_add_double(load, "load1", h->has_load, h->load.load1);
        json_add_double(load, "load5", h->has_load, h->load.load5);
        json_add_double(load, "load15", h->has_load, h->load.load15);
        json_object_object_add(o, "load", load);
        const struct accel *a = m->accel;
        size_t nd = 0;
        const struct gpu_device *devs = a ? accel_devices(a, &nd) : NULL;
        json_object *darr = json_object_new_array_ext((int)nd);
        for (size_t i = 0; i < nd; i++)
                json_object_array_add(darr, render_device(&devs[i]));
        json_object_object_add(o, "devices", darr);
        json_add_i64(o, "devices_ts", a && accel_devices_ts(a) != 0, a ? accel_devices_ts(a) : 0);
        const struct gpu_device *pkg = a ? accel_package(a) : NULL;
        json_object *en = json_object_new_object();
        json_add_double(en, "package_power_w", pkg && pkg->has_power, pkg ? pkg->power_w : 0);
        json_add_double(en, "package_energy_j", pkg && pkg->has_energy, pkg ? pkg->energy_j : 0);
        json_add_double(en, "grid_g_per_kwh", true, m->grid_g_per_kwh);
        json_object_object_add(o, "energy", en);
        return o;
}

/* ---- the goodput ledger and the verdicts beside the leak --------------------- */

/* The parts in whole milliseconds, other taking what rounding leaves: they
 * add up to wall_ms exactly. */
static void goodput_parts(json_object *o, const double *ms, double wall_ms, bool known, bool has_startup) {
        double r[_GOODPUT_KIND_MAX], rest = round(wall_ms);
        for (int k = 0; k < _GOODPUT_KIND_MAX; k++)
                if (k != GOODPUT_OTHER) {
                        r[k] = round(ms[k]);
                        rest -= r[k];
                }
        r[GOODPUT_OTHER] = rest > 0 ? rest : 0;
        for (int k = 0; k < _GOODPUT_KIND_MAX; k++) {
                char key[32];
                snprintf(key, sizeof key, "%s_s", goodput_kind_name(k));
                json_add_double(o, key, known && (k != GOODPUT_STARTUP || has_startup), r[k] / 1000);
        }
}

json_object *render_goodput(const struct goodput_ledger *l) {
        json_object *o = json_object_new_object();
        json_add_i64(o, "from", true, l->from_ms);
        json_add_i64(o, "until", true, l->until_ms);
        json_add_double(o, "wall_s", true, round(l->wall_ms) / 1000);
        json_add_string(o, "step_op", l->step_op);
        goodput_parts(o, l->ms, l->wall_ms, l->has_split, l->has_startup);
        bool ideal = l->has_split && isfinite(l->ideal_step_ms);
        double pct = ideal && l->wall_ms > 0 ? 100 * l->steps * l->ideal_step_ms / l->wall_ms : 0;
        json_add_double(o, "steps", l->has_split, round(l->steps));
        json_add_double(o, "ideal_step_ms", ideal, l->ideal_step_ms);
        json_add_double(o, "goodput_pct", ideal && l->wall_ms > 0, pct > 100 ? 100 : pct);
        double step_h = l->ms[GOODPUT_STEP] / 3.6e6;
        json_add_double(o, "energy_j", l->has_energy, l->energy_j);
        json_add_double(o, "energy_per_step_j", l->has_energy && l->has_split && l->steps >= 1,
                        l->steps >= 1 ? l->energy_j / l->steps : 0);
        json_add_double(o, "energy_per_productive_hour_j", l->has_energy && l->has_split && step_h > 0,
                        step_h > 0 ? l->energy_j / step_h : 0);
        json_add_string(o, "reason", l->reason);
        return o;
}

json_object *render_goodput_point(int64_t ts_ms, const double *ms, double span_ms) {
        json_object *o = json_object_new_object();
        json_add_i64(o, "ts", true, ts_ms);
        goodput_parts(o, ms, span_ms, true, true);
        return o;
}

json_object *render_input_bound(const struct input_bound_verdict *v) {
        json_object *o = json_object_new_object();
        bool ev = v->evaluated;
        json_object_object_add(o, "flagged", json_object_new_boolean(v->flagged));
        json_object_object_add(o, "evaluated", json_object_new_boolean(ev));
        json_add_double(o, "share_pct", ev, v->share_pct);
        json_add_double(o, "data_wait_s", ev, v->data_wait_s);
        json_add_double(o, "step_s", ev, v->step_s);
        json_add_double(o, "window_s", true, v->window_s);
        json_add_u64(o, "workers", ev, v->workers);
        json_add_double(o, "workers_cpu_pct", ev && v->has_workers_cpu, v->workers_cpu_pct);
        json_add_double(o, "gpu_util_pct", ev && v->has_gpu, v->gpu_util_pct);
        json_add_i64(o, "since", v->flagged && v->since_ms, v->since_ms);
        json_add_i64(o, "evaluated_ts", v->evaluated_ms != 0, v->evaluated_ms);
        json_add_string(o, "reason", v->reason);
        return o;
}

json_object *render_gpu_idle(const struct gpu_idle_verdict *v) {
        json_object *o = json_object_new_object();
        char state[2] = { v->lingering_state, 0 };
        json_object_object_add(o, "flagged", json_object_new_boolean(v->flagged));
        json_object_object_add(o, "evaluated", json_object_new_boolean(v->evaluated));
        json_object_object_add(o, "lingering", json_object_new_boolean(v->lingering));
        json_add_string(o, "device", v->device[0] ? v->device : NULL);
        json_add_u64(o, "mem_bytes", v->has_mem, v->mem_bytes);
        json_add_double(o, "util_pct", v->has_util, v->util_pct);
        json_add_double(o, "idle_s", v->since_ms != 0, v->idle_s);
        json_add_i64(o, "since", v->since_ms != 0, v->since_ms);
        json_add_i64(o, "lingering_pid", v->lingering, v->lingering_pid);
        json_add_string(o, "lingering_state", v->lingering && state[0] ? state : NULL);
        json_add_i64(o, "evaluated_ts", v->evaluated_ms != 0, v->evaluated_ms);
        json_add_string(o, "reason", v->reason);
        return o;
}

json_object *render_oom(const struct oom_forecast *f) {
        const struct oom_limit *l = &f->limit;
        bool lim = l->source != OOM_NONE;
        json_object *o = json_object_new_object();
        json_add_double(o, "eta_s", f->known, f->eta_s);
        json_add_double(o, "slope_lo_bytes_per_s", f->slope_lo_bytes_per_s > 0, f->slope_lo_bytes_per_s);
        json_add_string(o, "limit", oom_source_name(l->source));
        json_add_u64(o, "limit_bytes", lim, l->limit_bytes);
        json_add_u64(o, "usage_bytes", lim && l->has_usage, l->usage_bytes);
        json_add_u64(o, "high_bytes", lim && l->has_high, l->high_bytes);
        json_add_double(o, "high_eta_s", f->has_high_eta, f->high_eta_s);
        json_add_string(o, "cgroup",
                        (l->source == OOM_MEMORY_MAX || l->source == OOM_LIMIT_IN_BYTES) ? l->where : NULL);
        json_add_string(o, "device", l->source == OOM_DEVICE ? l->where : NULL);
        json_add_string(o, "reason", f->reason);
        return o;
}

/* ---- GET /v1/overview, written as text -------------------------------------- */
/* A thousand runs are 600 KB of JSON: built as json-c objects (45 a run)
 * and printed, they took 30 to 70 ms of a 2-core machine; written straight
 * to the answer, a few. */

/* "key": with a comma before it unless it is the first of its object. */
static void text_key(FILE *f, bool *first, const char *key) {
        fprintf(f, "%s\"%s\":", *first ? "" : ",", key);
        *first = false;
}

/* A string (sanitized and escaped as json-c does), or null. */
static void text_string(FILE *f, bool *first, const char *key, const char *s) {
        text_key(f, first, key);
        json_object *j = s ? json_string_sanitized(s, strlen(s)) : NULL;
        fputs(j ? json_to_string(j) : "null", f);
        json_object_put(j);
}

/* A number rounded to decimals (as json_add_double rounds), or null. */
static void text_double(FILE *f, bool *first, const char *key, bool known, double v, int decimals) {
        double p = pow(10, decimals), r = known && isfinite(v) ? round(v * p) / p : NAN;
        text_key(f, first, key);
        if (isfinite(r))
                fprintf(f, "%.15g", r == 0 ? 0 : r);
        else
                fputs("null", f);
}

static void text_i64(FILE *f, bool *first, const char *key, bool known, int64_t v) {
        text_key(f, first, key);
        if (known)
                fprintf(f, "%" PRId64, v);
        else
                fputs("null", f);
}

static void text_bool(FILE *f, bool *first, const char *key, int v) {
        text_key(f, first, key);
        fputs(v < 0 ? "null" : v ? "true" : "false", f);
}

/* The few figures of a sample that a list of runs shows. */
static void text_sample_brief(FILE *f, const struct sample *s) {
        bool first = true;
        fputc('{', f);
        text_i64(f, &first, "ts", true, s->ts_ms);
        text_double(f, &first, "cpu_pct", s->has_cpu_pct, s->cpu_pct, 3);
        text_i64(f, &first, "rss_bytes", s->has_rss, (int64_t)s->rss_bytes);
        text_double(f, &first, "read_bytes_per_s", s->has_io_rate, s->read_bytes_per_s, 3);
        text_double(f, &first, "write_bytes_per_s", s->has_io_rate, s->write_bytes_per_s, 3);
        text_double(f, &first, "netns_rx_bytes_per_s", s->has_net_rate, s->netns_rx_bytes_per_s, 3);
        text_double(f, &first, "netns_tx_bytes_per_s", s->has_net_rate, s->netns_tx_bytes_per_s, 3);
        fputc('}', f);
}

static void text_spark(FILE *f, const struct overview_run *o, size_t npoints) {
        fprintf(f, "{\"from\":%" PRId64 ",\"cpu_pct\":[", o->spark_from);
        for (size_t k = 0; k < npoints; k++) {
                const struct spark_point *p = &o->spark[k];
                if (k > 0)
                        fputc(',', f);
                if (p->cpu_n)
                        fprintf(f, "%.15g", round(p->cpu_sum / (double)p->cpu_n * 100) / 100);
                else
                        fputs("null", f);
        }
        fputs("],\"rss_bytes\":[", f);
        for (size_t k = 0; k < npoints; k++) {
                const struct spark_point *p = &o->spark[k];
                if (k > 0)
                        fputc(',', f);
                if (p->rss_n)
                        fprintf(f, "%" PRId64, (int64_t)(p->rss_sum / (double)p->rss_n));
                else
                        fputs("null", f);
        }
        fputs("]}", f);
}

static void text_top_op(FILE *f, const struct op_agg *a, double covered_s) {
        bool timed = a->h.count > 0, first = true;
        fputc('{', f);
        text_string(f, &first, "op", a->op);
        text_string(f, &first, "category", a->category);
        text_double(f, &first, "count", true, a->count, 3);
        text_double(f, &first, "per_s", covered_s > 0, covered_s > 0 ? a->count / covered_s : 0, 3);
        text_double(f, &first, "total_ms", timed, a->h.sum, 3);
        text_double(f, &first, "p99_ms", timed, timed ? hist_quantile(&a->h, 0.99) : 0, 3);
        fputc('}', f);
}

static void render_overview_run(FILE *f, const struct overview_run *o, size_t npoints) {
        const struct run_info *ri = &o->info;
        bool first = true;
        fputc('{', f);
        text_i64(f, &first, "id", true, ri->id);
        text_i64(f, &first, "pid", true, ri->pid);
        text_string(f, &first, "name", ri->name);
        text_string(f, &first, "comm", ri->comm);
        text_string(f, &first, "state", run_state_to_string(ri->state));
        text_string(f, &first, "proc_state",
                    ri->state == RUN_RUNNING && o->has_last ? proc_state_name(o->last.proc_state) : NULL);
        text_i64(f, &first, "exit_code", ri->has_exit_code, ri->exit_code);
        text_i64(f, &first, "exit_signal", ri->has_exit_signal, ri->exit_signal);
        text_key(f, &first, "tags");
        json_object *tags = ri->tags_json ? json_tokener_parse(ri->tags_json) : NULL;
        fputs(json_object_is_type(tags, json_type_object) ? json_to_string(tags) : "{}", f);
        json_object_put(tags);
        text_i64(f, &first, "registered_ts", true, ri->registered_ts_ms);
        text_i64(f, &first, "ended_ts", ri->ended_ts_ms != 0, ri->ended_ts_ms);
        text_key(f, &first, "latest");
        if (o->has_last)
                text_sample_brief(f, &o->last);
        else
                fputs("null", f);
        /* the verdict of the series that is suspected, else of RSS */
        const struct leak_state *l = NULL;
        if (o->has_leak)
                l = o->leak.has_gpu && o->leak.gpu.suspected && !o->leak.rss.suspected ? &o->leak.gpu : &o->leak.rss;
        bool lf = true;
        text_key(f, &first, "leak");
        fputc('{', f);
        text_bool(f, &lf, "suspected", l && l->evaluated ? l->suspected : -1);
        text_bool(f, &lf, "detected", ri->leak_detected || (l && l->suspected));
        text_string(f, &lf, "reason", l && l->reason[0] ? l->reason : NULL);
        fputc('}', f);
        text_key(f, &first, "spark");
        text_spark(f, o, npoints);
        text_key(f, &first, "top_op");
        if (o->top)
                text_top_op(f, o->top, o->covered_s);
        else
                fputs("null", f);
        fputc('}', f);
}

void render_overview(FILE *f, const struct overview_doc *d) {
        bool first = true;
        fputc('{', f);
        text_i64(f, &first, "ts", true, d->ts_ms);
        text_double(f, &first, "spark_step_s", true, SPARK_STEP_MS / 1000.0, 3);
        text_double(f, &first, "window_s", true, d->window_s, 3);
        text_i64(f, &first, "running", true, (int64_t)d->n_running);
        text_key(f, &first, "runs");
        fputc('[', f);
        for (size_t i = 0; i < d->n; i++) {
                if (i > 0)
                        fputc(',', f);
                render_overview_run(f, &d->runs[i], d->npoints);
        }
        fputc(']', f);
        text_bool(f, &first, "truncated", d->truncated);
        text_key(f, &first, "jobs");
        fputs(json_to_string(d->jobs), f);
        text_i64(f, &first, "jobs_total", true, (int64_t)d->jobs_total);
        fputs("}\n", f);
}

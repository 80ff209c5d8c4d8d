/* SPDX-License-Identifier: MIT */
#include "http/render.h"
#include "http/metrics-host.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "collect/accel/accel.h"
#include "json-util.h"
#include "analyze/leakwatch.h"
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
                                               "(mlmond_metrics_left_out_total)" };
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

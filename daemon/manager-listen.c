/* SPDX-License-Identifier: MIT */
/* The manager as the HTTP and StatsD layers see it: its table of
 * operations, and their listeners started on the sockets systemd passed
 * where it did. */
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "manager.h"
#include "http/api.h"
#include "ingest/ingest.h"
#include "store/walcheck.h"

int manager_listen_fd(const char *fdname, int type, const char *key, const char *want) {
        char **names = NULL;
        int n = sd_listen_fds_with_names(false, &names), fd = -ENOENT;
        for (int i = 0; i < n; i++) {
                if (fd < 0 && streq(names[i], fdname)) {
                        if (sd_is_socket(SD_LISTEN_FDS_START + i, AF_UNSPEC, type, -1) > 0)
                                fd = SD_LISTEN_FDS_START + i;
                        else
                                log_warning("%s: the socket systemd passed as '%s' is of the wrong type; ignored", key,
                                            fdname);
                }
                free(names[i]);
        }
        free(names);
        if (fd < 0)
                return -ENOENT;
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
                (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        struct sockaddr_storage ss = { .ss_family = AF_UNSPEC };
        socklen_t sl = sizeof ss;
        char host[INET6_ADDRSTRLEN] = "?", serv[8] = "?", addr[INET6_ADDRSTRLEN + 10];
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
                (void)getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv,
                                  NI_NUMERICHOST | NI_NUMERICSERV);
        snprintf(addr, sizeof addr, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
        log_info("%s: on %s, the socket systemd passed as '%s'", key, addr, fdname);
        if (!streq(addr, want))
                log_notice("%s: the configured %s is not used: under systemd the socket unit sets the address", key,
                           want);
        return fd;
}

/* ---- what the HTTP and StatsD layers may ask ------------------------------ */

static int op_register(void *userdata, const struct register_request *req, const struct caller *who, int64_t *ret_id,
                       char *err, size_t errlen) {
        return manager_register(userdata, req, who->is_root, who->uid, ret_id, err, errlen);
}

static int op_unregister(void *userdata, int64_t id, const struct caller *who, char *err, size_t errlen) {
        return manager_unregister(userdata, id, who->is_root, who->uid, err, errlen);
}

static void run_ref_of(const struct run *r, struct run_ref *ret) {
        *ret = (struct run_ref){ .id = r->info.id, .pid = r->info.pid, .has_uid = r->info.has_uid, .uid = r->info.uid };
}

static int op_observe(void *userdata, int64_t id, enum op_kind kind, const char *op, size_t op_len,
                      const char *category, size_t category_len, double value, double rate) {
        struct run *r = manager_find_run(userdata, id);
        if (!r)
                return -ENOENT;
        return manager_observe(userdata, r, kind, op, op_len, category, category_len, value, rate);
}

static int op_op_category(void *userdata, int64_t id, const char *op, char *buf, size_t size) {
        struct run *r = manager_find_run(userdata, id);
        const char *c = NULL;
        if (!r || ops_category(&r->ops, op, &c) <= 0)
                return -ENOENT;
        snprintf(buf, size, "%s", c ? c : "");
        return c ? 1 : 0;
}

static int op_mark(void *userdata, int64_t id, const char *label, int64_t *ret_ts) {
        return manager_mark(userdata, id, label, ret_ts);
}

static int op_sample_now(void *userdata, int64_t id, const struct caller *who, int64_t *ret_ts) {
        return manager_sample_now(userdata, id, who->is_root, who->uid, ret_ts);
}

static int op_exited(void *userdata, int64_t id, const struct caller *who, const struct exit_report *e) {
        return manager_exited(userdata, id, who->is_root, who->uid, e);
}

static void op_yield(void *userdata) {
        struct manager *m = userdata;
        /* the lines and marks a client sent before asking are in the answer */
        ingest_drain(m->ingest);
        manager_tick_if_due(m);
}

static int op_find_run(void *userdata, int64_t id, struct run_ref *ret) {
        struct run *r = manager_find_run(userdata, id);
        if (!r)
                return -ENOENT;
        run_ref_of(r, ret);
        return 0;
}

static int op_run_for_pid(void *userdata, int pid, struct run_ref *ret) {
        struct run *r = manager_run_for_pid(userdata, pid);
        if (!r)
                return -ENOENT;
        run_ref_of(r, ret);
        return 0;
}

static size_t op_running(void *userdata, int64_t after_id, struct run_ref *v, size_t max) {
        struct manager *m = userdata;
        size_t lo = 0, hi = m->n_runs, n = 0; /* m->runs is in id order */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (m->runs[mid]->info.id <= after_id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < m->n_runs && n < max; i++)
                run_ref_of(m->runs[i], &v[n++]);
        return n;
}

static int op_live(void *userdata, int64_t id, unsigned what, struct run_live *ret) {
        const struct run *r = manager_find_run(userdata, id);
        if (!r)
                return -ENOENT;
        struct run_live l = { .info = r->info, .n_ops = r->ops.n_open };
        l.info.name = l.info.comm = l.info.cmdline = l.info.tags_json = l.info.step_op = NULL;
        l.info.leak = NULL;
        int q = (what & RUN_LIVE_INFO) ? run_info_copy(&r->info, &l.info) : 0;
        const struct probe *p = r->probe;
        if (q == 0 && (what & RUN_LIVE_LAST) && p->has_last) {
                l.has_last = true;
                l.last = p->last;
                if (p->accel.n_uses > 0) {
                        l.uses = malloc(p->accel.n_uses * sizeof *l.uses);
                        if (l.uses) {
                                memcpy(l.uses, p->accel.uses, p->accel.n_uses * sizeof *l.uses);
                                l.n_uses = p->accel.n_uses;
                        } else
                                q = -ENOMEM;
                }
        }
        if (q == 0 && (what & RUN_LIVE_LEAK) && r->leak.pts) {
                l.has_leak = true;
                run_leak_report(r, &l.leak);
        }
        if (what & RUN_LIVE_VERDICTS)
                manager_verdicts_live(r, &l);
        if (q == 0 && (what & RUN_LIVE_GAUGES)) {
                l.gauges_live = r->gauges_live;
                q = gauge_values_copy(r->ops.gauge_last, r->ops.n_gauge_last, &l.gauges);
                if (q == 0)
                        l.n_gauges = r->ops.n_gauge_last;
        }
        if (q < 0) {
                run_live_done(&l);
                return q;
        }
        *ret = l;
        return 0;
}

static int op_live_ops(void *userdata, int64_t id, int64_t from, int64_t until, const char *op_filter,
                       struct op_aggs *a) {
        const struct run *r = manager_find_run(userdata, id);
        return r ? op_aggs_add_live(a, &r->ops, from, until, op_filter) : 0;
}

static int op_live_gauges(void *userdata, int64_t id, int64_t from, int64_t until, struct gauge_value **ret,
                          size_t *ret_n) {
        const struct run *r = manager_find_run(userdata, id);
        size_t n = 0;
        for (size_t i = 0; r && i < r->ops.n_gauges; i++)
                if (r->ops.gauges[i].ts >= from && r->ops.gauges[i].ts <= until)
                        n++;
        struct gauge_value *v = calloc(n ? n : 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0, k = 0; r && i < r->ops.n_gauges; i++) {
                const struct gauge_value *g = &r->ops.gauges[i];
                if (g->ts < from || g->ts > until)
                        continue;
                v[k] = (struct gauge_value){ .ts = g->ts, .name = strdup(g->name), .value = g->value };
                if (!v[k++].name) {
                        gauge_values_free(v, k);
                        return -ENOMEM;
                }
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static int op_run_pids(void *userdata, struct run_pid **ret, size_t *ret_n) {
        struct manager *m = userdata;
        size_t n = 0;
        for (size_t i = 0; i < m->n_runs; i++)
                n += m->runs[i]->info.children ? m->runs[i]->probe->n_members : 1;
        struct run_pid *v = calloc(n ? n : 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < m->n_runs; i++) {
                const struct run *r = m->runs[i];
                v[k++] = (struct run_pid){ r->info.id, r->info.pid };
                for (size_t j = 0; r->info.children && j < r->probe->n_members && k < n; j++)
                        if (r->probe->members[j].pid != r->info.pid)
                                v[k++] = (struct run_pid){ r->info.id, r->probe->members[j].pid };
        }
        *ret = v;
        *ret_n = k;
        return 0;
}

static int op_op_last(void *userdata, int64_t id, const char *op, int64_t *ret_op_ms, int64_t *ret_any_ms) {
        const struct run *r = manager_find_run(userdata, id);
        if (!r)
                return -ENOENT;
        *ret_op_ms = op ? ops_last_ms(&r->ops, op) : 0;
        *ret_any_ms = ops_last_ms(&r->ops, NULL);
        return 0;
}

static uint64_t op_data_generation(void *userdata) {
        struct manager *m = userdata;
        return m->data_generation;
}

static void op_stats(void *userdata, struct manager_stats *ret) {
        struct manager *m = userdata;
        const struct ingest_counters *c = ingest_counters(m->ingest);
        const struct wal_damage *w = store_wal_damage(m->store, now_realtime_ms());
        *ret = (struct manager_stats){
                .uptime_usec = now_usec(CLOCK_MONOTONIC) - m->started_mono,
                .ticks = m->ticks,
                .overruns = m->overruns,
                .last_tick_ms = m->last_tick_ms,
                .has_self_cpu = m->has_self_cpu,
                .self_cpu_pct = m->self_cpu_pct,
                .db_write_errors = store_write_errors(m->store) + m->tick_errors,
                .health = manager_health(m),
                .statsd_received = c->received,
                .statsd_malformed = c->malformed,
                .statsd_unmatched = c->unmatched,
                .statsd_refused = c->refused,
                .host = m->host,
                .has_host_cpu = m->has_host_prev,
                .host_cpu = m->host_prev_cpu,
                .clk_tck = m->collect.clk_tck,
                .accel = m->accel,
                .grid_g_per_kwh = m->config.grid_g_per_kwh,
                .n_runs = m->n_runs,
        };
        if (w) {
                ret->health |= HEALTH_WAL_DAMAGED;
                ret->wal = (struct health_wal){ .damaged = true,
                                                .ts_ms = w->ts_ms,
                                                .header = w->header,
                                                .log_bytes = w->log_bytes,
                                                .replayed = w->replayed,
                                                .frames_lost = w->frames_lost,
                                                .transactions_lost = w->transactions_lost,
                                                .copy = w->copy };
        }
}

static int op_health_ack(void *userdata, const struct caller *who) {
        struct manager *m = userdata;
        if (!who->is_root)
                return -EPERM;
        int r = store_wal_damage_ack(m->store);
        if (r > 0) {
                log_notice("database: the damaged write-ahead log was acknowledged");
                m->data_generation++; /* a cached /v1/health says otherwise */
        }
        return r;
}

static const struct manager_ops manager_ops = {
        .register_run = op_register,
        .unregister_run = op_unregister,
        .observe = op_observe,
        .op_category = op_op_category,
        .mark = op_mark,
        .sample_now = op_sample_now,
        .exited = op_exited,
        .find_run = op_find_run,
        .run_for_pid = op_run_for_pid,
        .running = op_running,
        .live = op_live,
        .live_ops = op_live_ops,
        .live_gauges = op_live_gauges,
        .op_last = op_op_last,
        .run_pids = op_run_pids,
        .data_generation = op_data_generation,
        .stats = op_stats,
        .health_ack = op_health_ack,
        .yield = op_yield,
};

/* The HTTP API and the StatsD listeners, on the sockets systemd passed
 * where it did (socket activation), else on their own. */
int manager_start_listeners(struct manager *m, char *err, size_t errlen) {
        const struct manager_link link = { .ops = &manager_ops, .userdata = m };
        const struct api_options ao = {
                .event = m->event,
                .config = &m->config,
                .store = m->store,
                .tcp_fd = address_off(m->config.listen)
                                  ? -1
                                  : manager_listen_fd("http", SOCK_STREAM, "listen", m->config.listen),
                .manager = link,
        };
        int q = api_new(&ao, &m->api, err, errlen);
        if (q < 0)
                return q;
        const struct ingest_options io = {
                .event = m->event,
                .proc_root = m->config.proc_root,
                .unix_path = m->config.statsd_socket,
                .udp = m->config.statsd_udp,
                .udp_fd = address_off(m->config.statsd_udp)
                                  ? -1
                                  : manager_listen_fd("statsd-udp", SOCK_DGRAM, "statsd_udp", m->config.statsd_udp),
                .manager = link,
        };
        return ingest_new(&io, &m->ingest, err, errlen);
}

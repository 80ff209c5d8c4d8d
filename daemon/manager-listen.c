/* SPDX-License-Identifier: MIT */
/* The manager as the HTTP and StatsD layers see it: its table of
 * operations, and their listeners started on the sockets systemd passed
 * where it did. */
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "manager.h"
#include "http/api.h"
#include "ingest/ingest.h"

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

static int op_observe(void *userdata, struct run *r, enum op_kind kind, const char *op, size_t op_len,
                      const char *category, size_t category_len, double value, double rate) {
        return manager_observe(userdata, r, kind, op, op_len, category, category_len, value, rate);
}

static int op_mark(void *userdata, int64_t id, const char *label, int64_t *ret_ts) {
        return manager_mark(userdata, id, label, ret_ts);
}

static void op_yield(void *userdata) {
        struct manager *m = userdata;
        /* the lines and marks a client sent before asking are in the answer */
        ingest_drain(m->ingest);
        manager_tick_if_due(m);
}

static struct run *op_find_run(void *userdata, int64_t id) {
        return manager_find_run(userdata, id);
}

static struct run *op_run_for_pid(void *userdata, int pid) {
        return manager_run_for_pid(userdata, pid);
}

static struct run *const *op_running(void *userdata, size_t *ret_n) {
        struct manager *m = userdata;
        *ret_n = m->n_runs;
        return m->runs;
}

static uint64_t op_data_generation(void *userdata) {
        struct manager *m = userdata;
        return m->data_generation;
}

static void op_stats(void *userdata, struct manager_stats *ret) {
        struct manager *m = userdata;
        const struct ingest_counters *c = ingest_counters(m->ingest);
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
                .runs = m->runs,
                .n_runs = m->n_runs,
        };
}

static const struct manager_ops manager_ops = {
        .register_run = op_register,
        .unregister_run = op_unregister,
        .observe = op_observe,
        .mark = op_mark,
        .find_run = op_find_run,
        .run_for_pid = op_run_for_pid,
        .running = op_running,
        .data_generation = op_data_generation,
        .stats = op_stats,
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

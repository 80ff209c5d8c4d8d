/* SPDX-License-Identifier: MIT */
#include "manager.h"

#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "collect/accel/accel.h"
#include "http/api.h"
#include "ingest/ingest.h"
#include "json-util.h"
#include "http/render.h"
#include "version.h"

/* Retention deletes at most this many rows per transaction, so the sampler
 * never waits long for the write lock (a single 1 M-row DELETE blocked a
 * sampler for 3.5 s; 5 000-row batches for 110 ms: reliability.md §1.2). */
#define RETENTION_BATCH 5000
#define MAINTENANCE_PERIOD_USEC (5 * USEC_PER_SEC)
/* Two runs due within this much of each other are sampled in the same tick
 * (one transaction), so runs registered a few ms apart share ticks. */
#define TICK_SLACK_USEC (5 * USEC_PER_MSEC)

/* Runs are due on a grid of multiples of their interval on the monotonic
 * clock, not one interval after their own registration: 1000 runs registered
 * over half a second then share one tick (one wake-up, one transaction) per
 * interval instead of spreading over 70 small ones, which cost 7-8 us more
 * per sample (tests/bench/sampling.sh). Runs of 500ms and 1s share every
 * other tick. */
/* A run's totals live in memory (the API reads them there) and are written
 * to its row every few ticks and when it ends: the UPDATE per sample cost
 * 1.5 us, more than the INSERT. After a crash the samples written since are
 * folded back in (store_catch_up_totals), so nothing is lost. */
#define TOTALS_PERSIST_TICKS 10

static usec_t grid_next(usec_t after, usec_t interval) {
        return (after / interval + 1) * interval;
}

static void manager_set_status(struct manager *m, const char *fmt, ...) _printf_(2, 3);
static void store_run_ops(struct manager *m, struct run *r);
void manager_forget_senders(struct manager *m);
static void store_leak_json(struct manager *m, struct run *r);
static int store_sample(struct manager *m, struct run *r, const struct sample *s);

int manager_new(struct manager **ret) {
        struct manager *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        int r = config_init_defaults(&m->config);
        if (r < 0) {
                free(m);
                return r;
        }
        m->collect.clk_tck = sysconf(_SC_CLK_TCK);
        m->collect.page_size = sysconf(_SC_PAGESIZE);
        if (m->collect.clk_tck <= 0)
                m->collect.clk_tck = 100;
        *ret = m;
        return 0;
}

static void manager_drop_run(struct manager *m, size_t i) {
        run_free(m->runs[i]);
        memmove(&m->runs[i], &m->runs[i + 1], (m->n_runs - i - 1) * sizeof *m->runs);
        m->n_runs--;
}

void manager_free(struct manager *m) {
        if (!m)
                return;
        api_free(m->api);
        ingest_free(m->ingest);
        while (m->n_runs > 0)
                manager_drop_run(m, m->n_runs - 1);
        free(m->runs);
        sd_event_source_disable_unref(m->tick_source);
        sd_event_source_disable_unref(m->maintenance_source);
        sd_event_source_disable_unref(m->watchdog_source);
        store_close(m->store);
        accel_free(m->accel);
        collect_ctx_done(&m->collect);
        free((char *)m->collect.proc_root);
        sd_event_unref(m->event);
        config_done(&m->config);
        free(m->config_path);
        if (m->overrides)
                for (char **o = m->overrides; *o; o++)
                        free(*o);
        free(m->overrides);
        free(m->pid_cache);
        free(m);
}

struct run *manager_find_run(struct manager *m, int64_t id) {
        for (size_t i = 0; i < m->n_runs; i++)
                if (m->runs[i]->info.id == id)
                        return m->runs[i];
        return NULL;
}

static size_t run_index(struct manager *m, struct run *r) {
        for (size_t i = 0; i < m->n_runs; i++)
                if (m->runs[i] == r)
                        return i;
        return SIZE_MAX;
}

static void manager_set_status(struct manager *m, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->status_line, sizeof m->status_line, fmt, ap);
        va_end(ap);
        sd_notifyf(false, "STATUS=%s", m->status_line);
}

static void rearm_tick(struct manager *m, usec_t now) {
        usec_t next = m->host_next_due_usec;
        for (size_t i = 0; i < m->n_runs; i++)
                if (m->runs[i]->next_due_usec < next)
                        next = m->runs[i]->next_due_usec;
        if (next < now)
                next = now;
        sd_event_source_set_time(m->tick_source, next);
        sd_event_source_set_enabled(m->tick_source, SD_EVENT_ONESHOT);
}

/* Ends a run: a last sample where the exited process can still be read (a
 * zombie shows its final CPU time and I/O: a job shorter than one interval
 * is then still measured), the state change stored, fds closed, dropped
 * from the active set. */
static int manager_end_run(struct manager *m, struct run *r, enum run_state state, bool final_sample) {
        int64_t now_ms = now_realtime_ms();
        struct sample s;
        bool have = false;
        if (final_sample) {
                collect_ctx_new_tick(&m->collect);
                have = run_sample(&m->collect, r, now_usec(CLOCK_MONOTONIC), now_ms, true, &s) == 0;
        }
        int q = store_begin(m->store);
        if (q == 0) {
                if (have) {
                        run_totals_add(&r->info.totals, &s);
                        if (store_sample(m, r, &s) < 0)
                                m->tick_errors++;
                }
                if (store_update_run_totals(m->store, r->info.id, &r->info.totals) < 0)
                        m->tick_errors++;
                ops_rotate(&r->ops, INT64_MAX);
                store_run_ops(m, r);
                store_leak_json(m, r);
                q = store_update_run_state(m->store, r->info.id, state, now_ms);
                if (q == 0)
                        q = store_commit(m->store);
                else
                        store_rollback(m->store);
        }
        if (q < 0)
                m->tick_errors++;
        log_debug("run %lld (pid %d) %s", (long long)r->info.id, r->info.pid, run_state_to_string(state));
        m->data_generation++;
        manager_forget_senders(m);
        size_t i = run_index(m, r);
        if (i != SIZE_MAX)
                manager_drop_run(m, i);
        return q;
}

static void sample_host(struct manager *m, int64_t now_ms) {
        struct host_sample h = { .ts_ms = now_ms };
        struct proc_cpu_total cpu;
        if (proc_read_host_cpu(m->config.proc_root, &cpu) == 0) {
                h.ncpus = cpu.ncpus;
                if (m->has_host_prev) {
                        uint64_t busy_now = cpu.user + cpu.nice + cpu.system + cpu.irq + cpu.softirq + cpu.steal;
                        uint64_t all_now = busy_now + cpu.idle + cpu.iowait;
                        const struct proc_cpu_total *p = &m->host_prev_cpu;
                        uint64_t busy_prev = p->user + p->nice + p->system + p->irq + p->softirq + p->steal;
                        uint64_t all_prev = busy_prev + p->idle + p->iowait;
                        uint64_t d_all = sat_sub_u64(all_now, all_prev);
                        if (d_all > 0) {
                                h.has_cpu_pct = true;
                                h.cpu_pct = 100.0 * (double)sat_sub_u64(busy_now, busy_prev) / (double)d_all;
                        }
                }
                m->host_prev_cpu = cpu;
                m->has_host_prev = true;
        }
        h.has_mem = proc_read_meminfo(m->config.proc_root, &h.mem) == 0;
        h.has_load = proc_read_loadavg(m->config.proc_root, &h.load) == 0;
        m->host = h;
}

static void store_leak_json(struct manager *m, struct run *r) {
        _cleanup_json_ json_object *j = render_run_leak(&r->leak, &r->leak_gpu, r->info.registered_ts_ms);
        if (store_update_run_leak(m->store, r->info.id, json_to_string(j)) < 0)
                m->tick_errors++;
}

/* Feeds one memory series to its leak watch (inside the tick's
 * transaction): a change of verdict is stored and logged. */
static void leak_feed(struct manager *m, struct run *r, struct leakwatch *w, const char *metric, const struct sample *s,
                      uint64_t bytes) {
        double t_s = (double)(s->ts_ms - r->info.registered_ts_ms) / 1000.0;
        enum leakwatch_change c = leakwatch_add(w, &m->leak_params, t_s, s->ts_ms, (double)bytes,
                                                (int64_t)(m->config.leak_clear_after_usec / USEC_PER_MSEC));
        if (c == LEAKWATCH_NONE)
                return;
        bool suspected = c == LEAKWATCH_SUSPECTED;
        if (store_insert_leak_event(m->store, r->info.id, s->ts_ms, suspected, metric, &w->v) < 0)
                m->tick_errors++;
        if (suspected)
                r->info.leak_detected = true;
        store_leak_json(m, r);
        log_notice("run %lld (pid %d): %s leak %s: %s", (long long)r->info.id, r->info.pid, metric,
                   suspected ? "suspected" : "cleared", w->v.reason);
}

/* Anonymous RSS always; GPU memory once the run has some (its watch starts
 * then, with the grace). */
static void leak_step(struct manager *m, struct run *r, const struct sample *s) {
        if (s->has_rss)
                leak_feed(m, r, &r->leak, "rss_anon_bytes", s, s->rss_anon_bytes);
        if (s->has_gpu_mem && s->gpu_mem_bytes > 0) {
                if (!r->leak_gpu.pts) {
                        if (leakwatch_init(&r->leak_gpu, &m->leak_params) < 0)
                                return;
                        leakwatch_mark(&r->leak_gpu, (double)(s->ts_ms - r->info.registered_ts_ms) / 1000.0);
                }
                leak_feed(m, r, &r->leak_gpu, "gpu_mem_bytes", s, s->gpu_mem_bytes);
        }
}

/* A sample with the run's per-device use beside it. */
static int store_sample(struct manager *m, struct run *r, const struct sample *s) {
        _cleanup_json_ json_object *gpu = r->accel.n_uses ? render_gpu_uses(r->accel.uses, r->accel.n_uses) : NULL;
        return store_insert_sample(m->store, r->info.id, s, gpu ? json_to_string(gpu) : NULL);
}

/* Writes a run's closed op slices and gauges (inside a transaction) and
 * forgets them. */
static void store_run_ops(struct manager *m, struct run *r) {
        for (size_t j = 0; j < r->ops.n_done; j++)
                if (store_insert_op_slice(m->store, r->info.id, &r->ops.done[j]) < 0)
                        m->tick_errors++;
        for (size_t j = 0; j < r->ops.n_gauges; j++)
                if (store_insert_gauge(m->store, r->info.id, &r->ops.gauges[j]) < 0)
                        m->tick_errors++;
        ops_clear_done(&r->ops);
}

/* Every device's latest counters, the CPU package's among them. */
static void store_devices(struct manager *m, int64_t now_ms) {
        size_t n = 0;
        const struct gpu_device *d = accel_devices(m->accel, &n);
        const struct gpu_device *pkg = accel_package(m->accel);
        for (size_t i = 0; i <= n; i++) {
                const struct gpu_device *x = i < n ? &d[i] : pkg;
                if (!x)
                        continue;
                _cleanup_json_ json_object *det = render_device_detail(x);
                if (store_insert_device_sample(m->store, now_ms, x, json_to_string(det)) < 0)
                        m->tick_errors++;
        }
}

/* One tick: sample every due run, store all of it in one transaction. */
static int manager_tick(struct manager *m) {
        usec_t start = now_usec(CLOCK_MONOTONIC);
        int64_t now_ms = now_realtime_ms();
        bool in_txn = false;

        collect_ctx_new_tick(&m->collect);
        if (start + TICK_SLACK_USEC >= m->host_next_due_usec) {
                sample_host(m, now_ms);
                m->host_next_due_usec = grid_next(start, m->config.interval_usec);
        }
        if (accel_tick_begin(m->accel, start)) {
                /* devices read: store them, and give each run its share of
                 * the energy spent since the previous read */
                in_txn = store_begin(m->store) == 0;
                if (!in_txn)
                        m->tick_errors++;
                else
                        store_devices(m, now_ms);
                for (size_t i = 0; i < m->n_runs; i++)
                        accel_run_energy(m->accel, &m->runs[i]->accel, m->runs[i]->last.cpu_time_ns);
        }

        for (size_t i = 0; i < m->n_runs;) {
                struct run *r = m->runs[i];
                if (r->next_due_usec > start + TICK_SLACK_USEC) {
                        i++;
                        continue;
                }
                struct sample s;
                int q = run_sample(&m->collect, r, start, now_ms, false, &s);
                if (q == -ESRCH) {
                        if (in_txn && store_update_run_state(m->store, r->info.id, RUN_EXITED, now_ms) < 0)
                                m->tick_errors++;
                        if (!in_txn) {
                                manager_end_run(m, r, RUN_EXITED, false);
                                continue;
                        }
                        manager_drop_run(m, i);
                        continue;
                }
                usec_t interval = (usec_t)r->info.interval_ms * USEC_PER_MSEC;
                r->next_due_usec += interval;
                if (r->next_due_usec <= start) {
                        m->overruns++;
                        r->next_due_usec = grid_next(start, interval);
                }
                i++;
                if (q < 0) {
                        log_debug_errno(q, "run %lld: sampling failed: %m", (long long)r->info.id);
                        continue;
                }
                if (!in_txn) {
                        if (store_begin(m->store) < 0) {
                                m->tick_errors++;
                                continue;
                        }
                        in_txn = true;
                }
                run_totals_add(&r->info.totals, &s);
                leak_step(m, r, &s);
                if (r->identity_changed &&
                    store_update_run_identity(m->store, r->info.id, r->info.comm, r->info.cmdline) == 0)
                        r->identity_changed = false;
                if (store_sample(m, r, &s) < 0 || (r->ticks % TOTALS_PERSIST_TICKS == 0 &&
                                                   store_update_run_totals(m->store, r->info.id, &r->info.totals) < 0))
                        m->tick_errors++;
        }
        /* what the applications reported: closed slices and gauges */
        for (size_t i = 0; i < m->n_runs; i++) {
                struct run *r = m->runs[i];
                ops_rotate(&r->ops, now_ms);
                if (r->ops.n_done == 0 && r->ops.n_gauges == 0)
                        continue;
                if (!in_txn) {
                        if (store_begin(m->store) < 0) {
                                m->tick_errors++;
                                break;
                        }
                        in_txn = true;
                }
                store_run_ops(m, r);
        }
        if (in_txn && store_commit(m->store) < 0)
                m->tick_errors++;
        if (accel_per_process(m->accel)) {
                /* a client is read only when its run is sampled: keep it
                 * for two of the longest intervals */
                usec_t longest = m->config.interval_usec;
                for (size_t i = 0; i < m->n_runs; i++)
                        if ((usec_t)m->runs[i]->info.interval_ms * USEC_PER_MSEC > longest)
                                longest = (usec_t)m->runs[i]->info.interval_ms * USEC_PER_MSEC;
                accel_tick_end(m->accel, 2 * longest);
        }

        usec_t end = now_usec(CLOCK_MONOTONIC);
        if (in_txn)
                m->data_generation++;
        m->ticks++;
        m->last_tick_ms = (double)(end - start) / 1000.0;
        m->last_tick_end_mono = end;
        rearm_tick(m, end);
        return 0;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        return manager_tick(userdata);
}

/* The pidfd turns readable when the process exits: end the run now rather
 * than at its next tick. */
static int on_pidfd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct run *r = userdata;
        manager_end_run(r->owner, r, RUN_EXITED, true);
        return 0;
}

static int run_watch_exit(struct manager *m, struct run *r) {
        r->owner = m;
        if (r->pidfd < 0)
                return 0; /* fixture root: exit is seen at the next tick */
        int q = sd_event_add_io(m->event, &r->exit_source, r->pidfd, EPOLLIN, on_pidfd, r);
        if (q < 0)
                return log_warning_errno(q, "cannot watch pid %d: %m", r->info.pid);
        return 0;
}

static int manager_add_run(struct manager *m, struct run *r) {
        struct run **n = realloc(m->runs, (m->n_runs + 1) * sizeof *n);
        if (!n)
                return -ENOMEM;
        m->runs = n;
        m->runs[m->n_runs++] = r;
        return 0;
}

static bool valid_name(const char *s) {
        size_t l = strlen(s);
        return l > 0 && l <= 128 && utf8_is_valid(s, l);
}

int manager_register(struct manager *m, const struct register_request *req, bool caller_is_root, uid_t caller_uid,
                     int64_t *ret_id, char *err, size_t errlen) {
        struct run *r = NULL;
        struct proc_identity id;
        int q;

        if (req->name && !valid_name(req->name)) {
                snprintf(err, errlen, "name: must be 1 to 128 bytes of UTF-8");
                return -EINVAL;
        }
        if (req->interval_usec && (req->interval_usec < MIN_INTERVAL_USEC || req->interval_usec > MAX_INTERVAL_USEC)) {
                snprintf(err, errlen, "interval: must be between 100ms and 1h");
                return -EINVAL;
        }
        if (m->n_runs >= m->config.max_runs) {
                snprintf(err, errlen, "too many runs (max_runs = %u)", m->config.max_runs);
                return -EUSERS;
        }
        q = run_attach(&m->collect, req->pid, 0, &r, &id);
        if (q == -EINVAL) {
                snprintf(err, errlen, "%d is a thread of process %d: register the process", req->pid, id.tgid);
                return -EINVAL;
        }
        if (q == -ESRCH || q == -ENOENT) {
                snprintf(err, errlen, "no such process: %d", req->pid);
                return -ESRCH;
        }
        if (q < 0) {
                snprintf(err, errlen, "cannot read process %d: %s", req->pid, strerror(-q));
                return q;
        }
        if (id.tgid != req->pid) {
                snprintf(err, errlen, "%d is a thread of process %d: register the process", req->pid, id.tgid);
                run_free(r);
                return -EINVAL;
        }
        /* What ptrace_may_access(PTRACE_MODE_READ) would allow the caller
         * itself: same real, effective, saved and fs uid, and dumpable. */
        if (!caller_is_root) {
                if (id.uid_real != caller_uid || id.uid_effective != caller_uid || id.uid_saved != caller_uid ||
                    id.uid_fs != caller_uid || !id.dumpable) {
                        snprintf(err, errlen, "process %d is not yours to monitor (uid %u, %sdumpable)", req->pid,
                                 (unsigned)id.uid_real, id.dumpable ? "" : "not ");
                        run_free(r);
                        return -EPERM;
                }
                unsigned mine = 0;
                for (size_t i = 0; i < m->n_runs; i++)
                        if (m->runs[i]->info.has_uid && m->runs[i]->info.uid == caller_uid)
                                mine++;
                if (mine >= m->config.max_runs_per_uid) {
                        snprintf(err, errlen, "too many runs for uid %u (max_runs_per_uid = %u)", (unsigned)caller_uid,
                                 m->config.max_runs_per_uid);
                        run_free(r);
                        return -EUSERS;
                }
        }
        for (size_t i = 0; i < m->n_runs; i++)
                if (m->runs[i]->info.pid == req->pid && m->runs[i]->info.start_time_ticks == id.start_ticks) {
                        snprintf(err, errlen, "process %d is already registered as run %lld", req->pid,
                                 (long long)m->runs[i]->info.id);
                        *ret_id = m->runs[i]->info.id;
                        run_free(r);
                        return -EEXIST;
                }

        struct run_info *ri = &r->info;
        char *cmd = NULL;
        proc_read_cmdline(r->dirfd, 4096, &cmd);
        ri->cmdline = cmd;
        ri->comm = strdup(id.comm);
        ri->name = req->name ? strdup(req->name) : NULL;
        ri->tags_json = strdup(req->tags_json ? req->tags_json : "{}");
        if (!ri->comm || !ri->tags_json || (req->name && !ri->name)) {
                run_free(r);
                return -ENOMEM;
        }
        memcpy(ri->boot_id, m->boot_id, sizeof ri->boot_id);
        usec_t interval = req->interval_usec ? req->interval_usec : m->config.interval_usec;
        ri->interval_ms = (int64_t)(interval / USEC_PER_MSEC);
        ri->children = req->children;
        ri->state = RUN_RUNNING;
        ri->registered_ts_ms = now_realtime_ms();

        /* The baseline reading: counters from here on are the run's own. */
        usec_t now = now_usec(CLOCK_MONOTONIC);
        struct sample s;
        q = run_sample(&m->collect, r, now, ri->registered_ts_ms, false, &s);
        if (q < 0) {
                snprintf(err, errlen, "no such process: %d", req->pid);
                run_free(r);
                return -ESRCH;
        }
        run_totals_add(&ri->totals, &s);
        r->identity_changed = false; /* the row is written with the current comm below */
        if (leakwatch_init(&r->leak, &m->leak_params) < 0) {
                run_free(r);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        leak_step(m, r, &s);
        q = store_begin(m->store);
        if (q == 0) {
                if (store_insert_run(m->store, ri) < 0 || store_sample(m, r, &s) < 0 ||
                    store_update_run_totals(m->store, ri->id, &ri->totals) < 0) {
                        store_rollback(m->store);
                        q = -EIO;
                } else
                        q = store_commit(m->store);
        }
        if (q < 0) {
                snprintf(err, errlen, "cannot store the run: database error");
                run_free(r);
                return -EIO;
        }
        /* the first grid point at least half an interval away, so the first
         * rate is over a reasonable span */
        r->next_due_usec = grid_next(now + interval / 2, interval);
        if (manager_add_run(m, r) < 0) {
                run_free(r);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        run_watch_exit(m, r);
        rearm_tick(m, now);
        m->data_generation++;
        /* a sender that was nobody's a moment ago may be this run's now */
        manager_forget_senders(m);
        char comm[PROC_COMM_MAX];
        str_printable(ri->comm, comm, sizeof comm);
        log_info("run %lld: registered pid %d (%s), interval %lldms%s", (long long)ri->id, ri->pid, comm,
                 (long long)ri->interval_ms, ri->children ? ", with children" : "");
        *ret_id = ri->id;
        return 0;
}

int manager_unregister(struct manager *m, int64_t id, bool caller_is_root, uid_t caller_uid, char *err, size_t errlen) {
        struct run *r = manager_find_run(m, id);
        if (!r) {
                snprintf(err, errlen, "run %lld is not running", (long long)id);
                return -EALREADY;
        }
        if (!caller_is_root && (!r->info.has_uid || r->info.uid != caller_uid)) {
                snprintf(err, errlen, "run %lld is not yours", (long long)id);
                return -EPERM;
        }
        if (manager_end_run(m, r, RUN_UNREGISTERED, false) < 0) {
                snprintf(err, errlen, "database error");
                return -EIO;
        }
        log_info("run %lld: unregistered", (long long)id);
        return 0;
}

/* Registrations survive a restart: a process still alive with the same boot
 * id, pid and start time goes on being sampled; any other becomes exited. */
static int manager_restore_runs(struct manager *m) {
        struct run_info *v = NULL;
        size_t n = 0;
        int q = store_load_running(m->store, &v, &n);
        if (q < 0)
                return log_error_errno(q, "cannot load runs from the database");
        usec_t now = now_usec(CLOCK_MONOTONIC);
        unsigned resumed = 0, ended = 0;
        for (size_t i = 0; i < n; i++) {
                struct run *r = NULL;
                bool alive = streq(v[i].boot_id, m->boot_id) &&
                             run_attach(&m->collect, v[i].pid, v[i].start_time_ticks, &r, NULL) == 0;
                if (!alive || m->n_runs >= m->config.max_runs) {
                        run_free(r);
                        store_catch_up_totals(m->store, &v[i]);
                        int64_t ended_ts = v[i].totals.last_ts_ms ? v[i].totals.last_ts_ms : now_realtime_ms();
                        if (store_begin(m->store) == 0) {
                                if (store_update_run_totals(m->store, v[i].id, &v[i].totals) == 0 &&
                                    store_update_run_state(m->store, v[i].id, RUN_EXITED, ended_ts) == 0)
                                        store_commit(m->store);
                                else
                                        store_rollback(m->store);
                        }
                        run_info_done(&v[i]);
                        ended++;
                        continue;
                }
                /* keep the stored identity and totals; the collector takes a
                 * new baseline, the totals continue from the stored ones */
                r->info = v[i];
                if (store_catch_up_totals(m->store, &r->info) < 0)
                        log_warning("run %lld: cannot fold recent samples into its totals", (long long)r->info.id);
                const struct run_totals *t = &r->info.totals;
                r->last = (struct sample){
                        .cpu_time_ns = t->cpu_time_ns,
                        .user_time_ns = t->user_time_ns,
                        .system_time_ns = t->system_time_ns,
                        .has_io = t->has_io,
                        .read_bytes = t->read_bytes,
                        .write_bytes = t->write_bytes,
                        .has_net = t->has_net,
                        .netns_rx_bytes = t->netns_rx_bytes,
                        .netns_tx_bytes = t->netns_tx_bytes,
                };
                if (t->has_energy) { /* the estimate goes on from the stored one */
                        r->accel.has_energy = true;
                        r->accel.energy_j = t->energy_j;
                }
                r->next_due_usec = grid_next(now, (usec_t)r->info.interval_ms * USEC_PER_MSEC);
                /* the floors were in memory: the watch starts again, with
                 * its grace from now */
                if (leakwatch_init(&r->leak, &m->leak_params) == 0)
                        leakwatch_mark(&r->leak, (double)(now_realtime_ms() - r->info.registered_ts_ms) / 1000.0);
                if (manager_add_run(m, r) < 0) {
                        run_free(r);
                        continue;
                }
                run_watch_exit(m, r);
                resumed++;
        }
        free(v);
        if (resumed || ended)
                log_info("restored runs: %u resumed, %u ended while mlmond was down", resumed, ended);
        return 0;
}

static void update_self_cost(struct manager *m) {
        struct rusage ru;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        if (getrusage(RUSAGE_SELF, &ru) < 0)
                return;
        usec_t cpu = (usec_t)ru.ru_utime.tv_sec * USEC_PER_SEC + (usec_t)ru.ru_utime.tv_usec +
                     (usec_t)ru.ru_stime.tv_sec * USEC_PER_SEC + (usec_t)ru.ru_stime.tv_usec;
        if (m->self_prev_mono && now > m->self_prev_mono) {
                m->self_cpu_pct = 100.0 * (double)(cpu - m->self_prev_cpu_usec) / (double)(now - m->self_prev_mono);
                m->has_self_cpu = true;
        }
        m->self_prev_cpu_usec = cpu;
        m->self_prev_mono = now;
}

/* Rollups, retention (one bounded batch per pass), checkpoint, STATUS=. */
static int on_maintenance(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        int64_t now_ms = now_realtime_ms();

        update_self_cost(m);
        store_rollup(m->store, now_ms);
        unsigned deleted = 0;
        int64_t raw_cut = now_ms - (int64_t)(m->config.retention_raw_usec / USEC_PER_MSEC);
        int64_t roll_cut = now_ms - (int64_t)(m->config.retention_rollup_usec / USEC_PER_MSEC);
        if (store_retention(m->store, raw_cut, roll_cut, RETENTION_BATCH, &deleted) == 0 && deleted > 0)
                log_debug("retention: deleted %u rows", deleted);
        /* a full batch means more is waiting: come back soon, not in 5 s */
        usec_t next = deleted >= RETENTION_BATCH ? 200 * USEC_PER_MSEC : MAINTENANCE_PERIOD_USEC;
        store_checkpoint(m->store, false);
        /* a failed reload stays in the status until a reload succeeds */
        manager_set_status(m, "%s%ssampling %zu runs, %llu ticks, last tick %.2f ms, %llu db errors",
                           m->reload_error[0] ? "reload failed (old configuration kept): " : "", m->reload_error,
                           m->n_runs, (unsigned long long)m->ticks, m->last_tick_ms,
                           (unsigned long long)(store_write_errors(m->store) + m->tick_errors));
        sd_event_source_set_time_relative(s, next);
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* Watchdog = pipeline liveness: ping only while ticks are on time, from the
 * main loop. A stuck sampler stops the pings and systemd restarts us. */
static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        usec_t late = 2 * m->config.interval_usec + USEC_PER_SEC;
        if (now - m->last_tick_end_mono <= late)
                sd_notify(false, "WATCHDOG=1");
        sd_event_source_set_time_relative(s, m->watchdog_usec / 3);
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;
        char err[512];
        sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)now_usec(CLOCK_MONOTONIC));
        if (manager_reload(m, err, sizeof err) < 0) {
                log_error("reload failed, keeping the old configuration: %s", err);
                snprintf(m->reload_error, sizeof m->reload_error, "%.200s; ", err);
                sd_notifyf(false, "READY=1\nSTATUS=reload failed: %s", err);
                return 0;
        }
        m->reload_error[0] = 0;
        log_info("configuration reloaded");
        sd_notify(false, "READY=1");
        return 0;
}

static int on_exit_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;
        log_info("received %s, shutting down", strsignal((int)si->ssi_signo));
        sd_notify(false, "STOPPING=1");
        return sd_event_exit(m->event, 0);
}

static int apply_overrides(struct manager *m, struct config *c, char *err, size_t errlen) {
        if (!m->overrides)
                return 0;
        for (char **o = m->overrides; o[0] && o[1]; o += 2) {
                int q = config_set(c, o[0], o[1], err, errlen);
                if (q < 0)
                        return q;
        }
        return 0;
}

/* Loads path (or the default) plus overrides into a fresh config. */
static int load_config(struct manager *m, struct config *c, char *err, size_t errlen) {
        int q = config_init_defaults(c);
        if (q < 0)
                return q;
        const char *path = m->config_path ? m->config_path : MLMOND_SYSCONFDIR "/mlmond/mlmond.conf";
        q = config_load_file(c, path, !m->config_path_explicit, err, errlen);
        if (q == 0)
                q = apply_overrides(m, c, err, errlen);
        if (q == 0)
                q = config_validate(c, err, errlen);
        if (q < 0)
                config_done(c);
        return q;
}

int manager_load_config(struct manager *m, char *err, size_t errlen) {
        struct config c;
        int q = load_config(m, &c, err, errlen);
        if (q < 0)
                return q;
        config_done(&m->config);
        m->config = c;
        return config_leak_params(&m->config, &m->leak_params);
}

int manager_reload(struct manager *m, char *err, size_t errlen) {
        struct config c;
        int q = load_config(m, &c, err, errlen);
        if (q < 0)
                return q;
        /* Where data lives and where we listen are fixed for the life of the
         * process: changing them needs a restart, and we say so. */
        static const struct {
                size_t off;
                const char *name;
        } fixed[] = {
                { offsetof(struct config, db_path), "db" },         { offsetof(struct config, listen), "listen" },
                { offsetof(struct config, socket_path), "socket" }, { offsetof(struct config, proc_root), "proc_root" },
                { offsetof(struct config, sys_root), "sys_root" },
        };
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++) {
                const char *a = *(char **)((char *)&m->config + fixed[i].off);
                char **b = (char **)((char *)&c + fixed[i].off);
                if (!streq(a, *b)) {
                        log_notice("reload: '%s' changes only at restart; keeping %s", fixed[i].name, a);
                        free(*b);
                        *b = strdup(a);
                        if (!*b) {
                                config_done(&c);
                                return -ENOMEM;
                        }
                }
        }
        struct leak_params lp;
        if (config_leak_params(&c, &lp) < 0) {
                config_done(&c);
                return -EINVAL;
        }
        bool windows_changed = !streq(c.leak_windows, m->config.leak_windows);
        config_done(&m->config);
        m->config = c;
        m->leak_params = lp;
        m->data_generation++;
        /* new windows mean a new floor resolution: the watches start over */
        for (size_t i = 0; windows_changed && i < m->n_runs; i++) {
                struct run *r = m->runs[i];
                leakwatch_done(&r->leak);
                if (leakwatch_init(&r->leak, &m->leak_params) == 0)
                        leakwatch_mark(&r->leak, (double)(now_realtime_ms() - r->info.registered_ts_ms) / 1000.0);
        }
        return 0;
}

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

static void raise_nofile(void) {
        /* Each run holds up to 6 fds (pidfd, dir, stat, statm, schedstat, io). */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
}

int manager_start(struct manager *m) {
        char err[512];
        int q;

        raise_nofile();
        /* the collector keeps its own copy: a reload frees the config's */
        m->collect.proc_root = strdup(m->config.proc_root);
        if (!m->collect.proc_root)
                return log_error_errno(ENOMEM, "out of memory");
        m->collect.real_proc = streq(m->config.proc_root, "/proc");
        q = proc_read_boot_id(m->config.proc_root, m->boot_id);
        if (q < 0)
                return log_error_errno(q, "cannot read the boot id under %s: %m", m->config.proc_root);

        q = sd_event_default(&m->event);
        if (q < 0)
                return log_error_errno(q, "cannot create the event loop: %m");
        sigset_t ss;
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigaddset(&ss, SIGHUP);
        sigprocmask(SIG_BLOCK, &ss, NULL);
        signal(SIGPIPE, SIG_IGN);
        if ((q = sd_event_add_signal(m->event, NULL, SIGTERM, on_exit_signal, m)) < 0 ||
            (q = sd_event_add_signal(m->event, NULL, SIGINT, on_exit_signal, m)) < 0 ||
            (q = sd_event_add_signal(m->event, NULL, SIGHUP, on_sighup, m)) < 0)
                return log_error_errno(q, "cannot watch signals: %m");

        q = store_open(m->config.db_path, config_synchronous_full(&m->config), &m->store, err, sizeof err);
        if (q < 0)
                return log_error_errno(q, "%s", err);
        const struct accel_options ao = {
                .proc_root = m->config.proc_root,
                .sys_root = m->config.sys_root,
                .gpu = !streq(m->config.gpu, "off"),
                .energy = !streq(m->config.energy, "off"),
                .device_interval_usec = m->config.gpu_device_interval_usec,
                .fd_rescan_ticks = m->config.gpu_fd_rescan_ticks,
                .nvml_library = m->config.nvml_library,
        };
        q = accel_new(&ao, &m->accel);
        if (q < 0)
                return log_error_errno(q, "cannot set up the GPU/NPU collectors: %m");
        m->collect.accel = m->accel;
        q = manager_restore_runs(m);
        if (q < 0)
                return q;

        q = api_new(m, &m->api, err, sizeof err);
        if (q < 0)
                return log_error_errno(q, "%s", err);
        q = ingest_new(m, &m->ingest, err, sizeof err);
        if (q < 0)
                return log_error_errno(q, "%s", err);

        m->started_mono = now_usec(CLOCK_MONOTONIC);
        q = sd_event_add_time(m->event, &m->tick_source, CLOCK_MONOTONIC, m->started_mono, USEC_PER_MSEC, on_tick, m);
        if (q < 0)
                return log_error_errno(q, "cannot add the sampler timer: %m");
        q = sd_event_add_time_relative(m->event, &m->maintenance_source, CLOCK_MONOTONIC, MAINTENANCE_PERIOD_USEC,
                                       100 * USEC_PER_MSEC, on_maintenance, m);
        if (q < 0)
                return log_error_errno(q, "cannot add the maintenance timer: %m");
        if (sd_watchdog_enabled(false, &m->watchdog_usec) > 0 && m->watchdog_usec > 0) {
                q = sd_event_add_time_relative(m->event, &m->watchdog_source, CLOCK_MONOTONIC, m->watchdog_usec / 3,
                                               10 * USEC_PER_MSEC, on_watchdog, m);
                if (q < 0)
                        return log_error_errno(q, "cannot add the watchdog timer: %m");
        }

        /* READY=1 only once the first tick is committed. */
        update_self_cost(m);
        manager_tick(m);
        manager_set_status(m, "sampling %zu runs", m->n_runs);
        sd_notify(false, "READY=1");
        log_info("mlmond " MLMOND_VERSION " ready: db %s, http %s, socket %s, interval %llums", m->config.db_path,
                 m->config.listen, m->config.socket_path,
                 (unsigned long long)(m->config.interval_usec / USEC_PER_MSEC));
        return 0;
}

/* Writes every running run's totals (at exit; sampling has stopped). */
static void manager_flush_totals(struct manager *m) {
        if (m->n_runs == 0 || store_begin(m->store) < 0)
                return;
        for (size_t i = 0; i < m->n_runs; i++) {
                store_update_run_totals(m->store, m->runs[i]->info.id, &m->runs[i]->info.totals);
                ops_rotate(&m->runs[i]->ops, INT64_MAX);
                store_run_ops(m, m->runs[i]);
                store_leak_json(m, m->runs[i]);
        }
        store_commit(m->store);
}

int manager_run(struct manager *m) {
        int q = sd_event_loop(m->event);
        manager_flush_totals(m);
        if (q < 0)
                return log_error_errno(q, "event loop failed: %m");
        return q;
}

void manager_forget_senders(struct manager *m) {
        m->n_pid_cache = 0;
        ingest_forget_ports(m->ingest);
}

/* A sender's run: its own, or its nearest registered ancestor's. The walk
 * reads /proc/PID/stat up the parent chain (at most 64 steps); the answer,
 * positive or negative, is cached for PID_CACHE_USEC so a busy sender costs
 * one lookup per second, not one per datagram. A pid reused within that
 * second by a process that also sends StatsD is the accepted blind spot. */
#define PID_CACHE_USEC USEC_PER_SEC
#define PID_CACHE_MAX 4096

static struct run *run_by_main_pid(struct manager *m, int pid) {
        for (size_t i = 0; i < m->n_runs; i++)
                if (m->runs[i]->info.pid == pid)
                        return m->runs[i];
        return NULL;
}

struct run *manager_run_for_pid(struct manager *m, int pid) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        if (pid <= 0)
                return NULL;
        for (size_t i = 0; i < m->n_pid_cache; i++) {
                struct pid_cache_entry *e = &m->pid_cache[i];
                if (e->pid != pid)
                        continue;
                if (e->expires > now)
                        return e->run_id ? manager_find_run(m, e->run_id) : NULL;
                break;
        }
        struct run *found = NULL;
        int p = pid;
        for (int depth = 0; depth < 64 && p > 1 && !found; depth++) {
                found = run_by_main_pid(m, p);
                if (found)
                        break;
                _cleanup_close_ int d = proc_open_pid_dir(m->config.proc_root, p);
                struct proc_stat st;
                if (d < 0 || proc_read_stat(d, &st) < 0)
                        break;
                p = st.ppid;
        }
        /* remember the answer; the table is small and pruned by age */
        size_t slot = m->n_pid_cache;
        for (size_t i = 0; i < m->n_pid_cache; i++)
                if (m->pid_cache[i].pid == pid || m->pid_cache[i].expires <= now) {
                        slot = i;
                        break;
                }
        if (slot == m->n_pid_cache && m->n_pid_cache < PID_CACHE_MAX) {
                struct pid_cache_entry *n = realloc(m->pid_cache, (m->n_pid_cache + 1) * sizeof *n);
                if (n) {
                        m->pid_cache = n;
                        m->n_pid_cache++;
                } else
                        slot = SIZE_MAX;
        } else if (slot == m->n_pid_cache)
                slot = (size_t)pid % PID_CACHE_MAX;
        if (slot != SIZE_MAX)
                m->pid_cache[slot] = (struct pid_cache_entry){ .pid = pid,
                                                               .run_id = found ? found->info.id : 0,
                                                               .expires = now + PID_CACHE_USEC };
        return found;
}

int manager_observe(struct manager *m, struct run *r, enum op_kind kind, const char *op, size_t op_len,
                    const char *category, size_t category_len, double value, double rate) {
        m->data_generation++;
        return ops_observe(&r->ops, op, op_len, category, category_len, kind, value, rate, now_realtime_ms());
}

int manager_mark(struct manager *m, int64_t id, const char *label, int64_t *ret_ts) {
        struct run *r = manager_find_run(m, id);
        if (!r)
                return -EALREADY;
        int64_t ts = now_realtime_ms();
        int q = store_begin(m->store);
        if (q < 0)
                return q;
        q = store_insert_mark(m->store, id, ts, label);
        if (q < 0) {
                store_rollback(m->store);
                return q;
        }
        q = store_commit(m->store);
        m->data_generation++;
        if (q == 0) {
                *ret_ts = ts;
                leakwatch_mark(&r->leak, (double)(ts - r->info.registered_ts_ms) / 1000.0);
        }
        return q;
}

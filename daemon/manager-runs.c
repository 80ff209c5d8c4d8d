/* SPDX-License-Identifier: MIT */
/* The runs' lifecycle as clients drive it: register (authorized from the
 * caller's credentials), unregister, restore after a restart, the run a
 * StatsD sender or HTTP caller belongs to, observations and marks. */
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>

#include "manager.h"
#include "collect/discover.h"
#include "ingest/ingest.h"
#include "json-util.h"
#include "store/query.h"

void manager_forget_senders(struct manager *m);

/* The pidfd turns readable when the process exits: end the run now rather
 * than at its next tick. What it sent over StatsD just before it exited
 * may still wait on the socket (epoll gives the two in any order): read
 * first, so that those lines count for the run rather than for none. */
static int on_pidfd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct run *r = userdata;
        struct manager *m = r->owner;
        ingest_drain(m->ingest);
        manager_end_run(m, r, RUN_EXITED, true, NULL);
        return 0;
}

static int run_watch_exit(struct manager *m, struct run *r) {
        r->owner = m;
        if (r->probe->pidfd < 0)
                return 0; /* fixture root: exit is seen at the next tick */
        int q = sd_event_add_io(m->event, &r->exit_source, r->probe->pidfd, EPOLLIN, on_pidfd, r);
        if (q < 0)
                return log_warning_errno(q, "cannot watch pid %d: %m", r->info.pid);
        return 0;
}

/* In id order (manager_find_run() searches by halves): a new run's id is
 * the largest, so it goes at the end; a resumed one may not. */
static int manager_add_run(struct manager *m, struct run *r) {
        if (!GREEDY_REALLOC(m->runs, m->n_runs + 1))
                return -ENOMEM;
        size_t i = m->n_runs;
        while (i > 0 && m->runs[i - 1]->info.id > r->info.id)
                i--;
        memmove(&m->runs[i + 1], &m->runs[i], (m->n_runs - i) * sizeof *m->runs);
        m->runs[i] = r;
        m->n_runs++;
        return 0;
}

static bool valid_name(const char *s) {
        size_t l = strlen(s);
        return l > 0 && l <= 128 && utf8_is_plain_text(s, l);
}

/* What the caller may register: what ptrace_may_access(PTRACE_MODE_READ)
 * would allow the caller itself (same real, effective, saved and fs uid,
 * and dumpable), within its quota, and not a process registered already
 * (*ret_id: that run). */
static int check_may_register(struct manager *m, const struct proc_identity *id, int pid, bool caller_is_root,
                              uid_t caller_uid, int64_t *ret_id, char *err, size_t errlen) {
        if (!caller_is_root) {
                if (id->uid_real != caller_uid || id->uid_effective != caller_uid || id->uid_saved != caller_uid ||
                    id->uid_fs != caller_uid || !id->dumpable) {
                        if (id->uid_real == caller_uid)
                                snprintf(err, errlen,
                                         "process %d is not yours to monitor: it changed its credentials (a "
                                         "setuid or setgid program, or prctl(PR_SET_DUMPABLE, 0)); run this as root",
                                         pid);
                        else
                                snprintf(err, errlen,
                                         "process %d is not yours to monitor: it runs as uid %u; run this as "
                                         "that user or as root",
                                         pid, (unsigned)id->uid_real);
                        return -EPERM;
                }
                unsigned mine = 0;
                for (size_t i = 0; i < m->n_runs; i++)
                        if (m->runs[i]->info.has_uid && m->runs[i]->info.uid == caller_uid)
                                mine++;
                if (mine >= m->config.max_runs_per_uid) {
                        snprintf(err, errlen, "too many runs for uid %u (max_runs_per_uid = %u)", (unsigned)caller_uid,
                                 m->config.max_runs_per_uid);
                        return -EUSERS;
                }
        }
        for (size_t i = 0; i < m->n_runs; i++)
                if (m->runs[i]->info.pid == pid && m->runs[i]->info.start_time_ticks == id->start_ticks) {
                        snprintf(err, errlen, "process %d is already registered as run %lld", pid,
                                 (long long)m->runs[i]->info.id);
                        *ret_id = m->runs[i]->info.id;
                        return -EEXIST;
                }
        return 0;
}

/* The tags of a registration: those given, plus those discovered from the
 * process that were not given, while there are fewer than TAGS_MAX. */
static int run_tags(const struct run *r, const struct register_request *req, char **ret) {
        _cleanup_json_ json_object *tags = req->tags_json ? json_tokener_parse(req->tags_json)
                                                          : json_object_new_object();
        if (!tags)
                return -ENOMEM;
        if (!req->no_discover && r->probe->dirfd >= 0) {
                struct discovered d;
                discover_read(r->probe->dirfd, &d);
                for (enum discover_tag t = 0; t < _DT_MAX; t++) {
                        const char *key = discover_tag_key(t);
                        if (!d.value[t][0] || json_object_object_length(tags) >= TAGS_MAX ||
                            json_object_object_get_ex(tags, key, NULL))
                                continue;
                        if (json_object_object_add(tags, key, json_object_new_string(d.value[t])) < 0)
                                return -ENOMEM;
                }
        }
        *ret = strdup(json_object_to_json_string_ext(tags, JSON_C_TO_STRING_PLAIN));
        return *ret ? 0 : -ENOMEM;
}

/* Fills the new run's identity, takes its baseline reading (counters
 * from here on are the run's own) and stores it; *ret_interval: its
 * sampling interval. On failure the caller frees r. */
static int run_begin(struct manager *m, struct run *r, const struct register_request *req,
                     const struct proc_identity *id, usec_t now, usec_t *ret_interval, char *err, size_t errlen) {
        int q;
        struct run_info *ri = &r->info;
        char *cmd = NULL;
        proc_read_cmdline(r->probe->dirfd, 4096, &cmd);
        ri->cmdline = cmd;
        ri->comm = strdup(id->comm);
        ri->name = req->name ? strdup(req->name) : NULL;
        ri->step_op = req->step_op ? strdup(req->step_op) : NULL;
        if (!ri->comm || run_tags(r, req, &ri->tags_json) < 0 || (req->name && !ri->name) ||
            (req->step_op && !ri->step_op))
                return -ENOMEM;
        memcpy(ri->boot_id, m->boot_id, sizeof ri->boot_id);
        usec_t interval = req->interval_usec ? req->interval_usec : m->config.interval_usec;
        ri->interval_ms = (int64_t)(interval / USEC_PER_MSEC);
        ri->children = req->children;
        ri->state = RUN_RUNNING;
        ri->registered_ts_ms = now_realtime_ms();

        struct sample s;
        q = probe_sample(&m->collect, r->probe, now, ri->registered_ts_ms, false, &s);
        if (q < 0) {
                snprintf(err, errlen, "no such process: %d", req->pid);
                return -ESRCH;
        }
        run_totals_add(&ri->totals, &s);
        ri->has_left_out = req->children;
        ri->left_out = r->probe->left_out;
        (void)run_take_identity(r); /* the row is written with the current comm below */
        if (leakwatch_init(&r->leak, &m->leak_params) < 0) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        manager_leak_step(m, r, &s);
        _cleanup_(run_baseline_done) struct run_baseline base = {};
        if (probe_baseline(r->probe, &base) < 0) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        r->probe->left_changed = r->probe->netns_changed = false; /* stored with the run below */
        q = store_begin(m->store);
        if (q == 0) {
                if (store_insert_run(m->store, ri) < 0 || store_insert_baseline(m->store, ri->id, &base) < 0 ||
                    manager_store_sample(m, r, &s) < 0 || store_update_run_totals(m->store, ri->id, &ri->totals) < 0) {
                        store_rollback(m->store);
                        q = -EIO;
                } else
                        q = store_commit(m->store);
        }
        if (q < 0) {
                snprintf(err, errlen, "cannot store the run: database error");
                return -EIO;
        }
        *ret_interval = interval;
        return 0;
}

int manager_register(struct manager *m, const struct register_request *req, bool caller_is_root, uid_t caller_uid,
                     int64_t *ret_id, char *err, size_t errlen) {
        struct run *r = NULL;
        struct probe *p = NULL;
        struct proc_identity id;
        int q;

        if (req->name && !valid_name(req->name)) {
                snprintf(
                        err, errlen,
                        "name: must be 1 to 128 bytes of UTF-8 without control or bidirectional formatting characters");
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
        q = probe_attach(&m->collect, req->pid, 0, req->children, &p, &id);
        if (q == -EINVAL) {
                snprintf(err, errlen, "%d is a thread of process %d: register the process", req->pid, id.tgid);
                return -EINVAL;
        }
        if (q == -ESRCH || q == -ENOENT) {
                snprintf(err, errlen, "no such process: %d", req->pid);
                return -ESRCH;
        }
        if (q < 0)
                return errorf(err, errlen, q, "cannot read process %d: %m", req->pid);
        if (id.tgid != req->pid) {
                snprintf(err, errlen, "%d is a thread of process %d: register the process", req->pid, id.tgid);
                probe_free(p);
                return -EINVAL;
        }
        if (run_new(p, &r) < 0) {
                probe_free(p);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        q = check_may_register(m, &id, req->pid, caller_is_root, caller_uid, ret_id, err, errlen);
        usec_t now = now_usec(CLOCK_MONOTONIC), interval = 0;
        if (q == 0)
                q = run_begin(m, r, req, &id, now, &interval, err, errlen);
        if (q < 0) {
                run_free(r);
                return q;
        }
        struct run_info *ri = &r->info;
        r->gauges_live = true; /* new: none stored yet */
        /* the first grid point at least half an interval away, so the first
         * rate is over a reasonable span */
        r->next_due_usec = grid_next(now + interval / 2, interval);
        if (manager_add_run(m, r) < 0) {
                run_free(r);
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        run_watch_exit(m, r);
        manager_rearm_tick(m, now);
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
        if (manager_end_run(m, r, RUN_UNREGISTERED, false, NULL) < 0) {
                snprintf(err, errlen, "database error");
                return -EIO;
        }
        log_info("run %lld: unregistered", (long long)id);
        return 0;
}

/* A resumed run's counters: from its stored baseline, so that what its
 * processes used while mlmond was down counts, with the first sample's rates
 * averaged over the outage. A run stored without a baseline (by an older
 * mlmond) takes a new one and goes on from its last stored sample. */
static void run_restore_counters(struct manager *m, struct run *r, usec_t now) {
        const struct run_totals *t = &r->info.totals;
        struct sample last;
        if (!t->last_ts_ms || store_load_sample(m->store, r->info.id, t->last_ts_ms, &last) < 0)
                last = (struct sample){
                        .ts_ms = t->last_ts_ms,
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
        _cleanup_(run_baseline_done) struct run_baseline base = {};
        int64_t gap_ms = now_realtime_ms() - last.ts_ms;
        usec_t gap = gap_ms > 0 ? (usec_t)gap_ms * USEC_PER_MSEC : 0;
        if (last.ts_ms && store_load_baseline(m->store, r->info.id, &base) == 0 && base.n_members > 0 &&
            probe_resume(r->probe, &base, &last, now > gap ? now - gap : 0) == 0)
                return;
        r->probe->last = last;
}

/* Registrations survive a restart: a process still alive with the same boot
 * id, pid and start time goes on being sampled; any other becomes exited. */
/* A resumed run's gauges, as last stored, go back into memory: they show
 * at once (run object, /metrics), and a "+N" goes on from them. */
static void restore_gauges(struct manager *m, struct run *r) {
        const struct query_limits lim = { .timeout_usec = m->config.http_query_timeout_usec,
                                          .max_rows = OPS_MAX_PER_RUN };
        struct gauge_stat *v = NULL;
        size_t n = 0;
        int q = query_gauge_stats(m->store, &lim, r->info.id, r->info.registered_ts_ms, INT64_MAX, &v, &n);
        if (q < 0) {
                log_warning_errno(q, "run %lld: cannot read its gauges back: %m", (long long)r->info.id);
                return;
        }
        for (size_t i = 0; i < n && q == 0; i++)
                q = ops_gauge_restore(&r->ops, v[i].name, v[i].value, v[i].ts_ms);
        gauge_stats_free(v, n);
        r->gauges_live = q == 0;
}

int manager_restore_runs(struct manager *m) {
        struct run_info *v = NULL;
        size_t n = 0;
        int q = store_load_running(m->store, &v, &n);
        if (q < 0)
                return log_error_errno(q, "cannot load runs from the database");
        usec_t now = now_usec(CLOCK_MONOTONIC);
        unsigned resumed = 0, ended = 0;
        for (size_t i = 0; i < n; i++) {
                struct run *r = NULL;
                struct probe *p = NULL;
                bool alive = streq(v[i].boot_id, m->boot_id) &&
                             probe_attach(&m->collect, v[i].pid, v[i].start_time_ticks, v[i].children, &p, NULL) == 0;
                if (alive && run_new(p, &r) < 0) {
                        probe_free(p);
                        alive = false;
                }
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
                /* keep the stored identity and totals; the counters go on
                 * from the stored baseline */
                run_info_done(&r->info);
                r->info = v[i];
                /* what the process was as stored: a change shows at its first sample */
                p->comm = r->info.comm ? strdup(r->info.comm) : NULL;
                p->cmdline = r->info.cmdline ? strdup(r->info.cmdline) : NULL;
                if (store_catch_up_totals(m->store, &r->info) < 0)
                        log_warning("run %lld: cannot fold recent samples into its totals", (long long)r->info.id);
                run_restore_counters(m, r, now);
                const struct run_totals *t = &r->info.totals;
                if (t->has_energy) { /* the estimate goes on from the stored one */
                        r->probe->accel.has_energy = true;
                        r->probe->accel.energy_j = t->energy_j;
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
                restore_gauges(m, r);
                manager_verdicts_restored(r, now_realtime_ms());
                resumed++;
        }
        free(v);
        if (resumed || ended)
                log_info("restored runs: %u resumed, %u ended while mlmond was down", resumed, ended);
        return 0;
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
                if (GREEDY_REALLOC(m->pid_cache, m->n_pid_cache + 1))
                        m->n_pid_cache++;
                else
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
        /* a stock client cannot tag: [categories] names the category */
        if ((!category || category_len == 0) && (kind == OP_TIMING || kind == OP_COUNTER)) {
                category = config_category_for(&m->config, op, op_len);
                category_len = category ? strlen(category) : 0;
        }
        int q = ops_observe(&r->ops, op, op_len, category, category_len, kind, value, rate, now_realtime_ms());
        if (q == 0)
                manager_verdicts_observed(m, r, kind, op, op_len, value);
        return q;
}

int manager_mark(struct manager *m, int64_t id, const char *label, int64_t *ret_ts) {
        struct run *r = manager_find_run(m, id);
        if (!r)
                return -EALREADY;
        int64_t ts = now_realtime_ms();
        int q = store_begin(m->store);
        if (q < 0)
                return q;
        q = ops_cut(&r->ops, ts);
        if (q == 0)
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
                if (r->leak_main.pts)
                        leakwatch_mark(&r->leak_main, (double)(ts - r->info.registered_ts_ms) / 1000.0);
                manager_verdicts_mark(m, r, label, ts);
        }
        return q;
}

static bool may_touch(const struct run_info *ri, bool caller_is_root, uid_t caller_uid) {
        return caller_is_root || (ri->has_uid && ri->uid == caller_uid);
}

int manager_sample_now(struct manager *m, int64_t id, bool caller_is_root, uid_t caller_uid, int64_t *ret_ts) {
        struct run *r = manager_find_run(m, id);
        if (!r)
                return -EALREADY;
        if (!may_touch(&r->info, caller_is_root, caller_uid))
                return -EPERM;
        int64_t now_ms = now_realtime_ms();
        struct sample s;
        collect_ctx_new_tick(&m->collect);
        r->probe->pss_read_usec = 0; /* a sample asked for reads everything: a tree's PSS too */
        int q = probe_sample(&m->collect, r->probe, now_usec(CLOCK_MONOTONIC), now_ms, false, &s);
        if (q == -ESRCH || q == -EPERM) {
                manager_end_run(m, r, q == -ESRCH ? RUN_EXITED : RUN_UNREGISTERED, false,
                                q == -EPERM ? "the process changed credentials" : NULL);
                return -EALREADY;
        }
        if (q < 0)
                return q;
        q = store_begin(m->store);
        if (q < 0)
                return q;
        manager_record_sample(m, r, &s, true);
        q = store_commit(m->store);
        m->data_generation++;
        if (q == 0)
                *ret_ts = now_ms;
        return q;
}

int manager_exited(struct manager *m, int64_t id, bool caller_is_root, uid_t caller_uid, const struct exit_report *e) {
        struct run *r = manager_find_run(m, id);
        if (r) {
                if (!may_touch(&r->info, caller_is_root, caller_uid))
                        return -EPERM;
                /* reaped, as its parent says: its pidfd tells */
                if (r->probe->pidfd >= 0 && pidfd_send_signal(r->probe->pidfd, 0, NULL, 0) == 0)
                        return -EBUSY;
                int q = manager_end_run(m, r, RUN_EXITED, false, NULL);
                if (q < 0)
                        return q;
        }
        const struct query_limits lim = { .timeout_usec = m->config.http_query_timeout_usec, .max_rows = 1 };
        struct run_info ri;
        int q = query_run(m->store, &lim, id, &ri);
        if (q < 0)
                return q;
        bool mine = may_touch(&ri, caller_is_root, caller_uid), running = ri.state == RUN_RUNNING;
        bool children = ri.children;
        /* how it ended: what mlmond read from the zombie itself stands */
        bool take_exit = e->has_exit && !ri.has_exit_code && !ri.has_exit_signal;
        if (take_exit)
                run_info_set_exit(&ri, e->wait_status);
        if (!mine || running || (!e->has_rusage && !take_exit)) {
                run_info_done(&ri);
                /* stored as running, not in memory: a restart is resuming it */
                return !mine ? -EPERM : running ? -EBUSY : 0;
        }
        q = store_begin(m->store);
        if (q < 0) {
                run_info_done(&ri);
                return q;
        }
        /* the CPU of the children it waited for is a tree's only */
        if (e->has_rusage)
                q = store_apply_rusage(m->store, id, e->max_rss_bytes, children, (uint64_t)(e->user_time_s * 1e9),
                                       (uint64_t)(e->system_time_s * 1e9));
        if (q == 0 && take_exit)
                q = store_update_run_exit(m->store, id, &ri);
        run_info_done(&ri);
        if (q == 0)
                q = store_commit(m->store);
        else
                store_rollback(m->store);
        m->data_generation++;
        return q;
}

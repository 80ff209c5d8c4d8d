/* SPDX-License-Identifier: MIT */

#include "manager.h"

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include "collect/accel/accel.h"
#include "http/api.h"
#include "ingest/ingest.h"
#include "version.h"

/* Retention deletes at most this many rows per transaction, so the sampler
 * never waits long for the write lock (a single 1 M-row DELETE blocked a
 * sampler for 3.5 s; 5 000-row batches for 110 ms). */
#define RETENTION_BATCH 5000

#define MAINTENANCE_PERIOD_USEC (5 * USEC_PER_SEC)
/* Ended runs past ended_runs_per_uid deleted per pass (each a transaction
 * of a few index lookups), looked for once a minute: the query reads every
 * ended run. */
#define PRUNE_BATCH 64

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

usec_t grid_next(usec_t after, usec_t interval) {
        return (after / interval + 1) * interval;
}

static void manager_set_status(struct manager *m, const char *fmt, ...) _printf_(2, 3);

static void store_run_ops(struct manager *m, struct run *r);

int manager_new(struct manager **ret) {
        struct manager *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        int r = config_init_defaults(&m->config);
        if (r < 0) {
                free(m);
                return r;
        }
        m->lock_fd = -1;
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
        safe_close(m->lock_fd);
        free(m);
}

/* m->runs is kept in id order (manager_add_run()): the API looks a run up
 * once or more for each run of a list, so a scan would make listing N runs
 * cost N^2. */
struct run *manager_find_run(struct manager *m, int64_t id) {
        size_t lo = 0, hi = m->n_runs;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int64_t x = m->runs[mid]->info.id;
                if (x == id)
                        return m->runs[mid];
                if (x < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
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

void manager_rearm_tick(struct manager *m, usec_t now) {
        usec_t next = m->host_next_due_usec;
        for (size_t i = 0; i < m->n_runs; i++)
                if (m->runs[i]->next_due_usec < next)
                        next = m->runs[i]->next_due_usec;
        if (next < now)
                next = now;
        sd_event_source_set_time(m->tick_source, next);
        sd_event_source_set_enabled(m->tick_source, SD_EVENT_ONESHOT);
}

/* How an exited run's process ended, read while it is still a zombie (its
 * parent has not reaped it yet), into its info and the store (inside the
 * caller's transaction). A process reaped first leaves it unknown. */
static void run_record_exit(struct manager *m, struct run *r) {
        int status;
        if (probe_exit_status(r->probe, &status) < 0)
                return;
        run_info_set_exit(&r->info, status);
        if (store_update_run_exit(m->store, r->info.id, &r->info) < 0)
                m->tick_errors++;
}

/* What ending a run stores, in the caller's transaction: its last sample
 * (last, if any), its totals, its op slices still open, its leak and other
 * verdicts, the reason as a mark, how it exited, its state. */
static int end_run_stored(struct manager *m, struct run *r, enum run_state state, int64_t now_ms,
                          const struct sample *last, const char *reason) {
        if (last) {
                run_totals_add(&r->info.totals, last);
                if (manager_store_sample(m, r, last) < 0)
                        m->tick_errors++;
        }
        if (store_update_run_totals(m->store, r->info.id, &r->info.totals) < 0)
                m->tick_errors++;
        ops_rotate(&r->ops, INT64_MAX);
        store_run_ops(m, r);
        double t_end_s = (double)(now_ms - r->info.registered_ts_ms) / 1000.0;
        leakwatch_end(&r->leak, &m->leak_params, t_end_s);
        if (r->leak_gpu.pts)
                leakwatch_end(&r->leak_gpu, &m->leak_params, t_end_s);
        manager_store_leak(m, r);
        manager_verdicts_end(m, r, state == RUN_EXITED, now_ms);
        if (reason && store_insert_mark(m->store, r->info.id, now_ms, reason) < 0)
                m->tick_errors++;
        if (state == RUN_EXITED)
                run_record_exit(m, r);
        return store_update_run_state(m->store, r->info.id, state, now_ms);
}

/* An ended run out of the active set (its fds closed). */
static void drop_ended_run(struct manager *m, struct run *r, enum run_state state) {
        log_debug("run %lld (pid %d) %s", (long long)r->info.id, r->info.pid, run_state_to_string(state));
        m->data_generation++;
        manager_forget_senders(m);
        size_t i = run_index(m, r);
        if (i != SIZE_MAX)
                manager_drop_run(m, i);
}

/* Ends a run: a last sample where the exited process can still be read (a
 * zombie shows its final CPU time and I/O: a job shorter than one interval
 * is then still measured), the state change stored, fds closed, dropped
 * from the active set. */
int manager_end_run(struct manager *m, struct run *r, enum run_state state, bool final_sample, const char *reason) {
        int64_t now_ms = now_realtime_ms();
        struct sample s;
        bool have = false;
        if (final_sample) {
                collect_ctx_new_tick(&m->collect);
                have = probe_sample(&m->collect, r->probe, now_usec(CLOCK_MONOTONIC), now_ms, true, &s) == 0;
        }
        int q = store_begin(m->store);
        if (q == 0) {
                q = end_run_stored(m, r, state, now_ms, have ? &s : NULL, reason);
                if (q == 0)
                        q = store_commit(m->store);
                else
                        store_rollback(m->store);
        }
        if (q < 0)
                m->tick_errors++;
        drop_ended_run(m, r, state);
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

/* A sample with the run's per-device use beside it. */
int manager_store_sample(struct manager *m, struct run *r, const struct sample *s) {
        const struct accel_run *a = &r->probe->accel;
        for (size_t i = 0; i < a->n_uses; i++) {
                int q = store_insert_gpu_use(m->store, r->info.id, s->ts_ms, &a->uses[i]);
                if (q < 0)
                        return q;
        }
        return store_insert_sample(m->store, r->info.id, s);
}

/* What a run's members and namespaces that left used, when it grew (in
 * the tick's transaction, so it matches the samples). */
static void store_run_baseline(struct manager *m, struct run *r) {
        struct probe *p = r->probe;
        if (p->left_changed && store_update_run_left(m->store, r->info.id, &p->left) == 0)
                p->left_changed = false;
        _cleanup_(run_baseline_done) struct run_baseline b = {};
        if (p->netns_changed && probe_baseline(p, &b) == 0 && store_update_run_netns(m->store, r->info.id, &b) == 0)
                p->netns_changed = false;
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
                if (store_insert_device_sample(m->store, now_ms, x) < 0)
                        m->tick_errors++;
        }
}

/* The tick's one transaction, begun by the first write that needs it. */
static bool tick_txn(struct manager *m, bool *in_txn) {
        if (*in_txn)
                return true;
        if (store_begin(m->store) < 0) {
                m->tick_errors++;
                return false;
        }
        *in_txn = true;
        return true;
}

/* A non-root owner's process changed credentials (it exec'ed a setuid
 * program, say): what it does now is not its owner's to see. The run ends
 * as unregistered with what was measured before, and a mark says why. The
 * tick's writes so far are committed first: the end has a transaction of
 * its own. */
static void end_run_credentials(struct manager *m, struct run *r, bool *in_txn) {
        static const char reason[] = "the process changed credentials";
        if (*in_txn) {
                if (store_commit(m->store) < 0)
                        m->tick_errors++;
                *in_txn = false;
        }
        log_notice("run %lld (pid %d): %s; the run ends, what was measured before is kept", (long long)r->info.id,
                   r->info.pid, reason);
        manager_end_run(m, r, RUN_UNREGISTERED, false, reason);
}

void manager_record_sample(struct manager *m, struct run *r, const struct sample *s, bool persist_totals) {
        run_totals_add(&r->info.totals, s);
        r->info.has_left_out = r->info.children;
        r->info.left_out = r->probe->left_out;
        manager_leak_step(m, r, s);
        manager_verdicts_sample(m, r, s);
        if (run_take_identity(r) && store_update_run_identity(m->store, r->info.id, r->info.comm, r->info.cmdline) < 0)
                m->tick_errors++;
        store_run_baseline(m, r);
        if (manager_store_sample(m, r, s) < 0 ||
            (persist_totals && store_update_run_totals(m->store, r->info.id, &r->info.totals) < 0))
                m->tick_errors++;
}

/* One tick: sample every due run, store all of it in one transaction. */
static int manager_tick(struct manager *m) {
        /* The StatsD lines waiting on the sockets first: a process that sent
         * its last ones and exited since the last tick is found gone below,
         * and its run ends; read after that, they would count for no run
         * (on_pidfd reads first for the same reason). Outside the tick's
         * transaction: a mark among them writes its own. */
        ingest_drain(m->ingest);
        usec_t start = now_usec(CLOCK_MONOTONIC);
        m->in_tick = true;
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
                        accel_run_energy(m->accel, &m->runs[i]->probe->accel, m->runs[i]->probe->last.cpu_time_ns);
        }

        for (size_t i = 0; i < m->n_runs;) {
                struct run *r = m->runs[i];
                if (r->next_due_usec > start + TICK_SLACK_USEC) {
                        i++;
                        continue;
                }
                struct sample s;
                int q = probe_sample(&m->collect, r->probe, start, now_ms, false, &s);
                if (q == -ESRCH) {
                        /* gone before its pidfd's event was handled: it
                         * ends here, in the tick's transaction if one is
                         * open, storing all that manager_end_run() does */
                        if (!in_txn) {
                                manager_end_run(m, r, RUN_EXITED, false, NULL);
                                continue;
                        }
                        if (end_run_stored(m, r, RUN_EXITED, now_ms, NULL, NULL) < 0)
                                m->tick_errors++;
                        drop_ended_run(m, r, RUN_EXITED);
                        continue;
                }
                if (q == -EPERM) {
                        end_run_credentials(m, r, &in_txn);
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
                if (!tick_txn(m, &in_txn))
                        continue;
                manager_record_sample(m, r, &s, r->probe->ticks % TOTALS_PERSIST_TICKS == 0);
        }
        /* what the applications reported: closed slices and gauges */
        for (size_t i = 0; i < m->n_runs; i++) {
                struct run *r = m->runs[i];
                ops_rotate(&r->ops, now_ms);
                manager_verdicts_rotated(m, r, now_ms);
                if (r->ops.n_done == 0 && r->ops.n_gauges == 0 && !r->v.dirty && !r->v.first_step_dirty)
                        continue;
                if (!tick_txn(m, &in_txn))
                        break;
                store_run_ops(m, r);
                manager_verdicts_store(m, r);
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
        manager_rearm_tick(m, end);
        (void)manager_health(m); /* keeps its bookkeeping current */
        m->in_tick = false;
        return 0;
}

/* When the tick's timer will fire; false if it is not armed. */
static bool tick_due_at(struct manager *m, uint64_t *ret) {
        int enabled;
        return m->tick_source && sd_event_source_get_enabled(m->tick_source, &enabled) >= 0 &&
               enabled != SD_EVENT_OFF && sd_event_source_get_time(m->tick_source, ret) >= 0;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        return manager_tick(userdata);
}

/* The timer's dispatch waits for the event source being dispatched: the
 * HTTP server answering whatever is ready on many connections, a list of
 * thousands of runs. The server calls this before each request, and long
 * answers between their pieces (manager_ops.yield), so a tick is late by
 * one of those at most. */
void manager_tick_if_due(struct manager *m) {
        uint64_t due;
        if (m->in_tick || !tick_due_at(m, &due) || now_usec(CLOCK_MONOTONIC) < due)
                return;
        (void)manager_tick(m);
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

/* A pass (a retention batch, a checkpoint: 3 to 12 ms at 4 000 runs; 100 ms
 * when it rolls a minute up) must not make a tick late. The pass that rolls
 * a new minute up waits until just after the next tick; another one does
 * when that tick is due before twice the longest recent pass would end.
 * Once: the pass after the tick runs whatever comes. */
static bool maintenance_deferred(struct manager *m, sd_event_source *s) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        bool rolls = now_realtime_ms() / 60000 != m->rolled_minute;
        uint64_t due;
        if (m->maintenance_waited || !tick_due_at(m, &due) ||
            (!rolls && due > now + 2 * m->maintenance_usec + 5 * USEC_PER_MSEC)) {
                m->maintenance_waited = false;
                return false;
        }
        m->maintenance_waited = true;
        sd_event_source_set_time(s, due + USEC_PER_MSEC);
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return true;
}

/* The store's compaction (the completed minutes into blocks and the minute
 * tier, completed hours into the hour tier), retention (one bounded batch
 * per pass), checkpoint, STATUS=. */
static int on_maintenance(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        if (maintenance_deferred(m, s))
                return 0;
        usec_t start = now_usec(CLOCK_MONOTONIC);
        int64_t now_ms = now_realtime_ms();

        update_self_cost(m);
        bool behind = false;
        if (store_compact(m->store, now_ms, &behind) < 0)
                m->tick_errors++;
        unsigned deleted = 0;
        if (store_retention(m->store, now_ms, RETENTION_BATCH, &deleted) == 0 && deleted > 0)
                log_debug("retention: deleted %u rows", deleted);
        /* half a minute after the pass that rolls the minute up */
        unsigned pruned = 0;
        if (m->prune_more || (now_ms + 30000) / 60000 != m->pruned_minute) {
                m->pruned_minute = (now_ms + 30000) / 60000;
                if (store_prune_ended_runs(m->store, m->config.ended_runs_per_uid, PRUNE_BATCH, &pruned) == 0 &&
                    pruned > 0)
                        log_info("retention: deleted %u ended runs past ended_runs_per_uid", pruned);
                m->prune_more = pruned >= PRUNE_BATCH;
        }
        /* a full batch, or minutes still to compact, mean more is waiting:
         * come back soon, not in 5 s */
        usec_t next = deleted >= RETENTION_BATCH || behind || m->prune_more ? 200 * USEC_PER_MSEC
                                                                            : MAINTENANCE_PERIOD_USEC;
        store_checkpoint(m->store, false);
        /* glibc mmaps a large block the first time, then raises its mmap
         * and trim thresholds to its size, and serves later ones from brk
         * heap that it never gives back. A rollup that sorted its minute
         * through SQLite's 1 MiB sort buffer made RssAnon grow by 1 MiB at
         * 1 000 runs (tests/bench/cost.py --late 900), and the API's long
         * answers do the same (13.7 MiB under wrk -c32 at 4 000 runs), all
         * of it free heap. Trimming once a minute gives it back, for about
         * 150 us. */
        if (now_ms / 60000 != m->rolled_minute) {
                malloc_trim(0);
                m->rolled_minute = now_ms / 60000;
        }
        /* a failed reload stays in the status until a reload succeeds */
        manager_set_status(m, "%s%ssampling %zu runs, %llu ticks, last tick %.2f ms, %llu db errors",
                           m->reload_error[0] ? "reload failed (old configuration kept): " : "", m->reload_error,
                           m->n_runs, (unsigned long long)m->ticks, m->last_tick_ms,
                           (unsigned long long)(store_write_errors(m->store) + m->tick_errors));
        /* the longest recent pass: the minute's rollup once a minute is the
         * long one, so the figure forgets slowly (by 1/64 a pass) */
        usec_t took = now_usec(CLOCK_MONOTONIC) - start;
        usec_t kept = m->maintenance_usec - m->maintenance_usec / 64;
        m->maintenance_usec = took > kept ? took : kept;
        sd_event_source_set_time_relative(s, next);
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* How long a failed write or an overrun keeps health "degraded": three
 * default intervals, at least one maintenance period. */
static usec_t health_window(const struct manager *m) {
        usec_t w = 3 * m->config.interval_usec;
        return w > MAINTENANCE_PERIOD_USEC ? w : MAINTENANCE_PERIOD_USEC;
}

unsigned manager_health(struct manager *m) {
        usec_t now = now_usec(CLOCK_MONOTONIC), window = health_window(m);
        uint64_t errors = store_write_errors(m->store) + m->tick_errors;
        unsigned h = 0;
        char why[160] = "";

        if (errors != m->health_db_errors) {
                m->health_db_errors = errors;
                m->health_db_error_mono = now;
        }
        if (m->overruns != m->health_overruns) {
                m->health_overruns = m->overruns;
                m->health_overrun_mono = now;
        }
        if (m->health_db_error_mono && now - m->health_db_error_mono < window)
                h |= HEALTH_DB_WRITES_FAILING;
        if ((m->health_overrun_mono && now - m->health_overrun_mono < window) ||
            now - m->last_tick_end_mono > 2 * m->config.interval_usec + USEC_PER_SEC)
                h |= HEALTH_SAMPLER_LATE;
        if (!api_accepting(m->api, why, sizeof why)) {
                h |= HEALTH_LISTENER_NOT_ACCEPTING;
                if (!m->listener_stuck)
                        log_warning("http: %s; watchdog pings stop", why);
        } else if (m->listener_stuck)
                log_notice("http: the listeners accept connections again");
        m->listener_stuck = h & HEALTH_LISTENER_NOT_ACCEPTING;
        return h;
}

/* Watchdog = pipeline liveness: ping only while ticks are on time and the
 * HTTP listeners take their connections, from the main loop. A stuck
 * sampler or a dead listener stops the pings and systemd restarts us.
 * Failing writes do not: a restart does not make a full disk any emptier. */
static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        usec_t late = 2 * m->config.interval_usec + USEC_PER_SEC;
        bool listening = !(manager_health(m) & HEALTH_LISTENER_NOT_ACCEPTING);
        if (now - m->last_tick_end_mono <= late && listening)
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
        if (q == 0)
                q = config_load_secrets(c, err, errlen);
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
                { offsetof(struct config, db_path), "db" },
                { offsetof(struct config, listen), "listen" },
                { offsetof(struct config, socket_path), "socket" },
                { offsetof(struct config, proc_root), "proc_root" },
                { offsetof(struct config, sys_root), "sys_root" },
                /* the listener has its certificate; the token is read again */
                { offsetof(struct config, http_tls_cert), "tls_cert" },
                { offsetof(struct config, http_tls_key), "tls_key" },
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
        /* what was kept must still go with the rest (a token needs the TLS
         * the listener started with) */
        q = config_validate(&c, err, errlen);
        if (q < 0) {
                config_done(&c);
                return q;
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
        store_set_retention(m->store, m->config.retention_raw_usec, m->config.retention_rollup_usec);
        m->collect.pss_interval_usec = m->config.pss_interval_usec;
        m->data_generation++;
        /* new windows mean a new floor resolution: the watches start over */
        for (size_t i = 0; windows_changed && i < m->n_runs; i++) {
                struct run *r = m->runs[i];
                leakwatch_done(&r->leak);
                leakwatch_done(&r->leak_main); /* it starts again at the next reading */
                if (leakwatch_init(&r->leak, &m->leak_params) == 0)
                        leakwatch_mark(&r->leak, (double)(now_realtime_ms() - r->info.registered_ts_ms) / 1000.0);
        }
        return 0;
}

/* One mlmond per database: <db>.lock, flock()ed for the process's life
 * (released by the kernel however we exit), says which pid holds it. A
 * second instance on the same paths stops here, before it touches the
 * first one's database or sockets. */
static int manager_lock_db(struct manager *m) {
        char path[PATH_MAX], pid[32] = "";
        if ((size_t)snprintf(path, sizeof path, "%s.lock", m->config.db_path) >= sizeof path)
                return log_error_errno(ENAMETOOLONG, "db: %s: %m", m->config.db_path);
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd < 0)
                return log_error_errno(errno, "db: cannot open %s: %m", path);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                        return log_error_errno(errno, "db: cannot lock %s: %m", path);
                ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
                pid[n > 0 ? n : 0] = 0;
                pid[strcspn(pid, "\n")] = 0;
                return log_error_errno(EBUSY, "db: %s is in use by another mlmond (pid %s); not starting",
                                       m->config.db_path, *pid ? pid : "?");
        }
        int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
                log_debug_errno(errno, "db: cannot write the pid to %s: %m", path);
        m->lock_fd = TAKE_FD(fd);
        return 0;
}

static void raise_nofile(void) {
        /* Each run holds up to 5 fds (pidfd, dir, stat, statm, io). */
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
        m->collect.pss_interval_usec = m->config.pss_interval_usec;
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

        q = manager_lock_db(m);
        if (q < 0)
                return q;
        q = store_open(m->config.db_path, config_synchronous_full(&m->config), &m->store, err, sizeof err);
        if (q < 0)
                return log_error_errno(q, "%s", err);
        store_set_retention(m->store, m->config.retention_raw_usec, m->config.retention_rollup_usec);
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

        q = manager_start_listeners(m, err, sizeof err);
        if (q < 0)
                return log_error_errno(q, "%s", err);

        m->started_mono = now_usec(CLOCK_MONOTONIC);
        /* exact (1 us): with 1 ms sd-event let the wake-up drift to the
         * end of that window, and every sample was a millisecond late */
        q = sd_event_add_time(m->event, &m->tick_source, CLOCK_MONOTONIC, m->started_mono, 1, on_tick, m);
        if (q >= 0) /* ahead of the HTTP server and StatsD when both are pending */
                q = sd_event_source_set_priority(m->tick_source, SD_EVENT_PRIORITY_IMPORTANT);
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
                manager_store_leak(m, m->runs[i]);
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

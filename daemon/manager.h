/* SPDX-License-Identifier: MIT */
/* The daemon's state and its one event loop: the sampler tick, runs'
 * lifecycle, signals, sd_notify, and the HTTP servers' sockets. Everything
 * runs on one thread, so nothing here needs a lock. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "manager-ops.h"
#include "analyze/leak.h"
#include "collect/probe.h"
#include "run.h"
#include "store/compact.h"
#include "store/details.h"
#include "store/raw.h"
#include "store/store.h"

struct api;
struct ingest;

struct manager {
        struct config config;
        char *config_path;
        bool config_path_explicit;
        /* command-line overrides, re-applied after every reload */
        char **overrides; /* key, value, key, value, ..., NULL */

        sd_event *event;
        sd_event_source *tick_source, *maintenance_source, *watchdog_source;
        usec_t maintenance_usec; /* what the longest recent maintenance pass took */
        bool maintenance_waited; /* the pass due now waited for a tick once */
        int64_t rolled_minute;   /* of the last pass that rolled a minute up and ran
                                  * malloc_trim(), in minutes since the epoch */
        int64_t pruned_minute;   /* of the last pass that looked for ended runs past ended_runs_per_uid */
        bool prune_more;         /* it found a full batch: more are waiting */
        struct store *store;
        struct api *api;
        struct collect_ctx collect;
        struct accel *accel; /* GPU/NPU devices and clients, energy */
        char boot_id[64];

        struct run **runs; /* running runs only, in id order */
        size_t n_runs;

        /* sampler bookkeeping */
        bool in_tick;
        usec_t started_mono;
        uint64_t ticks, overruns, tick_errors;
        double last_tick_ms;
        usec_t last_tick_end_mono;
        usec_t watchdog_usec;
        /* health: the counts last seen and when they last grew */
        uint64_t health_db_errors, health_overruns;
        usec_t health_db_error_mono, health_overrun_mono;
        bool listener_stuck; /* logged once per episode */
        int lock_fd;         /* <db>.lock, flock()ed for the process's life */
        /* self cost over the last maintenance period */
        usec_t self_prev_cpu_usec, self_prev_mono;
        double self_cpu_pct;
        bool has_self_cpu;

        usec_t host_next_due_usec;      /* host counters are read on the default interval's grid */
        struct leak_params leak_params; /* from the [leak] config keys */
        /* moves whenever stored or live data changes: the API's cache key */
        uint64_t data_generation;
        struct host_sample host;
        struct proc_cpu_total host_prev_cpu;
        bool has_host_prev;

        /* StatsD and observations */
        struct pid_cache_entry {
                int pid;
                int64_t run_id; /* 0 = no registered run */
                usec_t expires;
        } * pid_cache;
        size_t n_pid_cache;
        struct ingest *ingest;

        bool retention_pending;
        char status_line[512];
        char reload_error[208]; /* the last reload's error until one succeeds ("" = none) */
};

int manager_new(struct manager **ret);
void manager_free(struct manager *m);

/* Opens the store, restores runs, starts the HTTP servers and timers. */
int manager_start(struct manager *m);
int manager_run(struct manager *m);

/* SIGHUP: parse into a scratch config, validate, swap; keep the old one on
 * error. Returns 0 or -errno with errbuf filled. */
/* Initial load (no restrictions). */
int manager_load_config(struct manager *m, char *errbuf, size_t errlen);
int manager_reload(struct manager *m, char *errbuf, size_t errlen);

/* Socket activation: the listening socket systemd passed as fdname
 * (FileDescriptorName= of mlmond-http.socket, mlmond-statsd.socket), made
 * non-blocking, if it is of the given type; else -ENOENT and the caller binds
 * its own (as without systemd). Logs the address, and that the configured
 * one (key = want) is not used where they differ. */
int manager_listen_fd(const char *fdname, int type, const char *key, const char *want);

/* Registration (the API's register_run); see struct manager_ops. */
int manager_register(struct manager *m, const struct register_request *req, bool caller_is_root, uid_t caller_uid,
                     int64_t *ret_id, char *errbuf, size_t errlen);
/* -ENOENT no such run, -EALREADY not running, -EPERM not the caller's. */
int manager_unregister(struct manager *m, int64_t id, bool caller_is_root, uid_t caller_uid, char *errbuf,
                       size_t errlen);

struct run *manager_find_run(struct manager *m, int64_t id);

/* The run of pid itself or of its nearest registered ancestor (NULL if
 * none); answers are cached for a second or two. */
struct run *manager_run_for_pid(struct manager *m, int pid);
/* Drops the cached sender -> run answers (runs came or went). */
void manager_forget_senders(struct manager *m);

/* One observation for a running run (counted as unmatched if the run is not
 * running). Returns 0, -EINVAL (bad value), -ENOSPC (too many ops). */
int manager_observe(struct manager *m, struct run *r, enum op_kind kind, const char *op, size_t op_len,
                    const char *category, size_t category_len, double value, double rate);

/* Puts a mark on a running run: -EALREADY if it is not running. */
int manager_mark(struct manager *m, int64_t id, const char *label, int64_t *ret_ts);

/* ---- shared by manager.c, manager-runs.c and manager-listen.c ------------- */

/* The next multiple of interval after `after` (monotonic): runs are due on
 * a grid, so runs of one interval are sampled in the same tick. */
usec_t grid_next(usec_t after, usec_t interval);
/* Arms the sampler timer for the earliest due run. */
void manager_rearm_tick(struct manager *m, usec_t now);
/* The tick, now, if its timer is due (see manager.c). */
void manager_tick_if_due(struct manager *m);
/* What is wrong now (HEALTH_* bits of manager-ops.h): the figures behind
 * /v1/health's "degraded" and the watchdog. */
unsigned manager_health(struct manager *m);
/* Ends a run (exited, unregistered, lost): a last sample if asked, the
 * totals stored, a mark with the reason if one is given, the run dropped
 * from memory. */
int manager_end_run(struct manager *m, struct run *r, enum run_state state, bool final_sample, const char *reason);
/* Feeds a sample to the run's leak watches and stores verdict changes. */
void manager_leak_step(struct manager *m, struct run *r, const struct sample *s);
/* The run's verdicts into the store (inside a transaction). */
void manager_store_leak(struct manager *m, struct run *r);
int manager_store_sample(struct manager *m, struct run *r, const struct sample *s);
/* A sample taken: into the run's totals and leak watches, stored with what
 * changed of the run (inside the caller's transaction); its totals too when
 * persist_totals. */
void manager_record_sample(struct manager *m, struct run *r, const struct sample *s, bool persist_totals);
/* A sample of run id now; see struct manager_ops. */
int manager_sample_now(struct manager *m, int64_t id, bool caller_is_root, uid_t caller_uid, int64_t *ret_ts);
/* What the parent of run id's process saw when it reaped it; see struct
 * manager_ops. */
int manager_exited(struct manager *m, int64_t id, bool caller_is_root, uid_t caller_uid, const struct exit_report *e);
/* Runs that were running when mlmond stopped, pinned again if the same
 * process instance still runs, else ended as lost. */
int manager_restore_runs(struct manager *m);
/* ---- the goodput ledger and the verdicts beside the leak (manager-verdicts.c) ---- */

/* The run's step op: its registration's, else [goodput] step_op. */
const char *manager_step_op(const struct manager *m, const struct run_info *ri);
/* What ops and marks are for, and how the ledger splits, per the config. */
void manager_goodput_rules(const struct manager *m, const struct run_info *ri, struct goodput_rules *ret);
void manager_goodput_params(const struct manager *m, struct goodput_params *ret);
/* An observation was taken (its first step ends the startup). */
void manager_verdicts_observed(struct manager *m, struct run *r, enum op_kind kind, const char *op, size_t op_len,
                               double value);
/* A mark at ts_ms (it may open or close a checkpoint or eval phase). */
void manager_verdicts_mark(struct manager *m, struct run *r, const char *label, int64_t ts_ms);
/* The tick closed the run's slices (ops_rotate): into the ledger and the
 * input-bound window, and the verdict on it. */
void manager_verdicts_rotated(struct manager *m, struct run *r, int64_t now_ms);
/* A sample: the loader workers' CPU, GPU idle, time to OOM. */
void manager_verdicts_sample(struct manager *m, struct run *r, const struct sample *s);
/* Writes what changed (inside the caller's transaction). */
void manager_verdicts_store(struct manager *m, struct run *r);
/* The run ends (exited: its process did): GPU memory left behind, the
 * forecasts closed, everything stored (inside the caller's transaction). */
void manager_verdicts_end(struct manager *m, struct run *r, bool exited, int64_t now_ms);
/* A run resumed after mlmond started again: its ledger counts from now. */
void manager_verdicts_restored(struct run *r, int64_t now_ms);
/* The verdicts and the ledger's totals into a copy for one answer. */
void manager_verdicts_live(const struct run *r, struct run_live *ret);

/* The HTTP API and the StatsD listeners (manager-listen.c). */
int manager_start_listeners(struct manager *m, char *err, size_t errlen);

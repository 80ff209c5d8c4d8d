/* SPDX-License-Identifier: MIT */
/* What the HTTP and StatsD layers may ask of the daemon, as a table of
 * operations plus a userdata pointer (the manager), the way systemd's bus
 * vtables are written. Those layers include this header, never manager.h,
 * so no module includes its own caller. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "analyze/goodput.h"
#include "analyze/leakwatch.h"
#include "analyze/ops.h"
#include "analyze/verdict.h"
#include "collect/accel/gpu.h"
#include "collect/procfs-host.h"
#include "collect/sample.h"
#include "util.h"

struct accel;

/* The host's latest figures, read on the default interval's grid. */
struct host_sample {
        int64_t ts_ms;
        bool has_cpu_pct;
        double cpu_pct; /* 100 = all cpus busy (like node_exporter's 1 - idle) */
        unsigned ncpus;
        bool has_mem;
        struct proc_meminfo mem;
        bool has_load;
        struct proc_loadavg load;
};

/* A run's tags: at most TAGS_MAX, keys of 1 to TAG_KEY_MAX bytes, string
 * values of at most TAG_VALUE_MAX bytes (registration refuses more). */
#define TAGS_MAX 16
#define TAG_KEY_MAX 64
#define TAG_VALUE_MAX 128

/* A registration as a client asks for it. */
struct register_request {
        int pid;
        const char *name;
        usec_t interval_usec; /* 0 = default */
        bool children;
        const char *tags_json; /* a JSON object text, or NULL */
        bool no_discover;      /* no tags from the process's environment and cgroup */
        const char *step_op;   /* the op of its steps (goodput); NULL: [goodput] step_op */
};

/* Who asks: over the unix socket the peer's credentials, root may do
 * anything; trusted callers (restore at start) pass is_root. */
struct caller {
        bool is_root;
        uid_t uid;
};

/* What makes /v1/health say "degraded" (bits of manager_stats.health). */
enum {
        HEALTH_DB_WRITES_FAILING = 1 << 0,      /* a write failed recently */
        HEALTH_LISTENER_NOT_ACCEPTING = 1 << 1, /* connections wait unaccepted */
        HEALTH_SAMPLER_LATE = 1 << 2,           /* an overrun recently, or no tick for 2 intervals */
        HEALTH_METRICS_LIMITED = 1 << 3,        /* GET /metrics left series out over its limits recently */
        HEALTH_WAL_DAMAGED = 1 << 4,            /* a damaged write-ahead log lost data (not acknowledged) */
};

/* A damaged write-ahead log found when the database was opened (a copy of
 * the store's record, its strings the manager's for the answer). */
struct health_wal {
        bool damaged;
        int64_t ts_ms;
        bool header; /* the header was not one: the whole log was ignored */
        uint64_t log_bytes, replayed, frames_lost, transactions_lost;
        const char *copy; /* "" if none could be made */
};

/* The daemon's own figures, copied for one answer (/v1/health,
 * /v1/system, /metrics): renderers read this, never the manager. */
struct manager_stats {
        usec_t uptime_usec;
        uint64_t ticks, overruns; /* last_tick_ms is known once ticks > 0 */
        double last_tick_ms;
        bool has_self_cpu;
        double self_cpu_pct;
        uint64_t db_write_errors;
        unsigned health; /* HEALTH_* bits; none: "ok" */
        uint64_t statsd_received, statsd_malformed, statsd_unmatched, statsd_refused;
        struct host_sample host;
        bool has_host_cpu; /* host_cpu: the host's CPU time counters */
        struct proc_cpu_total host_cpu;
        long clk_tck;              /* the unit of host_cpu */
        const struct accel *accel; /* devices and energy; NULL: none */
        double grid_g_per_kwh;     /* [energy] grid_g_per_kwh */
        size_t n_runs;             /* running runs */
        /* filled by the API, which judges the jobs: jobs now stalled
         * (analyze/stall.h); has_jobs_stalled false: not counted */
        bool has_jobs_stalled;
        unsigned jobs_stalled;
        struct health_wal wal;
};

/* How a run's process ended, as its parent saw it (wait4()): the
 * resource use of the process and of the children it waited for. */
struct exit_report {
        bool has_exit;
        int wait_status; /* as wait(2) gives it: how the process ended */
        bool has_rusage;
        uint64_t max_rss_bytes;
        double user_time_s, system_time_s;
};

/* A running run as the manager's lookups find it: which it is, and whose. */
struct run_ref {
        int64_t id;
        int pid;
        bool has_uid;
        uid_t uid;
};

/* What the manager keeps of a running run in memory, copied out for one
 * answer: nothing in it points into the manager's state, so it stays valid
 * whatever the tick does meanwhile. run_live_done() it. */
enum {
        RUN_LIVE_INFO = 1 << 0,     /* info's strings: name, comm, cmdline, tags */
        RUN_LIVE_LAST = 1 << 1,     /* the latest sample and its per-device use */
        RUN_LIVE_LEAK = 1 << 2,     /* the leak verdicts */
        RUN_LIVE_GAUGES = 1 << 3,   /* the latest value of each gauge */
        RUN_LIVE_VERDICTS = 1 << 4, /* the verdicts beside the leak, the goodput ledger's totals */
};
struct run_live {
        struct run_info info; /* always its numbers (totals, leak_detected, ...); its strings with RUN_LIVE_INFO */
        size_t n_ops;         /* always: the ops its table holds (every op seen since it was registered or
                               * mlmond started) */
        bool has_last;
        struct sample last;
        struct gpu_use *uses; /* the latest sample's per-device use */
        size_t n_uses;
        bool has_leak;
        struct leak_report leak;
        bool gauges_live; /* gauges holds every gauge stored for the run (else the store has more) */
        struct gauge_value *gauges;
        size_t n_gauges;
        bool has_verdicts;
        struct verdict_report verdicts;
        bool has_goodput;                     /* the run reported an op: its ledger runs */
        double goodput_ms[_GOODPUT_KIND_MAX]; /* final so far (GOODPUT_HORIZON behind), since registration or
                                               * since mlmond started */
        double goodput_steps;                 /* productive steps in it */
        uint64_t step_timings;                /* every step op timing in the same time */
        bool goodput_since_registration;      /* (false: since mlmond started again) */
};
static inline void run_live_done(struct run_live *l) {
        run_info_done(&l->info);
        free(l->uses);
        gauge_values_free(l->gauges, l->n_gauges);
        l->uses = NULL;
        l->gauges = NULL;
        l->n_uses = l->n_gauges = 0;
}

/* A running run's processes (the run's own first, then its tree's), for
 * whoever must match a socket or a pid to it. */
struct run_pid {
        int64_t run_id;
        int pid;
};

struct manager_ops {
        /* On failure err holds a message for the client and the return value
         * the kind: -ESRCH no such process, -EPERM not the caller's, -EEXIST
         * registered already (*ret_id set to that run), -EUSERS too many
         * runs, -EINVAL a bad request. */
        int (*register_run)(void *userdata, const struct register_request *req, const struct caller *who,
                            int64_t *ret_id, char *err, size_t errlen);
        /* -ENOENT no such run, -EALREADY not running, -EPERM not the caller's. */
        int (*unregister_run)(void *userdata, int64_t id, const struct caller *who, char *err, size_t errlen);
        /* One observation for running run id: -ENOENT not running, -EINVAL
         * bad value, -ENOSPC too many ops (counted as unmatched either way). */
        int (*observe)(void *userdata, int64_t id, enum op_kind kind, const char *op, size_t op_len,
                       const char *category, size_t category_len, double value, double rate);
        /* The category op has in running run id, copied into buf: 1 with one,
         * 0 without; -ENOENT the run has not seen op (or is not running). */
        int (*op_category)(void *userdata, int64_t id, const char *op, char *buf, size_t size);
        /* A mark on a running run: -EALREADY if it is not running. */
        int (*mark)(void *userdata, int64_t id, const char *label, int64_t *ret_ts);
        /* A sample of running run id now (its process just exec'ed, say):
         * -EALREADY if it is not running, -EPERM not the caller's. */
        int (*sample_now)(void *userdata, int64_t id, const struct caller *who, int64_t *ret_ts);
        /* What the parent of run id's process saw when it reaped it: the
         * run ends (if the daemon had not seen it end yet) and its summary
         * takes the peak RSS and, for a tree, the CPU time where they are
         * higher than what was sampled. -ENOENT no such run, -EPERM not the
         * caller's, -EBUSY its process is still alive. */
        int (*exited)(void *userdata, int64_t id, const struct caller *who, const struct exit_report *e);
        /* A running run by id: -ENOENT if none. */
        int (*find_run)(void *userdata, int64_t id, struct run_ref *ret);
        /* The run of pid itself or of its nearest registered ancestor:
         * -ENOENT if none. */
        int (*run_for_pid)(void *userdata, int pid, struct run_ref *ret);
        /* The running runs with an id above after_id, in id order, at most
         * max of them: how many were written to v. */
        size_t (*running)(void *userdata, int64_t after_id, struct run_ref *v, size_t max);
        /* A running run's state in memory (RUN_LIVE_* bits say what besides
         * the numbers): -ENOENT if it is not running, -ENOMEM. */
        int (*live)(void *userdata, int64_t id, unsigned what, struct run_live *ret);
        /* Adds the op slices running run id holds in memory (closed ones not
         * yet stored, and the open ones) within [from, until) to *a;
         * op_filter NULL: every op. 0 when the run is not running. */
        int (*live_ops)(void *userdata, int64_t id, int64_t from, int64_t until, const char *op_filter,
                        struct op_aggs *a);
        /* The gauge values running run id holds in memory that are not
         * stored yet, within [from, until] (names copied; gauge_values_free()). */
        int (*live_gauges)(void *userdata, int64_t id, int64_t from, int64_t until, struct gauge_value **ret,
                           size_t *ret_n);
        /* Unix ms of the latest timing or count of op that running run id
         * took (*ret_op_ms), and of any op (*ret_any_ms); 0: none since it
         * was registered or mlmond started. -ENOENT if it is not running. */
        int (*op_last)(void *userdata, int64_t id, const char *op, int64_t *ret_op_ms, int64_t *ret_any_ms);
        /* Every running run's processes: -ENOMEM. free() *ret. */
        int (*run_pids)(void *userdata, struct run_pid **ret, size_t *ret_n);
        /* Moves whenever stored or live data changes: a cache key. */
        uint64_t (*data_generation)(void *userdata);
        void (*stats)(void *userdata, struct manager_stats *ret);
        /* The operator has seen to what /v1/health reports (the damaged
         * write-ahead log): it is no longer reported. -EPERM unless root;
         * 1 if something was reported, 0 if not. */
        int (*health_ack)(void *userdata, const struct caller *who);
        /* Runs the sampler's tick now if it is due. The server calls it
         * before each request, and a handler with a long answer between its
         * pieces, so that answering the API delays a sample by one request
         * or one piece at most. */
        void (*yield)(void *userdata);
};

/* A table and the userdata its operations get. */
struct manager_link {
        const struct manager_ops *ops;
        void *userdata;
};

/* SPDX-License-Identifier: MIT */
/* What the HTTP and StatsD layers may ask of the daemon, as a table of
 * operations plus a userdata pointer (the manager), the way systemd's bus
 * vtables are written. Those layers include this header, never manager.h,
 * so no module includes its own caller. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "analyze/ops.h"
#include "collect/runs.h"
#include "collect/sample.h"

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
        struct run *const *runs;   /* the running runs, by registration */
        size_t n_runs;
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
        /* One observation for a running run: -EINVAL bad value, -ENOSPC too
         * many ops (counted as unmatched either way). */
        int (*observe)(void *userdata, struct run *r, enum op_kind kind, const char *op, size_t op_len,
                       const char *category, size_t category_len, double value, double rate);
        /* A mark on a running run: -EALREADY if it is not running. */
        int (*mark)(void *userdata, int64_t id, const char *label, int64_t *ret_ts);
        /* A running run by id, NULL if none. */
        struct run *(*find_run)(void *userdata, int64_t id);
        /* The run of pid itself or of its nearest registered ancestor. */
        struct run *(*run_for_pid)(void *userdata, int pid);
        /* The running runs (valid until the event loop runs again). */
        struct run *const *(*running)(void *userdata, size_t *ret_n);
        /* Moves whenever stored or live data changes: a cache key. */
        uint64_t (*data_generation)(void *userdata);
        void (*stats)(void *userdata, struct manager_stats *ret);
        /* Runs the sampler's tick now if it is due. The server calls it
         * before each request, and a handler with a long answer between its
         * pieces, so that answering the API delays a sample by one request
         * or one piece at most. Pointers from running() and find_run() may
         * be stale after it. */
        void (*yield)(void *userdata);
};

/* A table and the userdata its operations get. */
struct manager_link {
        const struct manager_ops *ops;
        void *userdata;
};

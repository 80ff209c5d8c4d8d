/* SPDX-License-Identifier: MIT */
/* mlmond's configuration: one table of keys (section, name, type, default,
 * bounds) drives parsing, defaults, validation and --help; etc/mlmond.conf
 * documents the same keys. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/leak.h"
#include "util.h"

enum synchronous_mode { SYNC_NORMAL, SYNC_FULL };

/* One line of [categories]: ops whose name matches pattern (fnmatch(3)
 * glob) get category when they carry none of their own. */
/* Each untagged observation tries the patterns in turn: 256, one per op a
 * run may have (OPS_MAX_PER_RUN), is more than any useful table. */
#define CONFIG_MAX_CATEGORIES 256
struct category_rule {
        char *pattern;
        char *category;
};

struct config {
        /* [daemon] */
        char *db_path;
        char *listen;      /* "HOST:PORT" or "none" */
        char *socket_path; /* "" or "none" disables */
        char *statsd_socket;
        char *statsd_udp;
        usec_t interval_usec;
        usec_t pss_interval_usec; /* a tree run's smaps_rollup; 0: never */
        char *proc_root;
        char *sys_root;
        unsigned max_runs;
        unsigned max_runs_per_uid;
        /* [storage] */
        usec_t retention_raw_usec;
        usec_t retention_rollup_usec;
        char *synchronous;           /* "normal" | "full" */
        unsigned ended_runs_per_uid; /* 0: no bound */
        /* [http] */
        unsigned http_connection_limit;
        unsigned http_per_ip_connection_limit;
        usec_t http_connection_timeout_usec;
        usec_t http_header_timeout_usec;
        unsigned http_max_connections_per_uid;
        unsigned http_connection_memory_limit;
        unsigned http_max_body_bytes;
        usec_t http_query_timeout_usec;
        unsigned http_max_rows;
        char *http_token_file; /* "": no token, TCP is read-only */
        char *http_tls_cert;   /* PEM files, both or neither; "": plain HTTP */
        char *http_tls_key;
        char *http_javascript_dir; /* Debian's JavaScript libraries (the page's charts) */
        /* GET /metrics: what one run and one user's runs may make it cost */
        unsigned metrics_label_bytes_per_run; /* tag labels' names and values */
        unsigned metrics_ops_per_run, metrics_gauges_per_run;
        unsigned metrics_series_per_uid;
        char *metrics_pid_label; /* "yes": per-run series carry pid="PID"; "no": they do not */
        char *http_cors_origins; /* origins whose pages may read GET answers over TCP; "": none */
        /* What config_load_secrets() read from those files (NULL: unset).
         * Not keys: config_done() wipes them, config_copy() copies them. */
        char *http_token;
        size_t http_token_len;
        char *http_tls_cert_pem, *http_tls_key_pem;
        /* [leak] */
        char *leak_windows; /* "30s,1m,2m,5m,15m"; config_leak_params() parses it into leak.windows_s */
        usec_t leak_clear_after_usec;
        struct leak_params leak; /* every other [leak] key, written straight into the detector's parameters */
        /* [gpu] */
        char *gpu;          /* "auto" | "off" */
        char *nvml_library; /* dlopen name or path; "" = NVML off */
        usec_t gpu_device_interval_usec;
        unsigned gpu_fd_rescan_ticks;
        /* [energy] */
        char *energy; /* "auto" | "off" */
        double grid_g_per_kwh;
        /* [jobs] */
        double jobs_straggler_pct;     /* a straggler's median is slower than the other ranks' by more */
        char *jobs_collective_ops;     /* fnmatch patterns of the ops that hold a collective */
        double jobs_score_threshold;   /* a straggler score below it is flagged */
        usec_t jobs_score_window_usec; /* the windows of the individual score */
        double jobs_stall_factor;      /* stalled: no step for this many times the recent p99 step... */
        usec_t jobs_stall_floor_usec;  /* ...and at least this long */
        /* [goodput]: what ops and marks are for (comma-separated fnmatch(3) patterns) */
        char *goodput_step_op; /* a run's steps, unless its registration names its own */
        char *goodput_data_categories, *goodput_data_ops;
        char *goodput_checkpoint_categories, *goodput_eval_categories;
        char *goodput_checkpoint_marks, *goodput_eval_marks;
        double goodput_idle_k;
        char *goodput_parts_in_step; /* "yes" | "no" */
        /* [verdicts] */
        double input_bound_pct;
        usec_t input_bound_window_usec;
        double gpu_idle_mem_bytes;
        double gpu_idle_util_pct;
        usec_t gpu_idle_for_usec;
        /* [categories]: a table, not keys; in file order, the first match wins */
        struct category_rule *categories;
        size_t n_categories;
};

/* The category [categories] gives op (op_len bytes, no NUL needed), or
 * NULL when no pattern matches. */
const char *config_category_for(const struct config *c, const char *op, size_t op_len);

/* The [leak] keys as the detector's parameters: c->leak with the windows
 * parsed. -EINVAL for bad windows, -ERANGE for a value leak_params_valid()
 * refuses. */
int config_leak_params(const struct config *c, struct leak_params *ret);

#define MIN_INTERVAL_USEC (100 * USEC_PER_MSEC)
#define MAX_INTERVAL_USEC USEC_PER_HOUR

/* Fills every key with its default. */
int config_init_defaults(struct config *c);
void config_done(struct config *c);

/* Parses an INI file over *c (keys absent from the file keep their value).
 * missing_ok: a missing file is not an error (the default path). On error
 * *c may be half-updated: parse into a scratch copy and swap on success.
 * errbuf gets a one-line reason ("mlmond.conf:12: interval: '0s' is below 100ms"). */
int config_load_file(struct config *c, const char *path, bool missing_ok, char *errbuf, size_t errlen);
/* Same for a buffer (fuzzing, tests). */
int config_load_string(struct config *c, const char *text, const char *name, char *errbuf, size_t errlen);

/* Sets one key by name ("interval", or "storage.retention_raw"); used for
 * command-line overrides. */
int config_set(struct config *c, const char *key, const char *value, char *errbuf, size_t errlen);

/* Cross-key checks (listen address parses, paths absolute-or-relative, ...). */
int config_validate(const struct config *c, char *errbuf, size_t errlen);

int config_copy(struct config *dst, const struct config *src);

/* Reads the files that token_file, tls_cert and tls_key name into
 * http_token, http_tls_cert_pem and http_tls_key_pem. The token file and the
 * key must be regular files owned by root or by the user we run as, and not
 * readable by group or others; the token is 16 to 4096 visible ASCII
 * characters (one trailing newline stripped). -errno with a one-line reason
 * in errbuf (never the token). config-secrets.c. */
int config_load_secrets(struct config *c, char *errbuf, size_t errlen);
void config_secrets_done(struct config *c);
int config_secrets_copy(struct config *dst, const struct config *src);

bool config_synchronous_full(const struct config *c);

/* The table, for tests: the i-th key's section and name; false past the end. */
bool config_key_at(size_t i, const char **ret_section, const char **ret_name);
/* Whether value, parsed as the key [section] name, equals that key's value
 * in c: 1 or 0, or -EINVAL (unknown key) or the parser's error. */
int config_key_equals(const struct config *c, const char *section, const char *name, const char *value);

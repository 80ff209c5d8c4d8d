/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "analyze/leak.h"
#include "http-client.h"
#include "http/request.h"
#include "json-util.h"
#include "ingest/statsd.h"

#include <fnmatch.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum key_type {
        KEY_STRING,     /* char * */
        KEY_DURATION,   /* usec_t */
        KEY_SECONDS,    /* a duration, stored as double seconds */
        KEY_UINT,       /* unsigned */
        KEY_SIZE,       /* a whole number, stored as size_t */
        KEY_MIB,        /* a whole number of MiB, stored as double bytes */
        KEY_DOUBLE,     /* double */
        KEY_DOUBLE_MIB, /* a number of MiB, stored as double bytes */
};

struct config_key {
        const char *section;
        const char *name;
        enum key_type type;
        size_t offset;
        const char *def; /* NULL: the value leak_params_default() gives (the [leak] keys) */
        /* bounds: microseconds for durations, plain (MiB) for numbers */
        uint64_t min, max;
        const char *choices; /* for strings: '|'-separated allowed values, or NULL */
};

#define OFF(f) offsetof(struct config, f)

/* The one table. Bounds are the smallest and largest values that make sense:
 * under 100 ms the kernel's own accounting granularity (and our cost per
 * sample) dominates; 64 KiB bodies are plenty for any registration. */
static const struct config_key keys[] = {
        { "daemon", "db", KEY_STRING, OFF(db_path), "/var/lib/mlmond/mlmond.db", 0, 0, NULL },
        { "daemon", "listen", KEY_STRING, OFF(listen), "127.0.0.1:9477", 0, 0, NULL },
        { "daemon", "socket", KEY_STRING, OFF(socket_path), "/run/mlmond/mlmond.sock", 0, 0, NULL },
        { "daemon", "statsd_socket", KEY_STRING, OFF(statsd_socket), "/run/mlmond/statsd.sock", 0, 0, NULL },
        { "daemon", "statsd_udp", KEY_STRING, OFF(statsd_udp), "127.0.0.1:8125", 0, 0, NULL },
        { "daemon", "interval", KEY_DURATION, OFF(interval_usec), "1s", MIN_INTERVAL_USEC, MAX_INTERVAL_USEC, NULL },
        { "daemon", "pss_interval", KEY_DURATION, OFF(pss_interval_usec), "5s", 0, USEC_PER_HOUR, NULL },
        { "daemon", "proc_root", KEY_STRING, OFF(proc_root), "/proc", 0, 0, NULL },
        { "daemon", "sys_root", KEY_STRING, OFF(sys_root), "/sys", 0, 0, NULL },
        { "daemon", "max_runs", KEY_UINT, OFF(max_runs), "4096", 1, 100000, NULL },
        { "daemon", "max_runs_per_uid", KEY_UINT, OFF(max_runs_per_uid), "256", 1, 100000, NULL },
        { "storage", "retention_raw", KEY_DURATION, OFF(retention_raw_usec), "7d", USEC_PER_MINUTE, 3650 * USEC_PER_DAY,
          NULL },
        { "storage", "retention_rollup", KEY_DURATION, OFF(retention_rollup_usec), "90d", USEC_PER_HOUR,
          3650 * USEC_PER_DAY, NULL },
        { "storage", "synchronous", KEY_STRING, OFF(synchronous), "normal", 0, 0, "normal|full" },
        /* a user's history of runs, not a few days of it: a sweep of a
         * thousand trials is 1 000 runs; what goes over is the oldest */
        { "storage", "ended_runs_per_uid", KEY_UINT, OFF(ended_runs_per_uid), "10000", 0, 10000000, NULL },
        { "http", "connection_limit", KEY_UINT, OFF(http_connection_limit), "256", 4, 10000, NULL },
        { "http", "per_ip_connection_limit", KEY_UINT, OFF(http_per_ip_connection_limit), "16", 1, 10000, NULL },
        { "http", "connection_timeout", KEY_DURATION, OFF(http_connection_timeout_usec), "10s", USEC_PER_SEC,
          USEC_PER_HOUR, NULL },
        { "http", "header_timeout", KEY_DURATION, OFF(http_header_timeout_usec), "3s", 100 * USEC_PER_MSEC,
          USEC_PER_MINUTE, NULL },
        { "http", "max_connections_per_uid", KEY_UINT, OFF(http_max_connections_per_uid), "64", 1, 10000, NULL },
        { "http", "connection_memory_limit", KEY_UINT, OFF(http_connection_memory_limit), "32768", 8192, 1048576,
          NULL },
        { "http", "max_body_bytes", KEY_UINT, OFF(http_max_body_bytes), "65536", 1024, 1048576, NULL },
        { "http", "query_timeout", KEY_DURATION, OFF(http_query_timeout_usec), "2s", 10 * USEC_PER_MSEC,
          USEC_PER_MINUTE, NULL },
        { "http", "max_rows", KEY_UINT, OFF(http_max_rows), "10000", 10, 1000000, NULL },
        { "http", "token_file", KEY_STRING, OFF(http_token_file), "", 0, 0, NULL },
        { "http", "tls_cert", KEY_STRING, OFF(http_tls_cert), "", 0, 0, NULL },
        { "http", "tls_key", KEY_STRING, OFF(http_tls_key), "", 0, 0, NULL },
        { "http", "javascript_dir", KEY_STRING, OFF(http_javascript_dir), "/usr/share/javascript", 0, 0, NULL },
        { "http", "cors_origins", KEY_STRING, OFF(http_cors_origins), "", 0, 0, NULL },
        /* What a real job's series take: tags of a few hundred bytes (job id,
         * rank, unit, a 64-hex container id), 5 to 30 ops, a few gauges; a
         * node with 64 such ranks writes some 15 000 series. The limits are
         * well above that and well below what fills memory: one user at all
         * of them makes an answer of some 30 MB. */
        { "metrics", "label_bytes_per_run", KEY_UINT, OFF(metrics_label_bytes_per_run), "1024", 64, 65536, NULL },
        { "metrics", "ops_per_run", KEY_UINT, OFF(metrics_ops_per_run), "64", 1, 256, NULL },
        { "metrics", "gauges_per_run", KEY_UINT, OFF(metrics_gauges_per_run), "64", 0, 256, NULL },
        { "metrics", "series_per_uid", KEY_UINT, OFF(metrics_series_per_uid), "20000", 100, 10000000, NULL },
        { "metrics", "pid_label", KEY_STRING, OFF(metrics_pid_label), "yes", 0, 0, "yes|no" },
        /* The leak detector: the rows write into struct leak_params, whose
         * defaults leak_params_default() sets and etc/mlmond.conf explains.
         * The ranges here are wide; leak_params_valid() has the exact ones. */
        { "leak", "windows", KEY_STRING, OFF(leak_windows), NULL, 0, 0, NULL },
        { "leak", "grace", KEY_SECONDS, OFF(leak.grace_s), NULL, 0, USEC_PER_DAY, NULL },
        { "leak", "min_growth_mib", KEY_MIB, OFF(leak.min_growth_bytes), NULL, 1, 1048576, NULL },
        { "leak", "min_growth_pct", KEY_DOUBLE, OFF(leak.min_growth_pct), NULL, 0, 1000, NULL },
        { "leak", "min_z", KEY_DOUBLE, OFF(leak.min_z), NULL, 1, 10, NULL },
        { "leak", "clear_after", KEY_DURATION, OFF(leak_clear_after_usec), "1m", USEC_PER_SEC, USEC_PER_DAY, NULL },
        { "leak", "min_growth_se", KEY_DOUBLE, OFF(leak.min_growth_se), NULL, 0, 1000, NULL },
        { "leak", "growth_bound_z", KEY_DOUBLE, OFF(leak.growth_bound_z), NULL, 0, 100, NULL },
        { "leak", "min_coverage", KEY_DOUBLE, OFF(leak.min_coverage), NULL, 0, 1, NULL },
        { "leak", "max_gap_frac", KEY_DOUBLE, OFF(leak.max_gap_frac), NULL, 0, 1, NULL },
        { "leak", "min_floors", KEY_SIZE, OFF(leak.min_floors), NULL, 3, LEAK_BUCKETS, NULL },
        { "leak", "min_part_ratio", KEY_DOUBLE, OFF(leak.min_part_ratio), NULL, 0, 100, NULL },
        { "leak", "min_end_ratio", KEY_DOUBLE, OFF(leak.min_end_ratio), NULL, 0, 100, NULL },
        { "leak", "max_step_fit", KEY_DOUBLE, OFF(leak.max_step_fit), NULL, 0, 1000, NULL },
        { "leak", "min_new_high", KEY_DOUBLE, OFF(leak.min_new_high), NULL, 0, 100, NULL },
        { "leak", "drop_min_mib", KEY_DOUBLE_MIB, OFF(leak.drop_min_bytes), NULL, 0, 1048576, NULL },
        { "leak", "drop_noise_k", KEY_DOUBLE, OFF(leak.drop_noise_k), NULL, 0, 1000, NULL },
        { "leak", "outlier_noise_k", KEY_DOUBLE, OFF(leak.outlier_noise_k), NULL, 0, 1000, NULL },
        { "leak", "sawtooth_stop_factor", KEY_DOUBLE, OFF(leak.sawtooth_stop_factor), NULL, 1, 1000, NULL },
        { "leak", "restart_frac", KEY_DOUBLE, OFF(leak.restart_frac), NULL, 0, 1, NULL },
        /* accelerators (daemon/collect/accel/drm.c, gpudev.c, nvml.c) and energy (rapl.c) */
        { "gpu", "collect", KEY_STRING, OFF(gpu), "auto", 0, 0, "auto|off" },
        { "gpu", "nvml_library", KEY_STRING, OFF(nvml_library), "libnvidia-ml.so.1", 0, 0, NULL },
        { "gpu", "device_interval", KEY_DURATION, OFF(gpu_device_interval_usec), "1s", 100 * USEC_PER_MSEC,
          USEC_PER_MINUTE, NULL },
        { "gpu", "fd_rescan_ticks", KEY_UINT, OFF(gpu_fd_rescan_ticks), "10", 1, 3600, NULL },
        { "energy", "collect", KEY_STRING, OFF(energy), "auto", 0, 0, "auto|off" },
        { "energy", "grid_g_per_kwh", KEY_DOUBLE, OFF(grid_g_per_kwh), "475", 0, 5000, NULL },
        /* a median more than 10x the others' is past any threshold worth setting */
        { "jobs", "straggler_pct", KEY_DOUBLE, OFF(jobs_straggler_pct), "10", 0, 1000, NULL },
        /* what holds a collective in DDP (the gradients' all-reduce runs in
         * backward's hooks) and the usual names of timed collectives */
        { "jobs", "collective_ops", KEY_STRING, OFF(jobs_collective_ops),
          "backward *all_reduce* *allreduce* *all_gather* *allgather* *reduce_scatter* *barrier*", 0, 0, NULL },
        /* NVIDIA's resiliency extension flags a score below 0.75 by default */
        { "jobs", "score_threshold", KEY_DOUBLE, OFF(jobs_score_threshold), "0.75", 0, 1, NULL },
        { "jobs", "score_window", KEY_DURATION, OFF(jobs_score_window_usec), "1m", USEC_PER_SEC, USEC_PER_DAY, NULL },
        /* a step takes at most its p99 99 times in 100: ten of those without
         * one is no slow step, and a minute covers the pauses of a healthy
         * job that are not steps (an evaluation, a checkpoint) on small ones */
        { "jobs", "stall_factor", KEY_DOUBLE, OFF(jobs_stall_factor), "10", 1, 10000, NULL },
        { "jobs", "stall_floor", KEY_DURATION, OFF(jobs_stall_floor_usec), "1m", USEC_PER_SEC, USEC_PER_DAY, NULL },
        /* the goodput ledger (daemon/analyze/goodput.h) */
        { "goodput", "step_op", KEY_STRING, OFF(goodput_step_op), "step", 0, 0, NULL },
        { "goodput", "data_categories", KEY_STRING, OFF(goodput_data_categories), "data", 0, 0, NULL },
        { "goodput", "data_ops", KEY_STRING, OFF(goodput_data_ops), "data_wait,dataloader", 0, 0, NULL },
        { "goodput", "checkpoint_categories", KEY_STRING, OFF(goodput_checkpoint_categories), "checkpoint", 0, 0,
          NULL },
        { "goodput", "eval_categories", KEY_STRING, OFF(goodput_eval_categories), "eval", 0, 0, NULL },
        { "goodput", "checkpoint_marks", KEY_STRING, OFF(goodput_checkpoint_marks), "checkpoint*", 0, 0, NULL },
        { "goodput", "eval_marks", KEY_STRING, OFF(goodput_eval_marks), "eval*", 0, 0, NULL },
        { "goodput", "idle_k", KEY_DOUBLE, OFF(goodput_idle_k), "3", 1, 1000, NULL },
        { "goodput", "parts_in_step", KEY_STRING, OFF(goodput_parts_in_step), "no", 0, 0, "yes|no" },
        /* the verdicts beside the leak (daemon/analyze/verdict.h explains the defaults) */
        { "verdicts", "input_bound_pct", KEY_DOUBLE, OFF(input_bound_pct), "20", 1, 100, NULL },
        { "verdicts", "input_bound_window", KEY_DURATION, OFF(input_bound_window_usec), "1m", 10 * USEC_PER_SEC,
          10 * USEC_PER_MINUTE, NULL },
        { "verdicts", "gpu_idle_mib", KEY_DOUBLE_MIB, OFF(gpu_idle_mem_bytes), "1024", 1, 16777216, NULL },
        { "verdicts", "gpu_idle_util_pct", KEY_DOUBLE, OFF(gpu_idle_util_pct), "5", 0, 100, NULL },
        { "verdicts", "gpu_idle_for", KEY_DURATION, OFF(gpu_idle_for_usec), "10m", USEC_PER_SEC, USEC_PER_DAY, NULL },
};

#define MIB 1048576.0

static size_t key_size(enum key_type t) {
        switch (t) {
        case KEY_STRING:
                return sizeof(char *);
        case KEY_DURATION:
                return sizeof(usec_t);
        case KEY_UINT:
                return sizeof(unsigned);
        case KEY_SIZE:
                return sizeof(size_t);
        case KEY_SECONDS:
        case KEY_MIB:
        case KEY_DOUBLE:
        case KEY_DOUBLE_MIB:
                return sizeof(double);
        }
        return 0;
}

static bool is_choice(const struct config_key *k, const char *value) {
        size_t vl = strlen(value);
        for (const char *p = k->choices; *p;) {
                const char *bar = strchr(p, '|');
                size_t l = bar ? (size_t)(bar - p) : strlen(p);
                if (l == vl && strncmp(p, value, l) == 0)
                        return true;
                p += l + (bar ? 1 : 0);
        }
        return false;
}

static int set_string(const struct config_key *k, char **field, const char *value, char *err, size_t errlen) {
        if (k->choices && !is_choice(k, value)) {
                snprintf(err, errlen, "%s: '%s' is not one of %s", k->name, value, k->choices);
                return -EINVAL;
        }
        char *s = strdup(value);
        if (!s)
                return -ENOMEM;
        free(*field);
        *field = s;
        return 0;
}

static int parse_usec(const struct config_key *k, const char *value, usec_t *ret, char *err, size_t errlen) {
        usec_t u;
        if (parse_duration(value, &u) < 0) {
                snprintf(err, errlen, "%s: '%s' is not a duration (e.g. 500ms, 10s, 5m, 2h, 7d)", k->name, value);
                return -EINVAL;
        }
        if (u < k->min || u > k->max) {
                char lo[32], hi[32];
                format_duration(k->min, lo, sizeof lo);
                format_duration(k->max, hi, sizeof hi);
                snprintf(err, errlen, "%s: '%s' is out of range [%s, %s]", k->name, value, lo, hi);
                return -ERANGE;
        }
        *ret = u;
        return 0;
}

/* A number, whole or not as the key's type says, within the key's bounds. */
static int parse_number(const struct config_key *k, const char *value, double *ret, char *err, size_t errlen) {
        bool whole = k->type == KEY_UINT || k->type == KEY_SIZE || k->type == KEY_MIB;
        char v_str[32];
        double v;
        if (whole) {
                unsigned u;
                if (safe_atou(value, &u) < 0) {
                        snprintf(err, errlen, "%s: '%s' is not a whole number", k->name, value);
                        return -EINVAL;
                }
                snprintf(v_str, sizeof v_str, "%u", u);
                v = u;
        } else {
                if (safe_atod(value, &v) < 0) {
                        snprintf(err, errlen, "%s: '%s' is not a number", k->name, value);
                        return -EINVAL;
                }
                snprintf(v_str, sizeof v_str, "%g", v);
        }
        if (v < (double)k->min || v > (double)k->max) {
                snprintf(err, errlen, "%s: %s is out of range [%llu, %llu]", k->name, v_str, (unsigned long long)k->min,
                         (unsigned long long)k->max);
                return -ERANGE;
        }
        *ret = v;
        return 0;
}

static int set_key(struct config *c, const struct config_key *k, const char *value, char *err, size_t errlen) {
        void *field = (char *)c + k->offset;
        bool duration = k->type == KEY_DURATION || k->type == KEY_SECONDS;
        usec_t u = 0;
        double v = 0;
        int r;

        if (k->type == KEY_STRING)
                return set_string(k, field, value, err, errlen);
        r = duration ? parse_usec(k, value, &u, err, errlen) : parse_number(k, value, &v, err, errlen);
        if (r < 0)
                return r;
        switch (k->type) {
        case KEY_STRING: /* set above */
                break;
        case KEY_DURATION:
                *(usec_t *)field = u;
                break;
        case KEY_SECONDS:
                *(double *)field = (double)u / USEC_PER_SEC;
                break;
        case KEY_UINT:
                *(unsigned *)field = (unsigned)v;
                break;
        case KEY_SIZE:
                *(size_t *)field = (size_t)v;
                break;
        case KEY_MIB:
        case KEY_DOUBLE_MIB:
                *(double *)field = v * MIB;
                break;
        case KEY_DOUBLE:
                *(double *)field = v;
                break;
        }
        return 0;
}

static const struct config_key *find_key(const char *section, const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if ((!section || streq(keys[i].section, section)) && streq(keys[i].name, name))
                        return &keys[i];
        return NULL;
}

/* The windows as the table writes them: "30s,1m,2m,5m,15m". */
static char *format_windows(const struct leak_params *p) {
        char buf[LEAK_MAX_WINDOWS * 24] = "";
        for (size_t i = 0; i < p->n_windows; i++) {
                char d[20];
                format_duration((usec_t)llround(p->windows_s[i] * USEC_PER_SEC), d, sizeof d);
                if (i > 0)
                        strcat(buf, ",");
                strcat(buf, d);
        }
        return strdup(buf);
}

int config_init_defaults(struct config *c) {
        char err[256];
        memset(c, 0, sizeof *c);
        leak_params_default(&c->leak);
        c->leak_windows = format_windows(&c->leak);
        if (!c->leak_windows)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                if (!keys[i].def)
                        continue;
                int r = set_key(c, &keys[i], keys[i].def, err, sizeof err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The i-th key's field in c when it is a string, else NULL. */
static char **string_field(struct config *c, size_t i) {
        return keys[i].type == KEY_STRING ? (char **)((char *)c + keys[i].offset) : NULL;
}

static void categories_free(struct category_rule *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].pattern);
                free(v[i].category);
        }
        free(v);
}

static int categories_copy(struct config *dst, const struct config *src) {
        dst->categories = NULL;
        dst->n_categories = 0;
        if (src->n_categories == 0)
                return 0;
        struct category_rule *v = calloc(src->n_categories, sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < src->n_categories; i++) {
                v[i].pattern = strdup(src->categories[i].pattern);
                v[i].category = strdup(src->categories[i].category);
                if (!v[i].pattern || !v[i].category) {
                        categories_free(v, i + 1);
                        return -ENOMEM;
                }
        }
        dst->categories = v;
        dst->n_categories = src->n_categories;
        return 0;
}

/* "infer* = model_inference": a glob an op name may match, and a category
 * a StatsD tag could carry. */
static int add_category(struct config *c, const char *pattern, const char *category, char *err, size_t errlen) {
        size_t pl = strlen(pattern);
        if (pl == 0 || pl > OPS_NAME_MAX || !utf8_is_plain_text(pattern, pl)) {
                snprintf(err, errlen, "'%.64s': a pattern is 1-%d bytes of printable UTF-8", pattern, OPS_NAME_MAX);
                return -EINVAL;
        }
        if (!statsd_category_valid(category, strlen(category))) {
                snprintf(err, errlen,
                         "%.64s: '%.80s' is not a category (1-%d bytes, no control characters, spaces or \":,|@#\")",
                         pattern, category, STATSD_CATEGORY_MAX);
                return -EINVAL;
        }
        if (c->n_categories >= CONFIG_MAX_CATEGORIES) {
                snprintf(err, errlen, "at most %d patterns", CONFIG_MAX_CATEGORIES);
                return -E2BIG;
        }
        if (!GREEDY_REALLOC(c->categories, c->n_categories + 1))
                return -ENOMEM;
        struct category_rule *rule = &c->categories[c->n_categories];
        rule->pattern = strdup(pattern);
        rule->category = strdup(category);
        if (!rule->pattern || !rule->category) {
                free(rule->pattern);
                free(rule->category);
                return -ENOMEM;
        }
        c->n_categories++;
        return 0;
}

const char *config_category_for(const struct config *c, const char *op, size_t op_len) {
        char name[OPS_NAME_MAX + 1];
        if (c->n_categories == 0 || op_len > OPS_NAME_MAX)
                return NULL;
        memcpy(name, op, op_len);
        name[op_len] = 0;
        for (size_t i = 0; i < c->n_categories; i++)
                if (fnmatch(c->categories[i].pattern, name, 0) == 0)
                        return c->categories[i].category;
        return NULL;
}

void config_done(struct config *c) {
        config_secrets_done(c);
        categories_free(c->categories, c->n_categories);
        c->categories = NULL;
        c->n_categories = 0;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                char **p = string_field(c, i);
                if (p) {
                        free(*p);
                        *p = NULL;
                }
        }
}

int config_copy(struct config *dst, const struct config *src) {
        *dst = *src;
        if (config_secrets_copy(dst, src) < 0)
                return -ENOMEM;
        if (categories_copy(dst, src) < 0) {
                config_secrets_done(dst);
                return -ENOMEM;
        }
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                char **d = string_field(dst, i);
                if (d && *d && !(*d = strdup(*d))) {
                        for (size_t j = 0; j < i; j++) /* unwind the ones already duplicated */
                                if (string_field(dst, j))
                                        free(*string_field(dst, j));
                        categories_free(dst->categories, dst->n_categories);
                        config_secrets_done(dst);
                        return -ENOMEM;
                }
        }
        return 0;
}

struct ini_ctx {
        struct config *c;
        const char *name;
        char *err;
        size_t errlen;
        int r;
};

static int on_ini_key(void *user, const char *section, const char *name, const char *value) {
        struct ini_ctx *x = user;
        char e[256];

        if (x->r < 0)
                return 0;
        if (streq(section, "categories")) {
                int r = add_category(x->c, name, value, e, sizeof e);
                if (r < 0) {
                        snprintf(x->err, x->errlen, "%s: [categories] %s", x->name, e);
                        x->r = r;
                        return 0;
                }
                return 1;
        }
        const struct config_key *k = find_key(section, name);
        if (!k) {
                snprintf(x->err, x->errlen, "%s: unknown key '%s' in section [%s]", x->name, name, section);
                x->r = -EINVAL;
                return 0;
        }
        int r = set_key(x->c, k, value, e, sizeof e);
        if (r < 0) {
                snprintf(x->err, x->errlen, "%s: [%s] %s", x->name, section, e);
                x->r = r;
                return 0;
        }
        return 1;
}

static int finish_ini(struct ini_ctx *x, int ir) {
        if (x->r < 0)
                return x->r;
        if (ir == -2)
                return -ENOMEM;
        if (ir != 0) { /* a syntax error inih found itself (line number) */
                snprintf(x->err, x->errlen, "%s:%d: syntax error (expected [section] or key = value)", x->name, ir);
                return -EINVAL;
        }
        return 0;
}

int config_load_file(struct config *c, const char *path, bool missing_ok, char *errbuf, size_t errlen) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT && missing_ok)
                        return 0;
                return errorf(errbuf, errlen, errno, "%s: %m", path);
        }
        struct ini_ctx x = { c, path, errbuf, errlen, 0 };
        return finish_ini(&x, ini_parse_file(f, on_ini_key, &x));
}

int config_load_string(struct config *c, const char *text, const char *name, char *errbuf, size_t errlen) {
        struct ini_ctx x = { c, name, errbuf, errlen, 0 };
        return finish_ini(&x, ini_parse_string(text, on_ini_key, &x));
}

int config_set(struct config *c, const char *key, const char *value, char *errbuf, size_t errlen) {
        const char *dot = strchr(key, '.');
        const struct config_key *k;
        if (dot) {
                char sec[32];
                size_t l = (size_t)(dot - key);
                if (l >= sizeof sec)
                        return -EINVAL;
                memcpy(sec, key, l);
                sec[l] = 0;
                k = find_key(sec, dot + 1);
        } else
                k = find_key(NULL, key);
        if (!k) {
                snprintf(errbuf, errlen, "unknown key '%s'", key);
                return -EINVAL;
        }
        return set_key(c, k, value, errbuf, errlen);
}

static bool disabled(const char *s) {
        return !s || !*s || streq(s, "none");
}

int config_validate(const struct config *c, char *errbuf, size_t errlen) {
        char host[256];
        uint16_t port;
        if (!c->db_path || !*c->db_path) {
                snprintf(errbuf, errlen, "db: must not be empty");
                return -EINVAL;
        }
        char listen_host[256] = "";
        if (!disabled(c->listen) && parse_host_port(c->listen, listen_host, sizeof listen_host, &port) < 0) {
                snprintf(errbuf, errlen, "listen: '%s' is not HOST:PORT or 'none'", c->listen);
                return -EINVAL;
        }
        if (!disabled(c->statsd_udp) && parse_host_port(c->statsd_udp, host, sizeof host, &port) < 0) {
                snprintf(errbuf, errlen, "statsd_udp: '%s' is not HOST:PORT or 'none'", c->statsd_udp);
                return -EINVAL;
        }
        if (c->socket_path && strlen(c->socket_path) >= 108) {
                snprintf(errbuf, errlen, "socket: path longer than 107 bytes");
                return -EINVAL;
        }
        if (c->retention_rollup_usec < c->retention_raw_usec) {
                snprintf(errbuf, errlen, "retention_rollup must be at least retention_raw");
                return -EINVAL;
        }
        struct leak_params lp;
        int lr = config_leak_params(c, &lp);
        if (lr == -ERANGE) {
                snprintf(errbuf, errlen, "leak: a setting is out of its range (see etc/mlmond.conf)");
                return -EINVAL;
        }
        if (lr < 0) {
                snprintf(
                        errbuf, errlen,
                        "leak windows: '%s' must be 1 to %d ascending durations between 10s and 1d, e.g. 30s,2m,5m,15m",
                        c->leak_windows ? c->leak_windows : "", LEAK_MAX_WINDOWS);
                return -EINVAL;
        }
        if (c->http_per_ip_connection_limit > c->http_connection_limit) {
                snprintf(errbuf, errlen, "per_ip_connection_limit must not exceed connection_limit");
                return -EINVAL;
        }
        bool tls = !disabled(c->http_tls_cert);
        if (tls != !disabled(c->http_tls_key)) {
                snprintf(errbuf, errlen, "tls_cert and tls_key: give both or neither");
                return -EINVAL;
        }
        int r = request_origins_check(c->http_cors_origins, errbuf, errlen);
        if (r < 0)
                return r;
        /* the token would cross the network in clear text */
        if (!disabled(c->http_token_file) && !tls && !disabled(c->listen) && !http_host_is_loopback(listen_host)) {
                snprintf(errbuf, errlen,
                         "token_file: listen = %s is not a loopback address and there is no TLS: the token would "
                         "travel in clear text (set tls_cert and tls_key)",
                         c->listen);
                return -EINVAL;
        }
        return 0;
}

bool config_synchronous_full(const struct config *c) {
        return streq(c->synchronous, "full");
}

/* "30s,2m,5m": 1 to LEAK_MAX_WINDOWS ascending durations between 10 s and 1 d. */
static int parse_windows(const char *s, struct leak_params *p) {
        char buf[256];
        if (!s || strlen(s) >= sizeof buf)
                return -EINVAL;
        snprintf(buf, sizeof buf, "%s", s);
        char *save = NULL;
        double prev = 0;
        p->n_windows = 0;
        for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                usec_t u;
                if (p->n_windows == LEAK_MAX_WINDOWS || parse_duration(w, &u) < 0 || u < 10 * USEC_PER_SEC ||
                    u > USEC_PER_DAY || (double)u / 1e6 <= prev)
                        return -EINVAL;
                prev = (double)u / 1e6;
                p->windows_s[p->n_windows++] = prev;
        }
        return p->n_windows > 0 ? 0 : -EINVAL;
}

int config_leak_params(const struct config *c, struct leak_params *ret) {
        struct leak_params p = c->leak;
        int r = parse_windows(c->leak_windows, &p);
        if (r < 0)
                return r;
        if (!leak_params_valid(&p))
                return -ERANGE;
        *ret = p;
        return 0;
}

bool config_key_at(size_t i, const char **ret_section, const char **ret_name) {
        if (i >= ELEMENTSOF(keys))
                return false;
        *ret_section = keys[i].section;
        *ret_name = keys[i].name;
        return true;
}

int config_key_equals(const struct config *c, const char *section, const char *name, const char *value) {
        const struct config_key *k = find_key(section, name);
        if (!k)
                return -EINVAL;
        struct config parsed = {};
        char err[256];
        int r = set_key(&parsed, k, value, err, sizeof err);
        if (r < 0)
                return r;
        const void *have = (const char *)c + k->offset, *want = (const char *)&parsed + k->offset;
        if (k->type != KEY_STRING)
                return memcmp(have, want, key_size(k->type)) == 0;
        const char *s = *(char *const *)have;
        _cleanup_free_ char *t = *(char *const *)want;
        return s && streq(s, t);
}

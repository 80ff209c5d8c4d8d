/* SPDX-License-Identifier: MIT */
#include "store/query.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/leakwatch.h"
#include "collect/accel/gpu.h"
#include "store/param.h"

struct budget {
        usec_t deadline;
};

static int progress(void *userdata) {
        struct budget *b = userdata;
        return now_usec(CLOCK_MONOTONIC) > b->deadline; /* nonzero interrupts */
}

/* Installs the time budget on the reader for the duration of one query. */
static sqlite3 *reader_begin(struct store *s, const struct query_limits *l, struct budget *b) {
        sqlite3 *db = store_reader(s);
        b->deadline = now_usec(CLOCK_MONOTONIC) + l->timeout_usec;
        sqlite3_progress_handler(db, 1000, progress, b);
        return db;
}

static void reader_end(struct store *s) {
        sqlite3_progress_handler(store_reader(s), 0, NULL, NULL);
}

static int step_error(sqlite3 *db, int rc) {
        if (rc == SQLITE_INTERRUPT)
                return -ETIMEDOUT;
        log_warning("query failed: %s", sqlite3_errmsg(db));
        return -EIO;
}

/* Prepares sql on the reader: 0 or -EIO. */
static int prepare(struct store *s, sqlite3 *db, const char *sql, sqlite3_stmt **ret) {
        return store_reader_prepare(s, sql, ret) == SQLITE_OK ? 0 : step_error(db, SQLITE_ERROR);
}

/* Steps st once: 1 with a row, 0 without, or -ETIMEDOUT / -EIO. */
static int step_one(sqlite3 *db, sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                return 1;
        return rc == SQLITE_DONE ? 0 : step_error(db, rc);
}

/* Reads row i of st; 0, or a negative errno that stops the reading. */
typedef int (*row_fn)(sqlite3_stmt *st, size_t i, void *userdata);

/* The one row reader: steps st to its end under the reader's time budget,
 * calling row() on each row. max_rows > 0: a row beyond them stops the
 * reading and sets *ret_truncated (when not NULL). *ret_n: the rows row()
 * took, also on error (for the caller to free). Returns 0, row()'s error,
 * -ETIMEDOUT or -EIO. */
static int read_rows(sqlite3 *db, sqlite3_stmt *st, size_t max_rows, row_fn row, void *userdata, size_t *ret_n,
                     bool *ret_truncated) {
        size_t n = 0;
        int rc, r = 0;
        if (ret_truncated)
                *ret_truncated = false;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (max_rows > 0 && n == max_rows) {
                        if (ret_truncated)
                                *ret_truncated = true;
                        break;
                }
                r = row(st, n, userdata);
                if (r < 0)
                        break;
                n++;
        }
        *ret_n = n;
        if (r < 0)
                return r;
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : step_error(db, rc);
}

/* The rows of an array query: elements of `size` bytes; fill() reads a row into one. What an
 * element holds is freed with it: the strings at the offsets in `strings` (0: none), and what done()
 * frees (when not NULL). */
struct array_type {
        size_t size;
        int (*fill)(sqlite3_stmt *st, void *elem);
        size_t strings[2];
        void (*done)(void *elem);
};

static void array_free(void *v, size_t n, const struct array_type *t) {
        for (size_t i = 0; i < n; i++) {
                char *e = (char *)v + i * t->size;
                for (size_t j = 0; j < ELEMENTSOF(t->strings); j++)
                        if (t->strings[j])
                                free(*(char **)(e + t->strings[j]));
                if (t->done)
                        t->done(e);
        }
        free(v);
}

/* read_rows() into a growing array. */
struct array_rows {
        void *array;
        const struct array_type *t;
};

static int array_row(sqlite3_stmt *st, size_t i, void *userdata) {
        struct array_rows *a = userdata;
        if (!greedy_realloc(&a->array, i + 1, a->t->size))
                return -ENOMEM;
        return a->t->fill(st, (char *)a->array + i * a->t->size);
}

/* The rows of sql with its parameters (at most max_rows, 0: all; see read_rows()) in a new array:
 * *ret and *ret_n, or a negative errno and nothing. */
static int query_array(struct store *s, const struct query_limits *l, const char *sql, const struct param *params,
                       size_t max_rows, const struct array_type *t, void **ret, size_t *ret_n, bool *ret_truncated) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        struct array_rows a = { NULL, t };
        size_t n = 0;
        int r = prepare(s, db, sql, &st);
        if (r == 0) {
                bind_params(st, params);
                r = read_rows(db, st, max_rows, array_row, &a, &n, ret_truncated);
        }
        reader_end(s);
        if (r < 0) {
                array_free(a.array, n, t);
                return r;
        }
        *ret = a.array;
        *ret_n = n;
        return 0;
}

/* The first row of sql with its parameters, read by row(): 0, -ENOENT if there is none, row()'s
 * error, -ETIMEDOUT or -EIO. */
static int query_row(struct store *s, const struct query_limits *l, const char *sql, const struct param *params,
                     int (*row)(sqlite3_stmt *st, void *userdata), void *userdata) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = prepare(s, db, sql, &st);
        if (r == 0) {
                bind_params(st, params);
                r = step_one(db, st);
        }
        if (r == 1)
                r = row(st, userdata);
        else if (r == 0)
                r = -ENOENT;
        reader_end(s);
        return r;
}

static int run_info_row(sqlite3_stmt *st, void *userdata) {
        return store_row_to_run_info(st, userdata);
}

/* One run_leak row into the state of its series. */
static void leak_state_row(sqlite3_stmt *st, struct leak_state *l) {
        *l = (struct leak_state){
                .suspected = sqlite3_column_int(st, 1) != 0,
                .evaluated = sqlite3_column_int(st, 2) != 0,
                .ended = sqlite3_column_int(st, 3) != 0,
                .slope_bytes_per_s = sqlite3_column_double(st, 4),
                .growth_bytes = sqlite3_column_double(st, 5),
                .window_s = sqlite3_column_double(st, 6),
                .confidence = sqlite3_column_double(st, 7),
                .since_ms = sqlite3_column_int64(st, 8),
                .suspected_at_ms = sqlite3_column_int64(st, 9),
                .evaluated_ts_ms = sqlite3_column_int64(st, 10),
        };
        const unsigned char *reason = sqlite3_column_text(st, 11);
        snprintf(l->reason, sizeof l->reason, "%s", reason ? (const char *)reason : "");
}

int query_run_leak(struct store *s, const struct query_limits *l, int64_t id, struct leak_report *ret) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        struct leak_report rep = {};
        bool any = false;
        int r = prepare(s, db,
                        "SELECT metric, suspected, evaluated, ended, slope_bytes_per_s, growth_bytes, window_s, "
                        "confidence, since_ts, suspected_ts, evaluated_ts, reason FROM run_leak WHERE run_id=?",
                        &st);
        if (r == 0)
                bind_params(st, PARAMS(p_int(id)));
        while (r == 0 && (r = step_one(db, st)) == 1) {
                const unsigned char *metric = sqlite3_column_text(st, 0);
                if (metric && streq((const char *)metric, "gpu_mem_bytes")) {
                        rep.has_gpu = true;
                        leak_state_row(st, &rep.gpu);
                } else {
                        any = true;
                        leak_state_row(st, &rep.rss);
                }
                r = 0;
        }
        reader_end(s);
        if (r < 0)
                return r;
        if (!any)
                return -ENOENT;
        *ret = rep;
        return 0;
}

int query_run(struct store *s, const struct query_limits *l, int64_t id, struct run_info *ret) {
        int r = query_row(s, l, "SELECT " STORE_RUN_COLUMNS " FROM runs WHERE id=?", PARAMS(p_int(id)), run_info_row,
                          ret);
        if (r < 0)
                return r;
        struct leak_report rep;
        int q = query_run_leak(s, l, id, &rep);
        if (q == 0 && (ret->leak = malloc(sizeof rep)))
                *ret->leak = rep;
        else if (q != -ENOENT) {
                run_info_done(ret);
                return q < 0 ? q : -ENOMEM;
        }
        return 0;
}

static int fill_run_info(sqlite3_stmt *st, void *elem) {
        return store_row_to_run_info(st, elem);
}

static void run_info_elem_done(void *elem) {
        run_info_done(elem);
}

static const struct array_type run_infos = { sizeof(struct run_info), fill_run_info, {}, run_info_elem_done };

void run_infos_free(struct run_info *v, size_t n) {
        array_free(v, n, &run_infos);
}

int query_runs(struct store *s, const struct query_limits *l, const struct runs_filter *f, struct run_info **ret,
               size_t *ret_n, bool *ret_truncated) {
        return query_array(s, l,
                           "SELECT " STORE_RUN_COLUMNS " FROM runs WHERE (?1 IS NULL OR state = ?1) "
                           "AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR pid = ?3) "
                           "AND (?5 IS NULL OR (json_valid(tags) AND json_extract(tags, '$.job_id') = ?5)) "
                           "AND id > ?6 ORDER BY id LIMIT ?4",
                           PARAMS(f->state >= 0 ? p_text(run_state_to_string((enum run_state)f->state)) : p_null(),
                                  p_text(f->name), f->pid > 0 ? p_int(f->pid) : p_null(),
                                  p_int((int64_t)l->max_rows + 1), p_text(f->job_id), p_int(f->after_id)),
                           l->max_rows, &run_infos, (void **)ret, ret_n, ret_truncated);
}

static char *col_text_dup(sqlite3_stmt *st, int i) {
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? strdup((const char *)t) : NULL;
}

static int fill_job_info(sqlite3_stmt *st, void *elem) {
        struct job_info *j = elem;
        *j = (struct job_info){
                .job_id = col_text_dup(st, 0),
                .runs = (uint64_t)sqlite3_column_int64(st, 1),
                .ranks = (uint64_t)sqlite3_column_int64(st, 2),
                .running = (uint64_t)sqlite3_column_int64(st, 3),
                .first_registered_ts_ms = sqlite3_column_int64(st, 4),
                .last_ended_ts_ms = sqlite3_column_int64(st, 5),
        };
        return j->job_id ? 0 : -ENOMEM;
}

static const struct array_type job_infos = {
        sizeof(struct job_info), fill_job_info, { offsetof(struct job_info, job_id) }, NULL
};

void job_infos_free(struct job_info *v, size_t n) {
        array_free(v, n, &job_infos);
}

/* Tags are a JSON object per run (validated at registration: string
 * values); a run without a job_id tag is in no job. */
int query_jobs(struct store *s, const struct query_limits *l, struct job_info **ret, size_t *ret_n,
               bool *ret_truncated) {
        return query_array(s, l,
                           "SELECT json_extract(tags, '$.job_id') AS job, count(*), "
                           "count(DISTINCT json_extract(tags, '$.rank')), sum(state = 'running'), "
                           "min(registered_ts), max(ended_ts) FROM runs "
                           "WHERE json_valid(tags) AND json_type(tags, '$.job_id') = 'text' "
                           "GROUP BY job ORDER BY min(registered_ts), job LIMIT ?1",
                           PARAMS(p_int((int64_t)l->max_rows + 1)), l->max_rows, &job_infos, (void **)ret, ret_n,
                           ret_truncated);
}

static int sample_at_row(sqlite3_stmt *st, void *userdata) {
        store_row_to_sample(st, 0, userdata);
        return 0;
}

int query_sample_at(struct store *s, const struct query_limits *l, int64_t run_id, int64_t ts, struct sample *ret) {
        return query_row(s, l, "SELECT " STORE_SAMPLE_COLUMNS " FROM samples WHERE ts=? AND run_id=?",
                         PARAMS(p_int(ts), p_int(run_id)), sample_at_row, ret);
}

void sample_gpus_free(struct sample_gpu *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].uses);
        free(v);
}

/* The use of device at ts in v (sorted by ts, then device), or NULL. */
static struct gpu_use *sample_gpu_find(struct sample_gpu *v, size_t n, int64_t ts, const char *device) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (v[mid].ts_ms < ts)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t j = 0; lo < n && v[lo].ts_ms == ts && j < v[lo].n; j++)
                if (streq(v[lo].uses[j].device, device))
                        return &v[lo].uses[j];
        return NULL;
}

static int sample_gpu_use_row(sqlite3_stmt *st, struct sample_gpu **v, size_t *n) {
        int64_t ts = sqlite3_column_int64(st, 0);
        if (*n == 0 || (*v)[*n - 1].ts_ms != ts) {
                if (!GREEDY_REALLOC(*v, *n + 1))
                        return -ENOMEM;
                (*v)[(*n)++] = (struct sample_gpu){ .ts_ms = ts };
        }
        struct sample_gpu *g = &(*v)[*n - 1];
        if (g->n == GPU_MAX_RUN_DEVICES || !GREEDY_REALLOC(g->uses, g->n + 1))
                return g->n == GPU_MAX_RUN_DEVICES ? 0 : -ENOMEM;
        struct gpu_use *u = &g->uses[g->n++];
        *u = (struct gpu_use){ .estimated = sqlite3_column_int(st, 3) != 0,
                               .clients = (unsigned)sqlite3_column_int(st, 4) };
        const unsigned char *dev = sqlite3_column_text(st, 1), *drv = sqlite3_column_text(st, 2);
        snprintf(u->device, sizeof u->device, "%s", dev ? (const char *)dev : "");
        snprintf(u->driver, sizeof u->driver, "%s", drv ? (const char *)drv : "");
        if ((u->has_mem = sqlite3_column_type(st, 5) != SQLITE_NULL))
                u->mem_bytes = (uint64_t)sqlite3_column_int64(st, 5);
        if ((u->has_util = sqlite3_column_type(st, 6) != SQLITE_NULL))
                u->util_pct = sqlite3_column_double(st, 6);
        return 0;
}

static void sample_gpu_part_row(sqlite3_stmt *st, struct sample_gpu *v, size_t n) {
        const unsigned char *dev = sqlite3_column_text(st, 1), *kind = sqlite3_column_text(st, 2),
                            *name = sqlite3_column_text(st, 3);
        struct gpu_use *u = dev && kind && name ? sample_gpu_find(v, n, sqlite3_column_int64(st, 0), (const char *)dev)
                                                : NULL;
        if (!u)
                return;
        bool known = sqlite3_column_type(st, 4) != SQLITE_NULL;
        if (streq((const char *)kind, "engine") && u->n_engines < GPU_MAX_ENGINES) {
                struct gpu_engine *e = &u->engines[u->n_engines++];
                snprintf(e->name, sizeof e->name, "%s", (const char *)name);
                e->has_util = known;
                e->util_pct = known ? sqlite3_column_double(st, 4) : 0;
        } else if (streq((const char *)kind, "region") && u->n_regions < GPU_MAX_REGIONS && known) {
                struct gpu_region *g = &u->regions[u->n_regions++];
                snprintf(g->name, sizeof g->name, "%s", (const char *)name);
                g->resident_bytes = (uint64_t)sqlite3_column_int64(st, 4);
        }
}

int query_sample_gpu(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                     struct sample_gpu **ret, size_t *ret_n) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        _cleanup_reset_ sqlite3_stmt *st = NULL, *pt = NULL;
        struct sample_gpu *v = NULL;
        size_t n = 0;
        int r = prepare(s, db,
                        "SELECT ts, device, driver, estimated, clients, mem_bytes, util_pct FROM sample_gpu "
                        "WHERE ts>=?2 AND ts<=?3 AND run_id=?1 ORDER BY ts, device",
                        &st);
        if (r == 0)
                bind_params(st, PARAMS(p_int(run_id), p_int(from), p_int(until)));
        while (r == 0 && (r = step_one(db, st)) == 1)
                r = sample_gpu_use_row(st, &v, &n);
        if (r == 0 && n > 0)
                r = prepare(s, db,
                            "SELECT ts, device, kind, name, value FROM sample_gpu_parts "
                            "WHERE ts>=?2 AND ts<=?3 AND run_id=?1 ORDER BY ts, device, kind, name",
                            &pt);
        if (r == 0 && n > 0)
                bind_params(pt, PARAMS(p_int(run_id), p_int(from), p_int(until)));
        while (r == 0 && n > 0 && (r = step_one(db, pt)) == 1) {
                sample_gpu_part_row(pt, v, n);
                r = 0;
        }
        reader_end(s);
        if (r < 0) {
                sample_gpus_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* Downsampling keeps the columns in STORE_SAMPLE_COLUMNS order so one row
 * reader serves both: rates and gauges averaged, counters at their last
 * (= largest) value. */
#define SAMPLE_STEP_COLUMNS                                                                                  \
        "(ts / ?1) * ?1 AS bucket, avg(cpu_pct), max(cpu_time_ns), max(user_time_ns), max(system_time_ns), " \
        "CAST(avg(rss_bytes) AS INTEGER), CAST(avg(rss_anon_bytes) AS INTEGER), max(peak_rss_bytes), "       \
        "max(threads), max(processes), max(read_bytes), max(write_bytes), max(rchar_bytes), "                \
        "max(wchar_bytes), avg(read_bytes_per_s), avg(write_bytes_per_s), max(netns_rx_bytes), "             \
        "max(netns_tx_bytes), avg(netns_rx_bytes_per_s), avg(netns_tx_bytes_per_s), max(gpu_mem_bytes), "    \
        "avg(gpu_util_pct), max(energy_j)"

static int sample_row(sqlite3_stmt *st, size_t i, void *userdata) {
        struct sample **v = userdata;
        if (!GREEDY_REALLOC(*v, i + 1))
                return -ENOMEM;
        store_row_to_sample(st, 0, &(*v)[i]);
        return 0;
}

int query_samples(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                  unsigned limit, int64_t step_ms, struct sample **ret, size_t *ret_n, bool *ret_truncated) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        struct sample *v = NULL;
        size_t n = 0;
        if (limit == 0 || limit > l->max_rows)
                limit = l->max_rows;
        const char *sql = step_ms > 0 ? "SELECT " SAMPLE_STEP_COLUMNS " FROM samples WHERE run_id=?2 AND ts>=?3 AND "
                                        "ts<=?4 GROUP BY bucket ORDER BY bucket LIMIT ?5"
                                      : "SELECT " STORE_SAMPLE_COLUMNS " FROM samples WHERE run_id=?2 AND ts>=?3 AND "
                                        "ts<=?4 ORDER BY ts LIMIT ?5";
        int r = prepare(s, db, sql, &st);
        if (r == 0) {
                bind_params(st, PARAMS(step_ms > 0 ? p_int(step_ms) : p_null(), p_int(run_id), p_int(from),
                                       p_int(until), p_int((int64_t)limit + 1)));
                r = read_rows(db, st, limit, sample_row, &v, &n, ret_truncated);
        }
        reader_end(s);
        if (r < 0) {
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

void window_rates_from(const struct sample *a, const struct sample *z, struct window_rates *w) {
        double dt = (double)(z->ts_ms - a->ts_ms) / 1000.0;
        w->from_ms = a->ts_ms;
        w->until_ms = z->ts_ms;
        w->has_cpu = w->has_io = w->has_net = false;
        if (dt <= 0)
                return;
        w->has_cpu = true;
        w->cpu_pct = (double)sat_sub_u64(z->cpu_time_ns, a->cpu_time_ns) / 1e9 / dt * 100.0;
        if (a->has_io && z->has_io) {
                w->has_io = true;
                w->read_bytes_per_s = (double)sat_sub_u64(z->read_bytes, a->read_bytes) / dt;
                w->write_bytes_per_s = (double)sat_sub_u64(z->write_bytes, a->write_bytes) / dt;
        }
        if (a->has_net && z->has_net) {
                w->has_net = true;
                w->netns_rx_bytes_per_s = (double)sat_sub_u64(z->netns_rx_bytes, a->netns_rx_bytes) / dt;
                w->netns_tx_bytes_per_s = (double)sat_sub_u64(z->netns_tx_bytes, a->netns_tx_bytes) / dt;
        }
}

static int edge_sample(struct store *s, sqlite3 *db, int64_t run_id, int64_t from, int64_t until, bool last,
                       struct sample *ret) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        const char *sql = last ? "SELECT " STORE_SAMPLE_COLUMNS " FROM samples WHERE run_id=? AND ts>=? AND ts<=? "
                                 "ORDER BY ts DESC LIMIT 1"
                               : "SELECT " STORE_SAMPLE_COLUMNS " FROM samples WHERE run_id=? AND ts>=? AND ts<=? "
                                 "ORDER BY ts ASC LIMIT 1";
        int r = prepare(s, db, sql, &st);
        if (r < 0)
                return r;
        bind_params(st, PARAMS(p_int(run_id), p_int(from), p_int(until)));
        r = step_one(db, st);
        if (r <= 0)
                return r == 0 ? -ENOENT : r;
        store_row_to_sample(st, 0, ret);
        return 0;
}

int query_window(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                 struct window_rates *ret) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        struct window_rates w = { .from_ms = from, .until_ms = until };
        struct sample a, z;
        int r = edge_sample(s, db, run_id, from, until, false, &a);
        if (r == 0)
                r = edge_sample(s, db, run_id, from, until, true, &z);
        if (r == 0) {
                window_rates_from(&a, &z, &w);
                _cleanup_reset_ sqlite3_stmt *st = NULL;
                if (store_reader_prepare(
                            s, "SELECT count(*), avg(gpu_util_pct) FROM samples WHERE run_id=? AND ts>=? AND ts<=?",
                            &st) == SQLITE_OK) {
                        bind_params(st, PARAMS(p_int(run_id), p_int(from), p_int(until)));
                        r = step_one(db, st);
                        if (r == 1) {
                                w.samples = (uint64_t)sqlite3_column_int64(st, 0);
                                if (sqlite3_column_type(st, 1) != SQLITE_NULL) {
                                        w.has_gpu = true;
                                        w.gpu_util_pct = sqlite3_column_double(st, 1);
                                }
                                r = 0;
                        } else if (r == 0)
                                r = step_error(db, SQLITE_DONE);
                }
        } else if (r == -ENOENT)
                r = 0; /* no samples in the window: every rate unknown */
        reader_end(s);
        if (r == 0)
                *ret = w;
        return r;
}

/* What changed between two cumulative samples: the counters of z less
 * those of a (a may be z itself). */
static void totals_between(const struct sample *a, const struct sample *z, struct run_totals *t) {
        t->last_ts_ms = z->ts_ms;
        t->cpu_time_ns = sat_sub_u64(z->cpu_time_ns, a->cpu_time_ns);
        t->user_time_ns = sat_sub_u64(z->user_time_ns, a->user_time_ns);
        t->system_time_ns = sat_sub_u64(z->system_time_ns, a->system_time_ns);
        t->has_rss = z->has_rss;
        t->final_rss_bytes = z->rss_bytes;
        t->has_io = a->has_io && z->has_io;
        t->read_bytes = sat_sub_u64(z->read_bytes, a->read_bytes);
        t->write_bytes = sat_sub_u64(z->write_bytes, a->write_bytes);
        t->has_net = a->has_net && z->has_net;
        t->netns_rx_bytes = sat_sub_u64(z->netns_rx_bytes, a->netns_rx_bytes);
        t->netns_tx_bytes = sat_sub_u64(z->netns_tx_bytes, a->netns_tx_bytes);
        t->has_energy = a->has_energy && z->has_energy && z->energy_j >= a->energy_j;
        t->energy_j = t->has_energy ? z->energy_j - a->energy_j : 0;
}

int query_span_totals(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                      struct run_totals *ret, int64_t *ret_base_ts) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        struct run_totals t = {};
        struct sample a, z;
        int r = edge_sample(s, db, run_id, from, until, true, &z);
        if (r == 0) {
                /* the counters at the span's start: the last sample at or
                 * before it, else the first inside it */
                r = edge_sample(s, db, run_id, INT64_MIN, from, true, &a);
                if (r == -ENOENT)
                        r = edge_sample(s, db, run_id, from, until, false, &a);
        }
        if (r == 0) {
                totals_between(&a, &z, &t);
                _cleanup_reset_ sqlite3_stmt *st = NULL;
                r = prepare(s, db,
                            "SELECT count(*), max(rss_bytes), max(threads), max(gpu_mem_bytes), count(gpu_util_pct), "
                            "sum(gpu_util_pct) FROM samples WHERE run_id=? AND ts>=? AND ts<=?",
                            &st);
                if (r == 0) {
                        bind_params(st, PARAMS(p_int(run_id), p_int(from), p_int(until)));
                        r = step_one(db, st);
                }
                if (r == 1) {
                        t.samples = (uint64_t)sqlite3_column_int64(st, 0);
                        /* the sampled maximum: VmHWM would count peaks before the span */
                        t.peak_rss_bytes = (uint64_t)sqlite3_column_int64(st, 1);
                        t.threads_max = (uint32_t)sqlite3_column_int64(st, 2);
                        t.has_gpu_mem = sqlite3_column_type(st, 3) != SQLITE_NULL;
                        t.peak_gpu_mem_bytes = (uint64_t)sqlite3_column_int64(st, 3);
                        t.gpu_util_samples = (uint64_t)sqlite3_column_int64(st, 4);
                        t.gpu_util_sum_pct = sqlite3_column_double(st, 5);
                        r = 0;
                } else if (r == 0)
                        r = step_error(db, SQLITE_DONE);
        } else if (r == -ENOENT)
                r = 0; /* no samples in the span */
        reader_end(s);
        if (r == 0) {
                *ret = t;
                *ret_base_ts = t.samples > 0 ? a.ts_ms : 0;
        }
        return r;
}

/* Per op slice row: into the aggregates. */
struct slice_rows {
        struct op_aggs *a;
        struct hist h;
};

static int slice_row(sqlite3_stmt *st, size_t i, void *userdata) {
        struct slice_rows *x = userdata;
        const char *op = (const char *)sqlite3_column_text(st, 0);
        const char *cat = (const char *)sqlite3_column_text(st, 1);
        const void *blob = sqlite3_column_blob(st, 3);
        int blen = sqlite3_column_bytes(st, 3);
        /* a blob that does not decode is skipped, not fatal: the count
         * still stands */
        bool has_h = blob && hist_decode(&x->h, blob, (size_t)blen) == 0;
        return op ? op_aggs_add(x->a, op, cat, sqlite3_column_double(st, 2), has_h ? &x->h : NULL) : 0;
}

static int merge_slices(struct store *s, sqlite3 *db, const char *table, int64_t run_id, int64_t from, int64_t until,
                        const char *op_filter, struct op_aggs *a) {
        static const char raw[] = "SELECT op, category, count, hist FROM op_slices WHERE ts >= ?1 AND ts < ?2 "
                                  "AND run_id = ?3 AND (?4 IS NULL OR op = ?4)";
        static const char rollup[] = "SELECT op, category, count, hist FROM op_slices_1m WHERE ts >= ?1 AND ts < ?2 "
                                     "AND run_id = ?3 AND (?4 IS NULL OR op = ?4)";
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = prepare(s, db, streq(table, "op_slices") ? raw : rollup, &st);
        if (r < 0)
                return r;
        bind_params(st, PARAMS(p_int(from), p_int(until), p_int(run_id), p_text(op_filter)));
        struct slice_rows x = { .a = a };
        size_t n;
        hist_init(&x.h);
        r = read_rows(db, st, 0, slice_row, &x, &n, NULL);
        hist_done(&x.h);
        return r;
}

int query_ops(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
              int64_t rollup_before, const char *op_filter, struct op_aggs *a) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        int r = 0;
        /* minutes wholly before the raw retention come from the rollups */
        int64_t split = rollup_before - rollup_before % 60000;
        if (from < split)
                r = merge_slices(s, db, "op_slices_1m", run_id, from, split < until ? split : until, op_filter, a);
        if (r == 0 && until > split)
                r = merge_slices(s, db, "op_slices", run_id, from > split ? from : split, until, op_filter, a);
        reader_end(s);
        return r;
}

static int fill_mark(sqlite3_stmt *st, void *elem) {
        struct mark *m = elem;
        m->ts_ms = sqlite3_column_int64(st, 0);
        m->label = strdup((const char *)sqlite3_column_text(st, 1));
        return m->label ? 0 : -ENOMEM;
}

static const struct array_type marks = { sizeof(struct mark), fill_mark, { offsetof(struct mark, label) }, NULL };

void marks_free(struct mark *v, size_t n) {
        array_free(v, n, &marks);
}

int query_marks(struct store *s, const struct query_limits *l, int64_t run_id, struct mark **ret, size_t *ret_n) {
        return query_array(s, l, "SELECT ts, label FROM marks WHERE run_id = ? ORDER BY ts LIMIT ?",
                           PARAMS(p_int(run_id), p_int(l->max_rows)), 0, &marks, (void **)ret, ret_n, NULL);
}

static int ts_row(sqlite3_stmt *st, void *userdata) {
        *(int64_t *)userdata = sqlite3_column_int64(st, 0);
        return 0;
}

int query_mark_ts(struct store *s, const struct query_limits *l, int64_t run_id, const char *label, int64_t *ret_ts) {
        return query_row(s, l, "SELECT ts FROM marks WHERE run_id = ? AND label = ? ORDER BY ts DESC LIMIT 1",
                         PARAMS(p_int(run_id), p_text(label)), ts_row, ret_ts);
}

static int fill_gauge(sqlite3_stmt *st, void *elem) {
        struct gauge_point *g = elem;
        g->ts_ms = sqlite3_column_int64(st, 0);
        g->name = strdup((const char *)sqlite3_column_text(st, 1));
        g->value = sqlite3_column_double(st, 2);
        return g->name ? 0 : -ENOMEM;
}

static const struct array_type gauge_points = {
        sizeof(struct gauge_point), fill_gauge, { offsetof(struct gauge_point, name) }, NULL
};

void gauge_points_free(struct gauge_point *v, size_t n) {
        array_free(v, n, &gauge_points);
}

int query_gauges(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                 unsigned limit, struct gauge_point **ret, size_t *ret_n, bool *ret_truncated) {
        if (limit == 0 || limit > l->max_rows)
                limit = l->max_rows;
        return query_array(s, l,
                           "SELECT ts, name, value FROM gauges WHERE ts >= ? AND ts <= ? AND run_id = ? "
                           "ORDER BY ts LIMIT ?",
                           PARAMS(p_int(from), p_int(until), p_int(run_id), p_int((int64_t)limit + 1)), limit,
                           &gauge_points, (void **)ret, ret_n, ret_truncated);
}

static int fill_gauge_stat(sqlite3_stmt *st, void *elem) {
        struct gauge_stat *g = elem;
        g->name = strdup((const char *)sqlite3_column_text(st, 0));
        g->ts_ms = sqlite3_column_int64(st, 1);
        g->value = sqlite3_column_double(st, 2);
        g->min = sqlite3_column_double(st, 3);
        g->max = sqlite3_column_double(st, 4);
        g->count = (uint64_t)sqlite3_column_int64(st, 5);
        return g->name ? 0 : -ENOMEM;
}

static const struct array_type gauge_stats = {
        sizeof(struct gauge_stat), fill_gauge_stat, { offsetof(struct gauge_stat, name) }, NULL
};

void gauge_stats_free(struct gauge_stat *v, size_t n) {
        array_free(v, n, &gauge_stats);
}

int query_gauge_stats(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                      struct gauge_stat **ret, size_t *ret_n) {
        /* the latest row of each name is found again by its primary key */
        return query_array(s, l,
                           "SELECT g.name, g.ts, g.value, a.lo, a.hi, a.n FROM "
                           "(SELECT name, MAX(ts) AS ts, MIN(value) AS lo, MAX(value) AS hi, COUNT(*) AS n "
                           "FROM gauges WHERE ts >= ? AND ts <= ? AND run_id = ? GROUP BY name) AS a "
                           "JOIN gauges AS g ON g.ts = a.ts AND g.run_id = ? AND g.name = a.name "
                           "ORDER BY g.name LIMIT ?",
                           PARAMS(p_int(from), p_int(until), p_int(run_id), p_int(run_id), p_int(l->max_rows)), 0,
                           &gauge_stats, (void **)ret, ret_n, NULL);
}

static int fill_leak_event(sqlite3_stmt *st, void *elem) {
        struct leak_event *e = elem;
        e->ts_ms = sqlite3_column_int64(st, 0);
        e->suspected = sqlite3_column_int(st, 1) != 0;
        e->reason = strdup((const char *)sqlite3_column_text(st, 2));
        e->metric = strdup((const char *)sqlite3_column_text(st, 3));
        if (e->reason && e->metric)
                return 0;
        free(e->reason);
        free(e->metric);
        return -ENOMEM;
}

static const struct array_type leak_events = {
        sizeof(struct leak_event),
        fill_leak_event,
        { offsetof(struct leak_event, reason), offsetof(struct leak_event, metric) },
        NULL,
};

void leak_events_free(struct leak_event *v, size_t n) {
        array_free(v, n, &leak_events);
}

int query_leak_events(struct store *s, const struct query_limits *l, int64_t run_id, struct leak_event **ret,
                      size_t *ret_n) {
        return query_array(s, l,
                           "SELECT ts, suspected, reason, metric FROM leak_events WHERE run_id = ? ORDER BY ts LIMIT ?",
                           PARAMS(p_int(run_id), p_int(l->max_rows)), 0, &leak_events, (void **)ret, ret_n, NULL);
}

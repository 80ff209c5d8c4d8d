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
#include "store/raw.h"
#include "store/reader.h"

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
        int r = reader_prepare(s, db, sql, &st);
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
        int r = reader_prepare(s, db, sql, &st);
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
        int r = reader_prepare(s, db,
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
                        rep.pss = metric && streq((const char *)metric, "pss_anon_bytes");
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

#define RUNS_WHERE                                                                                                    \
        "SELECT " STORE_RUN_COLUMNS " FROM runs WHERE (?1 IS NULL OR state = ?1) AND (?7 = 0 OR state != 'running') " \
        "AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR pid = ?3) "                                                 \
        "AND (?5 IS NULL OR (json_valid(tags) AND json_extract(tags, '$.job_id') = ?5)) "

int query_runs(struct store *s, const struct query_limits *l, const struct runs_filter *f, struct run_info **ret,
               size_t *ret_n, bool *ret_truncated) {
        /* two texts rather than an ORDER BY expression: each walks the
         * rowid in its direction and stops after LIMIT rows */
        const char *sql = f->newest_first ? RUNS_WHERE "AND id < ?6 ORDER BY id DESC LIMIT ?4"
                                          : RUNS_WHERE "AND id > ?6 ORDER BY id LIMIT ?4";
        int64_t after = f->newest_first && f->after_id <= 0 ? INT64_MAX : f->after_id;
        return query_array(s, l, sql,
                           PARAMS(f->state >= 0 ? p_text(run_state_to_string((enum run_state)f->state)) : p_null(),
                                  p_text(f->name), f->pid > 0 ? p_int(f->pid) : p_null(),
                                  p_int((int64_t)l->max_rows + 1), p_text(f->job_id), p_int(after), p_int(f->ended)),
                           l->max_rows, &run_infos, (void **)ret, ret_n, ret_truncated);
}

int query_runs_ended(struct store *s, const struct query_limits *l, size_t max, struct run_info **ret, size_t *ret_n) {
        if (max > l->max_rows)
                max = l->max_rows;
        return query_array(s, l,
                           "SELECT " STORE_RUN_COLUMNS " FROM runs WHERE state IN ('exited', 'unregistered') "
                           "ORDER BY ended_ts DESC, id DESC LIMIT ?1",
                           PARAMS(p_int((int64_t)max)), max, &run_infos, (void **)ret, ret_n, NULL);
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

static int first_sample(const struct sample *m, void *userdata) {
        *(struct sample *)userdata = *m;
        return 1;
}

int query_sample_at(struct store *s, const struct query_limits *l, int64_t run_id, int64_t ts, struct sample *ret) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        int r = raw_samples(s, db, run_id, ts, ts, false, first_sample, ret);
        reader_end(s);
        return r < 0 ? r : r == 0 ? -ENOENT : 0;
}

void sample_gpus_free(struct sample_gpu *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].uses);
        free(v);
}

struct ts_key {
        const struct sample_gpu *v;
        int64_t ts;
};

static bool ts_below(size_t i, const void *ctx) {
        const struct ts_key *k = ctx;
        return k->v[i].ts_ms < k->ts;
}

/* The use of device at ts in v (sorted by ts, then device), or NULL. */
static struct gpu_use *sample_gpu_find(struct sample_gpu *v, size_t n, int64_t ts, const char *device) {
        size_t lo = lower_bound(n, ts_below, &(struct ts_key){ v, ts });
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
        int r = reader_prepare(s, db,
                               "SELECT ts, device, driver, estimated, clients, mem_bytes, util_pct FROM sample_gpu "
                               "WHERE ts>=?2 AND ts<=?3 AND run_id=?1 ORDER BY ts, device",
                               &st);
        if (r == 0)
                bind_params(st, PARAMS(p_int(run_id), p_int(from), p_int(until)));
        while (r == 0 && (r = step_one(db, st)) == 1)
                r = sample_gpu_use_row(st, &v, &n);
        if (r == 0 && n > 0)
                r = reader_prepare(s, db,
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

/* SPDX-License-Identifier: MIT */
#include "store/store.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/accel/gpu.h"
#include "analyze/histogram.h"
#include "analyze/leak.h"
#include "analyze/leakwatch.h"
#include "analyze/ops.h"
#include "store/head.h"
#include "store/param.h"
#include "store/tier.h"
#include "store/walcheck.h"
#include "util.h"

extern const char *const sql_migrations[];
extern const size_t sql_migrations_count;

/* Samples written in a transaction wait here and go in SAMPLE_BATCH rows
 * a statement: a row costs a third less than one statement a row, and 64
 * rows a statement less again than 16 (tests/bench/cost.py -p). */
#define SAMPLE_BATCH 64
/* The statements a flush uses, largest first: the rest of a tick (1 000
 * runs: 15 x 64 + 40) goes in 16 and 4 rows, then one by one. */
static const size_t batch_rows[] = { SAMPLE_BATCH, 16, 4, 1 };
/* ts, run_id, data */
#define SAMPLE_PARAMS 3

struct store {
        sqlite3 *w, *r;
        sqlite3_stmt *insert_sample, *update_totals, *update_state, *insert_run, *insert_op_slice, *insert_gauge;
        sqlite3_stmt *insert_samples[ELEMENTSOF(batch_rows)]; /* batch_rows[i] rows */
        sqlite3_stmt *insert_tick;                             /* a time the head holds rows of */
        int64_t last_tick;                                     /* the last one noted in this transaction */
        bool has_last_tick;
        struct pending_sample {
                int64_t run_id, ts;
                size_t len;
                uint8_t data[HEAD_PACKED_MAX];
        } pending[SAMPLE_BATCH];
        size_t n_pending;
        bool in_txn;
        uint64_t write_errors;
        int64_t retention_raw_ms, retention_rollup_ms;
        bool has_wal_damage; /* reported until acknowledged or a day old */
        struct wal_damage wal_damage;
        struct {
                const char *sql;
                sqlite3_stmt *st;
        } reader_cache[24];
};

unsigned store_schema_version(void) {
        return (unsigned)sql_migrations_count;
}

static void sqlite_log(void *arg, int code, const char *msg) {
        /* SQLITE_WARNING carries "file unlinked while open" and the like:
         * that must reach the journal. Routine notices stay at debug. */
        int prim = code & 0xff;
        if (prim == SQLITE_NOTICE || prim == SQLITE_SCHEMA)
                log_debug("sqlite (%d): %s", code, msg);
        else
                log_warning("sqlite (%d): %s", code, msg);
}

static void sqlite_global_setup(void) {
        static bool done;
        if (done)
                return;
        done = true;
        sqlite3_config(SQLITE_CONFIG_LOG, sqlite_log, NULL);
        sqlite3_initialize();
}

static int exec(sqlite3 *db, const char *sql, char *err, size_t errlen) {
        char *msg = NULL;
        int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
                if (err)
                        snprintf(err, errlen, "%s", msg ? msg : sqlite3_errstr(rc));
                sqlite3_free(msg);
                return -EIO;
        }
        return 0;
}

static int user_version(sqlite3 *db, unsigned *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
                return -EIO;
        *ret = (unsigned)sqlite3_column_int(st, 0);
        return 0;
}

int store_migrate(sqlite3 *db, unsigned target, char *errbuf, size_t errlen) {
        unsigned v;
        char e[256];
        if (target == 0 || target > sql_migrations_count)
                target = (unsigned)sql_migrations_count;
        if (user_version(db, &v) < 0) {
                snprintf(errbuf, errlen, "cannot read schema version: %s", sqlite3_errmsg(db));
                return -EIO;
        }
        if (v > sql_migrations_count) {
                snprintf(errbuf, errlen, "database schema version %u is newer than this mlmond knows (%zu)", v,
                         sql_migrations_count);
                return -EPROTO;
        }
        /* sql/012 packs the tiers' rows, sql/014 the head's, with these */
        if (v < target && (tier_register_pack(db) < 0 || head_register_pack(db) < 0)) {
                snprintf(errbuf, errlen, "cannot set up the migrations: %s", sqlite3_errmsg(db));
                return -EIO;
        }
        for (unsigned i = v; i < target; i++) {
                char set[64];
                snprintf(set, sizeof set, "PRAGMA user_version = %u;", i + 1);
                if (exec(db, "BEGIN IMMEDIATE", e, sizeof e) < 0 || exec(db, sql_migrations[i], e, sizeof e) < 0 ||
                    exec(db, set, e, sizeof e) < 0 || exec(db, "COMMIT", e, sizeof e) < 0) {
                        exec(db, "ROLLBACK", NULL, 0);
                        snprintf(errbuf, errlen, "migration %u failed: %s", i + 1, e);
                        return -EIO;
                }
                log_info("database migrated to schema version %u", i + 1);
        }
        return 0;
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
        if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
                return log_error_errno(EIO, "prepare failed: %s (%s)", sqlite3_errmsg(db), sql);
        return 0;
}

/* INSERT into samples with n rows of parameters. */
static int prepare_sample_insert(sqlite3 *db, size_t n, sqlite3_stmt **st) {
        static const char head[] = "INSERT OR REPLACE INTO samples (ts, run_id, data) VALUES ";
        char sql[sizeof head + SAMPLE_BATCH * (2 * SAMPLE_PARAMS + 2)];
        size_t k = strlen(head);
        memcpy(sql, head, k);
        for (size_t i = 0; i < n; i++) {
                if (i)
                        sql[k++] = ',';
                sql[k++] = '(';
                for (size_t j = 0; j < SAMPLE_PARAMS; j++) {
                        sql[k++] = '?';
                        sql[k++] = j + 1 < SAMPLE_PARAMS ? ',' : ')';
                }
        }
        sql[k] = '\0';
        return prepare(db, sql, st);
}

int store_open(const char *path, bool sync_full, struct store **ret, char *errbuf, size_t errlen) {
        sqlite_global_setup();
        struct store *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        store_set_retention(s, 7 * USEC_PER_DAY, 90 * USEC_PER_DAY);
        char e[256];
        int r;

        /* before SQLite replays the log, and resets it */
        int64_t now_ms = now_realtime_ms();
        bool wal_damaged = walcheck_before_open(path, now_ms, &s->wal_damage) > 0;
        if (sqlite3_open_v2(path, &s->w, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK) {
                snprintf(errbuf, errlen, "cannot open database %s: %s", path,
                         s->w ? sqlite3_errmsg(s->w) : "out of memory");
                r = -EIO;
                goto fail;
        }
        sqlite3_busy_timeout(s->w, 5000);
        sqlite3_db_config(s->w, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
        sqlite3_extended_result_codes(s->w, 1);
        if (exec(s->w, "PRAGMA journal_mode=WAL", e, sizeof e) < 0 ||
            exec(s->w, sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", e, sizeof e) < 0 ||
            /* 512 KiB of page cache: each tick appends at the right edge
             * of one b-tree and rewrites the runs table (about 50 pages
             * with its indexes at 1 000 runs), which stay cached; SQLite's
             * 2 MiB default was a fifth of the daemon's memory
             * (tests/bench/sampling.sh), and 1 MiB only held more of the
             * minute that the rollup reads once. */
            exec(s->w,
                 "PRAGMA journal_size_limit=67108864; PRAGMA trusted_schema=OFF; PRAGMA cell_size_check=ON; "
                 "PRAGMA cache_size=-512;",
                 e, sizeof e) < 0) {
                snprintf(errbuf, errlen, "cannot set up database %s: %s", path, e);
                r = -EIO;
                goto fail;
        }
        r = store_migrate(s->w, 0, errbuf, errlen);
        if (r < 0)
                goto fail;
        s->has_wal_damage = walcheck_recorded(s->w, wal_damaged, &s->wal_damage, now_ms) > 0;

        if (sqlite3_open_v2(path, &s->r, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
                snprintf(errbuf, errlen, "cannot open database %s read-only: %s", path,
                         s->r ? sqlite3_errmsg(s->r) : "out of memory");
                r = -EIO;
                goto fail;
        }
        sqlite3_busy_timeout(s->r, 5000);
        exec(s->r, "PRAGMA query_only=ON; PRAGMA trusted_schema=OFF; PRAGMA cache_size=-1024;", NULL, 0);

        for (size_t i = 0; i < ELEMENTSOF(batch_rows); i++)
                if ((r = prepare_sample_insert(s->w, batch_rows[i], &s->insert_samples[i])) < 0)
                        goto fail;
        s->insert_sample = s->insert_samples[ELEMENTSOF(batch_rows) - 1];
        if ((r = prepare(s->w,
                         "UPDATE runs SET last_ts=?, samples=?, cpu_time_ns=?, user_time_ns=?, system_time_ns=?, "
                         "peak_rss_bytes=?, final_rss_bytes=?, threads_max=?, read_bytes=?, write_bytes=?, "
                         "netns_rx_bytes=?, netns_tx_bytes=?, peak_gpu_mem_bytes=?, gpu_util_samples=?, "
                         "gpu_util_sum_pct=?, energy_j=?, peak_pss_bytes=?, final_pss_bytes=?, "
                         "final_uss_bytes=? WHERE id=?",
                         &s->update_totals)) < 0 ||
            (r = prepare(s->w, "UPDATE runs SET state=?, ended_ts=? WHERE id=?", &s->update_state)) < 0 ||
            (r = prepare(s->w, "INSERT OR IGNORE INTO head_ticks (ts) VALUES (?)", &s->insert_tick)) < 0 ||
            (r = prepare(s->w,
                         "INSERT INTO runs (pid, start_time_ticks, boot_id, uid, name, comm, cmdline, tags, "
                         "interval_ms, children, state, registered_ts, step_op) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         &s->insert_run)) < 0 ||
            (r = prepare(s->w,
                         "INSERT OR REPLACE INTO op_slices (ts, run_id, op, category, count, timings, hist) "
                         "VALUES (?,?,?,?,?,?,?)",
                         &s->insert_op_slice)) < 0 ||
            (r = prepare(s->w, "INSERT OR REPLACE INTO gauges (ts, run_id, name, value) VALUES (?,?,?,?)",
                         &s->insert_gauge)) < 0) {
                snprintf(errbuf, errlen, "cannot prepare statements: %s", sqlite3_errmsg(s->w));
                goto fail;
        }
        *ret = s;
        return 0;
fail:
        store_close(s);
        return r;
}

void store_close(struct store *s) {
        if (!s)
                return;
        if (s->in_txn)
                store_rollback(s);
        for (size_t i = 0; i < ELEMENTSOF(batch_rows); i++)
                sqlite3_finalize(s->insert_samples[i]);
        sqlite3_finalize(s->update_totals);
        sqlite3_finalize(s->update_state);
        sqlite3_finalize(s->insert_tick);
        sqlite3_finalize(s->insert_run);
        sqlite3_finalize(s->insert_op_slice);
        for (size_t i = 0; i < ELEMENTSOF(s->reader_cache); i++)
                sqlite3_finalize(s->reader_cache[i].st);
        sqlite3_finalize(s->insert_gauge);
        if (s->r)
                sqlite3_close_v2(s->r);
        if (s->w) {
                /* the last connection to close checkpoints and removes -wal */
                sqlite3_wal_checkpoint_v2(s->w, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
                sqlite3_close_v2(s->w);
        }
        free(s);
}

void store_set_retention(struct store *s, usec_t raw, usec_t rollup) {
        s->retention_raw_ms = (int64_t)(raw / USEC_PER_MSEC);
        s->retention_rollup_ms = (int64_t)(rollup / USEC_PER_MSEC);
}

int64_t store_retention_raw_ms(const struct store *s) {
        return s->retention_raw_ms;
}

int64_t store_retention_rollup_ms(const struct store *s) {
        return s->retention_rollup_ms;
}

sqlite3 *store_writer(struct store *s) {
        return s->w;
}
sqlite3 *store_reader(struct store *s) {
        return s->r;
}
uint64_t store_write_errors(struct store *s) {
        return s->write_errors;
}

int store_begin(struct store *s) {
        if (exec(s->w, "BEGIN IMMEDIATE", NULL, 0) < 0) {
                s->write_errors++;
                return log_warning_errno(EIO, "database: cannot begin transaction: %s", sqlite3_errmsg(s->w));
        }
        s->in_txn = true;
        s->has_last_tick = false;
        return 0;
}

static int flush_samples(struct store *s);
static void drop_samples(struct store *s);

int store_commit(struct store *s) {
        flush_samples(s); /* a failed write is counted, and the rest commits */
        if (exec(s->w, "COMMIT", NULL, 0) < 0) {
                s->write_errors++;
                log_warning("database: commit failed: %s", sqlite3_errmsg(s->w));
                store_rollback(s);
                return -EIO;
        }
        s->in_txn = false;
        return 0;
}

void store_rollback(struct store *s) {
        drop_samples(s);
        s->has_last_tick = false;
        if (sqlite3_get_autocommit(s->w) == 0)
                exec(s->w, "ROLLBACK", NULL, 0);
        s->in_txn = false;
}

/* Prepares a statement used once (not cached, not logged): 0 or
 * -EIO. */
static int prepare_once(sqlite3 *db, const char *sql, sqlite3_stmt **ret) {
        return sqlite3_prepare_v2(db, sql, -1, ret, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* Runs st to its end and resets it; clears its bindings unless every
 * parameter is bound again before the next step (the sample inserts). */
static int step_reset(struct store *s, sqlite3_stmt *st, bool clear) {
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (clear)
                sqlite3_clear_bindings(st);
        if (rc != SQLITE_DONE) {
                s->write_errors++;
                return log_warning_errno(EIO, "database write failed: %s", sqlite3_errmsg(s->w));
        }
        return 0;
}

/* Binds v and runs st (a write) to its end: 0, or -EIO counted as a write error. */
static int step_params(struct store *s, sqlite3_stmt *st, const struct param *v) {
        bind_params(st, v);
        return step_reset(s, st, true);
}

/* step_params for a statement whose parameters are all in v, each time. */
static int step_all_params(struct store *s, sqlite3_stmt *st, const struct param *v) {
        bind_params(st, v);
        return step_reset(s, st, false);
}

/* The same through a statement prepared for this one write. */
static int exec_params(struct store *s, const char *sql, const struct param *v) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (prepare_once(s->w, sql, &st) < 0)
                return -EIO;
        return step_params(s, st, v);
}

int store_exec(struct store *s, const char *sql, const struct param *v) {
        return exec_params(s, sql, v);
}

static char *col_strdup(sqlite3_stmt *st, int i) {
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? strdup((const char *)t) : NULL;
}

static bool col_double(sqlite3_stmt *st, int i, double *v) {
        if (sqlite3_column_type(st, i) == SQLITE_NULL)
                return false;
        *v = sqlite3_column_double(st, i);
        return true;
}

int store_insert_run(struct store *s, struct run_info *ri) {
        int r = step_params(s, s->insert_run,
                            PARAMS(p_int(ri->pid), p_u64(true, ri->start_time_ticks), p_text(ri->boot_id),
                                   p_u64(ri->has_uid, ri->uid), p_text(ri->name), p_text(ri->comm), p_text(ri->cmdline),
                                   p_text(ri->tags_json ? ri->tags_json : "{}"), p_int(ri->interval_ms),
                                   p_int(ri->children), p_text(run_state_to_string(ri->state)),
                                   p_int(ri->registered_ts_ms), p_text(ri->step_op)));
        if (r < 0)
                return r;
        ri->id = sqlite3_last_insert_rowid(s->w);
        return 0;
}

int store_update_run_state(struct store *s, int64_t id, enum run_state state, int64_t ended_ts_ms) {
        return step_params(
                s, s->update_state,
                PARAMS(p_text(run_state_to_string(state)), ended_ts_ms ? p_int(ended_ts_ms) : p_null(), p_int(id)));
}

int store_update_run_exit(struct store *s, int64_t id, const struct run_info *ri) {
        return exec_params(s, "UPDATE runs SET exit_code=?, exit_signal=? WHERE id=?",
                           PARAMS(ri->has_exit_code ? p_int(ri->exit_code) : p_null(),
                                  ri->has_exit_signal ? p_int(ri->exit_signal) : p_null(), p_int(id)));
}

int store_update_run_first_step(struct store *s, int64_t id, int64_t ts_ms, double step_ms) {
        return exec_params(s, "UPDATE runs SET first_step_ts=?, first_step_ms=? WHERE id=?",
                           PARAMS(p_int(ts_ms), p_double(true, step_ms), p_int(id)));
}

int store_update_run_identity(struct store *s, int64_t id, const char *comm, const char *cmdline) {
        return exec_params(s, "UPDATE runs SET comm=?, cmdline=? WHERE id=?",
                           PARAMS(p_text(comm), p_text(cmdline), p_int(id)));
}

int store_update_run_totals(struct store *s, int64_t id, const struct run_totals *t) {
        return step_params(s, s->update_totals,
                           PARAMS(p_u64(t->last_ts_ms != 0, (uint64_t)t->last_ts_ms), p_u64(true, t->samples),
                                  p_u64(true, t->cpu_time_ns), p_u64(true, t->user_time_ns),
                                  p_u64(true, t->system_time_ns), p_u64(t->has_rss, t->peak_rss_bytes),
                                  p_u64(t->has_rss, t->final_rss_bytes), p_u64(t->samples > 0, t->threads_max),
                                  p_u64(t->has_io, t->read_bytes), p_u64(t->has_io, t->write_bytes),
                                  p_u64(t->has_net, t->netns_rx_bytes), p_u64(t->has_net, t->netns_tx_bytes),
                                  p_u64(t->has_gpu_mem, t->peak_gpu_mem_bytes), p_u64(true, t->gpu_util_samples),
                                  p_double(true, t->gpu_util_sum_pct), p_double(t->has_energy, t->energy_j),
                                  p_u64(t->has_pss, t->peak_pss_bytes), p_u64(t->has_final_pss, t->final_pss_bytes),
                                  p_u64(t->has_final_pss, t->final_uss_bytes), p_int(id)));
}

int store_apply_rusage(struct store *s, int64_t id, uint64_t max_rss_bytes, bool cpu, uint64_t user_ns,
                       uint64_t system_ns) {
        return exec_params(s,
                           "UPDATE runs SET peak_rss_bytes = max(coalesce(peak_rss_bytes, 0), ?2), "
                           "cpu_time_ns = CASE WHEN ?3 THEN max(cpu_time_ns, ?4 + ?5) ELSE cpu_time_ns END, "
                           "user_time_ns = CASE WHEN ?3 THEN max(user_time_ns, ?4) ELSE user_time_ns END, "
                           "system_time_ns = CASE WHEN ?3 THEN max(system_time_ns, ?5) ELSE system_time_ns END "
                           "WHERE id = ?1",
                           PARAMS(p_int(id), p_u64(true, max_rss_bytes), p_int(cpu), p_u64(true, user_ns),
                                  p_u64(true, system_ns)));
}

/* The SAMPLE_PARAMS parameters of a head row into v. */
static void sample_params(struct param *v, const struct pending_sample *p) {
        v[0] = p_int(p->ts);
        v[1] = p_int(p->run_id);
        v[2] = p_blob(p->data, p->len);
}

static void pending_set(struct pending_sample *p, int64_t run_id, const struct sample *m) {
        p->run_id = run_id;
        p->ts = m->ts_ms;
        p->len = head_pack(m, p->data);
}

static void drop_samples(struct store *s) {
        s->n_pending = 0;
}

/* The time of a head row, in head_ticks (sql/013): a run's rows are found
 * through it. A tick's rows share one time: noted once. */
static int note_tick(struct store *s, int64_t ts) {
        if (s->in_txn && s->has_last_tick && s->last_tick == ts)
                return 0;
        int r = step_params(s, s->insert_tick, PARAMS(p_int(ts)));
        s->has_last_tick = r == 0 && s->in_txn;
        s->last_tick = ts;
        return r;
}

static int insert_one(struct store *s, int64_t run_id, const struct sample *m) {
        if (note_tick(s, m->ts_ms) < 0)
                return -EIO;
        struct pending_sample p;
        pending_set(&p, run_id, m);
        struct param v[SAMPLE_PARAMS + 1];
        sample_params(v, &p);
        v[SAMPLE_PARAMS] = (struct param){ .type = PARAM_END };
        return step_all_params(s, s->insert_sample, v);
}

/* The samples waiting, in as few statements as batch_rows allows. */
static int flush_samples(struct store *s) {
        struct param v[SAMPLE_BATCH * SAMPLE_PARAMS + 1];
        const struct pending_sample *p = s->pending;
        size_t done = 0;
        int r = 0;
        for (size_t b = 0; b < ELEMENTSOF(batch_rows); b++)
                for (size_t n = batch_rows[b]; s->n_pending - done >= n; done += n) {
                        for (size_t i = 0; i < n; i++) {
                                if (note_tick(s, p[done + i].ts) < 0)
                                        r = -EIO;
                                sample_params(v + i * SAMPLE_PARAMS, &p[done + i]);
                        }
                        v[n * SAMPLE_PARAMS] = (struct param){ .type = PARAM_END };
                        if (step_all_params(s, s->insert_samples[b], v) < 0)
                                r = -EIO;
                }
        drop_samples(s);
        return r;
}

int store_insert_sample(struct store *s, int64_t run_id, const struct sample *m) {
        if (!s->in_txn)
                return insert_one(s, run_id, m);
        pending_set(&s->pending[s->n_pending++], run_id, m);
        return s->n_pending == SAMPLE_BATCH ? flush_samples(s) : 0;
}

/* The histogram, if it has timings, as daemon/analyze/histogram.c's
 * encoding. */
int store_insert_op_slice(struct store *s, int64_t run_id, const struct op_slice *sl) {
        _cleanup_free_ uint8_t *blob = NULL;
        size_t len = 0;
        if (sl->h.count > 0 && hist_encode(&sl->h, &blob, &len) < 0)
                return -ENOMEM;
        return step_params(s, s->insert_op_slice,
                           PARAMS(p_int(sl->ts), p_int(run_id), p_text(sl->op), p_text(sl->category),
                                  p_double(true, sl->count), p_int((int64_t)sl->h.count), p_blob(blob, len)));
}

int store_insert_gauge(struct store *s, int64_t run_id, const struct gauge_value *g) {
        return step_params(s, s->insert_gauge,
                           PARAMS(p_int(g->ts), p_int(run_id), p_text(g->name), p_double(true, g->value)));
}

int store_insert_mark(struct store *s, int64_t run_id, int64_t ts_ms, const char *label) {
        return exec_params(s, "INSERT OR REPLACE INTO marks (run_id, ts, label) VALUES (?, ?, ?)",
                           PARAMS(p_int(run_id), p_int(ts_ms), p_text(label)));
}

int store_insert_leak_event(struct store *s, int64_t run_id, int64_t ts_ms, bool suspected, const char *metric,
                            const struct leak_verdict *v) {
        return exec_params(s,
                           "INSERT OR REPLACE INTO leak_events (run_id, ts, suspected, metric, slope_bytes_per_s, "
                           "growth_bytes, window_s, confidence, reason) VALUES (?,?,?,?,?,?,?,?,?)",
                           PARAMS(p_int(run_id), p_int(ts_ms), p_int(suspected), p_text(metric),
                                  p_double(v->evaluated, v->slope_bytes_per_s), p_double(v->evaluated, v->growth_bytes),
                                  p_double(v->evaluated, v->window_s), p_double(v->evaluated, v->confidence),
                                  p_text(v->reason)));
}

const struct wal_damage *store_wal_damage(struct store *s, int64_t now_ms) {
        if (s->has_wal_damage && now_ms - s->wal_damage.ts_ms >= WAL_DAMAGE_REPORT_MS)
                (void)store_wal_damage_ack(s);
        return s->has_wal_damage ? &s->wal_damage : NULL;
}

int store_wal_damage_ack(struct store *s) {
        bool had = s->has_wal_damage;
        s->has_wal_damage = false;
        return walcheck_forget(s->w) < 0 ? -EIO : had;
}

int store_checkpoint(struct store *s, bool truncate) {
        int rc = sqlite3_wal_checkpoint_v2(
                s->w, NULL, truncate ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EBUSY;
}

int store_row_to_run_info(sqlite3_stmt *st, struct run_info *ri) {
        uint64_t u;
        memset(ri, 0, sizeof *ri);
        ri->id = sqlite3_column_int64(st, 0);
        ri->pid = sqlite3_column_int(st, 1);
        col_u64(st, 2, &ri->start_time_ticks);
        const unsigned char *b = sqlite3_column_text(st, 3);
        snprintf(ri->boot_id, sizeof ri->boot_id, "%s", b ? (const char *)b : "");
        if ((ri->has_uid = col_u64(st, 4, &u)))
                ri->uid = (uid_t)u;
        ri->name = col_strdup(st, 5);
        ri->comm = col_strdup(st, 6);
        ri->cmdline = col_strdup(st, 7);
        ri->tags_json = col_strdup(st, 8);
        ri->interval_ms = sqlite3_column_int64(st, 9);
        ri->children = sqlite3_column_int(st, 10) != 0;
        const unsigned char *state = sqlite3_column_text(st, 11);
        int s = run_state_from_string(state ? (const char *)state : "");
        ri->state = s < 0 ? RUN_EXITED : (enum run_state)s;
        ri->registered_ts_ms = sqlite3_column_int64(st, 12);
        ri->ended_ts_ms = sqlite3_column_int64(st, 13);
        struct run_totals *t = &ri->totals;
        if (col_u64(st, 14, &u))
                t->last_ts_ms = (int64_t)u;
        col_u64(st, 15, &t->samples);
        col_u64(st, 16, &t->cpu_time_ns);
        col_u64(st, 17, &t->user_time_ns);
        col_u64(st, 18, &t->system_time_ns);
        t->has_rss = col_u64(st, 19, &t->peak_rss_bytes);
        col_u64(st, 20, &t->final_rss_bytes);
        if (col_u64(st, 21, &u))
                t->threads_max = (uint32_t)u;
        t->has_io = col_u64(st, 22, &t->read_bytes);
        col_u64(st, 23, &t->write_bytes);
        t->has_net = col_u64(st, 24, &t->netns_rx_bytes);
        col_u64(st, 25, &t->netns_tx_bytes);
        ri->leak_detected = sqlite3_column_int(st, 26) != 0;
        t->has_gpu_mem = col_u64(st, 27, &t->peak_gpu_mem_bytes);
        col_u64(st, 28, &t->gpu_util_samples);
        col_double(st, 29, &t->gpu_util_sum_pct);
        t->has_energy = col_double(st, 30, &t->energy_j);
        t->has_pss = col_u64(st, 31, &t->peak_pss_bytes);
        t->has_final_pss = col_u64(st, 32, &t->final_pss_bytes);
        col_u64(st, 33, &t->final_uss_bytes);
        if ((ri->has_exit_code = col_u64(st, 34, &u)))
                ri->exit_code = (int)(u & 0xff);
        if ((ri->has_exit_signal = col_u64(st, 35, &u)))
                ri->exit_signal = (int)(u & 0x7f);
        ri->step_op = col_strdup(st, 36);
        ri->first_step_ts_ms = sqlite3_column_int64(st, 37);
        col_double(st, 38, &ri->first_step_ms);
        if (!ri->tags_json && !(ri->tags_json = strdup("{}"))) {
                run_info_done(ri);
                return -ENOMEM;
        }
        return 0;
}

int store_row_to_sample(sqlite3_stmt *st, int c, struct sample *m) {
        return head_unpack(sqlite3_column_int64(st, c), sqlite3_column_blob(st, c + 1),
                           (size_t)sqlite3_column_bytes(st, c + 1), m);
}

int store_load_running(struct store *s, struct run_info **ret, size_t *ret_n) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (prepare_once(s->w, "SELECT " STORE_RUN_COLUMNS " FROM runs WHERE state='running' ORDER BY id", &st) < 0)
                return -EIO;
        struct run_info *v = NULL;
        size_t n = 0;
        int rc, r = 0;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (!GREEDY_REALLOC(v, n + 1) || store_row_to_run_info(st, &v[n]) < 0) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        if (r == 0 && rc != SQLITE_DONE)
                r = -EIO;
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        run_info_done(&v[i]);
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int store_reader_prepare(struct store *s, const char *sql, sqlite3_stmt **ret) {
        size_t i;
        for (i = 0; i < ELEMENTSOF(s->reader_cache) && s->reader_cache[i].sql; i++)
                if (s->reader_cache[i].sql == sql) {
                        *ret = s->reader_cache[i].st;
                        return SQLITE_OK;
                }
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v3(s->r, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
        if (rc != SQLITE_OK)
                return rc;
        if (i == ELEMENTSOF(s->reader_cache)) { /* full: the oldest goes */
                sqlite3_finalize(s->reader_cache[0].st);
                memmove(&s->reader_cache[0], &s->reader_cache[1], sizeof s->reader_cache - sizeof s->reader_cache[0]);
                i--;
        }
        s->reader_cache[i].sql = sql;
        s->reader_cache[i].st = st;
        *ret = st;
        return SQLITE_OK;
}

int store_flush(struct store *s) {
        return s->n_pending > 0 ? flush_samples(s) : 0;
}

/* SPDX-License-Identifier: MIT */
/* SQLite persistence: one writer connection (sampler), one read-only
 * connection (queries). WAL, synchronous=NORMAL (or FULL), busy_timeout 5 s,
 * schema from sql/ migrations tracked by PRAGMA user_version. Knows nothing
 * of /proc or HTTP. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "collect/sample.h"
#include "util.h"

struct store;

static inline void sqlite3_finalizep(sqlite3_stmt **s) {
        if (*s)
                sqlite3_finalize(*s);
}
#define _cleanup_stmt_ __attribute__((cleanup(sqlite3_finalizep)))

/* Opens (creating if needed) and migrates. errbuf gets a one-line reason. */
int store_open(const char *path, bool sync_full, struct store **ret, char *errbuf, size_t errlen);
/* Commits nothing pending (callers commit), checkpoints (TRUNCATE) and closes. */
void store_close(struct store *s);

/* Apply migrations up to `target` (0 = all). Exposed for tests. */
int store_migrate(sqlite3 *db, unsigned target, char *errbuf, size_t errlen);
unsigned store_schema_version(void);

sqlite3 *store_writer(struct store *s);
sqlite3 *store_reader(struct store *s);

/* One transaction per tick: BEGIN IMMEDIATE ... COMMIT; ROLLBACK on error. */
/* Writes the samples the transaction batches now (before reading them
 * back on the writer). */
int store_flush(struct store *s);
int store_begin(struct store *s);
int store_commit(struct store *s);
void store_rollback(struct store *s);

int store_insert_run(struct store *s, struct run_info *ri); /* sets ri->id */
int store_update_run_state(struct store *s, int64_t id, enum run_state state, int64_t ended_ts_ms);
/* How the run's process ended (ri's has_exit_code/exit_code,
 * has_exit_signal/exit_signal; NULL where unknown). */
int store_update_run_exit(struct store *s, int64_t id, const struct run_info *ri);
int store_update_run_identity(struct store *s, int64_t id, const char *comm, const char *cmdline);
/* When the run's first step op timing arrived, and how long it took. */
int store_update_run_first_step(struct store *s, int64_t id, int64_t ts_ms, double step_ms);
int store_update_run_totals(struct store *s, int64_t id, const struct run_totals *t);
/* A finished run's totals as its process's parent saw them when it reaped
 * it (wait4()): the peak RSS where higher than the sampled one, and with
 * cpu its CPU times where higher (the children it waited for count in a
 * tree only). */
int store_apply_rusage(struct store *s, int64_t id, uint64_t max_rss_bytes, bool cpu, uint64_t user_ns,
                       uint64_t system_ns);
int store_insert_sample(struct store *s, int64_t run_id, const struct sample *smp);

struct op_slice;
struct gauge_value;
int store_insert_op_slice(struct store *s, int64_t run_id, const struct op_slice *sl);
int store_insert_gauge(struct store *s, int64_t run_id, const struct gauge_value *g);
int store_insert_mark(struct store *s, int64_t run_id, int64_t ts_ms, const char *label);
struct leak_verdict;
int store_insert_leak_event(struct store *s, int64_t run_id, int64_t ts_ms, bool suspected, const char *metric,
                            const struct leak_verdict *v);

/* How long data is kept: raw samples, op slices and gauges for raw, the
 * minute and hour tiers for rollup (the [retention] keys; 7 and 90 days
 * until set). The compaction, the retention and the querier go by them. */
void store_set_retention(struct store *s, usec_t raw, usec_t rollup);
int64_t store_retention_raw_ms(const struct store *s);
int64_t store_retention_rollup_ms(const struct store *s);

/* The damaged write-ahead log found when the database was opened, or at an
 * earlier start and not yet acknowledged, while it is reported (less than
 * a day old: walcheck.h); NULL: none. */
struct wal_damage;
const struct wal_damage *store_wal_damage(struct store *s, int64_t now_ms);
/* Acknowledged: no longer reported, and forgotten by the database. 1 if
 * one was reported, 0 if none, -EIO. */
int store_wal_damage_ack(struct store *s);

/* WAL checkpoint (PASSIVE normally, TRUNCATE at exit). */
int store_checkpoint(struct store *s, bool truncate);

/* ---- reads (reader connection) ------------------------------------------ */

/* What one question may cost: its time on the reader, the rows it returns. */
struct query_limits {
        usec_t timeout_usec;
        unsigned max_rows;
};

/* A prepared statement on the reader connection, cached by the address of
 * its SQL text (a string constant): preparing costs more than running the
 * small queries an HTTP request makes. Do not finalize it: reset it when
 * done (_cleanup_reset_). Returns an SQLite result code. */
int store_reader_prepare(struct store *s, const char *sql, sqlite3_stmt **ret);
static inline void sqlite3_resetp(sqlite3_stmt **s) {
        if (*s) {
                sqlite3_reset(*s);
                sqlite3_clear_bindings(*s);
        }
}
#define _cleanup_reset_ __attribute__((cleanup(sqlite3_resetp)))

/* Row -> run_info, for "SELECT <STORE_RUN_COLUMNS> FROM runs ...". */
#define STORE_RUN_COLUMNS                                                                                     \
        "id, pid, start_time_ticks, boot_id, uid, name, comm, cmdline, tags, interval_ms, children, "         \
        "state, registered_ts, ended_ts, last_ts, samples, cpu_time_ns, user_time_ns, "                       \
        "system_time_ns, peak_rss_bytes, final_rss_bytes, threads_max, read_bytes, write_bytes, "             \
        "netns_rx_bytes, netns_tx_bytes, "                                                                    \
        "EXISTS (SELECT 1 FROM leak_events e WHERE e.run_id = runs.id AND e.suspected = 1), "                 \
        "peak_gpu_mem_bytes, gpu_util_samples, gpu_util_sum_pct, energy_j, peak_pss_bytes, final_pss_bytes, " \
        "final_uss_bytes, exit_code, exit_signal, step_op, first_step_ts, first_step_ms"
int store_row_to_run_info(sqlite3_stmt *st, struct run_info *ri);

/* A head row's columns (store/head.h), and its sample from them at first_col:
 * -EBADMSG for data that does not unpack. */
#define STORE_SAMPLE_COLUMNS "ts, data"
int store_row_to_sample(sqlite3_stmt *st, int first_col, struct sample *smp);

/* Loads every run in state 'running' (daemon start). Caller frees with
 * run_info_done on each and free(). */
int store_load_running(struct store *s, struct run_info **ret, size_t *ret_n);

/* A run's baseline (see struct run_baseline), written with the run, its
 * parts as they change, and loaded back when the run is resumed after a
 * restart. -ENOENT: no such run. A run stored by an mlmond that kept no
 * baseline has no members in it. */
int store_insert_baseline(struct store *s, int64_t run_id, const struct run_baseline *b);
int store_update_run_left(struct store *s, int64_t run_id, const struct proc_counters *left);
int store_update_run_netns(struct store *s, int64_t run_id, const struct run_baseline *b);
int store_load_baseline(struct store *s, int64_t run_id, struct run_baseline *ret);

/* A write through a statement prepared for it alone (for the store's
 * files): 0, or -EIO counted as a write error. */
struct param;
int store_exec(struct store *s, const char *sql, const struct param *v);

/* Errors counted (for /v1/health). */
uint64_t store_write_errors(struct store *s);

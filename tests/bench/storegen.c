/* SPDX-License-Identifier: MIT */
/* Databases for the store's benchmarks, written through the store's own
 * code as the daemon writes them: samples and op slices with synthetic
 * timestamps go into the head a tick at a time, one transaction per tick,
 * and the compaction packs and rolls them up as the manager's maintenance
 * does (store_compact() after each minute).
 *
 *   storegen readpath DB   a run of 7 days and a run of 1 hour, both sampled
 *                          every second, with 2 ops timed every second, both
 *                          ended 2 minutes ago (tests/bench/readpath.py
 *                          serves them); then how many SQL statements the
 *                          querier runs for the run page's two stepped
 *                          questions over each run
 *   storegen disk DB [RUNS [MINUTES]]
 *                          RUNS runs (default 200) for MINUTES (default 14)
 *                          at 1 s: a quarter busy like a training job, a
 *                          quarter like a server, half asleep; then the bytes
 *                          each table takes (dbstat)
 *   storegen rows DB [RUNS [MINUTES]]
 *                          the same samples, never compacted: every one a
 *                          row of the head, as every sample was before the
 *                          blocks
 *   (disk and rows take a last argument busy, server or asleep: every run
 *   of that kind)
 *   storegen querytime DB WEEK_ID HOUR_ID [samples|latency]
 *                          readpath's querier figures again on the database
 *                          it wrote (0: leave that run out), for a profiler
 *
 * Every figure is printed as "key value" lines, for the Python side. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/histogram.h"
#include "analyze/ops.h"
#include "store/compact.h"
#include "store/querier.h"
#include "store/store.h"
#include "util.h"
#include "xorshift.h"

#define MINUTE_MS INT64_C(60000)
#define HOUR_MS (60 * MINUTE_MS)
#define DAY_MS (24 * HOUR_MS)

static void die(const char *what, int r) {
        fprintf(stderr, "storegen: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

/* ---- processes ------------------------------------------------------------------ */

enum kind { BUSY, SERVER, ASLEEP };

/* A process as the probe sees it, a second at a time. */
struct proc {
        enum kind kind;
        uint64_t seed;
        struct sample last;
        bool has_last;
        uint64_t shared; /* statm's shared pages, in bytes */
        int64_t due_ms;  /* the schedule: the next sample's time */
};

static uint64_t rnd(struct proc *p, uint64_t n) {
        return n ? xorshift64s(&p->seed) % n : 0;
}

/* The host's network namespace, which every run in it reports. */
static uint64_t host_rx, host_tx;

static void host_tick(uint64_t *seed) {
        host_rx += 2000 + xorshift64s(seed) % 40000;
        host_tx += 1000 + xorshift64s(seed) % 20000;
}

static void proc_init(struct proc *p, enum kind k, uint64_t seed, int64_t t0) {
        *p = (struct proc){ .kind = k, .seed = seed * 2654435761u + 1, .due_ms = t0 };
        uint64_t rss = k == BUSY     ? (UINT64_C(2) << 30) + rnd(p, 1 << 28)
                       : k == SERVER ? (UINT64_C(300) << 20)
                                     : 4 << 20;
        rss &= ~UINT64_C(4095);
        p->last.rss_bytes = rss;
        p->shared = rss / 8 & ~UINT64_C(4095);
        p->last.peak_rss_bytes = rss;
        p->last.threads = k == BUSY ? 24 : k == SERVER ? 8 : 1;
}

/* The next sample, its rates computed as the probe computes them. */
static void proc_sample(struct proc *p, int64_t ts, struct sample *ret) {
        const struct sample *a = &p->last;
        struct sample s = { .ts_ms = ts };
        /* the timer is exact to the microsecond; reading /proc takes a few */
        s.interval_us = p->has_last ? (uint64_t)(ts - a->ts_ms) * 1000 + rnd(p, 400) - 200 : 0;
        double dt = (double)s.interval_us / 1e6;
        uint64_t dcpu = p->kind == BUSY     ? 900000000 + rnd(p, 200000000)
                        : p->kind == SERVER ? 20000000 + rnd(p, 60000000)
                                            : 0;
        s.cpu_time_ns = a->cpu_time_ns + dcpu;
        /* stat's ticks: 10 ms, user nine tenths */
        s.user_time_ns = s.cpu_time_ns * 9 / 10 / 10000000 * 10000000;
        s.system_time_ns = (s.cpu_time_ns - s.user_time_ns) / 10000000 * 10000000;
        s.has_rss = s.has_peak_rss = true;
        int64_t drss = p->kind == BUSY ? (int64_t)rnd(p, 65) - 32 : p->kind == SERVER ? (int64_t)rnd(p, 5) - 2 : 0;
        s.rss_bytes = a->rss_bytes + (uint64_t)(drss * 4096);
        s.rss_anon_bytes = s.rss_bytes - p->shared;
        s.peak_rss_bytes = s.rss_bytes > a->peak_rss_bytes ? s.rss_bytes : a->peak_rss_bytes;
        s.threads = a->threads;
        s.processes = 1;
        s.has_io = true;
        uint64_t dr = 0, dw = 0, drc = 0, dwc = 0;
        if (p->kind == BUSY) {
                dr = rnd(p, 4) ? 4096 * rnd(p, 2048) : 0;              /* data loading */
                dw = rnd(p, 600) ? 0 : 4096 * (50000 + rnd(p, 10000)); /* a checkpoint */
                drc = dr + rnd(p, 100000);
                dwc = dw + rnd(p, 10000);
        } else if (p->kind == SERVER) {
                dw = rnd(p, 10) ? 0 : 4096 * rnd(p, 4); /* a log line flushed */
                drc = 100 + rnd(p, 5000);
                dwc = dw + 100 + rnd(p, 5000);
        }
        s.read_bytes = a->read_bytes + dr;
        s.write_bytes = a->write_bytes + dw;
        s.rchar_bytes = a->rchar_bytes + drc;
        s.wchar_bytes = a->wchar_bytes + dwc;
        s.has_net = true;
        s.netns_rx_bytes = host_rx;
        s.netns_tx_bytes = host_tx;
        if (p->has_last && dt > 0) {
                s.has_cpu_pct = s.has_io_rate = s.has_net_rate = true;
                s.cpu_pct = (double)dcpu / 1e9 / dt * 100.0;
                s.read_bytes_per_s = (double)dr / dt;
                s.write_bytes_per_s = (double)dw / dt;
                s.netns_rx_bytes_per_s = (double)(s.netns_rx_bytes - a->netns_rx_bytes) / dt;
                s.netns_tx_bytes_per_s = (double)(s.netns_tx_bytes - a->netns_tx_bytes) / dt;
        }
        p->last = s;
        p->has_last = true;
        *ret = s;
}

/* The non-NULL figures a sample stores that are not rates (rates are
 * derived from the counters): what "a value" means in the figures. */
static unsigned sample_values(const struct sample *s) {
        /* ts, the interval, CPU time (all, user, system), threads, processes */
        return 1u + (s->interval_us > 0) + 3 + 2 + 2 * s->has_rss + s->has_peak_rss + 4 * s->has_io + 2 * s->has_net +
               s->has_gpu_mem + s->has_gpu_util + s->has_energy + 2 * s->has_pss + s->has_pss_anon;
}

/* ---- writing --------------------------------------------------------------------- */

static struct store *open_store(const char *path) {
        char err[256];
        struct store *s = NULL;
        int r = store_open(path, false, &s, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "storegen: %s: %s\n", path, err);
                exit(1);
        }
        return s;
}

static int64_t add_run(struct store *s, int pid, const char *name, int64_t registered) {
        struct run_info ri = { .pid = pid,
                               .start_time_ticks = (uint64_t)pid,
                               .interval_ms = 1000,
                               .state = RUN_RUNNING,
                               .registered_ts_ms = registered,
                               .name = (char *)name,
                               .comm = (char *)"python3",
                               .cmdline = (char *)"python3 train.py" };
        snprintf(ri.boot_id, sizeof ri.boot_id, "storegen");
        int r = store_insert_run(s, &ri);
        if (r < 0)
                die("insert run", r);
        return ri.id;
}

static void compact(struct store *s, int64_t now) {
        bool more = true;
        while (more) {
                int r = store_compact(s, now, &more);
                if (r < 0)
                        die("compact", r);
        }
}

/* A timing of op k in ms: a step of about 180 ms, a data load of about 12,
 * both with a long tail. */
static double timing(uint64_t *seed, int k) {
        double u = ((double)(xorshift64s(seed) >> 11) + 0.5) / 9007199254740992.0;
        double base = k == 0 ? 180.0 : 12.0;
        return base * (0.8 + 0.4 * u) * (xorshift64s(seed) % 50 == 0 ? 3.0 : 1.0);
}

/* One second of a run's two ops: 5 steps and 5 data loads. */
static void insert_ops(struct store *s, int64_t run, int64_t ts, uint64_t *seed) {
        static const char *const ops[] = { "train_step", "data_load" };
        static const char *const cats[] = { "model_training", "data_loading" };
        for (int k = 0; k < 2; k++) {
                struct op_slice sl = { .op = (char *)ops[k], .category = (char *)cats[k], .ts = ts, .count = 5 };
                hist_init(&sl.h);
                for (int i = 0; i < 5; i++)
                        hist_add(&sl.h, timing(seed, k), 1);
                int r = store_insert_op_slice(s, run, &sl);
                hist_done(&sl.h);
                if (r < 0)
                        die("insert op slice", r);
        }
}

/* ---- readpath -------------------------------------------------------------------- */

struct span_run {
        int64_t id, from, until;
        struct proc p;
        struct run_totals t;
};

static int64_t statements;

static int count_statement(unsigned type, void *ctx, void *p, void *x) {
        statements += type == SQLITE_TRACE_STMT;
        return 0;
}

/* The SQL statements the reader runs for the run page's stepped questions
 * over run r's whole span, with the page's steps. */
static const char *only; /* querytime: "samples" or "latency", the one question timed */

static void count_page_statements(struct store *s, const char *name, const struct span_run *r) {
        const struct query_limits lim = { .timeout_usec = 60 * USEC_PER_SEC, .max_rows = 100000 };
        int64_t span = r->until - r->from;
        /* web/run.js: 1 500 sample points, 300 latency steps (whole seconds) */
        int64_t sstep = (span + 1499) / 1500, lstep = (span + 300 * 1000 - 1) / (300 * 1000) * 1000;
        if (lstep < 1000)
                lstep = 1000;
        sqlite3_trace_v2(store_reader(s), SQLITE_TRACE_STMT, count_statement, NULL);
        struct sample *v = NULL;
        size_t n = 0;
        bool trunc;
        usec_t best = USEC_INFINITY;
        for (int k = 0; k < 5 && (!only || streq(only, "samples")); k++) {
                statements = 0;
                usec_t t = now_usec(CLOCK_PROCESS_CPUTIME_ID);
                int q = querier_samples(s, &lim, r->id, r->from, r->until, 1600, sstep, &v, &n, &trunc);
                if (q < 0)
                        die("querier_samples", q);
                t = now_usec(CLOCK_PROCESS_CPUTIME_ID) - t;
                best = t < best ? t : best;
                free(v);
        }
        printf("%s_samples_points %zu\n%s_samples_statements %lld\n%s_samples_querier_us %llu\n", name, n, name,
               (long long)statements, name, (unsigned long long)best);
        best = USEC_INFINITY;
        for (int k = 0; k < 5 && (!only || streq(only, "latency")); k++) {
                struct op_aggs *steps = NULL;
                statements = 0;
                usec_t t = now_usec(CLOCK_PROCESS_CPUTIME_ID);
                int q = querier_op_steps(s, &lim, NULL, r->id, r->from, r->until + 1, lstep, NULL, &steps, &n);
                if (q < 0)
                        die("querier_op_steps", q);
                t = now_usec(CLOCK_PROCESS_CPUTIME_ID) - t;
                best = t < best ? t : best;
                op_steps_free(steps, n);
        }
        printf("%s_latency_steps %zu\n%s_latency_statements %lld\n%s_latency_querier_us %llu\n", name, n, name,
               (long long)statements, name, (unsigned long long)best);
        sqlite3_trace_v2(store_reader(s), 0, NULL, NULL);
}

static int readpath(const char *path) {
        struct store *s = open_store(path);
        /* the last sample's second ends 2 minutes ago */
        int64_t end = (now_realtime_ms() - 2 * MINUTE_MS) / 1000 * 1000 - 1000;
        struct span_run runs[2] = { { .from = end - 7 * DAY_MS + 1000 }, { .from = end - HOUR_MS + 1000 } };
        uint64_t seed = 28;
        if (store_begin(s) < 0)
                die("begin", EIO);
        for (size_t i = 0; i < 2; i++) {
                runs[i].id = add_run(s, 1000 + (int)i, i == 0 ? "train-7d" : "train-1h", runs[i].from);
                proc_init(&runs[i].p, BUSY, 7 + i, runs[i].from);
        }
        if (store_commit(s) < 0)
                die("commit", EIO);
        /* a tick a second from the 7-day run's start, a minute a transaction
         * (the daemon commits each tick: the rows are the same); the minute
         * compacted as each ends, as the daemon's maintenance does */
        for (int64_t t = runs[0].from; t <= end; t += 1000) {
                host_tick(&seed);
                int r = t == runs[0].from || t % MINUTE_MS == 0 ? store_begin(s) : 0;
                for (size_t i = 0; i < 2 && r == 0; i++) {
                        if (t < runs[i].from)
                                continue;
                        struct sample smp;
                        proc_sample(&runs[i].p, t + (int64_t)rnd(&runs[i].p, 3), &smp);
                        run_totals_add(&runs[i].t, &smp);
                        r = store_insert_sample(s, runs[i].id, &smp);
                        if (r == 0)
                                insert_ops(s, runs[i].id, t, &seed);
                }
                bool minute_ends = (t + 1000) % MINUTE_MS == 0 || t == end;
                if (r < 0 || (minute_ends && store_commit(s) < 0))
                        die("tick", r < 0 ? r : EIO);
                if ((t + 1000) % MINUTE_MS == 0)
                        compact(s, t + 1000 + 500);
        }
        if (store_begin(s) < 0)
                die("begin", EIO);
        for (size_t i = 0; i < 2; i++) {
                runs[i].until = runs[i].t.last_ts_ms;
                if (store_update_run_totals(s, runs[i].id, &runs[i].t) < 0 ||
                    store_update_run_state(s, runs[i].id, RUN_EXITED, runs[i].until) < 0)
                        die("run totals", EIO);
        }
        if (store_commit(s) < 0)
                die("commit", EIO);
        compact(s, end + MINUTE_MS + 500);
        for (size_t i = 0; i < 2; i++)
                printf("%s_id %lld\n%s_from %lld\n%s_until %lld\n%s_samples %llu\n", i ? "hour" : "week",
                       (long long)runs[i].id, i ? "hour" : "week", (long long)runs[i].from, i ? "hour" : "week",
                       (long long)runs[i].until, i ? "hour" : "week", (unsigned long long)runs[i].t.samples);
        /* the retention the daemon will apply, so that the counts are those
         * it will see */
        store_set_retention(s, 7 * USEC_PER_DAY, 90 * USEC_PER_DAY);
        count_page_statements(s, "week", &runs[0]);
        count_page_statements(s, "hour", &runs[1]);
        store_close(s);
        return 0;
}

/* ---- disk ------------------------------------------------------------------------- */

/* Bytes of the pages table `name` and its indexes take (dbstat). */
static int64_t table_bytes(sqlite3 *db, const char *name) {
        sqlite3_stmt *st = NULL;
        int64_t v = -1;
        if (sqlite3_prepare_v2(db,
                               "SELECT sum(pgsize) FROM dbstat WHERE name = ?1 OR name IN "
                               "(SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?1)",
                               -1, &st, NULL) == SQLITE_OK) {
                sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
                if (sqlite3_step(st) == SQLITE_ROW)
                        v = sqlite3_column_int64(st, 0);
        }
        sqlite3_finalize(st);
        return v;
}

static int disk(const char *path, unsigned nruns, unsigned minutes, bool rows_only, int only_kind) {
        struct store *s = open_store(path);
        int64_t t0 = (now_realtime_ms() - (int64_t)minutes * MINUTE_MS - HOUR_MS) / HOUR_MS * HOUR_MS;
        struct proc *p = calloc(nruns, sizeof *p);
        int64_t *ids = calloc(nruns, sizeof *ids);
        uint64_t seed = 200, samples[3] = {}, values[3] = {};
        if (!p || !ids)
                die("calloc", ENOMEM);
        if (store_begin(s) < 0)
                die("begin", EIO);
        for (unsigned i = 0; i < nruns; i++) {
                enum kind k = only_kind >= 0 ? (enum kind)only_kind : i % 4 == 0 ? BUSY : i % 4 == 1 ? SERVER : ASLEEP;
                ids[i] = add_run(s, 2000 + (int)i, "soak", t0);
                proc_init(&p[i], k, i, t0);
        }
        if (store_commit(s) < 0)
                die("commit", EIO);
        int64_t end = t0 + (int64_t)minutes * MINUTE_MS;
        for (int64_t t = t0; t < end; t += 1000) {
                host_tick(&seed);
                int r = store_begin(s);
                for (unsigned i = 0; i < nruns && r == 0; i++) {
                        struct sample smp;
                        proc_sample(&p[i], t + (int64_t)rnd(&p[i], 3), &smp);
                        samples[p[i].kind]++;
                        values[p[i].kind] += sample_values(&smp);
                        r = store_insert_sample(s, ids[i], &smp);
                }
                if (r < 0 || store_commit(s) < 0)
                        die("tick", r < 0 ? r : EIO);
                if (!rows_only && (t + 1000) % MINUTE_MS == 0)
                        compact(s, t + 1000 + 500);
        }
        sqlite3 *db = store_writer(s);
        uint64_t all = samples[0] + samples[1] + samples[2], vals = values[0] + values[1] + values[2];
        printf("runs %u\nminutes %u\nsamples %llu\nvalues %llu\n", nruns, minutes, (unsigned long long)all,
               (unsigned long long)vals);
        static const char *const kinds[] = { "busy", "server", "asleep" };
        for (int k = 0; k < 3; k++)
                printf("samples_%s %llu\nvalues_%s %llu\n", kinds[k], (unsigned long long)samples[k], kinds[k],
                       (unsigned long long)values[k]);
        static const char *const tables[] = { "samples", "sample_blocks", "samples_1m", "samples_1h" };
        for (size_t i = 0; i < ELEMENTSOF(tables); i++)
                printf("bytes_%s %lld\n", tables[i], (long long)table_bytes(db, tables[i]));
        /* the blocks' own bytes, without SQLite's pages around them */
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT coalesce(sum(length(data)), 0), count(*) FROM sample_blocks", -1, &st,
                               NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
                printf("block_data_bytes %lld\nblocks %lld\n", (long long)sqlite3_column_int64(st, 0),
                       (long long)sqlite3_column_int64(st, 1));
        sqlite3_finalize(st);
        free(p);
        free(ids);
        store_close(s);
        return 0;
}

/* The figures of readpath again, on a database it wrote (for profiling). */
static int querytime(const char *path, int64_t week, int64_t hour) {
        struct store *s = open_store(path);
        store_set_retention(s, 7 * USEC_PER_DAY, 90 * USEC_PER_DAY);
        int64_t ids[2] = { week, hour };
        for (size_t i = 0; i < 2; i++) {
                if (ids[i] <= 0)
                        continue;
                struct span_run r = { .id = ids[i] };
                sqlite3_stmt *st = NULL;
                if (sqlite3_prepare_v2(store_writer(s), "SELECT registered_ts, ended_ts FROM runs WHERE id = ?", -1,
                                       &st, NULL) != SQLITE_OK)
                        die("prepare", EIO);
                sqlite3_bind_int64(st, 1, ids[i]);
                if (sqlite3_step(st) != SQLITE_ROW)
                        die("no such run", ENOENT);
                r.from = sqlite3_column_int64(st, 0);
                r.until = sqlite3_column_int64(st, 1);
                sqlite3_finalize(st);
                count_page_statements(s, i ? "hour" : "week", &r);
        }
        store_close(s);
        return 0;
}

int main(int argc, char **argv) {
        log_set_max_level(LOG_WARNING);
        if ((argc == 5 || argc == 6) && streq(argv[1], "querytime")) {
                only = argc == 6 ? argv[5] : NULL;
                return querytime(argv[2], atoll(argv[3]), atoll(argv[4]));
        }
        if (argc == 3 && streq(argv[1], "readpath"))
                return readpath(argv[2]);
        if (argc >= 3 && argc <= 6 && (streq(argv[1], "disk") || streq(argv[1], "rows"))) {
                unsigned runs = argc > 3 ? (unsigned)atoi(argv[3]) : 200,
                         minutes = argc > 4 ? (unsigned)atoi(argv[4]) : 14;
                static const char *const kinds[] = { "busy", "server", "asleep" };
                int kind = -1;
                for (int k = 0; argc > 5 && k < 3; k++)
                        if (streq(argv[5], kinds[k]))
                                kind = k;
                if (runs == 0 || minutes == 0 || (argc > 5 && kind < 0))
                        return 2;
                return disk(argv[2], runs, minutes, streq(argv[1], "rows"), kind);
        }
        fprintf(stderr, "usage: storegen readpath DB | storegen disk|rows DB [RUNS [MINUTES [busy|server|asleep]]]\n"
                        "       storegen querytime DB WEEK_ID HOUR_ID [samples|latency]\n");
        return 2;
}

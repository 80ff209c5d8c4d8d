/* SPDX-License-Identifier: MIT */
/* The store's read path by tier (store/compact.c, store/querier.c): the
 * compaction packs the head into blocks and rolls the minute and hour
 * tiers; every answer the querier composes from the tiers equals the one
 * SQL computes from the raw rows of a plain table beside them (the old
 * read path's own GROUP BY), and the op data of any span is exact. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/histogram.h"
#include "analyze/ops.h"
#include "sample-series.h"
#include "store/compact.h"
#include "store/param.h"
#include "store/querier.h"
#include "store/raw.h"
#include "store/store.h"
#include "store/tier.h"
#include "store-util.h"
#include "tap.h"
#include "util.h"

static char tmpdir[] = "/tmp/test-querier-XXXXXX";

/* 2027-01-15T08:00:00Z, a whole hour */
#define T0 INT64_C(1800000000000)
#define MIN 60000
#define HOUR (60 * MIN)

static const struct query_limits lim = { .timeout_usec = 10 * USEC_PER_SEC, .max_rows = 100000 };

/* The samples a tier's row counts (its packed figures). */
static int64_t tier_samples(sqlite3 *db, const char *table, int64_t run, int64_t ts) {
        char q[160];
        snprintf(q, sizeof q, "SELECT agg FROM %s WHERE run_id = %lld AND ts = %lld", table, (long long)run,
                 (long long)ts);
        sqlite3_stmt *st = NULL;
        struct sample_agg a;
        int64_t v = -1;
        if (sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
            sample_agg_unpack(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &a) == 0)
                v = (int64_t)a.samples;
        sqlite3_finalize(st);
        return v;
}

static struct store *open_db(const char *name) {
        struct store *s = test_store_open(tmpdir, name);
        CHECK(s != NULL);
        if (s) /* all of it is recent, for these tests */
                store_set_retention(s, 3650 * USEC_PER_DAY, 3650 * USEC_PER_DAY);
        return s;
}

static int64_t add_run(struct store *s, int pid) {
        int64_t id = test_store_add_run(s, pid, T0);
        CHECK(id > 0);
        return id;
}

static void compact_all(struct store *s, int64_t now) {
        bool more = true;
        for (int pass = 0; more && pass < 100; pass++)
                CHECK_EQ_INT(store_compact(s, now, &more), 0);
        CHECK(!more);
}

static bool same_sample(const struct sample *a, const struct sample *b) {
        return a->ts_ms == b->ts_ms && a->interval_us == b->interval_us && a->cpu_time_ns == b->cpu_time_ns &&
               a->has_cpu_pct == b->has_cpu_pct && memcmp(&a->cpu_pct, &b->cpu_pct, sizeof a->cpu_pct) == 0 &&
               a->rss_bytes == b->rss_bytes && a->read_bytes == b->read_bytes &&
               memcmp(&a->read_bytes_per_s, &b->read_bytes_per_s, sizeof(double)) == 0 &&
               a->netns_rx_bytes == b->netns_rx_bytes &&
               memcmp(&a->netns_tx_bytes_per_s, &b->netns_tx_bytes_per_s, sizeof(double)) == 0 &&
               a->threads == b->threads && a->has_io_rate == b->has_io_rate;
}

struct collected {
        struct sample *v;
        size_t n;
};

static int collect(const struct sample *s, void *userdata) {
        struct collected *c = userdata;
        if (!GREEDY_REALLOC(c->v, c->n + 1))
                return -ENOMEM;
        c->v[c->n++] = *s;
        return 0;
}

/* Two runs' 70 minutes, the same samples in "truth" (a plain table, a
 * column a figure) for SQL to compute from. */
#define N 4200
static struct sample va[N], vb[N];

/* The samples as rows of a plain table, a column a figure, NULL where it
 * is not known (the head's columns before sql/014): truth_steps' input. */
static void truth_add(sqlite3 *db, int64_t run, const struct sample *v, size_t n) {
        sqlite3_stmt *st = NULL;
        CHECK(sqlite3_prepare_v2(db,
                                 "INSERT INTO truth (ts, run_id, cpu_pct, cpu_time_ns, user_time_ns, rss_bytes, "
                                 "rss_anon_bytes, peak_rss_bytes, threads, read_bytes, rchar_bytes, read_bytes_per_s, "
                                 "write_bytes_per_s, netns_rx_bytes, netns_tx_bytes_per_s) "
                                 "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                 -1, &st, NULL) == SQLITE_OK);
        for (size_t i = 0; i < n; i++) {
                const struct sample *m = &v[i];
                bind_params(st,
                            PARAMS(p_int(m->ts_ms), p_int(run), p_double(m->has_cpu_pct, m->cpu_pct),
                                   p_u64(true, m->cpu_time_ns), p_u64(true, m->user_time_ns),
                                   p_u64(m->has_rss, m->rss_bytes), p_u64(m->has_rss, m->rss_anon_bytes),
                                   p_u64(m->has_peak_rss, m->peak_rss_bytes), p_u64(true, m->threads),
                                   p_u64(m->has_io, m->read_bytes), p_u64(m->has_io, m->rchar_bytes),
                                   p_double(m->has_io_rate, m->read_bytes_per_s),
                                   p_double(m->has_io_rate, m->write_bytes_per_s), p_u64(m->has_net, m->netns_rx_bytes),
                                   p_double(m->has_net_rate, m->netns_tx_bytes_per_s)));
                CHECK(sqlite3_step(st) == SQLITE_DONE);
                sqlite3_reset(st);
        }
        sqlite3_finalize(st);
}

static void fill(struct store *s, int64_t *ret_a, int64_t *ret_b) {
        uint64_t seed = 11;
        sample_series(va, N, 300000000, 100 << 20, true, &seed);
        sample_series(vb, N, 0, 10 << 20, false, &seed);
        sqlite3 *db = store_writer(s);
        CHECK(sqlite3_exec(db,
                           "CREATE TABLE truth (ts INTEGER, run_id INTEGER, cpu_pct REAL, cpu_time_ns INTEGER, "
                           "user_time_ns INTEGER, rss_bytes INTEGER, rss_anon_bytes INTEGER, peak_rss_bytes INTEGER, "
                           "threads INTEGER, read_bytes INTEGER, rchar_bytes INTEGER, read_bytes_per_s REAL, "
                           "write_bytes_per_s REAL, netns_rx_bytes INTEGER, netns_tx_bytes_per_s REAL)",
                           NULL, NULL, NULL) == SQLITE_OK);
        CHECK_EQ_INT(store_begin(s), 0);
        *ret_a = add_run(s, 100);
        *ret_b = add_run(s, 200);
        for (size_t i = 0; i < N; i++) {
                CHECK_EQ_INT(store_insert_sample(s, *ret_a, &va[i]), 0);
                CHECK_EQ_INT(store_insert_sample(s, *ret_b, &vb[i]), 0);
        }
        CHECK_EQ_INT(store_commit(s), 0);
        truth_add(db, *ret_a, va, N);
        truth_add(db, *ret_b, vb, N);
}

static void test_compaction(void) {
        struct store *s = open_db("compact.db");
        if (!s)
                return;
        sqlite3 *db = store_writer(s);
        int64_t a, b;
        fill(s, &a, &b);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 2 * N);

        compact_all(s, T0 + 70 * MIN + 5000);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_blocks"), 140);
        CHECK_EQ_INT(db_scalar(db, "SELECT sum(n) FROM sample_blocks"), 2 * N);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples_1m"), 140);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples_1h"), 2);
        char q[256];
        CHECK_EQ_INT(tier_samples(db, "samples_1h", a, T0), 3600);

        /* every sample comes back from the blocks as it went in */
        struct collected c = {};
        CHECK_EQ_INT(raw_samples(s, store_reader(s), a, T0, T0 + 2 * HOUR, false, collect, &c), 0);
        CHECK_EQ_INT(c.n, N);
        size_t bad = 0;
        for (size_t i = 0; i < c.n && i < N; i++)
                bad += !same_sample(&c.v[i], &va[i]);
        CHECK_EQ_INT(bad, 0);
        c.n = 0;
        CHECK_EQ_INT(raw_samples(s, store_reader(s), b, T0 + 90500, T0 + 95000, true, collect, &c), 0);
        CHECK(c.n == 5 && c.v[0].ts_ms > c.v[4].ts_ms);
        free(c.v);

        /* again: nothing changes */
        compact_all(s, T0 + 70 * MIN + 5000);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_blocks"), 140);

        /* a late row (the clock stepped back) joins its minute's block */
        struct sample late = vb[300];
        late.ts_ms += 500;
        CHECK_EQ_INT(store_begin(s), 0);
        CHECK_EQ_INT(store_insert_sample(s, b, &late), 0);
        CHECK_EQ_INT(store_commit(s), 0);
        compact_all(s, T0 + 70 * MIN + 5000);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 0);
        snprintf(q, sizeof q, "SELECT n FROM sample_blocks WHERE run_id = %lld AND ts = %lld", (long long)b,
                 (long long)(T0 + 5 * MIN));
        CHECK_EQ_INT(db_scalar(db, q), 61);
        CHECK_EQ_INT(tier_samples(db, "samples_1m", b, T0 + 5 * MIN), 61);

        /* retention: raw data older than its cut goes, the tiers stay */
        store_set_retention(s, 30 * USEC_PER_MINUTE, 3650 * USEC_PER_DAY);
        unsigned deleted = 0, total = 0;
        do {
                CHECK_EQ_INT(store_retention(s, T0 + 70 * MIN, 50, &deleted), 0);
                total += deleted;
        } while (deleted == 50);
        CHECK_EQ_INT(total, 80);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_blocks"), 60);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples_1m"), 140);
        store_close(s);
}

/* ---- answers against SQL over the raw rows ------------------------------------------ */

/* What the old read path computed over raw rows for a step: rates and
 * gauges averaged, counters at their largest. */
static const char truth_steps[] =
        "SELECT (ts / ?1) * ?1 AS bucket, count(*), avg(cpu_pct), max(cpu_time_ns), max(user_time_ns), "
        "CAST(avg(rss_bytes) AS INTEGER), CAST(avg(rss_anon_bytes) AS INTEGER), max(peak_rss_bytes), max(threads), "
        "max(read_bytes), max(rchar_bytes), avg(read_bytes_per_s), avg(write_bytes_per_s), max(netns_rx_bytes), "
        "avg(netns_tx_bytes_per_s) FROM truth WHERE run_id = ?2 AND ts >= ?3 AND ts <= ?4 GROUP BY bucket ORDER BY "
        "bucket";

static bool near(double x, double y) {
        return fabs(x - y) <= 1e-9 * fmax(1.0, fmax(fabs(x), fabs(y)));
}

/* querier_samples with a step against truth_steps: *ret_points compared. */
static void check_steps(struct store *s, int64_t run, int64_t from, int64_t until, int64_t step) {
        struct sample *v = NULL;
        size_t n = 0;
        bool trunc = true;
        CHECK_EQ_INT(querier_samples(s, &lim, run, from, until, 0, step, &v, &n, &trunc), 0);
        CHECK(!trunc);
        sqlite3_stmt *st = NULL;
        CHECK(sqlite3_prepare_v2(store_writer(s), truth_steps, -1, &st, NULL) == SQLITE_OK);
        bind_params(st, PARAMS(p_int(step), p_int(run), p_int(from), p_int(until)));
        size_t k = 0, bad = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
                if (k >= n) {
                        bad++;
                        break;
                }
                const struct sample *p = &v[k++];
                bool ok = p->ts_ms == sqlite3_column_int64(st, 0) && near(p->cpu_pct, sqlite3_column_double(st, 2)) &&
                          p->cpu_time_ns == (uint64_t)sqlite3_column_int64(st, 3) &&
                          p->user_time_ns == (uint64_t)sqlite3_column_int64(st, 4) &&
                          p->rss_bytes == (uint64_t)sqlite3_column_int64(st, 5) &&
                          p->rss_anon_bytes == (uint64_t)sqlite3_column_int64(st, 6) &&
                          p->peak_rss_bytes == (uint64_t)sqlite3_column_int64(st, 7) &&
                          p->threads == (uint32_t)sqlite3_column_int64(st, 8) &&
                          p->read_bytes == (uint64_t)sqlite3_column_int64(st, 9) &&
                          p->rchar_bytes == (uint64_t)sqlite3_column_int64(st, 10) &&
                          near(p->read_bytes_per_s, sqlite3_column_double(st, 11)) &&
                          near(p->write_bytes_per_s, sqlite3_column_double(st, 12)) &&
                          p->netns_rx_bytes == (uint64_t)sqlite3_column_int64(st, 13) &&
                          near(p->netns_tx_bytes_per_s, sqlite3_column_double(st, 14));
                if (!ok && bad++ == 0)
                        printf("# step %lld: point %zu at %lld differs\n", (long long)step, k - 1, (long long)p->ts_ms);
        }
        sqlite3_finalize(st);
        CHECK_EQ_INT(k, n);
        CHECK_EQ_INT(bad, 0);
        free(v);
}

/* More runs than one batch of the compaction holds (it reads the head
 * once per batch of runs, COMPACT_BATCH_ROWS): every run's samples come back
 * from the head before (through head_ticks, sql/013) and from its blocks
 * after, wherever the batches were cut. */
#define BATCH_RUNS 120
#define BATCH_N 300 /* five minutes at 1 s: one pass, 36 000 rows */
static struct sample bv[BATCH_RUNS][BATCH_N];

static size_t batch_mismatches(struct store *s, const int64_t *ids, bool newest_first) {
        size_t bad = 0;
        for (int k = 0; k < BATCH_RUNS; k++) {
                struct collected c = {};
                CHECK_EQ_INT(raw_samples(s, store_reader(s), ids[k], T0, T0 + HOUR, newest_first, collect, &c), 0);
                bad += c.n != BATCH_N;
                for (size_t i = 0; i < c.n && i < BATCH_N; i++)
                        bad += !same_sample(&c.v[i], &bv[k][newest_first ? BATCH_N - 1 - i : i]);
                free(c.v);
        }
        return bad;
}

static void test_compaction_batches(void) {
        struct store *s = open_db("batches.db");
        if (!s)
                return;
        int64_t ids[BATCH_RUNS];
        uint64_t seed = 5;
        CHECK_EQ_INT(store_begin(s), 0);
        for (int k = 0; k < BATCH_RUNS; k++) {
                ids[k] = add_run(s, 1000 + k);
                sample_series(bv[k], BATCH_N, (uint64_t)k * 1000000, (uint64_t)(k + 1) << 20, k % 2, &seed);
        }
        for (size_t i = 0; i < BATCH_N; i++) /* a tick's rows: every run's sample of one time */
                for (int k = 0; k < BATCH_RUNS; k++)
                        CHECK_EQ_INT(store_insert_sample(s, ids[k], &bv[k][i]), 0);
        CHECK_EQ_INT(store_commit(s), 0);
        sqlite3 *db = store_writer(s);
        /* each time once (a tick's rows share one; these series' times jitter by up to 2 ms) */
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM head_ticks"),
                     db_scalar(db, "SELECT count(DISTINCT ts) FROM samples"));
        CHECK_EQ_INT(batch_mismatches(s, ids, false), 0);
        CHECK_EQ_INT(batch_mismatches(s, ids, true), 0);
        compact_all(s, T0 + 6 * MIN);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM head_ticks"), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_blocks"), BATCH_RUNS * 5);
        CHECK_EQ_INT(db_scalar(db, "SELECT sum(n) FROM sample_blocks"), BATCH_RUNS * BATCH_N);
        CHECK_EQ_INT(batch_mismatches(s, ids, false), 0);
        store_close(s);
}

static void test_answers_equal_sql(void) {
        struct store *s = open_db("answers.db");
        if (!s)
                return;
        int64_t a, b;
        fill(s, &a, &b);
        compact_all(s, T0 + 70 * MIN + 5000);
        /* a span that starts and ends inside minutes: raw edges, minutes, the hour */
        int64_t from = T0 + 90 * 1000 + 500, until = T0 + 65 * MIN + 17000;
        static const int64_t steps[] = { 10000, 60000, 600000, 3600000, 7200000 };
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                check_steps(s, a, from, until, steps[i]);
                check_steps(s, b, from, until, steps[i]);
        }
        check_steps(s, a, T0, T0 + 70 * MIN, 3600000); /* whole hours */

        /* a span's totals: counters from its edges, peaks and counts over it */
        struct run_totals t;
        int64_t base = 0;
        CHECK_EQ_INT(querier_span_totals(s, &lim, a, from, until, &t, &base), 0);
        char q[512];
        snprintf(q, sizeof q, "SELECT count(*) FROM truth WHERE run_id = %lld AND ts >= %lld AND ts <= %lld",
                 (long long)a, (long long)from, (long long)until);
        CHECK_EQ_INT(t.samples, db_scalar(store_writer(s), q));
        snprintf(q, sizeof q, "SELECT max(rss_bytes) FROM truth WHERE run_id = %lld AND ts >= %lld AND ts <= %lld",
                 (long long)a, (long long)from, (long long)until);
        CHECK_EQ_INT(t.peak_rss_bytes, db_scalar(store_writer(s), q));
        snprintf(
                q, sizeof q,
                "SELECT (SELECT cpu_time_ns FROM truth WHERE run_id = %1$lld AND ts <= %3$lld ORDER BY ts DESC LIMIT 1) - "
                "(SELECT cpu_time_ns FROM truth WHERE run_id = %1$lld AND ts <= %2$lld ORDER BY ts DESC LIMIT 1)",
                (long long)a, (long long)from, (long long)until);
        CHECK_EQ_INT(t.cpu_time_ns, db_scalar(store_writer(s), q));

        struct window_rates w;
        CHECK_EQ_INT(querier_window(s, &lim, b, from, until, &w), 0);
        snprintf(q, sizeof q, "SELECT count(*) FROM truth WHERE run_id = %lld AND ts >= %lld AND ts <= %lld",
                 (long long)b, (long long)from, (long long)until);
        CHECK_EQ_INT(w.samples, db_scalar(store_writer(s), q));
        CHECK(w.has_cpu && w.cpu_pct == 0);
        store_close(s);
}

/* A run's energy estimate counts from 0 at its registration, and its first
 * sample has none yet: a span from before the first sample holds all of
 * the estimate at its end; a span from a later sample, the difference. */
static void test_span_energy(void) {
        struct store *s = open_db("energy.db");
        if (!s)
                return;
        static const double joules[] = { NAN, 1.0, 2.5, 4.0 };
        CHECK_EQ_INT(store_begin(s), 0);
        int64_t id = add_run(s, 300), none = add_run(s, 301);
        for (size_t i = 0; i < ELEMENTSOF(joules); i++) {
                struct sample m = { .ts_ms = T0 + (int64_t)i * 1000, .interval_us = 1000000, .threads = 1 };
                CHECK_EQ_INT(store_insert_sample(s, none, &m), 0);
                m.has_energy = !isnan(joules[i]);
                m.energy_j = m.has_energy ? joules[i] : 0;
                CHECK_EQ_INT(store_insert_sample(s, id, &m), 0);
        }
        CHECK_EQ_INT(store_commit(s), 0);
        static const struct {
                int64_t from, until;
                double want; /* NAN: unknown */
        } spans[] = {
                { T0 - 5000, T0 + 3000, 4.0 }, /* the whole run */
                { T0 - 5000, T0 + 2000, 2.5 }, /* from its start, ending before its last sample */
                { T0, T0 + 2500, 2.5 },        /* from its first sample */
                { T0 + 1000, T0 + 3000, 3.0 }, /* from a sample with an estimate */
                { T0 + 1500, T0 + 3000, 3.0 }, /* from between two: the one before */
                { T0 - 5000, T0 + 500, NAN },  /* its first sample alone: none yet */
        };
        for (size_t i = 0; i < ELEMENTSOF(spans); i++) {
                struct run_totals t;
                int64_t base;
                CHECK_EQ_INT(querier_span_totals(s, &lim, id, spans[i].from, spans[i].until, &t, &base), 0);
                CHECK(t.has_energy == !isnan(spans[i].want));
                CHECK(!t.has_energy || t.energy_j == spans[i].want);
                CHECK_EQ_INT(querier_span_totals(s, &lim, none, spans[i].from, spans[i].until, &t, &base), 0);
                CHECK(!t.has_energy);
        }
        store_close(s);
}

/* The minutes of many runs at once (tier and head, one query each) equal
 * the averages SQL computes from the raw rows, minute by minute. */
static void test_sparks(void) {
        struct store *s = open_db("sparks.db");
        if (!s)
                return;
        int64_t a, b;
        fill(s, &a, &b);
        /* minutes 65 to 69 stay in the head */
        compact_all(s, T0 + 65 * MIN + 5000);
        sqlite3 *db = store_writer(s);
        CHECK_EQ_INT(db_scalar(db, "SELECT min(ts) / 60000 * 60000 FROM samples"), T0 + 65 * MIN);
        int64_t ids[] = { a, b, b + 1 }; /* the last one has no data */
        const size_t npoints = 16;       /* minutes 55 to 70: the tier, the head, one past the data */
        int64_t from = T0 + 55 * MIN;
        struct spark_point *p = calloc(ELEMENTSOF(ids) * npoints, sizeof *p);
        if (!p)
                return;
        CHECK_EQ_INT(
                querier_sparks(s, &lim, ids, ELEMENTSOF(ids), from, from + (int64_t)npoints * MIN, true, npoints, p),
                0);
        unsigned bad = 0;
        for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                for (size_t k = 0; k < npoints; k++) {
                        sqlite3_stmt *st = NULL;
                        const struct spark_point *x = &p[i * npoints + k];
                        int64_t m = from + (int64_t)k * MIN;
                        CHECK(sqlite3_prepare_v2(db,
                                                 "SELECT count(cpu_pct), total(cpu_pct), count(rss_bytes), "
                                                 "total(rss_bytes) FROM truth WHERE run_id = ? AND ts >= ? AND ts < ?",
                                                 -1, &st, NULL) == SQLITE_OK);
                        bind_params(st, PARAMS(p_int(ids[i]), p_int(m), p_int(m + MIN)));
                        if (sqlite3_step(st) != SQLITE_ROW || x->cpu_n != (uint64_t)sqlite3_column_int64(st, 0) ||
                            fabs(x->cpu_sum - sqlite3_column_double(st, 1)) > 1e-6 * (1 + fabs(x->cpu_sum)) ||
                            x->rss_n != (uint64_t)sqlite3_column_int64(st, 2) ||
                            fabs(x->rss_sum - sqlite3_column_double(st, 3)) > 1e-6 * (1 + fabs(x->rss_sum)))
                                bad++;
                        sqlite3_finalize(st);
                }
        CHECK_EQ_INT(bad, 0);
        CHECK(p[0].cpu_n > 0 && p[14].rss_n > 0 && p[15].rss_n == 0); /* run a: the tier, the head, no data */
        /* the tier alone: the head's minutes stay empty */
        memset(p, 0, ELEMENTSOF(ids) * npoints * sizeof *p);
        CHECK_EQ_INT(querier_sparks(s, &lim, ids, 2, from, from + (int64_t)npoints * MIN, false, npoints, p), 0);
        CHECK(p[9].cpu_n == 60 && p[10].cpu_n == 0 && p[npoints + 9].rss_n == 60);
        free(p);
        store_close(s);
}

/* ---- ops ------------------------------------------------------------------------------ */

/* The second k's timing, in ms. */
static double timing(int k) {
        return 1.0 + k % 50 + (k % 7) * 0.125;
}

/* The live data a run holds in memory: here, one timing of "step" at
 * live_ts (the manager answers this for real). */
static int64_t live_ts;
static int live_ops(void *userdata, int64_t run_id, int64_t from, int64_t until, const char *op_filter,
                    struct op_aggs *a) {
        if (live_ts < from || live_ts >= until || (op_filter && !streq(op_filter, "step")))
                return 0;
        struct hist h;
        hist_init(&h);
        hist_add(&h, 999.0, 1);
        int r = op_aggs_add(a, "step", "train", 1, &h);
        hist_done(&h);
        return r;
}

static const struct op_agg *find(const struct op_aggs *a, const char *op) {
        for (size_t i = 0; i < a->n; i++)
                if (streq(a->v[i].op, op))
                        return &a->v[i];
        return NULL;
}

/* The op data of [from, until) as a histogram built from the timings
 * themselves, against the querier's. */
static void check_ops_span(struct store *s, const struct live_source *live, int64_t run, int64_t from, int64_t until) {
        struct hist want;
        hist_init(&want);
        for (int k = 0; k < 70 * 60; k++) {
                int64_t ts = T0 + (int64_t)k * 1000;
                if (ts >= from && ts < until)
                        hist_add(&want, timing(k), 1);
        }
        if (live_ts >= from && live_ts < until)
                hist_add(&want, 999.0, 1);
        struct op_aggs got = {};
        CHECK_EQ_INT(querier_ops(s, &lim, live, run, from, until, NULL, &got), 0);
        const struct op_agg *st = find(&got, "step"), *dw = find(&got, "data");
        CHECK(st != NULL);
        if (st) {
                CHECK_EQ_INT(st->h.count, want.count);
                CHECK(st->count == (double)want.count);
                CHECK(hist_quantile(&st->h, 0.5) == hist_quantile(&want, 0.5));
                CHECK(hist_quantile(&st->h, 0.99) == hist_quantile(&want, 0.99));
                CHECK(st->h.min == want.min && st->h.max == want.max);
        }
        uint64_t want_data = want.count - (live_ts >= from && live_ts < until);
        CHECK(dw && dw->count == 2.0 * (double)want_data);
        op_aggs_done(&got);
        hist_done(&want);
}

static void test_ops(void) {
        struct store *s = open_db("ops.db");
        if (!s)
                return;
        CHECK_EQ_INT(store_begin(s), 0);
        int64_t id = add_run(s, 300);
        for (int k = 0; k < 70 * 60; k++) {
                struct op_slice sl = { .op = "step", .category = "train", .ts = T0 + (int64_t)k * 1000, .count = 1 };
                hist_init(&sl.h);
                hist_add(&sl.h, timing(k), 1);
                CHECK_EQ_INT(store_insert_op_slice(s, id, &sl), 0);
                hist_done(&sl.h);
                struct op_slice c = { .op = "data", .ts = sl.ts, .count = 2 };
                hist_init(&c.h);
                CHECK_EQ_INT(store_insert_op_slice(s, id, &c), 0);
        }
        CHECK_EQ_INT(store_commit(s), 0);
        compact_all(s, T0 + 70 * MIN + 1000);
        sqlite3 *db = store_writer(s);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM op_slices_1m"), 140);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM op_slices_1h"), 2);

        const struct live_source live = { .ops = live_ops };
        live_ts = T0 + 69 * MIN + 30500; /* the open slice of a tick to come */
        check_ops_span(s, &live, id, T0, T0 + 70 * MIN);
        check_ops_span(s, &live, id, T0 + 17000, T0 + 69 * MIN + 31000); /* raw, minutes, the hour, minutes, raw */
        check_ops_span(s, NULL, id, T0 + 61 * MIN + 5000, T0 + 61 * MIN + 9000);
        check_ops_span(s, NULL, id, T0 + 59 * MIN, T0 + 61 * MIN);

        /* many runs at once: each run's ops as querier_ops has them */
        CHECK_EQ_INT(store_begin(s), 0);
        int64_t other = add_run(s, 301);
        CHECK_EQ_INT(store_commit(s), 0);
        int64_t ids[] = { id, other };
        static const int64_t spans[][2] = { { T0 + 17000, T0 + 69 * MIN + 31000 }, { T0 + 68 * MIN, T0 + 70 * MIN } };
        for (size_t i = 0; i < ELEMENTSOF(spans); i++) {
                struct op_aggs many[2] = {}, one = {};
                CHECK_EQ_INT(querier_runs_ops(s, &lim, &live, ids, 2, spans[i][0], spans[i][1], many), 0);
                CHECK_EQ_INT(querier_ops(s, &lim, &live, id, spans[i][0], spans[i][1], NULL, &one), 0);
                const struct op_agg *x = find(&many[0], "step"), *y = find(&one, "step");
                CHECK(x && y && x->h.count == y->h.count && x->h.sum == y->h.sum && x->count == y->count);
                CHECK(find(&many[0], "data") && find(&many[0], "data")->count == find(&one, "data")->count);
                /* the other run: only what it holds live (this live source answers every run) */
                CHECK_EQ_INT(many[1].n, live_ts >= spans[i][0] && live_ts < spans[i][1] ? 1 : 0);
                op_aggs_done(&many[0]);
                op_aggs_done(&many[1]);
                op_aggs_done(&one);
        }

        /* steps: each the sum of its own seconds */
        static const int64_t steps[] = { 1000, 60000, 600000, 3600000 };
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                int64_t from = T0 + 3 * MIN, until = T0 + 69 * MIN + 59000 + 1;
                struct op_aggs *v = NULL;
                size_t n = 0;
                CHECK_EQ_INT(querier_op_steps(s, &lim, NULL, id, from, until, steps[i], NULL, &v, &n), 0);
                CHECK_EQ_INT(n, (size_t)((until - 1 - from) / steps[i]) + 1);
                uint64_t total = 0, bad = 0;
                for (size_t k = 0; k < n; k++) {
                        const struct op_agg *st = find(&v[k], "step");
                        int64_t t = from + (int64_t)k * steps[i], end = t + steps[i] < until ? t + steps[i] : until;
                        uint64_t want = (uint64_t)((end - t + 999) / 1000);
                        total += st ? st->h.count : 0;
                        bad += (st ? st->h.count : 0) != want;
                }
                CHECK_EQ_INT(total, 67 * 60);
                CHECK_EQ_INT(bad, 0);
                op_steps_free(v, n);
        }
        store_close(s);
}

/* ---- packed tier rows ----------------------------------------------------------------- */

static void test_pack(void) {
        uint64_t seed = 5;
        struct sample v[90];
        sample_series(v, ELEMENTSOF(v), 300000000, 100 << 20, true, &seed);
        struct sample_agg a = {}, b;
        uint8_t buf[SAMPLE_AGG_PACKED_MAX], again[SAMPLE_AGG_PACKED_MAX];
        CHECK_EQ_INT(sample_agg_unpack(buf, sample_agg_pack(&a, buf), &b), 0);
        CHECK(b.samples == 0 && !b.has_io && b.rss_sum == 0);
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                sample_agg_add(&a, &v[i]);
        a.has_energy = true;
        a.energy_j = 12.5;
        a.threads_max = UINT32_MAX;
        size_t n = sample_agg_pack(&a, buf);
        CHECK(n < 200);
        CHECK_EQ_INT(sample_agg_unpack(buf, n, &b), 0);
        CHECK(sample_agg_pack(&b, again) == n && memcmp(buf, again, n) == 0);
        CHECK(b.samples == 90 && b.cpu_pct_n == a.cpu_pct_n && b.cpu_pct_sum == a.cpu_pct_sum);
        CHECK(b.rss_max == a.rss_max && b.has_io && b.read_bytes == a.read_bytes && b.wchar_bytes == a.wchar_bytes);
        CHECK(b.has_energy && b.energy_j == 12.5 && b.threads_max == UINT32_MAX && !b.has_gpu_mem);
        /* anything else is refused, never read past its end */
        for (size_t k = 0; k < n; k++)
                CHECK(sample_agg_unpack(buf, k, &b) == -EBADMSG);
        buf[0] = 9;
        CHECK(sample_agg_unpack(buf, n, &b) == -EBADMSG);
        CHECK(sample_agg_unpack(NULL, 0, &b) == -EBADMSG);
}

/* The tiers' rows of version 9, a column a figure, are packed by the
 * migration: every figure, and NULL as unknown; the blocks move with it. */
static void test_migrate_packs(void) {
        char path[512], err[256];
        snprintf(path, sizeof path, "%s/v9.db", tmpdir);
        sqlite3 *db = NULL;
        CHECK(sqlite3_open(path, &db) == SQLITE_OK);
        CHECK_EQ_INT(store_migrate(db, 9, err, sizeof err), 0);
        CHECK(sqlite3_exec(db,
                           "INSERT INTO samples_1m (run_id, ts, samples, cpu_pct_n, cpu_pct_sum, cpu_pct_max, "
                           "cpu_time_ns, rss_n, rss_sum, rss_max, read_bytes, write_bytes, rchar_bytes, wchar_bytes, "
                           "netns_rx_bytes, energy_j, pss_n, pss_max) "
                           "VALUES (7, 60000, 60, 59, 1234.5, 99.5, 9000000000, 60, 6.0e9, 100000000, 10, 20, 30, "
                           "40, 50, NULL, 0, NULL);"
                           "INSERT INTO samples_1h (run_id, ts, samples, peak_rss_bytes, energy_j, gpu_mem_max) "
                           "VALUES (7, 0, 3600, 4096, 2.25, 0);"
                           "INSERT INTO sample_blocks (run_id, ts, n, data) VALUES (7, 60000, 1, x'0102');",
                           NULL, NULL, NULL) == SQLITE_OK);
        CHECK_EQ_INT(store_migrate(db, 0, err, sizeof err), 0);
        sqlite3_stmt *st = NULL;
        struct sample_agg m = {}, h = {};
        CHECK(sqlite3_prepare_v2(db, "SELECT agg FROM samples_1m UNION ALL SELECT agg FROM samples_1h", -1, &st,
                                 NULL) == SQLITE_OK);
        CHECK(sqlite3_step(st) == SQLITE_ROW &&
              sample_agg_unpack(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &m) == 0);
        CHECK(sqlite3_step(st) == SQLITE_ROW &&
              sample_agg_unpack(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &h) == 0);
        sqlite3_finalize(st);
        CHECK(m.samples == 60 && m.cpu_pct_n == 59 && m.cpu_pct_sum == 1234.5 && m.cpu_pct_max == 99.5);
        CHECK(m.cpu_time_ns == 9000000000 && m.rss_n == 60 && m.rss_sum == 6.0e9 && m.rss_max == 100000000);
        CHECK(m.has_io && m.read_bytes == 10 && m.write_bytes == 20 && m.rchar_bytes == 30 && m.wchar_bytes == 40);
        CHECK(m.has_net && m.netns_rx_bytes == 50 && !m.has_peak && !m.has_energy && !m.has_gpu_mem);
        CHECK(h.samples == 3600 && h.has_peak && h.peak_rss_bytes == 4096 && h.has_energy && h.energy_j == 2.25);
        CHECK(h.has_gpu_mem && h.gpu_mem_max == 0 && !h.has_io && !h.has_net);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_blocks WHERE run_id = 7 AND n = 1 AND data = x'0102'"),
                     1);
        sqlite3_close(db);
}

int main(void) {
        log_set_max_level(LOG_WARNING);
        if (!mkdtemp(tmpdir)) {
                perror("mkdtemp");
                return 1;
        }
        test_compaction();
        test_compaction_batches();
        test_answers_equal_sql();
        test_span_energy();
        test_sparks();
        test_ops();
        test_pack();
        test_migrate_packs();
        test_scratch_remove(tmpdir);
        TEST_DONE();
}

/* SPDX-License-Identifier: MIT */
/* Storage: migrations from an older database file, retention and rollups,
 * reopening after an unclean stop. Real SQLite files in a temp dir. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analyze/leakwatch.h"
#include "analyze/ops.h"
#include "collect/accel/gpu.h"
#include "store/details.h"
#include "store/compact.h"
#include "store/query.h"
#include "store/raw.h"
#include "store/store.h"
#include "util.h"
#include "store-util.h"
#include "tap.h"

static char tmpdir[] = "/tmp/mlmond-test-store-XXXXXX";

static char *text_col(sqlite3 *db, const char *sql, int col) {
        sqlite3_stmt *st = NULL;
        char *v = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
            sqlite3_column_text(st, col))
                v = strdup((const char *)sqlite3_column_text(st, col));
        sqlite3_finalize(st);
        return v;
}

static char *text(sqlite3 *db, const char *sql) {
        return text_col(db, sql, 0);
}

static void copy_file(const char *from, const char *to) {
        char buf[65536];
        int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ssize_t n;
        CHECK(in >= 0 && out >= 0);
        while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
                CHECK(write(out, buf, (size_t)n) == n);
        close(in);
        close(out);
}

static void test_migrate_from_v1(const char *fixtures) {
        char src[512], dst[512], err[256];
        snprintf(src, sizeof src, "%s/db/v1.db", fixtures);
        snprintf(dst, sizeof dst, "%s/v1.db", tmpdir);
        copy_file(src, dst);

        struct store *s = NULL;
        int r = store_open(dst, false, &s, err, sizeof err);
        CHECK_EQ_INT(r, 0);
        if (r < 0) {
                fprintf(stderr, "store_open: %s\n", err);
                return;
        }
        sqlite3 *db = store_writer(s);
        CHECK_EQ_INT(db_scalar(db, "PRAGMA user_version"), store_schema_version());
        CHECK(store_schema_version() >= 2);
        /* the data of version 1 is all there */
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM runs"), 2);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 5);
        CHECK_EQ_INT(db_scalar(db, "SELECT peak_rss_bytes FROM runs WHERE id=1"), 104857600);
        char *tags = text(db, "SELECT tags FROM runs WHERE id=1");
        CHECK(tags && strcmp(tags, "{\"team\":\"vision\"}") == 0);
        free(tags);
        /* and version 2's index exists and is used */
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sqlite_master WHERE type='index' AND name='runs_pid'"), 1);
        /* EXPLAIN QUERY PLAN rows: id, parent, notused, detail */
        char *plan = text_col(db, "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE pid=4242", 3);
        CHECK(plan && strstr(plan, "runs_pid"));
        free(plan);

        /* the running run of version 1 loads as running */
        struct run_info *v = NULL;
        size_t n = 0;
        CHECK_EQ_INT(store_load_running(s, &v, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1) {
                CHECK_EQ_INT(v[0].id, 2);
                CHECK(v[0].children);
                CHECK_EQ_INT(v[0].totals.cpu_time_ns, 250000000);
                CHECK(v[0].name == NULL);
        }
        for (size_t i = 0; i < n; i++)
                run_info_done(&v[i]);
        free(v);
        /* a run from before baselines were kept has none: it goes on from its totals */
        struct run_baseline b;
        CHECK_EQ_INT(store_load_baseline(s, 2, &b), 0);
        CHECK_EQ_INT(b.n_members, 0);
        CHECK_EQ_INT(b.n_netns, 0);
        CHECK_EQ_INT(b.left.cpu_ns, 0);
        CHECK(!b.left.has_io);
        run_baseline_done(&b);
        store_close(s);

        /* opening again is a no-op migration */
        CHECK_EQ_INT(store_open(dst, false, &s, err, sizeof err), 0);
        store_close(s);
}

static int count_sample(const struct sample *m, void *userdata) {
        (void)m;
        ++*(unsigned *)userdata;
        return 0;
}

/* A database of version 6 kept the leak verdict and each sample's GPU use as
 * JSON text: version 7 turns them into typed rows. */
static void test_migrate_json_to_rows(void) {
        char path[512], err[256];
        snprintf(path, sizeof path, "%s/v6.db", tmpdir);
        sqlite3 *db;
        CHECK(sqlite3_open(path, &db) == SQLITE_OK);
        CHECK_EQ_INT(store_migrate(db, 6, err, sizeof err), 0);
        static const char fill[] =
                "INSERT INTO runs (id, pid, start_time_ticks, boot_id, interval_ms, state, registered_ts, leak) "
                "VALUES (1, 10, 1, 'b', 1000, 'exited', 1000, '{\"suspected\":true,\"evaluated\":true,"
                "\"metric\":\"rss_anon_bytes\",\"slope_bytes_per_s\":2097152.0,\"growth_bytes\":1.5e8,"
                "\"window_s\":60.0,\"confidence\":0.999,\"since\":5000,\"suspected_at\":70000,"
                "\"evaluated_ts\":71000,\"reason\":\"memory grew\",\"gpu_mem\":{\"suspected\":false,"
                "\"evaluated\":false,\"metric\":\"gpu_mem_bytes\",\"slope_bytes_per_s\":null,"
                "\"reason\":\"not yet\"}}'),"
                "(2, 11, 1, 'b', 1000, 'running', 1000, NULL), (3, 12, 1, 'b', 1000, 'exited', 1000, 'garbage');"
                "INSERT INTO samples (ts, run_id, threads, gpu) VALUES (2000, 1, 1, '[{\"device\":\"0000:03:00.0\","
                "\"driver\":\"amdgpu\",\"estimated\":false,\"clients\":2,\"mem_bytes\":4096,\"util_pct\":12.5,"
                "\"engines\":{\"gfx\":12.5,\"compute\":null},\"regions\":{\"vram\":4096}}]'),"
                "(3000, 1, 1, NULL), (4000, 1, 1, '[]');";
        CHECK(sqlite3_exec(db, fill, NULL, NULL, NULL) == SQLITE_OK);
        CHECK_EQ_INT(store_migrate(db, 0, err, sizeof err), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'leak'"), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM run_leak"), 2);
        CHECK_EQ_INT(db_scalar(db,
                               "SELECT count(*) FROM run_leak WHERE run_id = 1 AND metric = 'rss_anon_bytes' AND "
                               "suspected AND evaluated AND ended AND slope_bytes_per_s = 2097152 AND "
                               "growth_bytes = 1.5e8 AND window_s = 60 AND confidence = 0.999 AND since_ts = 5000 AND "
                               "suspected_ts = 70000 AND evaluated_ts = 71000 AND reason = 'memory grew'"),
                     1);
        CHECK_EQ_INT(db_scalar(db,
                               "SELECT count(*) FROM run_leak WHERE run_id = 1 AND metric = 'gpu_mem_bytes' AND "
                               "NOT suspected AND NOT evaluated AND slope_bytes_per_s IS NULL AND reason = 'not yet'"),
                     1);
        CHECK_EQ_INT(db_scalar(db,
                               "SELECT count(*) FROM sample_gpu WHERE ts = 2000 AND run_id = 1 AND "
                               "device = '0000:03:00.0' AND driver = 'amdgpu' AND NOT estimated AND clients = 2 AND "
                               "mem_bytes = 4096 AND util_pct = 12.5"),
                     1);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_gpu"), 1);
        /* version 13: the head's times in head_ticks, its index by run gone */
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM head_ticks WHERE ts IN (2000, 3000, 4000)"), 3);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'samples_run'"), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_gpu_parts WHERE kind = 'engine' AND "
                                   "((name = 'gfx' AND value = 12.5) OR (name = 'compute' AND value IS NULL))"),
                     2);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_gpu_parts WHERE kind = 'region' AND name = 'vram' AND "
                                   "value = 4096"),
                     1);
        sqlite3_close(db);

        /* and the store reads them back as the verdict it shows */
        struct store *s = NULL;
        CHECK_EQ_INT(store_open(path, false, &s, err, sizeof err), 0);
        if (!s)
                return;
        struct query_limits lim = { .timeout_usec = USEC_PER_SEC, .max_rows = 100 };
        struct run_info ri;
        CHECK_EQ_INT(query_run(s, &lim, 1, &ri), 0);
        CHECK(ri.leak && ri.leak->rss.suspected && ri.leak->rss.since_ms == 5000 && ri.leak->has_gpu &&
              !ri.leak->gpu.evaluated && streq(ri.leak->gpu.reason, "not yet"));
        run_info_done(&ri);
        CHECK_EQ_INT(query_run(s, &lim, 2, &ri), 0);
        CHECK(ri.leak == NULL);
        run_info_done(&ri);
        /* the run's head rows, found through head_ticks */
        unsigned n = 0;
        CHECK_EQ_INT(raw_samples(s, store_reader(s), 1, 0, 10000, false, count_sample, &n), 0);
        CHECK_EQ_INT(n, 3);
        store_close(s);
}

static int keep_sample(const struct sample *m, void *userdata) {
        struct sample *v = userdata;
        if (m->ts_ms == 2000 || m->ts_ms == 3000)
                v[m->ts_ms / 1000 - 2] = *m;
        return 0;
}

/* Version 14 packs a head row's columns into one blob: every figure comes
 * back as it was, a NULL one unknown (its flag off), a whole-number REAL
 * the same double. */
static void test_migrate_head_packed(void) {
        char path[512], err[256];
        snprintf(path, sizeof path, "%s/v13.db", tmpdir);
        sqlite3 *db;
        CHECK(sqlite3_open(path, &db) == SQLITE_OK);
        CHECK_EQ_INT(store_migrate(db, 13, err, sizeof err), 0);
        static const char fill[] =
                "INSERT INTO runs (id, pid, start_time_ticks, boot_id, interval_ms, state, registered_ts) "
                "VALUES (1, 10, 1, 'b', 1000, 'running', 1000);"
                "INSERT INTO head_ticks (ts) VALUES (2000), (3000);"
                "INSERT INTO samples (ts, run_id, cpu_pct, cpu_time_ns, user_time_ns, system_time_ns, rss_bytes, "
                "rss_anon_bytes, peak_rss_bytes, threads, processes, read_bytes, write_bytes, rchar_bytes, "
                "wchar_bytes, read_bytes_per_s, write_bytes_per_s, netns_rx_bytes, netns_tx_bytes, "
                "netns_rx_bytes_per_s, netns_tx_bytes_per_s, gpu_mem_bytes, gpu_util_pct, energy_j, interval_us, "
                "pss_bytes, uss_bytes, pss_anon_bytes) VALUES "
                "(2000, 1, 12.5, 7000000000, 5000000000, 2000000000, 104857600, 52428800, 209715200, 9, 3, 4096, "
                "8192, 100, 200, 1.5, 2, 300, 400, 3.25, 4, 1073741824, 99, 12.75, 1000000, 90000000, 80000000, "
                "70000000),"
                "(3000, 1, NULL, 7000000001, 0, 0, NULL, NULL, NULL, 1, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                "NULL, NULL, NULL, NULL, NULL, NULL, 1000000, NULL, NULL, NULL);";
        CHECK(sqlite3_exec(db, fill, NULL, NULL, NULL) == SQLITE_OK);
        CHECK_EQ_INT(store_migrate(db, 0, err, sizeof err), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM pragma_table_info('samples')"), 3);
        sqlite3_close(db);

        struct store *s = NULL;
        CHECK_EQ_INT(store_open(path, false, &s, err, sizeof err), 0);
        if (!s)
                return;
        struct sample v[2] = {};
        CHECK_EQ_INT(raw_samples(s, store_reader(s), 1, 0, 10000, false, keep_sample, v), 0);
        const struct sample *a = &v[0], *b = &v[1];
        CHECK(a->ts_ms == 2000 && a->has_cpu_pct && a->cpu_pct == 12.5 && a->cpu_time_ns == 7000000000 &&
              a->user_time_ns == 5000000000 && a->system_time_ns == 2000000000);
        CHECK(a->has_rss && a->rss_bytes == 104857600 && a->rss_anon_bytes == 52428800 && a->has_peak_rss &&
              a->peak_rss_bytes == 209715200 && a->threads == 9 && a->processes == 3);
        CHECK(a->has_io && a->read_bytes == 4096 && a->write_bytes == 8192 && a->rchar_bytes == 100 &&
              a->wchar_bytes == 200 && a->has_io_rate && a->read_bytes_per_s == 1.5 && a->write_bytes_per_s == 2.0);
        CHECK(a->has_net && a->netns_rx_bytes == 300 && a->netns_tx_bytes == 400 && a->has_net_rate &&
              a->netns_rx_bytes_per_s == 3.25 && a->netns_tx_bytes_per_s == 4.0);
        CHECK(a->has_gpu_mem && a->gpu_mem_bytes == 1073741824 && a->has_gpu_util && a->gpu_util_pct == 99.0 &&
              a->has_energy && a->energy_j == 12.75 && a->interval_us == 1000000);
        CHECK(a->has_pss && a->pss_bytes == 90000000 && a->uss_bytes == 80000000 && a->has_pss_anon &&
              a->pss_anon_bytes == 70000000);
        CHECK(b->ts_ms == 3000 && !b->has_cpu_pct && b->cpu_time_ns == 7000000001 && !b->has_rss && !b->has_peak_rss &&
              !b->has_io && !b->has_io_rate && !b->has_net && !b->has_net_rate && !b->has_gpu_mem && !b->has_gpu_util &&
              !b->has_energy && !b->has_pss && !b->has_pss_anon && b->threads == 1 && b->interval_us == 1000000);
        store_close(s);
}

static void test_newer_schema_refused(void) {
        char path[512], err[256];
        snprintf(path, sizeof path, "%s/future.db", tmpdir);
        sqlite3 *db;
        CHECK(sqlite3_open(path, &db) == SQLITE_OK);
        CHECK(sqlite3_exec(db, "PRAGMA user_version = 999", NULL, NULL, NULL) == SQLITE_OK);
        sqlite3_close(db);
        struct store *s = NULL;
        CHECK(store_open(path, false, &s, err, sizeof err) < 0);
        CHECK(strstr(err, "newer") != NULL);
}

static int64_t add_run(struct store *s, int pid) {
        int64_t id = test_store_add_run(s, pid, 1);
        CHECK(id > 0);
        return id;
}

/* The store in tmpdir/name, opened (checked); NULL if it failed. */
static struct store *open_db(const char *name) {
        struct store *s = test_store_open(tmpdir, name);
        CHECK(s != NULL);
        return s;
}

static void test_unclean_stop(void) {
        char path[512], err[256];
        snprintf(path, sizeof path, "%s/crash.db", tmpdir);
        int pfd[2];
        CHECK(pipe(pfd) == 0);
        pid_t pid = fork();
        if (pid == 0) {
                struct store *s = NULL;
                if (store_open(path, false, &s, err, sizeof err) < 0)
                        _exit(2);
                store_begin(s);
                int64_t id = add_run(s, 1);
                store_commit(s);
                for (int tick = 0; tick < 50; tick++) {
                        store_begin(s);
                        struct sample m = { .ts_ms = 1000 + tick, .cpu_time_ns = (uint64_t)tick };
                        store_insert_sample(s, id, &m);
                        store_commit(s);
                }
                /* an uncommitted tick, then die without closing */
                store_begin(s);
                for (int i = 0; i < 100; i++) {
                        struct sample m = { .ts_ms = 5000 + i };
                        store_insert_sample(s, id, &m);
                }
                char c = 'x';
                if (write(pfd[1], &c, 1) != 1)
                        _exit(3);
                pause();
                _exit(0);
        }
        close(pfd[1]);
        char c;
        CHECK(read(pfd[0], &c, 1) == 1);
        close(pfd[0]);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status));

        struct store *s = open_db("crash.db");
        if (!s)
                return;
        sqlite3 *db = store_writer(s);
        char *ic = text(db, "PRAGMA integrity_check");
        CHECK(ic && strcmp(ic, "ok") == 0);
        free(ic);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 50);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples WHERE ts >= 5000"), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM runs"), 1);
        store_close(s);
}

/* Totals are written every few ticks; after a crash the samples written
 * since are folded back in. */
static void test_catch_up_totals(void) {
        struct store *s = open_db("catchup.db");
        if (!s)
                return;
        CHECK_EQ_INT(store_begin(s), 0);
        int64_t id = add_run(s, 300);
        struct run_totals t = { 0 };
        for (int i = 0; i < 25; i++) {
                struct sample m = { .ts_ms = 10000 + i * 1000,
                                    .cpu_time_ns = (uint64_t)i * 100000000,
                                    .has_rss = true,
                                    .rss_bytes = i == 17 ? 9000 : 1000,
                                    .threads = (uint32_t)(i % 7),
                                    .has_io = true,
                                    .write_bytes = (uint64_t)i * 4096 };
                CHECK_EQ_INT(store_insert_sample(s, id, &m), 0);
                run_totals_add(&t, &m);
                if (i == 9) /* the last write of the totals before the "crash" */
                        CHECK_EQ_INT(store_update_run_totals(s, id, &t), 0);
        }
        CHECK_EQ_INT(store_commit(s), 0);
        struct run_info *v = NULL;
        size_t n = 0;
        CHECK_EQ_INT(store_load_running(s, &v, &n), 0);
        CHECK_EQ_INT(n, 1);
        if (n == 1) {
                CHECK_EQ_INT(v[0].totals.samples, 10);
                CHECK_EQ_INT(store_catch_up_totals(s, &v[0]), 0);
                CHECK_EQ_INT(v[0].totals.samples, 25);
                CHECK_EQ_INT(v[0].totals.last_ts_ms, 34000);
                CHECK_EQ_INT(v[0].totals.cpu_time_ns, 2400000000);
                CHECK_EQ_INT(v[0].totals.peak_rss_bytes, 9000);
                CHECK_EQ_INT(v[0].totals.final_rss_bytes, 1000);
                CHECK_EQ_INT(v[0].totals.threads_max, 6);
                CHECK_EQ_INT(v[0].totals.write_bytes, 24 * 4096);
                run_info_done(&v[0]);
        }
        free(v);
        store_close(s);
}

/* A run's baseline: written with the run, its departed members' and
 * namespaces' shares as they grow, read back as written (NULL I/O stays
 * unknown). */
static void test_baseline(void) {
        struct store *s = open_db("baseline.db");
        if (!s)
                return;
        struct baseline_member mem[] = {
                { .pid = 400, .start_ticks = 7, .c = { .cpu_ns = 5, .utime_ticks = 1, .stime_ticks = 2 } },
                { .pid = 401,
                  .start_ticks = 9,
                  .c = { .cpu_ns = 6,
                         .has_io = true,
                         .read_bytes = 10,
                         .write_bytes = 20,
                         .rchar_bytes = 30,
                         .wchar_bytes = 40 } },
        };
        struct netns_baseline ns[] = { { .inode = 4026531840ULL, .rx_bytes = 1000, .tx_bytes = 2000 } };
        struct run_baseline b = { .members = mem, .n_members = 2, .netns = ns, .n_netns = 1 };
        CHECK_EQ_INT(store_begin(s), 0);
        int64_t id = add_run(s, 400);
        CHECK_EQ_INT(store_insert_baseline(s, id, &b), 0);
        struct proc_counters left = { .cpu_ns = 77, .has_io = true, .wchar_bytes = 88 };
        CHECK_EQ_INT(store_update_run_left(s, id, &left), 0);
        b.n_netns = 0; /* the namespace was left, having carried 500 and 600 bytes */
        b.left_rx_bytes = 500;
        b.left_tx_bytes = 600;
        CHECK_EQ_INT(store_update_run_netns(s, id, &b), 0);
        CHECK_EQ_INT(store_commit(s), 0);

        struct run_baseline got;
        CHECK_EQ_INT(store_load_baseline(s, id, &got), 0);
        CHECK_EQ_INT(got.n_members, 2);
        CHECK_EQ_INT(got.n_netns, 0);
        for (size_t i = 0; i < got.n_members && i < 2; i++) {
                const struct baseline_member *m = got.members[i].pid == 400 ? &mem[0] : &mem[1];
                CHECK_EQ_INT(got.members[i].start_ticks, m->start_ticks);
                CHECK_EQ_INT(got.members[i].c.cpu_ns, m->c.cpu_ns);
                CHECK_EQ_INT(got.members[i].c.stime_ticks, m->c.stime_ticks);
                CHECK_EQ_INT(got.members[i].c.has_io, m->c.has_io);
                CHECK_EQ_INT(got.members[i].c.wchar_bytes, m->c.wchar_bytes);
        }
        CHECK_EQ_INT(got.left.cpu_ns, 77);
        CHECK(got.left.has_io);
        CHECK_EQ_INT(got.left.wchar_bytes, 88);
        CHECK_EQ_INT(got.left_rx_bytes, 500);
        CHECK_EQ_INT(got.left_tx_bytes, 600);
        run_baseline_done(&got);

        CHECK_EQ_INT(store_begin(s), 0);
        b.n_netns = 1;
        CHECK_EQ_INT(store_update_run_netns(s, id, &b), 0);
        CHECK_EQ_INT(store_commit(s), 0);
        CHECK_EQ_INT(store_load_baseline(s, id, &got), 0);
        CHECK_EQ_INT(got.n_netns, 1);
        if (got.n_netns == 1) {
                CHECK_EQ_INT(got.netns[0].inode, 4026531840ULL);
                CHECK_EQ_INT(got.netns[0].tx_bytes, 2000);
        }
        run_baseline_done(&got);
        CHECK_EQ_INT(store_load_baseline(s, id + 100, &got), -ENOENT);
        store_close(s);
}

/* Op slices: stored with their histograms, merged per minute by the compaction
 * (counts add, histograms merge), dropped by retention with the samples. */
static void test_op_slices(void) {
        struct store *s = open_db("ops.db");
        if (!s)
                return;
        sqlite3 *db = store_writer(s);
        const int64_t t0 = 1700000040000;
        CHECK_EQ_INT(store_begin(s), 0);
        int64_t id = add_run(s, 400);
        /* a sample so the rollup has a starting point */
        struct sample m0 = { .ts_ms = t0 };
        CHECK_EQ_INT(store_insert_sample(s, id, &m0), 0);
        for (int sec = 0; sec < 120; sec++) {
                struct op_slice sl = { .op = "infer", .category = "model", .ts = t0 + sec * 1000, .count = 10 };
                hist_init(&sl.h);
                for (int k = 0; k < 10; k++)
                        hist_add(&sl.h, 1.0 + sec, 1);
                CHECK_EQ_INT(store_insert_op_slice(s, id, &sl), 0);
                hist_done(&sl.h);
                struct op_slice c = { .op = "req", .ts = t0 + sec * 1000, .count = 2.5 };
                hist_init(&c.h);
                CHECK_EQ_INT(store_insert_op_slice(s, id, &c), 0);
        }
        struct gauge_value g = { .ts = t0, .name = "depth", .value = 3 };
        CHECK_EQ_INT(store_insert_gauge(s, id, &g), 0);
        CHECK_EQ_INT(store_commit(s), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM op_slices"), 240);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM op_slices WHERE hist IS NULL"), 120);

        bool more = false;
        CHECK_EQ_INT(store_compact(s, t0 + 2 * 60000, &more), 0);
        CHECK(!more);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM op_slices_1m"), 4);
        CHECK_EQ_INT(db_scalar(db, "SELECT timings FROM op_slices_1m WHERE op='infer' ORDER BY ts LIMIT 1"), 600);
        CHECK_EQ_INT(
                db_scalar(db, "SELECT CAST(count AS INTEGER) FROM op_slices_1m WHERE op='req' ORDER BY ts LIMIT 1"),
                150);
        /* the merged histogram decodes and spans the minute's values */
        sqlite3_stmt *st = NULL;
        CHECK(sqlite3_prepare_v2(db, "SELECT hist FROM op_slices_1m WHERE op='infer' ORDER BY ts DESC LIMIT 1", -1, &st,
                                 NULL) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW);
        struct hist h;
        hist_init(&h);
        CHECK_EQ_INT(hist_decode(&h, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0)), 0);
        CHECK_EQ_INT(h.count, 600);
        CHECK(h.min == 61 && h.max == 120);
        hist_done(&h);
        sqlite3_finalize(st);

        /* retention takes the raw slices and gauges older than the cutoff */
        unsigned deleted;
        store_set_retention(s, 0, 3650 * USEC_PER_DAY);
        CHECK_EQ_INT(store_retention(s, t0 + 60000, 5000, &deleted), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM op_slices"), 120);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM gauges"), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM op_slices_1m"), 4);
        store_close(s);
}

/* The head rows of run id that read back as test_sample_batches() wrote
 * them: the i-th at 50 s + i s, with its own CPU time and rate. */
static int head_rows_as_written(sqlite3 *db, int64_t id) {
        sqlite3_stmt *st = NULL;
        int n = 0;
        CHECK(sqlite3_prepare_v2(db, "SELECT " STORE_SAMPLE_COLUMNS " FROM samples WHERE run_id = ?", -1, &st, NULL) ==
              SQLITE_OK);
        sqlite3_bind_int64(st, 1, id);
        while (sqlite3_step(st) == SQLITE_ROW) {
                struct sample m;
                if (store_row_to_sample(st, 0, &m) < 0)
                        continue;
                uint64_t i = m.cpu_time_ns;
                n += m.ts_ms == (int64_t)(50000 + i * 1000) && m.has_cpu_pct &&
                     m.cpu_pct == (double)i + (i % 2 == 0) * 0.25 && m.threads == 1 && !m.has_rss;
        }
        sqlite3_finalize(st);
        return n;
}

/* Samples written in a transaction go in batches (87 rows: 64 + 16 + 4 +
 * 3 one by one): each row keeps its own values and per-device use
 * (copied: the caller's buffer is reused), a whole-number rate reads back
 * as the same REAL as a fractional one, a partial batch is written at the
 * commit, and a rollback writes none. */
static void test_sample_batches(void) {
        struct store *s = open_db("batch.db");
        if (!s)
                return;
        sqlite3 *db = store_writer(s);
        CHECK_EQ_INT(store_begin(s), 0);
        int64_t id = add_run(s, 400);
        struct gpu_use use = { .clients = 1, .has_mem = true, .n_engines = 1, .n_regions = 1 };
        snprintf(use.engines[0].name, sizeof use.engines[0].name, "gfx");
        snprintf(use.regions[0].name, sizeof use.regions[0].name, "vram");
        for (int i = 0; i < 87; i++) {
                struct sample m = { .ts_ms = 50000 + i * 1000,
                                    .cpu_time_ns = (uint64_t)i,
                                    .has_cpu_pct = true,
                                    .cpu_pct = i % 2 ? i : i + 0.25,
                                    .threads = 1 };
                snprintf(use.device, sizeof use.device, "g%d", i);
                use.mem_bytes = use.regions[0].resident_bytes = (uint64_t)i + 1;
                use.engines[0].has_util = i % 3 != 0;
                use.engines[0].util_pct = i;
                CHECK_EQ_INT(store_insert_gpu_use(s, id, m.ts_ms, &use), 0);
                CHECK_EQ_INT(store_insert_sample(s, id, &m), 0);
                memset(use.device, 'x', sizeof use.device - 1);
        }
        CHECK_EQ_INT(store_commit(s), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 87);
        CHECK_EQ_INT(head_rows_as_written(db, id), 87);
        /* each sample's use, typed: its device, memory, engine and region */
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples s JOIN sample_gpu g USING (ts, run_id) WHERE "
                                   "g.device = 'g' || ((ts - 50000) / 1000) AND g.mem_bytes = (ts - 50000) / 1000 + 1"),
                     87);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_gpu_parts WHERE kind = 'engine' AND name = 'gfx' AND "
                                   "(value IS NULL) = ((ts / 1000 - 50) % 3 = 0)"),
                     87);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM sample_gpu_parts WHERE kind = 'region' AND name = 'vram' AND "
                                   "value = ts / 1000 - 49"),
                     87);
        struct query_limits lim = { .timeout_usec = USEC_PER_SEC, .max_rows = 1000 };
        struct sample_gpu *g = NULL;
        size_t ng = 0;
        CHECK_EQ_INT(query_sample_gpu(s, &lim, id, 60000, 62000, &g, &ng), 0);
        CHECK_EQ_INT(ng, 3);
        if (ng == 3) {
                CHECK_EQ_INT(g[1].ts_ms, 61000);
                CHECK_EQ_INT(g[1].n, 1);
                CHECK(streq(g[1].uses[0].device, "g11") && g[1].uses[0].mem_bytes == 12);
                CHECK(g[1].uses[0].n_engines == 1 && g[1].uses[0].engines[0].has_util &&
                      g[1].uses[0].engines[0].util_pct == 11.0);
                CHECK(g[2].uses[0].n_engines == 1 && !g[2].uses[0].engines[0].has_util);
                CHECK(g[1].uses[0].n_regions == 1 && g[1].uses[0].regions[0].resident_bytes == 12);
        }
        sample_gpus_free(g, ng);
        struct sample back;
        CHECK_EQ_INT(store_load_sample(s, id, 135000, &back), 0);
        CHECK_EQ_INT(back.cpu_time_ns, 85);
        CHECK(back.cpu_pct == 85.0);

        CHECK_EQ_INT(store_begin(s), 0);
        for (int i = 0; i < 5; i++) {
                struct sample m = { .ts_ms = 100000 + i * 1000, .threads = 1 };
                CHECK_EQ_INT(store_insert_sample(s, id, &m), 0);
        }
        store_rollback(s);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 87);
        store_close(s);
}

/* A head row whose data does not unpack (a damaged page, a stray write) is
 * left out of a run's reads and dropped by the compaction: the rows around
 * it come back, and the pass goes on. */
static void test_damaged_head_row(void) {
        struct store *s = open_db("damaged.db");
        if (!s)
                return;
        sqlite3 *db = store_writer(s);
        const int64_t t0 = 1700000040000;
        CHECK_EQ_INT(store_begin(s), 0);
        int64_t id = add_run(s, 500);
        for (int i = 0; i < 3; i++) {
                struct sample m = { .ts_ms = t0 + i * 1000, .cpu_time_ns = (uint64_t)i + 1, .threads = 1 };
                CHECK_EQ_INT(store_insert_sample(s, id, &m), 0);
        }
        CHECK_EQ_INT(store_commit(s), 0);
        char sql[128];
        snprintf(sql, sizeof sql, "UPDATE samples SET data = x'ff01' WHERE ts = %lld", (long long)(t0 + 1000));
        CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
        unsigned n = 0;
        CHECK_EQ_INT(raw_samples(s, store_reader(s), id, t0, t0 + 5000, false, count_sample, &n), 0);
        CHECK_EQ_INT(n, 2);
        bool more = false;
        CHECK_EQ_INT(store_compact(s, t0 + 60000, &more), 0);
        CHECK_EQ_INT(db_scalar(db, "SELECT count(*) FROM samples"), 0);
        n = 0;
        CHECK_EQ_INT(raw_samples(s, store_reader(s), id, t0, t0 + 5000, false, count_sample, &n), 0);
        CHECK_EQ_INT(n, 2);
        store_close(s);
}

/* ended_runs_per_uid: a user's oldest ended runs past the bound go with
 * every row they hold, in batches; the newest ones, the running ones and
 * other users' stay whole. */
static int64_t add_owned_run(struct store *s, uid_t uid, enum run_state state) {
        struct run_info ri = { .pid = 77,
                               .start_time_ticks = 1,
                               .interval_ms = 1000,
                               .state = state,
                               .registered_ts_ms = 1,
                               .has_uid = true,
                               .uid = uid };
        snprintf(ri.boot_id, sizeof ri.boot_id, "boot");
        CHECK_EQ_INT(store_insert_run(s, &ri), 0);
        struct sample m = { .ts_ms = 1000 + ri.id };
        CHECK_EQ_INT(store_insert_sample(s, ri.id, &m), 0);
        struct gauge_value g = { .ts = 1000 + ri.id, .name = "depth", .value = 3 };
        CHECK_EQ_INT(store_insert_gauge(s, ri.id, &g), 0);
        CHECK_EQ_INT(store_insert_mark(s, ri.id, 1000 + ri.id, "warm"), 0);
        struct leak_verdict v = { .suspected = true };
        CHECK_EQ_INT(store_insert_leak_event(s, ri.id, 1000 + ri.id, true, "rss_anon_bytes", &v), 0);
        return ri.id;
}

static int64_t rows_of(sqlite3 *db, const char *table, int64_t id) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE %s = %lld", table,
                 streq(table, "runs") ? "id" : "run_id", (long long)id);
        return db_scalar(db, sql);
}

static void test_prune_ended_runs(void) {
        static const char *const tables[] = { "runs", "samples", "gauges", "marks", "leak_events" };
        struct store *s = open_db("prune.db");
        if (!s)
                return;
        sqlite3 *db = store_writer(s);
        int64_t a[5], b[2], a_running, b_running;
        CHECK_EQ_INT(store_begin(s), 0);
        a_running = add_owned_run(s, 1000, RUN_RUNNING); /* older than every ended one */
        for (size_t i = 0; i < ELEMENTSOF(a); i++) {
                a[i] = add_owned_run(s, 1000, i % 2 ? RUN_EXITED : RUN_UNREGISTERED);
                if (i < ELEMENTSOF(b))
                        b[i] = add_owned_run(s, 1001, RUN_EXITED);
        }
        b_running = add_owned_run(s, 1001, RUN_RUNNING);
        CHECK_EQ_INT(store_commit(s), 0);

        unsigned deleted = 99;
        CHECK_EQ_INT(store_prune_ended_runs(s, 0, 64, &deleted), 0); /* 0: no bound */
        CHECK_EQ_INT(deleted, 0);
        CHECK_EQ_INT(store_prune_ended_runs(s, 2, 2, &deleted), 0); /* a batch of 2 of the 3 */
        CHECK_EQ_INT(deleted, 2);
        CHECK_EQ_INT(store_prune_ended_runs(s, 2, 2, &deleted), 0);
        CHECK_EQ_INT(deleted, 1);
        CHECK_EQ_INT(store_prune_ended_runs(s, 2, 2, &deleted), 0);
        CHECK_EQ_INT(deleted, 0);
        for (size_t t = 0; t < ELEMENTSOF(tables); t++) {
                for (size_t i = 0; i < ELEMENTSOF(a); i++)
                        if (rows_of(db, tables[t], a[i]) != (i < 3 ? 0 : 1))
                                TAP_FAIL("%s: run %zu of uid 1000 has %lld rows", tables[t], i,
                                         (long long)rows_of(db, tables[t], a[i]));
                CHECK_EQ_INT(rows_of(db, tables[t], b[0]) + rows_of(db, tables[t], b[1]), 2);
                CHECK_EQ_INT(rows_of(db, tables[t], a_running) + rows_of(db, tables[t], b_running), 2);
        }
        store_close(s);
}

int main(int argc, char **argv) {
        const char *fixtures = argc > 1 ? argv[1] : "tests/fixtures";
        log_set_max_level(LOG_WARNING);
        if (!mkdtemp(tmpdir)) {
                perror("mkdtemp");
                return 1;
        }
        test_migrate_from_v1(fixtures);
        test_migrate_json_to_rows();
        test_migrate_head_packed();
        test_newer_schema_refused();
        test_unclean_stop();
        test_catch_up_totals();
        test_op_slices();
        test_baseline();
        test_sample_batches();
        test_damaged_head_row();
        test_prune_ended_runs();
        test_scratch_remove(tmpdir);
        TEST_DONE();
}

/* SPDX-License-Identifier: MIT */
/* The write-ahead log check (store/wal.c, store/walcheck.c): logs built
 * frame by frame, whole and damaged in each way that matters, and real
 * logs written by SQLite, damaged, whose replay by SQLite itself is the
 * ground truth: the rows it gives back and the transactions the check says
 * are lost add up to the transactions committed. */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "store/wal.h"
#include "store/walcheck.h"
#include "store-util.h"
#include "tap.h"
#include "util.h"

#define PAGE 512
#define FRAME (WAL_FRAME_HEADER_BYTES + PAGE)

static char tmpdir[] = "/tmp/mlmond-test-wal-XXXXXX";

static void put32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

/* A log being built: its bytes, and the checksum its next frame runs on
 * from. */
struct log {
        uint8_t buf[WAL_HEADER_BYTES + 64 * FRAME];
        size_t len;
        bool big_endian;
        uint32_t salt[2], sum[2];
};

static void log_init(struct log *l, bool big_endian, uint32_t salt1) {
        memset(l, 0, sizeof *l);
        l->big_endian = big_endian;
        l->salt[0] = salt1;
        l->salt[1] = 0x5eed1234;
        put32(l->buf, WAL_MAGIC | big_endian);
        put32(l->buf + 4, WAL_VERSION);
        put32(l->buf + 8, PAGE);
        put32(l->buf + 12, 7);
        put32(l->buf + 16, l->salt[0]);
        put32(l->buf + 20, l->salt[1]);
        wal_checksum(big_endian, l->buf, 24, l->sum);
        put32(l->buf + 24, l->sum[0]);
        put32(l->buf + 28, l->sum[1]);
        l->len = WAL_HEADER_BYTES;
}

/* Appends a frame of page pgno (its bytes a pattern of seed); commit: it
 * ends a transaction. salt1: the salt it carries (another generation's
 * when not the log's). */
static void log_frame(struct log *l, uint32_t pgno, bool commit, uint32_t salt1, uint8_t seed) {
        uint8_t *f = l->buf + l->len;
        put32(f, pgno);
        put32(f + 4, commit ? 10 : 0);
        put32(f + 8, salt1);
        put32(f + 12, l->salt[1]);
        for (size_t i = 0; i < PAGE; i++)
                f[WAL_FRAME_HEADER_BYTES + i] = (uint8_t)(seed * 31 + i * 7);
        wal_checksum(l->big_endian, f, 8, l->sum);
        wal_checksum(l->big_endian, f + WAL_FRAME_HEADER_BYTES, PAGE, l->sum);
        put32(f + 16, l->sum[0]);
        put32(f + 20, l->sum[1]);
        l->len += FRAME;
}

/* n frames of the log, a commit every `every` (and none at the end when
 * open_tail). */
static void log_frames(struct log *l, unsigned n, unsigned every, bool open_tail) {
        for (unsigned i = 1; i <= n; i++)
                log_frame(l, i % 5 + 1, i % every == 0 && !(open_tail && i > n - n % every), l->salt[0], (uint8_t)i);
}

static struct wal_scan scan(const struct log *l) {
        struct wal_scan w;
        wal_scan_buffer(l->buf, l->len, &w);
        return w;
}

static void test_built_logs(void) {
        struct log l;
        struct wal_scan w;

        /* whole, a commit every 3 frames, both checksum orders */
        for (int be = 0; be <= 1; be++) {
                log_init(&l, be, 100);
                log_frames(&l, 12, 3, false);
                w = scan(&l);
                CHECK(w.header_ok && w.big_endian == be);
                CHECK_EQ_INT(w.frames, 12);
                CHECK_EQ_INT(w.chain, 12);
                CHECK_EQ_INT(w.replayed, 12);
                CHECK_EQ_INT(w.broken_at, 0);
                CHECK(!wal_scan_damaged(&w, l.len));
        }

        /* an unfinished transaction at the end (a crash mid-tick): not
         * replayed, and no loss */
        log_init(&l, false, 100);
        log_frames(&l, 12, 3, false);
        log_frame(&l, 2, false, 100, 99);
        log_frame(&l, 3, false, 100, 98);
        w = scan(&l);
        CHECK_EQ_INT(w.chain, 14);
        CHECK_EQ_INT(w.replayed, 12);
        CHECK(!wal_scan_damaged(&w, l.len));

        /* an older generation's frames past the end (the log restarted with
         * salt-1 + 1 and wrote less than before), and a frame cut short */
        log_init(&l, false, 101);
        log_frames(&l, 6, 3, false);
        for (uint8_t i = 0; i < 6; i++)
                log_frame(&l, 4, i % 3 == 2, 100, i);
        w = scan(&l);
        CHECK_EQ_INT(w.frames, 12);
        CHECK_EQ_INT(w.replayed, 6);
        CHECK_EQ_INT(w.broken_at, 7);
        CHECK_EQ_INT(w.lost_commits, 0);
        CHECK(!wal_scan_damaged(&w, l.len));
        l.len -= FRAME / 2;
        w = scan(&l);
        CHECK_EQ_INT(w.frames, 11);
        CHECK(!wal_scan_damaged(&w, l.len));

        /* a page's bytes changed in the middle: it and the 13 frames after
         * it, 5 transactions, are lost */
        log_init(&l, false, 100);
        log_frames(&l, 24, 3, false);
        l.buf[WAL_HEADER_BYTES + 10 * FRAME + WAL_FRAME_HEADER_BYTES + 100] ^= 0x40;
        w = scan(&l);
        CHECK_EQ_INT(w.broken_at, 11);
        CHECK_EQ_INT(w.chain, 10);
        CHECK_EQ_INT(w.replayed, 9);
        CHECK_EQ_INT(w.lost, 14);
        CHECK_EQ_INT(w.lost_commits, 5);
        CHECK(wal_scan_damaged(&w, l.len));

        /* a frame's salts, or its page number, overwritten: the same */
        for (int what = 0; what < 2; what++) {
                log_init(&l, true, 100);
                log_frames(&l, 24, 3, false);
                memset(l.buf + WAL_HEADER_BYTES + 4 * FRAME + (what ? 0 : 8), 0, 4);
                w = scan(&l);
                CHECK_EQ_INT(w.broken_at, 5);
                CHECK_EQ_INT(w.replayed, 3);
                CHECK_EQ_INT(w.lost_commits, 7);
                CHECK(wal_scan_damaged(&w, l.len));
        }

        /* a transaction rolled back after its pages spilled into the log,
         * then a shorter one committed over its start: the leftover frames
         * break the chain but end no transaction */
        log_init(&l, false, 100);
        log_frames(&l, 6, 3, false);
        struct log spilled = l;
        for (uint8_t i = 0; i < 5; i++)
                log_frame(&spilled, 3, false, 100, (uint8_t)(50 + i));
        log_frame(&l, 2, true, 100, 60);
        memcpy(l.buf + l.len, spilled.buf + l.len, spilled.len - l.len);
        l.len = spilled.len;
        w = scan(&l);
        CHECK_EQ_INT(w.replayed, 7);
        CHECK_EQ_INT(w.broken_at, 8);
        CHECK_EQ_INT(w.lost, 4);
        CHECK_EQ_INT(w.lost_commits, 0);
        CHECK(!wal_scan_damaged(&w, l.len));

        /* the header overwritten, cut short, or of another version or page
         * size: SQLite ignores the log, whatever follows */
        for (int what = 0; what < 5; what++) {
                log_init(&l, false, 100);
                log_frames(&l, 6, 3, false);
                size_t len = l.len;
                if (what == 0)
                        memset(l.buf, 0xa5, WAL_HEADER_BYTES);
                else if (what == 1)
                        len = 20;
                else if (what == 2)
                        put32(l.buf + 4, WAL_VERSION + 1);
                else if (what == 3)
                        put32(l.buf + 8, 1000);
                else
                        l.buf[28] ^= 1; /* the header's checksum */
                wal_scan_buffer(l.buf, len, &w);
                CHECK(!w.header_ok);
                CHECK_EQ_INT(w.frames, 0);
                CHECK(wal_scan_damaged(&w, len));
        }

        /* empty, and a header alone */
        wal_scan_buffer(l.buf, 0, &w);
        CHECK(!wal_scan_damaged(&w, 0));
        log_init(&l, false, 100);
        w = scan(&l);
        CHECK(w.header_ok && w.frames == 0 && !wal_scan_damaged(&w, l.len));
}

/* ---- real logs, by SQLite ---------------------------------------------- */

static void write_file(const char *path, const uint8_t *p, size_t n) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fd >= 0 && write(fd, p, n) == (ssize_t)n);
        close(fd);
}

static uint8_t *read_file(const char *path, size_t *ret_len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        uint8_t *p = NULL;
        if (fd >= 0 && fstat(fd, &st) == 0 && (p = malloc((size_t)st.st_size + 1)) &&
            read(fd, p, (size_t)st.st_size) == st.st_size)
                *ret_len = (size_t)st.st_size;
        if (fd >= 0)
                close(fd);
        return p;
}

/* A database in dir/name whose log holds TXNS transactions of one row
 * each (after the one that creates the table), none checkpointed: the
 * database file and the log as bytes, taken while the writer is open. */
#define TXNS 40
static void real_log(const char *name, uint8_t **ret_db, size_t *ret_db_len, uint8_t **ret_wal, size_t *ret_wal_len) {
        char path[512], wal[530];
        snprintf(path, sizeof path, "%s/%s", tmpdir, name);
        snprintf(wal, sizeof wal, "%s-wal", path);
        sqlite3 *db = NULL;
        CHECK(sqlite3_open(path, &db) == SQLITE_OK);
        CHECK(sqlite3_exec(db,
                           "PRAGMA page_size=1024; PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; "
                           "CREATE TABLE t (n INTEGER PRIMARY KEY, pad BLOB)",
                           NULL, NULL, NULL) == SQLITE_OK);
        for (int i = 1; i <= TXNS; i++) {
                char sql[128];
                snprintf(sql, sizeof sql, "INSERT INTO t VALUES (%d, randomblob(700))", i);
                CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
        }
        *ret_db = read_file(path, ret_db_len);
        *ret_wal = read_file(wal, ret_wal_len);
        sqlite3_close(db);
}

/* The commit frames of a whole log that overlap [at, at + n). */
static unsigned commits_hit(const uint8_t *wal, size_t len, size_t at, size_t n) {
        struct wal_scan w;
        wal_scan_buffer(wal, len, &w);
        size_t frame = WAL_FRAME_HEADER_BYTES + w.page_size;
        unsigned hit = 0;
        for (size_t off = WAL_HEADER_BYTES; w.header_ok && len - off >= frame; off += frame) {
                const uint8_t *f = wal + off;
                bool commit = (f[4] | f[5] | f[6] | f[7]) != 0;
                hit += commit && off < at + n && at < off + frame;
        }
        return hit;
}

/* The rows SQLite gives back from db and wal (as files in dir/name). */
static int64_t replayed_rows(const char *name, const uint8_t *db, size_t db_len, const uint8_t *wal, size_t wal_len) {
        char path[512], walp[530];
        snprintf(path, sizeof path, "%s/%s", tmpdir, name);
        snprintf(walp, sizeof walp, "%s-wal", path);
        write_file(path, db, db_len);
        write_file(walp, wal, wal_len);
        sqlite3 *h = NULL;
        sqlite3_stmt *st = NULL;
        int64_t n = -1;
        if (sqlite3_open(path, &h) == SQLITE_OK &&
            sqlite3_prepare_v2(h, "SELECT count(*) FROM t", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
                n = sqlite3_column_int64(st, 0);
        else
                n = 0; /* not even the table: nothing of the log */
        sqlite3_finalize(st);
        sqlite3_close(h);
        return n;
}

static void test_real_logs(void) {
        uint8_t *db = NULL, *wal = NULL;
        size_t db_len = 0, wal_len = 0;
        real_log("real.db", &db, &db_len, &wal, &wal_len);
        if (!db || !wal) {
                TAP_FAIL("no database or log to work on");
                return;
        }
        struct wal_scan w;
        wal_scan_buffer(wal, wal_len, &w);
        CHECK(w.header_ok && !wal_scan_damaged(&w, wal_len));
        CHECK_EQ_INT(w.replayed, w.frames);
        CHECK_EQ_INT(replayed_rows("whole.db", db, db_len, wal, wal_len), TXNS);

        /* 4 KiB of noise in the middle, at a few places; and the header */
        for (int k = 1; k <= 4; k++) {
                uint8_t *bad = malloc(wal_len);
                memcpy(bad, wal, wal_len);
                size_t at = k < 4 ? wal_len * (size_t)k / 4 - 2048 : 0;
                size_t n = k < 4 ? 4096 : WAL_HEADER_BYTES;
                srand((unsigned)k);
                for (size_t i = 0; i < n; i++)
                        bad[at + i] = (uint8_t)rand();
                wal_scan_buffer(bad, wal_len, &w);
                CHECK(wal_scan_damaged(&w, wal_len));
                int64_t rows = replayed_rows("noisy.db", db, db_len, bad, wal_len);
                if (k < 4) {
                        /* what SQLite gave back and what the check says is
                         * lost: every transaction, but those whose commit
                         * frame the noise hit (lost, and counted only when
                         * the frame's header survived) */
                        int64_t hit = commits_hit(wal, wal_len, at, n);
                        int64_t seen = rows + (int64_t)w.lost_commits;
                        if (seen > TXNS || seen < TXNS - hit || w.lost_commits == 0)
                                TAP_FAIL("noise at %zu: SQLite gave back %lld rows, the check says %llu "
                                         "transactions are lost, of %d (%lld commit frames hit)",
                                         at, (long long)rows, (unsigned long long)w.lost_commits, TXNS, (long long)hit);
                } else
                        CHECK(!w.header_ok && rows == 0);
                free(bad);
        }
        free(db);
        free(wal);
}

/* walcheck_before_open(): no log, a whole one, a damaged one (copied,
 * byte for byte, beside the database). */
static void test_before_open(void) {
        char path[512], wal[530];
        snprintf(path, sizeof path, "%s/open.db", tmpdir);
        snprintf(wal, sizeof wal, "%s-wal", path);
        struct wal_damage d;
        CHECK_EQ_INT(walcheck_before_open(path, 1795000000000, &d), 0);
        struct log l;
        log_init(&l, false, 100);
        log_frames(&l, 12, 3, false);
        write_file(wal, l.buf, l.len);
        CHECK_EQ_INT(walcheck_before_open(path, 1795000000000, &d), 0);
        l.buf[WAL_HEADER_BYTES + 2 * FRAME + 30] ^= 1;
        write_file(wal, l.buf, l.len);
        log_set_max_level(LOG_CRIT); /* the error it says is the point */
        CHECK_EQ_INT(walcheck_before_open(path, 1795000000000, &d), 1);
        CHECK_EQ_INT(walcheck_before_open(path, 1795000000000, &d), 1); /* a second copy, another name */
        log_set_max_level(LOG_WARNING);
        CHECK(!d.header && d.transactions_lost == 4 && d.frames_lost == 10 && d.replayed == 0);
        CHECK(d.log_bytes == l.len);
        char want[600];
        snprintf(want, sizeof want, "%s.damaged-20261118T110640Z-2", wal);
        CHECK_STR(d.copy, want);
        size_t n = 0;
        uint8_t *copy = read_file(d.copy, &n);
        CHECK(copy && n == l.len && memcmp(copy, l.buf, n) == 0);
        free(copy);
        struct stat st;
        CHECK(stat(d.copy, &st) == 0 && (st.st_mode & 0777) == 0600);
}

/* Through the store: a damage found when the database opens is reported,
 * and still after a reopen (recorded, not copied again), until a day has
 * passed or it is acknowledged; a whole log after it reports nothing. */
static unsigned count_copies(const char *prefix) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "ls %s-wal.damaged-* 2>/dev/null | wc -l", prefix);
        FILE *f = popen(cmd, "r");
        unsigned n = 0;
        if (!f || fscanf(f, "%u", &n) != 1)
                n = 99;
        if (f)
                pclose(f);
        return n;
}

static struct store *reopen(const char *path) {
        char err[256];
        struct store *s = NULL;
        if (store_open(path, false, &s, err, sizeof err) < 0)
                TAP_FAIL("store_open: %s", err);
        return s;
}

static void test_recorded(void) {
        uint8_t *db = NULL, *wal = NULL;
        size_t db_len = 0, wal_len = 0;
        char path[512], walp[530];
        snprintf(path, sizeof path, "%s/rec.db", tmpdir);
        snprintf(walp, sizeof walp, "%s-wal", path);
        real_log("rec-src.db", &db, &db_len, &wal, &wal_len);
        if (!db || !wal) {
                TAP_FAIL("no database or log to work on");
                return;
        }
        for (int round = 0; round < 2; round++) {
                write_file(path, db, db_len);
                wal[wal_len / 2] ^= 0xff;
                write_file(walp, wal, wal_len);
                wal[wal_len / 2] ^= 0xff;
                log_set_max_level(LOG_CRIT);
                struct store *s = reopen(path);
                log_set_max_level(LOG_WARNING);
                if (!s)
                        return;
                const struct wal_damage *d = store_wal_damage(s, now_realtime_ms());
                CHECK(d && !d->header && d->transactions_lost > 0);
                int64_t ts = d ? d->ts_ms : 0;
                store_close(s);
                CHECK_EQ_INT(count_copies(path), round + 1);

                log_set_max_level(LOG_ERR); /* "still reported" is a warning */
                s = reopen(path);
                log_set_max_level(LOG_WARNING);
                if (!s)
                        return;
                d = store_wal_damage(s, now_realtime_ms());
                CHECK(d && d->ts_ms == ts && d->transactions_lost > 0 && strstr(d->copy, ".damaged-"));
                CHECK_EQ_INT(count_copies(path), round + 1);
                if (round == 0) /* a day on, it is no longer reported */
                        CHECK(!store_wal_damage(s, ts + WAL_DAMAGE_REPORT_MS));
                else /* acknowledged */
                        CHECK_EQ_INT(store_wal_damage_ack(s), 1);
                CHECK(!store_wal_damage(s, now_realtime_ms()));
                store_close(s);

                s = reopen(path); /* and forgotten for good */
                if (!s)
                        return;
                CHECK(!store_wal_damage(s, now_realtime_ms()));
                CHECK_EQ_INT(store_wal_damage_ack(s), 0);
                store_close(s);
        }
        free(db);
        free(wal);
}

int main(void) {
        log_set_max_level(LOG_WARNING);
        if (!mkdtemp(tmpdir)) {
                perror("mkdtemp");
                return 1;
        }
        test_built_logs();
        test_real_logs();
        test_before_open();
        test_recorded();
        test_scratch_remove(tmpdir);
        TEST_DONE();
}

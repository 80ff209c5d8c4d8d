/* SPDX-License-Identifier: MIT */
#include "store/walcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/param.h"
#include "store/wal.h"
#include "util.h"

#define META_KEY "wal_damage"

/* Scans the log on fd (size bytes) a frame at a time. */
static int scan_file(int fd, uint64_t size, struct wal_scan *w) {
        uint8_t hdr[WAL_HEADER_BYTES];
        ssize_t n = pread(fd, hdr, sizeof hdr, 0);
        if (n < 0)
                return -errno;
        if (wal_scan_header(w, hdr, (size_t)n) < 0)
                return 0;
        size_t frame = WAL_FRAME_HEADER_BYTES + w->page_size;
        _cleanup_free_ uint8_t *buf = malloc(frame);
        if (!buf)
                return -ENOMEM;
        for (uint64_t off = WAL_HEADER_BYTES; size - off >= frame; off += frame) {
                n = pread(fd, buf, frame, (off_t)off);
                if (n < 0)
                        return -errno;
                if ((size_t)n < frame)
                        break; /* it shrank meanwhile: nothing writes it but us */
                wal_scan_frame(w, buf);
        }
        return 0;
}

/* Copies fd to a new file at path (mode 0600: it holds the database's
 * pages), synced. */
static int copy_file(int fd, const char *path) {
        _cleanup_close_ int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        char buf[65536];
        off_t off = 0;
        for (;;) {
                ssize_t n = pread(fd, buf, sizeof buf, off);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                for (ssize_t done = 0; done < n;) {
                        ssize_t k = write(out, buf + done, (size_t)(n - done));
                        if (k < 0)
                                return -errno;
                        done += k;
                }
                off += n;
        }
        return fsync(out) < 0 ? -errno : 0;
}

/* db_path-wal.damaged-YYYYMMDDTHHMMSSZ, or with -2, -3... when taken. */
static int keep_copy(int fd, const char *wal_path, int64_t now_ms, char *ret, size_t len) {
        time_t t = (time_t)(now_ms / 1000);
        struct tm tm;
        char stamp[32] = "unknown-time";
        if (gmtime_r(&t, &tm))
                strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
        int r = -EEXIST;
        for (unsigned i = 1; i <= 100 && r == -EEXIST; i++) {
                int k = i == 1 ? snprintf(ret, len, "%s.damaged-%s", wal_path, stamp)
                               : snprintf(ret, len, "%s.damaged-%s-%u", wal_path, stamp, i);
                if (k < 0 || (size_t)k >= len)
                        return -ENAMETOOLONG;
                r = copy_file(fd, ret);
        }
        if (r < 0)
                ret[0] = 0;
        return r;
}

int walcheck_before_open(const char *db_path, int64_t now_ms, struct wal_damage *ret) {
        char wal_path[PATH_MAX];
        if (snprintf(wal_path, sizeof wal_path, "%s-wal", db_path) >= (int)sizeof wal_path)
                return -ENAMETOOLONG;
        _cleanup_close_ int fd = open(wal_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? 0 : log_warning_errno(errno, "database: cannot read %s: %m", wal_path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return log_warning_errno(errno, "database: cannot read %s: %m", wal_path);
        struct wal_scan w;
        int r = scan_file(fd, (uint64_t)st.st_size, &w);
        if (r < 0)
                return log_warning_errno(r, "database: cannot read %s: %m", wal_path);
        if (!wal_scan_damaged(&w, (uint64_t)st.st_size))
                return 0;

        *ret = (struct wal_damage){ .ts_ms = now_ms,
                                    .header = !w.header_ok,
                                    .log_bytes = (uint64_t)st.st_size,
                                    .replayed = w.replayed,
                                    .frames_lost = w.lost,
                                    .transactions_lost = w.lost_commits };
        r = keep_copy(fd, wal_path, now_ms, ret->copy, sizeof ret->copy);
        if (r < 0)
                log_error_errno(r, "database: cannot keep a copy of the damaged write-ahead log %s: %m", wal_path);
        if (ret->header)
                log_error("database: the write-ahead log %s (%" PRIu64 " bytes) has no valid header: SQLite "
                          "ignores all of it, and whatever it held that was not yet in the database is lost%s%s",
                          wal_path, ret->log_bytes, ret->copy[0] ? "; a copy is in " : "", ret->copy);
        else
                log_error("database: the write-ahead log %s is damaged at frame %" PRIu64 " of %" PRIu64
                          ": SQLite replays %" PRIu64 " frames, and %" PRIu64 " committed transactions (%" PRIu64
                          " frames) after the damage are lost%s%s",
                          wal_path, w.broken_at, w.frames, w.replayed, w.lost_commits, w.lost,
                          ret->copy[0] ? "; a copy is in " : "", ret->copy);
        return 1;
}

/* Runs sql with params to its end on db: 0 or -EIO. */
static int run(sqlite3 *db, const char *sql, const struct param *params) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
        if (rc == SQLITE_OK) {
                bind_params(st, params);
                rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? 0 : -EIO;
}

static void finalizep(sqlite3_stmt **st) {
        sqlite3_finalize(*st);
}

int walcheck_recorded(sqlite3 *db, bool found, struct wal_damage *d, int64_t now_ms) {
        if (found) {
                char v[PATH_MAX + 128];
                snprintf(v, sizeof v, "%" PRId64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %s", d->ts_ms,
                         d->header, d->log_bytes, d->replayed, d->frames_lost, d->transactions_lost, d->copy);
                if (run(db, "INSERT OR REPLACE INTO meta (key, value) VALUES ('" META_KEY "', ?)", PARAMS(p_text(v))) <
                    0)
                        log_warning("database: cannot record the damaged write-ahead log: it is reported until "
                                    "mlmond stops");
                return 1;
        }
        _cleanup_(finalizep) sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = '" META_KEY "'", -1, &st, NULL) != SQLITE_OK ||
            sqlite3_step(st) != SQLITE_ROW || !sqlite3_column_text(st, 0))
                return 0;
        const char *v = (const char *)sqlite3_column_text(st, 0);
        struct wal_damage r = {};
        int header = 0, at = 0;
        if (sscanf(v, "%" SCNd64 " %d %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %n", &r.ts_ms, &header,
                   &r.log_bytes, &r.replayed, &r.frames_lost, &r.transactions_lost, &at) < 6 ||
            at == 0 || now_ms - r.ts_ms >= WAL_DAMAGE_REPORT_MS || r.ts_ms > now_ms) {
                (void)walcheck_forget(db); /* a day old, or not ours */
                return 0;
        }
        r.header = header != 0;
        snprintf(r.copy, sizeof r.copy, "%s", v + at);
        *d = r;
        log_warning("database: the write-ahead log found damaged %" PRId64 " s ago is still reported (%s%s); "
                    "POST /v1/health/ack once it has been seen to",
                    (now_ms - r.ts_ms) / 1000, r.copy[0] ? "a copy is in " : "no copy", r.copy);
        return 1;
}

int walcheck_forget(sqlite3 *db) {
        static const struct param none[] = { { .type = PARAM_END } };
        return run(db, "DELETE FROM meta WHERE key = '" META_KEY "'", none);
}

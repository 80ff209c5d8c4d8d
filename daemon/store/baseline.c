/* SPDX-License-Identifier: MIT */
/* Each run's baseline: the counters of its processes and network namespaces
 * when it first saw them, and what those it has left used meanwhile. The
 * kernel's counters are absolute, so a restarted mlmond counts from these
 * what the processes used while it was down. */
#include <stdlib.h>

#include "store/param.h"
#include "store/store.h"
#include "util.h"

/* A process's counters as the columns cpu_ns, utime_ticks, stime_ticks,
 * read_bytes, write_bytes, rchar_bytes, wchar_bytes (I/O NULL: unknown). */
#define COUNTER_COLUMNS(p)                                                                                      \
        p "cpu_ns, " p "utime_ticks, " p "stime_ticks, " p "read_bytes, " p "write_bytes, " p "rchar_bytes, " p \
          "wchar_bytes"

static void counters_params(const struct proc_counters *c, struct param v[7]) {
        v[0] = p_u64(true, c->cpu_ns);
        v[1] = p_u64(true, c->utime_ticks);
        v[2] = p_u64(true, c->stime_ticks);
        v[3] = p_u64(c->has_io, c->read_bytes);
        v[4] = p_u64(c->has_io, c->write_bytes);
        v[5] = p_u64(c->has_io, c->rchar_bytes);
        v[6] = p_u64(c->has_io, c->wchar_bytes);
}

static void row_to_counters(sqlite3_stmt *st, int c, struct proc_counters *ret) {
        *ret = (struct proc_counters){};
        col_u64(st, c, &ret->cpu_ns);
        col_u64(st, c + 1, &ret->utime_ticks);
        col_u64(st, c + 2, &ret->stime_ticks);
        ret->has_io = col_u64(st, c + 3, &ret->read_bytes) && col_u64(st, c + 4, &ret->write_bytes) &&
                      col_u64(st, c + 5, &ret->rchar_bytes) && col_u64(st, c + 6, &ret->wchar_bytes);
}

static int insert_netns(struct store *s, int64_t run_id, const struct run_baseline *b) {
        for (size_t i = 0; i < b->n_netns; i++) {
                const struct netns_baseline *n = &b->netns[i];
                int r = store_exec(s,
                                   "INSERT OR REPLACE INTO run_netns (run_id, inode, rx_bytes, tx_bytes) "
                                   "VALUES (?, ?, ?, ?)",
                                   PARAMS(p_int(run_id), p_u64(true, n->inode), p_u64(true, n->rx_bytes),
                                          p_u64(true, n->tx_bytes)));
                if (r < 0)
                        return r;
        }
        return 0;
}

int store_insert_baseline(struct store *s, int64_t run_id, const struct run_baseline *b) {
        for (size_t i = 0; i < b->n_members; i++) {
                const struct baseline_member *m = &b->members[i];
                struct param c[7];
                counters_params(&m->c, c);
                int r = store_exec(
                        s,
                        "INSERT OR REPLACE INTO run_baseline (run_id, pid, start_time_ticks, " COUNTER_COLUMNS(
                                "") ") VALUES (?,?,?,?,?,?,?,?,?,?)",
                        PARAMS(p_int(run_id), p_int(m->pid), p_u64(true, m->start_ticks), c[0], c[1], c[2], c[3], c[4],
                               c[5], c[6]));
                if (r < 0)
                        return r;
        }
        return insert_netns(s, run_id, b);
}

int store_update_run_left(struct store *s, int64_t run_id, const struct proc_counters *left) {
        struct param c[7];
        counters_params(left, c);
        return store_exec(s,
                          "UPDATE runs SET left_cpu_ns=?, left_utime_ticks=?, left_stime_ticks=?, left_read_bytes=?, "
                          "left_write_bytes=?, left_rchar_bytes=?, left_wchar_bytes=? WHERE id=?",
                          PARAMS(c[0], c[1], c[2], c[3], c[4], c[5], c[6], p_int(run_id)));
}

int store_update_run_netns(struct store *s, int64_t run_id, const struct run_baseline *b) {
        int r = store_exec(s, "DELETE FROM run_netns WHERE run_id=?", PARAMS(p_int(run_id)));
        if (r == 0)
                r = insert_netns(s, run_id, b);
        if (r == 0)
                r = store_exec(s, "UPDATE runs SET left_netns_rx_bytes=?, left_netns_tx_bytes=? WHERE id=?",
                               PARAMS(p_u64(true, b->left_rx_bytes), p_u64(true, b->left_tx_bytes), p_int(run_id)));
        return r;
}

/* The rows of sql (run_id bound) through row(), one by one: how many. */
static int load_rows(sqlite3 *db, const char *sql, int64_t run_id, int (*row)(sqlite3_stmt *, struct run_baseline *),
                     struct run_baseline *b) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        bind_params(st, PARAMS(p_int(run_id)));
        int rc, r = 0, n = 0;
        while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = row(st, b);
                n++;
        }
        return r < 0 ? r : rc == SQLITE_DONE ? n : -EIO;
}

static int member_row(sqlite3_stmt *st, struct run_baseline *b) {
        if (!GREEDY_REALLOC(b->members, b->n_members + 1))
                return -ENOMEM;
        struct baseline_member *m = &b->members[b->n_members++];
        m->pid = sqlite3_column_int(st, 0);
        col_u64(st, 1, &m->start_ticks);
        row_to_counters(st, 2, &m->c);
        return 0;
}

static int netns_row(sqlite3_stmt *st, struct run_baseline *b) {
        if (!GREEDY_REALLOC(b->netns, b->n_netns + 1))
                return -ENOMEM;
        struct netns_baseline *n = &b->netns[b->n_netns++];
        col_u64(st, 0, &n->inode);
        col_u64(st, 1, &n->rx_bytes);
        col_u64(st, 2, &n->tx_bytes);
        return 0;
}

static int left_row(sqlite3_stmt *st, struct run_baseline *b) {
        row_to_counters(st, 0, &b->left);
        col_u64(st, 7, &b->left_rx_bytes);
        col_u64(st, 8, &b->left_tx_bytes);
        return 0;
}

int store_load_baseline(struct store *s, int64_t run_id, struct run_baseline *ret) {
        struct run_baseline b = {};
        sqlite3 *db = store_writer(s);
        int r = load_rows(db,
                          "SELECT " COUNTER_COLUMNS("left_") ", left_netns_rx_bytes, left_netns_tx_bytes "
                                                             "FROM runs WHERE id=?",
                          run_id, left_row, &b);
        if (r == 0)
                r = -ENOENT;
        if (r > 0)
                r = load_rows(db,
                              "SELECT pid, start_time_ticks, " COUNTER_COLUMNS("") " FROM run_baseline WHERE run_id=?",
                              run_id, member_row, &b);
        if (r >= 0)
                r = load_rows(db, "SELECT inode, rx_bytes, tx_bytes FROM run_netns WHERE run_id=?", run_id, netns_row,
                              &b);
        if (r < 0) {
                run_baseline_done(&b);
                return r;
        }
        *ret = b;
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* A damaged write-ahead log, found before SQLite opens the database (it
 * would replay what it can, drop the rest without a word and then reset
 * the log): a copy kept beside the database, an error logged, and a record
 * in the database that /v1/health reports until it is acknowledged or a
 * day has passed (walcheck.c; store.c calls it). */
#pragma once

#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

/* How long a damage is reported when no one acknowledges it. */
#define WAL_DAMAGE_REPORT_MS (24LL * 3600 * 1000)

struct wal_damage {
        int64_t ts_ms;                           /* when it was found */
        bool header;                             /* the header was not one: SQLite ignored the whole log */
        uint64_t log_bytes;                      /* the log's size */
        uint64_t replayed;                       /* frames SQLite replayed (0 with header) */
        uint64_t frames_lost, transactions_lost; /* past the break (unknown with header: 0) */
        char copy[PATH_MAX];                     /* the copy ("" if it could not be made) */
};

/* Before SQLite opens db_path: reads db_path-wal. A damaged one is copied
 * to db_path-wal.damaged-YYYYMMDDTHHMMSSZ (UTC, now_ms), said at err, and
 * described in *ret: 1. 0: no log, or one SQLite replays whole. < 0: the
 * log could not be read (said at warning). */
int walcheck_before_open(const char *db_path, int64_t now_ms, struct wal_damage *ret);
/* After it opened, on its writer db: with found, records *d in the
 * database (a damage found later replaces it); without, reads the recorded
 * one into *d. 1 if one is to be reported (recorded less than
 * WAL_DAMAGE_REPORT_MS before now_ms; an older one is forgotten), 0 if
 * none. */
int walcheck_recorded(sqlite3 *db, bool found, struct wal_damage *d, int64_t now_ms);
/* Forgets the recorded damage (acknowledged): 0 or -EIO. */
int walcheck_forget(sqlite3 *db);

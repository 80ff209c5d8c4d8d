/* SPDX-License-Identifier: MIT */
/* SQLite's write-ahead log (the database's "-wal" file), read before SQLite
 * opens the database: how much of it SQLite will replay, and whether
 * committed transactions lie beyond that, which it would drop without a
 * word and then overwrite. A pure parser over the file's bytes (wal.c);
 * walcheck.c reads the file, keeps a copy of a damaged log and reports it.
 *
 * The format, all integers big-endian:
 *
 *   header, 32 bytes: magic (0x377f0682, or 0x377f0683 when the checksums
 *   below are computed over big-endian words, else little-endian), format
 *   version (3007000), page size (a power of two, 512..65536), checkpoint
 *   sequence, salt-1, salt-2, checksum-1, checksum-2 (of the first 24
 *   bytes);
 *
 *   then frames of 24 + page-size bytes, each a header: page number (never
 *   0), database size in pages after a commit (0 in a frame that ends no
 *   transaction), salt-1, salt-2 (the log's, else the frame is left over
 *   from an older generation of the log), checksum-1, checksum-2; and the
 *   page.
 *
 * A checksum is two 32-bit sums run over 32-bit words, eight bytes at a
 * time: s0 += w0 + s1; s1 += w1 + s0. A frame's run over the first 8 bytes
 * of its header and its page, starting from the previous frame's (the
 * header's for the first): the frames form a chain. When SQLite opens the
 * database it replays the chain up to its last commit frame and stops at
 * the first frame that is not right (salts, page number, checksum). After
 * a crash the frames past the last commit are an unfinished transaction,
 * and the frames past the log's own end are an older generation's, with
 * other salts: neither is a loss. A frame that is not right followed by
 * frames of this generation that end transactions is: each checks out
 * against the checksum stored in its predecessor (or its successor against
 * its own, when its page was hit), so they are the log's, and SQLite will
 * not replay them. Frames left by a transaction that was rolled back after
 * they spilled into the log may follow the end too, with the log's salts,
 * but they end no transaction. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WAL_HEADER_BYTES 32
#define WAL_FRAME_HEADER_BYTES 24
#define WAL_MAGIC 0x377f0682u
#define WAL_VERSION 3007000u

struct wal_scan {
        /* the header */
        bool header_ok; /* magic, version, page size and checksum right */
        bool big_endian;
        uint32_t page_size;
        uint32_t salt[2];
        /* the frames, counted as they are given */
        uint64_t frames;       /* whole frames seen */
        uint64_t chain;        /* of the unbroken chain from the first */
        uint64_t replayed;     /* what SQLite replays: the chain up to its last commit frame */
        uint64_t broken_at;    /* the first frame (from 1) that is not right; 0: none */
        uint64_t lost;         /* frames of this log past the break (right salts and checksum) */
        uint64_t lost_commits; /* transactions among them: commit frames (one whose commit frame the damage
                                * itself hit is lost too, uncounted: these are at least lost) */
        /* the running checksum of the chain, and the one stored in the
         * previous frame; past the break, whether that frame had our salts
         * but did not check out (it counts if this one does) */
        uint32_t sum[2], prev[2];
        bool pending, pending_commit;
};

/* Reads the header (len bytes at hdr; fewer than WAL_HEADER_BYTES: not a
 * header). 0, or -EBADMSG when it is not a valid header: w->header_ok is
 * false and frames are not to be given. */
int wal_scan_header(struct wal_scan *w, const uint8_t *hdr, size_t len);
/* The next frame: WAL_FRAME_HEADER_BYTES + w->page_size bytes. */
void wal_scan_frame(struct wal_scan *w, const uint8_t *frame);
/* Whether a log of file_bytes so scanned held what SQLite will not replay:
 * a header that is not one over a non-empty file (SQLite ignores all of it),
 * or transactions past a break in the chain. */
bool wal_scan_damaged(const struct wal_scan *w, uint64_t file_bytes);
/* The header and every whole frame of buf. */
void wal_scan_buffer(const uint8_t *buf, size_t len, struct wal_scan *ret);
/* The checksum of n bytes (a multiple of 8) from sum, over words of the
 * given order: what SQLite stores. */
void wal_checksum(bool big_endian, const uint8_t *p, size_t n, uint32_t sum[2]);

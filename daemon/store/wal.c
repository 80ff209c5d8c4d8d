/* SPDX-License-Identifier: MIT */
/* The write-ahead log's header and frames, checked as SQLite checks them
 * when it opens the database (the format is in wal.h). */
#include "store/wal.h"

#include <errno.h>
#include <string.h>

static uint32_t be32(const uint8_t *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t le32(const uint8_t *p) {
        return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

void wal_checksum(bool big_endian, const uint8_t *p, size_t n, uint32_t sum[2]) {
        uint32_t s0 = sum[0], s1 = sum[1];
        for (size_t i = 0; i + 8 <= n; i += 8) {
                uint32_t w0 = big_endian ? be32(p + i) : le32(p + i);
                uint32_t w1 = big_endian ? be32(p + i + 4) : le32(p + i + 4);
                s0 += w0 + s1;
                s1 += w1 + s0;
        }
        sum[0] = s0;
        sum[1] = s1;
}

int wal_scan_header(struct wal_scan *w, const uint8_t *hdr, size_t len) {
        *w = (struct wal_scan){};
        if (len < WAL_HEADER_BYTES)
                return -EBADMSG;
        uint32_t magic = be32(hdr), page_size = be32(hdr + 8);
        if ((magic & ~1u) != WAL_MAGIC || be32(hdr + 4) != WAL_VERSION || page_size < 512 || page_size > 65536 ||
            (page_size & (page_size - 1)) != 0)
                return -EBADMSG;
        w->big_endian = magic & 1;
        uint32_t sum[2] = { 0, 0 };
        wal_checksum(w->big_endian, hdr, 24, sum);
        if (sum[0] != be32(hdr + 24) || sum[1] != be32(hdr + 28))
                return -EBADMSG;
        w->header_ok = true;
        w->page_size = page_size;
        w->salt[0] = be32(hdr + 16);
        w->salt[1] = be32(hdr + 20);
        memcpy(w->sum, sum, sizeof sum);
        memcpy(w->prev, sum, sizeof sum);
        return 0;
}

/* Whether the frame carries the log's salts and a page number. */
static bool frame_ours(const struct wal_scan *w, const uint8_t *f) {
        return be32(f) != 0 && be32(f + 8) == w->salt[0] && be32(f + 12) == w->salt[1];
}

/* Whether the frame is right when its checksum runs on from sum (which
 * then holds the frame's). */
static bool frame_right(const struct wal_scan *w, const uint8_t *f, uint32_t sum[2]) {
        if (!frame_ours(w, f))
                return false;
        wal_checksum(w->big_endian, f, 8, sum);
        wal_checksum(w->big_endian, f + WAL_FRAME_HEADER_BYTES, w->page_size, sum);
        return sum[0] == be32(f + 16) && sum[1] == be32(f + 20);
}

void wal_scan_frame(struct wal_scan *w, const uint8_t *f) {
        if (!w->header_ok)
                return;
        w->frames++;
        bool commit = be32(f + 4) != 0;
        if (!w->broken_at) {
                uint32_t sum[2] = { w->sum[0], w->sum[1] };
                if (frame_right(w, f, sum)) {
                        memcpy(w->sum, sum, sizeof sum);
                        w->chain = w->frames;
                        if (commit)
                                w->replayed = w->frames;
                } else {
                        w->broken_at = w->frames;
                        w->pending = frame_ours(w, f);
                        w->pending_commit = w->pending && commit;
                }
        } else {
                /* Past the break: a frame of this log checks out against
                 * what its predecessor stored, whatever came before; and
                 * then its predecessor's stored checksum was the right one,
                 * so that frame, with our salts but changed bytes (its page
                 * hit by the damage), was the log's too. */
                uint32_t sum[2] = { w->prev[0], w->prev[1] };
                bool right = frame_right(w, f, sum);
                if (right) {
                        w->lost += 1 + w->pending;
                        w->lost_commits += commit + w->pending_commit;
                }
                w->pending = !right && frame_ours(w, f);
                w->pending_commit = w->pending && commit;
        }
        w->prev[0] = be32(f + 16);
        w->prev[1] = be32(f + 20);
}

bool wal_scan_damaged(const struct wal_scan *w, uint64_t file_bytes) {
        if (!w->header_ok)
                return file_bytes > 0;
        return w->lost_commits > 0;
}

void wal_scan_buffer(const uint8_t *buf, size_t len, struct wal_scan *ret) {
        if (wal_scan_header(ret, buf, len) < 0)
                return;
        size_t frame = WAL_FRAME_HEADER_BYTES + ret->page_size;
        for (size_t off = WAL_HEADER_BYTES; len - off >= frame; off += frame)
                wal_scan_frame(ret, buf + off);
}

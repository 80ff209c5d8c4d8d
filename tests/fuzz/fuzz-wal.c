/* SPDX-License-Identifier: MIT */
/* libFuzzer target for daemon/store/wal.c, the write-ahead log check: any
 * bytes as a log. Its counts must hold together (the replayed frames are
 * the unbroken chain's, which is no longer than the frames; nothing is lost
 * without a break), a whole frame is never missed nor one past the end
 * read, the frame-by-frame API agrees with the buffer one, and a damaged
 * verdict has its reason.
 *
 *   tools/fuzz.sh 60 wal */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/wal.h"

#include "fuzz/fuzz-assert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* an exact-size copy: ASan sees any read past the end */
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        struct wal_scan w;
        wal_scan_buffer(buf, size, &w);
        bool damaged = wal_scan_damaged(&w, size);
        if (!w.header_ok) {
                fuzz_assert(w.frames == 0 && w.replayed == 0 && w.lost == 0);
                fuzz_assert(damaged == (size > 0));
        } else {
                size_t frame = WAL_FRAME_HEADER_BYTES + w.page_size;
                fuzz_assert(w.page_size >= 512 && w.page_size <= 65536 && (w.page_size & (w.page_size - 1)) == 0);
                fuzz_assert(w.frames == (size - WAL_HEADER_BYTES) / frame);
                fuzz_assert(w.replayed <= w.chain && w.chain <= w.frames);
                fuzz_assert(w.broken_at == 0 ? w.chain == w.frames && w.lost == 0 : w.broken_at == w.chain + 1);
                fuzz_assert(w.lost_commits <= w.lost && w.lost <= w.frames - w.chain);
                fuzz_assert(damaged == (w.lost_commits > 0));

                struct wal_scan v;
                fuzz_assert(wal_scan_header(&v, buf, size) == 0);
                for (size_t off = WAL_HEADER_BYTES; size - off >= frame; off += frame)
                        wal_scan_frame(&v, buf + off);
                fuzz_assert(v.frames == w.frames && v.chain == w.chain && v.replayed == w.replayed &&
                            v.broken_at == w.broken_at && v.lost == w.lost && v.lost_commits == w.lost_commits);
        }
        free(buf);
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* libFuzzer target for daemon/analyze/leak.c. The input is a series and a few
 * parameters; leak_evaluate() must not crash, must answer -EINVAL exactly for
 * invalid input, and its verdict must hold together:
 *  - byte 0: flags (bit 0: raw mode, the rest as little-endian doubles
 *    t, bytes, t, bytes...; else compact mode), byte 1: parameter tweaks;
 *  - compact mode: 3 bytes a point: time step (0..255 x 50 ms), value
 *    (16-bit, x 1 MiB), so that series look like memory;
 *  - every prefix of up to 64 points, and the whole series, are judged.
 * test-leak runs this target on generated inputs in every build:
 *
 *   tools/fuzz.sh 60 leak */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/leak.h"

#include "fuzz/fuzz-assert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_POINTS 4096

static bool series_valid(const struct leak_point *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (!isfinite(s[i].t_s) || !isfinite(s[i].bytes))
                        return false;
                if (i > 0 && s[i].t_s < s[i - 1].t_s)
                        return false;
        }
        return true;
}

static void check_one(const struct leak_point *s, size_t n, double grace_from, const struct leak_params *p) {
        struct leak_verdict v;
        memset(&v, 0xa5, sizeof v);
        int r = leak_evaluate(s, n, grace_from, p, &v);
        fuzz_assert(memchr(v.reason, 0, sizeof v.reason) != NULL);
        fuzz_assert(v.reason[0] != 0);
        /* the look-back (longest window + grace) is all that is read */
        bool valid = series_valid(s, n);
        if (valid) {
                fuzz_assert(r == 0);
        } else {
                /* invalid points may lie before the look-back: then 0 */
                fuzz_assert(r == 0 || r == -EINVAL);
        }
        if (r < 0) {
                fuzz_assert(!v.evaluated && !v.suspected);
                return;
        }
        fuzz_assert(!v.suspected || v.evaluated);
        if (!v.evaluated) {
                fuzz_assert(v.slope_bytes_per_s == 0 && v.growth_bytes == 0 && v.window_s == 0 && v.confidence == 0);
                return;
        }
        double t_end = s[n - 1].t_s;
        fuzz_assert(isfinite(v.slope_bytes_per_s) && isfinite(v.growth_bytes));
        fuzz_assert(v.confidence >= 0 && v.confidence <= 1);
        fuzz_assert(v.window_s >= 0);
        fuzz_assert(v.since_t_s <= t_end);
        fuzz_assert(fabs(v.since_t_s + v.window_s - t_end) <= 1e-9 * (1 + fabs(t_end)));
        if (v.suspected) {
                fuzz_assert(v.slope_bytes_per_s > 0);
                fuzz_assert(v.growth_bytes >= p->min_growth_bytes);
                fuzz_assert(v.window_s > 0);
                fuzz_assert(strncmp(v.reason, "memory grew ", 12) == 0);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct leak_point pts[FUZZ_MAX_POINTS];
        if (size < 2)
                return 0;
        uint8_t flags = data[0], tweak = data[1];
        data += 2;
        size -= 2;

        struct leak_params p;
        leak_params_default(&p);
        if (tweak & 1)
                p.grace_s = 0;
        if (tweak & 2) { /* short windows: the fuzzer reaches them with few points */
                p.n_windows = 3;
                p.windows_s[0] = 2;
                p.windows_s[1] = 8;
                p.windows_s[2] = 30;
        }
        if (tweak & 4)
                p.min_growth_bytes = 0;
        if (tweak & 8)
                p.min_growth_pct = 0;
        if (tweak & 16)
                p.min_floors = 3;
        if (tweak & 32)
                p.min_z = 0;
        if (tweak & 64)
                p.drop_min_bytes = 0;
        double grace_from = (tweak & 128) ? -INFINITY : 0;

        size_t n = 0;
        if (flags & 1) {
                while (size >= 16 && n < FUZZ_MAX_POINTS) {
                        memcpy(&pts[n].t_s, data, 8);
                        memcpy(&pts[n].bytes, data + 8, 8);
                        data += 16;
                        size -= 16;
                        n++;
                }
        } else {
                double t = 0;
                while (size >= 3 && n < FUZZ_MAX_POINTS) {
                        t += data[0] * 0.05;
                        pts[n].t_s = t;
                        pts[n].bytes = (double)(data[1] | data[2] << 8) * 1048576.0;
                        data += 3;
                        size -= 3;
                        n++;
                }
        }
        for (size_t k = 0; k <= n && k <= 64; k++)
                check_one(pts, k, grace_from, &p);
        if (n > 64)
                check_one(pts, n, grace_from, &p);
        return 0;
}

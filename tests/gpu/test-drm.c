/* SPDX-License-Identifier: MIT */
/* daemon/collect/accel/drm.c: DRM/accel clients from fdinfo.
 *  - the parser over tables: units (bare, KiB, MiB, kB; ns; Hz, KHz, MHz),
 *    blanks after the colon (amdgpu's space + TAB), CRLF, missing client
 *    id, duplicate keys, bounds, very long lines, no final newline, binary
 *    garbage, generic-only files;
 *  - drm_engine_util() over a table: the three methods, capacity, first
 *    reading, counters going back, a GPU clock that does not move, clamp;
 *  - the fixture trees tests/fixtures/gpu/{t0,t1,t2,i915-t0,i915-t1}
 *    through drm_collect(), with monotonic time t0 = 1000 s, t1 = 1001 s,
 *    t2 = 1002 s: every expected number exactly;
 *  - the client table (owner rule, expiry, bounds);
 *  - the fuzz target (tests/fuzz/fuzz-drm.c) on the fixture files cut and
 *    spliced.
 *
 *   test-drm FIXTURES_DIR      (tests/fixtures/gpu) */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collect/accel/drm.h"
#include "tap.h"
#include "util.h"

#include "fuzz/fuzz-drm.c"

#define NS_PER_SEC 1000000000ULL
/* monotonic sweep times */
#define T0 (1000 * USEC_PER_SEC)
#define T1 (1001 * USEC_PER_SEC)
#define T2 (1002 * USEC_PER_SEC)
#define KIB 1024ULL
#define MIB (1024ULL * KIB)
#define GIB (1024ULL * MIB)

#define AMD "0000:03:00.0"
#define XE "0000:00:02.0"

/* Exact: every expected percentage is exact in binary floating point
 * (100 x 5e8 / 1e9 = 50 is computed without rounding). */
#define CHECK_PCT(a, b)                                                      \
        do {                                                                 \
                double _a = (a), _b = (b);                                   \
                if (_a != _b)                                                \
                        TAP_FAIL("%s == %.17g, expected %.17g", #a, _a, _b); \
        } while (0)

static int fixtures = -1;

/* ---- parser tables ------------------------------------------------------------ */

static int parse_str(const char *s, struct drm_fdinfo *ret) {
        return drm_fdinfo_parse(s, strlen(s), ret);
}

static const struct drm_engine_stat *engine(const struct drm_fdinfo *fi, const char *name) {
        for (size_t i = 0; i < fi->n_engines; i++)
                if (streq(fi->engines[i].name, name))
                        return &fi->engines[i];
        return NULL;
}

static const struct drm_region_stat *region(const struct drm_fdinfo *fi, const char *name) {
        for (size_t i = 0; i < fi->n_regions; i++)
                if (streq(fi->regions[i].name, name))
                        return &fi->regions[i];
        return NULL;
}

enum what { NONE, E_NS, E_CYCLES, E_TOTAL_CYCLES, E_MAXFREQ, E_CAPACITY, R_RESIDENT, R_MEMORY, R_TOTAL };

/* Where each what is kept: in an engine or a region, its has_ flag (-1:
 * always there) and its value. */
#define ENGINE(has, value) \
        { false, offsetof(struct drm_engine_stat, has), offsetof(struct drm_engine_stat, value) }
#define REGION(has, value) \
        { true, offsetof(struct drm_region_stat, has), offsetof(struct drm_region_stat, value) }
static const struct {
        bool region;
        int has;
        size_t value;
} fields[] = {
        [E_NS] = ENGINE(has_ns, ns),
        [E_CYCLES] = ENGINE(has_cycles, cycles),
        [E_TOTAL_CYCLES] = ENGINE(has_total_cycles, total_cycles),
        [E_MAXFREQ] = ENGINE(has_maxfreq, maxfreq_hz),
        [E_CAPACITY] = { false, -1, offsetof(struct drm_engine_stat, capacity) },
        [R_RESIDENT] = REGION(has_resident, resident_bytes),
        [R_MEMORY] = REGION(has_memory, memory_bytes),
        [R_TOTAL] = REGION(has_total, total_bytes),
};

/* The value of what/name, or false when it is not there. */
static bool field(const struct drm_fdinfo *fi, enum what w, const char *name, uint64_t *ret) {
        if (w == NONE)
                return false;
        const char *p = fields[w].region ? (const char *)region(fi, name) : (const char *)engine(fi, name);
        if (!p || (fields[w].has >= 0 && !*(const bool *)(p + fields[w].has)))
                return false;
        memcpy(ret, p + fields[w].value, sizeof *ret);
        return true;
}

/* One line after "drm-driver:\tx\n": the field (what, name) present with
 * want, or absent and the key counted in n_skipped. */
static void check_value(const char *line, enum what what, const char *name, bool want_present, uint64_t want) {
        char text[256];
        struct drm_fdinfo fi;
        uint64_t v = 0;
        snprintf(text, sizeof text, "drm-driver:\tx\n%s\n", line);
        int r = parse_str(text, &fi);
        CHECK_EQ_INT(r, 0);
        if (r < 0)
                return;
        bool present = field(&fi, what, name, &v);
        if (present != want_present || v != want)
                TAP_FAIL("\"%s\": present %d value %llu, want %d %llu", line, present, (unsigned long long)v,
                         want_present, (unsigned long long)want);
        CHECK_EQ_INT(fi.n_skipped, want_present ? 0 : 1);
}

static void test_values(void) {
        /* each line after "drm-driver:\tx\n"; present = false: the key is
         * skipped (counted in n_skipped) and the field absent */
        static const struct {
                const char *line;
                enum what what;
                const char *name;
                bool present;
                uint64_t want;
        } rows[] = {
                { "drm-resident-vram:\t0", R_RESIDENT, "vram", true, 0 },
                { "drm-resident-vram:\t4095", R_RESIDENT, "vram", true, 4095 },
                { "drm-resident-vram:\t8 KiB", R_RESIDENT, "vram", true, 8 * KIB },
                { "drm-resident-vram:\t4096 MiB", R_RESIDENT, "vram", true, 4 * GIB },
                { "drm-resident-vram:\t4 kB", R_RESIDENT, "vram", true, 4096 },
                { "drm-memory-vram:\t4194304 KiB", R_MEMORY, "vram", true, 4 * GIB },
                { "drm-total-gtt:\t118 MiB", R_TOTAL, "gtt", true, 123731968 },
                { "drm-resident-vram:\t4096   MiB", R_RESIDENT, "vram", true, 4 * GIB },
                { "drm-resident-vram:\t4096MiB", R_RESIDENT, "vram", true, 4 * GIB },
                { "drm-memory-gtt: \t120832 KiB", R_MEMORY, "gtt", true, 123731968 }, /* amdgpu's space + TAB */
                { "drm-memory-gtt:\t \t 120832 KiB", R_MEMORY, "gtt", true, 123731968 },
                { "drm-memory-gtt:120832 KiB", R_MEMORY, "gtt", true, 123731968 },
                { "drm-resident-vram:\t4096 MiB\r", R_RESIDENT, "vram", true, 4 * GIB },
                { "drm-resident-vram:\t4096 MiB \t ", R_RESIDENT, "vram", true, 4 * GIB },
                { "drm-resident-vram:\t18446744073709551615", R_RESIDENT, "vram", true, UINT64_MAX },
                { "drm-engine-gfx:\t1000000000 ns", E_NS, "gfx", true, 1000000000 },
                { "drm-engine-gfx:\t1000000000", E_NS, "gfx", true, 1000000000 },
                { "drm-engine-gfx:\t18446744073709551615 ns", E_NS, "gfx", true, UINT64_MAX },
                { "drm-engine-gfx:\t100 ms", E_NS, "gfx", false, 0 },
                { "drm-engine-gfx:\t100 MiB", E_NS, "gfx", false, 0 },
                { "drm-engine-video-enhance:\t7 ns", E_NS, "video-enhance", true, 7 },
                { "drm-cycles-rcs:\t28257900", E_CYCLES, "rcs", true, 28257900 },
                { "drm-cycles-rcs:\t28257900 ns", E_CYCLES, "rcs", false, 0 },
                { "drm-total-cycles-rcs:\t7655183225", E_TOTAL_CYCLES, "rcs", true, 7655183225 },
                { "drm-maxfreq-gpu:\t1000000000 Hz", E_MAXFREQ, "gpu", true, 1000000000 },
                { "drm-maxfreq-gpu:\t800000 KHz", E_MAXFREQ, "gpu", true, 800000000 },
                { "drm-maxfreq-gpu:\t800000 kHz", E_MAXFREQ, "gpu", true, 800000000 },
                { "drm-maxfreq-gpu:\t1950 MHz", E_MAXFREQ, "gpu", true, 1950000000 },
                { "drm-maxfreq-gpu:\t5", E_MAXFREQ, "gpu", true, 5 },
                { "drm-maxfreq-gpu:\t5 GHz", E_MAXFREQ, "gpu", false, 0 },
                { "drm-engine-capacity-vcs:\t2", E_CAPACITY, "vcs", true, 2 },
                { "drm-engine-capacity-vcs:\t0", E_CAPACITY, "vcs", false, 0 }, /* not allowed */
                { "drm-engine-gfx:\t5 ns", E_CAPACITY, "gfx", true, 1 },        /* the default */
        };
        /* values refused for a memory key: no kernel prints GiB, nor these */
        static const char *const refused_vram[] = {
                "4 GiB",
                "4 mib",
                "4 ns",
                "",
                "-1",
                "0x10",
                "1 2",
                "18446744073709551615 KiB",
                "18446744073709551616",
                "99999999999999999999999999",
        };
        for (size_t i = 0; i < ELEMENTSOF(rows); i++)
                check_value(rows[i].line, rows[i].what, rows[i].name, rows[i].present, rows[i].want);
        for (size_t i = 0; i < ELEMENTSOF(refused_vram); i++) {
                char line[128];
                snprintf(line, sizeof line, "drm-resident-vram:\t%s", refused_vram[i]);
                check_value(line, R_RESIDENT, "vram", false, 0);
        }
}

static void test_structure(void) {
        struct drm_fdinfo fi;

        /* the generic lines alone (any file; intel_vpu's accel fds) */
        CHECK_EQ_INT(parse_str("pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1277\n", &fi), -ENOENT);
        CHECK_EQ_INT(parse_str("", &fi), -ENOENT);
        CHECK_EQ_INT(drm_fdinfo_parse(NULL, 0, &fi), -ENOENT);
        CHECK_EQ_INT(parse_str("\n\n  \n", &fi), -ENOENT);
        /* eventfd's, inotify's: colons in the value, no drm-driver */
        CHECK_EQ_INT(parse_str("pos:\t0\ninotify wd:1 ino:1 sdev:800001 mask:fce ignored_mask:0\n", &fi), -ENOENT);

        /* the common keys, in the older i915 order (pdev before client id), no final newline */
        CHECK_EQ_INT(parse_str("ino:\t512\ndrm-driver:\ti915\ndrm-pdev:\t0000:00:02.0\ndrm-client-id:\t7", &fi), 0);
        CHECK(streq(fi.driver, "i915"));
        CHECK(streq(fi.pdev, "0000:00:02.0"));
        CHECK(fi.has_client_id);
        CHECK_U64(fi.client_id, 7);
        CHECK(fi.has_ino);
        CHECK_U64(fi.ino, 512);

        /* no final newline on a number */
        CHECK_EQ_INT(parse_str("drm-driver:\tamdgpu\ndrm-engine-gfx:\t5 ns", &fi), 0);
        CHECK_U64(engine(&fi, "gfx")->ns, 5);

        /* missing client id (before 5.19), missing pdev (platform devices) */
        CHECK_EQ_INT(parse_str("drm-driver:\tpanfrost\ndrm-engine-fragment:\t10 ns\n", &fi), 0);
        CHECK(!fi.has_client_id);
        CHECK(streq(fi.pdev, ""));
        CHECK_EQ_INT(fi.n_engines, 1);
}

static void test_duplicate_keys(void) {
        struct drm_fdinfo fi;

        /* duplicate keys: the last one wins; one engine either way */
        CHECK_EQ_INT(parse_str("drm-driver:\ta\ndrm-client-id:\t5\ndrm-engine-gfx:\t1 ns\ndrm-driver:\tb\n"
                               "drm-client-id:\t6\ndrm-engine-gfx:\t2 ns\ndrm-engine-capacity-gfx:\t3\n",
                               &fi),
                     0);
        CHECK(streq(fi.driver, "b"));
        CHECK_U64(fi.client_id, 6);
        CHECK_EQ_INT(fi.n_engines, 1);
        CHECK_U64(engine(&fi, "gfx")->ns, 2);
        CHECK_U64(engine(&fi, "gfx")->capacity, 3);
        /* a malformed repeat is skipped: the earlier value stays */
        CHECK_EQ_INT(parse_str("drm-driver:\ta\ndrm-client-id:\t5\ndrm-client-id:\tfive\n", &fi), 0);
        CHECK_U64(fi.client_id, 5);
        CHECK_EQ_INT(fi.n_skipped, 1);

        /* keys that look alike: capacity and total-cycles are not an engine or a region */
        CHECK_EQ_INT(parse_str("drm-driver:\txe\ndrm-total-cycles-rcs:\t9\ndrm-engine-capacity-ccs:\t4\n", &fi), 0);
        CHECK_EQ_INT(fi.n_regions, 0);
        CHECK_EQ_INT(fi.n_engines, 2);
        CHECK(engine(&fi, "capacity-ccs") == NULL);
        CHECK_U64(engine(&fi, "ccs")->capacity, 4);
        CHECK(!engine(&fi, "ccs")->has_ns);

        /* keys not read: shared/active/purgeable, curfreq, driver-specific, 5.14 amdgpu's "vram mem" */
        CHECK_EQ_INT(parse_str("drm-driver:\tamdgpu\nvram mem:\t1024 kB\ngfx0:\t12.5%\npasid:\t32779\n"
                               "drm-shared-vram:\t2 MiB\ndrm-active-gtt:\t0\ndrm-purgeable-cpu:\t0\n"
                               "drm-curfreq-panthor:\t1000000000 Hz\npanthor-resident-memory:\t10396 KiB\n"
                               "drm-client-name:\tmy app: v2\n",
                               &fi),
                     0);
        CHECK_EQ_INT(fi.n_engines, 0);
        CHECK_EQ_INT(fi.n_regions, 0);
        CHECK_EQ_INT(fi.n_skipped, 0);

        /* resident over legacy, never the sum */
        CHECK_EQ_INT(parse_str("drm-driver:\tamdgpu\ndrm-resident-vram:\t4096 MiB\ndrm-memory-vram:\t4194304 KiB\n"
                               "drm-memory-gtt:\t2 MiB\ndrm-total-cpu:\t5\n",
                               &fi),
                     0);
        CHECK_U64(drm_region_resident(region(&fi, "vram")), 4 * GIB);
        CHECK_U64(drm_region_resident(region(&fi, "gtt")), 2 * MIB);
        CHECK(!drm_region_has_resident(region(&fi, "cpu")));
        CHECK_U64(drm_region_resident(region(&fi, "cpu")), 0);
}

static void test_bounds(void) {
        struct drm_fdinfo fi;

        /* bounds: engines and regions past GPU_MAX_* are skipped and counted */
        char big[4096] = "drm-driver:\tx\n";
        for (int i = 0; i < GPU_MAX_ENGINES + 4; i++)
                snprintf(big + strlen(big), sizeof big - strlen(big), "drm-engine-e%d:\t%d ns\n", i, i);
        for (int i = 0; i < GPU_MAX_REGIONS + 3; i++)
                snprintf(big + strlen(big), sizeof big - strlen(big), "drm-resident-r%d:\t%d\n", i, i);
        CHECK_EQ_INT(parse_str(big, &fi), 0);
        CHECK_EQ_INT(fi.n_engines, GPU_MAX_ENGINES);
        CHECK_EQ_INT(fi.n_regions, GPU_MAX_REGIONS);
        CHECK_EQ_INT(fi.n_skipped, 7);
        CHECK_U64(engine(&fi, "e15")->ns, 15);
        CHECK(engine(&fi, "e16") == NULL);

        /* very long lines: an unknown key's huge value is nothing; a name of
         * GPU_NAME_MAX or more, a 5000-digit number are skipped; a driver or
         * pdev too long is not a file we trust */
        size_t n = 20000;
        _cleanup_free_ char *lng = malloc(n);
        CHECK(lng != NULL);
        if (lng) {
                int k = snprintf(lng, n, "drm-driver:\tx\nfoo:\t");
                memset(lng + k, 'a', 9000);
                k += 9000;
                k += snprintf(lng + k, n - (size_t)k, "\ndrm-engine-%040d:\t1 ns\ndrm-engine-gfx:\t", 0);
                memset(lng + k, '7', 5000);
                k += 5000;
                k += snprintf(lng + k, n - (size_t)k, " ns\ndrm-engine-ok:\t3 ns\n");
                CHECK_EQ_INT(drm_fdinfo_parse(lng, (size_t)k, &fi), 0);
                CHECK_EQ_INT(fi.n_engines, 1);
                CHECK_U64(engine(&fi, "ok")->ns, 3);
                CHECK_EQ_INT(fi.n_skipped, 2);
        }
        CHECK_EQ_INT(parse_str("drm-driver:\t0123456789012345678901234567890123456789\n", &fi), -EINVAL);
        CHECK_EQ_INT(
                parse_str("drm-driver:\tx\ndrm-pdev:\t0000:00:02.0-0123456789012345678901234567890123456789\n", &fi),
                -EINVAL);
        /* the longest names that fit */
        CHECK_EQ_INT(parse_str("drm-driver:\t0123456789012345678901234567890\n"
                               "drm-engine-0123456789012345678901234567890:\t1\n",
                               &fi),
                     0);
        CHECK_EQ_INT(fi.n_engines, 1);
}

static void test_garbage(void) {
        struct drm_fdinfo fi;

        /* garbage, and outputs untouched on failure */
        static const struct {
                const char *name, *text;
                size_t len; /* 0: strlen */
        } bad[] = {
                { "NUL inside", "drm-driver:\tamdgpu\n\0drm-engine-gfx:\t1 ns\n", 40 },
                { "no colon", "drm-driver:\tamdgpu\nthis is not an fdinfo line\n", 0 },
                { "binary",
                  "\x7f"
                  "ELF\x02\x01\x01\x03\x04\xff\xfe",
                  0 },
                { "empty key", "drm-driver:\tamdgpu\n:\t1\n", 0 },
                { "control in key", "drm-driver:\tamdgpu\ndrm\x01x:\t1\n", 0 },
                { "high byte in key", "drm-driver:\tamdgpu\ndrm-\xc3\xa9:\t1\n", 0 },
                { "driver empty", "drm-driver:\t\n", 0 },
                { "driver blank", "drm-driver:\tamd gpu\n", 0 },
                { "driver not ASCII", "drm-driver:\tamd\xffgpu\n", 0 },
                { "pdev control", "drm-driver:\tx\ndrm-pdev:\t0000\x1b[31m\n", 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct drm_fdinfo sentinel;
                memset(&sentinel, 0x5a, sizeof sentinel);
                fi = sentinel;
                int r = drm_fdinfo_parse(bad[i].text, bad[i].len ? bad[i].len : strlen(bad[i].text), &fi);
                if (r != -EINVAL)
                        TAP_FAIL("garbage \"%s\": %d, want -EINVAL", bad[i].name, r);
                CHECK(memcmp(&fi, &sentinel, sizeof fi) == 0);
        }
}

/* ---- utilisation table ------------------------------------------------------------ */

/* A counter of the table below: false and 0 for UINT64_MAX (absent), else
 * true and v. */
static bool present(uint64_t v, uint64_t *ret) {
        *ret = v == UINT64_MAX ? 0 : v;
        return v != UINT64_MAX;
}

static void test_engine_util(void) {
        /* held/cur: ns, cycles, total cycles (UINT64_MAX = absent); want < 0: unknown */
#define NO UINT64_MAX
        static const struct {
                const char *name;
                uint64_t held_ns, held_cycles, held_total;
                uint64_t ns, cycles, total, maxfreq, capacity;
                uint64_t dt_ns;
                double want;
                uint64_t then_ns, then_cycles, then_total; /* *held after */
        } rows[] = {
                { "first reading", NO, NO, NO, 1000, NO, NO, 0, 1, NS_PER_SEC, -1, 1000, NO, NO },
                { "time", 1000000000, NO, NO, 1500000000, NO, NO, 0, 1, NS_PER_SEC, 50.0, 1500000000, NO, NO },
                { "time, capacity 2", 0, NO, NO, 100000000, NO, NO, 0, 2, NS_PER_SEC, 5.0, 100000000, NO, NO },
                { "time, idle", 7, NO, NO, 7, NO, NO, 0, 1, NS_PER_SEC, 0.0, 7, NO, NO },
                { "time went back: 0, old kept", 1500000000, NO, NO, 1200000000, NO, NO, 0, 1, NS_PER_SEC, 0.0,
                  1500000000, NO, NO },
                { "time catching up", 1500000000, NO, NO, 1700000000, NO, NO, 0, 1, NS_PER_SEC, 20.0, 1700000000, NO,
                  NO },
                { "time, dt 0", 0, NO, NO, 5, NO, NO, 0, 1, 0, -1, 5, NO, NO },
                { "time, clamp", 0, NO, NO, 2 * NS_PER_SEC, NO, NO, 0, 1, NS_PER_SEC, 100.0, 2 * NS_PER_SEC, NO, NO },
                { "cycles/total", NO, 28257900, 7655183225, NO, 33057900, 7674383225, 0, 1, 0, 25.0, NO, 33057900,
                  7674383225 },
                { "cycles/total, capacity 4", NO, 0, 7655183225, NO, 19200000, 7674383225, 0, 4, 0, 25.0, NO, 19200000,
                  7674383225 },
                { "cycles/total, capacity 2", NO, 0, 7655183225, NO, 960000, 7674383225, 0, 2, 0, 2.5, NO, 960000,
                  7674383225 },
                { "total not moving", NO, 33057900, 7674383225, NO, 37857900, 7674383225, 0, 1, NS_PER_SEC, -1, NO,
                  37857900, 7674383225 },
                { "total back", NO, 10, 1000, NO, 20, 900, 0, 1, NS_PER_SEC, -1, NO, 20, 1000 },
                { "cycles back", NO, 10, 1000, NO, 5, 2000, 0, 1, NS_PER_SEC, 0.0, NO, 10, 2000 },
                { "cycles/total over ns", 0, 0, 0, 900000000, 10, 100, 0, 1, NS_PER_SEC, 10.0, 900000000, 10, 100 },
                { "maxfreq", NO, 0, NO, NO, 500000000, NO, 1000000000, 1, NS_PER_SEC, 50.0, NO, 500000000, NO },
                { "maxfreq, capacity 2", NO, 0, NO, NO, 500000000, NO, 1000000000, 2, NS_PER_SEC, 25.0, NO, 500000000,
                  NO },
                { "maxfreq 0", NO, 0, NO, NO, 500000000, NO, 0, 1, NS_PER_SEC, -1, NO, 500000000, NO },
                { "maxfreq, dt 0", NO, 0, NO, NO, 500000000, NO, 1000000000, 1, 0, -1, NO, 500000000, NO },
                { "ns over maxfreq", 0, 0, NO, 250000000, 900000000, NO, 1000000000, 1, NS_PER_SEC, 25.0, 250000000,
                  900000000, NO },
                { "keys changed", 100, NO, NO, NO, 100, NO, 0, 1, NS_PER_SEC, -1, 100, 100, NO },
        };
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                struct drm_engine_counters held = {};
                struct drm_engine_stat cur = {
                        .has_maxfreq = rows[i].maxfreq != 0,
                        .maxfreq_hz = rows[i].maxfreq,
                        .capacity = rows[i].capacity,
                };
                held.has_ns = present(rows[i].held_ns, &held.ns);
                held.has_cycles = present(rows[i].held_cycles, &held.cycles);
                held.has_total_cycles = present(rows[i].held_total, &held.total_cycles);
                cur.has_ns = present(rows[i].ns, &cur.ns);
                cur.has_cycles = present(rows[i].cycles, &cur.cycles);
                cur.has_total_cycles = present(rows[i].total, &cur.total_cycles);
                double pct = -1;
                bool known = drm_engine_util(&held, &cur, rows[i].dt_ns, &pct);
                if (known != (rows[i].want >= 0) || (known && pct != rows[i].want))
                        TAP_FAIL("util \"%s\": known %d %.17g, want %.17g", rows[i].name, known, pct, rows[i].want);
                bool ok = (rows[i].then_ns == NO ? !held.has_ns : held.has_ns && held.ns == rows[i].then_ns) &&
                          (rows[i].then_cycles == NO ? !held.has_cycles
                                                     : held.has_cycles && held.cycles == rows[i].then_cycles) &&
                          (rows[i].then_total == NO ? !held.has_total_cycles
                                                    : held.has_total_cycles && held.total_cycles == rows[i].then_total);
                if (!ok)
                        TAP_FAIL("util \"%s\": held after = %llu/%llu/%llu", rows[i].name, (unsigned long long)held.ns,
                                 (unsigned long long)held.cycles, (unsigned long long)held.total_cycles);
        }
#undef NO
}

/* ---- the fixture trees -------------------------------------------------------------- */

static int read_fixture(const char *path, struct drm_fdinfo *ret) {
        _cleanup_free_ char *text = NULL;
        size_t len;
        int r = read_file_at(fixtures, path, DRM_FDINFO_READ_MAX, &text, &len);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(-r));
                return r;
        }
        return drm_fdinfo_parse(text, len, ret);
}

static void test_fixture_files(void) {
        struct drm_fdinfo fi, fi6;

        /* client 11 (amdgpu, 1.8 a) */
        CHECK_EQ_INT(read_fixture("t0/proc/4242/fdinfo/5", &fi), 0);
        CHECK(streq(fi.driver, "amdgpu"));
        CHECK(streq(fi.pdev, AMD));
        CHECK(fi.has_client_id);
        CHECK_U64(fi.client_id, 11);
        CHECK_U64(fi.ino, 1089);
        CHECK_EQ_INT(fi.n_engines, 2);
        CHECK_U64(engine(&fi, "gfx")->ns, 1000000000);
        CHECK_U64(engine(&fi, "compute")->ns, 100000000);
        CHECK_EQ_INT(fi.n_regions, 7);
        CHECK_EQ_INT(fi.n_skipped, 0);
        const struct drm_region_stat *vram = region(&fi, "vram"), *gtt = region(&fi, "gtt");
        CHECK(vram && vram->has_resident && vram->has_memory && vram->has_total);
        /* legacy drm-memory-vram (4194304 KiB) decodes to drm-resident-vram's (4096 MiB) bytes */
        CHECK_U64(vram->resident_bytes, 4294967296);
        CHECK_U64(vram->memory_bytes, vram->resident_bytes);
        CHECK_U64(drm_region_resident(vram), 4294967296);  /* not 8 GiB */
        CHECK_U64(gtt->memory_bytes, gtt->resident_bytes); /* "drm-memory-gtt: \t120832 KiB" */
        CHECK_U64(drm_region_resident(gtt), 123731968);
        CHECK_U64(drm_region_resident(region(&fi, "doorbell")), 8192);
        /* fds 5 and 6 are one drm_file */
        CHECK_EQ_INT(read_fixture("t0/proc/4242/fdinfo/6", &fi6), 0);
        CHECK(memcmp(&fi, &fi6, sizeof fi) == 0);

        /* client 3 (xe, 1.8 c / 6.4) */
        CHECK_EQ_INT(read_fixture("t1/proc/5150/fdinfo/9", &fi), 0);
        CHECK(streq(fi.driver, "xe"));
        CHECK_U64(fi.client_id, 3);
        CHECK_EQ_INT(fi.n_engines, 5);
        CHECK_U64(engine(&fi, "rcs")->cycles, 33057900);
        CHECK_U64(engine(&fi, "rcs")->total_cycles, 7674383225);
        CHECK(!engine(&fi, "rcs")->has_ns);
        CHECK_U64(engine(&fi, "rcs")->capacity, 1);
        CHECK_U64(engine(&fi, "vcs")->capacity, 2);
        CHECK_U64(engine(&fi, "vecs")->capacity, 2);
        CHECK_U64(engine(&fi, "ccs")->capacity, 4);
        CHECK_U64(drm_region_resident(region(&fi, "system")), 256 * MIB);
        CHECK_U64(drm_region_resident(region(&fi, "gtt")), 192 * KIB);

        /* i915 (1.8 b) */
        CHECK_EQ_INT(read_fixture("i915-t0/proc/5150/fdinfo/9", &fi), 0);
        CHECK(streq(fi.driver, "i915"));
        CHECK_EQ_INT(fi.n_engines, 4);
        CHECK_U64(engine(&fi, "video")->capacity, 2);
        CHECK_U64(engine(&fi, "video-enhance")->ns, 0);
        CHECK_U64(drm_region_resident(region(&fi, "system0")), 245 * MIB);

        /* not clients: fd 0 of 4242 (/dev/null), the NPU fd of 6001 */
        CHECK_EQ_INT(read_fixture("t0/proc/4242/fdinfo/0", &fi), -ENOENT);
        CHECK_EQ_INT(read_fixture("t0/proc/6001/fdinfo/11", &fi), -ENOENT);

        /* t2's card not in sysfs */
        CHECK_EQ_INT(read_fixture("t2/proc/7007/fdinfo/3", &fi), 0);
        CHECK(streq(fi.pdev, "0000:0a:00.0"));
}

/* The daemon's runs of the fixture: one process each. */
enum { RUN_4242, RUN_4343, RUN_5150, RUN_6001, RUN_7007, RUN_FORK, N_RUNS };
static const int run_pid[N_RUNS] = { 4242, 4343, 5150, 6001, 7007, 4243 };

struct run_out {
        int r;
        struct gpu_use uses[4];
        size_t n_uses;
        struct drm_holder holders[4];
        size_t n_holders;
};

/* One run's collect in snapshot snap; pid_dir: the process dir to read
 * (RUN_FORK reads 4242's: a child that inherited its fds). */
static void collect_run(struct drm_clients *t, const char *snap, int pid, int pid_dir, struct drm_proc_cache **cache,
                        struct run_out *out) {
        char path[64];
        snprintf(path, sizeof path, "%s/proc/%d", snap, pid_dir);
        _cleanup_close_ int dfd = openat(fixtures, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct drm_proc p = { .pid = pid, .dirfd = dfd, .cache = cache };
        memset(out, 0, sizeof *out);
        out->r = drm_collect(t, &p, 1, 10, out->uses, ELEMENTSOF(out->uses), &out->n_uses, out->holders,
                             ELEMENTSOF(out->holders), &out->n_holders);
}

static const struct gpu_engine *use_engine(const struct gpu_use *u, const char *name) {
        for (size_t i = 0; i < u->n_engines; i++)
                if (streq(u->engines[i].name, name))
                        return &u->engines[i];
        return NULL;
}

static uint64_t use_region(const struct gpu_use *u, const char *name) {
        for (size_t i = 0; i < u->n_regions; i++)
                if (streq(u->regions[i].name, name))
                        return u->regions[i].resident_bytes;
        return UINT64_MAX;
}

#define CHECK_ENGINE(u, name, pct)                                     \
        do {                                                           \
                const struct gpu_engine *_e = use_engine((u), (name)); \
                CHECK(_e && _e->has_util);                             \
                if (_e && _e->has_util)                                \
                        CHECK_PCT(_e->util_pct, (pct));                \
        } while (0)
#define CHECK_ENGINE_UNKNOWN(u, name)                                  \
        do {                                                           \
                const struct gpu_engine *_e = use_engine((u), (name)); \
                CHECK(_e && !_e->has_util);                            \
        } while (0)

/* The fixture snapshots are swept in order by the same client table t,
 * each run with its fd cache caches[i] and its results o[i]. */

/* A sweep's start at now: the runs RUN_4242 to last collected from snapshot
 * snap, each as its own pid. */
static void sweep_begin(struct drm_clients *t, struct drm_proc_cache **caches, struct run_out *o, const char *snap,
                        usec_t now, int last) {
        drm_clients_begin(t, now);
        for (int i = RUN_4242; i <= last; i++)
                collect_run(t, snap, run_pid[i], run_pid[i], &caches[i], &o[i]);
}

/* t0: first readings */
static void sweep_t0(struct drm_clients *t, struct drm_proc_cache **caches, struct run_out *o) {
        const struct gpu_use *u;

        sweep_begin(t, caches, o, "t0", T0, RUN_6001);
        drm_clients_end(t, 5 * USEC_PER_SEC);
        for (int i = RUN_4242; i <= RUN_6001; i++)
                CHECK_EQ_INT(o[i].r, 0);
        CHECK_EQ_INT(drm_clients_count(t), 3); /* 11, 14, 3 */

        CHECK_EQ_INT(o[RUN_4242].n_uses, 1);
        u = &o[RUN_4242].uses[0];
        CHECK(streq(u->device, AMD));
        CHECK(streq(u->driver, "amdgpu"));
        CHECK_EQ_INT(u->clients, 1);
        CHECK(!u->has_util); /* unknown, not 0 */
        CHECK_ENGINE_UNKNOWN(u, "gfx");
        CHECK_ENGINE_UNKNOWN(u, "compute");
        CHECK(u->has_mem);
        CHECK_U64(use_region(u, "vram"), 4294967296);
        CHECK_U64(use_region(u, "gtt"), 123731968);
        CHECK_U64(u->mem_bytes, 4294967296 + 123731968 + 8192); /* vram + gtt + doorbell */
        CHECK(!u->estimated);
        /* fd 0 (/dev/null) is not kept; fds 5 and 6 are, in fd order */
        CHECK(caches[RUN_4242] && caches[RUN_4242]->n_fds == 2);
        if (caches[RUN_4242] && caches[RUN_4242]->n_fds == 2) {
                CHECK_EQ_INT(caches[RUN_4242]->fds[0].fd, 5);
                CHECK_EQ_INT(caches[RUN_4242]->fds[1].fd, 6);
                CHECK(streq(caches[RUN_4242]->fds[0].node, "renderD129"));
        }
        /* the NPU user: a holder, not a client */
        CHECK_EQ_INT(o[RUN_6001].n_uses, 0);
        CHECK_EQ_INT(o[RUN_6001].n_holders, 1);
        CHECK(streq(o[RUN_6001].holders[0].node, "accel0"));
        CHECK_EQ_INT(o[RUN_6001].holders[0].kind, DRM_FD_ACCEL);
        CHECK_EQ_INT(o[RUN_6001].holders[0].procs, 1);
}

/* t1: Δt = 1 s */
static void sweep_t1(struct drm_clients *t, struct drm_proc_cache **caches, struct run_out *o) {
        const struct gpu_use *u;

        sweep_begin(t, caches, o, "t1", T1, RUN_6001);
        /* a child that inherited 4242's fds, sampled after it in the same sweep: nothing */
        collect_run(t, "t1", 4243, 4242, &caches[RUN_FORK], &o[RUN_FORK]);
        drm_clients_end(t, 5 * USEC_PER_SEC);
        CHECK_EQ_INT(o[RUN_FORK].r, 0);
        CHECK_EQ_INT(o[RUN_FORK].n_uses, 0);

        /* AMD, pid 4242, client 11 seen via fds 5 and 6: 50/20/4 GiB, not 100/40/8 */
        u = &o[RUN_4242].uses[0];
        CHECK_EQ_INT(o[RUN_4242].n_uses, 1);
        CHECK_EQ_INT(u->clients, 1);
        CHECK_ENGINE(u, "gfx", 50.0);
        CHECK_ENGINE(u, "compute", 20.0);
        CHECK(u->has_util);
        CHECK_PCT(u->util_pct, 50.0);
        CHECK_U64(use_region(u, "vram"), 4294967296);
        CHECK_U64(use_region(u, "gtt"), 123731968);
        CHECK_U64(u->mem_bytes, 4294967296 + 123731968 + 8192);
        /* listed at t0, only re-read at t1 */
        CHECK_U64(caches[RUN_4242]->lists, 1);

        /* AMD, pid 4343, client 14 */
        u = &o[RUN_4343].uses[0];
        CHECK_EQ_INT(o[RUN_4343].n_uses, 1);
        CHECK_ENGINE(u, "gfx", 10.0);
        CHECK_ENGINE(u, "dma", 1.0);
        CHECK_PCT(u->util_pct, 10.0);
        CHECK_U64(use_region(u, "vram"), GIB);

        /* xe, pid 5150, client 3: the GPU's clock, capacity applied */
        u = &o[RUN_5150].uses[0];
        CHECK_EQ_INT(o[RUN_5150].n_uses, 1);
        CHECK(streq(u->device, XE));
        CHECK(streq(u->driver, "xe"));
        CHECK_ENGINE(u, "rcs", 25.0);
        CHECK_ENGINE(u, "ccs", 25.0);
        CHECK_ENGINE(u, "vcs", 2.5);
        CHECK_ENGINE(u, "bcs", 0.0);
        CHECK_ENGINE(u, "vecs", 0.0);
        CHECK_PCT(u->util_pct, 25.0);
        CHECK_U64(use_region(u, "system"), 256 * MIB);

        CHECK_EQ_INT(o[RUN_6001].n_holders, 1);
}

/* t2: the negative cases */
static void sweep_t2(struct drm_clients *t, struct drm_proc_cache **caches, struct run_out *o) {
        const struct gpu_use *u;

        CHECK_EQ_INT(drm_clients_count(t), 3);
        sweep_begin(t, caches, o, "t2", T2, RUN_7007);
        /* 4343 is gone: no directory, nothing, no error */
        CHECK_EQ_INT(o[RUN_4343].r, 0);
        CHECK_EQ_INT(o[RUN_4343].n_uses, 0);
        CHECK_EQ_INT(drm_clients_count(t), 4); /* 11, 14 (not seen since t1), 3, 21 */
        drm_clients_end(t, USEC_PER_SEC / 2);
        CHECK_EQ_INT(drm_clients_count(t), 3); /* 14 dropped */

        /* client 11's gfx went back (1.5e9 -> 1.2e9 ns): Δ = 0, compute goes on */
        u = &o[RUN_4242].uses[0];
        CHECK_ENGINE(u, "gfx", 0.0);
        CHECK_ENGINE(u, "compute", 20.0);
        CHECK_PCT(u->util_pct, 20.0);

        /* xe's total-cycles did not move: unknown, not a division by zero */
        u = &o[RUN_5150].uses[0];
        CHECK_ENGINE_UNKNOWN(u, "rcs");
        CHECK_ENGINE_UNKNOWN(u, "ccs");
        CHECK(!u->has_util);
        CHECK_U64(use_region(u, "system"), 256 * MIB);

        /* a card that sysfs does not show: still reported, keyed by its pdev */
        CHECK_EQ_INT(o[RUN_7007].n_uses, 1);
        u = &o[RUN_7007].uses[0];
        CHECK(streq(u->device, "0000:0a:00.0"));
        CHECK(streq(u->driver, "amdgpu"));
        CHECK_EQ_INT(u->clients, 1);
        CHECK_ENGINE_UNKNOWN(u, "gfx");
        CHECK_U64(use_region(u, "vram"), 512 * MIB);
        CHECK(caches[RUN_7007] && caches[RUN_7007]->n_fds == 1 && streq(caches[RUN_7007]->fds[0].node, "renderD130"));
}

/* the held gfx value (1.5e9) counts from t2 on: 1.7e9 at t3 would be 20 % */
static void sweep_t3_held(struct drm_clients *t) {
        drm_clients_begin(t, T2 + USEC_PER_SEC);
        struct drm_fdinfo fi;
        struct gpu_engine eng[GPU_MAX_ENGINES];
        CHECK_EQ_INT(read_fixture("t2/proc/4242/fdinfo/5", &fi), 0);
        CHECK(streq(fi.engines[0].name, "gfx") && streq(fi.engines[1].name, "compute"));
        fi.engines[0].ns = 1700000000; /* gfx */
        fi.engines[1].ns = 700000000;  /* compute */
        CHECK_EQ_INT(drm_clients_observe(t, AMD, 4242, 5, &fi, eng, NULL), 1);
        CHECK(eng[0].has_util && eng[0].util_pct == 20.0);
        CHECK(eng[1].has_util && eng[1].util_pct == 20.0);
        drm_clients_end(t, 5 * USEC_PER_SEC);
}

static void test_fixture_sweeps(void) {
        struct drm_clients *t = NULL;
        struct drm_proc_cache *caches[N_RUNS] = {};
        struct run_out o[N_RUNS] = {};

        CHECK_EQ_INT(drm_clients_new(&t), 0);
        if (!t)
                return;
        sweep_t0(t, caches, o);
        sweep_t1(t, caches, o);
        sweep_t2(t, caches, o);
        sweep_t3_held(t);
        for (int i = 0; i < N_RUNS; i++)
                drm_proc_cache_free(caches[i]);
        drm_clients_free(t);
}

static void test_fixture_i915(void) {
        struct drm_clients *t = NULL;
        struct drm_proc_cache *cache = NULL;
        struct run_out o;

        CHECK_EQ_INT(drm_clients_new(&t), 0);
        if (!t)
                return;
        drm_clients_begin(t, T0);
        collect_run(t, "i915-t0", 5150, 5150, &cache, &o);
        drm_clients_end(t, 5 * USEC_PER_SEC);
        CHECK_EQ_INT(o.n_uses, 1);
        CHECK(!o.uses[0].has_util);

        drm_clients_begin(t, T1);
        collect_run(t, "i915-t1", 5150, 5150, &cache, &o);
        drm_clients_end(t, 5 * USEC_PER_SEC);
        CHECK_EQ_INT(o.n_uses, 1);
        const struct gpu_use *u = &o.uses[0];
        CHECK(streq(u->driver, "i915"));
        CHECK(streq(u->device, XE));
        CHECK_ENGINE(u, "render", 30.0);
        CHECK_ENGINE(u, "video", 5.0); /* capacity 2 */
        CHECK_ENGINE(u, "copy", 0.0);
        CHECK_ENGINE(u, "video-enhance", 0.0);
        CHECK_PCT(u->util_pct, 30.0);
        CHECK_U64(use_region(u, "system0"), 245 * MIB);
        CHECK_U64(u->mem_bytes, 245 * MIB);

        drm_proc_cache_free(cache);
        drm_clients_free(t);
}

/* ---- the client table --------------------------------------------------------------- */

static void test_clients(void) {
        struct drm_clients *t = NULL;
        struct drm_fdinfo fi;
        struct gpu_engine eng[GPU_MAX_ENGINES];
        int owner = 0;

        CHECK_EQ_INT(drm_clients_new(&t), 0);
        if (!t)
                return;

        /* one client through two processes: the first gets it, the second learns who */
        CHECK_EQ_INT(parse_str("drm-driver:\tamdgpu\ndrm-client-id:\t11\ndrm-engine-gfx:\t0 ns\n", &fi), 0);
        drm_clients_begin(t, T0);
        CHECK_EQ_INT(drm_clients_observe(t, AMD, 300, 5, &fi, eng, &owner), 1);
        CHECK_EQ_INT(drm_clients_observe(t, AMD, 200, 9, &fi, eng, &owner), 0);
        CHECK_EQ_INT(owner, 300);
        /* the same id on another device is another client */
        CHECK_EQ_INT(drm_clients_observe(t, XE, 200, 9, &fi, eng, &owner), 1);
        drm_clients_end(t, USEC_PER_SEC);
        /* next sweep: the lower pid first now, it gets it (first come) */
        fi.engines[0].ns = NS_PER_SEC / 4;
        drm_clients_begin(t, T0 + USEC_PER_SEC);
        CHECK_EQ_INT(drm_clients_observe(t, AMD, 200, 9, &fi, eng, &owner), 1);
        CHECK(eng[0].has_util && eng[0].util_pct == 25.0);
        CHECK_EQ_INT(drm_clients_observe(t, AMD, 300, 5, &fi, eng, &owner), 0);
        CHECK_EQ_INT(owner, 200);
        drm_clients_end(t, USEC_PER_SEC);
        CHECK_EQ_INT(drm_clients_count(t), 2);

        /* no client id (before 5.19): keyed by (device, pid, fd): two fds are two */
        CHECK_EQ_INT(parse_str("drm-driver:\tamdgpu\ndrm-engine-gfx:\t0 ns\n", &fi), 0);
        drm_clients_begin(t, T0 + 2 * USEC_PER_SEC);
        CHECK_EQ_INT(drm_clients_observe(t, "renderD128", 400, 5, &fi, eng, NULL), 1);
        CHECK_EQ_INT(drm_clients_observe(t, "renderD128", 400, 6, &fi, eng, NULL), 1);
        CHECK_EQ_INT(drm_clients_observe(t, "renderD128", 400, 6, &fi, eng, NULL), 0);
        drm_clients_end(t, 10 * USEC_PER_SEC);
        CHECK_EQ_INT(drm_clients_count(t), 4);

        /* expiry: by age, the survivors still found (the index rebuilt) */
        CHECK_EQ_INT(drm_clients_expire(t, T0 + 2 * USEC_PER_SEC, USEC_PER_SEC / 2), 2);
        CHECK_EQ_INT(drm_clients_count(t), 2);
        drm_clients_begin(t, T0 + 3 * USEC_PER_SEC);
        CHECK_EQ_INT(drm_clients_observe(t, "renderD128", 400, 5, &fi, eng, NULL), 1);
        CHECK(eng[0].has_util); /* known: the client's history survived */
        drm_clients_end(t, 10 * USEC_PER_SEC);
        CHECK_EQ_INT(drm_clients_count(t), 2);

        /* the bound */
        drm_clients_begin(t, T0 + 4 * USEC_PER_SEC);
        int r = 0;
        for (uint64_t id = 1000; id < 1000 + DRM_MAX_CLIENTS && r >= 0; id++) {
                fi.has_client_id = true;
                fi.client_id = id;
                r = drm_clients_observe(t, AMD, 1, 1, &fi, eng, NULL);
        }
        CHECK_EQ_INT(r, -ENOSPC);
        CHECK_EQ_INT(drm_clients_count(t), DRM_MAX_CLIENTS);
        drm_clients_end(t, 0);
        CHECK_EQ_INT(drm_clients_count(t), DRM_MAX_CLIENTS - 2); /* the two seen at +3 s are older than 0 s */

        drm_clients_free(t);
        CHECK(drm_clients_free(NULL) == NULL);
        CHECK(drm_proc_cache_free(NULL) == NULL);
}

/* ---- the fuzz target ------------------------------------------------------------------- */

static void test_fuzz(void) {
        static const char *files[] = { "t0/proc/4242/fdinfo/5", "t1/proc/5150/fdinfo/9", "i915-t1/proc/5150/fdinfo/9",
                                       "t0/proc/6001/fdinfo/11", "t2/proc/7007/fdinfo/3" };
        unsigned seed = 1;
        for (size_t f = 0; f < ELEMENTSOF(files); f++) {
                _cleanup_free_ char *text = NULL;
                size_t len;
                if (read_file_at(fixtures, files[f], DRM_FDINFO_READ_MAX, &text, &len) < 0 || len == 0) {
                        TAP_FAIL("%s: unreadable", files[f]);
                        continue;
                }
                /* every prefix, and bytes flipped at random */
                for (size_t n = 0; n <= len; n++)
                        LLVMFuzzerTestOneInput((const uint8_t *)text, n);
                for (int i = 0; i < 2000; i++) {
                        char buf[DRM_FDINFO_READ_MAX];
                        memcpy(buf, text, len);
                        for (int j = 0; j < 4; j++) {
                                seed = seed * 1103515245 + 12345;
                                buf[(seed >> 8) % len] = (char)(seed >> 20);
                        }
                        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
                }
        }
}

int main(int argc, char *argv[]) {
        const char *dir = argc > 1 ? argv[1] : getenv("FIXTURES_DIR");
        if (!dir) {
                fprintf(stderr, "usage: test-drm FIXTURES_DIR (tests/fixtures/gpu)\n");
                return 2;
        }
        fixtures = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fixtures < 0) {
                perror(dir);
                return 2;
        }

        test_values();
        test_structure();
        test_duplicate_keys();
        test_bounds();
        test_garbage();
        test_engine_util();
        test_fixture_files();
        test_fixture_sweeps();
        test_fixture_i915();
        test_clients();
        test_fuzz();

        close(fixtures);
        TEST_DONE();
}

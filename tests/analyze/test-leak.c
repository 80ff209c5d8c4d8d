/* SPDX-License-Identifier: MIT */
/* daemon/analyze/leak.c, the parts: theil_sen_slope() and mann_kendall_z()
 * against hand-computed values (ties included), the defaults, argument
 * validation, the reasons given at chosen moments, and the fuzz target
 * (tests/fuzz/fuzz-leak.c) on generated inputs. test-leak-tables.c judges
 * whole families of series.
 *
 *   test-leak            run the checks (exit status: failed checks)
 *   test-leak -v         also print every row's outcome (-vv: and reasons) */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/leak.h"
#include "leak-series.h"
#include "tap.h"
#include "util.h"

/* The fuzz target, run on generated inputs below. */
#include "fuzz/fuzz-leak.c"

/* ---- building blocks -------------------------------------------------------- */

static bool near(double a, double b) {
        return fabs(a - b) <= 1e-9 * (1 + fabs(b));
}

static void test_theil_sen(void) {
        double x5[] = { 1, 2, 3, 4, 5 };
        double line[] = { 2, 4, 6, 8, 10 };
        CHECK(near(theil_sen_slope(x5, line, 5), 2));
        /* one wild value: the 10 slopes are 1 (x6), 24.75, 32.67, 48.5, 96 */
        double wild[] = { 1, 2, 3, 4, 100 };
        CHECK(near(theil_sen_slope(x5, wild, 5), 1));
        /* ties in y: slopes 0, 0, 0, 1/3, 1/2, 1 -> (0 + 1/3) / 2 */
        double x4[] = { 0, 1, 2, 3 }, ty[] = { 1, 1, 1, 2 };
        CHECK(near(theil_sen_slope(x4, ty, 4), 1.0 / 6));
        /* ties in x: the pair (1,0)-(1,5) has no slope; 2 and -3 remain */
        double tx[] = { 1, 1, 2 }, txy[] = { 0, 5, 2 };
        CHECK(near(theil_sen_slope(tx, txy, 3), -0.5));
        /* odd count: slopes (0,1) 3, (0,2) 2, (1,2) 1 -> 2 */
        double x3[] = { 0, 1, 2 }, y3[] = { 0, 3, 4 };
        CHECK(near(theil_sen_slope(x3, y3, 3), 2));
        /* two points, a negative slope */
        double x2[] = { 10, 14 }, y2[] = { 8, 0 };
        CHECK(near(theil_sen_slope(x2, y2, 2), -2));
        /* unsorted x is fine: a slope is a slope */
        double xu[] = { 3, 1, 2 }, yu[] = { 6, 2, 4 };
        CHECK(near(theil_sen_slope(xu, yu, 3), 2));
        /* nothing to say */
        CHECK(isnan(theil_sen_slope(x5, line, 1)));
        CHECK(isnan(theil_sen_slope(x5, line, 0)));
        CHECK(isnan(theil_sen_slope(NULL, line, 5)));
        double same[] = { 7, 7, 7 };
        CHECK(isnan(theil_sen_slope(same, y3, 3)));
        /* more points than the evaluator uses (its allocation path) */
        double xl[40], yl[40];
        for (int i = 0; i < 40; i++) {
                xl[i] = i;
                yl[i] = 3 * i + 1 + (i == 7 ? 500 : 0) + (i == 30 ? -900 : 0);
        }
        CHECK(near(theil_sen_slope(xl, yl, 40), 3));
}

static void test_mann_kendall(void) {
        /* S = 10, var = 5*4*15/18 = 50/3, Z = (10 - 1) / sqrt(50/3) */
        double up[] = { 1, 2, 3, 4, 5 }, down[] = { 5, 4, 3, 2, 1 };
        CHECK(near(mann_kendall_z(up, 5), 9 / sqrt(50.0 / 3)));
        CHECK(near(mann_kendall_z(up, 5), 2.2045407685048604));
        CHECK(near(mann_kendall_z(down, 5), -2.2045407685048604));
        /* ties: S = 5, var = (4*3*13 - 2*1*9) / 18 = 138/18, Z = 4 / sqrt(138/18) */
        double t1[] = { 1, 2, 2, 3 };
        CHECK(near(mann_kendall_z(t1, 4), 4 / sqrt(138.0 / 18)));
        CHECK(near(mann_kendall_z(t1, 4), 1.4446302370292303));
        /* two tie groups: S = 6, var = (300 - 3*2*11 - 2*1*9) / 18 = 12 */
        double t2[] = { 1, 1, 1, 2, 2 };
        CHECK(near(mann_kendall_z(t2, 5), 5 / sqrt(12.0)));
        /* |S| = 1: the continuity correction makes it 0 */
        double z1[] = { 3, 1, 2 };
        CHECK(mann_kendall_z(z1, 3) == 0);
        /* a perfect staircase of 12: S = 66, var = 12*11*29/18 */
        double s12[12];
        for (int i = 0; i < 12; i++)
                s12[i] = i * 1e6;
        CHECK(near(mann_kendall_z(s12, 12), 65 / sqrt(12.0 * 11 * 29 / 18)));
        CHECK(mann_kendall_z(s12, 12) > 4.45 && mann_kendall_z(s12, 12) < 4.46);
        /* 8 floors: the fewest the evaluator uses, 3.34 at best */
        CHECK(near(mann_kendall_z(s12, 8), 27 / sqrt(8.0 * 7 * 21 / 18)));
        /* all equal (var 0), too short */
        double flat[] = { 4, 4, 4, 4 };
        CHECK(mann_kendall_z(flat, 4) == 0);
        CHECK(mann_kendall_z(up, 2) == 0);
        CHECK(mann_kendall_z(NULL, 5) == 0);
        /* n = 20 (the allocation path): S = 190, var = 20*19*45/18 = 950 */
        double y20[20];
        for (int i = 0; i < 20; i++)
                y20[i] = i;
        CHECK(near(mann_kendall_z(y20, 20), 189 / sqrt(950.0)));
}

/* The default values are pinned by etc/mlmond.conf, which documents each [leak] key with its
 * default (test-config compares them with leak_params_default()). Here: the defaults set every field
 * (a field left as the 0xff bytes fails leak_params_valid()), and they are valid. */
static void test_defaults(void) {
        struct leak_params p;
        memset(&p, 0xff, sizeof p);
        leak_params_default(&p);
        CHECK(leak_params_valid(&p));
        CHECK_EQ_INT(p.n_windows, 5);
}

static void expect_einval(const struct leak_point *s, size_t n, double grace, const struct leak_params *p,
                          const char *what) {
        struct leak_verdict v;
        memset(&v, 0x5a, sizeof v);
        int r = leak_evaluate(s, n, grace, p, &v);
        if (r != -EINVAL)
                fprintf(stderr, "expected -EINVAL: %s (got %d)\n", what, r);
        CHECK_EQ_INT(r, -EINVAL);
        CHECK(!v.evaluated && !v.suspected && streq(v.reason, "invalid input"));
}

static void test_arguments(void) {
        struct leak_params p, d;
        struct leak_verdict v;
        leak_params_default(&d);
        struct leak_point s[4] = { { 0, 1 }, { 1, 2 }, { 2, 3 }, { 3, 4 } };

        CHECK_EQ_INT(leak_evaluate(s, 4, 0, &d, NULL), -EINVAL);
        expect_einval(NULL, 4, 0, &d, "NULL series");
        expect_einval(s, LEAK_MAX_POINTS + 1, 0, &d, "too many points");
        expect_einval(s, 4, NAN, &d, "NaN grace");
        for (int i = 0; i < 4; i++) {
                struct leak_point b[4];
                memcpy(b, s, sizeof b);
                b[i].t_s = NAN;
                expect_einval(b, 4, 0, &d, "NaN time");
                b[i].t_s = INFINITY;
                expect_einval(b, 4, 0, &d, "infinite time");
                memcpy(b, s, sizeof b);
                b[i].bytes = NAN;
                expect_einval(b, 4, 0, &d, "NaN bytes");
                b[i].bytes = -INFINITY;
                expect_einval(b, 4, 0, &d, "infinite bytes");
        }
        struct leak_point desc[3] = { { 0, 1 }, { 2, 1 }, { 1, 1 } };
        expect_einval(desc, 3, 0, &d, "descending times");

#define BAD(field, value)                                      \
        do {                                                   \
                p = d;                                         \
                p.field = (value);                             \
                expect_einval(s, 4, 0, &p, #field " " #value); \
        } while (0)
        BAD(n_windows, 0);
        BAD(n_windows, LEAK_MAX_WINDOWS + 1);
        BAD(windows_s[0], 0);
        BAD(windows_s[0], -30);
        BAD(windows_s[0], NAN);
        BAD(windows_s[1], 30); /* not ascending */
        BAD(windows_s[4], INFINITY);
        BAD(grace_s, -1);
        BAD(grace_s, NAN);
        BAD(min_growth_bytes, -1);
        BAD(min_growth_pct, -1);
        BAD(min_growth_pct, INFINITY);
        BAD(min_z, NAN);
        BAD(growth_bound_z, -1);
        BAD(min_coverage, 0);
        BAD(min_coverage, 1.5);
        BAD(max_gap_frac, 0);
        BAD(max_gap_frac, 2);
        BAD(min_floors, 2);
        BAD(min_floors, LEAK_BUCKETS + 1);
        BAD(min_growth_se, -1);
        BAD(min_part_ratio, NAN);
        BAD(min_end_ratio, -0.5);
        BAD(max_step_fit, -1);
        BAD(min_new_high, NAN);
        BAD(drop_min_bytes, -1);
        BAD(drop_noise_k, -1);
        BAD(outlier_noise_k, NAN);
        BAD(sawtooth_stop_factor, 0.5);
        BAD(restart_frac, 1);
        BAD(restart_frac, -0.1);
#undef BAD

        /* accepted: NULL parameters (the defaults), no points, equal times,
         * -INFINITY as the grace start (no grace), edge values */
        CHECK_EQ_INT(leak_evaluate(s, 4, 0, NULL, &v), 0);
        CHECK(!v.evaluated && strncmp(v.reason, "warming up", 10) == 0);
        CHECK_EQ_INT(leak_evaluate(NULL, 0, 0, &d, &v), 0);
        CHECK(!v.evaluated && streq(v.reason, "no samples yet"));
        struct leak_point eq[3] = { { 5, 1 }, { 5, 2 }, { 5, 3 } };
        CHECK_EQ_INT(leak_evaluate(eq, 3, -INFINITY, &d, &v), 0);
        CHECK(!v.evaluated);
        p = d;
        p.n_windows = LEAK_MAX_WINDOWS;
        for (size_t i = 0; i < LEAK_MAX_WINDOWS; i++)
                p.windows_s[i] = 10.0 * (double)(i + 1);
        p.min_coverage = 1;
        p.max_gap_frac = 1;
        p.min_floors = LEAK_BUCKETS;
        p.restart_frac = 0;
        p.grace_s = 0;
        CHECK_EQ_INT(leak_evaluate(s, 4, 0, &p, &v), 0);
        /* a bad point before the look-back is not read */
        size_t n = 5000;
        struct leak_point *big = calloc(n, sizeof *big);
        for (size_t i = 0; i < n; i++)
                big[i] = (struct leak_point){ (double)i, 100 * MIB };
        big[10].bytes = NAN;
        CHECK_EQ_INT(leak_evaluate(big, n, 0, &d, &v), 0);
        CHECK(v.evaluated && !v.suspected);
        big[n - 100].bytes = NAN;
        expect_einval(big, n, 0, &d, "NaN in the look-back");
        free(big);
}

/* ---- verdicts and their reasons at chosen moments ------------------------------ */

static struct leak_verdict verdict_at(const struct spec *sp, const struct leak_params *p, double t) {
        size_t cap = (size_t)(sp->duration / sp->dt) + 2;
        struct leak_point *pts = malloc(cap * sizeof *pts);
        struct leak_verdict v = { 0 };
        if (!pts)
                abort();
        size_t n = generate(sp, pts, cap), k = 0;
        while (k < n && pts[k].t_s <= t)
                k++;
        double grace_from = sp->mark_at > 0 && t >= sp->mark_at ? sp->mark_at : 0;
        CHECK_EQ_INT(leak_evaluate(pts, k, grace_from, p, &v), 0);
        if (verbose > 1)
                printf("     t=%.0f %s: %s\n", t, sp->name, v.reason);
        free(pts);
        return v;
}

static bool starts(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Series judged at one moment (every 0.5 s, seed 7): none is suspected; whether the verdict is
 * evaluated, and its reason. */
static const struct reason_case {
        struct spec sp;
        double t;
        bool evaluated;
        const char *reason; /* the reason starts with this... */
        bool whole;         /* ...and ends there */
        const char *also;   /* NULL, or what it says further on */
} reason_cases[] = {
        /* a ramp that stops at 48 s, judged at 60 s: its last 8 s are flat */
        { .sp = { .name = "stops",
                  .duration = 60,
                  .base = 300 * MIB,
                  .ramp = RAMP_LINEAR,
                  .ramp_size = 96 * MIB,
                  .ramp_time = 48 },
          .t = 60,
          .evaluated = true,
          .reason = "growth stopped: the last 10 s are flat after +" },
        /* a step, 18 s ago: the 30 s window's last third is flat */
        { .sp = { .name = "step", .duration = 300, .base = 300 * MIB, .step_at = 200, .step_size = 1 * GIB },
          .t = 218,
          .evaluated = true,
          .reason = "growth stopped: the last 10 s are flat after +1.2 GiB",
          .whole = true },
        /* growth that started 20 s ago: the windows' first halves are flat */
        { .sp = { .name = "onset", .duration = 400, .base = 300 * MIB, .leak_from = 300, .rate = 2 * MIB },
          .t = 320,
          .evaluated = true,
          .reason = "no steady growth: the floor of the last ",
          .also = "unevenly: its first half is flat (a step, or growth that just started)" },
        /* a gap of 2 min: the windows it lies in wait */
        { .sp = { .name = "gap", .duration = 400, .base = 300 * MIB, .rate = 2 * MIB, .gap_from = 200, .gap_len = 120 },
          .t = 330,
          .reason = "not judged: a gap of 2 min between samples",
          .whole = true },
        /* a sawtooth, before any window spans 8 cycles of it */
        { .sp = { .name = "saw", .duration = 400, .base = 500 * MIB, .saw_amp = 100 * MIB, .saw_period = 20 },
          .t = 100,
          .reason = "not judged yet: memory drops sharply (a garbage collector?) every " },
        /* memory back to an earlier level: flat, a dip of 100 MiB for 2 min,
         * then a steady climb back */
        { .sp = { .name = "dip",
                  .duration = 600,
                  .base = 300 * MIB,
                  .step_at = 200,
                  .step_size = -100 * MIB,
                  .leak_from = 320,
                  .rate = 1 * MIB },
          .t = 400,
          .evaluated = true,
          .reason = "no new high: the floor of the last " },
};

static void test_reasons(const struct leak_params *p) {
        struct leak_verdict v;
        struct spec sp = { .name = "leak", .dt = 0.5, .duration = 400, .base = 300 * MIB, .rate = 2 * MIB, .seed = 7 };

        v = verdict_at(&sp, p, 10);
        CHECK(!v.evaluated && !v.suspected && streq(v.reason, "warming up: the grace period ends in 20 s"));
        v = verdict_at(&sp, p, 40);
        CHECK(!v.evaluated && streq(v.reason, "not enough data yet: the 30 s window is judged in 14 s"));
        v = verdict_at(&sp, p, 60);
        CHECK(v.evaluated && v.suspected);
        CHECK(streq(v.reason,
                    "memory grew 60.0 MiB in 30 s (2.00 MiB/s), steadily: Mann-Kendall Z 4.5 over 12 floors"));
        CHECK(near(v.slope_bytes_per_s, 2 * MIB) && near(v.growth_bytes, 60 * MIB) && v.window_s == 30);
        CHECK(v.since_t_s == 30 && v.confidence > 0.99999);
        /* later, the longest passing window is reported */
        v = verdict_at(&sp, p, 390);
        CHECK(v.suspected && v.window_s == 300 && v.since_t_s == 90);
        CHECK(starts(v.reason, "memory grew 600.0 MiB in 5 min (2.00 MiB/s)"));

        struct spec flat = { .name = "flat", .dt = 1, .duration = 1000, .base = 300 * MIB, .seed = 7 };
        v = verdict_at(&flat, p, 1000);
        CHECK(v.evaluated && !v.suspected && v.window_s == 900);
        CHECK(streq(v.reason, "no steady growth: the floor of the last 15 min changed by +0 B (below 16.0 MiB)"));
        flat.noise = 0.01;
        v = verdict_at(&flat, p, 1000);
        CHECK(v.evaluated && !v.suspected &&
              starts(v.reason, "no steady growth: the floor of the last 15 min changed by "));

        for (size_t i = 0; i < ELEMENTSOF(reason_cases); i++) {
                const struct reason_case *c = &reason_cases[i];
                struct spec moment = c->sp;
                moment.dt = 0.5;
                moment.seed = 7;
                v = verdict_at(&moment, p, c->t);
                CHECK(!v.suspected && v.evaluated == c->evaluated);
                CHECK(c->whole ? streq(v.reason, c->reason) : starts(v.reason, c->reason));
                CHECK(!c->also || strstr(v.reason, c->also));
        }
}

static void test_fuzz_target(void) {
        static uint8_t buf[3 * 600 + 2];
        rng_seed(424242);
        for (int it = 0; it < 400; it++) {
                size_t size = 2 + (size_t)(rng_unit() * (sizeof buf - 2));
                for (size_t i = 0; i < size; i++)
                        buf[i] = (uint8_t)rng_next();
                if (it % 4 == 0)
                        buf[0] &= 0xfe; /* compact mode */
                if (it % 8 == 1) {      /* a memory-like series: climbing or flat with a dip */
                        buf[0] = 0;
                        for (size_t i = 2; i + 3 <= size; i += 3) {
                                buf[i] = 10;
                                unsigned v = 300 + (it % 16 == 1 ? (unsigned)(i / 3) : (i % 97 == 0 ? 0 : 5));
                                buf[i + 1] = (uint8_t)v;
                                buf[i + 2] = (uint8_t)(v >> 8);
                        }
                }
                LLVMFuzzerTestOneInput(buf, size);
        }
        /* raw mode with chosen values: NaN, infinities, huge and tiny */
        static const double odd[] = { NAN, INFINITY, -INFINITY, 1e308, -1e308, 5e-324, 0, -0.0, 1e18, -1 };
        struct {
                uint8_t head[2];
                double v[2 * 64];
        } __attribute__((packed)) raw;
        for (int it = 0; it < 200; it++) {
                raw.head[0] = 1;
                raw.head[1] = (uint8_t)rng_next();
                double t = 0;
                for (int i = 0; i < 64; i++) {
                        t += rng_unit() < 0.1 ? odd[rng_next() % ELEMENTSOF(odd)] : rng_unit();
                        raw.v[2 * i] = t;
                        raw.v[2 * i + 1] = rng_unit() < 0.1 ? odd[rng_next() % ELEMENTSOF(odd)] : rng_unit() * 1e9;
                }
                LLVMFuzzerTestOneInput((const uint8_t *)&raw, sizeof raw);
        }
}

int main(int argc, char *argv[]) {
        struct leak_params p;
        parse_verbose(argc, argv);
        leak_params_default(&p);
        test_theil_sen();
        test_mann_kendall();
        test_defaults();
        test_arguments();
        test_reasons(&p);
        test_fuzz_target();
        TEST_DONE();
}

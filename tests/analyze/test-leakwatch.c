/* SPDX-License-Identifier: MIT */
/* The per-run leak watch: floors kept at the shortest window's resolution,
 * the verdict turning suspected while memory grows, and clearing only after
 * clear_after without growth; marks restart the grace. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analyze/leakwatch.h"
#include "tap.h"

#define MIB (1024.0 * 1024.0)

struct run {
        struct leakwatch w;
        struct leak_params p;
        int64_t t0_ms;
        double t; /* seconds */
        int suspected_at, cleared_at;
};

/* Feeds samples every 0.5 s from r->t to until_s with bytes(t). */
static void feed(struct run *r, double until_s, double (*bytes)(double), int64_t clear_after_ms) {
        for (; r->t < until_s; r->t += 0.5) {
                enum leakwatch_change c = leakwatch_add(&r->w, &r->p, r->t, r->t0_ms + (int64_t)(r->t * 1000),
                                                        bytes(r->t), clear_after_ms);
                if (c == LEAKWATCH_SUSPECTED && r->suspected_at < 0)
                        r->suspected_at = (int)r->t;
                if (c == LEAKWATCH_CLEARED && r->cleared_at < 0)
                        r->cleared_at = (int)r->t;
        }
}

/* 2 MiB/s for 3 minutes, then flat. */
static double leak_then_flat(double t) {
        return 300 * MIB + 2 * MIB * (t < 180 ? t : 180);
}
static double flat(double t) {
        return 300 * MIB + (((int)(t * 2)) % 3) * 0.5 * MIB;
}

static void test_suspect_then_clear(void) {
        struct run r = { .t0_ms = 1700000000000, .suspected_at = -1, .cleared_at = -1 };
        leak_params_default(&r.p);
        CHECK_EQ_INT(leakwatch_init(&r.w, &r.p), 0);
        /* one floor per 2.5 s for the longest window */
        CHECK(r.w.res_s > 2.49 && r.w.res_s < 2.51);
        CHECK(r.w.cap >= 360 && r.w.cap <= 370);
        feed(&r, 170, leak_then_flat, 60000);
        CHECK(r.suspected_at > 0 && r.suspected_at <= 60);
        CHECK(r.w.suspected && r.w.ever_suspected);
        CHECK(r.w.v.suspected && r.w.v.slope_bytes_per_s > 1.6 * MIB && r.w.v.slope_bytes_per_s < 2.4 * MIB);
        CHECK(r.w.suspected_since_ms >= r.t0_ms + r.suspected_at * 1000 &&
              r.w.suspected_since_ms < r.t0_ms + (r.suspected_at + 1) * 1000);
        /* growth stops at 180 s: the verdict clears, but not before clear_after (60 s) */
        feed(&r, 600, leak_then_flat, 60000);
        CHECK(r.cleared_at >= 180 + 60);
        CHECK(!r.w.suspected && r.w.ever_suspected);
        CHECK(!r.w.v.suspected && strlen(r.w.v.reason) > 0);
        leakwatch_done(&r.w);
}

static void test_flat_and_mark(void) {
        struct run r = { .t0_ms = 1700000000000, .suspected_at = -1, .cleared_at = -1 };
        leak_params_default(&r.p);
        CHECK_EQ_INT(leakwatch_init(&r.w, &r.p), 0);
        feed(&r, 600, flat, 60000);
        CHECK_EQ_INT(r.suspected_at, -1);
        CHECK(r.w.evaluated_ms > 0 && r.w.v.evaluated && !r.w.suspected);
        leakwatch_done(&r.w);

        /* a mark restarts the grace: growth right after it is not judged yet */
        struct run m = { .t0_ms = 1700000000000, .suspected_at = -1, .cleared_at = -1 };
        leak_params_default(&m.p);
        CHECK_EQ_INT(leakwatch_init(&m.w, &m.p), 0);
        feed(&m, 100, flat, 60000);
        leakwatch_mark(&m.w, 100);
        feed(&m, 125, leak_then_flat, 60000); /* within the new grace */
        CHECK_EQ_INT(m.suspected_at, -1);
        leakwatch_done(&m.w);
}

/* A run that ends before its first verdict says so, whether or not the
 * detector ran; a verdict reached before the end stands. */
static void test_end(void) {
        static const double ends_s[] = { 5, 40, 300 };
        for (size_t i = 0; i < sizeof ends_s / sizeof ends_s[0]; i++) {
                struct run r = { .t0_ms = 1700000000000, .suspected_at = -1, .cleared_at = -1 };
                leak_params_default(&r.p);
                CHECK_EQ_INT(leakwatch_init(&r.w, &r.p), 0);
                feed(&r, ends_s[i], flat, 60000);
                bool judged = r.w.evaluated_ms != 0 && r.w.v.evaluated;
                char before[sizeof r.w.v.reason];
                snprintf(before, sizeof before, "%s", r.w.v.reason);
                leakwatch_end(&r.w, &r.p, ends_s[i]);
                if (judged) {
                        CHECK(ends_s[i] == 300 && !r.w.ended && r.w.v.evaluated);
                        CHECK(strcmp(before, r.w.v.reason) == 0);
                } else {
                        char want[64];
                        snprintf(want, sizeof want, "the run ended after %.0f s, before a verdict", ends_s[i]);
                        CHECK(r.w.ended && !r.w.v.evaluated && strncmp(r.w.v.reason, want, strlen(want)) == 0);
                        CHECK(!strstr(r.w.v.reason, "judged in"));
                }
                leakwatch_done(&r.w);
        }
}

/* The floors are kept in 4 bytes each, in KiB, at their buckets' times:
 * sampled every 10 s (4 buckets apart), a leak is still found over the
 * longest window, on floors that lie where they were sampled, and the
 * floors older than the longest window are gone. */
static void test_compact_sparse(void) {
        struct run r = { .t0_ms = 1700000000000, .suspected_at = -1, .cleared_at = -1 };
        leak_params_default(&r.p);
        CHECK_EQ_INT(leakwatch_init(&r.w, &r.p), 0);
        CHECK(sizeof *r.w.pts == 4);
        struct leak_verdict v = {};
        for (double t = 0; t <= 3000; t += 10) {
                if (leakwatch_feed(&r.w, t, 300 * MIB + 64 * 1024 * t))
                        CHECK_EQ_INT(leakwatch_evaluate(&r.w, &r.p, &v), 0);
        }
        CHECK(v.suspected && v.slope_bytes_per_s > 60 * 1024 && v.slope_bytes_per_s < 68 * 1024);
        CHECK(v.window_s <= 900 && v.since_t_s >= 3000 - 900 - 10);
        size_t kept = 0;
        for (size_t i = 0; i < r.w.cap; i++)
                kept += r.w.pts[i] != LEAKWATCH_NO_FLOOR;
        CHECK(kept >= 85 && kept <= r.w.cap / 4 + 1);
        leakwatch_done(&r.w);
}

/* Sample k of a process whose peaks rise while its floor stays flat: every
 * other sample is a peak, 64 MiB over the floor and 2 MiB/s higher each
 * second (a batch that takes more and more, freed after each); the rest
 * lie on a floor that moves by a few pages, up and down, but does not grow. */
static double peaky(int k, double t) {
        if (k % 2)
                return 364 * MIB + 2 * MIB * t;
        return 300 * MIB + 12 * 1024.0 * ((k * 7) % 5);
}

/* The watch judges the floor, not the peaks: no verdict over 10 minutes,
 * and every floor it keeps is its bucket's minimum, in KiB, as computed
 * here from the samples by hand. */
static void test_peaks_rise_floor_flat(void) {
        struct run r = { .t0_ms = 1700000000000, .suspected_at = -1, .cleared_at = -1 };
        leak_params_default(&r.p);
        CHECK_EQ_INT(leakwatch_init(&r.w, &r.p), 0);
        const double step_s = 0.5;
        const int n = 1200; /* 600 s */
        for (int k = 0; k < n; k++) {
                double t = k * step_s;
                enum leakwatch_change c = leakwatch_add(&r.w, &r.p, t, r.t0_ms + (int64_t)(t * 1000), peaky(k, t),
                                                        60000);
                if (c == LEAKWATCH_SUSPECTED && r.suspected_at < 0)
                        r.suspected_at = (int)t;
        }
        CHECK_EQ_INT(r.suspected_at, -1);
        CHECK(r.w.v.evaluated && !r.w.v.suspected && !r.w.ever_suspected);
        size_t checked = 0;
        for (int64_t i = r.w.last - (int64_t)r.w.cap + 1; i <= r.w.last; i++) {
                if (i < 0)
                        continue;
                double min = INFINITY;
                for (int k = 0; k < n; k++)
                        if ((int64_t)floor(k * step_s / r.w.res_s) == i && peaky(k, k * step_s) < min)
                                min = peaky(k, k * step_s);
                CHECK_U64(r.w.pts[i % (int64_t)r.w.cap], (uint64_t)round(min / 1024));
                checked++;
        }
        CHECK_EQ_INT(checked, 600 / 2.5 - 1); /* every bucket but the one still open */
        leakwatch_done(&r.w);
}

/* A floor equal to the one before is judged only at every
 * LEAKWATCH_REJUDGE-th such floor, while nothing is suspected; a floor that
 * moved is judged at once. */
static double constant(double t) {
        (void)t;
        return 300 * MIB;
}

static void test_same_floor_judged_less_often(void) {
        struct run r = { .t0_ms = 1700000000000, .suspected_at = -1, .cleared_at = -1 };
        leak_params_default(&r.p);
        CHECK_EQ_INT(leakwatch_init(&r.w, &r.p), 0);
        int judged = 0, floors = 0;
        int64_t last_judged = 0, last_floor = INT64_MIN;
        for (; r.t < 100; r.t += 0.5) {
                leakwatch_add(&r.w, &r.p, r.t, r.t0_ms + (int64_t)(r.t * 1000), constant(r.t), 60000);
                floors += r.w.has_last && r.w.last != last_floor;
                last_floor = r.w.has_last ? r.w.last : INT64_MIN;
                judged += r.w.evaluated_ms != last_judged;
                last_judged = r.w.evaluated_ms;
        }
        /* 39 floors in 100 s: the first judged, then every fourth */
        CHECK(floors >= 38 && floors <= 40);
        CHECK(judged >= floors / LEAKWATCH_REJUDGE && judged <= floors / LEAKWATCH_REJUDGE + 2);
        CHECK(r.w.v.evaluated && !r.w.suspected);
        /* a floor 1 MiB higher: judged as it completes */
        int64_t completed = 0;
        for (double until = r.t + 2 * r.w.res_s; r.t < until; r.t += 0.5) {
                leakwatch_add(&r.w, &r.p, r.t, r.t0_ms + (int64_t)(r.t * 1000), 301 * MIB, 60000);
                if (r.w.last != last_floor && completed == 0 && r.w.same_floor == false)
                        completed = r.t0_ms + (int64_t)(r.t * 1000);
                last_floor = r.w.last;
        }
        CHECK(completed > 0);
        CHECK_EQ_INT(r.w.evaluated_ms, completed);
        leakwatch_done(&r.w);
}

int main(void) {
        test_suspect_then_clear();
        test_flat_and_mark();
        test_end();
        test_compact_sparse();
        test_peaks_rise_floor_flat();
        test_same_floor_judged_less_often();
        TEST_DONE();
}

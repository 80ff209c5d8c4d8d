/* SPDX-License-Identifier: MIT */
/* The leak verdict: a pure function over a series of (time, bytes) that
 * says whether memory grows steadily, and why it decided. No I/O, no state,
 * no globals: safe to call from any thread. etc/mlmond.conf [leak] says why
 * each default; tests/analyze/test-leak*.c and tests/bench/leak-sim.c measure them.
 *
 * Method, per window of the look-back (windows_s: 30s,1m,2m,5m,15m):
 *  - Judged only on samples after the warm-up grace (grace_s after the
 *    registration or the last mark -- grace_from_t_s -- or after a restart),
 *    once they span >= min_coverage of the window, with no gap longer than
 *    max_gap_frac of it, on >= min_floors floors.
 *  - Floors: the minima of LEAK_BUCKETS equal buckets (what memory falls
 *    back to; blind to upward excursions). Single-sample outliers are left
 *    out. Under a garbage collector's sawtooth (sharp drops: >= drop_min_bytes
 *    and >= drop_noise_k x the noise), the floors are the troughs of the GC
 *    cycles that start in the window instead (grouped into <= LEAK_BUCKETS).
 *  - Growth = Theil-Sen slope of the floors x the span judged. Suspected when
 *    all of:
 *      growth >= min_growth_bytes, min_growth_pct of the starting level, and
 *        min_growth_se standard errors (as the sample noise predicts them);
 *      the last third still grows (>= min_end_ratio x the window's slope: a
 *        ramp that levelled off -- model load, cache warm-up -- is not a
 *        leak), and so does each half (>= min_part_ratio x the faster of the
 *        other and the whole: a step, or growth that just started, is not);
 *      one step does not fit the floors as well as a line (max_step_fit);
 *      Mann-Kendall Z >= min_z on the floors (a trend, not a fluke);
 *      the growth floor still holds at Sen's lower confidence bound of the
 *        slope, growth_bound_z standard errors down;
 *      the window ends above every earlier floor by >= min_new_high of its
 *        growth (memory back to an earlier level is not leaking).
 *  - Suspected if any window passes; the longest passing window is
 *    reported (the most evidence, the steadiest slope). Else the judged
 *    window that came closest to a verdict, with the check that failed in
 *    `reason`. A fall to below restart_frac of the level is a restart: the
 *    grace starts again.
 * The verdict clears when no window passes; stateful hysteresis (how long
 * growth must stop) is the caller's (leak_clear_after).
 *
 * Sensitivity with the defaults: the slowest rate reported on a process of
 * at most 320 MiB is 16 MiB per 15 min (64 MiB/h); 5% of the level per
 * 15 min above that. Slower leaks need a longer window in windows_s. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/leak-stats.h"

#define LEAK_MAX_WINDOWS 8
#define LEAK_MAX_POINTS (1u << 20)

/* Every field is a setting (mlmond.conf [leak]); leak_params_default() sets
 * them all. The first six are the ones to tune. */
struct leak_params {
        double windows_s[LEAK_MAX_WINDOWS]; /* strictly ascending, > 0 */
        size_t n_windows;                   /* 1..LEAK_MAX_WINDOWS */
        double grace_s;                     /* judge only samples after grace start + grace_s, >= 0 */
        double min_growth_bytes;            /* growth over the window at least this... */
        double min_growth_pct;              /* ...and at least this % of the window's starting level */
        double min_z;                       /* Mann-Kendall Z of the floors at least this */
        /* Finer settings; the defaults rarely need changing. */
        double min_growth_se;        /* growth >= this many of its standard errors (predicted from the noise) */
        double growth_bound_z;       /* the growth floor also holds at the slope's lower confidence bound,
                                      * this many standard errors down (Sen's interval), >= 0 */
        double min_coverage;         /* a window is judged once samples span this fraction of it, (0,1] */
        double max_gap_frac;         /* ...and no gap between samples is longer than this fraction of it, (0,1] */
        size_t min_floors;           /* fewest floors a window is judged on, 3..LEAK_BUCKETS */
        double min_part_ratio;       /* each half's slope >= this x the faster of the other and the window's */
        double min_end_ratio;        /* the last third's slope >= this x the window's (growth goes on) */
        double max_step_fit;         /* one step fitting the floors within this x a line's squared error: a step */
        double min_new_high;         /* the window's end above every earlier floor by this x its growth */
        double drop_min_bytes;       /* a fall between samples at least this... */
        double drop_noise_k;         /* ...and this many times the sample-to-sample noise is a drop (a GC) */
        double outlier_noise_k;      /* a sample this many times the noise below/above both neighbours (which
                                      * agree) is an outlier */
        double sawtooth_stop_factor; /* no drop for this many times the longest GC cycle: the sawtooth stopped,
                                      * >= 1 */
        double restart_frac;         /* a fall to below this fraction of the level is a restart, [0,1) */
};

/* The defaults (etc/mlmond.conf [leak] lists them, and why). */
void leak_params_default(struct leak_params *p);
/* Every parameter within its documented range (leak_evaluate refuses others). */
bool leak_params_valid(const struct leak_params *p);

struct leak_verdict {
        bool suspected;
        bool evaluated;              /* false: not judged yet (grace, too little data, a gap, a slow sawtooth);
                                 * the numbers below are then 0 and only `reason` says why */
        double slope_bytes_per_s;    /* of the reported window (the longest passing, else the longest judged) */
        double growth_bytes;         /* slope x window_s */
        double window_s;             /* the span judged: from its first sample to the last one */
        double confidence;           /* 0..1: 1 - one-sided p-value of the Mann-Kendall Z */
        double since_t_s;            /* start of the reported window, in the series' time */
        double slope_lo_bytes_per_s; /* the slope's lower confidence bound (growth_bound_z standard errors down)
                                      * where the window's growth passed every check but perhaps that bound (a
                                      * leak, or a steady trend to a new high short of one); else 0: what a
                                      * forecast of when memory runs out may divide by */
        char reason[256];            /* one sentence a human can act on; it does not name the metric, e.g.
                                 * "memory grew 96.0 MiB in 45 s (2.13 MiB/s), steadily: Mann-Kendall Z 4.5
                                 * over 12 floors", "no steady growth: the floor of the last 5 min changed by
                                 * +1.2 MiB (below 16.0 MiB)", "growth stopped: the last 10 s are flat after
                                 * +20.0 MiB" */
};

/* series: n points, ascending in time (equal times allowed), e.g. the run's
 * samples or per-interval minima of them; `grace_from_t_s`: when the grace
 * starts (registration or the last mark; -INFINITY for none). p may be NULL
 * for the defaults. Only the look-back -- the points within the longest
 * window plus grace_s of the last one -- is read (older points cost nothing
 * and are not validated). Returns 0, or -EINVAL for bad arguments (ret NULL,
 * series NULL with n > 0, n > LEAK_MAX_POINTS, NaN grace start, parameters
 * out of range, a non-finite point or descending times in the look-back),
 * or -ENOMEM. On error *ret (when not NULL) is set to not evaluated, with
 * reason "invalid input". O(n) in the look-back: ~6-15 us for 15 min at
 * 250 ms (tests/bench/leak-sim -b). */
int leak_evaluate(const struct leak_point *series, size_t n, double grace_from_t_s, const struct leak_params *p,
                  struct leak_verdict *ret);

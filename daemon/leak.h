/* SPDX-License-Identifier: MIT */
/* The leak verdict: a pure function over a series of (time, bytes) that
 * says whether memory grows steadily, and why it decided. No I/O, no state.
 *
 * Method (see leak.c for the reasoning behind each step and each default):
 *  - Look back over several windows (leak_windows: 30s,1m,2m,5m,15m). A
 *    window is judged only on samples after the warm-up grace (grace_s after
 *    registration or the last mark, or after a counter restart), once those
 *    cover >= min_coverage of its span with no gap longer than max_gap_frac of
 *    it.
 *  - Split the judged span into LEAK_BUCKETS buckets and keep each bucket's
 *    minimum: the floor under a garbage collector's sawtooth. Single-sample
 *    outliers are left out. Where the series shows sharp drops (sawtooth),
 *    buckets must be at least as long as the longest stretch between drops,
 *    so every bucket holds a trough (fewer buckets then, min_floors at least).
 *  - Mann-Kendall trend test on the floors (Z >= min_z) and a Theil-Sen slope
 *    over them; growth = slope x judged span.
 *  - Growth must reach min_growth_bytes and min_growth_pct of the window's
 *    starting level; the first half of the window must grow too (a step is
 *    not a trend) and the last third must still grow (a ramp that levelled
 *    off -- model load, cache warm-up -- is not a leak): each at >= the
 *    min_start_ratio / min_end_ratio fraction of the window's slope.
 *  - Suspected if any window passes; the longest passing window is reported
 *    (the most evidence and the steadiest slope), else the longest judged.
 * The verdict clears when no window passes; stateful hysteresis (how long
 * growth must stop) is the caller's (leak_clear_after). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEAK_BUCKETS 12
#define LEAK_MAX_WINDOWS 8
#define LEAK_MAX_POINTS (1u << 20)

struct leak_params {
        double windows_s[LEAK_MAX_WINDOWS]; /* strictly ascending, > 0 */
        size_t n_windows;                   /* 1..LEAK_MAX_WINDOWS */
        double grace_s;            /* ignore samples before grace start + grace_s */
        double min_growth_bytes;   /* growth over the window at least this... */
        double min_growth_pct;     /* ...and at least this % of the window's starting level */
        double min_z;              /* Mann-Kendall Z on the bucket floors */
        double growth_bound_z;     /* the growth floor holds at the slope's lower confidence bound, this many
                                    * standard errors down (Sen's interval) */
        /* Finer settings; the defaults rarely need changing. */
        double min_coverage;       /* a window is judged once samples span this fraction of it (0,1] */
        double max_gap_frac;       /* ...and no gap between samples is longer than this fraction of it (0,1] */
        size_t min_floors;         /* fewest non-empty buckets a window is judged on, 3..LEAK_BUCKETS */
        double min_growth_se;      /* ...and at least this many of its standard errors, as the sample noise
                                    * predicts them */
        double min_part_ratio;     /* each half's slope >= this x the faster of the other and the window's */
        double min_end_ratio;      /* last third's slope >= this x the window's (growth goes on) */
        double max_step_fit;       /* one step fitting the floors with < this x a line's squared error: a step */
        double min_new_high;       /* the window's end above every earlier floor by this x its growth */
        double drop_min_bytes;     /* a fall between samples at least this... */
        double drop_noise_k;       /* ...and this many times the sample-to-sample noise is a drop (GC) */
        double outlier_noise_k;    /* one sample this many times the noise away from both neighbours: an outlier */
        double sawtooth_stop_factor; /* no drop for this many times the longest cycle: the sawtooth stopped */
        double restart_frac;       /* a drop to below this fraction of the level is a restart: grace again */
};

/* Defaults: windows 30s,1m,2m,5m,15m; grace 30 s; 16 MiB; 5%; Z 3.0;
 * coverage 0.8; gap 0.25; 8 floors; start 0.5; end 0.5; drops >= 8 MiB and
 * >= 6 x noise; sawtooth stopped after 2 x its longest cycle; restart 0.25. */
void leak_params_default(struct leak_params *p);

struct leak_point {
        double t_s; /* seconds, any origin, ascending */
        double bytes;
};

struct leak_verdict {
        bool suspected;
        bool evaluated;         /* false: not judged yet (grace, too little data, a gap, a slow sawtooth);
                                 * the numbers below are then 0 and only `reason` says why */
        double slope_bytes_per_s; /* of the reported window (the longest passing, else the longest judged) */
        double growth_bytes;    /* slope x window_s */
        double window_s;        /* the span judged: from its first sample to the last one */
        double confidence;      /* 0..1: 1 - one-sided p-value of the Mann-Kendall Z */
        double since_t_s;       /* start of the reported window, in the series' time */
        char reason[256];       /* one sentence a human can act on; it does not name the metric */
};

/* series: n points, ascending in time (equal times allowed); `grace_from_t_s`:
 * the time the grace period starts (registration or the last mark; -INFINITY
 * for none). p may be NULL for the defaults. Returns 0, or -EINVAL for bad
 * arguments (ret or a non-empty series NULL, a non-finite point, descending
 * times, n > LEAK_MAX_POINTS, NaN grace start, parameters out of range), or
 * -ENOMEM. On error *ret (when not NULL) is set to not evaluated. */
int leak_evaluate(const struct leak_point *series, size_t n, double grace_from_t_s, const struct leak_params *p,
                  struct leak_verdict *ret);

/* Building blocks, exposed for tests; inputs must be finite. */
double theil_sen_slope(const double *x, const double *y, size_t n);  /* median of pairwise slopes (pairs with
                                                                      * distinct x); NaN if there is none */
double mann_kendall_z(const double *y, size_t n);                    /* with tie correction; 0 if n < 3 */

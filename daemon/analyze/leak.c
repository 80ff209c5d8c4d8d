/* SPDX-License-Identifier: MIT */
/* Leak verdict, see leak.h for the contract. The reasoning, step by step
 * (each default is explained where leak_params_default() sets it; the
 * figures quoted come from tests/test-leak.c and tests/bench/leak-sim.c):
 *
 * Why floors. Memory of a healthy process moves up and down: allocation
 * bursts, temporary buffers, a garbage collector's sawtooth. What a leak
 * raises is the floor -- the level the process falls back to. The minimum of
 * each bucket is that floor, and it ignores every upward excursion (positive
 * outliers included) for free. A single-sample dip (a downward outlier:
 * lower than both neighbours, which agree with each other) is left out, and
 * so is a last sample that fell sharply, until the next one says whether it
 * was a drop or an outlier.
 *
 * Why rank statistics on 12 floors. Mann-Kendall asks "do later floors tend
 * to be higher than earlier ones?" using only the order of the floors: one
 * wild floor moves S by at most n-1, and the noise's scale does not matter.
 * Theil-Sen (median of pairwise slopes) estimates the rate, and ignores up to
 * 29% of wild floors. With 12 floors a perfectly monotone series reaches
 * Z = 4.46, so Z >= 3 asks for about 45 of the 66 pairs to agree more than
 * disagree; with 8 floors (the fewest we judge) Z >= 3 needs 26 of 28 pairs:
 * a near-perfect staircase.
 *
 * Why several windows. A fast leak must be flagged within a minute; a slow
 * one only shows over minutes. Each window is judged on its own and the
 * shortest one that can see a given rate finds it first: 2 MiB/s passes the
 * 16 MiB floor in the 30 s window, 0.1 MiB/s in the 5 min one, and a leak
 * under a garbage collector's sawtooth in the first window that holds 8 of
 * its cycles.
 *
 * Why "sustained, not big". The growth must clear three floors: bytes (16
 * MiB: below that nobody acts), a share of the level (5%: a big process's
 * normal churn is bigger), and the noise (8 standard errors of the growth,
 * as the measured sample noise predicts them: noise alone never gets there,
 * and the slope reported is then known to ~12%). Then its shape: a step (one
 * big allocation) has a huge delta but all of it at once -- a flat half, a
 * flat last third, and a single jump fits it as well as a line; a ramp that
 * levels off (model load, cache warm-up) has a flat last third; growth that
 * just started has a flat first half (a shorter window, all in the growth,
 * finds it). A leak grows in every part of the window.
 *
 * Why the confidence bound. The daemon judges every tick; if a window's
 * noisy slope clears the growth floor on one tick in fifty, re-judging finds
 * that tick, and reports its flattering slope. Asking the floor to hold at
 * the slope's lower confidence bound (Sen's interval, 2 standard errors)
 * keeps the first verdict's slope within 20% at noise up to 1% of the level
 * (+25-50% without it, measured).
 *
 * Why "a new high". A cache refilling after a flush, load coming back, a
 * mean-reverting churn: memory that climbs steadily but only back to where
 * it was before. A leak climbs to levels it never had. Half of the window's
 * growth must lie above every earlier floor (since the grace).
 *
 * Why the sawtooth rule. With buckets shorter than a GC cycle, some buckets
 * hold no trough and their minimum sits on the climb: the floors follow the
 * sawtooth, and a window that covers a climb sees "steady growth". So the
 * series' drops (falls between consecutive samples larger than both
 * drop_min_bytes and drop_noise_k x the sample-to-sample noise) cut it into
 * cycles, and where there are cycles a window's floors are their troughs:
 * the minimum of each cycle that starts in the window (grouped into at most
 * 12 runs of consecutive cycles), judged once the window holds min_floors
 * cycles. The current, unfinished cycle may be mid-climb: a window that lies
 * within it holds no trough and waits -- until the climb lasts
 * sawtooth_stop_factor times the longest cycle seen: then the collector has
 * stopped (or the growth outran it), and windows after the last drop are
 * judged like any other series. The stretch before the first drop counts as
 * a cycle when it is short enough to be one (<= longest window /
 * min_floors); a lone drop after a long quiet stretch is a free(), not a GC.
 * Drops need a clean noise estimate: the sample noise is measured as each
 * sample's distance from the line through its two neighbours, which a climb
 * or a trend does not inflate (sample-to-sample differences would: under a
 * 10 s cycle seen through 2.5 s floors, the climb's steps are 2-3x the noise
 * and hid the drops).
 *
 * Why a restart rule. A value that falls below restart_frac of the level
 * before it (and stays there) is a process restart or a counter reset: what
 * came before says nothing about what comes after, and the new process will
 * load its model again. Samples before it are dropped and the grace starts
 * again at the restart.
 *
 * Gaps (missing samples) are not filled: a window whose span holds a gap
 * longer than max_gap_frac of it is not judged, the others are. Growth
 * hidden in a gap is a step like any other.
 *
 * Cost per evaluation: a binary search, one pass over the look-back (the
 * longest window plus the grace: validation, outliers, drops, restarts,
 * gaps), two selections on 256 noise residuals, one pass per window judged
 * (bucket minima; windows are judged longest first and the first passing one
 * ends it), O(1) work on <= 12 floors, and for a window that passes every
 * other test one pass over what came before it (the new-high test). O(n) in
 * all: ~6-15 us for 15 min at 250 ms on this project's 2-core machine. */
#include "analyze/leak.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

/* The noise estimate looks at the last 256 samples (2 min at 500 ms): the
 * lower quartile of 256 deviations is within ~11% (one standard error) of
 * the noise, and two selections on them cost ~0.5 us. */
#define NOISE_SAMPLES 256

/* The lower quartile of |x - median| / 0.31864 estimates the standard
 * deviation of a normal distribution (P(|Z| < 0.31864) = 1/4). */
#define QUARTILE_ABS_NORMAL 0.31864

void leak_params_default(struct leak_params *p) {
        *p = (struct leak_params){
                /* 30 s: the fastest verdict (2 MiB/s = 60 MiB per window);
                 * 1 min: 12 samples at 5 s intervals, and noisy series;
                 * 2 min: 12 samples at 10 s, GC cycles up to 15 s;
                 * 5 min: GC cycles up to 37 s, ~3 MiB/min;
                 * 15 min: GC cycles up to 112 s, ~1 MiB/min (the daemon's
                 * look-back; n <= 3600 at 250 ms). */
                .windows_s = { 30, 60, 120, 300, 900 },
                .n_windows = 5,
                /* Start-up (loading a model, filling caches) is growth but
                 * not a leak. A start-up ramp that ends by grace + 20 s is
                 * never flagged (the 30 s window then sees its last third
                 * flat): a 4 GiB model load in 20 s with room to spare.
                 * And 30 s + the 30 s window on 80% of it = a verdict 54 s
                 * after registration. */
                .grace_s = 30,
                /* Below 16 MiB nobody acts on a leak, and it is above the
                 * jitter of allocators and page-granular RSS. */
                .min_growth_bytes = 16 * MIB,
                /* 5% of a big process: a 4 GiB process must grow 205 MiB
                 * in the window; its normal churn is larger than a small
                 * process's. */
                .min_growth_pct = 5,
                /* One-sided p = 0.00135 per independent window. */
                .min_z = 3.0,
                /* The growth floor must hold at the slope's lower
                 * confidence bound two standard errors down (97.7%
                 * one-sided): a window whose noise lifted its slope over
                 * the floor waits. This also keeps the first reported
                 * slope honest: without it, re-judging every tick picks
                 * the tick whose noise flattered the slope most (+25-50%
                 * at 1% noise, measured; within 20% with it). */
                .growth_bound_z = 2.0,

                /* A window judged on 80% of its span: the 30 s one is
                 * judged 24 s after the grace, and a few lost samples do
                 * not stop a verdict. */
                .min_coverage = 0.8,
                /* A gap longer than a quarter of the window would leave 3
                 * of the 12 buckets empty: the floors say too little. */
                .max_gap_frac = 0.25,
                /* 8 floors: the fewest on which Z >= 3 is possible (a
                 * perfect staircase of 8 gives 3.34; of 7, 2.85). */
                .min_floors = 8,
                /* The growth must also be 8 of its standard errors (as the
                 * sample noise predicts them): noise alone never gets that
                 * far, and the first slope reported, picked by the first
                 * tick that clears the floor, is off by at most ~2 of them
                 * (25%); typically < 10%. */
                .min_growth_se = 8,
                /* Each half of the window must grow at half the rate of
                 * the other (and of the whole): a noisy leak does (its
                 * halves' slopes scatter around 1x), a step or growth that
                 * started in the window does not (~0x). */
                .min_part_ratio = 0.5,
                /* The last third too: a ramp that levels off has a flat
                 * one. Half, not more: a leak's last third is 4 floors,
                 * and their slope scatters. */
                .min_end_ratio = 0.5,
                /* A single jump that fits the floors within twice a line's
                 * squared error is a step. A leak that clears the growth
                 * floor (8 standard errors) scores ~2.5 or more (1 + 0.024
                 * (growth/floor noise)^2 on 12 floors, less what the best
                 * of 11 splits wins by chance, ~0.2); a step 0.1-1.5,
                 * depending on how much the noise makes its flat sides
                 * look like a climb. At 1.0, 5 of 400 steps of 300-600 MiB
                 * on 3.5 GiB with 2% noise passed for leaks; at 2.0, none,
                 * and no leak of test-leak or leak-sim is found later. */
                .max_step_fit = 2.0,
                /* Half of the window's growth must be above every earlier
                 * floor: a leak only climbs, churn comes back down. */
                .min_new_high = 0.5,
                /* A drop smaller than half the growth floor cannot fake a
                 * 16 MiB trend: below 8 MiB a sawtooth needs no care. */
                .drop_min_bytes = 8 * MIB,
                /* 6 x the standard deviation of sample-to-sample
                 * differences: noise alone never falls that far (1e-9 per
                 * sample), even when the estimate of the noise comes out
                 * 25% low. At 4, three noise falls in 5 min (1% noise, 500
                 * ms) passed for a 2-min GC cycle and held every window. */
                .drop_noise_k = 6,
                /* A sample 4 standard deviations (of differences, 5.7 of
                 * the noise) below both of its neighbours, which agree
                 * with each other, is an outlier: left out of the floors,
                 * and not a drop. Lower than the drop threshold: ruling
                 * out a sample costs nothing, a wild floor does. */
                .outlier_noise_k = 4,
                /* GC cycles vary; one twice as long as any seen means the
                 * collector stopped freeing (or the growth outran it). */
                .sawtooth_stop_factor = 2,
                /* RSS that falls to a quarter in one sample did not GC:
                 * the process restarted or the counter was reset. */
                .restart_frac = 0.25,
        };
}

bool leak_params_valid(const struct leak_params *p) {
        if (p->n_windows < 1 || p->n_windows > LEAK_MAX_WINDOWS)
                return false;
        for (size_t i = 0; i < p->n_windows; i++) {
                if (!isfinite(p->windows_s[i]) || p->windows_s[i] <= 0)
                        return false;
                if (i > 0 && !(p->windows_s[i] > p->windows_s[i - 1]))
                        return false;
        }
        if (!isfinite(p->grace_s) || p->grace_s < 0)
                return false;
        if (!isfinite(p->min_growth_bytes) || p->min_growth_bytes < 0)
                return false;
        if (!isfinite(p->min_growth_pct) || p->min_growth_pct < 0)
                return false;
        if (!isfinite(p->min_z))
                return false;
        if (!isfinite(p->growth_bound_z) || p->growth_bound_z < 0)
                return false;

        if (!(p->min_coverage > 0 && p->min_coverage <= 1))
                return false;
        if (!(p->max_gap_frac > 0 && p->max_gap_frac <= 1))
                return false;
        if (p->min_floors < 3 || p->min_floors > LEAK_BUCKETS)
                return false;
        if (!isfinite(p->min_growth_se) || p->min_growth_se < 0)
                return false;
        if (!isfinite(p->min_part_ratio) || p->min_part_ratio < 0)
                return false;
        if (!isfinite(p->min_end_ratio) || p->min_end_ratio < 0)
                return false;
        if (!isfinite(p->max_step_fit) || p->max_step_fit < 0)
                return false;
        if (!isfinite(p->min_new_high) || p->min_new_high < 0)
                return false;
        if (!isfinite(p->drop_min_bytes) || p->drop_min_bytes < 0)
                return false;
        if (!isfinite(p->drop_noise_k) || p->drop_noise_k < 0)
                return false;
        if (!isfinite(p->outlier_noise_k) || p->outlier_noise_k < 0)
                return false;
        if (!isfinite(p->sawtooth_stop_factor) || p->sawtooth_stop_factor < 1)
                return false;
        if (!(p->restart_frac >= 0 && p->restart_frac < 1))
                return false;
        return true;
}

/* ---- small statistics ---------------------------------------------------- */

/* Rearranges a[0..n) so that a[k] is the k-th smallest, everything before it
 * <= it and everything after >= it. Quickselect with a median-of-three pivot
 * and a branch-free Lomuto partition: on fresh data the partition's branches
 * would be mispredicted half the time (4-5x slower, measured). Values equal
 * to the pivot are gathered next to it, so that many equal values (a flat,
 * page-quantised series) do not make it quadratic. */
static void select_kth(double *a, size_t n, size_t k) {
        size_t lo = 0, hi = n; /* k in [lo, hi) */
        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;
                double x = a[lo], y = a[mid], z = a[hi - 1];
                double pivot = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y);
                size_t pi = pivot == y ? mid : pivot == z ? hi - 1 : lo;
                double t = a[pi];
                a[pi] = a[hi - 1];
                a[hi - 1] = t;
                size_t st = lo, neq = 0;
                for (size_t i = lo; i < hi - 1; i++) { /* a[lo..st) < pivot <= a[st..i) */
                        double v = a[i];
                        a[i] = a[st];
                        a[st] = v;
                        st += v < pivot;
                        neq += v == pivot;
                }
                a[hi - 1] = a[st];
                a[st] = pivot;
                if (k == st)
                        return;
                if (k < st) {
                        hi = st;
                        continue;
                }
                size_t eq = st + 1;
                if (neq > 0) {
                        for (size_t i = st + 1; i < hi; i++) { /* a[st+1..eq) == pivot < a[eq..i) */
                                double v = a[i];
                                a[i] = a[eq];
                                a[eq] = v;
                                eq += v == pivot;
                        }
                        if (k < eq)
                                return;
                }
                lo = eq;
        }
}

/* Median of a[0..n), n >= 1; reorders a. */
static double median_inplace(double *a, size_t n) {
        size_t h = n / 2;
        select_kth(a, n, h);
        if (n % 2)
                return a[h];
        double lo_max = a[0];
        for (size_t i = 1; i < h; i++)
                if (a[i] > lo_max)
                        lo_max = a[i];
        return (lo_max + a[h]) / 2;
}

/* Theil-Sen with caller's scratch of n(n-1)/2 doubles. */
static double theil_sen_buf(const double *x, const double *y, size_t n, double *buf) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                        double dx = x[j] - x[i];
                        if (dx != 0)
                                buf[k++] = (y[j] - y[i]) / dx;
                }
        return k ? median_inplace(buf, k) : NAN;
}

double theil_sen_slope(const double *x, const double *y, size_t n) {
        if (!x || !y || n < 2)
                return NAN;
        if (n > ((size_t)1 << 16)) /* 2^31 pairs: not what this is for */
                return NAN;
        double small[LEAK_BUCKETS * (LEAK_BUCKETS - 1) / 2];
        double *buf = small;
        size_t pairs = n * (n - 1) / 2;
        if (pairs > sizeof(small) / sizeof(small[0])) {
                buf = malloc(pairs * sizeof(double));
                if (!buf)
                        return NAN;
        }
        double r = theil_sen_buf(x, y, n, buf);
        if (buf != small)
                free(buf);
        return r;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* Mann-Kendall: S (concordant minus discordant pairs) and its variance
 * under "no trend", with the tie correction; `sorted` is scratch of n
 * doubles. */
static double mann_kendall_s(const double *y, size_t n, double *sorted, double *var_ret) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++)
                        s += (y[j] > y[i]) - (y[j] < y[i]);
        memcpy(sorted, y, n * sizeof(double));
        if (n <= LEAK_BUCKETS) /* insertion sort: no calls through a pointer */
                for (size_t i = 1; i < n; i++) {
                        double v = sorted[i];
                        size_t j = i;
                        for (; j > 0 && sorted[j - 1] > v; j--)
                                sorted[j] = sorted[j - 1];
                        sorted[j] = v;
                }
        else
                qsort(sorted, n, sizeof(double), cmp_double);
        double nn = (double)n;
        double var = nn * (nn - 1) * (2 * nn + 5);
        for (size_t i = 0; i < n;) {
                size_t j = i + 1;
                while (j < n && sorted[j] == sorted[i])
                        j++;
                double t = (double)(j - i);
                var -= t * (t - 1) * (2 * t + 5);
                i = j;
        }
        *var_ret = var / 18;
        return s;
}

/* Z with the continuity correction: (S -+ 1) / sqrt(var). */
static double mann_kendall_zs(double s, double var) {
        if (var <= 0 || s == 0)
                return 0;
        return (s > 0 ? s - 1 : s + 1) / sqrt(var);
}

static double mann_kendall_buf(const double *y, size_t n, double *sorted) {
        if (n < 3)
                return 0;
        double var, s = mann_kendall_s(y, n, sorted, &var);
        return mann_kendall_zs(s, var);
}

double mann_kendall_z(const double *y, size_t n) {
        if (!y || n < 3)
                return 0;
        double small[LEAK_BUCKETS];
        double *buf = small;
        if (n > LEAK_BUCKETS) {
                buf = malloc(n * sizeof(double));
                if (!buf)
                        return NAN;
        }
        double z = mann_kendall_buf(y, n, buf);
        if (buf != small)
                free(buf);
        return z;
}

/* ---- formatting ------------------------------------------------------------ */

static void fmt_bytes(char *b, size_t sz, double v, bool plus) {
        const char *sign = v < 0 ? "-" : plus ? "+" : "";
        double a = fabs(v);
        if (a >= 1024 * MIB)
                snprintf(b, sz, "%s%.2f GiB", sign, a / (1024 * MIB));
        else if (a >= MIB)
                snprintf(b, sz, "%s%.1f MiB", sign, a / MIB);
        else if (a >= 1024)
                snprintf(b, sz, "%s%.1f KiB", sign, a / 1024);
        else
                snprintf(b, sz, "%s%.0f B", sign, a);
}

static void fmt_rate(char *b, size_t sz, double bps) {
        double a = fabs(bps);
        if (a >= 0.1 * MIB || a == 0)
                snprintf(b, sz, "%.2f MiB/s", bps / MIB);
        else if (a * 60 >= 0.1 * MIB)
                snprintf(b, sz, "%.2f MiB/min", bps * 60 / MIB);
        else
                snprintf(b, sz, "%.2f MiB/h", bps * 3600 / MIB);
}

static void fmt_dur(char *b, size_t sz, double s) {
        if (s < 100)
                snprintf(b, sz, "%.0f s", s);
        else if (s < 6000) {
                double m = s / 60;
                if (fabs(m - round(m)) < 0.05)
                        snprintf(b, sz, "%.0f min", m);
                else
                        snprintf(b, sz, "%.1f min", m);
        } else
                snprintf(b, sz, "%.1f h", s / 3600);
}

/* ---- the evaluation ---------------------------------------------------------- */

enum {
        PT_OK = 0,
        PT_SPIKE_LOW,  /* lower than both neighbours, which agree: an outlier */
        PT_SPIKE_HIGH, /* higher than both neighbours, which agree */
        PT_PENDING,    /* the last sample, after a sharp fall: drop or outlier? */
};

enum why {
        /* judged */
        W_PASS,
        /* failed, in the order of the checks (the later, the closer to a
         * verdict) */
        W_GROWTH,   /* growth below the floor */
        W_END,      /* the last third is flat (levelled off) */
        W_START,    /* the first half grows too slowly (a step, a recent start) */
        W_STEADY,   /* the second half grows too slowly (a step, slowing down) */
        W_STEP,     /* one step fits better than a line */
        W_TREND,    /* Z below min_z */
        W_UNSURE,   /* growth above the floor, its lower confidence bound below */
        W_OLD_HIGH, /* back to an earlier level only */
        /* not judged */
        W_GRACE,    /* no sample after the grace yet */
        W_COVERAGE, /* too short a span after the grace */
        W_GAP,      /* a gap */
        W_SAWTOOTH, /* too few GC cycles in the window */
        W_SPARSE,   /* too few non-empty buckets */
        W_SKIPPED,  /* a longer window passed: not looked at */
};

struct window_result {
        enum why why;
        double w;     /* nominal window */
        double span;  /* judged span */
        double since; /* first sample judged */
        double slope, growth, z, need, part_slope;
        size_t floors;
        double gap, cycle, wait;                   /* for the reasons of W_GAP, W_SAWTOOTH, W_GRACE/W_COVERAGE */
        double end_from;                           /* W_END: where the last third starts */
        double prior_t;                            /* W_OLD_HIGH: when the floor was that high */
        double fx[LEAK_BUCKETS], fy[LEAK_BUCKETS]; /* the floors */
        double level;                              /* at the window's start */
        double growth_lo;                          /* at the lower confidence bound of the slope */
        double growth_se;                          /* its standard error, predicted from the sample noise */
        bool stats;                                /* slope, level, growth, need known (else computed if reported) */
};

static bool judged(enum why w) {
        return w <= W_OLD_HIGH;
}

/* How far a judged window got through the checks: W_PASS is the verdict,
 * the failures rank in the order of the checks. */
static int progress(enum why w) {
        return w == W_PASS ? W_OLD_HIGH + 1 : (int)w;
}

/* What leak_evaluate() learnt about the series, for the windows. */
struct ctx {
        const struct leak_point *s;
        size_t n;
        double t_end;
        const unsigned char *pt; /* kinds of s[lo..n) */
        size_t lo;
        size_t first;        /* first sample after the last restart (>= lo) */
        double s0;           /* the grace ends */
        const double *drops; /* times of confirmed drops after `first`, ascending */
        size_t nd;
        double longest;     /* longest GC cycle seen; 0: no sawtooth */
        bool stopped;       /* the current cycle outlasted sawtooth_stop_factor x longest */
        const double *gaps; /* (end time, length) of the gaps longer than max_gap_frac x the shortest window */
        size_t ngaps;
        double noise; /* standard deviation of the sample noise */
        const struct leak_params *p;
};

static bool usable(const struct ctx *c, size_t i) {
        unsigned char k = c->pt[i - c->lo];
        return k != PT_SPIKE_LOW && k != PT_PENDING;
}

/* First index with t >= t0. */
static size_t lower_bound_t(const struct leak_point *s, size_t n, double t0) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (s[mid].t_s < t0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static size_t lower_bound_d(const double *d, size_t n, double t0) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (d[mid] < t0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* Robust standard deviation of the sample-to-sample differences (sqrt 2 x
 * the noise's), from the last NOISE_SAMPLES points of s[lo..n) (the newest:
 * the estimate moves little from one tick to the next). Each point is
 * compared with the line through its two neighbours: along a trend, a ramp
 * or a sawtooth's climb that residual is 0, and for white noise its
 * standard deviation is sqrt(1.5) x the noise's. The scale is the lower
 * quartile of the residuals' absolute deviations from their median, /
 * 0.3186 (the quartile of |N(0,1)|), which ignores up to 75% of odd
 * residuals: each GC drop upsets two. Sample-to-sample differences would
 * not do: under a fast sawtooth seen through coarse samples (2.5 s floors
 * of a 10 s GC cycle) their spread is the climb's, 2-3x the noise, and hides
 * the drops behind the drop threshold. */
static double diff_noise(const struct leak_point *s, size_t lo, size_t n) {
        double d[NOISE_SAMPLES];
        size_t k = 0;
        for (size_t i = n - 1; i > lo + 1 && k < NOISE_SAMPLES; i--) {
                double t0 = s[i - 2].t_s, t1 = s[i - 1].t_s, t2 = s[i].t_s;
                double a = t2 > t0 ? (t1 - t0) / (t2 - t0) : 0.5;
                double x = s[i - 1].bytes - (s[i - 2].bytes + a * (s[i].bytes - s[i - 2].bytes));
                if (x - x == 0) /* finite; the points are validated only later */
                        d[k++] = x;
        }
        if (k < 4)
                return 0;
        double med = median_inplace(d, k);
        for (size_t i = 0; i < k; i++)
                d[i] = fabs(d[i] - med);
        select_kth(d, k, k / 4);
        return d[k / 4] / QUARTILE_ABS_NORMAL * (M_SQRT2 / sqrt(1.5));
}

static void keep_min(double *y, double *x, bool *have, double v, double t) {
        if (!*have || v < *y) {
                *have = true;
                *y = v;
                *x = t;
        }
}

/* The highest floor before the window (after the grace): buckets of the
 * window's length, or GC cycles, counted back from the window's start.
 * -INFINITY if there is none. */
static double prior_high(const struct ctx *c, size_t ja, bool troughs, double len, size_t k0, double *when) {
        const struct leak_point *s = c->s;
        size_t h = lower_bound_t(s, c->n, c->s0);
        if (h < c->first)
                h = c->first;
        double best = -INFINITY, t0 = s[ja].t_s;
        *when = 0;
        if (h >= ja)
                return best;
        if (!troughs) {
                if (!(len > 0))
                        return best;
                double full = floor((t0 - s[h].t_s) / len); /* whole buckets only */
                bool have = false;
                double cur = 0, cur_t = 0, cur_b = -1;
                for (size_t i = h; i < ja; i++) {
                        if (!usable(c, i))
                                continue;
                        double b = floor((t0 - s[i].t_s) / len);
                        if (b >= full)
                                continue;
                        if (b != cur_b) {
                                if (have && cur > best) {
                                        best = cur;
                                        *when = cur_t;
                                }
                                have = false;
                                cur_b = b;
                        }
                        keep_min(&cur, &cur_t, &have, s[i].bytes, s[i].t_s);
                }
                if (have && cur > best) {
                        best = cur;
                        *when = cur_t;
                }
                return best;
        }
        /* troughs of the cycles that start after the grace, before the window */
        size_t j = lower_bound_d(c->drops, c->nd, s[h].t_s);
        if (j >= k0)
                return best;
        size_t i = lower_bound_t(s, c->n, c->drops[j]);
        bool have = false;
        double cur = 0, cur_t = 0;
        for (; i < ja; i++) {
                if (j + 1 < k0 && s[i].t_s >= c->drops[j + 1]) {
                        if (have && cur > best) {
                                best = cur;
                                *when = cur_t;
                        }
                        have = false;
                        while (j + 1 < k0 && s[i].t_s >= c->drops[j + 1])
                                j++;
                }
                if (usable(c, i))
                        keep_min(&cur, &cur_t, &have, s[i].bytes, s[i].t_s);
        }
        if (have && cur > best) {
                best = cur;
                *when = cur_t;
        }
        return best;
}

/* Could the Theil-Sen slope of the floors be >= t? It is not when fewer
 * than half the pairwise slopes are (the median lies below them); counted
 * without a division or a selection. May answer yes wrongly, never no. */
static bool slope_may_reach(const double *x, const double *y, size_t m, double t) {
        size_t k = 0, ge = 0;
        t *= 1 - 1e-9; /* rounding: never a wrong no */
        for (size_t i = 0; i < m; i++)
                for (size_t j = i + 1; j < m; j++) {
                        double dx = x[j] - x[i];
                        k += dx != 0;
                        ge += dx != 0 && y[j] - y[i] >= t * dx;
                }
        return k > 0 && ge >= (k + 1) / 2;
}

/* Slope (and its lower confidence bound), growth, level, threshold and
 * Mann-Kendall Z of a window with floors. */
static void window_stats(const struct ctx *c, struct window_result *r) {
        const struct leak_params *p = c->p;
        double buf[LEAK_BUCKETS * (LEAK_BUCKETS - 1) / 2];
        size_t m = r->floors;
        const double *x = r->fx, *y = r->fy;

        double var, s = mann_kendall_s(y, m, buf, &var);
        r->z = m < 3 ? 0 : mann_kendall_zs(s, var);

        size_t k = 0;
        for (size_t i = 0; i < m; i++)
                for (size_t j = i + 1; j < m; j++)
                        if (x[j] != x[i])
                                buf[k++] = (y[j] - y[i]) / (x[j] - x[i]);
        double slope = 0, slope_lo = 0;
        if (k > 0) {
                slope = median_inplace(buf, k);
                /* Sen's lower confidence bound: the pairwise slope of rank
                 * (k - z sqrt(var S)) / 2; never above the median. a[0..k/2)
                 * holds the lower half after median_inplace(). */
                double rank = floor(((double)k - p->growth_bound_z * sqrt(var > 0 ? var : 0)) / 2);
                size_t lo_k = rank <= 0 ? 0 : (size_t)rank;
                if (lo_k > (k - 1) / 2)
                        lo_k = (k - 1) / 2;
                if (lo_k < k / 2) {
                        select_kth(buf, k / 2, lo_k);
                        slope_lo = buf[lo_k];
                } else
                        slope_lo = slope;
                if (slope_lo > slope)
                        slope_lo = slope;
        }
        /* the level at the window's start: median of the floors moved back
         * along the Theil-Sen line (robust to a wild first floor) */
        for (size_t i = 0; i < m; i++)
                buf[i] = y[i] - slope * (x[i] - r->since);
        r->level = median_inplace(buf, m);
        r->slope = slope;
        r->growth = slope * r->span;
        r->growth_lo = slope_lo * r->span;

        double need = p->min_growth_bytes;
        if (p->min_growth_pct / 100 * r->level > need)
                need = p->min_growth_pct / 100 * r->level;
        if (p->min_growth_se * r->growth_se > need)
                need = p->min_growth_se * r->growth_se;
        r->need = need;
        r->stats = true;
}

/* Does one step (two levels) fit the floors with less than `ratio` x the
 * squared error of the least-squares line? *at: the first floor after it. */
static bool step_fits(const double *x, const double *y, size_t m, double ratio, double *at) {
        double mx = 0, my = 0;
        for (size_t i = 0; i < m; i++) {
                mx += x[i];
                my += y[i];
        }
        mx /= (double)m;
        my /= (double)m;
        double sxx = 0, sxy = 0, syy = 0;
        for (size_t i = 0; i < m; i++) { /* centred: no cancellation at 1e10 bytes */
                double dx = x[i] - mx, dy = y[i] - my;
                sxx += dx * dx;
                sxy += dx * dy;
                syy += dy * dy;
        }
        double line = sxx > 0 ? syy - sxy * sxy / sxx : syy;
        if (!(line > 0))
                return false;
        /* two levels split before floor k: the squared error about each mean */
        double best = INFINITY, left = 0, left2 = 0;
        size_t best_k = 0;
        for (size_t k = 1; k < m; k++) {
                double d = y[k - 1] - my;
                left += d;
                left2 += d * d;
                double n1 = (double)k, n2 = (double)(m - k);
                double right = -left, right2 = syy - left2;
                double e = (left2 - left * left / n1) + (right2 - right * right / n2);
                if (e < best) {
                        best = e;
                        best_k = k;
                }
        }
        *at = x[best_k];
        return best < ratio * line;
}

static void judge_window(const struct ctx *c, double w, struct window_result *r) {
        const struct leak_point *s = c->s;
        const struct leak_params *p = c->p;
        size_t n = c->n;
        double t_end = c->t_end;
        double start = t_end - w > c->s0 ? t_end - w : c->s0;
        *r = (struct window_result){ .w = w, .z = NAN };

        size_t ja = lower_bound_t(s, n, start);
        if (ja < c->first)
                ja = c->first;
        if (ja >= n) {
                r->why = W_GRACE;
                r->wait = c->s0 - t_end;
                return;
        }
        double t0 = s[ja].t_s, span = t_end - t0;
        r->span = span;
        r->since = t0;
        if (span < p->min_coverage * w * (1 - 1e-12)) {
                r->why = W_COVERAGE;
                r->wait = p->min_coverage * w - span;
                return;
        }
        /* Floors: the minima of 12 equal buckets, or, under a sawtooth, of
         * each GC cycle that starts in the window (its trough), grouped into
         * at most 12 runs of consecutive cycles. The part of the window
         * before its first drop is mid-cycle: left out. */
        bool troughs = c->longest > 0 && !(c->stopped && t0 >= c->drops[c->nd - 1]);
        double by[LEAK_BUCKETS], bx[LEAK_BUCKETS];
        for (size_t b = 0; b < LEAK_BUCKETS; b++)
                by[b] = INFINITY; /* the values are finite: INFINITY is "empty" */
        double len = span / LEAK_BUCKETS;
        size_t k0 = 0;
        double per_floor = 1; /* samples (or GC cycles) a floor is the minimum of */
        if (!troughs) {
                size_t b = 0;
                double next = len > 0 ? t0 + len : INFINITY;
                for (size_t i = ja; i < n; i++) {
                        double t = s[i].t_s, v = s[i].bytes;
                        while (t >= next && b + 1 < LEAK_BUCKETS)
                                next = t0 + (double)(++b + 1) * len;
                        if (v < by[b] && usable(c, i)) {
                                by[b] = v;
                                bx[b] = t;
                        }
                }
                per_floor = (double)(n - ja) / LEAK_BUCKETS;
        } else {
                k0 = lower_bound_d(c->drops, c->nd, t0);
                size_t kt = c->nd - k0;
                if (kt < p->min_floors) {
                        r->why = W_SAWTOOTH;
                        r->cycle = c->longest;
                        r->floors = kt;
                        return;
                }
                size_t g = kt < LEAK_BUCKETS ? kt : LEAK_BUCKETS;
                per_floor = (double)kt / (double)g; /* the troughs, not the samples */
                size_t j = 0, b = 0;                /* cycle k0 + j, in group b */
                for (size_t i = lower_bound_t(s, n, c->drops[k0]); i < n; i++) {
                        double t = s[i].t_s, v = s[i].bytes;
                        if (k0 + j + 1 < c->nd && t >= c->drops[k0 + j + 1]) {
                                while (k0 + j + 1 < c->nd && t >= c->drops[k0 + j + 1])
                                        j++;
                                b = j * g / kt;
                        }
                        if (v < by[b] && usable(c, i)) {
                                by[b] = v;
                                bx[b] = t;
                        }
                }
        }
        /* the longest gap: only gaps longer than the shortest window's
         * limit were noted */
        double max_gap = 0;
        for (size_t j = 0; j < c->ngaps; j++)
                if (c->gaps[2 * j] - c->gaps[2 * j + 1] >= t0 && c->gaps[2 * j + 1] > max_gap)
                        max_gap = c->gaps[2 * j + 1];
        if (max_gap > p->max_gap_frac * w) {
                r->why = W_GAP;
                r->gap = max_gap;
                return;
        }
        double fy[LEAK_BUCKETS], fx[LEAK_BUCKETS];
        size_t m = 0;
        for (size_t b = 0; b < LEAK_BUCKETS; b++)
                if (by[b] < INFINITY) {
                        fy[m] = by[b];
                        fx[m] = bx[b];
                        m++;
                }
        r->floors = m;
        if (m < p->min_floors) {
                r->why = W_SPARSE;
                return;
        }

        memcpy(r->fx, fx, m * sizeof(double));
        memcpy(r->fy, fy, m * sizeof(double));
        /* The standard error the growth would have if the samples were the
         * trend plus the noise measured (white): a floor, the minimum of k
         * samples, scatters by sigma / (1 + 0.3 ln k) (within 2% for k =
         * 1..100, measured); Theil-Sen's slope by 1.05x least squares'. */
        double mx = 0, sxx = 0;
        for (size_t i = 0; i < m; i++)
                mx += fx[i];
        mx /= (double)m;
        for (size_t i = 0; i < m; i++)
                sxx += (fx[i] - mx) * (fx[i] - mx);
        if (per_floor < 1)
                per_floor = 1;
        r->growth_se = sxx > 0 ? 1.05 * c->noise / (1 + 0.3 * log(per_floor)) * span / sqrt(sxx) : 0;
        /* Most windows of most series fail on growth: find that out without
         * the Theil-Sen selection when the growth cannot reach even the
         * part of the threshold that does not depend on the level. */
        double need_lo = p->min_growth_bytes;
        if (p->min_growth_se * r->growth_se > need_lo)
                need_lo = p->min_growth_se * r->growth_se;
        if (!slope_may_reach(fx, fy, m, need_lo / span)) {
                r->why = W_GROWTH;
                return; /* window_stats() later, if this window is reported */
        }
        window_stats(c, r);
        double slope = r->slope;
        if (!(r->growth >= r->need) || r->growth <= 0) {
                r->why = W_GROWTH;
                return;
        }
        /* Still growing: the last third grows at >= min_end_ratio x the
         * window's rate. A ramp that levelled off (model load, cache
         * warm-up) has a flat last third. */
        size_t third = (m + 2) / 3;
        double buf[LEAK_BUCKETS * (LEAK_BUCKETS - 1) / 2];
        double s_end = theil_sen_buf(fx + m - third, fy + m - third, third, buf);
        if (!(s_end >= p->min_end_ratio * slope)) {
                r->why = W_END;
                r->part_slope = s_end;
                r->end_from = fx[m - third];
                return;
        }
        /* Steady: both halves grow, each at >= min_part_ratio x the
         * faster of (the other half, the whole window). A step has one flat
         * half (or two, when it sits in the middle: both halves are then far
         * below the window's slope); a ramp that started or stopped in the
         * window has a slow half. */
        size_t half = m / 2;
        double s1 = theil_sen_buf(fx, fy, half, buf);
        double s2 = theil_sen_buf(fx + m - half, fy + m - half, half, buf);
        r->part_slope = s1;
        if (!(s1 >= p->min_part_ratio * fmax(slope, s2))) {
                r->why = W_START;
                return;
        }
        r->part_slope = s2;
        if (!(s2 >= p->min_part_ratio * fmax(slope, s1))) {
                r->why = W_STEADY;
                return;
        }
        /* Not one step: a single jump must not fit the floors with less
         * than max_step_fit x the squared error of a straight line (least
         * squares both). A leak leaves each side of a jump its own climb
         * to explain; one allocation blurred by noise is explained by the
         * jump. The halves above miss a step once the noise is a tenth of
         * it; this does not. Least squares is not robust: the floor
         * lowest below the Theil-Sen line is left out -- a wild floor is
         * always low (floors are minima: an outlier above never becomes
         * one), e.g. an outlier that lands on a GC's trough, where its
         * neighbours do not agree (150 MiB low, it made a leak under a GC
         * "a step"). The highest is kept: near a step it is the step. */
        double step_t, sx[LEAK_BUCKETS], sy[LEAK_BUCKETS];
        size_t worst = 0, ms = 0;
        for (size_t i = 1; i < m; i++) /* least squares: without the lowest floor */
                if (fy[i] - slope * (fx[i] - t0) < fy[worst] - slope * (fx[worst] - t0))
                        worst = i;
        for (size_t i = 0; i < m; i++)
                if (i != worst) {
                        sx[ms] = fx[i];
                        sy[ms++] = fy[i];
                }
        if (step_fits(sx, sy, ms, p->max_step_fit, &step_t)) {
                r->why = W_STEP;
                r->end_from = step_t;
                return;
        }
        /* A trend: later floors tend to lie above earlier ones. */
        if (r->z < p->min_z) {
                r->why = W_TREND;
                return;
        }
        /* The growth floor holds at the slope's lower confidence bound
         * too: not only noise lifted the slope over it. */
        if (!(r->growth_lo >= r->need)) {
                r->why = W_UNSURE;
                return;
        }
        /* A new high: the window ends above every earlier floor (since the
         * grace) by at least min_new_high of its growth. Memory that only
         * climbs back to where it was -- a cache refilling after a flush,
         * load coming back, a mean-reverting churn -- is not leaking. */
        double when;
        double prior = prior_high(c, ja, troughs, len, k0, &when);
        if (prior > -INFINITY && r->level + r->growth - prior < p->min_new_high * r->growth) {
                r->why = W_OLD_HIGH;
                r->prior_t = when;
                return;
        }
        r->why = W_PASS;
}

static void set_reason(struct leak_verdict *v, const struct window_result *r, const struct leak_params *p,
                       double t_end) {
        char g[32], need[32], rate[32], span[32], dur[32];
        fmt_bytes(g, sizeof g, r->growth, true);
        fmt_bytes(need, sizeof need, r->need, false);
        fmt_rate(rate, sizeof rate, r->slope);
        fmt_dur(span, sizeof span, r->span);
        switch (r->why) {
        case W_PASS:
                fmt_bytes(g, sizeof g, r->growth, false);
                snprintf(v->reason, sizeof v->reason,
                         "memory grew %s in %s (%s), steadily: Mann-Kendall Z %.1f over %zu floors", g, span, rate,
                         r->z, r->floors);
                break;
        case W_GROWTH:
                snprintf(v->reason, sizeof v->reason,
                         "no steady growth: the floor of the last %s changed by %s (below %s)", span, g, need);
                break;
        case W_UNSURE: {
                char lo[32];
                fmt_bytes(lo, sizeof lo, r->growth_lo, true);
                snprintf(
                        v->reason, sizeof v->reason,
                        "no clear growth: the floor of the last %s changed by %s, but within the noise by as little as "
                        "%s (below %s)",
                        span, g, lo, need);
                break;
        }
        case W_TREND:
                snprintf(v->reason, sizeof v->reason,
                         "no steady trend: the floor of the last %s changed by %s, irregularly: Mann-Kendall Z %.1f "
                         "(below %.1f) over %zu floors",
                         span, g, r->z, p->min_z, r->floors);
                break;
        case W_START:
                snprintf(v->reason, sizeof v->reason,
                         "no steady growth: the floor of the last %s rose %s, unevenly: its first half %s (a step, or "
                         "growth that just started)",
                         span, g, r->part_slope <= 0 ? "is flat" : "grows much slower");
                break;
        case W_STEADY:
                snprintf(v->reason, sizeof v->reason,
                         "no steady growth: the floor of the last %s rose %s, unevenly: its second half %s (a step, or "
                         "growth that is slowing down)",
                         span, g, r->part_slope <= 0 ? "is flat" : "grows much slower");
                break;
        case W_STEP:
                fmt_dur(dur, sizeof dur, t_end - r->end_from);
                snprintf(v->reason, sizeof v->reason,
                         "no steady growth: the floor of the last %s rose %s in one step, about %s ago (one big "
                         "allocation?)",
                         span, g, dur);
                break;
        case W_END:
                fmt_dur(dur, sizeof dur, t_end - r->end_from);
                snprintf(v->reason, sizeof v->reason, "growth stopped: the last %s are flat after %s", dur, g);
                break;
        case W_OLD_HIGH:
                fmt_dur(dur, sizeof dur, t_end - r->prior_t);
                snprintf(v->reason, sizeof v->reason,
                         "no new high: the floor of the last %s rose %s, back to about its level of %s ago", span, g,
                         dur);
                break;
        case W_GRACE:
                fmt_dur(dur, sizeof dur, r->wait > 0 ? r->wait : 0);
                snprintf(v->reason, sizeof v->reason, "warming up: the grace period ends in %s", dur);
                break;
        case W_COVERAGE:
                fmt_dur(dur, sizeof dur, r->wait);
                fmt_dur(span, sizeof span, r->w);
                snprintf(v->reason, sizeof v->reason, "not enough data yet: the %s window is judged in %s", span, dur);
                break;
        case W_GAP:
                fmt_dur(dur, sizeof dur, r->gap);
                snprintf(v->reason, sizeof v->reason, "not judged: a gap of %s between samples", dur);
                break;
        case W_SAWTOOTH:
                fmt_dur(dur, sizeof dur, r->cycle);
                fmt_dur(span, sizeof span, r->w);
                snprintf(v->reason, sizeof v->reason,
                         "not judged yet: memory drops sharply (a garbage collector?) every %s or less, and no window "
                         "holds %zu such cycles yet (at most %zu)",
                         dur, p->min_floors, r->floors);
                break;
        case W_SPARSE:
                snprintf(v->reason, sizeof v->reason, "not enough samples: %zu floors, %zu needed", r->floors,
                         p->min_floors);
                break;
        case W_SKIPPED: /* never reported */
                break;
        }
}

int leak_evaluate(const struct leak_point *series, size_t n, double grace_from_t_s, const struct leak_params *p,
                  struct leak_verdict *ret) {
        struct leak_params def;
        if (!ret)
                return -EINVAL;
        *ret = (struct leak_verdict){ 0 };
        snprintf(ret->reason, sizeof ret->reason, "invalid input");
        if (!p) {
                leak_params_default(&def);
                p = &def;
        }
        if ((!series && n > 0) || n > LEAK_MAX_POINTS || isnan(grace_from_t_s) || !leak_params_valid(p))
                return -EINVAL;
        if (n == 0) {
                snprintf(ret->reason, sizeof ret->reason, "no samples yet");
                return 0;
        }

        const struct leak_point *s = series;
        double t_end = s[n - 1].t_s;
        double wmax = p->windows_s[p->n_windows - 1];
        /* Look-back: the longest window, and the grace before it (a restart
         * there still delays the windows); one sample more, for its
         * difference. Nothing older is read. */
        if (!(t_end - t_end == 0)) /* x - x is 0 for a finite x, NaN otherwise */
                return -EINVAL;
        size_t lo = lower_bound_t(s, n, t_end - wmax - p->grace_s);
        if (lo > 0)
                lo--;

        double noise_d = diff_noise(s, lo, n);
        double thr = p->drop_noise_k * noise_d;
        if (thr < p->drop_min_bytes)
                thr = p->drop_min_bytes;
        double thr_out = p->outlier_noise_k * noise_d;

        /* One allocation: the kinds of s[lo..n), the drop times, the gaps. */
        size_t m = n - lo;
        size_t pt_size = (m + sizeof(double) - 1) / sizeof(double) * sizeof(double);
        unsigned char *pt = malloc(pt_size + 3 * m * sizeof(double));
        if (!pt) {
                snprintf(ret->reason, sizeof ret->reason, "out of memory");
                return -ENOMEM;
        }
        double *drops = (double *)(void *)(pt + pt_size);
        double *gaps = drops + m;
        double gap_min = p->max_gap_frac * p->windows_s[0];
        memset(pt, PT_OK, m);

        /* One pass: validation; outliers (a sample that stands out from
         * both of its neighbours, which agree with each other); then, over
         * the other samples, falls: a restart, or a drop. */
        size_t first = lo, nd = 0, ngaps = 0;
        /* The first sample has no left neighbour: it is an outlier if it
         * stands out from the next two, which agree (an outlier there would
         * otherwise fall to the next sample like a GC drop). */
        if (lo + 2 < n) {
                double b = s[lo].bytes, a = s[lo + 1].bytes, c = s[lo + 2].bytes;
                double agree = 2 * fabs(c - a);
                double dip = (a < c ? a : c) - b, bump = b - (a > c ? a : c);
                if (dip > thr_out && dip > agree)
                        pt[0] = PT_SPIKE_LOW;
                else if (bump > thr_out && bump > agree)
                        pt[0] = PT_SPIKE_HIGH;
        }
        double prev = pt[0] == PT_OK ? s[lo].bytes : s[lo + 1].bytes;
        bool bad = !(s[lo].t_s - s[lo].t_s == 0) || !(s[lo].bytes - s[lo].bytes == 0);
        for (size_t i = lo + 1; i < n; i++) {
                double b = s[i].bytes;
                bad |= !(b - b == 0) | !(s[i].t_s >= s[i - 1].t_s); /* NaN fails >= too */
                if (s[i].t_s - s[i - 1].t_s > gap_min) {
                        gaps[2 * ngaps] = s[i].t_s;
                        gaps[2 * ngaps + 1] = s[i].t_s - s[i - 1].t_s;
                        ngaps++;
                }
                if (i + 1 < n && (fabs(b - s[i - 1].bytes) > thr_out)) {
                        double a = s[i - 1].bytes, c = s[i + 1].bytes;
                        double agree = 2 * fabs(c - a);
                        double dip = (a < c ? a : c) - b, bump = b - (a > c ? a : c);
                        if (dip > thr_out && dip > agree) {
                                pt[i - lo] = PT_SPIKE_LOW;
                                continue;
                        }
                        if (bump > thr_out && bump > agree) {
                                pt[i - lo] = PT_SPIKE_HIGH;
                                continue;
                        }
                }
                double fall = prev - s[i].bytes;
                prev = s[i].bytes;
                if (!(fall > thr))
                        continue;
                if (i + 1 == n)
                        pt[i - lo] = PT_PENDING; /* the next sample says drop or outlier */
                else if (s[i].bytes < p->restart_frac * (s[i].bytes + fall) &&
                         s[i + 1].bytes < p->restart_frac * (s[i].bytes + fall)) {
                        /* a restart, confirmed: the next sample stays down
                         * (an outlier landing on a GC's trough, whose
                         * neighbours do not agree, falls as far once) */
                        first = i;
                        nd = 0;
                } else
                        drops[nd++] = s[i].t_s;
        }
        /* the times are ascending and the last one finite: all are finite */
        if (bad) {
                free(pt);
                return -EINVAL;
        }

        struct ctx c = {
                .s = s,
                .n = n,
                .t_end = t_end,
                .pt = pt,
                .lo = lo,
                .first = first,
                .s0 = grace_from_t_s + p->grace_s,
                .drops = drops,
                .nd = nd,
                .gaps = gaps,
                .ngaps = ngaps,
                .noise = noise_d / M_SQRT2,
                .p = p,
        };
        if (first > lo && s[first].t_s + p->grace_s > c.s0)
                c.s0 = s[first].t_s + p->grace_s;
        if (nd > 0) {
                /* The stretch before the first drop is a cycle (the first,
                 * seen in part) only if it is short enough to be one; a
                 * lone drop after a long quiet stretch is a free(). */
                double head = drops[0] - s[first].t_s;
                c.longest = head <= wmax / (double)p->min_floors ? head : 0;
                for (size_t j = 0; j + 1 < nd; j++)
                        if (drops[j + 1] - drops[j] > c.longest)
                                c.longest = drops[j + 1] - drops[j];
                /* Stopped: the climb since the last drop outlasts the
                 * factor x the longest cycle. With no full cycle seen yet,
                 * the stretch before the first drop is only a lower bound
                 * (the series may have started mid-cycle): then the cycle
                 * is taken to be at least the shortest window, so that no
                 * window can lie inside a climb that is still a GC's (a 37
                 * s cycle first seen 17 s in passed for "stopped" at 54 s
                 * and flagged its climb, 2 in 10 000 sawtooths). */
                double ref = c.longest;
                if (nd == 1 && ref < p->windows_s[0])
                        ref = p->windows_s[0];
                c.stopped = c.longest > 0 && t_end - drops[nd - 1] > p->sawtooth_stop_factor * ref;
        }

        /* Longest first: the longest passing window is the verdict, and
         * the shorter ones need not be judged then (the "new high" test
         * reads their whole history). */
        struct window_result res[LEAK_MAX_WINDOWS];
        for (size_t k = 0; k < p->n_windows; k++)
                res[k].why = W_SKIPPED;
        for (size_t k = p->n_windows; k-- > 0;) {
                judge_window(&c, p->windows_s[k], &res[k]);
                if (res[k].why == W_PASS)
                        break;
        }
        free(pt);

        /* The reported window: the longest passing one (the most
         * evidence, the steadiest slope); else the judged window that came
         * closest to a verdict (the longest of those), whose reason is the
         * most telling -- "a step", "growth stopped", "no new high" rather
         * than the 15 min window's "no growth". */
        const struct window_result *rep = NULL;
        for (size_t k = p->n_windows; k-- > 0;)
                if (judged(res[k].why) && (!rep || progress(res[k].why) > progress(rep->why)))
                        rep = &res[k];
        if (!rep) {
                /* Not judged: the shortest window's reason, unless it only
                 * waits for data and a longer one has a better one (a gap,
                 * a sawtooth). */
                rep = &res[0];
                for (size_t k = 0; k < p->n_windows; k++)
                        if (res[k].why != W_COVERAGE) {
                                rep = &res[k];
                                break;
                        }
                /* a sawtooth: the window with the most cycles */
                if (rep->why == W_SAWTOOTH)
                        for (size_t k = 0; k < p->n_windows; k++)
                                if (res[k].why == W_SAWTOOTH && res[k].floors > rep->floors)
                                        rep = &res[k];
                set_reason(ret, rep, p, t_end);
                return 0;
        }

        struct window_result *rw = &res[rep - res];
        if (!rw->stats)
                window_stats(&c, rw);
        if (!isfinite(rw->slope) || !isfinite(rw->growth) || !isfinite(rw->z)) {
                /* values or times so extreme that the arithmetic overflows
                 * (bytes near 1e308, samples 1e-300 s apart): no verdict */
                snprintf(ret->reason, sizeof ret->reason, "not judged: the values overflow");
                return 0;
        }
        ret->evaluated = true;
        ret->suspected = rep->why == W_PASS;
        ret->slope_bytes_per_s = rep->slope;
        ret->growth_bytes = rep->growth;
        ret->window_s = rep->span;
        ret->confidence = 0.5 * erfc(-rep->z / M_SQRT2);
        ret->since_t_s = rep->since;
        set_reason(ret, rep, p, t_end);
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* The leak verdict; leak.h has the method, etc/mlmond.conf [leak] why each
 * default, analyze/leak-stats.c the statistics.
 *
 * Floors, not samples: a leak raises the level memory falls back to, and a
 * bucket's minimum is that level, blind to upward excursions (a burst, a
 * garbage collector's peaks). Single-sample dips are left out as outliers;
 * a last sample that fell sharply waits for the next to say drop or outlier.
 * Under a sawtooth, buckets shorter than a GC cycle would follow its climb,
 * so there the floors are the cycles' troughs instead. Rank statistics
 * (Mann-Kendall, Theil-Sen) on <= 12 floors make one wild floor harmless.
 *
 * Cost: O(n) in the look-back -- one pass to classify the samples, one per
 * window judged (longest first, until one passes), and for a window that
 * passes everything else one over what came before it (the new high). */
#include "analyze/leak.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/leak-stats.h"
#include "format.h"
#include "util.h"

#define MIB (1024.0 * 1024.0)

void leak_params_default(struct leak_params *p) {
        *p = (struct leak_params){
                .windows_s = { 30, 60, 120, 300, 900 },
                .n_windows = 5,
                .grace_s = 30,
                .min_growth_bytes = 16 * MIB,
                .min_growth_pct = 5,
                .min_z = 3.0,
                .min_growth_se = 8,
                .growth_bound_z = 2.0,
                .min_coverage = 0.8,
                .max_gap_frac = 0.25,
                .min_floors = 8,
                .min_part_ratio = 0.5,
                .min_end_ratio = 0.5,
                .max_step_fit = 2.0,
                .min_new_high = 0.5,
                .drop_min_bytes = 8 * MIB,
                .drop_noise_k = 6,
                .outlier_noise_k = 4,
                .sawtooth_stop_factor = 2,
                .restart_frac = 0.25,
        };
}

static bool at_least(double v, double min) {
        return isfinite(v) && v >= min;
}

static bool in_unit(double v) { /* (0, 1] */
        return v > 0 && v <= 1;
}

bool leak_params_valid(const struct leak_params *p) {
        if (p->n_windows < 1 || p->n_windows > LEAK_MAX_WINDOWS)
                return false;
        for (size_t i = 0; i < p->n_windows; i++)
                if (!at_least(p->windows_s[i], 0) || p->windows_s[i] == 0 ||
                    (i > 0 && !(p->windows_s[i] > p->windows_s[i - 1])))
                        return false;
        return at_least(p->grace_s, 0) && at_least(p->min_growth_bytes, 0) && at_least(p->min_growth_pct, 0) &&
               isfinite(p->min_z) && at_least(p->growth_bound_z, 0) && in_unit(p->min_coverage) &&
               in_unit(p->max_gap_frac) && p->min_floors >= 3 && p->min_floors <= LEAK_BUCKETS &&
               at_least(p->min_growth_se, 0) && at_least(p->min_part_ratio, 0) && at_least(p->min_end_ratio, 0) &&
               at_least(p->max_step_fit, 0) && at_least(p->min_new_high, 0) && at_least(p->drop_min_bytes, 0) &&
               at_least(p->drop_noise_k, 0) && at_least(p->outlier_noise_k, 0) &&
               at_least(p->sawtooth_stop_factor, 1) && p->restart_frac >= 0 && p->restart_frac < 1;
}

/* ---- formatting ------------------------------------------------------------ */

static void fmt_bytes(char *b, size_t sz, double v, bool plus) {
        (void)format_bytes(b, sz, v, "", plus);
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
        bool new_high, stats; /* W_UNSURE: ends on a new high all the same; slope, level, growth, need known */
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

struct t_key {
        const struct leak_point *s;
        double t0;
};

static bool t_below(size_t i, const void *ctx) {
        const struct t_key *k = ctx;
        return k->s[i].t_s < k->t0;
}

/* First index with t >= t0. */
static size_t lower_bound_t(const struct leak_point *s, size_t n, double t0) {
        return lower_bound(n, t_below, &(struct t_key){ s, t0 });
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

/* Slope (and its lower confidence bound), growth, level, threshold and
 * Mann-Kendall Z of a window with floors. */
static void window_stats(const struct ctx *c, struct window_result *r) {
        const struct leak_params *p = c->p;
        double buf[LEAK_BUCKETS * (LEAK_BUCKETS - 1) / 2];
        size_t m = r->floors;
        const double *x = r->fx, *y = r->fy;

        double var, s = mann_kendall_s(y, m, buf, &var);
        r->z = m < 3 ? 0 : mann_kendall_zs(s, var);

        double slope, slope_lo;
        sen_slope(x, y, m, var, p->growth_bound_z, &slope, &slope_lo);
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

/* A window being judged: where it starts and how its floors are taken. */
struct window {
        size_t ja;        /* its first sample */
        bool troughs;     /* floors are the troughs of GC cycles, not bucket minima */
        double len;       /* bucket length */
        size_t k0;        /* troughs: the first drop in the window */
        double per_floor; /* samples (or GC cycles) a floor is the minimum of */
};

/* The minima of LEAK_BUCKETS equal buckets from t0 on. */
static void bucket_minima(const struct ctx *c, struct window *win, double t0, double *by, double *bx) {
        const struct leak_point *s = c->s;
        size_t b = 0;
        double next = win->len > 0 ? t0 + win->len : INFINITY;
        for (size_t i = win->ja; i < c->n; i++) {
                double t = s[i].t_s, v = s[i].bytes;
                while (t >= next && b + 1 < LEAK_BUCKETS)
                        next = t0 + (double)(++b + 1) * win->len;
                if (v < by[b] && usable(c, i)) {
                        by[b] = v;
                        bx[b] = t;
                }
        }
        win->per_floor = (double)(c->n - win->ja) / LEAK_BUCKETS;
}

/* The troughs of the GC cycles that start after t0, grouped into at most
 * LEAK_BUCKETS runs of consecutive cycles; the part of the window before its
 * first drop is mid-cycle: left out. False (W_SAWTOOTH) when fewer than
 * min_floors cycles start in the window. */
static bool trough_minima(const struct ctx *c, struct window *win, double t0, double *by, double *bx,
                          struct window_result *r) {
        const struct leak_point *s = c->s;
        size_t k0 = lower_bound_d(c->drops, c->nd, t0);
        size_t kt = c->nd - k0;
        win->k0 = k0;
        if (kt < c->p->min_floors) {
                r->why = W_SAWTOOTH;
                r->cycle = c->longest;
                r->floors = kt;
                return false;
        }
        size_t g = kt < LEAK_BUCKETS ? kt : LEAK_BUCKETS;
        win->per_floor = (double)kt / (double)g; /* the troughs, not the samples */
        size_t j = 0, b = 0;                     /* cycle k0 + j, in group b */
        for (size_t i = lower_bound_t(s, c->n, c->drops[k0]); i < c->n; i++) {
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
        return true;
}

/* The longest gap after t0: only gaps longer than the shortest window's
 * limit were noted. */
static double longest_gap(const struct ctx *c, double t0) {
        double max_gap = 0;
        for (size_t j = 0; j < c->ngaps; j++)
                if (c->gaps[2 * j] - c->gaps[2 * j + 1] >= t0 && c->gaps[2 * j + 1] > max_gap)
                        max_gap = c->gaps[2 * j + 1];
        return max_gap;
}

/* The window's floors, into r->fx, r->fy: the minima of 12 equal buckets,
 * or, under a sawtooth, of each GC cycle that starts in the window. False,
 * with r->why, when the window is not judged: too few cycles, a gap, too few
 * floors. */
static bool take_floors(const struct ctx *c, double w, struct window *win, struct window_result *r) {
        double by[LEAK_BUCKETS], bx[LEAK_BUCKETS];
        for (size_t b = 0; b < LEAK_BUCKETS; b++)
                by[b] = INFINITY; /* the values are finite: INFINITY is "empty" */
        if (!win->troughs)
                bucket_minima(c, win, r->since, by, bx);
        else if (!trough_minima(c, win, r->since, by, bx, r))
                return false;
        double max_gap = longest_gap(c, r->since);
        if (max_gap > c->p->max_gap_frac * w) {
                r->why = W_GAP;
                r->gap = max_gap;
                return false;
        }
        size_t m = 0;
        for (size_t b = 0; b < LEAK_BUCKETS; b++)
                if (by[b] < INFINITY) {
                        r->fy[m] = by[b];
                        r->fx[m] = bx[b];
                        m++;
                }
        r->floors = m;
        if (m < c->p->min_floors) {
                r->why = W_SPARSE;
                return false;
        }
        return true;
}

/* The standard error the growth would have if the samples were the trend
 * plus the noise measured (white): a floor, the minimum of k samples,
 * scatters by sigma / (1 + 0.3 ln k) (within 2% for k = 1..100, measured);
 * Theil-Sen's slope by 1.05x least squares'. */
static double growth_se(const struct window_result *r, double noise, double per_floor) {
        size_t m = r->floors;
        double mx = 0, sxx = 0;
        for (size_t i = 0; i < m; i++)
                mx += r->fx[i];
        mx /= (double)m;
        for (size_t i = 0; i < m; i++)
                sxx += (r->fx[i] - mx) * (r->fx[i] - mx);
        if (per_floor < 1)
                per_floor = 1;
        return sxx > 0 ? 1.05 * noise / (1 + 0.3 * log(per_floor)) * r->span / sqrt(sxx) : 0;
}

/* Growth that goes on and is even. False, with r->why, otherwise. */
static bool growth_even(const struct leak_params *p, struct window_result *r) {
        const double *fx = r->fx, *fy = r->fy;
        size_t m = r->floors;
        double slope = r->slope;
        double buf[LEAK_BUCKETS * (LEAK_BUCKETS - 1) / 2];
        /* Still growing: the last third grows at >= min_end_ratio x the
         * window's rate. A ramp that levelled off (model load, cache
         * warm-up) has a flat last third. */
        size_t third = (m + 2) / 3;
        double s_end = theil_sen_buf(fx + m - third, fy + m - third, third, buf);
        if (!(s_end >= p->min_end_ratio * slope)) {
                r->why = W_END;
                r->part_slope = s_end;
                r->end_from = fx[m - third];
                return false;
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
                return false;
        }
        r->part_slope = s2;
        if (!(s2 >= p->min_part_ratio * fmax(slope, s1))) {
                r->why = W_STEADY;
                return false;
        }
        return true;
}

/* One step: a single jump fits the floors within max_step_fit x a straight
 * line's squared error. A leak leaves each side of the jump its own climb to
 * explain; one allocation blurred by noise does not. The floor lowest below
 * the Theil-Sen line is left out (least squares is not robust, and a wild
 * floor is always low: floors are minima); the highest, near a step the
 * step itself, is kept. */
static bool one_step(const struct leak_params *p, struct window_result *r) {
        const double *fx = r->fx, *fy = r->fy;
        double slope = r->slope, t0 = r->since;
        double step_t, sx[LEAK_BUCKETS], sy[LEAK_BUCKETS];
        size_t worst = 0, ms = 0;
        for (size_t i = 1; i < r->floors; i++)
                if (fy[i] - slope * (fx[i] - t0) < fy[worst] - slope * (fx[worst] - t0))
                        worst = i;
        for (size_t i = 0; i < r->floors; i++)
                if (i != worst) {
                        sx[ms] = fx[i];
                        sy[ms++] = fy[i];
                }
        if (!step_fits(sx, sy, ms, p->max_step_fit, &step_t))
                return false;
        r->why = W_STEP;
        r->end_from = step_t;
        return true;
}

/* Judges one window: r->why is W_PASS or the first check that failed (or
 * why it was not judged). */
static void judge_window(const struct ctx *c, double w, struct window_result *r) {
        const struct leak_point *s = c->s;
        const struct leak_params *p = c->p;
        double start = c->t_end - w > c->s0 ? c->t_end - w : c->s0;
        struct window win = { .per_floor = 1 };
        *r = (struct window_result){ .w = w, .z = NAN };

        win.ja = lower_bound_t(s, c->n, start);
        if (win.ja < c->first)
                win.ja = c->first;
        if (win.ja >= c->n) {
                r->why = W_GRACE;
                r->wait = c->s0 - c->t_end;
                return;
        }
        double t0 = s[win.ja].t_s, span = c->t_end - t0;
        r->span = span;
        r->since = t0;
        if (span < p->min_coverage * w * (1 - 1e-12)) {
                r->why = W_COVERAGE;
                r->wait = p->min_coverage * w - span;
                return;
        }
        win.troughs = c->longest > 0 && !(c->stopped && t0 >= c->drops[c->nd - 1]);
        win.len = span / LEAK_BUCKETS;
        if (!take_floors(c, w, &win, r))
                return;
        r->growth_se = growth_se(r, c->noise, win.per_floor);
        /* Most windows of most series fail on growth: find that out without
         * the Theil-Sen selection when the growth cannot reach even the
         * part of the threshold that does not depend on the level. */
        double need_lo = p->min_growth_bytes;
        if (p->min_growth_se * r->growth_se > need_lo)
                need_lo = p->min_growth_se * r->growth_se;
        if (!slope_may_reach(r->fx, r->fy, r->floors, need_lo / span)) {
                r->why = W_GROWTH;
                return; /* window_stats() later, if this window is reported */
        }
        window_stats(c, r);
        if (!(r->growth >= r->need) || r->growth <= 0) {
                r->why = W_GROWTH;
                return;
        }
        if (!growth_even(p, r) || one_step(p, r))
                return;
        /* A trend: later floors tend to lie above earlier ones. */
        if (r->z < p->min_z) {
                r->why = W_TREND;
                return;
        }
        /* The growth floor holds at the slope's lower confidence bound
         * too: not only noise lifted the slope over it (W_UNSURE). And a new
         * high: the window ends above every earlier floor (since the grace)
         * by at least min_new_high of its growth. Memory that only climbs
         * back to where it was -- a cache refilling after a flush, load
         * coming back, a mean-reverting churn -- is not leaking (nor, when
         * unsure, a trend to forecast from). */
        double when, prior = prior_high(c, win.ja, win.troughs, win.len, win.k0, &when);
        bool old_high = prior > -INFINITY && r->level + r->growth - prior < p->min_new_high * r->growth;
        if (!(r->growth_lo >= r->need)) {
                r->why = W_UNSURE;
                r->new_high = !old_high;
                return;
        }
        if (old_high) {
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
        case W_STEADY: {
                bool first = r->why == W_START;
                snprintf(v->reason, sizeof v->reason,
                         "no steady growth: the floor of the last %s rose %s, unevenly: its %s half %s (a step, or "
                         "growth that %s)",
                         span, g, first ? "first" : "second", r->part_slope <= 0 ? "is flat" : "grows much slower",
                         first ? "just started" : "is slowing down");
                break;
        }
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

/* Whether s[i] stands out from both a and c, which agree with each other:
 * PT_SPIKE_LOW or PT_SPIKE_HIGH, else PT_OK. */
static unsigned char spike(double a, double b, double c, double thr_out) {
        double agree = 2 * fabs(c - a);
        double dip = (a < c ? a : c) - b, bump = b - (a > c ? a : c);
        if (dip > thr_out && dip > agree)
                return PT_SPIKE_LOW;
        if (bump > thr_out && bump > agree)
                return PT_SPIKE_HIGH;
        return PT_OK;
}

/* One pass over s[lo..n): validation; outliers (a sample that stands out
 * from both of its neighbours, which agree with each other); then, over the
 * other samples, falls: a restart, or a drop. Fills pt, drops and gaps and
 * sets c->first, c->nd, c->ngaps. False for a non-finite point or
 * descending times. */
static bool classify(struct ctx *c, unsigned char *pt, double *drops, double *gaps, double thr, double thr_out) {
        const struct leak_point *s = c->s;
        const struct leak_params *p = c->p;
        size_t lo = c->lo, n = c->n, nd = 0, ngaps = 0;
        double gap_min = p->max_gap_frac * p->windows_s[0];
        c->first = lo;
        /* The first sample has no left neighbour: it is an outlier if it
         * stands out from the next two, which agree (an outlier there would
         * otherwise fall to the next sample like a GC drop). */
        if (lo + 2 < n)
                pt[0] = spike(s[lo + 1].bytes, s[lo].bytes, s[lo + 2].bytes, thr_out);
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
                        pt[i - lo] = spike(s[i - 1].bytes, b, s[i + 1].bytes, thr_out);
                        if (pt[i - lo] != PT_OK)
                                continue;
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
                        c->first = i;
                        nd = 0;
                } else
                        drops[nd++] = s[i].t_s;
        }
        c->nd = nd;
        c->ngaps = ngaps;
        /* the times are ascending and the last one finite: all are finite */
        return !bad;
}

/* The longest GC cycle seen, and whether the sawtooth stopped. */
static void find_cycles(struct ctx *c, double wmax) {
        const struct leak_params *p = c->p;
        const double *drops = c->drops;
        size_t nd = c->nd;
        if (nd == 0)
                return;
        /* The stretch before the first drop is a cycle (the first, seen in
         * part) only if it is short enough to be one; a lone drop after a
         * long quiet stretch is a free(). */
        double head = drops[0] - c->s[c->first].t_s;
        c->longest = head <= wmax / (double)p->min_floors ? head : 0;
        for (size_t j = 0; j + 1 < nd; j++)
                if (drops[j + 1] - drops[j] > c->longest)
                        c->longest = drops[j + 1] - drops[j];
        /* Stopped: the climb since the last drop outlasts the factor x the
         * longest cycle. With one drop only, the stretch before it is only a
         * lower bound of the cycle (the series may start mid-cycle): take at
         * least the shortest window, so that no window lies inside a climb
         * that is still a GC's. */
        double ref = c->longest;
        if (nd == 1 && ref < p->windows_s[0])
                ref = p->windows_s[0];
        c->stopped = c->longest > 0 && c->t_end - drops[nd - 1] > p->sawtooth_stop_factor * ref;
}

/* The reported window: the longest passing one (the most evidence, the
 * steadiest slope); else the judged window that came closest to a verdict
 * (the longest of those), whose reason is the most telling -- "a step",
 * "growth stopped", "no new high" rather than the 15 min window's "no
 * growth". With none judged: the shortest window's reason, unless it only
 * waits for data and a longer one has a better one (a gap, a sawtooth: the
 * window with the most cycles). */
static struct window_result *reported(struct window_result *res, size_t nw) {
        struct window_result *rep = NULL;
        for (size_t k = nw; k-- > 0;)
                if (judged(res[k].why) && (!rep || progress(res[k].why) > progress(rep->why)))
                        rep = &res[k];
        if (rep)
                return rep;
        rep = &res[0];
        for (size_t k = 0; k < nw; k++)
                if (res[k].why != W_COVERAGE) {
                        rep = &res[k];
                        break;
                }
        if (rep->why == W_SAWTOOTH)
                for (size_t k = 0; k < nw; k++)
                        if (res[k].why == W_SAWTOOTH && res[k].floors > rep->floors)
                                rep = &res[k];
        return rep;
}

/* The verdict from the reported window. */
static void set_verdict(const struct ctx *c, struct window_result *rep, struct leak_verdict *ret) {
        if (!judged(rep->why)) {
                set_reason(ret, rep, c->p, c->t_end);
                return;
        }
        if (!rep->stats)
                window_stats(c, rep);
        if (!isfinite(rep->slope) || !isfinite(rep->growth) || !isfinite(rep->z)) {
                /* values or times so extreme that the arithmetic overflows
                 * (bytes near 1e308, samples 1e-300 s apart): no verdict */
                snprintf(ret->reason, sizeof ret->reason, "not judged: the values overflow");
                return;
        }
        ret->evaluated = true;
        ret->suspected = rep->why == W_PASS;
        ret->slope_bytes_per_s = rep->slope;
        ret->growth_bytes = rep->growth;
        ret->window_s = rep->span;
        ret->confidence = 0.5 * erfc(-rep->z / M_SQRT2);
        ret->since_t_s = rep->since;
        if ((rep->why == W_PASS || (rep->why == W_UNSURE && rep->new_high)) && rep->growth_lo > 0 && rep->span > 0)
                ret->slope_lo_bytes_per_s = rep->growth_lo / rep->span;
        set_reason(ret, rep, c->p, c->t_end);
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

        /* One allocation: the kinds of s[lo..n), the drop times, the gaps. */
        size_t m = n - lo;
        size_t pt_size = (m + sizeof(double) - 1) / sizeof(double) * sizeof(double);
        _cleanup_free_ unsigned char *pt = malloc(pt_size + 3 * m * sizeof(double));
        if (!pt) {
                snprintf(ret->reason, sizeof ret->reason, "out of memory");
                return -ENOMEM;
        }
        double *drops = (double *)(void *)(pt + pt_size);
        double *gaps = drops + m;
        memset(pt, PT_OK, m);

        struct ctx c = {
                .s = s,
                .n = n,
                .t_end = t_end,
                .pt = pt,
                .lo = lo,
                .drops = drops,
                .gaps = gaps,
                .noise = noise_d / M_SQRT2,
                .p = p,
        };
        if (!classify(&c, pt, drops, gaps, thr, p->outlier_noise_k * noise_d))
                return -EINVAL;
        c.s0 = grace_from_t_s + p->grace_s;
        if (c.first > lo && s[c.first].t_s + p->grace_s > c.s0)
                c.s0 = s[c.first].t_s + p->grace_s;
        find_cycles(&c, wmax);

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
        set_verdict(&c, reported(res, p->n_windows), ret);
        return 0;
}

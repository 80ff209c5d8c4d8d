/* SPDX-License-Identifier: MIT */
/* The robust statistics the leak verdict rests on: selection and medians,
 * Theil-Sen slopes, Mann-Kendall trend tests, and the shape tests on a
 * window's floors. Pure functions over plain arrays. */
#include "analyze/leak-stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The noise estimate looks at the last 256 samples (2 min at 500 ms): the
 * lower quartile of 256 deviations is within ~11% (one standard error) of
 * the noise, and two selections on them cost ~0.5 us. */
#define NOISE_SAMPLES 256

/* The lower quartile of |x - median| / 0.31864 estimates the standard
 * deviation of a normal distribution (P(|Z| < 0.31864) = 1/4). */
#define QUARTILE_ABS_NORMAL 0.31864

/* Rearranges a[0..n) so that a[k] is the k-th smallest, everything before it
 * <= it and everything after >= it. Quickselect with a median-of-three pivot
 * and a branch-free Lomuto partition: on fresh data the partition's branches
 * would be mispredicted half the time (4-5x slower, measured). Values equal
 * to the pivot are gathered next to it, so that many equal values (a flat,
 * page-quantised series) do not make it quadratic. */
void select_kth(double *a, size_t n, size_t k) {
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
double median_inplace(double *a, size_t n) {
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
double theil_sen_buf(const double *x, const double *y, size_t n, double *buf) {
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
double mann_kendall_s(const double *y, size_t n, double *sorted, double *var_ret) {
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
                sort_array(sorted, n, sizeof(double), cmp_double);
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
double mann_kendall_zs(double s, double var) {
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
/* Could the Theil-Sen slope of the floors be >= t? It is not when fewer
 * than half the pairwise slopes are (the median lies below them); counted
 * without a division or a selection. May answer yes wrongly, never no. */
bool slope_may_reach(const double *x, const double *y, size_t m, double t) {
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

/* Does one step (two levels) fit the floors with less than `ratio` x the
 * squared error of the least-squares line? *at: the first floor after it. */
bool step_fits(const double *x, const double *y, size_t m, double ratio, double *at) {
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

void sen_slope(const double *x, const double *y, size_t m, double var_s, double bound_z, double *ret_slope,
               double *ret_slope_lo) {
        double buf[LEAK_BUCKETS * (LEAK_BUCKETS - 1) / 2];
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
                double rank = floor(((double)k - bound_z * sqrt(var_s > 0 ? var_s : 0)) / 2);
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
        *ret_slope = slope;
        *ret_slope_lo = slope_lo;
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
double diff_noise(const struct leak_point *s, size_t lo, size_t n) {
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

/* SPDX-License-Identifier: MIT */
/* The statistics behind leak_evaluate() (analyze/leak.c) and the series
 * point they take. Inputs are finite; n >= 1 unless said otherwise. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Floors per window: what the statistics' stack buffers are sized for. */
#define LEAK_BUCKETS 12

struct leak_point {
        double t_s; /* seconds, any origin, ascending */
        double bytes;
};

/* Median of the pairwise slopes (pairs with distinct x); NaN if there is
 * none. */
double theil_sen_slope(const double *x, const double *y, size_t n);
/* Mann-Kendall Z, tie corrected; 0 if n < 3. */
double mann_kendall_z(const double *y, size_t n);

/* Rearranges a[0..n) so that a[k] is the k-th smallest, everything before it
 * <= it and everything after >= it. */
void select_kth(double *a, size_t n, size_t k);
/* Median of a[0..n); reorders a, leaving the lower half in a[0..n/2). */
double median_inplace(double *a, size_t n);
/* Theil-Sen with the caller's scratch of n(n-1)/2 doubles; NaN without a
 * pair of distinct x. */
double theil_sen_buf(const double *x, const double *y, size_t n, double *buf);
/* Mann-Kendall S and, in *var_ret, its variance under "no trend" (tie
 * corrected); `sorted`: scratch of n doubles. */
double mann_kendall_s(const double *y, size_t n, double *sorted, double *var_ret);
/* Z from S and its variance, with the continuity correction. */
double mann_kendall_zs(double s, double var);
/* Could the Theil-Sen slope of (x, y) be >= t? Never a wrong no. */
bool slope_may_reach(const double *x, const double *y, size_t m, double t);
/* Does one step fit the floors with less than `ratio` x the squared error of
 * a line? *at: the first floor after the step. */
bool step_fits(const double *x, const double *y, size_t m, double ratio, double *at);
/* The Theil-Sen slope of m <= LEAK_BUCKETS points and Sen's lower
 * confidence bound of it, bound_z standard errors down (var_s: the variance
 * of Mann-Kendall S); both 0 without a pair of distinct x. */
void sen_slope(const double *x, const double *y, size_t m, double var_s, double bound_z, double *ret_slope,
               double *ret_slope_lo);
/* Robust standard deviation of the sample-to-sample differences of the
 * newest 256 points of s[lo..n); 0 from too few. */
double diff_noise(const struct leak_point *s, size_t lo, size_t n);

/* SPDX-License-Identifier: MIT */
/* Costs of daemon/analyze/histogram.c; prints figures, checks nothing.
 *
 *   gcc -std=gnu11 -O2 -D_GNU_SOURCE -Ilib -Idaemon tests/bench/hist-bench.c daemon/analyze/histogram.c lib/util.c -lm -o hist-bench
 *   ./hist-bench
 *
 * - ns per hist_add over 1e7 log-normal values (mu = ln 5 ms, sigma = 1),
 *   the values drawn beforehand (the figure excludes the generator);
 * - ns per hist_quantile on the 100 000-value histogram;
 * - encoded size of that histogram;
 * - us to merge 60 such histograms (different seeds) into an empty one and
 *   read p50, p95, p99, the work of a one-hour query over minute rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/histogram.h"
#include "util.h"
#include "xorshift.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng_next(void) {
        return xorshift64s(&rng_state);
}
static double rng_unit(void) {
        return ((double)(rng_next() >> 11) + 1.0) * 0x1p-53;
}
static double lognormal(void) {
        double u1 = rng_unit(), u2 = rng_unit();
        return exp(log(5.0) + sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static double now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static volatile double sink;

int main(void) {
        enum { ADDS = 10000000, HVALUES = 100000, MERGES = 60, ROUNDS = 50 };

        double *v = malloc(ADDS * sizeof v[0]);
        if (!v)
                return 1;
        for (size_t i = 0; i < ADDS; i++)
                v[i] = lognormal();

        struct hist h;
        hist_init(&h);
        double best = INFINITY;
        for (int round = 0; round < 3; round++) {
                hist_reset(&h);
                double t0 = now_ns();
                for (size_t i = 0; i < ADDS; i++)
                        hist_add(&h, v[i], 1);
                double t = (now_ns() - t0) / ADDS;
                if (t < best)
                        best = t;
        }
        printf("hist_add: %.1f ns per value (1e7 log-normal values, best of 3; window %u buckets)\n", best, h.n);

        /* the 100 000-value histogram */
        hist_reset(&h);
        for (size_t i = 0; i < HVALUES; i++)
                hist_add(&h, v[i], 1);
        static const double qs[] = { 0.5, 0.95, 0.99 };
        double t0 = now_ns();
        enum { QN = 100000 };
        for (int i = 0; i < QN; i++)
                sink = hist_quantile(&h, qs[i % 3]);
        printf("hist_quantile: %.0f ns per call (p50/p95/p99 in turn, 100 000-value histogram)\n",
               (now_ns() - t0) / QN);

        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        hist_encode(&h, &buf, &len);
        t0 = now_ns();
        struct hist d;
        hist_init(&d);
        for (int i = 0; i < 10000; i++)
                hist_decode(&d, buf, len);
        double dec = (now_ns() - t0) / 10000;
        uint8_t *e2;
        size_t l2;
        t0 = now_ns();
        for (int i = 0; i < 10000; i++) {
                hist_encode(&h, &e2, &l2);
                free(e2);
        }
        double enc = (now_ns() - t0) / 10000;
        printf("encoding: %zu bytes (100 000 log-normal values, %u buckets in the window); encode %.2f us, decode %.2f us\n",
               len, h.n, enc / 1000, dec / 1000);
        hist_done(&d);

        /* 60 such histograms, merged and queried */
        struct hist parts[MERGES];
        for (int k = 0; k < MERGES; k++) {
                hist_init(&parts[k]);
                for (size_t i = 0; i < HVALUES; i++)
                        hist_add(&parts[k], v[(size_t)k * HVALUES + i], 1);
        }
        struct hist m;
        hist_init(&m);
        best = INFINITY;
        for (int round = 0; round < ROUNDS; round++) {
                hist_done(&m); /* from empty, allocation included */
                t0 = now_ns();
                for (int k = 0; k < MERGES; k++)
                        hist_merge(&m, &parts[k]);
                for (int q = 0; q < 3; q++)
                        sink = hist_quantile(&m, qs[q]);
                double t = now_ns() - t0;
                if (t < best)
                        best = t;
        }
        printf("merge of %d histograms + 3 quantiles: %.1f us (best of %d; %.2f ms p50, %.2f ms p99)\n", MERGES,
               best / 1000, ROUNDS, hist_quantile(&m, 0.5), hist_quantile(&m, 0.99));

        /* the same from the stored form: decode each, merge */
        uint8_t *enc_parts[MERGES];
        size_t enc_len[MERGES];
        for (int k = 0; k < MERGES; k++)
                hist_encode(&parts[k], &enc_parts[k], &enc_len[k]);
        best = INFINITY;
        for (int round = 0; round < ROUNDS; round++) {
                struct hist one;
                hist_init(&one);
                hist_done(&m);
                t0 = now_ns();
                for (int k = 0; k < MERGES; k++) {
                        hist_decode(&one, enc_parts[k], enc_len[k]);
                        hist_merge(&m, &one);
                }
                for (int q = 0; q < 3; q++)
                        sink = hist_quantile(&m, qs[q]);
                double t = now_ns() - t0;
                if (t < best)
                        best = t;
                hist_done(&one);
        }
        printf("decode + merge of %d encoded histograms + 3 quantiles: %.1f us\n", MERGES, best / 1000);

        for (int k = 0; k < MERGES; k++) {
                free(enc_parts[k]);
                hist_done(&parts[k]);
        }
        hist_done(&m);
        hist_done(&h);
        free(v);
        return 0;
}

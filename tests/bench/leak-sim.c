/* SPDX-License-Identifier: MIT */
/* Simulation of daemon/analyze/leak.c over thousands of generated series; prints a
 * table, checks nothing (tests/analyze/test-leak.c checks).
 *
 *   meson compile -C build leak-sim && build/tests/leak-sim [options]
 *   gcc -std=gnu11 -O2 -D_GNU_SOURCE -Ilib -Idaemon tests/bench/leak-sim.c daemon/analyze/leak*.c -lm -o leak-sim
 *
 *   -n SCALE       run SCALE x the series (-n 0.1: a tenth, ~30 s)
 *   -j JOBS        worker processes (default: the CPUs)
 *   -i INTERVAL_S  sampling interval (default 0.5)
 *   -f             feed the detector as the daemon does (leakwatch_feed(): one
 *                  minimum per shortest window / 12) and judge when one completes
 *   -p NAME=VALUE  a parameter other than the default (leak_params field)
 *   -s SHAPE       only that shape (its row number, from 0)
 *   -d SHAPE,INDEX print one series' verdicts as they change; -v list misses
 *   -b             microseconds per evaluation (15 min look-back, 250 ms, 1 s)
 *
 * Every series is judged the way the daemon judges it: at EVERY sample, on
 * the samples up to it (registration at t = 0, so the grace runs from 0).
 *  - quiet shapes (10 000 series each at -n 1; 2 000 of the churn, which is
 *    not silent by design -- see test-leak's random walk): a series with a
 *    suspected verdict at any sample is a false positive; the table gives
 *    the share of such series and of such evaluations. They last 15 min:
 *    long enough for every default window, the 15 min one included (judged
 *    from 12.5 min on), to be judged;
 *  - leaking shapes (2 000 series each): the detection delay (first
 *    suspected verdict minus the start of the leak) median and p95, the share
 *    found within the shape's goal and within the 20 min series, and the
 *    first reported slope's error (p95 of |slope / true - 1|). The goal is
 *    the detector's promise where there is one (60 s for 2 MiB/s; 5 min under
 *    a GC), else the first window that can see the leak, as test-leak states it.
 * Parameters are drawn per series from realistic ranges (the table's second
 * column); the seed of series i of shape k is fixed, so the table is the same
 * for any -j. ~5 min at -n 1 on 2 cores. */
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyze/leak.h"
#include "analyze/leakwatch.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

/* ---- random numbers ------------------------------------------------------ */

struct rng {
        uint64_t s;
};

static uint64_t rng_next(struct rng *r) { /* xorshift64* */
        r->s ^= r->s >> 12;
        r->s ^= r->s << 25;
        r->s ^= r->s >> 27;
        return r->s * 0x2545f4914f6cdd1dull;
}
static void rng_seed(struct rng *r, uint64_t a, uint64_t b) {
        r->s = (a * 0x9e3779b97f4a7c15ull) ^ (b + 0x632be59bd9b4e019ull) ^ 0xd1b54a32d192ed03ull;
        if (!r->s)
                r->s = 1;
        for (int i = 0; i < 8; i++)
                rng_next(r);
}
static double unit(struct rng *r) {
        return ((double)(rng_next(r) >> 11) + 0.5) * 0x1p-53;
} /* (0,1) */
static double unif(struct rng *r, double a, double b) {
        return a + (b - a) * unit(r);
}
static double logunif(struct rng *r, double a, double b) {
        return exp(unif(r, log(a), log(b)));
}
static double normal(struct rng *r) {
        return sqrt(-2 * log(unit(r))) * cos(2 * M_PI * unit(r));
}

/* ---- shapes ---------------------------------------------------------------- */

struct gen {
        double dt, duration;
        double leak_from, rate; /* leaking shapes: when and how fast (bytes/s) */
        double base, sigma;     /* level and noise at the start of the leak */
        double goal;            /* seconds after leak_from; 0: from the windows (window_goal) */
};

/* Per-series noise: Gaussian sigma, and rare outliers (1 sample in 500,
 * +-50..200 MiB) in half the series. */
struct noise {
        double sigma;
        bool outliers;
};

static double add_noise(struct rng *r, const struct noise *nz, double v) {
        v += nz->sigma * normal(r);
        if (nz->outliers && unit(r) < 1.0 / 500)
                v += (unit(r) < 0.5 ? -1 : 1) * unif(r, 50 * MIB, 200 * MIB);
        return v > 0 ? v : 0;
}

/* A garbage collector: the heap climbs at `climb` bytes/s for a cycle of
 * `period` (+-25% jitter per cycle), then drops back to the trough (+-2% of
 * the amplitude). Returns the offset above the trough at t. */
struct gc {
        double period, amp, next_drop, cur_start, jitter_trough;
        double trough_off;
};
static void gc_init(struct gc *g, struct rng *r, double period, double amp) {
        g->period = period;
        g->amp = amp;
        double first = period * unif(r, 0.75, 1.25);
        g->cur_start = -first * unit(r); /* random phase */
        g->next_drop = g->cur_start + first;
        g->trough_off = 0;
}
static double gc_at(struct gc *g, struct rng *r, double t) {
        while (t >= g->next_drop) {
                g->cur_start = g->next_drop;
                g->next_drop += g->period * unif(r, 0.75, 1.25);
                g->trough_off = 0.02 * g->amp * normal(r);
        }
        double len = g->next_drop - g->cur_start;
        return g->trough_off + g->amp * (t - g->cur_start) / len;
}

enum shape {
        Q_FLAT,
        Q_STEP,
        Q_LEVELOFF,
        Q_SAWTOOTH,
        Q_CHURN,
        L_GOAL,
        L_LINEAR,
        L_SAWTOOTH,
        L_LATE,
        L_SLOW,
        N_SHAPES,
};

static const struct shape_info {
        const char *name;
        const char *params;
        bool leak;
} shapes[N_SHAPES] = {
        [Q_FLAT] = { "flat", "base 64M-4G, noise 0-5%, outliers", false },
        [Q_STEP] = { "step", "+256M-2G, rise 0-5 s, noise 0-2%", false },
        [Q_LEVELOFF] = { "level-off ramp", "load 0.5-4G/5-25 s; log/exp warm-up", false },
        [Q_SAWTOOTH] = { "GC sawtooth", "+-10-100M, period 5-30 s +-25%", false },
        [Q_CHURN] = { "churn (OU walk)", "sd 0.5-2% of base, tau 5-120 s", false },
        [L_GOAL] = { "2 MiB/s on 300M", "noise 0-1%, outliers; goal 60 s", true },
        [L_LINEAR] = { "linear leak", "0.5-10 MiB/s, base 64M-2G, noise 0-2%", true },
        [L_SAWTOOTH] = { "leak under GC", "0.5 MiB/s, +-50M, period 10-30 s; goal 5 min", true },
        [L_LATE] = { "late leak", "flat 2-10 min, then 0.5-5 MiB/s", true },
        [L_SLOW] = { "slow leak", "3-12 MiB/min, base 64M-1G", true },
};

/* Fills v[0..n) (t = i*dt); returns n. */
static size_t generate(enum shape k, struct rng *r, struct leak_point *v, size_t cap, struct gen *g) {
        size_t n = (size_t)(g->duration / g->dt) + 1;
        if (n > cap)
                n = cap;
        struct noise nz = { 0 };
        double base = logunif(r, 64 * MIB, 4 * GIB);
        g->leak_from = 0;
        g->rate = 0;
        g->goal = 0;

        switch (k) {
        case Q_FLAT:
                nz.sigma = unif(r, 0, 0.05) * base;
                nz.outliers = unit(r) < 0.5;
                for (size_t i = 0; i < n; i++)
                        v[i] = (struct leak_point){ i * g->dt, add_noise(r, &nz, base) };
                break;
        case Q_STEP: {
                /* one big allocation, touched over 0-5 s */
                nz.sigma = unif(r, 0, 0.02) * base;
                nz.outliers = unit(r) < 0.5;
                double at = unif(r, 0, g->duration), size = logunif(r, 256 * MIB, 2 * GIB), rise = unif(r, 0, 5);
                for (size_t i = 0; i < n; i++) {
                        double t = i * g->dt, x = base;
                        if (t >= at)
                                x += rise > 0 && t < at + rise ? size * (t - at) / rise : size;
                        v[i] = (struct leak_point){ t, add_noise(r, &nz, x) };
                }
                break;
        }
        case Q_LEVELOFF: {
                nz.sigma = unif(r, 0, 0.01) * base;
                nz.outliers = unit(r) < 0.5;
                base = logunif(r, 32 * MIB, 512 * MIB);
                int kind = (int)(unit(r) * 3);
                double c = kind == 0 ? unif(r, 0.5 * GIB, 4 * GIB) : logunif(r, 64 * MIB, 2 * GIB);
                double T = kind == 0 ? unif(r, 5, 25) : unif(r, 10, 40);
                double tau = kind == 1 ? unif(r, 0.5, 5) : unif(r, 2, 8);
                for (size_t i = 0; i < n; i++) {
                        double t = i * g->dt, x;
                        if (kind == 0) /* model load: linear, then flat */
                                x = base + c * (t < T ? t / T : 1);
                        else if (kind == 1) /* cache warm-up, logarithmic until full */
                                x = base + c * (t < T ? log1p(t / tau) / log1p(T / tau) : 1);
                        else /* warm-up saturating exponentially */
                                x = base + c * -expm1(-t / tau);
                        v[i] = (struct leak_point){ t, add_noise(r, &nz, x) };
                }
                break;
        }
        case Q_SAWTOOTH:
        case L_SAWTOOTH: {
                struct gc gc;
                base = logunif(r, 100 * MIB, 2 * GIB);
                double amp = k == L_SAWTOOTH ? 100 * MIB : 2 * unif(r, 10 * MIB, 100 * MIB);
                double period = k == L_SAWTOOTH ? unif(r, 10, 30) : unif(r, 5, 30);
                nz.sigma = unif(r, 0, 0.005) * base;
                nz.outliers = unit(r) < 0.5;
                gc_init(&gc, r, period, amp);
                if (k == L_SAWTOOTH) {
                        g->rate = 0.5 * MIB;
                        g->goal = 300;
                }
                for (size_t i = 0; i < n; i++) {
                        double t = i * g->dt;
                        v[i] = (struct leak_point){ t, add_noise(r, &nz, base + gc_at(&gc, r, t) + g->rate * t) };
                }
                break;
        }
        case Q_CHURN: {
                double sd = unif(r, 0.005, 0.02) * base, tau = unif(r, 5, 120);
                double a = exp(-g->dt / tau), x = sd * normal(r);
                nz.sigma = unif(r, 0, 0.005) * base;
                for (size_t i = 0; i < n; i++) {
                        x = a * x + sd * sqrt(1 - a * a) * normal(r);
                        v[i] = (struct leak_point){ i * g->dt, add_noise(r, &nz, base + x) };
                }
                break;
        }
        case L_GOAL:
        case L_LINEAR:
        case L_LATE:
        case L_SLOW:
                if (k == L_GOAL) {
                        base = 300 * MIB;
                        g->rate = 2 * MIB;
                        g->goal = 60;
                        nz.sigma = unif(r, 0, 0.01) * base;
                } else if (k == L_LINEAR) {
                        base = logunif(r, 64 * MIB, 2 * GIB);
                        g->rate = logunif(r, 0.5 * MIB, 10 * MIB);
                        nz.sigma = unif(r, 0, 0.02) * base;
                        g->goal = 0;
                } else if (k == L_LATE) {
                        base = logunif(r, 64 * MIB, 1 * GIB);
                        g->rate = logunif(r, 0.5 * MIB, 5 * MIB);
                        g->leak_from = unif(r, 120, 600);
                        nz.sigma = unif(r, 0, 0.01) * base;
                } else {
                        base = logunif(r, 64 * MIB, 1 * GIB);
                        g->rate = unif(r, 3, 12) * MIB / 60;
                        nz.sigma = unif(r, 0, 0.005) * base;
                }
                nz.outliers = unit(r) < 0.5;
                g->base = base;
                g->sigma = nz.sigma;
                for (size_t i = 0; i < n; i++) {
                        double t = i * g->dt;
                        double x = base + (t > g->leak_from ? g->rate * (t - g->leak_from) : 0);
                        v[i] = (struct leak_point){ t, add_noise(r, &nz, x) };
                }
                break;
        case N_SHAPES:
                break;
        }
        return n;
}

/* ---- running ------------------------------------------------------------------ */

struct result {      /* per series */
        float delay; /* leaking: first detection - leak start; NAN: missed; quiet: first FP time or NAN */
        float slope_err;
        uint32_t fp_evals, evals;
};

/* -f: the detector is fed as the daemon feeds it (leakwatch_feed(): one
 * floor per shortest window / LEAK_BUCKETS) and judges when a floor
 * completes; else it sees every sample and judges at every sample. */
static bool as_daemon;

/* The verdict at sample i (time t) into the result; true when it ends the
 * series (a leak found). */
static bool tally(enum shape k, const struct gen *g, double t, const struct leak_verdict *v, struct result *res) {
        res->evals++;
        if (!v->suspected)
                return false;
        if (!shapes[k].leak || t < g->leak_from) {
                if (isnan(res->delay))
                        res->delay = (float)t;
                res->fp_evals++;
                return false;
        }
        res->delay = (float)(t - g->leak_from);
        res->slope_err = (float)fabs(v->slope_bytes_per_s / g->rate - 1);
        return true;
}

static void run_series(enum shape k, size_t idx, double dt, struct leak_point *buf, size_t cap,
                       const struct leak_params *p, struct result *res) {
        struct rng r;
        struct gen g = { .dt = dt, .duration = shapes[k].leak ? 20 * 60 : 15 * 60 };
        struct leakwatch w;
        rng_seed(&r, (uint64_t)k + 1, idx);
        size_t n = generate(k, &r, buf, cap, &g);
        *res = (struct result){ .delay = NAN, .slope_err = NAN };
        if (as_daemon && leakwatch_init(&w, p) < 0)
                exit(1);
        for (size_t i = 0; i < n; i++) {
                struct leak_verdict v;
                int ret;
                if (!as_daemon)
                        ret = leak_evaluate(buf, i + 1, 0, p, &v);
                else if (!leakwatch_feed(&w, buf[i].t_s, buf[i].bytes))
                        continue;
                else
                        ret = leakwatch_evaluate(&w, p, &v);
                if (ret < 0) {
                        fprintf(stderr, "leak_evaluate failed\n");
                        exit(2);
                }
                if (tally(k, &g, buf[i].t_s, &v, res))
                        break;
        }
        if (as_daemon)
                leakwatch_done(&w);
}

/* -b: microseconds per evaluation of a full look-back (15 min + the grace)
 * at 250 ms and 1 s, on fresh series each time (a repeated series would
 * teach the branch predictor the data), median of 5 runs. */
static double bench_one(enum shape k, double dt, const struct leak_params *p) {
        size_t cap = (size_t)(1200 / dt) + 2, reps = dt < 0.5 ? 400 : 1600;
        struct leak_point *buf = malloc(cap * sizeof *buf);
        double runs[5];
        if (!buf)
                exit(1);
        for (int run = 0; run < 5; run++) {
                double total = 0;
                for (size_t it = 0; it < reps; it++) {
                        struct rng r;
                        struct gen g = { .dt = dt, .duration = 1200 };
                        rng_seed(&r, 99 + (uint64_t)k, it);
                        size_t n = generate(k, &r, buf, cap, &g);
                        struct timespec a, b;
                        struct leak_verdict v;
                        clock_gettime(CLOCK_MONOTONIC, &a);
                        leak_evaluate(buf, n, 0, p, &v);
                        clock_gettime(CLOCK_MONOTONIC, &b);
                        total += (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
                }
                runs[run] = total / (double)reps;
        }
        for (int i = 1; i < 5; i++) /* insertion sort, for the median */
                for (int j = i; j > 0 && runs[j - 1] > runs[j]; j--) {
                        double t = runs[j];
                        runs[j] = runs[j - 1];
                        runs[j - 1] = t;
                }
        free(buf);
        return runs[2];
}

static void bench(const struct leak_params *p) {
        static const enum shape ks[] = { Q_FLAT, Q_SAWTOOTH, L_LINEAR };
        printf("us per evaluation, 20-min series judged at its end (look-back 15 min + grace):\n");
        printf("%-17s %10s %10s\n", "shape", "250 ms", "1 s");
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
                printf("%-17s %10.2f %10.2f\n", shapes[ks[i]].name, bench_one(ks[i], 0.25, p), bench_one(ks[i], 1, p));
}

/* -p NAME=VALUE: one parameter other than the default. */
static int set_param(struct leak_params *p, const char *arg) {
        static const struct {
                const char *name;
                size_t off;
        } names[] = {
#define P(f) { #f, offsetof(struct leak_params, f) }
                P(grace_s),        P(min_growth_bytes), P(min_growth_pct),  P(min_z),
                P(growth_bound_z), P(min_coverage),     P(max_gap_frac),    P(min_growth_se),
                P(min_part_ratio), P(min_end_ratio),    P(max_step_fit),    P(min_new_high),
                P(drop_min_bytes), P(drop_noise_k),     P(outlier_noise_k), P(sawtooth_stop_factor),
                P(restart_frac),
#undef P
        };
        const char *eq = strchr(arg, '=');
        if (!eq)
                return -EINVAL;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
                if (strlen(names[i].name) == (size_t)(eq - arg) &&
                    strncmp(names[i].name, arg, (size_t)(eq - arg)) == 0) {
                        *(double *)(void *)((char *)p + names[i].off) = atof(eq + 1);
                        return 0;
                }
        if (strncmp(arg, "min_floors=", 11) == 0) {
                p->min_floors = (size_t)atoi(eq + 1);
                return 0;
        }
        return -EINVAL;
}

/* -d SHAPE,INDEX: print one series' verdicts whenever the reason changes. */
static void debug_series(int k, size_t idx, double dt, const struct leak_params *p) {
        size_t cap = (size_t)(20 * 60 / dt) + 2;
        struct leak_point *buf = malloc(cap * sizeof *buf);
        struct rng r;
        struct gen g = { .dt = dt, .duration = shapes[k].leak ? 20 * 60 : 15 * 60 };
        if (!buf)
                return;
        rng_seed(&r, (uint64_t)k + 1, idx);
        size_t n = generate((enum shape)k, &r, buf, cap, &g);
        char last[256] = "";
        printf("%s #%zu: %zu samples, first %.1f MiB, last %.1f MiB, leak from %.0f s at %.3f MiB/s\n", shapes[k].name,
               idx, n, buf[0].bytes / MIB, buf[n - 1].bytes / MIB, g.leak_from, g.rate / MIB);
        for (size_t i = 0; i < n; i++) {
                struct leak_verdict v;
                leak_evaluate(buf, i + 1, 0, p, &v);
                if (strcmp(v.reason, last) != 0 && (v.suspected || strncmp(v.reason, last, 12) != 0)) {
                        printf("t=%7.1f %8.1f MiB %c %s\n", buf[i].t_s, buf[i].bytes / MIB, v.suspected ? '!' : ' ',
                               v.reason);
                        snprintf(last, sizeof last, "%s", v.reason);
                }
        }
        free(buf);
}

static int cmp_float(const void *a, const void *b) {
        float x = *(const float *)a, y = *(const float *)b;
        return (x > y) - (x < y);
}

static double quantile(float *a, size_t n, double q) { /* a sorted */
        if (n == 0)
                return NAN;
        size_t i = (size_t)ceil(q * (double)n);
        return a[i ? i - 1 : 0];
}

/* The goal of a linear leak found from `from` (registration: the grace
 * applies, a window is judged on 80% of its span; a late start: the window
 * must lie mostly in the leak), as test-leak states it: the first default
 * window that holds >= 10 samples and over which the leak clears the growth
 * floor (16 MiB, 5% of the level, 8 standard errors of the growth as the
 * noise predicts them) with 25% to spare; half that window again with heavy
 * noise (sigma >= 10 MiB). */
static double window_goal(const struct leak_params *p, const struct gen *g) {
        bool registration = g->leak_from == 0;
        for (size_t w = 0; w < p->n_windows; w++) {
                double W = p->windows_s[w], span = registration ? p->min_coverage * W : W;
                double level = g->base + (registration ? g->rate * p->grace_s : 0);
                double need = fmax(p->min_growth_bytes, p->min_growth_pct / 100 * level);
                double per_floor = fmax(1, span / g->dt / LEAK_BUCKETS);
                need = fmax(need, p->min_growth_se * 1.05 * g->sigma / (1 + 0.3 * log(per_floor)));
                if (span / g->dt < 10 || g->rate * span < 1.25 * need)
                        continue;
                double extra = g->sigma >= 10 * MIB ? 1.5 : 1;
                return registration ? p->grace_s + extra * W : extra * 1.5 * W;
        }
        return INFINITY;
}

struct opts {
        double scale, dt;
        int jobs;
        bool verbose, bench;
        int dbg_shape, only;
        size_t dbg_idx;
};

/* 0, or the exit status for a bad option. */
static int parse_args(int argc, char *argv[], struct opts *o, struct leak_params *p) {
        int opt;
        while ((opt = getopt(argc, argv, "n:j:i:vd:p:fbs:")) != -1) {
                switch (opt) {
                case 'n':
                        o->scale = atof(optarg);
                        break;
                case 'j':
                        o->jobs = atoi(optarg);
                        break;
                case 'i':
                        o->dt = atof(optarg);
                        break;
                case 'v':
                        o->verbose = true;
                        break;
                case 'b':
                        o->bench = true;
                        break;
                case 's':
                        o->only = atoi(optarg);
                        break;
                case 'f':
                        as_daemon = true;
                        break;
                case 'p':
                        if (set_param(p, optarg) < 0) {
                                fprintf(stderr, "-p NAME=VALUE: unknown parameter %s\n", optarg);
                                return 2;
                        }
                        break;
                case 'd':
                        if (sscanf(optarg, "%d,%zu", &o->dbg_shape, &o->dbg_idx) != 2 || o->dbg_shape < 0 ||
                            o->dbg_shape >= N_SHAPES) {
                                fprintf(stderr, "-d SHAPE,INDEX\n");
                                return 2;
                        }
                        break;
                default:
                        fprintf(stderr,
                                "usage: %s [-n SCALE] [-j JOBS] [-i INTERVAL_S] [-f] [-s SHAPE] [-v] [-d SHAPE,INDEX] [-p NAME=VALUE]... | -b\n",
                                argv[0]);
                        return 2;
                }
        }
        if (!(o->scale > 0) || o->jobs < 1 || !(o->dt > 0)) {
                fprintf(stderr, "bad option\n");
                return 2;
        }
        return 0;
}

/* Reads n results from fd: worker j's slice, series j, j + nj, ... */
static int read_slice(int fd, struct result *res, size_t ns, int j, int nj) {
        for (size_t i = (size_t)j; i < ns; i += (size_t)nj) {
                size_t got = 0;
                while (got < sizeof res[i]) {
                        ssize_t r = read(fd, (char *)&res[i] + got, sizeof res[i] - got);
                        if (r <= 0)
                                return -EIO;
                        got += (size_t)r;
                }
        }
        return 0;
}

/* Runs the ns series of shape k on forked workers, each writing its slice
 * back through a pipe. */
static int run_shape(enum shape k, size_t ns, const struct opts *o, const struct leak_params *p, struct leak_point *buf,
                     size_t cap, struct result *res) {
        int nj = o->jobs < (int)ns ? o->jobs : (int)ns;
        int fds[64][2];
        pid_t pids[64];
        if (nj > 64)
                nj = 64;
        for (int j = 0; j < nj; j++) {
                if (pipe(fds[j]) < 0)
                        return -errno;
                pids[j] = fork();
                if (pids[j] < 0)
                        return -errno;
                if (pids[j] == 0) {
                        close(fds[j][0]);
                        for (size_t i = (size_t)j; i < ns; i += (size_t)nj) {
                                struct result rr;
                                run_series(k, i, o->dt, buf, cap, p, &rr);
                                if (write(fds[j][1], &rr, sizeof rr) != (ssize_t)sizeof rr)
                                        _exit(1);
                        }
                        _exit(0);
                }
                close(fds[j][1]);
        }
        for (int j = 0; j < nj; j++) {
                if (read_slice(fds[j][0], res, ns, j, nj) < 0) {
                        fprintf(stderr, "worker died\n");
                        return -EIO;
                }
                close(fds[j][0]);
                waitpid(pids[j], NULL, 0);
        }
        return 0;
}

/* A shape's figures over its series. */
struct tally {
        size_t fp_series, found, in_goal;
        uint64_t fp_evals, evals;
        float *delays, *errs; /* of the found leaks */
};

static void count_shape(enum shape k, size_t ns, const struct result *res, const struct opts *o,
                        const struct leak_params *p, struct leak_point *buf, size_t cap, struct tally *t) {
        for (size_t i = 0; i < ns; i++) {
                t->evals += res[i].evals;
                t->fp_evals += res[i].fp_evals;
                if (res[i].fp_evals)
                        t->fp_series++;
                if (shapes[k].leak && !isnan(res[i].delay)) {
                        t->errs[t->found] = res[i].slope_err;
                        t->delays[t->found++] = res[i].delay;
                        /* regenerate the parameters for the goal */
                        struct rng r;
                        struct gen g = { .dt = o->dt, .duration = 20 * 60 };
                        rng_seed(&r, (uint64_t)k + 1, i);
                        (void)generate(k, &r, buf, cap, &g);
                        double goal = g.goal > 0 ? g.goal : window_goal(p, &g);
                        if (res[i].delay <= goal)
                                t->in_goal++;
                        else if (o->verbose)
                                printf("  late %s #%zu: %.1f s (goal %.0f)\n", shapes[k].name, i, res[i].delay, goal);
                } else if (shapes[k].leak && o->verbose)
                        printf("  missed %s #%zu\n", shapes[k].name, i);
                if (!shapes[k].leak && res[i].fp_evals && o->verbose)
                        printf("  FP %s #%zu at t=%.1f\n", shapes[k].name, i, res[i].delay);
        }
}

static void print_shape(enum shape k, size_t ns, struct tally *t) {
        qsort(t->delays, t->found, sizeof(float), cmp_float);
        qsort(t->errs, t->found, sizeof(float), cmp_float);
        char fs[32] = "-", fe[32] = "-", d50[16] = "-", d95[16] = "-", ig[16] = "-", fd[16] = "-", s95[16] = "-";
        if (!shapes[k].leak) {
                snprintf(fs, sizeof fs, "%.2f%%", 100.0 * (double)t->fp_series / (double)ns);
                snprintf(fe, sizeof fe, "%.4f%%", 100.0 * (double)t->fp_evals / (double)t->evals);
        } else {
                snprintf(d50, sizeof d50, "%.1f s", quantile(t->delays, t->found, 0.5));
                snprintf(d95, sizeof d95, "%.1f s", quantile(t->delays, t->found, 0.95));
                snprintf(ig, sizeof ig, "%.1f%%", 100.0 * (double)t->in_goal / (double)ns);
                snprintf(fd, sizeof fd, "%.1f%%", 100.0 * (double)t->found / (double)ns);
                snprintf(s95, sizeof s95, "%.1f%%", 100.0 * quantile(t->errs, t->found, 0.95));
                if (t->fp_series)
                        snprintf(fs, sizeof fs, "%.2f%%", 100.0 * (double)t->fp_series / (double)ns);
        }
        printf("%-17s %-46s %7zu %9s %11s | %8s %8s %8s %8s %8s\n", shapes[k].name, shapes[k].params, ns, fs, fe, d50,
               d95, ig, fd, s95);
        fflush(stdout);
}

static void print_header(const struct opts *o, const struct leak_params *p) {
        if (as_daemon)
                printf("leak-sim: interval %.3g s, fed one floor per %.3g s, evaluated at every floor; defaults: windows",
                       o->dt, p->windows_s[0] / LEAK_BUCKETS);
        else
                printf("leak-sim: interval %.3g s, evaluated at every sample; defaults: windows", o->dt);
        for (size_t w = 0; w < p->n_windows; w++)
                printf("%s%g", w ? "," : " ", p->windows_s[w]);
        printf(" s, grace %g s, %g MiB, %g%%, Z %.1f\n\n", p->grace_s, p->min_growth_bytes / MIB, p->min_growth_pct,
               p->min_z);
        printf("%-17s %-46s %7s %9s %11s | %8s %8s %8s %8s %8s\n", "shape", "parameters", "series", "FP series",
               "FP evals", "delay50", "delay95", "in goal", "found", "slope95");
}

/* One row of the table; the shape's evaluations, or 0 on failure. */
static uint64_t one_shape(enum shape k, const struct opts *o, const struct leak_params *p, struct leak_point *buf,
                          size_t cap) {
        size_t ns = (size_t)((shapes[k].leak || k == Q_CHURN ? 2000 : 10000) * o->scale);
        if (ns < 1)
                ns = 1;
        struct result *res = calloc(ns, sizeof *res);
        struct tally t = { .delays = malloc(ns * sizeof(float)), .errs = malloc(ns * sizeof(float)) };
        uint64_t evals = 0;
        if (res && t.delays && t.errs && run_shape(k, ns, o, p, buf, cap, res) == 0) {
                count_shape(k, ns, res, o, p, buf, cap, &t);
                print_shape(k, ns, &t);
                evals = t.evals;
        }
        free(t.delays);
        free(t.errs);
        free(res);
        return evals;
}

int main(int argc, char *argv[]) {
        struct opts o = {
                .scale = 1, .dt = 0.5, .jobs = (int)sysconf(_SC_NPROCESSORS_ONLN), .dbg_shape = -1, .only = -1
        };
        struct leak_params p;
        leak_params_default(&p);
        int r = parse_args(argc, argv, &o, &p);
        if (r != 0)
                return r;
        if (o.dbg_shape >= 0) {
                debug_series(o.dbg_shape, o.dbg_idx, o.dt, &p);
                return 0;
        }
        if (o.bench) {
                bench(&p);
                return 0;
        }
        size_t cap = (size_t)(20 * 60 / o.dt) + 2;
        struct leak_point *buf = malloc(cap * sizeof *buf);
        if (!buf)
                return 1;
        print_header(&o, &p);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        uint64_t total_evals = 0;
        for (int k = 0; k < N_SHAPES; k++) {
                if (o.only >= 0 && k != o.only)
                        continue;
                uint64_t evals = one_shape((enum shape)k, &o, &p, buf, cap);
                if (evals == 0)
                        return 1;
                total_evals += evals;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double el = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        printf("\n%llu evaluations in %.1f s on %d job(s): %.2f us per evaluation per job\n",
               (unsigned long long)total_evals, el, o.jobs, 1e6 * el * o.jobs / (double)total_evals);
        free(buf);
        return 0;
}

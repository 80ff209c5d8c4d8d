/* SPDX-License-Identifier: MIT */
/* Generated memory series and the checks on the verdicts over them, shared
 * by test-leak.c and test-leak-tables.c. Deterministic: a fixed-seed
 * generator. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/leak.h"

#define KIB 1024.0
#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

/* -v: print every row's outcome; -vv: and its reasons. */
extern int verbose;
void parse_verbose(int argc, char *argv[]);
/* false: the detector sees every sample and judges at every sample. true:
 * it is fed as the daemon feeds it (leakwatch_feed(): one floor per
 * shortest window / LEAK_BUCKETS) and judges whenever a floor completes. */
extern bool as_daemon;

void rng_seed(uint64_t s);
uint64_t rng_next(void);
double rng_unit(void);   /* [0, 1) */
double rng_normal(void); /* N(0, 1) */

enum ramp { RAMP_NONE, RAMP_LINEAR, RAMP_LOG, RAMP_EXP };

struct spec {
        const char *name;
        double dt, duration; /* s */
        double base;         /* bytes at registration (t = 0) */
        double rate;         /* leak, bytes/s from leak_from on */
        double leak_from;
        double noise;    /* Gaussian, sigma as a fraction of base */
        double outliers; /* chance per sample of a +-200 MiB outlier */
        double step_at, step_size, step_rise;
        enum ramp ramp; /* from t = 0 (or the restart): to ramp_size over ramp_time */
        double ramp_size, ramp_time, ramp_tau;
        double saw_amp, saw_period, saw_jitter; /* peak-to-peak; jitter as a fraction of the period */
        double saw_first;                       /* the first drop (0: a random phase) */
        double dip_at, dip;                     /* one sample at dip_at lower by dip (an outlier placed by hand) */
        double walk;                            /* random walk: step sigma per sample, bytes */
        double gap_from, gap_len;
        double restart_at, restart_rate; /* the value falls to 5 MiB, the ramp runs again, then leaks at restart_rate */
        double mark_at;                  /* a mark: the grace starts again */
        uint64_t seed;
        /* expectations */
        bool leak;        /* must be suspected... */
        double goal;      /* ...within this many seconds of leak_from (of registration if 0) */
        double true_rate; /* the slope to report (default: rate) */
};

/* The series of sp, at most cap points; returns how many. */
size_t generate(const struct spec *sp, struct leak_point *pts, size_t cap);

struct outcome {
        size_t evals, suspected, einval;
        size_t after_first;        /* evaluations from the first suspected one on */
        double first_t;            /* first suspected verdict; NAN: never */
        struct leak_verdict first; /* that verdict */
        struct leak_verdict last;  /* the verdict at the last sample */
        struct leak_verdict last_suspected;
        double first_judged_t; /* first evaluated verdict */
};

/* Judges sp's series at every sample (or floor, as_daemon). */
void judge(const struct spec *sp, const struct leak_params *p, struct outcome *o);

/* A found leak's reported slope must be within 20% of the true rate: at the
 * latest suspected verdict always, and at the first one too -- except under
 * heavy noise (sigma >= 10 MiB: 5% of 300 MiB, 1% of 2 GiB), where the first
 * verdict comes from the first window whose estimate cleared the floor and
 * may be off by up to 40% (it settles as longer windows pass). Once found,
 * the verdict must hold for at least half of the evaluations that follow
 * (without the caller's hysteresis). */
#define SLOPE_TOL 0.20
#define SLOPE_TOL_NOISY 0.40
#define NOISY (10 * MIB)
void check_row(const struct spec *sp, const struct leak_params *p);

/* The goal for a linear leak of `rate` on `base` sampled every `dt`: the
 * grace, plus the first default window that holds >= 10 samples on 80% of
 * its span and over which the leak clears the growth floor (16 MiB, 5% of
 * the level, 8 standard errors) with 25% to spare -- no window can see it
 * sooner. With 5% noise, half that window again: the noisy floors may need
 * the rest of it, or the next window. */
double linear_goal(const struct leak_params *p, double base, double rate, double noise, double dt);

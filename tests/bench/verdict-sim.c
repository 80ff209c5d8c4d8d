/* SPDX-License-Identifier: MIT */
/* Simulation of the verdicts beside the leak (daemon/analyze/verdict.c) over
 * thousands of generated workloads, judged as the daemon judges them; prints
 * each verdict's false-positive rate on quiet workloads (0 expected) and, as
 * a control, how often it fires where it should. Checks nothing
 * (tests/analyze/test-verdict.c and the black-box tests do).
 *
 *   meson compile -C build verdict-sim && build/tests/verdict-sim [-n SCALE]
 *
 *   -n SCALE   run SCALE x the series (default 1: ~1 min on 2 cores)
 *
 * - input_bound: training loops of 60 to 600 s, steps of 5 ms to 2 s with
 *   +-30% jitter, a data wait per step of 0 to 10% of it with heavy-tailed
 *   noise (lognormal, sigma 0.8), 0.1% of the waits a stall of 5 steps; cut
 *   into the daemon's 1-second slices and judged at every second over the
 *   default 60 s window. Quiet: the wait's mean share is at most 10% (half
 *   the 20% threshold); control: 30 to 60%. A second row has 1% of the waits
 *   a stall: the minutes that hold two or three of them really wait 20% and
 *   more (a grey zone, not a quiet job).
 * - gpu_idle: 30 min of 1 s samples of a job holding 2 to 40 GiB: busy at 20
 *   to 100% with dips to 0 to 4% lasting up to 30 s, and pauses at 0 to 3%
 *   (a checkpoint, an evaluation on the CPU) of up to 8 min, each after at
 *   least a minute of work; or holding under 1 GiB and idle. Judged with the
 *   defaults (1 GiB, 5%, 10 min). Control: a pause of 11 to 20 min.
 * - oom_eta: memory that does not grow steadily (flat with noise, one step,
 *   a ramp that levels off, a GC sawtooth; tests/analyze/leak-series.c's generator),
 *   fed to a leak watch as the daemon feeds it: a forecast (a positive lower
 *   bound of the slope) at any evaluation is a false one. Control: linear
 *   leaks of 0.5 to 8 MiB/s. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyze/leakwatch.h"
#include "analyze/verdict.h"
#include "leak-series.h"

#define WINDOW_S 60

static double unif(double a, double b) {
        return a + (b - a) * rng_unit();
}

static double logunif(double a, double b) {
        return exp(unif(log(a), log(b)));
}

/* ---- input_bound ------------------------------------------------------------ */

/* One loop (a share of stall_p of its waits are stalls of 5 steps); true
 * when any evaluation flags it. */
static bool loop_flagged(double share, double step_ms, double duration_s, double stall_p) {
        size_t n = (size_t)duration_s + 2;
        double *data = calloc(n, sizeof *data), *step = calloc(n, sizeof *step), *steps = calloc(n, sizeof *steps);
        if (!data || !step || !steps)
                exit(1);
        double t = 0; /* ms */
        while (t < duration_s * 1000) {
                double s = step_ms * unif(0.7, 1.3);
                double w = share / (1 - share) * step_ms * exp(0.8 * rng_normal() - 0.32); /* mean share */
                if (rng_unit() < stall_p)
                        w += 5 * step_ms;
                t += w;
                size_t k = (size_t)(t / 1000);
                if (k < n)
                        data[k] += w;
                t += s;
                k = (size_t)(t / 1000);
                if (k < n) {
                        step[k] += s;
                        steps[k] += 1;
                }
        }
        struct input_bound_params p;
        input_bound_params_default(&p);
        bool flagged = false;
        for (size_t now = 1; now < n && !flagged; now++) {
                struct input_bound_in in = { .covered_s = now < WINDOW_S ? (double)now : WINDOW_S, .tree = true };
                size_t from = now > WINDOW_S ? now - WINDOW_S : 0;
                input_bound_sum(&p, data + from, step + from, steps + from, now - from, false, &in);
                struct input_bound_verdict v;
                input_bound_evaluate(&p, &in, &v);
                flagged = v.flagged;
        }
        free(data);
        free(step);
        free(steps);
        return flagged;
}

/* One row: n loops of each kind, their parameters drawn in a fixed order. */
static size_t loops_flagged(size_t n, uint64_t seed, double lo, double hi, double stall_p) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                rng_seed(seed + i);
                double share = unif(lo, hi), step = logunif(5, 2000), duration = unif(60, 600);
                k += loop_flagged(share, step, duration, stall_p);
        }
        return k;
}

static void input_bound(size_t n) {
        size_t fp = loops_flagged(n, 1000, 0, 0.10, 0.001), gray = loops_flagged(n, 5000, 0, 0.10, 0.01),
               hits = loops_flagged(n, 9000, 0.30, 0.60, 0.001);
        printf("| input_bound | %zu loops, data wait <= 10%% of the step, 0.1%% of the waits a stall of 5 steps | "
               "%zu (%.2f%%) | %.1f%% of %zu loops at 30-60%% |\n",
               n, fp, 100.0 * (double)fp / (double)n, 100.0 * (double)hits / (double)n, n);
        printf("| input_bound | the same with 1%% of the waits a stall (minutes with 2 or 3 stalls wait 20%% and "
               "more) | %zu (%.2f%%) | |\n",
               gray, 100.0 * (double)gray / (double)n);
}

/* ---- gpu_idle ------------------------------------------------------------- */

/* A job of 30 min: busy, with dips and pauses of at most pause_max_s, each
 * after at least a minute of work; control: one pause of control_s at 5 min. */
static bool gpu_flagged(double mem, double busy_lo, double pause_max_s, double control_s) {
        struct gpu_idle_params p;
        gpu_idle_params_default(&p);
        struct gpu_idle_watch w = { 0 };
        struct gpu_idle_verdict v;
        double pause_left = 0, dip_left = 0, busy_for = 0;
        bool flagged = false;
        for (int t = 0; t < 1800 && !flagged; t++) {
                if (control_s > 0 && t == 300)
                        pause_left = control_s;
                else if (control_s == 0 && pause_left <= 0 && dip_left <= 0 && busy_for >= 60) {
                        if (rng_unit() < 0.003)
                                pause_left = unif(30, pause_max_s);
                        else if (rng_unit() < 0.01)
                                dip_left = unif(1, 30);
                }
                double util = pause_left > 0 ? unif(0, 3) : dip_left > 0 ? unif(0, 4) : unif(busy_lo, 100);
                busy_for = pause_left > 0 || dip_left > 0 ? 0 : busy_for + 1;
                pause_left--;
                dip_left--;
                struct gpu_idle_use u = { "0000:41:00.0", true, (uint64_t)mem, true, util };
                gpu_idle_step(&w, &p, 1000000 + (int64_t)t * 1000, true, &u, 1, &v);
                flagged = v.flagged;
        }
        return flagged;
}

static void gpu_idle(size_t n) {
        size_t fp = 0, fp_small = 0, hits = 0;
        for (size_t i = 0; i < n; i++) {
                rng_seed(2000 + i);
                fp += gpu_flagged(logunif(2, 40) * GIB, unif(20, 60), 480, 0);
                fp_small += gpu_flagged(unif(100, 1000) * MIB, 0, 0, 1800); /* a context, idle throughout */
                hits += gpu_flagged(logunif(2, 40) * GIB, unif(20, 60), 0, unif(660, 1200));
        }
        printf("| gpu_idle | %zu jobs of 30 min: busy, dips <= 30 s, pauses <= 8 min | %zu (%.2f%%) | %.1f%% of %zu "
               "jobs with a pause of 11-20 min |\n",
               n, fp, 100.0 * (double)fp / (double)n, 100.0 * (double)hits / (double)n, n);
        printf("| gpu_idle | %zu processes holding under 1 GiB (a context), idle | %zu (%.2f%%) | |\n", n, fp_small,
               100.0 * (double)fp_small / (double)n);
}

/* ---- oom_eta -------------------------------------------------------------- */

/* Whether any evaluation of sp's series, fed as the daemon feeds it,
 * hands out a lower bound of the slope to forecast from. */
static bool forecasts(const struct spec *sp, const struct leak_params *p, double *ret_first_t) {
        size_t cap = (size_t)(sp->duration / sp->dt) + 2;
        struct leak_point *pts = malloc(cap * sizeof *pts);
        struct leakwatch w;
        if (!pts || leakwatch_init(&w, p) < 0)
                exit(1);
        size_t n = generate(sp, pts, cap);
        bool any = false;
        for (size_t i = 0; i < n && !any; i++) {
                if (!leakwatch_feed(&w, pts[i].t_s, pts[i].bytes))
                        continue;
                struct leak_verdict v;
                if (leakwatch_evaluate(&w, p, &v) == 0 && v.slope_lo_bytes_per_s > 0) {
                        any = true;
                        *ret_first_t = pts[i].t_s;
                }
        }
        leakwatch_done(&w);
        free(pts);
        return any;
}

static void oom(size_t n) {
        struct leak_params p;
        leak_params_default(&p);
        static const char *const shapes[] = { "flat", "step", "ramp that levels off", "GC sawtooth" };
        for (int s = 0; s < 4; s++) {
                size_t fp = 0;
                for (size_t i = 0; i < n; i++) {
                        rng_seed(3000 + 10000 * (uint64_t)s + i);
                        struct spec sp = { .name = shapes[s],
                                           .dt = 0.5,
                                           .duration = 900,
                                           .seed = 4000 + i,
                                           .base = logunif(64 * MIB, 4 * GIB),
                                           .noise = unif(0, 0.02) };
                        if (s == 1) {
                                sp.step_at = unif(60, 800);
                                sp.step_size = logunif(256 * MIB, 2 * GIB);
                        } else if (s == 2) {
                                sp.ramp = (enum ramp)(1 + i % 3);
                                sp.ramp_size = logunif(512 * MIB, 4 * GIB);
                                sp.ramp_time = unif(5, 25);
                                sp.ramp_tau = sp.ramp_time / 3;
                        } else if (s == 3) {
                                sp.saw_amp = logunif(10 * MIB, 100 * MIB);
                                sp.saw_period = unif(5, 30);
                                sp.saw_jitter = 0.25;
                        }
                        double t;
                        fp += forecasts(&sp, &p, &t);
                }
                printf("| oom_eta | %zu series of 15 min: %s | %zu (%.2f%%) | |\n", n, shapes[s], fp,
                       100.0 * (double)fp / (double)n);
        }
        size_t hits = 0;
        double delay = 0;
        for (size_t i = 0; i < n; i++) {
                rng_seed(9000 + i);
                struct spec sp = { .name = "leak",
                                   .dt = 0.5,
                                   .duration = 600,
                                   .seed = 5000 + i,
                                   .base = logunif(64 * MIB, 2 * GIB),
                                   .noise = unif(0, 0.01),
                                   .rate = logunif(0.5 * MIB, 8 * MIB) };
                double t;
                if (forecasts(&sp, &p, &t)) {
                        hits++;
                        delay += t;
                }
        }
        printf("| oom_eta | control | | %.1f%% of %zu leaks of 0.5-8 MiB/s, the first after %.0f s on average |\n",
               100.0 * (double)hits / (double)n, n, hits ? delay / (double)hits : NAN);
}

int main(int argc, char **argv) {
        double scale = 1;
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
                        scale = atof(argv[++i]);
                else {
                        fprintf(stderr, "usage: verdict-sim [-n SCALE]\n");
                        return 2;
                }
        clock_t c0 = clock();
        printf("| verdict | quiet workloads | false positives | control |\n| --- | --- | --- | --- |\n");
        input_bound((size_t)(2000 * scale));
        gpu_idle((size_t)(2000 * scale));
        oom((size_t)(500 * scale));
        printf("\n%.1f s of CPU\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
        return 0;
}

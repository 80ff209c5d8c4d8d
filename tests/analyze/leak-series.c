/* SPDX-License-Identifier: MIT */
#include "leak-series.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyze/leakwatch.h"
#include "tap.h"
#include "util.h"
#include "xorshift.h"

int verbose;

void parse_verbose(int argc, char *argv[]) {
        for (int i = 1; i < argc; i++)
                if (streq(argv[i], "-v") || streq(argv[i], "-vv"))
                        verbose += streq(argv[i], "-vv") ? 2 : 1;
}

/* ---- fixed-seed random numbers ------------------------------------------ */

static uint64_t rng_state;

void rng_seed(uint64_t s) {
        rng_state = s * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
        if (!rng_state)
                rng_state = 1;
}

uint64_t rng_next(void) {
        return xorshift64s(&rng_state);
}

double rng_unit(void) {
        return ((double)(rng_next() >> 11) + 0.5) * 0x1p-53;
} /* (0, 1) */
double rng_normal(void) {
        return sqrt(-2.0 * log(rng_unit())) * cos(2.0 * M_PI * rng_unit());
}

/* ---- generated series ------------------------------------------------------ */

static double ramp_at(const struct spec *sp, double t) {
        if (t < 0)
                return 0;
        switch (sp->ramp) {
        case RAMP_LINEAR:
                return sp->ramp_size * (t < sp->ramp_time ? t / sp->ramp_time : 1);
        case RAMP_LOG:
                return sp->ramp_size *
                       (t < sp->ramp_time ? log1p(t / sp->ramp_tau) / log1p(sp->ramp_time / sp->ramp_tau) : 1);
        case RAMP_EXP:
                return sp->ramp_size * -expm1(-t / sp->ramp_tau);
        case RAMP_NONE:
                break;
        }
        return 0;
}

/* Fills pts (sized by the caller); returns the count. */
size_t generate(const struct spec *sp, struct leak_point *pts, size_t cap) {
        rng_seed(sp->seed ? sp->seed : 1);
        size_t n = 0;
        double walk = 0, saw_start = 0, saw_next = sp->saw_period, saw_trough = 0;
        if (sp->saw_period > 0) { /* random phase */
                saw_start = sp->saw_first > 0 ? sp->saw_first - sp->saw_period : -sp->saw_period * rng_unit();
                saw_next = saw_start + sp->saw_period;
        }
        for (size_t i = 0;; i++) {
                double t = (double)i * sp->dt;
                if (t > sp->duration + 1e-9 || n >= cap)
                        break;
                walk += sp->walk * rng_normal();
                double v;
                if (sp->restart_at > 0 && t >= sp->restart_at) {
                        double u = t - sp->restart_at;
                        v = 5 * MIB + ramp_at(sp, u) + sp->restart_rate * u;
                } else {
                        v = sp->base + ramp_at(sp, t) + walk;
                        if (t > sp->leak_from)
                                v += sp->rate * (t - sp->leak_from);
                        if (sp->step_size != 0 && t >= sp->step_at)
                                v += sp->step_rise > 0 && t < sp->step_at + sp->step_rise
                                             ? sp->step_size * (t - sp->step_at) / sp->step_rise
                                             : sp->step_size;
                        if (sp->saw_period > 0) {
                                while (t >= saw_next) {
                                        saw_start = saw_next;
                                        saw_next += sp->saw_period * (1 + sp->saw_jitter * (2 * rng_unit() - 1));
                                        saw_trough = 0.02 * sp->saw_amp * rng_normal();
                                }
                                v += saw_trough + sp->saw_amp * (t - saw_start) / (saw_next - saw_start);
                        }
                }
                v += sp->noise * sp->base * rng_normal();
                if (sp->dip != 0 && t >= sp->dip_at && t < sp->dip_at + sp->dt)
                        v -= sp->dip;
                if (sp->outliers > 0 && rng_unit() < sp->outliers)
                        v += (rng_unit() < 0.5 ? -200 : 200) * MIB;
                if (v < 0)
                        v = 0;
                if (sp->gap_len > 0 && t >= sp->gap_from && t < sp->gap_from + sp->gap_len)
                        continue;
                pts[n++] = (struct leak_point){ t, v };
        }
        return n;
}

/* ---- judging a series at every sample ----------------------------------- */

bool as_daemon;

/* The verdict at time t (or the error r) into the outcome. */
static void tally(struct outcome *o, double t, int r, const struct leak_verdict *v) {
        o->evals++;
        if (r < 0) {
                o->einval++;
                return;
        }
        if (v->evaluated && isnan(o->first_judged_t))
                o->first_judged_t = t;
        if (v->suspected) {
                if (!o->suspected) {
                        o->first_t = t;
                        o->first = *v;
                }
                o->suspected++;
                o->last_suspected = *v;
        }
        if (o->suspected)
                o->after_first++;
        o->last = *v;
}

void judge(const struct spec *sp, const struct leak_params *p, struct outcome *o) {
        size_t cap = (size_t)(sp->duration / sp->dt) + 2;
        struct leak_point *pts = malloc(cap * sizeof *pts);
        struct leakwatch w;
        if (!pts || (as_daemon && leakwatch_init(&w, p) < 0))
                abort();
        size_t n = generate(sp, pts, cap);
        *o = (struct outcome){ .first_t = NAN, .first_judged_t = NAN };
        for (size_t i = 0; i < n; i++) {
                double t = pts[i].t_s;
                double grace_from = sp->mark_at > 0 && t >= sp->mark_at ? sp->mark_at : 0;
                struct leak_verdict v;
                int r;
                if (!as_daemon)
                        r = leak_evaluate(pts, i + 1, grace_from, p, &v);
                else if (!leakwatch_feed(&w, t, pts[i].bytes))
                        continue;
                else {
                        leakwatch_mark(&w, grace_from);
                        r = leakwatch_evaluate(&w, p, &v);
                }
                tally(o, t, r, &v);
        }
        if (as_daemon)
                leakwatch_done(&w);
        free(pts);
}

void check_row(const struct spec *sp, const struct leak_params *p) {
        struct outcome o;
        judge(sp, p, &o);
        double truth = sp->true_rate != 0 ? sp->true_rate : sp->rate;
        double delay = o.first_t - sp->leak_from;
        double err_first = o.suspected ? o.first.slope_bytes_per_s / truth - 1 : NAN;
        double err_last = o.suspected ? o.last_suspected.slope_bytes_per_s / truth - 1 : NAN;
        double held = o.after_first ? (double)o.suspected / (double)o.after_first : 0;
        double tol_first = sp->noise * sp->base >= NOISY || sp->walk >= 1 * MIB ? SLOPE_TOL_NOISY : SLOPE_TOL;
        bool ok = o.einval == 0;
        if (sp->leak) {
                ok &= o.suspected > 0 && delay <= sp->goal + 1e-9;
                ok &= fabs(err_first) <= tol_first && fabs(err_last) <= SLOPE_TOL;
                ok &= held >= 0.5;
        } else
                ok &= o.suspected == 0;
        if (verbose || !ok) {
                printf("%-4s %-58s dt %5.2f%s: %s", ok ? "ok" : "FAIL", sp->name, sp->dt, as_daemon ? " floors" : "",
                       o.suspected ? "suspected" : "quiet");
                if (o.suspected)
                        printf(" after %.1f s (goal %.0f), slope %+.0f%%/%+.0f%%, held %.0f%%", delay, sp->goal,
                               100 * err_first, 100 * err_last, 100 * held);
                printf("\n");
                if (!ok || verbose > 1) {
                        if (o.suspected)
                                printf("     first: %s\n", o.first.reason);
                        printf("     last:  %s\n", o.last.reason);
                }
        }
        CHECK(ok);
}

double linear_goal(const struct leak_params *p, double base, double rate, double noise, double dt) {
        for (size_t w = 0; w < p->n_windows; w++) {
                double W = p->windows_s[w], span = p->min_coverage * W;
                double need = fmax(p->min_growth_bytes, p->min_growth_pct / 100 * (base + rate * p->grace_s));
                /* the growth's standard error: 12 floors spread over the span,
                 * each the minimum of span / dt / 12 samples */
                double per_floor = fmax(1, span / dt / LEAK_BUCKETS);
                need = fmax(need, p->min_growth_se * 1.05 * noise * base / (1 + 0.3 * log(per_floor)));
                if (span / dt < 10 || rate * span < 1.25 * need)
                        continue;
                return p->grace_s + (noise >= 0.05 ? 1.5 : 1) * W;
        }
        return INFINITY;
}

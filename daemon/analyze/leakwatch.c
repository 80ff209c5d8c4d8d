/* SPDX-License-Identifier: MIT */
#include "analyze/leakwatch.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int leakwatch_init(struct leakwatch *w, const struct leak_params *p) {
        memset(w, 0, sizeof *w);
        if (p->n_windows == 0)
                return -EINVAL;
        w->res_s = p->windows_s[0] / LEAK_BUCKETS;
        /* the longest window's floors, plus slack for a partly covered edge */
        w->cap = (size_t)ceil(p->windows_s[p->n_windows - 1] / w->res_s) + 4;
        /* the ring, then as much scratch to hand the detector a linear copy */
        w->pts = calloc(2 * w->cap, sizeof *w->pts);
        return w->pts ? 0 : -ENOMEM;
}

void leakwatch_done(struct leakwatch *w) {
        free(w->pts);
        w->pts = NULL;
        w->n = w->cap = 0;
}

void leakwatch_mark(struct leakwatch *w, double t_s) {
        w->grace_from_t = t_s;
}

static void push(struct leakwatch *w, double t, double v) {
        size_t i = (w->head + w->n) % w->cap;
        if (w->n == w->cap) {
                w->head = (w->head + 1) % w->cap;
                i = (w->head + w->n - 1) % w->cap;
        } else
                w->n++;
        w->pts[i] = (struct leak_point){ .t_s = t, .bytes = v };
}

bool leakwatch_feed(struct leakwatch *w, double t_s, double bytes) {
        if (!w->pts || !isfinite(bytes) || !isfinite(t_s))
                return false;
        if (!w->cur_valid) {
                w->cur_t0 = floor(t_s / w->res_s) * w->res_s;
                w->cur_min = bytes;
                w->cur_valid = true;
                return false;
        }
        if (t_s < w->cur_t0 + w->res_s) {
                if (bytes < w->cur_min)
                        w->cur_min = bytes;
                return false;
        }
        /* a floor is complete: keep it (at its bucket's middle), start the next */
        push(w, w->cur_t0 + w->res_s / 2, w->cur_min);
        w->cur_t0 = floor(t_s / w->res_s) * w->res_s;
        w->cur_min = bytes;
        return true;
}

int leakwatch_evaluate(struct leakwatch *w, const struct leak_params *p, struct leak_verdict *ret) {
        /* the ring, oldest first, as the detector's series */
        struct leak_point *series = w->pts + w->cap;
        for (size_t i = 0; i < w->n; i++)
                series[i] = w->pts[(w->head + i) % w->cap];
        return leak_evaluate(series, w->n, w->grace_from_t, p, ret);
}

enum leakwatch_change leakwatch_add(struct leakwatch *w, const struct leak_params *p, double t_s, int64_t ts_ms,
                                    double bytes, int64_t clear_after_ms) {
        struct leak_verdict v;
        if (!leakwatch_feed(w, t_s, bytes) || leakwatch_evaluate(w, p, &v) < 0)
                return LEAKWATCH_NONE;
        /* while suspected, the verdict shown stays the one that found growth
         * until the verdict clears */
        if (v.suspected || !w->suspected)
                w->v = v;
        w->evaluated_ms = ts_ms;
        if (v.suspected)
                w->last_pass_ms = ts_ms;
        if (v.suspected && !w->suspected) {
                w->suspected = true;
                w->ever_suspected = true;
                w->suspected_since_ms = ts_ms;
                return LEAKWATCH_SUSPECTED;
        }
        if (!v.suspected && w->suspected && ts_ms - w->last_pass_ms >= clear_after_ms) {
                w->suspected = false;
                w->v = v;
                return LEAKWATCH_CLEARED;
        }
        return LEAKWATCH_NONE;
}

void leakwatch_end(struct leakwatch *w, const struct leak_params *p, double t_end_s) {
        if (w->evaluated_ms != 0 && w->v.evaluated)
                return; /* a verdict stands */
        char was[sizeof w->v.reason];
        snprintf(was, sizeof was, "%s", w->v.reason);
        double first_s = (w->grace_from_t > 0 ? w->grace_from_t : 0) + p->grace_s + p->min_coverage * p->windows_s[0];
        w->ended = true;
        w->v.evaluated = false;
        if (w->evaluated_ms == 0 || t_end_s < first_s)
                snprintf(w->v.reason, sizeof w->v.reason,
                         "the run ended after %.0f s, before a verdict was possible: the first comes %.0f s in, after "
                         "the warm-up grace and %.0f s of data",
                         t_end_s, first_s, p->min_coverage * p->windows_s[0]);
        else
                snprintf(w->v.reason, sizeof w->v.reason, "the run ended before a verdict was possible (%.200s)", was);
}

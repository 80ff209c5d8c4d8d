/* SPDX-License-Identifier: MIT */
#include "analyze/leakwatch.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

int leakwatch_init(struct leakwatch *w, const struct leak_params *p) {
        memset(w, 0, sizeof *w);
        if (p->n_windows == 0)
                return -EINVAL;
        w->res_s = p->windows_s[0] / LEAK_BUCKETS;
        /* the longest window's floors, plus slack for a partly covered edge */
        w->cap = (size_t)ceil(p->windows_s[p->n_windows - 1] / w->res_s) + 4;
        w->pts = malloc(w->cap * sizeof *w->pts);
        if (!w->pts)
                return -ENOMEM;
        for (size_t i = 0; i < w->cap; i++)
                w->pts[i] = LEAKWATCH_NO_FLOOR;
        return 0;
}

void leakwatch_done(struct leakwatch *w) {
        free(w->pts);
        w->pts = NULL;
        w->cap = 0;
        w->has_last = false;
}

void leakwatch_mark(struct leakwatch *w, double t_s) {
        w->grace_from_t = t_s;
}

static uint32_t *slot(const struct leakwatch *w, int64_t i) {
        int64_t k = i % (int64_t)w->cap;
        return &w->pts[k < 0 ? k + (int64_t)w->cap : k];
}

/* Bucket i's floor, in KiB (rounded; saturated below LEAKWATCH_NO_FLOOR);
 * the buckets skipped since the previous floor are emptied. */
static void push(struct leakwatch *w, int64_t i, double bytes) {
        if (w->has_last)
                for (int64_t j = w->last + 1; j < i && j <= w->last + (int64_t)w->cap; j++)
                        *slot(w, j) = LEAKWATCH_NO_FLOOR;
        double kib = round(bytes / 1024.0);
        uint32_t floor = kib <= 0 ? 0 : kib >= LEAKWATCH_NO_FLOOR ? LEAKWATCH_NO_FLOOR - 1 : (uint32_t)kib;
        w->same_floor = w->has_last && w->last == i - 1 && *slot(w, i - 1) == floor;
        *slot(w, i) = floor;
        w->last = i;
        w->has_last = true;
}

bool leakwatch_feed(struct leakwatch *w, double t_s, double bytes) {
        if (!w->pts || !isfinite(bytes) || !isfinite(t_s) || fabs(t_s / w->res_s) > 1e15)
                return false;
        if (!w->cur_valid) {
                w->cur_i = (int64_t)floor(t_s / w->res_s);
                w->cur_min = bytes;
                w->cur_valid = true;
                return false;
        }
        if (t_s < (double)w->cur_i * w->res_s + w->res_s) {
                if (bytes < w->cur_min)
                        w->cur_min = bytes;
                return false;
        }
        /* a floor is complete: keep it, start the next */
        push(w, w->cur_i, w->cur_min);
        w->cur_i = (int64_t)floor(t_s / w->res_s);
        w->cur_min = bytes;
        return true;
}

int leakwatch_evaluate(struct leakwatch *w, const struct leak_params *p, struct leak_verdict *ret) {
        /* the floors kept, oldest first, each at its bucket's middle, as the detector's series */
        _cleanup_free_ struct leak_point *series = malloc(w->cap * sizeof *series);
        if (!series)
                return -ENOMEM;
        size_t n = 0;
        for (int64_t i = w->last - (int64_t)w->cap + 1; w->has_last && i <= w->last; i++) {
                uint32_t kib = *slot(w, i);
                if (kib != LEAKWATCH_NO_FLOOR)
                        series[n++] = (struct leak_point){ .t_s = (double)i * w->res_s + w->res_s / 2,
                                                           .bytes = (double)kib * 1024.0 };
        }
        return leak_evaluate(series, n, w->grace_from_t, p, ret);
}

enum leakwatch_change leakwatch_add(struct leakwatch *w, const struct leak_params *p, double t_s, int64_t ts_ms,
                                    double bytes, int64_t clear_after_ms) {
        struct leak_verdict v;
        if (!leakwatch_feed(w, t_s, bytes))
                return LEAKWATCH_NONE;
        if (w->same_floor && !w->suspected && w->evaluated_ms != 0 && ++w->unjudged < LEAKWATCH_REJUDGE)
                return LEAKWATCH_NONE;
        w->unjudged = 0;
        if (leakwatch_evaluate(w, p, &v) < 0)
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
                w->ever_suspected_before = w->ever_suspected;
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

void leakwatch_veto(struct leakwatch *w, const char *reason) {
        w->suspected = false;
        w->v.suspected = false;
        w->ever_suspected = w->ever_suspected_before;
        snprintf(w->v.reason, sizeof w->v.reason, "%s", reason);
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

void leakwatch_state(const struct leakwatch *w, int64_t registered_ts_ms, struct leak_state *ret) {
        const struct leak_verdict *v = &w->v;
        bool ev = w->evaluated_ms != 0 && v->evaluated;
        *ret = (struct leak_state){
                .suspected = w->suspected,
                .evaluated = ev,
                .ended = w->ended,
                .slope_bytes_per_s = ev ? v->slope_bytes_per_s : 0,
                .slope_lo_bytes_per_s = ev && !w->ended ? v->slope_lo_bytes_per_s : 0,
                .growth_bytes = ev ? v->growth_bytes : 0,
                .window_s = ev ? v->window_s : 0,
                .confidence = ev ? v->confidence : 0,
                .since_ms = ev ? registered_ts_ms + (int64_t)(v->since_t_s * 1000.0) : 0,
                .suspected_at_ms = w->suspected ? w->suspected_since_ms : 0,
                .evaluated_ts_ms = w->evaluated_ms,
        };
        snprintf(ret->reason, sizeof ret->reason, "%s",
                 w->evaluated_ms == 0 && !w->ended ? "not evaluated yet: the first window is still filling (warm-up "
                                                     "grace plus the shortest window)"
                                                   : v->reason);
}

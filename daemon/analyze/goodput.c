/* SPDX-License-Identifier: MIT */
#include "analyze/goodput.h"

#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const kind_names[_GOODPUT_KIND_MAX] = {
        [GOODPUT_STARTUP] = "startup", [GOODPUT_STEP] = "step",
        [GOODPUT_DATA] = "data_wait",  [GOODPUT_CHECKPOINT] = "checkpoint",
        [GOODPUT_EVAL] = "eval",       [GOODPUT_IDLE] = "idle",
        [GOODPUT_LOST] = "lost",       [GOODPUT_OTHER] = "other",
};

const char *goodput_kind_name(enum goodput_kind k) {
        return k >= 0 && k < _GOODPUT_KIND_MAX ? kind_names[k] : NULL;
}

static int64_t slice_of(int64_t ts_ms) {
        int64_t r = ts_ms % GOODPUT_SLICE_MS;
        return ts_ms - (r < 0 ? r + GOODPUT_SLICE_MS : r);
}

static int64_t max64(int64_t a, int64_t b) {
        return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b) {
        return a < b ? a : b;
}

void goodput_stream_init(struct goodput_stream *s, const struct goodput_params *p, int64_t from_ms, int64_t until_ms,
                         int64_t startup_end_ms, double first_step_ms, int64_t lost_from_ms) {
        memset(s, 0, sizeof *s);
        s->p = *p;
        s->from_ms = from_ms;
        s->until_ms = until_ms;
        s->startup_end_ms = startup_end_ms;
        s->first_step_ms = first_step_ms > 0 ? first_step_ms : 0;
        s->lost_from_ms = lost_from_ms;
        s->next_ts_ms = slice_of(from_ms);
}

void goodput_stream_first_step(struct goodput_stream *s, int64_t ts_ms, double step_ms) {
        if (s->startup_end_ms != INT64_MAX)
                return; /* known already: only the first one ends the startup */
        s->startup_end_ms = ts_ms;
        s->first_step_ms = step_ms > 0 ? step_ms : 0;
}

void goodput_stream_set_typical(struct goodput_stream *s, double typical_ms) {
        s->typical_ms = typical_ms > 0 && isfinite(typical_ms) ? typical_ms : 0;
}

void goodput_stream_phase(struct goodput_stream *s, int64_t ts_ms, enum goodput_phase phase) {
        if (ts_ms < s->next_ts_ms && s->n_pending == 0) {
                s->phase = phase; /* in force from the slices still to come */
                return;
        }
        if (s->n_pending > 0 && s->pending[s->n_pending - 1].ts_ms >= ts_ms) {
                /* marks in the same millisecond (or out of order): the last one stands */
                s->pending[s->n_pending - 1].phase = phase;
                return;
        }
        if (s->n_pending == GOODPUT_MAX_PENDING) {
                /* a mark storm within a few slices: the oldest change takes
                 * effect now, from the next slice on */
                s->phase = s->pending[0].phase;
                memmove(s->pending, s->pending + 1, (GOODPUT_MAX_PENDING - 1) * sizeof s->pending[0]);
                s->n_pending--;
        }
        s->pending[s->n_pending].ts_ms = ts_ms;
        s->pending[s->n_pending].phase = phase;
        s->n_pending++;
}

/* Gaps of at least this many empty slices are idle: idle_k typical steps,
 * at least one slice (what the ledger can see) and at most the horizon (what
 * it can look ahead when a slice becomes final). */
static unsigned gap_slices(const struct goodput_stream *s) {
        if (s->typical_ms <= 0)
                return 1;
        double g = ceil(s->p.idle_k * s->typical_ms / GOODPUT_SLICE_MS);
        return g < 1 ? 1 : g > GOODPUT_HORIZON ? GOODPUT_HORIZON : (unsigned)g;
}

static bool cell_empty(const struct goodput_cell *c) {
        return c->free_ms >= c->len_ms;
}

static struct goodput_cell *ring_at(struct goodput_stream *s, size_t i) {
        return &s->ring[(s->head + i) % GOODPUT_HORIZON];
}

/* The oldest slice becomes final: what is free in it is idle or other. */
static void finalize_oldest(struct goodput_stream *s) {
        struct goodput_cell *c = ring_at(s, 0);
        if (cell_empty(c)) {
                unsigned run = s->empty_run + 1;
                for (size_t i = 1; i < s->n && cell_empty(ring_at(s, i)); i++)
                        run++;
                c->ms[run >= gap_slices(s) ? GOODPUT_IDLE : GOODPUT_OTHER] += c->free_ms;
                s->empty_run++;
        } else {
                c->ms[GOODPUT_OTHER] += c->free_ms;
                s->empty_run = 0;
        }
        c->free_ms = 0;
        for (int k = 0; k < _GOODPUT_KIND_MAX; k++)
                s->total_ms[k] += c->ms[k];
        s->steps += c->steps;
        if (s->emit)
                s->emit(s->userdata, c);
        s->head = (s->head + 1) % GOODPUT_HORIZON;
        s->n--;
}

/* ms of kind k into the newest slice, then the ones before it while there
 * is room; what is left over is dropped. */
static void place_back(struct goodput_stream *s, enum goodput_kind k, double ms) {
        for (size_t i = s->n; i-- > 0 && ms > 0;) {
                struct goodput_cell *c = ring_at(s, i);
                double take = ms < c->free_ms ? ms : c->free_ms;
                c->ms[k] += take;
                c->free_ms -= take;
                ms -= take;
        }
        if (ms > 0)
                s->unplaced_ms += ms;
}

/* The overlap of [x, y) with [a, b) into the phase's kind. */
static void phase_add(struct goodput_cell *c, enum goodput_phase ph, int64_t x, int64_t y, int64_t a, int64_t b) {
        int64_t lo = max64(x, a), hi = min64(y, b);
        if (hi <= lo || ph == GOODPUT_PHASE_NONE)
                return;
        enum goodput_kind k = ph == GOODPUT_PHASE_CHECKPOINT ? GOODPUT_CHECKPOINT : GOODPUT_EVAL;
        c->ms[k] += (double)(hi - lo);
        c->free_ms -= (double)(hi - lo);
}

/* The phases of [lo, hi) within [a, b), the changes before hi taken. */
static void place_phases(struct goodput_stream *s, struct goodput_cell *c, int64_t lo, int64_t hi, int64_t a,
                         int64_t b) {
        int64_t pos = lo;
        size_t k = 0;
        for (; k < s->n_pending && s->pending[k].ts_ms < hi; k++) {
                int64_t t = max64(pos, s->pending[k].ts_ms);
                phase_add(c, s->phase, pos, t, a, b);
                pos = t;
                s->phase = s->pending[k].phase;
        }
        phase_add(c, s->phase, pos, hi, a, b);
        memmove(s->pending, s->pending + k, (s->n_pending - k) * sizeof s->pending[0]);
        s->n_pending -= k;
}

/* A new slice at ts_ms with what its ops add up to (NULL: none). */
static void place_slice(struct goodput_stream *s, int64_t ts_ms, const struct goodput_slice *in) {
        int64_t lo = max64(ts_ms, s->from_ms), hi = min64(ts_ms + GOODPUT_SLICE_MS, s->until_ms);
        if (hi <= lo) {
                /* outside the span; a phase change in it still counts */
                struct goodput_cell scratch = { 0 };
                place_phases(s, &scratch, ts_ms, ts_ms + GOODPUT_SLICE_MS, 0, 0);
                return;
        }
        if (s->n == GOODPUT_HORIZON)
                finalize_oldest(s);
        struct goodput_cell *c = ring_at(s, s->n++);
        *c = (struct goodput_cell){ .ts_ms = ts_ms, .len_ms = (double)(hi - lo), .free_ms = (double)(hi - lo) };

        /* startup, then what a restart lost: whole intervals */
        int64_t su = s->startup_end_ms < lo ? lo : min64(s->startup_end_ms, hi);
        int64_t lost = max64(su, min64(s->lost_from_ms, hi));
        c->ms[GOODPUT_STARTUP] = (double)(su - lo);
        c->ms[GOODPUT_LOST] = (double)(hi - lost);
        c->free_ms -= (double)(su - lo) + (double)(hi - lost);
        place_phases(s, c, ts_ms, ts_ms + GOODPUT_SLICE_MS, su, lost);
        if (!in)
                return;

        double steps = in->steps, step_ms = in->step_ms;
        if (s->startup_end_ms >= ts_ms && s->startup_end_ms < ts_ms + GOODPUT_SLICE_MS) {
                /* the first step is the startup's */
                steps = steps > 1 ? steps - 1 : 0;
                step_ms = step_ms > s->first_step_ms ? step_ms - s->first_step_ms : 0;
        }
        if (s->lost_from_ms < hi)
                steps = 0; /* their progress was lost */
        c->steps = steps;
        double parts = in->data_ms + in->checkpoint_ms + in->eval_ms;
        if (s->p.parts_in_step) {
                /* the parts happened inside steps: what is left of the
                 * steps once they are taken off (a part whose step ends
                 * in a later slice is taken off that one) */
                double owed = s->debt_ms + parts;
                s->debt_ms = owed > step_ms ? owed - step_ms : 0;
                step_ms = step_ms > owed ? step_ms - owed : 0;
        }
        place_back(s, GOODPUT_CHECKPOINT, in->checkpoint_ms);
        place_back(s, GOODPUT_EVAL, in->eval_ms);
        place_back(s, GOODPUT_DATA, in->data_ms);
        place_back(s, GOODPUT_STEP, step_ms);
        place_back(s, GOODPUT_OTHER, in->other_ms);
}

void goodput_stream_advance(struct goodput_stream *s, int64_t ts_ms) {
        if (s->until_ms != INT64_MAX && ts_ms > slice_of(s->until_ms - 1) + GOODPUT_SLICE_MS)
                ts_ms = slice_of(s->until_ms - 1) + GOODPUT_SLICE_MS;
        for (; s->next_ts_ms < ts_ms; s->next_ts_ms += GOODPUT_SLICE_MS)
                place_slice(s, s->next_ts_ms, NULL);
}

void goodput_stream_add(struct goodput_stream *s, const struct goodput_slice *in) {
        int64_t ts = slice_of(in->ts_ms);
        if (ts < s->next_ts_ms || (s->until_ms != INT64_MAX && ts >= s->until_ms))
                return;
        goodput_stream_advance(s, ts);
        place_slice(s, ts, in);
        s->next_ts_ms = ts + GOODPUT_SLICE_MS;
}

void goodput_stream_finish(struct goodput_stream *s) {
        if (s->until_ms != INT64_MAX)
                goodput_stream_advance(s, s->until_ms);
        while (s->n > 0)
                finalize_oldest(s);
}

/* ---- the ideal step ------------------------------------------------------- */

struct dev {
        double d;
        uint64_t count;
};

static int dev_cmp(const void *a, const void *b) {
        double x = ((const struct dev *)a)->d, y = ((const struct dev *)b)->d;
        return (x > y) - (x < y);
}

double goodput_ideal_step_ms(const struct hist *h, uint64_t *ret_n) {
        if (ret_n)
                *ret_n = 0;
        if (!h || h->count == 0)
                return NAN;
        double med = hist_quantile(h, 0.5);
        /* MAD: the median of |step - median|, over the buckets (each at
         * the value quantiles give for it) and the zero bucket */
        _cleanup_free_ struct dev *v = malloc(((size_t)h->n + 1) * sizeof *v);
        if (!v)
                return NAN;
        size_t m = 0;
        if (h->zero_count > 0)
                v[m++] = (struct dev){ fabs(med), h->zero_count };
        for (uint32_t i = 0; i < h->n; i++)
                if (h->counts[i] > 0)
                        v[m++] = (struct dev){ fabs(hist_bucket_rep_ms(h, i) - med), h->counts[i] };
        sort_array(v, m, sizeof *v, dev_cmp);
        uint64_t rank = (h->count - 1) / 2, seen = 0;
        double mad = 0;
        for (size_t i = 0; i < m; i++) {
                seen += v[i].count;
                if (seen > rank) {
                        mad = v[i].d;
                        break;
                }
        }
        double limit = med + 3 * mad;
        if (h->max <= limit) {
                if (ret_n)
                        *ret_n = h->count;
                return h->sum / (double)h->count; /* every step counts: exact */
        }
        double sum = 0;
        uint64_t n = h->zero_count;
        for (uint32_t i = 0; i < h->n; i++) {
                double x = hist_bucket_rep_ms(h, i);
                if (h->counts[i] > 0 && x <= limit) {
                        sum += x * (double)h->counts[i];
                        n += h->counts[i];
                }
        }
        if (ret_n)
                *ret_n = n;
        return n > 0 ? sum / (double)n : NAN;
}

/* ---- what ops and marks are for ------------------------------------------- */

bool goodput_match_list(const char *patterns, const char *text) {
        if (!patterns || !text)
                return false;
        char pat[256];
        for (const char *p = patterns; *p;) {
                size_t l = strcspn(p, ",");
                const char *a = p, *b = p + l;
                while (a < b && isspace((unsigned char)*a))
                        a++;
                while (b > a && isspace((unsigned char)b[-1]))
                        b--;
                if (b > a && (size_t)(b - a) < sizeof pat) {
                        memcpy(pat, a, (size_t)(b - a));
                        pat[b - a] = 0;
                        if (fnmatch(pat, text, 0) == 0)
                                return true;
                }
                p += l + (p[l] == ',');
        }
        return false;
}

enum goodput_kind goodput_classify(const struct goodput_rules *r, const char *op, const char *category) {
        if (r->step_op && streq(op, r->step_op))
                return GOODPUT_STEP;
        if ((category && goodput_match_list(r->data_categories, category)) || goodput_match_list(r->data_ops, op))
                return GOODPUT_DATA;
        if (category && goodput_match_list(r->checkpoint_categories, category))
                return GOODPUT_CHECKPOINT;
        if (category && goodput_match_list(r->eval_categories, category))
                return GOODPUT_EVAL;
        return GOODPUT_OTHER;
}

/* "checkpoint-end", "eval_done", "Checkpoint finished": a label that says
 * its phase is over. */
static bool ends_phase(const char *label) {
        static const char *const words[] = { "end", "done", "finished", "stop" };
        size_t l = strlen(label);
        for (size_t i = 0; i < ELEMENTSOF(words); i++) {
                size_t w = strlen(words[i]);
                if (l >= w && strcasecmp(label + l - w, words[i]) == 0)
                        return true;
        }
        return false;
}

enum goodput_phase goodput_mark_phase(const struct goodput_rules *r, const char *label) {
        if (ends_phase(label))
                return GOODPUT_PHASE_NONE;
        if (goodput_match_list(r->checkpoint_marks, label))
                return GOODPUT_PHASE_CHECKPOINT;
        if (goodput_match_list(r->eval_marks, label))
                return GOODPUT_PHASE_EVAL;
        return GOODPUT_PHASE_NONE;
}

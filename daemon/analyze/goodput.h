/* SPDX-License-Identifier: MIT */
/* The goodput ledger: a span of a run's wall time split, without overlap and
 * adding up to the span exactly, into what the run spent it on (starting
 * up, productive steps, waiting for data, checkpoints, evaluation, idle
 * gaps, progress lost to a restart, the rest), from what mlmond has of the
 * run's timings: per op and per 1-second slice, how many ended in the slice
 * and how long they took in all. Pure: no I/O, no clock.
 *
 * mlmond does not know where inside its slice a timing began or ended, only
 * that it ended in the slice. The ledger places each slice's timings in the
 * slice, and what does not fit (a 30 s checkpoint, a step that began in the
 * second before) in the slices before it, newest first, up to
 * GOODPUT_HORIZON slices back; a slice's milliseconds go to one kind each,
 * in this order of precedence:
 *
 *   1. startup: the span's time before the run's first step ended (its
 *      first step included: compilation, warm-up), and lost: the time after
 *      lost_from (an attempt that a restart threw away, from its last
 *      checkpoint on);
 *   2. checkpoint and eval phases between marks (exact intervals);
 *   3. the timings of checkpoint ops, eval ops, data ops, the step op (less
 *      the parts above when they are timed inside the step: parts_in_step),
 *      and of the other ops, in that order;
 *   4. what is left: idle when the slice holds nothing at all and belongs to
 *      a gap of at least idle_k typical steps (at least one slice), other
 *      otherwise.
 *
 * Timings that find no room (ops timed in parallel, a nested op with
 * parts_in_step off) are dropped: each millisecond is counted once. The
 * ledger is a stream: slices go in in time order, and each is final
 * GOODPUT_HORIZON slices later (or at goodput_stream_finish()), so the
 * ledger of a running run and the ledger of the same span asked for later
 * are the same. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/histogram.h"

#define GOODPUT_SLICE_MS 1000
/* How far back a timing may claim time: 2 minutes covers a checkpoint or an
 * evaluation timed as one op of that length; longer ones should be marks
 * (exact intervals). It is also how late a running run's ledger is final. */
#define GOODPUT_HORIZON 120

enum goodput_kind {
        GOODPUT_STARTUP,
        GOODPUT_STEP,
        GOODPUT_DATA,
        GOODPUT_CHECKPOINT,
        GOODPUT_EVAL,
        GOODPUT_IDLE,
        GOODPUT_LOST,
        GOODPUT_OTHER,
        _GOODPUT_KIND_MAX,
};

/* "startup", "step", "data_wait", "checkpoint", "eval", "idle", "lost",
 * "other": the kind label of /metrics; the JSON field is the name + "_s". */
const char *goodput_kind_name(enum goodput_kind k);

struct goodput_params {
        double idle_k;      /* a gap of at least idle_k typical steps is idle, > 0 */
        bool parts_in_step; /* data, checkpoint and eval ops are timed inside the step op */
};

/* What one slice's ops add up to, by what they are for (ms: sums of the
 * timings that ended in the slice). */
struct goodput_slice {
        int64_t ts_ms; /* the slice's start, a multiple of GOODPUT_SLICE_MS */
        double step_ms, steps;
        double data_ms, checkpoint_ms, eval_ms;
        double other_ms; /* timings of ops of no kind */
};

/* The phase a mark opens (see goodput_mark_phase()). */
enum goodput_phase { GOODPUT_PHASE_NONE, GOODPUT_PHASE_CHECKPOINT, GOODPUT_PHASE_EVAL };

/* One slice of the ledger, as it is placed (ms per kind; their sum is the
 * slice's part of the span). */
struct goodput_cell {
        int64_t ts_ms;
        double len_ms;  /* its part of the span */
        double free_ms; /* not placed yet */
        double ms[_GOODPUT_KIND_MAX];
        double steps;
};

#define GOODPUT_MAX_PENDING 64

struct goodput_stream {
        struct goodput_params p;
        int64_t from_ms, until_ms; /* the span; until_ms INT64_MAX: open */
        int64_t startup_end_ms;    /* the first step's end; INT64_MIN: before the span; INT64_MAX: not yet */
        double first_step_ms;      /* its own duration, taken off the steps of its slice */
        int64_t lost_from_ms;      /* INT64_MAX: nothing lost */
        double typical_ms;         /* the typical step (ideal_step), for idle gaps; 0: unknown */
        double debt_ms;            /* parts_in_step: parts not yet taken off a step */
        /* the phase of marks, and the changes not reached yet */
        enum goodput_phase phase;
        struct {
                int64_t ts_ms;
                enum goodput_phase phase;
        } pending[GOODPUT_MAX_PENDING];
        size_t n_pending;
        /* the slices not final yet: ring[(head + i) % GOODPUT_HORIZON], oldest first */
        struct goodput_cell ring[GOODPUT_HORIZON];
        size_t head, n;
        int64_t next_ts_ms; /* the next slice expected */
        unsigned empty_run; /* empty slices just before the next final one */
        /* final */
        double total_ms[_GOODPUT_KIND_MAX];
        double steps;
        double unplaced_ms; /* timings that found no room */
        /* each slice as it becomes final (NULL: none) */
        void (*emit)(void *userdata, const struct goodput_cell *c);
        void *userdata;
};

/* A stream over [from_ms, until_ms) (until_ms INT64_MAX: a running run's,
 * open). startup_end_ms: when the run's first step ended (INT64_MAX: none
 * yet; at or before from_ms: none of the span is startup), first_step_ms
 * its duration; lost_from_ms: INT64_MAX unless an attempt's progress after
 * it was lost. */
void goodput_stream_init(struct goodput_stream *s, const struct goodput_params *p, int64_t from_ms, int64_t until_ms,
                         int64_t startup_end_ms, double first_step_ms, int64_t lost_from_ms);
/* The run's first step ended at ts_ms (a stream started before it). */
void goodput_stream_first_step(struct goodput_stream *s, int64_t ts_ms, double step_ms);
/* The typical step now (the ideal step of the ledger): gaps of idle_k of
 * them are idle. */
void goodput_stream_set_typical(struct goodput_stream *s, double typical_ms);
/* A mark at ts_ms opening phase (GOODPUT_PHASE_NONE: closing one), before
 * the slice holding ts_ms goes in. At the span's start, the phase in force
 * (from the last such mark before it). */
void goodput_stream_phase(struct goodput_stream *s, int64_t ts_ms, enum goodput_phase phase);
/* The next slice (ts_ms after the previous one's; slices skipped are
 * empty). Slices outside the span are ignored. */
void goodput_stream_add(struct goodput_stream *s, const struct goodput_slice *in);
/* Empty slices up to (not including) the one at ts_ms. */
void goodput_stream_advance(struct goodput_stream *s, int64_t ts_ms);
/* The span ends: every slice up to until_ms goes in and becomes final. */
void goodput_stream_finish(struct goodput_stream *s);

/* The ideal step of a step op's histogram: the mean of the steps at or
 * below median + 3 MAD (median absolute deviation), as the goodput
 * measurements of large training jobs define it (a step held up by a
 * checkpoint or a stall does not count). NaN when h is empty. *ret_n: how
 * many steps the mean is of (may be NULL). Within the histogram's accuracy. */
double goodput_ideal_step_ms(const struct hist *h, uint64_t *ret_n);

/* What an op is for. Rules name the step op, the data categories and
 * op names (comma-separated fnmatch(3) patterns), the checkpoint and eval
 * categories, and the mark patterns that open a checkpoint or an eval
 * phase. */
struct goodput_rules {
        const char *step_op;
        const char *data_categories, *data_ops;
        const char *checkpoint_categories, *eval_categories;
        const char *checkpoint_marks, *eval_marks;
};
enum goodput_kind goodput_classify(const struct goodput_rules *r, const char *op, const char *category);
/* What a mark does: a label matching checkpoint_marks opens a checkpoint
 * phase, eval_marks an eval phase, unless it ends in "end", "done",
 * "finished" or "stop" (closes the phase); any other mark closes it. */
enum goodput_phase goodput_mark_phase(const struct goodput_rules *r, const char *label);
/* Whether text matches one of the comma-separated patterns (spaces around
 * them ignored; "" matches nothing). */
bool goodput_match_list(const char *patterns, const char *text);

/* SPDX-License-Identifier: MIT */
/* What applications report about their operations, per run, in memory
 * until stored: for each op the open 1-second slice (a count and a latency
 * histogram), closed slices waiting for the next tick's transaction, and
 * gauge values. Also the merge of slices into per-op aggregates that the
 * latency and throughput answers are made of. No I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/histogram.h"

#define OPS_SLICE_MS 1000
/* Distinct op names per run: a bound on memory for a client that makes up
 * names (request ids in the name); beyond it observations are dropped. */
#define OPS_MAX_PER_RUN 256
#define OPS_MAX_PENDING_GAUGES 100000
#define OPS_NAME_MAX 200
/* Bounds on what one observation may carry, so that no sum of them
 * overflows: a count or gauge within +-2^53 (every integer up to it is exact
 * in a double), a timing within [0, 1e9] ms (11.6 days, the histogram's
 * top), a sample rate within [1e-6, 1] (one line stands for at most a
 * million). */
#define OPS_VALUE_MAX 9007199254740992.0
#define OPS_TIMING_MAX_MS 1e9
#define OPS_RATE_MIN 1e-6

/* OP_GAUGE_DELTA: StatsD "+N|g"/"-N|g" moves the gauge from its last value. */
enum op_kind { OP_TIMING, OP_COUNTER, OP_GAUGE, OP_GAUGE_DELTA };

struct op_slice {
        char *op;
        char *category; /* NULL = none */
        int64_t ts;     /* slice start, Unix ms */
        double count;   /* timings + counter increments, sample rates applied */
        struct hist h;  /* timings */
        int64_t last;   /* open slices: Unix ms of the op's latest timing or count, ever */
};

struct gauge_value {
        int64_t ts;
        char *name;
        double value;
};

/* Copies n gauge values (their names too); gauge_values_free() them. */
int gauge_values_copy(const struct gauge_value *v, size_t n, struct gauge_value **ret);
void gauge_values_free(struct gauge_value *v, size_t n);

struct op_table {
        struct op_slice *open; /* one per op, the current slice */
        size_t n_open;
        struct op_slice *done; /* closed, not yet stored */
        size_t n_done;
        struct gauge_value *gauges; /* not yet stored */
        size_t n_gauges;
        struct gauge_value *gauge_last; /* last value per gauge name (for deltas) */
        size_t n_gauge_last;
        uint64_t dropped; /* over OPS_MAX_PER_RUN or OPS_MAX_PENDING_GAUGES */
        int64_t cut_ms;   /* the latest mark (ops_cut): no slice of its second starts before it */
};

static inline int64_t ops_slice_of(int64_t ts_ms) {
        return ts_ms - ts_ms % OPS_SLICE_MS;
}

/* One observation. rate in (0, 1]: a counter counts 1/rate, a timing is
 * weighted round(1/rate). An op's first observation sets its category for
 * the run's life (NULL: none); later ones may leave it out or name the
 * same. -EINVAL bad value, -EEXIST another category than the op's,
 * -ENOSPC too many ops/gauges (counted in dropped), -ENOMEM. */
/* Is (value, rate) within the bounds above for an observation of kind? */
bool ops_value_valid(enum op_kind kind, double value, double rate);
int ops_observe(struct op_table *t, const char *op, size_t op_len, const char *category, size_t category_len,
                enum op_kind kind, double value, double rate, int64_t now_ms);
/* Unix ms of the latest timing or count of op (NULL: of any op) the table
 * took; 0: none since it was made. */
int64_t ops_last_ms(const struct op_table *t, const char *op);
/* 1 and the category (NULL: none) op has in t, or 0: t has not seen op. */
int ops_category(const struct op_table *t, const char *op, const char **ret_category);

/* A gauge's last value as stored before a restart of mlmond, so that the
 * latest value shows and a "+N" goes on from it; not stored again.
 * -ENOSPC (over OPS_MAX_PER_RUN names), -ENOMEM. */
int ops_gauge_restore(struct op_table *t, const char *name, double value, int64_t ts_ms);
/* Closes every open slice that started before the slice of now_ms
 * (INT64_MAX: all of them). */
int ops_rotate(struct op_table *t, int64_t now_ms);
/* A mark at ts_ms: every open slice that began before it is closed there,
 * and the op's next timings go into a slice that begins at ts_ms (until the
 * second ends), so a span from the mark holds exactly the timings that came
 * after it. */
int ops_cut(struct op_table *t, int64_t ts_ms);
/* After the done slices and gauges were stored. */
void ops_clear_done(struct op_table *t);
void ops_table_done(struct op_table *t);

/* A merged op over a span. */
struct op_agg {
        char *op;
        char *category;
        double count;
        struct hist h;
};
struct op_aggs {
        struct op_agg *v;
        size_t n;
};
/* Merges one slice's data into the aggregate of its op. h may be NULL. */
int op_aggs_add(struct op_aggs *a, const char *op, const char *category, double count, const struct hist *h);
/* The same with the histogram as stored (hist_encode(); NULL: none); one
 * that does not decode is left out, the count is not. */
int op_aggs_add_encoded(struct op_aggs *a, const char *op, const char *category, double count, const void *hist,
                        size_t len);
/* Adds the table's slices (open and done) with ts in [from, until). */
int op_aggs_add_live(struct op_aggs *a, const struct op_table *t, int64_t from, int64_t until, const char *op_filter);
void op_aggs_done(struct op_aggs *a);
/* The op that cost the most time: the timed op with the largest total,
 * else (counters only) the op counted most; ties go to the first name in
 * byte order. NULL when a has no op with a timing or a count. */
const struct op_agg *op_aggs_top(const struct op_aggs *a);

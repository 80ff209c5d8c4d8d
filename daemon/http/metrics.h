/* SPDX-License-Identifier: MIT */
/* GET /metrics: the Prometheus text exposition (format 0.0.4) of every
 * running run, the host and the daemon itself, or the same families in the
 * protobuf format (metrics-proto.h). The one place that names Prometheus
 * metric families (render.c names the JSON fields).
 *
 * Run figures come from memory (the latest sample, the live totals, the
 * leak watch); only the application's op data needs the store: op totals
 * since registration are kept here between scrapes and advanced by the
 * slices closed since the last one, so a scrape reads seconds of slices,
 * not the run's whole history. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/ops.h"
#include "http/metrics-proto.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct manager_stats;
struct store;
struct config;

/* ---- text helpers (pure; exposed for tests) ------------------------------ */

/* A growing text buffer. A failed allocation sets oom and drops further
 * writes, so a render writes straight through and checks once. */
struct metrics_buf {
        char *data; /* NUL-terminated when len > 0 */
        size_t len, cap;
        bool oom;
        struct metrics_proto *proto; /* set: the families go there instead */
};
void metrics_buf_done(struct metrics_buf *b);
void metrics_buf_put(struct metrics_buf *b, const char *s, size_t len);
void metrics_buf_puts(struct metrics_buf *b, const char *s); /* NULL: nothing */

/* A label value as the text format wants it between its double quotes:
 * backslash, double quote and line feed escaped (\\, \", \n), every other
 * byte as is; invalid UTF-8 (a process's comm is raw bytes) is repaired to
 * U+FFFD first, since Prometheus rejects it. NULL writes nothing (""). */
void metrics_put_label_value(struct metrics_buf *b, const char *s);

/* A sample value: the shortest text that parses back to exactly v
 * ("1234", "0.25", "1e-06"), "NaN", "+Inf" or "-Inf"; -0 is "0".
 * size >= 32. */
void metrics_format_value(double v, char *buf, size_t size);

/* ---- op totals that only go up ------------------------------------------- */

/* One op's totals since registration: `closed_*` over the slices folded in
 * so far (closed slices never change), `out_*` what was last exported.
 * A Prometheus counter (and a summary's _count and _sum) must never
 * decrease; the exported value is the running maximum of closed + the
 * still-open slice, which a StatsD counter decrement ("x:-1|c") cannot
 * pull down. */
struct metrics_op_total {
        char *op;
        double closed_count, closed_sum_ms;
        uint64_t closed_timings;
        double out_count, out_sum_ms;
        uint64_t out_timings;
        struct hist closed_h, out_h; /* the timings' buckets, likewise */
};

struct metrics_op_ledger {
        int64_t run_id, registered_ts_ms;
        int64_t folded_until_ms; /* slices with ts < this are in closed_* */
        bool caught_up;          /* folded up to a recent slice at least once */
        struct metrics_op_total *v;
        size_t n;
};

/* Adds the merged closed slices of [folded_until, until) and moves
 * folded_until on (and sets caught_up). -ENOMEM leaves the totals as they
 * were. */
int metrics_ledger_fold(struct metrics_op_ledger *l, const struct op_aggs *closed, int64_t until_ms);
/* out_* = max(out_*, closed_* + the open slices' figures in open (may be
 * NULL)); ops seen only in open are added. -ENOMEM. */
int metrics_ledger_export(struct metrics_op_ledger *l, const struct op_aggs *open);
void metrics_ledger_done(struct metrics_op_ledger *l);
/* The aggregate of op in a (may be NULL), or NULL. */
const struct op_agg *metrics_aggs_find(const struct op_aggs *a, const char *op);

/* ---- the exposition ------------------------------------------------------ */

/* Kept between scrapes: the op ledgers of the running runs. */
struct metrics;
int metrics_new(struct metrics **ret);
void metrics_free(struct metrics *x);

/* Renders the whole exposition in format into *ret (malloc'ed, owned by
 * the caller; the text format NUL-terminated), the running runs' state
 * asked of the manager through ml. Returns 0 or -ENOMEM. A run whose op
 * data cannot be read in time (a query error) is rendered without its op
 * families. */
struct manager_link;
int metrics_render(struct metrics *x, const struct manager_link *ml, const struct manager_stats *st,
                   struct store *store, const struct config *config, enum metrics_format format, char **ret,
                   size_t *ret_len);

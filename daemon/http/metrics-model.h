/* SPDX-License-Identifier: MIT */
/* GET /metrics as one model, the way Prometheus's own encoders work: the
 * producer (metrics.c) walks families and their series, with labels as
 * name/value pairs, and hands them to an encoder, which writes them out in
 * its format: the text exposition (metrics-text.c) or the protobuf stream
 * (metrics-proto.c). Neither encoder parses what the other writes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/histogram.h"

enum metric_type {
        METRIC_GAUGE,
        METRIC_COUNTER,
        /* an op's latency: a summary in the text format (quantiles over the
         * last minute, _sum and _count since registration), a native
         * histogram in the protobuf one */
        METRIC_LATENCY,
};

/* A label: its value as is (valid UTF-8: the producer repairs a process's
 * raw bytes); each encoder escapes it as its format wants. */
struct metric_label {
        const char *name, *value;
};

struct metric_family {
        const char *name;
        enum metric_type type;
        const char *help;
        const char *help_native; /* a latency family's help where it is a native histogram */
};

#define METRIC_QUANTILES 3
extern const double metric_quantiles[METRIC_QUANTILES];            /* 0.5, 0.9, 0.99 */
extern const char *const metric_quantile_labels[METRIC_QUANTILES]; /* "0.5", ... */

struct metric_series {
        const struct metric_label *labels; /* the run's, shared by its series (may be none) */
        size_t n_labels;
        const struct metric_label *extra; /* the series' own: op, gauge, mode, device ... */
        size_t n_extra;
        double value; /* gauges and counters */
        /* a latency series: since registration, and the recent quantiles */
        const struct hist *h;
        double sum_s;
        uint64_t count;
        bool has_quantiles;
        double quantile_s[METRIC_QUANTILES];
};

/* Where an encoder writes: a growing buffer; a failed allocation sets oom
 * and drops further writes, so a producer writes straight through and
 * checks once. */
struct metrics_out {
        char *data; /* NUL-terminated when len > 0 */
        size_t len, cap;
        bool oom;
};
void metrics_out_done(struct metrics_out *o);
/* Room for extra more bytes and a NUL after them; false (and oom) if not. */
bool metrics_out_reserve(struct metrics_out *o, size_t extra);
void metrics_out_put(struct metrics_out *o, const char *s, size_t len);
void metrics_out_puts(struct metrics_out *o, const char *s); /* NULL: nothing */

/* A family begins, has its series (maybe none: then an encoder writes
 * nothing of it), and ends. */
struct metrics_encoder {
        void (*begin)(struct metrics_encoder *e, const struct metric_family *f);
        void (*series)(struct metrics_encoder *e, const struct metric_family *f, const struct metric_series *s);
        void (*end)(struct metrics_encoder *e, const struct metric_family *f);
        void (*free)(struct metrics_encoder *e);
        struct metrics_out *out;
};

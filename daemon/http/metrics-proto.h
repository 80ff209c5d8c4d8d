/* SPDX-License-Identifier: MIT */
/* GET /metrics in the Prometheus protobuf format: a stream of
 * io.prometheus.client.MetricFamily messages, each prefixed by its length
 * as a varint ("encoding=delimited"), which Prometheus asks for first when
 * it ingests native histograms. metrics.c walks the families once for both
 * formats; in this one its families arrive here, one after the other, and
 * the op latency family becomes a native histogram.
 *
 * The messages are protoc-c's, generated at build time from the
 * metrics.proto that Prometheus's client_model ships. */
#pragma once

#include <stddef.h>

#include "analyze/histogram.h"

#define METRICS_PROTO_CONTENT_TYPE \
        "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"

enum metrics_format { METRICS_TEXT, METRICS_PROTO };

/* The format an Accept header asks for: the protobuf one when it lists
 * "application/vnd.google.protobuf" with proto=io.prometheus.client.MetricFamily
 * and encoding=delimited at a weight (q) above that of every text type it
 * lists (text/plain, text/any, any/any and openmetrics, all answered with
 * the text format); the text format otherwise, and without a header. */
enum metrics_format metrics_negotiate(const char *accept);

enum metrics_proto_type { METRICS_PROTO_GAUGE, METRICS_PROTO_COUNTER, METRICS_PROTO_HISTOGRAM };

/* Builds the stream family by family. A failed allocation is remembered
 * and reported once, by metrics_proto_finish. */
struct metrics_proto;
int metrics_proto_new(struct metrics_proto **ret);
void metrics_proto_free(struct metrics_proto *p);

/* Starts a family (and closes the one before). */
void metrics_proto_family(struct metrics_proto *p, const char *name, enum metrics_proto_type type, const char *help);
/* One series of the current family. labels and extra are label pairs as the
 * text format writes them (k="v" joined by commas, values escaped; either
 * may be NULL or ""): one place builds the labels for both formats. */
void metrics_proto_sample(struct metrics_proto *p, const char *labels, const char *extra, double v);
/* One native histogram series: h's buckets are Prometheus buckets of
 * schema HIST_SCHEMA (counts[i] is bucket lo + i), its zero bucket holds
 * the values below HIST_ZERO_THRESHOLD_S; sum_s is the sum in seconds. */
void metrics_proto_native(struct metrics_proto *p, const char *labels, const char *extra, const struct hist *h,
                          double sum_s);
/* The whole stream in *ret (malloc'ed, owned by the caller). -ENOMEM, or
 * -EINVAL for a label text it could not read (a bug). */
int metrics_proto_finish(struct metrics_proto *p, char **ret, size_t *ret_len);

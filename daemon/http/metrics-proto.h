/* SPDX-License-Identifier: MIT */
/* GET /metrics in the Prometheus protobuf format: a stream of
 * io.prometheus.client.MetricFamily messages, each prefixed by its length
 * as a varint ("encoding=delimited"), which Prometheus asks for first when
 * it ingests native histograms. metrics.c walks the model's families; here
 * each becomes a message, and an op's latency a native histogram.
 *
 * The messages are written in the wire format of the metrics.proto that
 * Prometheus's client_model ships, byte for byte as protoc-c's packer
 * writes them (the unit test decodes them with its code). */
#pragma once

#include <stddef.h>

#include "http/metrics-model.h"

#define METRICS_PROTO_CONTENT_TYPE \
        "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"

enum metrics_format { METRICS_TEXT, METRICS_PROTO };

/* The format an Accept header asks for: the protobuf one when it lists
 * "application/vnd.google.protobuf" with proto=io.prometheus.client.MetricFamily
 * and encoding=delimited at a weight (q) above that of every text type it
 * lists (text/plain, text/any, any/any and openmetrics, all answered with
 * the text format); the text format otherwise, and without a header. */
enum metrics_format metrics_negotiate(const char *accept);

/* An encoder of the model (metrics-model.h) writing the delimited stream
 * into out: each family, once it ends, as its length and its message. */
int metrics_proto_encoder(struct metrics_out *out, struct metrics_encoder **ret);

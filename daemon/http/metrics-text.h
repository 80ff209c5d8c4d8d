/* SPDX-License-Identifier: MIT */
/* The model of GET /metrics in the Prometheus text exposition, format 0.0.4
 * (metrics-text.c), and the text helpers it is made of (pure; exposed for
 * tests). */
#pragma once

#include "http/metrics-model.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* An encoder writing into out (metrics-model.h); -ENOMEM. */
int metrics_text_encoder(struct metrics_out *out, struct metrics_encoder **ret);

/* A label value as the text format wants it between its double quotes:
 * backslash, double quote and line feed escaped (\\, \", \n), every other
 * byte as is; invalid UTF-8 is repaired to U+FFFD first (the producer gives
 * valid UTF-8; this is the last guard). NULL writes nothing (""). */
void metrics_put_label_value(struct metrics_out *o, const char *s);

/* A sample value: the shortest text that parses back to exactly v
 * ("1234", "0.25", "1e-06"), "NaN", "+Inf" or "-Inf"; -0 is "0".
 * size >= 32. */
void metrics_format_value(double v, char *buf, size_t size);

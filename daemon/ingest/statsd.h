/* SPDX-License-Identifier: MIT */
/* StatsD line parsing: `name:value|type[|@rate][|#tag:val,...]`, and
 * DogStatsD's event `_e{TITLE_LEN,TEXT_LEN}:title|text[|...][|#tag:val,...]`
 * (a phase mark titled title), several lines per datagram separated by
 * '\n'. Pure functions of the text: no I/O, no globals, no allocation
 * (results point into the input buffer). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/ops.h"

enum statsd_type {
        STATSD_TIMING,  /* "ms" and "h": a duration in milliseconds */
        STATSD_COUNTER, /* "c": an increment (feeds throughput) */
        STATSD_GAUGE,   /* "g": a value, stored with the samples */
        STATSD_EVENT,   /* "_e{..}:title|text": something happened now; a mark labelled title */
};

#define STATSD_NAME_MAX 200 /* longer names are malformed */
#define STATSD_CATEGORY_MAX 64
/* An event's title is a mark's label: as over HTTP, 1 to 64 bytes. */
#define STATSD_TITLE_MAX 64
/* Bounds on numbers: those of every observation (analyze/ops.h). */
#define STATSD_VALUE_MAX OPS_VALUE_MAX
#define STATSD_TIMING_MAX_MS OPS_TIMING_MAX_MS
#define STATSD_RATE_MIN OPS_RATE_MIN

struct statsd_metric {
        /* not NUL-terminated: name_len bytes, valid UTF-8, no control chars;
         * an event's title (may hold a space and the delimiters, not C0 controls
         * or DEL, at most STATSD_TITLE_MAX bytes) */
        const char *name;
        size_t name_len;
        enum statsd_type type;
        double value;       /* |value| <= STATSD_VALUE_MAX; timings in [0, STATSD_TIMING_MAX_MS]; events 0 */
        double sample_rate; /* [STATSD_RATE_MIN, 1], 1 when absent (and for events) */
        bool gauge_delta;   /* "g" value written with an explicit sign: +N / -N */
        /* understood tags (others are ignored) */
        bool has_run;
        int64_t run; /* #run:ID, > 0 */
        bool has_pid;
        int32_t pid;          /* #pid:N, > 0 */
        const char *category; /* #category:C, NULL if absent; category_len bytes */
        size_t category_len;
};

/* Whether s (len bytes) may be a category: 1 to STATSD_CATEGORY_MAX bytes
 * of valid UTF-8 with no control character, space, or any of ":,|@#". */
bool statsd_category_valid(const char *s, size_t len);

/* Parses one line (without the '\n'; a trailing '\r' is allowed). Returns 0,
 * or -EINVAL for a malformed line: empty name, missing ':' or '|', unknown
 * type, a value that is not a finite number (NaN, inf, 1e999) or is out of
 * the bounds above (1.79e308|c, 2e9|ms), a negative timing, a sample rate
 * outside [STATSD_RATE_MIN, 1] (@1e-300), a name or category that is too long
 * or not valid UTF-8 or contains control characters or any of ":|@#", a
 * malformed run/pid tag value. Whitespace is not trimmed: " a:1|c" is
 * malformed. A line that starts with "_e{" is an event: its lengths must
 * match the title and text, the title must be a valid label. */
int statsd_parse_line(const char *line, size_t len, struct statsd_metric *ret);

/* Splits a datagram into lines and calls fn for each parsed metric; counts
 * the malformed ones. Empty lines (e.g. a trailing "\n") are skipped, not
 * malformed. Returns the number of well-formed lines. */
typedef void (*statsd_metric_fn)(const struct statsd_metric *m, void *userdata);
size_t statsd_parse_datagram(const char *buf, size_t len, statsd_metric_fn fn, void *userdata, uint64_t *ret_malformed);

/* SPDX-License-Identifier: MIT */
/* mlmonctl's human output: typed lookups into the API's JSON (a missing,
 * null or mistyped field is "unknown" and prints as "-"), value formatting,
 * the run table and the run / summary blocks. Knows nothing of HTTP. */
#pragma once

#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

/* ---- typed lookups: o may be NULL or not an object ----------------------- */

json_object *json_get_object(json_object *o, const char *key);
json_object *json_get_array(json_object *o, const char *key);
const char *json_get_str(json_object *o, const char *key);
bool json_get_number(json_object *o, const char *key, double *ret);
bool json_get_int(json_object *o, const char *key, int64_t *ret);
/* 1 true, 0 false, -1 unknown */
int json_get_bool(json_object *o, const char *key);
/* A JSON number in the shortest form that reads back as v ("12.7", not
 * json-c's "12.699999999999999"). v must be finite. */
json_object *json_number_short(double v);

/* ---- text ----------------------------------------------------------------- */

/* Copy of s with control characters (newlines, escape sequences, ...) made
 * harmless for a terminal: strings like cmdline come from the monitored
 * process. Never NULL unless out of memory; NULL s gives "-". */
char *text_printable(const char *s);

/* Prints "mlmonctl: out of memory" and exits 1. */
_Noreturn void oom_exit(void);
/* vasprintf() that returns the string, or NULL when out of memory. */
char *text_vprintf(const char *fmt, va_list ap);

/* Render into buf; "-" when unknown. */
const char *fmt_bytes(char *buf, size_t size, bool known, double bytes);      /* "1.5 GiB" */
const char *fmt_rate(char *buf, size_t size, bool known, double bytes_per_s); /* "1.5 MiB/s" */
const char *fmt_seconds(char *buf, size_t size, bool known, double s);        /* "1.23 s", "2m 03s" */
const char *fmt_pct(char *buf, size_t size, bool known, double pct);          /* "31.2 %" */
const char *fmt_ts_ms(char *buf, size_t size, bool known, int64_t ts_ms);     /* local ISO 8601 */
/* A duration given in milliseconds, for latencies: "812.3us", "12.70ms",
 * "1.234s", "2m 03s". */
const char *fmt_ms(char *buf, size_t size, bool known, double ms);

#define FMT_MAX 64

/* ---- blocks ----------------------------------------------------------------- */

/* The `list` table for the items of a {"runs":[...]} answer. max_width > 0
 * cuts the COMMAND column to fit a terminal of that many columns. */
void print_run_table(FILE *f, json_object *runs, int max_width);
/* The `show` block: identity, latest sample, summary, leak verdict. */
void print_run(FILE *f, json_object *run);
/* The summary object as "  label: value" lines. */
void print_summary(FILE *f, json_object *summary);
/* A "gauges" object ({"name": {"value", "ts", ...}}) as a table under the
 * title: name, last value and when; with stats, min, max and count too.
 * Nothing when the object is missing or empty. */
void print_gauges(FILE *f, const char *title, json_object *gauges, bool stats);
/* One "  label:         value" line of those blocks. */
void print_field(FILE *f, const char *label, const char *value);

/* ---- tables ----------------------------------------------------------------- */

/* A text table: titles, then rows of cells, each column as wide as its widest
 * cell, two spaces apart; numbers align right. Cells are copied and made
 * printable (they may come from the monitored process). Out of memory is
 * fatal (exit 1), as everywhere in this file. */
struct table {
        size_t ncols;
        const char *const *titles;
        const bool *right; /* per column: align right */
        char **cells;      /* row-major, nrows * ncols */
        size_t ncells;
};

/* Appends one cell; rows fill left to right. NULL prints as "-". */
void table_add(struct table *t, const char *cell);
void table_addf(struct table *t, const char *fmt, ...) _printf_(2, 3);
size_t table_rows(const struct table *t);
/* indent: printed before each line. max_width > 0: cut column shrink (a
 * left-aligned one) so that lines fit, never below its title. */
void table_print(FILE *f, const struct table *t, const char *indent, int max_width, size_t shrink);
void table_done(struct table *t);

/* SPDX-License-Identifier: MIT */
/* mlmonctl's human output: typed lookups into the API's JSON (a missing,
 * null or mistyped field is "unknown" and prints as "-"), value formatting,
 * the run table and the run / summary blocks. Knows nothing of HTTP. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* ---- typed lookups: o may be NULL or not an object ----------------------- */

json_object *json_get_object(json_object *o, const char *key);
json_object *json_get_array(json_object *o, const char *key);
const char *json_get_str(json_object *o, const char *key);
bool json_get_number(json_object *o, const char *key, double *ret);
bool json_get_int(json_object *o, const char *key, int64_t *ret);
/* 1 true, 0 false, -1 unknown */
int json_get_bool(json_object *o, const char *key);

/* ---- text ----------------------------------------------------------------- */

/* Copy of s with control characters (newlines, escape sequences, ...) made
 * harmless for a terminal: strings like cmdline come from the monitored
 * process. Never NULL unless out of memory; NULL s gives "-". */
char *text_printable(const char *s);

/* Render into buf; "-" when unknown. */
const char *fmt_bytes(char *buf, size_t size, bool known, double bytes);      /* "1.5 GiB" */
const char *fmt_rate(char *buf, size_t size, bool known, double bytes_per_s); /* "1.5 MiB/s" */
const char *fmt_seconds(char *buf, size_t size, bool known, double s);        /* "1.23 s", "2m 03s" */
const char *fmt_pct(char *buf, size_t size, bool known, double pct);          /* "31.2 %" */
const char *fmt_ts_ms(char *buf, size_t size, bool known, int64_t ts_ms);     /* local ISO 8601 */

#define FMT_MAX 64

/* ---- blocks ----------------------------------------------------------------- */

/* The `list` table for the items of a {"runs":[...]} answer. max_width > 0
 * cuts the COMMAND column to fit a terminal of that many columns. */
void print_run_table(FILE *f, json_object *runs, int max_width);
/* The `show` block: identity, latest sample, summary, leak verdict. */
void print_run(FILE *f, json_object *run);
/* The summary object as "  label: value" lines. */
void print_summary(FILE *f, json_object *summary);

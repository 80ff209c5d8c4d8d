/* SPDX-License-Identifier: MIT */
/* `mlmonctl compare`: two report documents (see report.h), figure by figure,
 * for CI. Needs no daemon: it reads files (verb_compare() in compare.c). */
#pragma once

#include <json-c/json.h>
#include <stdio.h>

/* Reads and checks a report document. Returns 0, or -1 with *ret_error a
 * one-line, malloc'ed reason ("not valid JSON at offset 12", ...). */
int report_load(const char *path, json_object **ret, char **ret_error);

/* {"regressions":N,"metrics":[{"metric","op","field","base","current",
 * "change_pct","verdict"}, ...]}: for every op (union of both documents'
 * latency and throughput ops, by name) p50_ms, p90_ms, p99_ms (higher is
 * worse) and throughput per_s (lower is worse), then the summary's
 * peak_rss_bytes, cpu_time_s and wall_time_s (higher is worse). verdict:
 * "REGRESSED" / "improved" when worse / better by more than threshold_pct,
 * "ok", "skipped" (a value is missing or null), "only in base" / "only in
 * current" (the op is not in the other document; never a regression).
 * Two job documents: the merged ops' p50_ms, p90_ms and p99_ms only (a
 * job has no throughput window or run summary). The caller checks that
 * both documents are of one kind.
 * NULL only when out of memory. */
json_object *compare_reports(json_object *base, json_object *current, double threshold_pct);

/* The table of a compare_reports() result and a closing verdict line. */
void print_comparison(FILE *f, json_object *result, double threshold_pct);

/* SPDX-License-Identifier: MIT */
/* The profiling report of a run (see doc/api-contract.md, "The report
 * document"): {"run": <GET /v1/runs/ID>, "latency": <GET .../latency>,
 * "throughput": <one window of GET .../throughput>}, printed as a summary and
 * per-op tables grouped by category. The printing here knows nothing of
 * HTTP; verb_report() (report.c) fetches the parts. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The percentiles a report asks for, as the latency query's q= and the keys
 * of its answer. */
#define REPORT_QUANTILES "50,90,99"

/* The span a latency answer covers: [until - window_s, until] (its "from" is
 * the start of the first 1-second slice of data), else [from, until]. */
bool latency_span(json_object *latency, int64_t *ret_from, int64_t *ret_until);

/* The whole report: run identity and span, the summary, the op tables and
 * the throughput lines. */
void print_report(FILE *f, json_object *doc);

/* The op tables of a latency answer: one per category ("(none)" last), each
 * followed by its ops' rates from the throughput window. Nothing if no ops. */
void print_op_tables(FILE *f, json_object *latency, json_object *throughput);
/* "Throughput over 12.34 s: CPU ..., read ..." and the rates of the window's
 * ops that latency has no timings of (counters). */
void print_throughput(FILE *f, json_object *window, json_object *latency);

/* The objectives of latency["slo"]: a table (objective, count, measured
 * percentile, share over the target, MET / MISSED / no timings) and a line
 * that counts the missed ones. */
void print_slos(FILE *f, json_object *slo);
/* Whether every objective of latency["slo"] is met (true if none). */
bool slos_met(json_object *latency);

/* The goodput section (report-goodput.c): "Goodput<whose>: 27.4 % (...)"
 * and the parts as a table, the energy per step; or why there are no
 * figures. Nothing when gp is NULL. */
void print_goodput(FILE *f, json_object *gp, const char *whose);
/* GET path (a .../goodput question): 0 and *ret, or -1 quietly (an mlmond
 * without the ledger: the report goes on without it). */
int fetch_goodput(const char *path, json_object **ret);
/* The `show` lines of the verdicts beside the leak: time to OOM,
 * input-bound, GPU idle. */
void print_verdicts(FILE *f, json_object *run);

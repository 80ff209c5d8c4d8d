/* SPDX-License-Identifier: MIT */
/* `mlmonctl top`: the live view of running runs. print_top() renders one
 * screen from answers already fetched; verb_top() (top.c) fetches them. */
#pragma once

#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>

/* The window the per-run op figures cover, as the latency and throughput
 * queries' window=. */
#define TOP_WINDOW "10s"
#define TOP_WINDOW_MS 10000

struct top_run {
        json_object *run;     /* an item of GET /v1/runs (with "latest") */
        json_object *latency; /* GET .../latency?window=10s&q=99, or NULL */
        json_object *window;  /* windows[0] of GET .../throughput?window=10s, or NULL */
        json_object *gauges;  /* {name: latest value} over the last 10s, or NULL */
};

/* A header line (time, the daemon's health; health may be NULL), then
 * ID PID NAME CPU% RSS READ/s WRITE/s TOP-OP P99 OPS/s, sorted by CPU%
 * (runs is reordered), then the gauges of the runs that have any. TOP-OP
 * is op, or (NULL) the op with the most time in the window. max_width > 0
 * cuts NAME to fit. */
void print_top(FILE *f, json_object *health, struct top_run *runs, size_t n, const char *op, int64_t now_ms,
               int max_width);

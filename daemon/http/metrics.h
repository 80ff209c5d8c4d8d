/* SPDX-License-Identifier: MIT */
/* GET /metrics: every running run, the host and the daemon itself as one
 * model of families and series (metrics-model.h), written by the text
 * encoder (metrics-text.h) or the protobuf one (metrics-proto.h). The one
 * place that names Prometheus metric families (render.c names the JSON
 * fields).
 *
 * Run figures come from memory (the latest sample, the live totals, the
 * leak watch); only the application's op data needs the store: op totals
 * since registration are kept here between scrapes and advanced by the
 * slices closed since the last one, so a scrape reads seconds of slices,
 * not the run's whole history.
 *
 * A scrape is written as it is read (metrics_scrape_read()): a family at a
 * time, a few dozen runs at a time in the text format, so what the daemon
 * holds for an answer is its runs' figures and one family, never the whole
 * answer. What one user's runs can make it cost is bounded by the [metrics]
 * keys; what goes over them is left out and counted. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "analyze/ops.h"
#include "http/metrics-ledger.h"
#include "http/metrics-proto.h"
#include "http/metrics-text.h"

struct manager_stats;
struct manager_link;
struct store;
struct config;

/* ---- the exposition ------------------------------------------------------ */

/* Kept between scrapes: the op ledgers of the running runs, and what the
 * limits left out. */
struct metrics;
int metrics_new(struct metrics **ret);
void metrics_free(struct metrics *x);
/* Whether a scrape left series out over the limits within the last few
 * minutes (a /v1/health reason). */
bool metrics_recently_limited(const struct metrics *x);

/* One answer being written. metrics_scrape_new() reads everything the
 * answer holds (the running runs' state through ml, their op data from the
 * store) and updates the ledgers; a run whose op data cannot be read in
 * time (a query error) is written without its op families. -ENOMEM. */
struct metrics_scrape;
int metrics_scrape_new(struct metrics *x, const struct manager_link *ml, const struct manager_stats *st,
                       struct store *store, const struct config *config, enum metrics_format format,
                       struct metrics_scrape **ret);
/* The next at most max bytes of the answer into buf: how many, 0 at its
 * end, -ENOMEM. */
ssize_t metrics_scrape_read(struct metrics_scrape *x, char *buf, size_t max);
void metrics_scrape_free(struct metrics_scrape *x);

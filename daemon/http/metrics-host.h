/* SPDX-License-Identifier: MIT */
/* The families of GET /metrics that are not a run's (metrics-host.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "http/metrics-model.h"
#include "manager-ops.h"

/* Why GET /metrics left series out: the [metrics] limits. */
enum metrics_left_out {
        LEFT_OUT_TAGS,   /* tag labels past a run's label bytes */
        LEFT_OUT_OPS,    /* ops past ops_per_run */
        LEFT_OUT_GAUGES, /* gauges past gauges_per_run */
        LEFT_OUT_UID,    /* a run's op and gauge series past series_per_uid */
        _LEFT_OUT_MAX,
};
extern const char *const metrics_left_out_reasons[_LEFT_OUT_MAX];

/* The host: CPUs, CPU time by mode, memory, swap, load. */
void metrics_put_host(struct metrics_encoder *e, const struct manager_stats *m);
/* Its GPU/NPU devices and the CPU package's power and energy. */
void metrics_put_devices(struct metrics_encoder *e, const struct manager_stats *m);
/* mlmond itself: its version, ticks, StatsD counters, what it left out
 * (left_out[_LEFT_OUT_MAX], since it started), its CPU and memory. */
void metrics_put_daemon(struct metrics_encoder *e, const struct manager_stats *m, const uint64_t *left_out);
/* mlmond's own resident memory (the kernel's /proc). */
bool metrics_self_rss(uint64_t *ret);

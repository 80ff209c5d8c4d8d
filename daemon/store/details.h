/* SPDX-License-Identifier: MIT */
/* Writes of the typed rows beside the samples (details.c). */
#pragma once

#include <stdint.h>

struct store;

/* One device's use by run_id's sample at ts_ms, with its engines and
 * regions (inside the caller's transaction). */
struct gpu_use;
int store_insert_gpu_use(struct store *s, int64_t run_id, int64_t ts_ms, const struct gpu_use *u);

/* One device's counters (kind "gpu", "npu", or "cpu" for the package),
 * with its GTs' busy shares. */
struct gpu_device;
int store_insert_device_sample(struct store *s, int64_t ts_ms, const struct gpu_device *d);

struct leak_report;
/* The run's verdicts now (run_leak: one row per watched series). */
int store_update_run_leak(struct store *s, int64_t run_id, const struct leak_report *r);

/* SPDX-License-Identifier: MIT */
/* Whole-device accelerator counters from sysfs: a set of the DRM cards
 * (SYS/class/drm/cardN) and accel devices (SYS/class/accel/accelN) present
 * at each sample, with per-driver readers:
 *
 *   amdgpu     gpu_busy_percent (a gauge), mem_info_{vram,gtt}_{used,total},
 *              hwmon power1_average (else power1_input), temp1_input (edge),
 *              freq1_input (sclk); energy = trapezoid of power between samples
 *   i915       busy = 100 x (1 - d rc6_residency_ms / d wall) per GT
 *              (gt/gtN/, else the legacy power/ file); gt_act_freq_mhz of
 *              gt_RP0_freq_mhz (else gt_max_freq_mhz); hwmon energy1_input
 *   xe         busy per GT from tileT/gtG/gtidle/idle_residency_ms, GTs
 *              named by gtidle/name ("gt0-rc", "gt1-mc"); freq0/act_freq of
 *              rp0_freq; hwmon energy1_input (card), temp2_input (package)
 *   intel_vpu  busy = d npu_busy_time_us / d wall; npu_memory_utilization
 *              (no total exists); npu_current/max_frequency_mhz
 *   others     (amdxdna, nvidia-drm, virtual cards ...) identity only
 *
 * A device's busy is that of its render/compute GTs (xe: the GTs whose
 * gtidle name ends in "-rc", averaged; i915: gt0); the media GT is in gts[]
 * only. A runtime-suspended GPU is idle (busy 0) and its other files are not
 * read: most of them would wake it. An NPU's files are safe to read while
 * suspended (its frequency then reads 0). The first sample of a rate, a
 * counter that went back and a file that is missing or does not parse are
 * unknown (has_* false), never 0. The data model is gpu.h's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/accel/gpu.h"
#include "util.h"

struct gpudev_set;

/* sys_root: where sysfs is mounted ("/sys", the sys_root config key; NULL
 * or "" mean "/sys"). No device present is not an error. */
int gpudev_set_new(const char *sys_root, struct gpudev_set **ret);
void gpudev_set_free(struct gpudev_set *s);
static inline void gpudev_set_freep(struct gpudev_set **s) {
        gpudev_set_free(*s);
}
/* Reads from another root from now on; devices keep their state when their
 * id is found again there. For fixture snapshots. */
int gpudev_set_root(struct gpudev_set *s, const char *sys_root);

/* Rescans the class directories (devices come and go without a restart:
 * a gone one is dropped with its state, a new one added) and reads every
 * device at now_usec (CLOCK_MONOTONIC). Returns the number of devices, or
 * -errno when a class directory exists but cannot be listed (the devices
 * of the other class are still read). */
int gpudev_sample(struct gpudev_set *s, usec_t now_usec);

/* The devices of the last sample, sorted by id; valid until the next
 * gpudev_sample(), gpudev_set_root() or gpudev_set_free(). */
size_t gpudev_count(const struct gpudev_set *s);
const struct gpu_device *gpudev_get(const struct gpudev_set *s, size_t i);
const struct gpu_device *gpudev_find(const struct gpudev_set *s, const char *id);

/* The device id behind a node seen in the last sample, for attributing a
 * process's fds: "renderD129", "card1" -> "0000:03:00.0"; "accel0" ->
 * "0000:00:0b.0". A path ("/dev/dri/renderD129") is taken by its last
 * component. A render node whose card is not there still maps to its PCI
 * address. NULL when unknown. */
const char *gpudev_id_for_node(const struct gpudev_set *s, const char *node);

/* Parses a PCI address as sysfs and drm-pdev write it, "0000:03:00.0"
 * (domain:bus:device.function, lower-case hex). Pure. */
bool gpudev_is_pci_address(const char *s);

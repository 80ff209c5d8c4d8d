/* SPDX-License-Identifier: MIT */
/* The accelerator data model shared by the collectors (DRM/accel fdinfo,
 * sysfs devices, NVML) and by store/render. Plain data, no behaviour.
 *
 * A device is named by its PCI address when it has one ("0000:03:00.0",
 * the form drm-pdev and sysfs use), else by its node ("card3", "accel0").
 * has_* false = unknown (JSON null), never 0. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPU_ID_MAX 48
#define GPU_NAME_MAX 32
#define GPU_MAX_ENGINES 16
#define GPU_MAX_REGIONS 16
#define GPU_MAX_GTS 4
/* Devices one run's sample keeps a use of. */
#define GPU_MAX_RUN_DEVICES 16

/* Utilisation of one engine class, capacity applied: 100 = every engine of
 * the class busy all the interval. */
struct gpu_engine {
        char name[GPU_NAME_MAX]; /* "gfx", "rcs", "render", "sm" (NVML) ... */
        bool has_util;
        double util_pct;
};

/* Resident memory of one region ("vram", "gtt", "system", "vram0" ...). */
struct gpu_region {
        char name[GPU_NAME_MAX];
        uint64_t resident_bytes;
};

/* What one run (its process tree) uses of one device during one sample. */
struct gpu_use {
        char device[GPU_ID_MAX];
        char driver[GPU_NAME_MAX];
        bool estimated;   /* apportioned from device counters (NPU holder), not a client's own */
        unsigned clients; /* distinct DRM clients (pdev, client id) counted */
        bool has_mem;
        uint64_t mem_bytes; /* resident, summed over the regions */
        bool has_util;
        double util_pct; /* the busiest engine's */
        struct gpu_engine engines[GPU_MAX_ENGINES];
        size_t n_engines;
        struct gpu_region regions[GPU_MAX_REGIONS];
        size_t n_regions;
};

/* A whole device's latest counters (sysfs, hwmon, NVML). */
struct gpu_device {
        char id[GPU_ID_MAX];
        char driver[GPU_NAME_MAX]; /* amdgpu, i915, xe, intel_vpu, amdxdna_accel_driver, nvidia ... */
        char kind[8];              /* "gpu" or "npu" */
        char node[GPU_NAME_MAX];   /* "card1", "accel0", "nvidia0" */
        char vendor[8], model[8];  /* "0x1002", "0x744c"; "" when unknown */
        char name[64];             /* marketing name where the source has one (NVML); "" otherwise */
        bool suspended;            /* runtime-suspended: idle, counters not read */
        bool has_busy;
        double busy_pct;
        bool has_mem_used, has_mem_total;
        uint64_t mem_used_bytes, mem_total_bytes; /* VRAM (dGPU), NPU buffer objects, NVML framebuffer */
        bool has_gtt_used, has_gtt_total;
        uint64_t gtt_used_bytes, gtt_total_bytes;
        bool has_power;
        double power_w;
        bool has_energy;
        double energy_j; /* accumulated since mlmond began watching the device */
        bool has_temp;
        double temp_c;
        bool has_freq, has_freq_max;
        double freq_mhz, freq_max_mhz;
        struct {
                char name[GPU_NAME_MAX]; /* "gt0-rc", "gt1-mc", "gt0" */
                bool has_busy;
                double busy_pct;
        } gts[GPU_MAX_GTS];
        size_t n_gts;
};

/* Building a run's uses, shared by the collectors. */
/* The element of v[0 .. *n) (each size bytes, starting with a NUL-terminated
 * char name[name_size]) named [name, name + len); else one appended, zeroed,
 * with that name (cut to fit), *ret_added set; NULL when max are there. */
void *gpu_named_get(void *v, size_t *n, size_t max, size_t size, size_t name_size, const char *name, size_t len,
                    bool *ret_added);
/* The use of device in uses[0..*n), added (zeroed, named) if new; NULL when
 * max are in use. */
struct gpu_use *gpu_use_get(struct gpu_use *uses, size_t *n, size_t max, const char *device);
/* Adds pct to engine name (created if new; an unknown value creates it
 * unknown). */
void gpu_use_add_engine(struct gpu_use *u, const char *name, bool known, double pct);
/* Adds resident bytes to region name and to mem_bytes. */
void gpu_use_add_region(struct gpu_use *u, const char *name, uint64_t bytes);
/* Engines clamped to 100; util_pct = the busiest known one. */
void gpu_use_finish(struct gpu_use *u);

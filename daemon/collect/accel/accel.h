/* SPDX-License-Identifier: MIT */
/* The accelerator and energy context of the daemon: it owns the collectors
 * (DRM/accel client table, sysfs devices, NVML, RAPL), reads the devices on
 * their own period, and gives each run's sample its per-device use and its
 * estimated energy. One per daemon; everything runs on the event loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/accel/gpu.h"
#include "util.h"

struct accel;
struct drm_proc_cache;

/* Per process (run member) collector state, kept by the run. */
struct accel_member {
        int pid;
        uint64_t start_ticks;
        struct drm_proc_cache *drm; /* NULL until the process is first scanned */
};

/* Per run state. */
struct accel_run {
        struct gpu_use *uses; /* the latest sample's, one per device */
        size_t n_uses;
        /* energy estimate */
        bool has_energy;
        double energy_j; /* since registration (or since restored) */
        bool has_cpu_mark;
        uint64_t cpu_mark_ns; /* the run's CPU time at the last device read */
};

/* What the [gpu] and [energy] config keys turn on. */
struct accel_options {
        const char *proc_root, *sys_root;
        bool gpu;                    /* [gpu] collect != off */
        bool energy;                 /* [energy] collect != off */
        usec_t device_interval_usec; /* [gpu] device_interval */
        unsigned fd_rescan_ticks;    /* [gpu] fd_rescan_ticks */
        const char *nvml_library;    /* NULL or "": NVML off */
};

/* Never fails for lack of hardware: what is absent is off, with one log
 * line each. */
int accel_new(const struct accel_options *o, struct accel **ret);
void accel_free(struct accel *a);

/* Is any per-process collection worth doing (a DRM/accel device, or NVML
 * on)? When false, runs skip the fd scan altogether. */
bool accel_per_process(const struct accel *a);

/* Start of a sampling tick. Reads the devices (sysfs, NVML, RAPL, host CPU)
 * when their period is due; returns true when it did (the caller then
 * stores them and calls accel_run_energy for every run). */
bool accel_tick_begin(struct accel *a, usec_t now_usec);
/* End of the tick: clients not seen for max_age_usec are forgotten (more
 * than the longest run interval: a run's clients are read only when it is
 * sampled). */
void accel_tick_end(struct accel *a, usec_t max_age_usec);

/* One run's use of the devices now, from its processes (pid_dirfds[i] is
 * /proc/PID of members[i]); fills ar->uses and the sample's gpu fields.
 * members persist across calls (the caller moves them with its members). */
struct sample;
void accel_collect_run(struct accel *a, struct accel_run *ar, const int *pid_dirfds, struct accel_member *members,
                       size_t n, struct sample *s);
void accel_member_done(struct accel_member *m);
void accel_run_done(struct accel_run *ar);

/* After a device read: add the run's share of the energy spent since the
 * previous read (CPU share of the package, utilisation share of each GPU)
 * to ar->energy_j. cpu_time_ns: the run's cumulative CPU time now. */
void accel_run_energy(struct accel *a, struct accel_run *ar, uint64_t cpu_time_ns);

/* The devices' latest counters, and when they were read (Unix ms, 0 =
 * never); the CPU package (RAPL) as a pseudo-device of kind "cpu", NULL if
 * there is none. */
const struct gpu_device *accel_devices(const struct accel *a, size_t *ret_n);
int64_t accel_devices_ts(const struct accel *a);
const struct gpu_device *accel_package(const struct accel *a);

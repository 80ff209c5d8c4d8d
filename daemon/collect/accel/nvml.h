/* SPDX-License-Identifier: MIT */
/* NVIDIA GPUs through NVML, loaded at run time with dlopen: never a build
 * or run dependency. Per device: utilisation, framebuffer memory, power,
 * energy, temperature; per process: used memory and SM/encoder/decoder
 * utilisation.
 *
 *   struct nvml *n;
 *   char err[256];
 *   int r = nvml_open(cfg->nvml_library, &n, err, sizeof err);
 *   if (r < 0)
 *           log_info("NVIDIA GPUs off: %s", err);   <- the one line
 *   ...
 *   struct nvml_snapshot s;
 *   if (nvml_sample(n, now_usec, &s) >= 0)
 *           use s.devices[0 .. s.n_devices), s.procs[0 .. s.n_procs)
 *   ...
 *   nvml_close(n);
 *
 * The newest version of each entry point the library exports is used
 * (nvmlInit_v2 before nvmlInit, the _v3 process lists before _v2 and the
 * plain ones, whose entries are 16 bytes instead of 24), so drivers from
 * the R270 era on work. Everything runs on the caller's thread; the only
 * state is in struct nvml. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/accel/gpu.h"
#include "util.h"

#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"

/* What one process uses of one device, from the device's compute, graphics
 * and MPS client lists joined with its process-utilisation samples. */
struct nvml_proc {
        int pid;                    /* host pid namespace */
        size_t device;              /* index into the snapshot's devices */
        char device_id[GPU_ID_MAX]; /* devices[device].id, for matching gpu_use.device */
        bool has_mem;               /* false: NVML reports the value as unavailable (MIG, containers) */
        uint64_t mem_bytes;         /* usedGpuMemory; a pid in several lists counted once */
        /* Utilisation over the driver's last sample period: a sample newer
         * than the previous read, or 0 when the device had none for any
         * process (NVML reports no sample for an idle process). Unknown when
         * the library or device cannot tell (no per-process utilisation
         * before Maxwell, MIG mode, a failed call) or when every new sample
         * for the process was out of range (> 100). */
        bool has_util;
        double sm_util_pct, enc_util_pct, dec_util_pct;
};

/* One nvml_sample(). Owned by struct nvml: valid until the next
 * nvml_sample() or nvml_close(). */
struct nvml_snapshot {
        const struct gpu_device *devices; /* NVML index order */
        size_t n_devices;
        /* procs_known[i]: all of device i's process lists were read this
         * time, so a pid not in procs does not use the device. When false
         * the listed processes are still right but the list may be partial:
         * a pid missing from it is unknown, not idle. */
        const bool *procs_known;
        const struct nvml_proc *procs; /* sorted by (device, pid) */
        size_t n_procs;
};

struct nvml;

/* dlopen()s path (NULL: NVML_DEFAULT_LIBRARY; a bare name is searched the
 * usual way, a name with a '/' is a file), resolves the entry points,
 * initialises NVML and reads each device's identity (PCI address, name,
 * minor number).
 *
 * Returns 0, or on failure (nothing is logged; err gets one line without a
 * newline, naming the library, for the caller to log once):
 *   -ENOENT  the library could not be loaded (dlerror's text in err);
 *   -ENOSYS  a required entry point is missing (named in err);
 *   -EIO     nvmlInit or nvmlDeviceGetCount failed (nvmlErrorString's text);
 *   -ENODEV  no device, or none whose handle could be had;
 *   -EINVAL  path is "" (the config's "off" is the caller's to handle);
 *   -ENOMEM. */
int nvml_open(const char *path, struct nvml **ret, char *err, size_t errlen);

/* nvmlShutdown() and dlclose(). NULL is fine. */
void nvml_close(struct nvml *n);
static inline void nvml_closep(struct nvml **n) {
        nvml_close(*n);
}

/* The device count fixed at nvml_open(); devices are not re-enumerated. */
size_t nvml_device_count(const struct nvml *n);

/* Reads every device now. now_usec: CLOCK_MONOTONIC, for integrating power
 * into energy where the driver has no energy counter.
 *
 * A call that fails on one device leaves that value unknown (has_* false,
 * never 0) and is logged once, when it starts failing (a device lost from
 * the bus, say), and once when it works again; the backend stays on. Energy
 * is accumulated from nvmlDeviceGetTotalEnergyConsumption's differences (an
 * interval in which the counter goes back, a driver reload, or grows
 * implausibly is left out), or without that counter by the trapezoid rule
 * over consecutive readings of the power.
 *
 * Returns 0 and fills *ret, or -ENOMEM (*ret untouched). */
int nvml_sample(struct nvml *n, usec_t now_usec, struct nvml_snapshot *ret);

/* An NVML bus id, "0000:41:00.0" (busIdLegacy) or "00000000:C1:00.0"
 * (busId), in the form sysfs and drm-pdev use: lowercase hex, a domain of
 * at least 4 digits ("0000:c1:00.0"). -EINVAL if s is not one, -ENOBUFS if
 * size is too small (13 bytes suffice for 16-bit domains). */
int nvml_normalize_bus_id(const char *s, char *ret, size_t size);

/* SPDX-License-Identifier: MIT */
/* DRM and accel clients of processes, from the usage stats ("drm-*" keys)
 * that DRM drivers print in /proc/PID/fdinfo/FD.
 *
 * Layers, each usable (and tested) alone:
 *   drm_fdinfo_parse()    fdinfo text -> struct drm_fdinfo               pure
 *   drm_engine_util()     two readings of one engine -> utilisation %    pure
 *   struct drm_clients    per-client history, the once-per-sweep rule
 *   drm_proc_scan()       a process's DRM, accel and NVIDIA fds, the fd table
 *                         listed only now and then (struct drm_proc_cache)
 *   drm_collect()         one run's struct gpu_use per device, per tick
 *
 * A client counts once. A client is one open() of a device node (a kernel
 * struct drm_file), named by (device key, drm-client-id); the device key is
 * drm-pdev ("0000:03:00.0"), or for a device with no PCI address the node
 * the fd points at ("renderD128"). dup(), fork() and SCM_RIGHTS make more
 * fds on the same client, in one process or several, all with the same
 * fdinfo. Within one sweep (drm_clients_begin() .. drm_clients_end(), one
 * daemon tick) the FIRST process that reports a client gets it: the
 * client's engines and memory count for that process's run, and every
 * later report in the sweep (another fd, another process, another run) is
 * told it is a duplicate and counts for nothing. The daemon samples its
 * runs in a fixed order and a run's processes leader first, and a process's
 * fds are taken in fd order, so the winner stays the same from tick to tick.
 *
 * Time is the caller's (CLOCK_MONOTONIC usec_t, or a test's clock), taken
 * by drm_clients_begin(). ENOENT, ESRCH and EACCES from a process's files
 * mean it exited or is not ours to read: never logged here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/accel/gpu.h"
#include "util.h"

/* ---- fdinfo text -> struct ------------------------------------------------ */

/* One engine class as one fdinfo shows it; has_* = the key was there. */
struct drm_engine_stat {
        char name[GPU_NAME_MAX]; /* "gfx", "rcs", "render" ... */
        bool has_ns, has_cycles, has_total_cycles, has_maxfreq;
        uint64_t ns;           /* drm-engine-<e>: busy time, "ns" */
        uint64_t cycles;       /* drm-cycles-<e> */
        uint64_t total_cycles; /* drm-total-cycles-<e>: GPU timestamp, same rate as cycles */
        uint64_t maxfreq_hz;   /* drm-maxfreq-<e>, "Hz"/"KHz"/"MHz" converted */
        uint64_t capacity;     /* drm-engine-capacity-<e>; 1 when absent (0 is not allowed: 1) */
};

/* One memory region; sizes in bytes ("KiB", "MiB", old "kB" converted). */
struct drm_region_stat {
        char name[GPU_NAME_MAX]; /* "vram", "gtt", "system", "vram0", "memory" ... */
        bool has_resident, has_memory, has_total;
        uint64_t resident_bytes; /* drm-resident-<r> */
        uint64_t memory_bytes;   /* drm-memory-<r>: deprecated alias of resident (amdgpu prints both) */
        uint64_t total_bytes;    /* drm-total-<r> */
};

struct drm_fdinfo {
        char driver[GPU_NAME_MAX]; /* drm-driver: always set on success */
        char pdev[GPU_ID_MAX];     /* drm-pdev, "" when absent (platform devices) */
        bool has_client_id;
        uint64_t client_id; /* drm-client-id */
        bool has_ino;
        uint64_t ino;                                    /* the generic "ino:" line: the inode of the node opened */
        struct drm_engine_stat engines[GPU_MAX_ENGINES]; /* in the order first seen */
        size_t n_engines;
        struct drm_region_stat regions[GPU_MAX_REGIONS];
        size_t n_regions;
        /* keys understood but not kept: an engine or region past the
         * bounds, a name of GPU_NAME_MAX bytes or more, a malformed number
         * or unit, an overflow */
        unsigned n_skipped;
};

/* Parses one fdinfo file (len bytes, no NUL needed; a NUL byte inside is
 * garbage). Lines are "key:<blanks>value", split at the first colon, every
 * space and tab after it skipped (amdgpu writes ": \t"); a trailing '\r',
 * blanks and a missing final newline are fine. Keys not listed in struct
 * drm_fdinfo are ignored (pos, flags, pasid, drm-shared-*, amd-* ...). A
 * key given twice: the last one wins.
 *
 * Numbers are uint64 with an optional unit after blanks: engine time "ns"
 * (or none); sizes none, "KiB", "MiB" or "kB" (5.14-5.18 amdgpu);
 * frequencies "Hz" (or none), "KHz"/"kHz", "MHz".
 *
 * -ENOENT: no drm-driver line (the generic pos/flags/mnt_id/ino lines of
 * any file, or an accel fd whose driver prints nothing, like intel_vpu);
 * -EINVAL: text that cannot be an fdinfo (a NUL byte, a non-empty line
 * without a colon, a control byte in a key, a drm-driver or drm-pdev that
 * is empty, too long or not printable ASCII). */
int drm_fdinfo_parse(const char *text, size_t len, struct drm_fdinfo *ret);

/* Resident bytes of a region: drm-resident-<r> if present, else the legacy
 * drm-memory-<r>; never their sum (amdgpu prints both for the same
 * memory). 0 when neither is there (see drm_region_has_resident()). */
static inline bool drm_region_has_resident(const struct drm_region_stat *r) {
        return r->has_resident || r->has_memory;
}
static inline uint64_t drm_region_resident(const struct drm_region_stat *r) {
        return r->has_resident ? r->resident_bytes : r->has_memory ? r->memory_bytes : 0;
}

/* ---- utilisation between two readings ----------------------------------- */

/* The counters of one (client, engine) kept between readings. They never
 * go down: a reading below them leaves them as they are (spec: "keep the
 * previous larger value until the counter catches up"). */
struct drm_engine_counters {
        bool has_ns, has_cycles, has_total_cycles;
        uint64_t ns, cycles, total_cycles;
};

/* Utilisation of one engine class over the interval from *held to cur,
 * dt_ns apart, capacity applied (100 = every engine of the class busy all
 * the interval), clamped to [0, 100]; the first of the methods whose
 * counters both readings have:
 *   1. 100 x dcycles / (dtotal_cycles x capacity)  (xe: the GPU's own clock)
 *   2. 100 x dns / (dt_ns x capacity)                (amdgpu, i915, v3d ...)
 *   3. 100 x dcycles / (maxfreq_hz x dt_s x capacity) (msm, panfrost with
 *      cycles only: frequency-normalised, half clock flat out = 50 %)
 * A counter that went backwards counts as not moved (d = 0, so 0 % for the
 * interval if nothing else moved) and *held keeps the larger value. Unknown
 * (returns false, *ret_pct untouched) on the first reading (nothing held),
 * when dtotal_cycles or dt_ns is 0, or no method fits. *held is updated to
 * cur (held high) either way. */
bool drm_engine_util(struct drm_engine_counters *held, const struct drm_engine_stat *cur, uint64_t dt_ns,
                     double *ret_pct);

/* ---- client table --------------------------------------------------------- */

/* A bound on the table: processes can open as many clients as they like. */
#define DRM_MAX_CLIENTS 4096

struct drm_clients;
int drm_clients_new(struct drm_clients **ret);
struct drm_clients *drm_clients_free(struct drm_clients *t); /* NULL-safe; returns NULL */

/* Brackets one sweep at monotonic time now_usec (the same for every
 * reading of the sweep). end drops the clients not seen for more than
 * max_age_usec: runs have their own intervals, so max_age_usec must exceed
 * the longest (the daemon: twice the longest run interval). */
void drm_clients_begin(struct drm_clients *t, usec_t now_usec);
void drm_clients_end(struct drm_clients *t, usec_t max_age_usec);
/* The same drop at any time; returns how many were dropped. */
size_t drm_clients_expire(struct drm_clients *t, usec_t now_usec, usec_t max_age_usec);
size_t drm_clients_count(const struct drm_clients *t);

/* One reading of a client by process pid through its fd fd, in the current
 * sweep. device: the device key (drm-pdev, else the node). A client without
 * drm-client-id (kernels before 5.19) is keyed by (device, pid, fd): it
 * cannot be deduplicated, and a dup'd fd counts twice.
 * Returns 1 when the reading counts: ret_engines[i] is info->engines[i]'s
 * name and utilisation since the client's previous reading (unknown the
 * first time the client, or that engine, is seen); 0 when the client was
 * already reported in this sweep (*ret_owner_pid, if not NULL, = the pid
 * that got it; nothing is updated); -ENOSPC when the table is full
 * (DRM_MAX_CLIENTS), -ENOMEM. */
int drm_clients_observe(struct drm_clients *t, const char *device, int pid, int fd, const struct drm_fdinfo *info,
                        struct gpu_engine ret_engines[GPU_MAX_ENGINES], int *ret_owner_pid);

/* ---- a process's fds ------------------------------------------------------ */

/* Per process: at most this many fds are kept (Mesa opens one or two
 * clients per device; 64 is eight devices at eight clients each). */
#define DRM_PROC_MAX_FDS 64
/* One read() of an fdinfo: amdgpu's, the longest seen, is 1.2 KiB; a longer
 * one loses its last lines (not a half line). */
#define DRM_FDINFO_READ_MAX 8192

enum drm_fd_kind {
        DRM_FD_CLIENT, /* fdinfo with drm-driver (a /dev/dri node; amdxdna's accel node): counted */
        DRM_FD_ACCEL,  /* /dev/accel/accelN, no drm keys (intel_vpu): a holder of accelN */
        DRM_FD_NVIDIA, /* /dev/nvidiaN (no fdinfo keys; NVML has the numbers): a holder of nvidiaN */
};

struct drm_fd {
        int fd;
        enum drm_fd_kind kind;
        char node[GPU_NAME_MAX]; /* "renderD129", "accel0", "nvidia0" */
        uint64_t ino;            /* CLIENT: fdinfo's ino when listed, to see the fd number reused */
        struct drm_fdinfo info;  /* CLIENT: as read by the latest drm_proc_scan() */
};

/* What a process's fd table held when last listed. The caller keeps one per
 * process (calloc'ed, or left to drm_collect()) and frees it with
 * drm_proc_cache_free() when the process leaves. */
struct drm_proc_cache {
        struct drm_fd *fds; /* sorted by fd; one holder per node */
        size_t n_fds;
        uint64_t calls;     /* drm_proc_scan() calls */
        uint64_t listed_at; /* calls at the latest listing */
        uint64_t lists;     /* listings so far */
        unsigned dropped;   /* fds past DRM_PROC_MAX_FDS at the latest listing */
};
struct drm_proc_cache *drm_proc_cache_free(struct drm_proc_cache *c); /* NULL-safe; returns NULL */

/* Brings c up to date with the process whose /proc/PID directory is piddir
 * (opened under any proc root). Lists fd/ (a readlinkat per entry, keeping
 * targets under /dev/dri/, /dev/accel/ and /dev/nvidiaN) on the first call,
 * every relist_every calls (0 or 1: every call), and at once when a kept
 * client fd's fdinfo is gone, no longer DRM or shows another inode, or a
 * holder fd no longer points at its node; between listings it only re-reads
 * the fdinfo of the client fds (one openat and one read each, relative to
 * piddir) and readlinkat()s one fd per holder. A /dev/dri fd whose fdinfo
 * has no drm keys (a driver without usage stats: nouveau, nvidia-drm) is
 * not kept. A GPU opened between listings is seen at the next one.
 * Returns the number of fds in c->fds, or -ESRCH (the process is gone),
 * -EACCES (its fd table is not ours), -ENOMEM ...; on error c holds none. */
int drm_proc_scan(int piddir, struct drm_proc_cache *c, unsigned relist_every);

/* ---- one run, one tick ---------------------------------------------------- */

struct drm_proc {
        int pid;
        int dirfd;                     /* /proc/PID, borrowed */
        struct drm_proc_cache **cache; /* the caller's slot, kept across ticks; allocated here when NULL */
};

/* A device node held by the run with no client stats of its own: the
 * caller apportions the device's busy (sysfs, NVML) to its holders. */
struct drm_holder {
        char node[GPU_NAME_MAX]; /* "accel0", "nvidia0" */
        enum drm_fd_kind kind;   /* DRM_FD_ACCEL or DRM_FD_NVIDIA */
        unsigned procs;          /* processes of the run holding it */
};

/* One run's use of DRM/accel devices now: scans each of its processes
 * (procs in the order the run lists them, leader first), reads every
 * client in the current sweep (call between drm_clients_begin() and
 * drm_clients_end()) and fills one struct gpu_use per device, in the order
 * first seen:
 *   device      drm-pdev, else the fd's node ("renderD128")
 *   clients     the run's distinct clients counted (not duplicates)
 *   engines     per class, summed over those clients (only those whose
 *               utilisation is known), clamped to 100; an engine no client
 *               knows yet is there with has_util false (first reading)
 *   util_pct    the busiest engine's; has_util when any engine's is known
 *   regions     per region, resident (drm_region_resident()) summed
 *   mem_bytes   resident summed over ALL regions of those clients: device
 *               memory and what the device maps of system memory (gtt,
 *               system, cpu) alike; regions[] tells them apart
 *   estimated   false (fdinfo is each client's own account)
 * and one struct drm_holder per accel or NVIDIA node with no client stats.
 * A device past max_uses, or a holder past max_holders, is left out. A
 * process that is gone or not readable adds nothing. Returns 0, or -ENOMEM
 * (outputs then unset). */
int drm_collect(struct drm_clients *t, const struct drm_proc *procs, size_t n_procs, unsigned relist_every,
                struct gpu_use *uses, size_t max_uses, size_t *ret_n_uses, struct drm_holder *holders,
                size_t max_holders, size_t *ret_n_holders);

/* SPDX-License-Identifier: MIT */
/* Whole-device accelerator counters from sysfs; see gpudev.h.
 *
 * Layout on a real system (every class entry is a symlink into devices/):
 *
 *   SYS/class/drm/card1           -> ../../devices/pci0000:00/0000:03:00.0/drm/card1
 *   SYS/class/drm/card1/device    -> ../../../0000:03:00.0
 *   SYS/class/drm/card1-DP-1         a connector: not a device
 *   SYS/class/drm/renderD129/device  the same device as card1
 *   SYS/class/accel/accel0/device -> ../../../0000:00:0b.0
 *   DEV/driver                    -> ../../../bus/pci/drivers/amdgpu
 *   DEV/hwmon/hwmon4/name            "amdgpu\n"
 *
 * Each sample lists both class directories (a readdir of a few entries),
 * reads each node's device link and opens the device directory relative to
 * the class directory, so nothing is held open between samples and a device
 * that went away is noticed at once. The per-driver readers get the device
 * directory (DEV) and the card directory (i915 keeps its GT files there). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>

#include "collect/accel/gpudev.h"
#include "collect/accel/sysfs.h"

/* ---- names -------------------------------------------------------------- */

/* domain:bus:device.function in lower-case hex, "0000:03:00.0". The domain
 * has 4 digits except behind VMD and on some hypervisors ("10000:e1:00.0"). */
bool gpudev_is_pci_address(const char *s) {
        static const char tail[] = ":xx:xx.x";
        size_t len = s ? strlen(s) : 0, dom;

        if (len < 4 + sizeof tail - 1 || len > 8 + sizeof tail - 1)
                return false;
        dom = len - (sizeof tail - 1);
        for (size_t i = 0; i < len; i++) {
                char want = i < dom ? 'x' : tail[i - dom];
                bool hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
                if (want == 'x' ? !hex : s[i] != want)
                        return false;
        }
        return true;
}

/* "card1", "renderD129", "accel0"; not "card1-DP-1" (a connector) nor
 * "version" (a file in class/drm). */
static bool is_node(const char *name, const char *prefix) {
        size_t n = strlen(prefix), len = strlen(name);

        if (len <= n || len >= GPU_NAME_MAX || strncmp(name, prefix, n) != 0)
                return false;
        for (const char *p = name + n; *p; p++)
                if (*p < '0' || *p > '9')
                        return false;
        return true;
}

static void copy_str(char *dst, size_t size, const char *src) {
        size_t n = strnlen(src, size - 1);
        memcpy(dst, src, n);
        dst[n] = 0;
}

static bool endswith(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && streq(s + a - b, suffix);
}

/* The last component of a symlink's target. For a class entry's device link
 * this is the device's name, what the realpath's basename would be, for one
 * syscall instead of one per path component. */
static int readlink_basename_at(int dirfd, const char *path, char *ret, size_t size) {
        char target[PATH_MAX];
        const char *base;
        ssize_t k;

        k = readlinkat(dirfd, path, target, sizeof target - 1);
        if (k < 0)
                return -errno;
        target[k] = 0;
        while (k > 1 && target[k - 1] == '/')
                target[--k] = 0;
        base = strrchr(target, '/');
        base = base ? base + 1 : target;
        if (!*base || strlen(base) >= size)
                return -EINVAL;
        memcpy(ret, base, strlen(base) + 1);
        return 0;
}

/* DEV/driver's basename, else DRIVER= in DEV/uevent:
 *   DRIVER=amdgpu
 *   PCI_CLASS=30000
 *   PCI_SLOT_NAME=0000:03:00.0 */
static int read_driver(int dev_fd, char ret[GPU_NAME_MAX]) {
        _cleanup_free_ char *text = NULL;
        const char *p;
        size_t len;

        if (readlink_basename_at(dev_fd, "driver", ret, GPU_NAME_MAX) == 0)
                return 0;
        if (read_file_at(dev_fd, "uevent", 4096, &text, NULL) < 0)
                return -ENOENT;
        for (p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (!startswith(p, "DRIVER="))
                        continue;
                p += strlen("DRIVER=");
                len = strcspn(p, "\n");
                if (len == 0 || len >= GPU_NAME_MAX)
                        return -EINVAL;
                memcpy(ret, p, len);
                ret[len] = 0;
                return 0;
        }
        return -ENOENT;
}

/* ---- per-device state --------------------------------------------------- */

/* A cumulative counter's last reading and when it was taken. */
struct counter {
        bool has;
        uint64_t value;
        usec_t at_usec;
};

/* Moves c to value, read at now. True, with the step and its span, when the
 * previous reading is known, time moved on and the counter did not go back;
 * a counter that went back (a driver reload) starts over from value. */
static bool counter_step(struct counter *c, uint64_t value, usec_t now, uint64_t *ret_delta, usec_t *ret_span) {
        bool ok = c->has && now > c->at_usec && value >= c->value;

        if (ok) {
                *ret_delta = value - c->value;
                *ret_span = now - c->at_usec;
        }
        if (!c->has || now > c->at_usec) {
                c->has = true;
                c->value = value;
                c->at_usec = now;
        }
        return ok;
}

static double clamp_pct(double v) {
        return v < 0 ? 0 : v > 100 ? 100 : v;
}

/* One GT (i915, xe): where its files are and its idle residency. */
struct gt {
        char dir[32]; /* xe "tile0/gt0" under DEV; i915 "gt/gt0" or legacy "power" under the card */
        char name[GPU_NAME_MAX];
        bool render; /* render/compute: counts for the device's busy */
        struct counter idle_ms;
};

struct gpudev;

/* What a driver reads. probe: once per binding (GT topology); read: every
 * sample, after the generic part reset the readings. */
struct driver {
        const char *name;
        void (*probe)(struct gpudev *g, int dev_fd, int card_fd);
        void (*read)(struct gpudev *g, int dev_fd, int card_fd, usec_t now);
};

struct gpudev {
        struct gpu_device d;      /* the last sample's readings; identity kept */
        char devname[GPU_ID_MAX]; /* the device directory's name: the PCI address for PCI */
        const struct driver *drv;
        bool seen;
        char hwmon[16]; /* "hwmon4": found by name, kept while it still answers to it */
        struct gt gts[GPU_MAX_GTS];
        size_t n_gts;
        struct counter npu_busy_us; /* intel_vpu */
        struct counter energy_uj;   /* hwmon energy1_input (i915, xe) */
        bool has_prev_power;        /* amdgpu: the trapezoid's left side */
        double prev_power_w;
        usec_t prev_power_usec;
        bool has_energy; /* since the device was first seen */
        double energy_j;
};

struct node_entry {
        char node[GPU_NAME_MAX];
        char devname[GPU_ID_MAX];
        char id[GPU_ID_MAX]; /* filled once the scan is complete */
};

struct gpudev_set {
        char *root;
        struct gpudev **devs;
        size_t n_devs;
        struct node_entry *nodes;
        size_t n_nodes;
};

/* The device-level hwmon directory under DEV/hwmon/ named `want`. Its index
 * changes across driver reloads and boots, so it is found by listing and
 * checked by name; the one found is kept while its name still matches (one
 * read a sample). Returns an fd or -errno. */
static int hwmon_open(struct gpudev *g, int dev_fd, const char *want) {
        _cleanup_close_ int hw_fd = -1;
        _cleanup_closedir_ DIR *dir = NULL;
        char path[64], name[GPU_NAME_MAX];
        struct dirent *de;
        int fd;

        if (g->hwmon[0]) {
                snprintf(path, sizeof path, "hwmon/%s/name", g->hwmon);
                if (sysfs_read_str_at(dev_fd, path, name, sizeof name) == 0 && streq(name, want)) {
                        snprintf(path, sizeof path, "hwmon/%s", g->hwmon);
                        fd = openat(dev_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (fd >= 0)
                                return fd;
                }
                g->hwmon[0] = 0;
        }

        hw_fd = openat(dev_fd, "hwmon", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (hw_fd < 0)
                return -errno;
        dir = fdopendir(hw_fd);
        if (!dir)
                return -errno;
        hw_fd = -1; /* owned by dir now */
        while ((de = readdir(dir))) {
                if (!is_node(de->d_name, "hwmon") || strlen(de->d_name) >= sizeof g->hwmon)
                        continue;
                snprintf(path, sizeof path, "%s/name", de->d_name);
                if (sysfs_read_str_at(dirfd(dir), path, name, sizeof name) < 0 || !streq(name, want))
                        continue;
                fd = openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                copy_str(g->hwmon, sizeof g->hwmon, de->d_name);
                return fd;
        }
        return -ENOENT;
}

/* Numbered subdirectories "<prefix>N" of dirfd/path, sorted by N, at most max. */
static size_t list_numbered(int dirfd, const char *path, const char *prefix, unsigned *ret, size_t max) {
        _cleanup_closedir_ DIR *dir = NULL;
        struct dirent *de;
        size_t n = 0;
        int fd;

        fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        dir = fdopendir(fd);
        if (!dir) {
                close(fd);
                return 0;
        }
        while ((de = readdir(dir))) {
                unsigned v;
                size_t i;

                if (!is_node(de->d_name, prefix) || safe_atou(de->d_name + strlen(prefix), &v) < 0)
                        continue;
                if (n == max && v >= ret[max - 1])
                        continue; /* keep the lowest max numbers */
                /* insertion sort: a handful of entries */
                i = n < max ? n++ : max - 1;
                for (; i > 0 && ret[i - 1] > v; i--)
                        ret[i] = ret[i - 1];
                ret[i] = v;
        }
        return n;
}

/* Residency of the idle state over the span -> busy %. */
static bool busy_from_idle(struct counter *c, uint64_t idle_ms, usec_t now, double *ret) {
        uint64_t d_ms;
        usec_t span;

        if (!counter_step(c, idle_ms, now, &d_ms, &span))
                return false;
        *ret = clamp_pct(100.0 * (1.0 - (double)d_ms * (double)USEC_PER_MSEC / (double)span));
        return true;
}

/* Fills gts[] from the GT states and the device's busy: the mean of its
 * render/compute GTs, unknown unless all of them are known. */
static void gts_publish(struct gpudev *g, const bool *known, const double *busy) {
        struct gpu_device *d = &g->d;
        double sum = 0;
        unsigned n_render = 0;
        bool all = true;

        d->n_gts = g->n_gts;
        for (size_t i = 0; i < g->n_gts; i++) {
                copy_str(d->gts[i].name, sizeof d->gts[i].name, g->gts[i].name);
                d->gts[i].has_busy = known[i];
                d->gts[i].busy_pct = known[i] ? busy[i] : 0;
                if (g->gts[i].render) {
                        n_render++;
                        all = all && known[i];
                        sum += known[i] ? busy[i] : 0;
                }
        }
        if (n_render > 0 && all) {
                d->has_busy = true;
                d->busy_pct = sum / n_render;
        }
}

/* An energy counter in µJ (i915 and xe hwmon energy1_input, 64-bit in the
 * driver so it does not wrap; a drop is a reload and that interval is
 * skipped) -> energy and mean power over the interval. */
static void energy_counter_read(struct gpudev *g, int hw_fd, const char *file, usec_t now) {
        uint64_t uj, d_uj;
        usec_t span;

        if (sysfs_read_u64_at(hw_fd, file, &uj) < 0)
                return;
        if (!counter_step(&g->energy_uj, uj, now, &d_uj, &span))
                return;
        g->has_energy = true;
        g->energy_j += (double)d_uj / 1e6;
        g->d.has_power = true;
        g->d.power_w = (double)d_uj / (double)span; /* µJ / µs = W */
}

/* ---- amdgpu ------------------------------------------------------------- */

/* DEV/gpu_busy_percent "61\n" (a gauge: the SMU's estimate, not a counter),
 * DEV/mem_info_vram_used "5905580032\n" (bytes), hwmon power1_average or
 * power1_input "212000000\n" (µW, socket power: on an APU this includes the
 * CPU cores, which RAPL counts too), temp1_input "61000\n" (m°C, edge),
 * freq1_input "2505000000\n" (Hz, sclk). No energy file: the energy is the
 * trapezoid of power between two samples. */
static void amdgpu_read(struct gpudev *g, int dev_fd, int card_fd, usec_t now) {
        struct gpu_device *d = &g->d;
        _cleanup_close_ int hw_fd = -1;
        uint64_t v;
        int64_t t;

        if (sysfs_read_u64_at(dev_fd, "gpu_busy_percent", &v) == 0 && v <= 100) {
                d->has_busy = true;
                d->busy_pct = (double)v;
        }
        d->has_mem_used = sysfs_read_u64_at(dev_fd, "mem_info_vram_used", &d->mem_used_bytes) == 0;
        d->has_mem_total = sysfs_read_u64_at(dev_fd, "mem_info_vram_total", &d->mem_total_bytes) == 0;
        d->has_gtt_used = sysfs_read_u64_at(dev_fd, "mem_info_gtt_used", &d->gtt_used_bytes) == 0;
        d->has_gtt_total = sysfs_read_u64_at(dev_fd, "mem_info_gtt_total", &d->gtt_total_bytes) == 0;

        hw_fd = hwmon_open(g, dev_fd, "amdgpu");
        if (hw_fd >= 0) {
                if (sysfs_read_u64_at(hw_fd, "power1_average", &v) == 0 ||
                    sysfs_read_u64_at(hw_fd, "power1_input", &v) == 0) {
                        d->has_power = true;
                        d->power_w = (double)v / 1e6;
                }
                if (sysfs_read_i64_at(hw_fd, "temp1_input", &t) == 0) {
                        d->has_temp = true;
                        d->temp_c = (double)t / 1000.0;
                }
                if (sysfs_read_u64_at(hw_fd, "freq1_input", &v) == 0) {
                        d->has_freq = true;
                        d->freq_mhz = (double)v / 1e6;
                }
        }

        /* a gap (power unknown at one end) stays out of the energy rather
         * than being bridged with a guess */
        if (!d->has_power) {
                g->has_prev_power = false;
                return;
        }
        if (g->has_prev_power && now > g->prev_power_usec) {
                g->has_energy = true;
                g->energy_j += (g->prev_power_w + d->power_w) / 2.0 * (double)(now - g->prev_power_usec) / 1e6;
        }
        if (!g->has_prev_power || now > g->prev_power_usec) {
                g->has_prev_power = true;
                g->prev_power_w = d->power_w;
                g->prev_power_usec = now;
        }
}

/* ---- Intel graphics ----------------------------------------------------- */

/* MHz values, "1950\n". The hardware maximum (RP0) where there is one, the
 * soft limit otherwise. */
static void freq_read(struct gpu_device *d, int fd, const char *act, const char *rp0, const char *max) {
        uint64_t v;

        if (sysfs_read_u64_at(fd, act, &v) == 0) {
                d->has_freq = true;
                d->freq_mhz = (double)v;
        }
        if (sysfs_read_u64_at(fd, rp0, &v) == 0 || sysfs_read_u64_at(fd, max, &v) == 0) {
                d->has_freq_max = true;
                d->freq_max_mhz = (double)v;
        }
}

/* Reads every GT's idle residency ms file (named file, under the GT's dir
 * relative to base_fd) and publishes per GT and device busy. */
static void gts_read(struct gpudev *g, int base_fd, const char *file, usec_t now) {
        bool known[GPU_MAX_GTS] = {};
        double busy[GPU_MAX_GTS] = {};
        char path[96];
        uint64_t ms;

        for (size_t i = 0; i < g->n_gts; i++) {
                snprintf(path, sizeof path, "%s/%s", g->gts[i].dir, file);
                if (sysfs_read_u64_at(base_fd, path, &ms) == 0)
                        known[i] = busy_from_idle(&g->gts[i].idle_ms, ms, now, &busy[i]);
        }
        gts_publish(g, known, busy);
}

/* i915, relative to the card directory (SYS/class/drm/card0/):
 *   gt/gt0/rc6_residency_ms  "400700\n"  ms in RC6 since boot, per GT
 *   power/rc6_residency_ms               the same, whole card, older kernels
 *   gt_act_freq_mhz "1300\n", gt_RP0_freq_mhz, gt_max_freq_mhz (soft limit)
 * gt0 is render/compute; on Meteor Lake and later gt1 is the media GT. */
static void i915_probe(struct gpudev *g, int dev_fd, int card_fd) {
        unsigned ids[GPU_MAX_GTS];
        size_t n = list_numbered(card_fd, "gt", "gt", ids, GPU_MAX_GTS);

        g->n_gts = 0;
        for (size_t i = 0; i < n; i++) {
                struct gt *t = &g->gts[g->n_gts++];
                *t = (struct gt){ .render = i == 0 };
                snprintf(t->dir, sizeof t->dir, "gt/gt%u", ids[i]);
                snprintf(t->name, sizeof t->name, "gt%u", ids[i]);
        }
        if (g->n_gts == 0 && faccessat(card_fd, "power/rc6_residency_ms", F_OK, 0) == 0) {
                g->gts[0] = (struct gt){ .dir = "power", .name = "gt0", .render = true };
                g->n_gts = 1;
        }
}

static void i915_read(struct gpudev *g, int dev_fd, int card_fd, usec_t now) {
        _cleanup_close_ int hw_fd = -1;

        gts_read(g, card_fd, "rc6_residency_ms", now);
        freq_read(&g->d, card_fd, "gt_act_freq_mhz", "gt_RP0_freq_mhz", "gt_max_freq_mhz");
        /* discrete cards only (DG1, DG2/Arc): the device-level hwmon is named
         * "i915", the per-GT ones "i915_gtN" */
        hw_fd = hwmon_open(g, dev_fd, "i915");
        if (hw_fd >= 0)
                energy_counter_read(g, hw_fd, "energy1_input", now);
}

/* xe, relative to the device directory:
 *   tile0/gt0/gtidle/name               "gt0-rc\n" (render/compute), "gt1-mc\n" (media)
 *   tile0/gt0/gtidle/idle_residency_ms  "500400\n" ms in GT C6
 *   tile0/gt0/freq0/act_freq            "1950\n" MHz; rp0_freq (hardware max), max_freq (soft)
 *   hwmon "xe": energy1_input (card, µJ), temp2_input (package, m°C)
 * GT numbers are global across tiles (tile1/gt2). */
static void xe_probe(struct gpudev *g, int dev_fd, int card_fd) {
        unsigned tiles[GPU_MAX_GTS], ids[GPU_MAX_GTS];
        size_t n_tiles = list_numbered(dev_fd, ".", "tile", tiles, GPU_MAX_GTS);
        char path[64];
        bool any_render = false;

        g->n_gts = 0;
        for (size_t i = 0; i < n_tiles && g->n_gts < GPU_MAX_GTS; i++) {
                snprintf(path, sizeof path, "tile%u", tiles[i]);
                size_t n = list_numbered(dev_fd, path, "gt", ids, GPU_MAX_GTS);
                for (size_t j = 0; j < n && g->n_gts < GPU_MAX_GTS; j++) {
                        struct gt *t = &g->gts[g->n_gts++];
                        *t = (struct gt){};
                        snprintf(t->dir, sizeof t->dir, "tile%u/gt%u", tiles[i], ids[j]);
                        snprintf(path, sizeof path, "%s/gtidle/name", t->dir);
                        if (sysfs_read_str_at(dev_fd, path, t->name, sizeof t->name) < 0)
                                snprintf(t->name, sizeof t->name, "gt%u", ids[j]);
                        t->render = endswith(t->name, "-rc");
                        any_render = any_render || t->render;
                }
        }
        /* no names (an older kernel): the first GT is the render one */
        if (!any_render && g->n_gts > 0)
                g->gts[0].render = true;
}

static void xe_read(struct gpudev *g, int dev_fd, int card_fd, usec_t now) {
        _cleanup_close_ int hw_fd = -1, freq_fd = -1;
        char path[64];
        int64_t t;

        gts_read(g, dev_fd, "gtidle/idle_residency_ms", now);
        for (size_t i = 0; i < g->n_gts; i++)
                if (g->gts[i].render) {
                        snprintf(path, sizeof path, "%s/freq0", g->gts[i].dir);
                        freq_fd = openat(dev_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (freq_fd >= 0)
                                freq_read(&g->d, freq_fd, "act_freq", "rp0_freq", "max_freq");
                        break;
                }
        /* discrete cards and some integrated platforms */
        hw_fd = hwmon_open(g, dev_fd, "xe");
        if (hw_fd >= 0) {
                energy_counter_read(g, hw_fd, "energy1_input", now);
                if (sysfs_read_i64_at(hw_fd, "temp2_input", &t) == 0) {
                        g->d.has_temp = true;
                        g->d.temp_c = (double)t / 1000.0;
                }
        }
}

/* ---- Intel NPU (intel_vpu) ---------------------------------------------- */

/* DEV/npu_busy_time_us "12650000\n" (µs executing jobs since boot; a running
 * job counts up to now), npu_memory_utilization "268435456\n" (bytes of
 * resident buffer objects; there is no total), npu_current_frequency_mhz
 * "1950\n" (0 while runtime-suspended: the driver does not wake the NPU to
 * answer), npu_max_frequency_mhz. None of them wakes the device, so they
 * are read while suspended too: busy then comes out 0 from a counter that
 * did not move. Intel advises reading the busy time no more than about
 * once a second. */
static void npu_read(struct gpudev *g, int dev_fd, int card_fd, usec_t now) {
        struct gpu_device *d = &g->d;
        uint64_t v, d_us;
        usec_t span;

        if (sysfs_read_u64_at(dev_fd, "npu_busy_time_us", &v) == 0 &&
            counter_step(&g->npu_busy_us, v, now, &d_us, &span)) {
                d->has_busy = true;
                d->busy_pct = clamp_pct(100.0 * (double)d_us / (double)span);
        }
        d->has_mem_used = sysfs_read_u64_at(dev_fd, "npu_memory_utilization", &d->mem_used_bytes) == 0;
        if (sysfs_read_u64_at(dev_fd, "npu_current_frequency_mhz", &v) == 0) {
                d->has_freq = true;
                d->freq_mhz = (double)v;
        }
        if (sysfs_read_u64_at(dev_fd, "npu_max_frequency_mhz", &v) == 0) {
                d->has_freq_max = true;
                d->freq_max_mhz = (double)v;
        }
}

/* Identity only: amdxdna (no counters in sysfs, only device_type, vbnv,
 * fw_version), nvidia-drm (NVML's), virtual and display-only cards. */
static const struct driver generic_driver = { .name = "" };

static const struct driver drivers[] = {
        { .name = "amdgpu", .read = amdgpu_read },
        { .name = "i915", .probe = i915_probe, .read = i915_read },
        { .name = "xe", .probe = xe_probe, .read = xe_read },
        { .name = "intel_vpu", .read = npu_read },
};

static const struct driver *driver_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(drivers); i++)
                if (streq(drivers[i].name, name))
                        return &drivers[i];
        return &generic_driver;
}

/* ---- one device --------------------------------------------------------- */

/* A (re)bound driver: identity from DEV, state from zero. */
static void device_bind(struct gpudev *g, const char *driver, int dev_fd, int card_fd) {
        struct gpu_device *d = &g->d;
        char buf[16];

        copy_str(d->driver, sizeof d->driver, driver);
        g->drv = driver_find(driver);
        /* "0x1002\n", "0x744c\n" */
        d->vendor[0] = d->model[0] = 0;
        if (sysfs_read_str_at(dev_fd, "vendor", buf, sizeof buf) == 0 && strlen(buf) < sizeof d->vendor)
                copy_str(d->vendor, sizeof d->vendor, buf);
        if (sysfs_read_str_at(dev_fd, "device", buf, sizeof buf) == 0 && strlen(buf) < sizeof d->model)
                copy_str(d->model, sizeof d->model, buf);

        g->hwmon[0] = 0;
        g->n_gts = 0;
        g->npu_busy_us = g->energy_uj = (struct counter){};
        g->has_prev_power = false;
        g->has_energy = false;
        g->energy_j = 0;
        if (g->drv->probe)
                g->drv->probe(g, dev_fd, card_fd);
}

/* "active", "suspended", "suspending", "resuming", "error", "unsupported". */
static bool runtime_suspended(int dev_fd) {
        char buf[16];
        return sysfs_read_str_at(dev_fd, "power/runtime_status", buf, sizeof buf) == 0 && streq(buf, "suspended");
}

static void device_read(struct gpudev *g, int dev_fd, int card_fd, usec_t now) {
        struct gpu_device *d = &g->d, fresh = {};

        copy_str(fresh.id, sizeof fresh.id, d->id);
        copy_str(fresh.driver, sizeof fresh.driver, d->driver);
        copy_str(fresh.kind, sizeof fresh.kind, d->kind);
        copy_str(fresh.node, sizeof fresh.node, d->node);
        copy_str(fresh.vendor, sizeof fresh.vendor, d->vendor);
        copy_str(fresh.model, sizeof fresh.model, d->model);
        *d = fresh;

        d->suspended = runtime_suspended(dev_fd);
        if (d->suspended && streq(d->kind, "gpu") && g->drv->read) {
                /* idle by definition; reading the counters would wake it
                 * (i915, xe and older amdgpu resume the device to answer),
                 * and the residency counters are not trusted across a
                 * suspension: the first sample after it is unknown */
                d->has_busy = true;
                d->busy_pct = 0;
                d->n_gts = g->n_gts;
                for (size_t i = 0; i < g->n_gts; i++) {
                        copy_str(d->gts[i].name, sizeof d->gts[i].name, g->gts[i].name);
                        d->gts[i].has_busy = true;
                        d->gts[i].busy_pct = 0;
                        g->gts[i].idle_ms.has = false;
                }
                g->has_prev_power = false;
        } else if (g->drv->read)
                g->drv->read(g, dev_fd, card_fd, now);

        d->has_energy = g->has_energy;
        d->energy_j = g->energy_j;
}

/* ---- the set ------------------------------------------------------------ */

static void device_free(struct gpudev *g) {
        free(g);
}

void gpudev_set_free(struct gpudev_set *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n_devs; i++)
                device_free(s->devs[i]);
        free(s->devs);
        free(s->nodes);
        free(s->root);
        free(s);
}

int gpudev_set_root(struct gpudev_set *s, const char *sys_root) {
        return sysfs_root_set(&s->root, sys_root);
}

int gpudev_set_new(const char *sys_root, struct gpudev_set **ret) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = calloc(1, sizeof *s);
        int r;

        if (!s)
                return -ENOMEM;
        r = gpudev_set_root(s, sys_root);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

static struct gpudev *find_by_devname(const struct gpudev_set *s, const char *devname) {
        for (size_t i = 0; i < s->n_devs; i++)
                if (streq(s->devs[i]->devname, devname))
                        return s->devs[i];
        return NULL;
}

static int node_add(struct gpudev_set *s, const char *node, const char *devname) {
        if (!GREEDY_REALLOC(s->nodes, s->n_nodes + 1))
                return -ENOMEM;
        struct node_entry *e = &s->nodes[s->n_nodes++];
        copy_str(e->node, sizeof e->node, node);
        copy_str(e->devname, sizeof e->devname, devname);
        e->id[0] = 0;
        return 0;
}

static struct gpudev *device_add(struct gpudev_set *s, const char *devname, const char *node, const char *kind) {
        struct gpudev *g;

        if (!GREEDY_REALLOC(s->devs, s->n_devs + 1))
                return NULL;
        g = calloc(1, sizeof *g);
        if (!g)
                return NULL;
        copy_str(g->devname, sizeof g->devname, devname);
        /* named by PCI address where it has one (what drm-pdev says), else
         * by its node */
        copy_str(g->d.id, sizeof g->d.id, gpudev_is_pci_address(devname) ? devname : node);
        copy_str(g->d.kind, sizeof g->d.kind, kind);
        s->devs[s->n_devs++] = g;
        return g;
}

/* One node of class/drm or class/accel (class_fd): the device behind it is
 * found or added, marked seen and read. Render nodes are only mapped. */
static int scan_node(struct gpudev_set *s, int class_fd, const char *node, const char *kind, bool render, usec_t now) {
        _cleanup_close_ int dev_fd = -1, card_fd = -1;
        char path[GPU_NAME_MAX + 16], devname[GPU_ID_MAX], driver[GPU_NAME_MAX];
        struct gpudev *g;
        int r;

        if ((size_t)snprintf(path, sizeof path, "%s/device", node) >= sizeof path)
                return 0; /* is_node() keeps names shorter */
        if (readlink_basename_at(class_fd, path, devname, sizeof devname) < 0)
                return 0; /* gone since the readdir, or a node without a device */
        r = node_add(s, node, devname);
        if (r < 0 || render)
                return r;

        g = find_by_devname(s, devname);
        if (g && g->seen)
                return 0; /* a second node of one device: the first one speaks for it */
        dev_fd = openat(class_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        card_fd = openat(class_fd, node, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dev_fd < 0 || card_fd < 0)
                return 0;
        if (read_driver(dev_fd, driver) < 0)
                driver[0] = 0;

        if (!g) {
                g = device_add(s, devname, node, kind);
                if (!g)
                        return -ENOMEM;
                copy_str(g->d.node, sizeof g->d.node, node);
                device_bind(g, driver, dev_fd, card_fd);
                log_info("%s %s appeared (%s, %s%s%s%s%s)", kind, g->d.id, node, driver[0] ? driver : "no driver",
                         g->d.vendor[0] ? " " : "", g->d.vendor, g->d.vendor[0] ? ":" : "", g->d.model);
        } else if (!streq(driver, g->d.driver) || !streq(node, g->d.node)) {
                log_info("%s %s is now %s, %s (was %s, %s)", kind, g->d.id, node, driver[0] ? driver : "no driver",
                         g->d.node, g->d.driver[0] ? g->d.driver : "no driver");
                copy_str(g->d.node, sizeof g->d.node, node);
                device_bind(g, driver, dev_fd, card_fd);
        }
        g->seen = true;
        device_read(g, dev_fd, card_fd, now);
        return 0;
}

/* SYS/class/<class>: every node named prefix N (and renderD N for drm). */
static int scan_class(struct gpudev_set *s, const char *class, const char *kind, usec_t now) {
        _cleanup_closedir_ DIR *dir = NULL;
        char path[PATH_MAX];
        struct dirent *de;
        bool drm = streq(class, "drm");
        int r = 0;

        if ((size_t)snprintf(path, sizeof path, "%s/class/%s", s->root, class) >= sizeof path)
                return -ENAMETOOLONG;
        dir = opendir(path);
        if (!dir)
                return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
        while ((de = readdir(dir))) {
                bool render = drm && is_node(de->d_name, "renderD");
                if (!render && !is_node(de->d_name, drm ? "card" : "accel"))
                        continue;
                r = scan_node(s, dirfd(dir), de->d_name, kind, render, now);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cmp_dev(const void *a, const void *b) {
        const struct gpudev *x = *(const struct gpudev *const *)a, *y = *(const struct gpudev *const *)b;
        return strcmp(x->d.id, y->d.id);
}

int gpudev_sample(struct gpudev_set *s, usec_t now_usec) {
        int r, q;
        size_t k = 0;

        for (size_t i = 0; i < s->n_devs; i++)
                s->devs[i]->seen = false;
        s->n_nodes = 0;
        r = scan_class(s, "drm", "gpu", now_usec);
        q = scan_class(s, "accel", "npu", now_usec);
        if (r >= 0)
                r = q;

        for (size_t i = 0; i < s->n_devs; i++) {
                struct gpudev *g = s->devs[i];
                if (g->seen) {
                        s->devs[k++] = g;
                        continue;
                }
                log_info("%s %s (%s, %s) is gone", g->d.kind, g->d.id, g->d.node, g->d.driver);
                device_free(g);
        }
        s->n_devs = k;
        if (s->n_devs > 1)
                sort_array(s->devs, s->n_devs, sizeof *s->devs, cmp_dev);

        /* render nodes name their card's device */
        for (size_t i = 0; i < s->n_nodes; i++) {
                struct node_entry *e = &s->nodes[i];
                const struct gpudev *g = find_by_devname(s, e->devname);
                if (g)
                        copy_str(e->id, sizeof e->id, g->d.id);
                else if (gpudev_is_pci_address(e->devname))
                        copy_str(e->id, sizeof e->id, e->devname);
        }
        return r < 0 ? r : (int)s->n_devs;
}

size_t gpudev_count(const struct gpudev_set *s) {
        return s->n_devs;
}

const struct gpu_device *gpudev_get(const struct gpudev_set *s, size_t i) {
        return i < s->n_devs ? &s->devs[i]->d : NULL;
}

const struct gpu_device *gpudev_find(const struct gpudev_set *s, const char *id) {
        for (size_t i = 0; i < s->n_devs; i++)
                if (streq(s->devs[i]->d.id, id))
                        return &s->devs[i]->d;
        return NULL;
}

const char *gpudev_id_for_node(const struct gpudev_set *s, const char *node) {
        const char *base;

        if (!node)
                return NULL;
        base = strrchr(node, '/');
        base = base ? base + 1 : node;
        for (size_t i = 0; i < s->n_nodes; i++)
                if (streq(s->nodes[i].node, base))
                        return s->nodes[i].id[0] ? s->nodes[i].id : NULL;
        return NULL;
}

/* SPDX-License-Identifier: MIT */
/* CPU package energy from the powercap RAPL tree; see rapl.h.
 *
 *   SYS/class/powercap/intel-rapl:0 -> ../../devices/virtual/powercap/intel-rapl/intel-rapl:0
 *   .../intel-rapl:0/name                 "package-0\n"
 *   .../intel-rapl:0/energy_uj            "11671150\n"      µJ, wraps to 0 past the range
 *   .../intel-rapl:0/max_energy_range_uj  "262143328850\n"  the largest value energy_uj holds
 *
 * The class directory is listed at each sample (a readdir of a handful of
 * entries); a zone's name and range are read once, when it is first seen. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "collect/accel/rapl.h"
#include "collect/accel/sysfs.h"

struct zone {
        struct rapl_zone_info info;
        bool seen;
        bool top;              /* intel-rapl:N, not a sub-zone nor mmio */
        uint64_t max_range_uj; /* 0: unknown */
        bool has_prev;
        uint64_t prev_uj;
        usec_t prev_usec;
};

struct rapl {
        char *root;
        struct zone *zones;
        size_t n;
        bool has_last; /* the previous sample's time */
        usec_t last_usec;
        bool has_energy;
        double energy_j;
        bool warned_unreadable;
};

bool rapl_counter_delta_uj(uint64_t old_uj, uint64_t new_uj, uint64_t max_range_uj, uint64_t *ret_delta_uj) {
        if (new_uj >= old_uj) {
                if (max_range_uj && new_uj > max_range_uj)
                        return false;
                *ret_delta_uj = new_uj - old_uj;
                return true;
        }
        /* wrapped: the rest of the range, then new from 0. The true value is
         * one counter unit (~61 µJ) more, since max_range is the largest
         * value the counter holds rather than the modulus; that is noise. */
        if (max_range_uj == 0 || old_uj > max_range_uj)
                return false;
        *ret_delta_uj = (max_range_uj - old_uj) + new_uj;
        return true;
}

bool energy_cpu_share_j(double pkg_delta_j, uint64_t run_cpu_delta_ns, uint64_t host_busy_delta_ns, double *ret_j) {
        double share;

        if (host_busy_delta_ns == 0 || !isfinite(pkg_delta_j) || pkg_delta_j < 0)
                return false;
        share = (double)run_cpu_delta_ns / (double)host_busy_delta_ns;
        *ret_j = pkg_delta_j * (share > 1 ? 1 : share);
        return true;
}

void rapl_free(struct rapl *r) {
        if (!r)
                return;
        free(r->zones);
        free(r->root);
        free(r);
}

int rapl_set_root(struct rapl *r, const char *sys_root) {
        return sysfs_root_set(&r->root, sys_root);
}

int rapl_new(const char *sys_root, struct rapl **ret) {
        _cleanup_(rapl_freep) struct rapl *r = calloc(1, sizeof *r);
        int q;

        if (!r)
                return -ENOMEM;
        q = rapl_set_root(r, sys_root);
        if (q < 0)
                return q;
        *ret = TAKE_PTR(r);
        return 0;
}

/* "intel-rapl:0" (top), "intel-rapl:0:1", "intel-rapl-mmio:0": the prefix,
 * then numbers separated by ':'. */
static bool zone_entry(const char *name, bool *ret_top) {
        const char *p;
        unsigned colons = 0;

        if (startswith(name, "intel-rapl:"))
                p = name + strlen("intel-rapl:");
        else if (startswith(name, "intel-rapl-mmio:"))
                p = name + strlen("intel-rapl-mmio:");
        else
                return false;
        if (strlen(name) >= sizeof((struct rapl_zone_info *)NULL)->entry)
                return false;
        for (bool digit = false; *p; p++) {
                if (*p >= '0' && *p <= '9')
                        digit = true;
                else if (*p == ':' && digit) {
                        colons++;
                        digit = false;
                } else
                        return false;
                if (!p[1] && !digit)
                        return false;
        }
        *ret_top = startswith(name, "intel-rapl:") && colons == 0;
        return true;
}

static int zone_add(struct rapl *r, int class_fd, const char *entry, bool top) {
        struct zone *z;
        char path[64];

        if (!GREEDY_REALLOC(r->zones, r->n + 1))
                return -ENOMEM;
        z = &r->zones[r->n++];
        *z = (struct zone){ .top = top, .seen = true };
        snprintf(z->info.entry, sizeof z->info.entry, "%s", entry);
        snprintf(path, sizeof path, "%s/name", entry);
        if (sysfs_read_str_at(class_fd, path, z->info.name, sizeof z->info.name) < 0)
                z->info.name[0] = 0;
        snprintf(path, sizeof path, "%s/max_energy_range_uj", entry);
        if (sysfs_read_u64_at(class_fd, path, &z->max_range_uj) < 0)
                z->max_range_uj = 0;
        /* a package: not psys (which contains the packages), not a sub-zone
         * (a part of one), not the mmio interface's copy of one */
        z->info.counted = top && startswith(z->info.name, "package-");
        return 0;
}

static int cmp_zone(const void *a, const void *b) {
        return strcmp(((const struct zone *)a)->info.entry, ((const struct zone *)b)->info.entry);
}

/* Lists SYS/class/powercap: zones are added and dropped; returns the
 * class directory's fd for reading them, or -errno (-ENOENT: no RAPL). */
static int zones_scan(struct rapl *r) {
        _cleanup_closedir_ DIR *dir = NULL;
        char path[PATH_MAX];
        struct dirent *de;
        size_t k = 0;
        int q, fd;

        if ((size_t)snprintf(path, sizeof path, "%s/class/powercap", r->root) >= sizeof path)
                return -ENAMETOOLONG;
        dir = opendir(path);
        if (!dir)
                return -errno;
        for (size_t i = 0; i < r->n; i++)
                r->zones[i].seen = false;
        while ((de = readdir(dir))) {
                bool top, found = false;

                if (!zone_entry(de->d_name, &top))
                        continue;
                for (size_t i = 0; i < r->n && !found; i++)
                        if (streq(r->zones[i].info.entry, de->d_name))
                                found = r->zones[i].seen = true;
                if (!found) {
                        q = zone_add(r, dirfd(dir), de->d_name, top);
                        if (q < 0)
                                return q;
                }
        }
        for (size_t i = 0; i < r->n; i++)
                if (r->zones[i].seen)
                        r->zones[k++] = r->zones[i];
        r->n = k;
        if (r->n > 1)
                sort_array(r->zones, r->n, sizeof *r->zones, cmp_zone);

        fd = dup(dirfd(dir));
        return fd < 0 ? -errno : fd;
}

/* One zone's energy at now: its last interval, or unknown. */
static void zone_read(struct rapl *r, struct zone *z, int class_fd, usec_t now) {
        char path[64];
        uint64_t uj, d_uj;
        int q;

        z->info.has_delta = false;
        snprintf(path, sizeof path, "%s/energy_uj", z->info.entry);
        q = sysfs_read_u64_at(class_fd, path, &uj);
        if (q < 0) {
                if ((q == -EACCES || q == -EPERM) && !r->warned_unreadable) {
                        r->warned_unreadable = true;
                        log_warning_errno(q,
                                          "cannot read %s/class/powercap/%s: %m; CPU energy is unknown "
                                          "(energy_uj is root-only: mlmond needs CAP_DAC_READ_SEARCH)",
                                          r->root, path);
                }
                z->has_prev = false;
                return;
        }

        if (z->has_prev && now > z->prev_usec && rapl_counter_delta_uj(z->prev_uj, uj, z->max_range_uj, &d_uj)) {
                double span_s = (double)(now - z->prev_usec) / 1e6, j = (double)d_uj / 1e6;

                if (j > 2 * RAPL_PACKAGE_MAX_W * span_s)
                        log_debug("RAPL %s: %.0f J in %.3f s is implausible (a reset?); interval dropped",
                                  z->info.entry, j, span_s);
                else if (z->max_range_uj && RAPL_PACKAGE_MAX_W * span_s >= (double)z->max_range_uj / 1e6)
                        log_debug("RAPL %s: %.3f s between samples may hide a second wrap; interval dropped",
                                  z->info.entry, span_s);
                else {
                        z->info.has_delta = true;
                        z->info.delta_j = j;
                }
        }
        if (!z->has_prev || now > z->prev_usec) {
                z->has_prev = true;
                z->prev_uj = uj;
                z->prev_usec = now;
        }
}

bool rapl_sample(struct rapl *r, usec_t now_usec, double *ret_delta_j, double *ret_power_w) {
        _cleanup_close_ int class_fd = -1;
        bool all = true, known;
        unsigned packages = 0;
        double sum = 0;

        class_fd = zones_scan(r);
        if (class_fd < 0) {
                r->n = 0;
                class_fd = -1;
        }
        for (size_t i = 0; i < r->n; i++) {
                struct zone *z = &r->zones[i];
                /* a package counts only over the same interval as the rest */
                bool was_last = r->has_last && z->has_prev && z->prev_usec == r->last_usec;

                zone_read(r, z, class_fd, now_usec);
                if (!z->info.counted)
                        continue;
                packages++;
                if (z->info.has_delta && was_last)
                        sum += z->info.delta_j;
                else
                        all = false;
        }

        known = r->has_last && now_usec > r->last_usec && packages > 0 && all;
        if (known) {
                r->has_energy = true;
                r->energy_j += sum;
                *ret_delta_j = sum;
                *ret_power_w = sum / ((double)(now_usec - r->last_usec) / 1e6);
        }
        if (!r->has_last || now_usec > r->last_usec) {
                r->has_last = true;
                r->last_usec = now_usec;
        }
        return known;
}

bool rapl_energy_j(const struct rapl *r, double *ret_j) {
        if (!r->has_energy)
                return false;
        *ret_j = r->energy_j;
        return true;
}

size_t rapl_zone_count(const struct rapl *r) {
        return r->n;
}

const struct rapl_zone_info *rapl_zone(const struct rapl *r, size_t i) {
        return i < r->n ? &r->zones[i].info : NULL;
}

/* SPDX-License-Identifier: MIT */
/* What one gpudev_sample() and one rapl_sample() cost over a sysfs tree
 * (the fixture's tests/fixtures/gpu/t1/sys, or the real /sys), and what
 * resolving a node's device costs by readlink (what gpudev does) against
 * realpath. Prints figures; asserts nothing.
 *
 * Usage: gpudev-bench SYS_ROOT [ITERATIONS] */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/accel/gpudev.h"
#include "collect/accel/rapl.h"

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* readlink + realpath of every node's device link in SYS/class/<class>. */
static void resolve_cost(const char *root, const char *class, unsigned n) {
        char dir[PATH_MAX], path[PATH_MAX], target[PATH_MAX], resolved[PATH_MAX];
        struct dirent *de;
        DIR *d;

        if ((size_t)snprintf(dir, sizeof dir, "%s/class/%s", root, class) >= sizeof dir)
                return;
        d = opendir(dir);
        if (!d)
                return;
        while ((de = readdir(d))) {
                double t0, t1, t2;
                if (de->d_name[0] == '.' ||
                    (size_t)snprintf(path, sizeof path, "%s/%s/device", dir, de->d_name) >= sizeof path)
                        continue;
                if (readlink(path, target, sizeof target) < 0)
                        continue;
                t0 = now_s();
                for (unsigned i = 0; i < n; i++)
                        if (readlink(path, target, sizeof target) < 0)
                                break;
                t1 = now_s();
                for (unsigned i = 0; i < n; i++)
                        if (!realpath(path, resolved))
                                break;
                t2 = now_s();
                printf("  %-12s readlink %6.2f us   realpath %6.2f us\n", de->d_name, (t1 - t0) / n * 1e6,
                       (t2 - t1) / n * 1e6);
        }
        closedir(d);
}

int main(int argc, char **argv) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = NULL;
        _cleanup_(rapl_freep) struct rapl *r = NULL;
        unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 20000;
        double t0, t1, j, w;
        int k = 0;

        if (argc < 2 || n == 0) {
                fprintf(stderr, "usage: gpudev-bench SYS_ROOT [ITERATIONS]\n");
                return 2;
        }
        log_set_max_level(LOG_WARNING);
        if (gpudev_set_new(argv[1], &s) < 0 || rapl_new(argv[1], &r) < 0)
                return 1;

        k = gpudev_sample(s, USEC_PER_SEC);
        t0 = now_s();
        for (unsigned i = 0; i < n; i++)
                k = gpudev_sample(s, (usec_t)(i + 2) * USEC_PER_SEC);
        t1 = now_s();
        printf("gpudev_sample: %d devices, %.1f us per call (%u calls)\n", k, (t1 - t0) / n * 1e6, n);

        (void)rapl_sample(r, USEC_PER_SEC, &j, &w);
        t0 = now_s();
        for (unsigned i = 0; i < n; i++)
                (void)rapl_sample(r, (usec_t)(i + 2) * USEC_PER_SEC, &j, &w);
        t1 = now_s();
        printf("rapl_sample: %zu zones, %.1f us per call\n", rapl_zone_count(r), (t1 - t0) / n * 1e6);

        printf("resolving a node's device:\n");
        resolve_cost(argv[1], "drm", n);
        resolve_cost(argv[1], "accel", n);
        return 0;
}

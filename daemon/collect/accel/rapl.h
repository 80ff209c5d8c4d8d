/* SPDX-License-Identifier: MIT */
/* CPU package energy from the powercap RAPL tree, and the per-run share of
 * it (an estimate: state it as one wherever it is shown).
 *
 *   SYS/class/powercap/intel-rapl:0      name "package-0"  <- counted
 *   SYS/class/powercap/intel-rapl:0:0    name "core"       inside package-0
 *   SYS/class/powercap/intel-rapl:0:1    name "uncore"     inside package-0 (the iGPU)
 *   SYS/class/powercap/intel-rapl:0:2    name "dram"       server parts
 *   SYS/class/powercap/intel-rapl:1      name "psys"       whole platform (laptops)
 *   SYS/class/powercap/intel-rapl-mmio:0 name "package-0"  the same package through MMIO
 *
 * Only top-level zones named package-N are summed: sub-zones are parts of a
 * package (dram, where present, is read but not counted: the figure is CPU
 * package energy), psys contains the packages, and intel-rapl-mmio repeats
 * one. AMD Zen shows up under the same intel-rapl names on recent kernels.
 *
 * energy_uj is root-only (mode 0400) since the PLATYPUS mitigation
 * (CVE-2020-8694); without CAP_DAC_READ_SEARCH the energy is unknown and
 * said so once in the log. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The plausibility bound for one package, in watts. The hungriest shipping
 * server parts are rated 500 W (EPYC 9965, Xeon 6980P) and may draw more
 * for short bursts, so 1000 W is generous. An interval whose energy exceeds
 * 2 x this x the interval is dropped (a reset or a missed wrap), and so is
 * one long enough for the counter to wrap twice at this power
 * (max_energy_range_uj / 1000 W: 262 s for the usual 262 kJ range). */
#define RAPL_PACKAGE_MAX_W 1000.0

struct rapl;

/* sys_root: where sysfs is mounted ("/sys"; NULL or "" mean "/sys"). Zones
 * are found at each sample, so none existing yet is not an error. */
int rapl_new(const char *sys_root, struct rapl **ret);
void rapl_free(struct rapl *r);
static inline void rapl_freep(struct rapl **r) {
        rapl_free(*r);
}
/* Reads from another root from now on; the counters keep their baselines
 * (zones are matched by their entry name). For fixture snapshots. */
int rapl_set_root(struct rapl *r, const char *sys_root);

/* Reads every zone at now_usec (CLOCK_MONOTONIC). Returns true and the
 * packages' energy since the previous sample and its mean power when every
 * package's interval is known; false on the first sample, with no package
 * zone, or when any package's interval is unknown (unreadable, backwards
 * beyond a wrap, implausible): a partial sum would read as a drop in power.
 * Outputs are written only when true. */
bool rapl_sample(struct rapl *r, usec_t now_usec, double *ret_delta_j, double *ret_power_w);
/* Package energy summed over the known intervals since rapl_new(). False
 * while no interval has been known. */
bool rapl_energy_j(const struct rapl *r, double *ret_j);

/* Every zone the last sample saw, packages, sub-zones, psys and mmio alike,
 * for inspection and tests; counted = summed into the package figure. */
struct rapl_zone_info {
        char entry[32]; /* "intel-rapl:0:1" */
        char name[32];  /* "uncore"; "" when unreadable */
        bool counted;
        bool has_delta;
        double delta_j; /* the last interval */
};
size_t rapl_zone_count(const struct rapl *r);
const struct rapl_zone_info *rapl_zone(const struct rapl *r, size_t i);

/* The counter step, wrap handled: new - old, or (max_range - old) + new when
 * the counter went down. False when the values cannot come from one counter
 * (old or new above max_range, or max_range unknown (0) and new < old).
 * Pure; exposed for tests. */
bool rapl_counter_delta_uj(uint64_t old_uj, uint64_t new_uj, uint64_t max_range_uj, uint64_t *ret_delta_uj);

/* A run's share of the package energy over one interval, the active share:
 * package energy x run CPU time / host busy CPU time (every CPU's busy time
 * from /proc/stat's "cpu " line, see proc_read_host_cpu()). Any one time
 * unit does for both (ticks x 1e9 / USER_HZ for ns). The share is capped at
 * 1 (the two are read at slightly different instants). False, with *ret_j
 * untouched, when host busy time is 0 or the package energy is not a
 * finite non-negative number. */
bool energy_cpu_share_j(double pkg_delta_j, uint64_t run_cpu_delta_ns, uint64_t host_busy_delta_ns, double *ret_j);

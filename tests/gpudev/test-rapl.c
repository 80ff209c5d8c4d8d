/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/collect/accel/rapl.c (package energy): the fixture
 * snapshots of tests/fixtures/gpu sampled at t0 = 1000 s, t1 = 1001 s,
 * t2 = 1002 s (a wrap between t0 and t1), a process's CPU share of it, and
 * trees built in a temporary directory: sub-zones, psys and mmio not
 * counted, wraps that cannot be trusted, unreadable and vanishing zones.
 *
 * Usage: test-rapl [FIXTURES_DIR]   (tests/fixtures/gpu; exits 77 when it
 * is missing and every other check passed) */
#include <inttypes.h>
#include <math.h>

#include "collect/accel/rapl.h"
#include "collect/procfs-host.h"
#include "collect/procfs.h"
#include "sysfs-tree.h"

/* Snapshot snap read at `seconds`, one second after the previous one:
 * want_j since then (so as many watts), total_j in all. */
static void fixture_rapl_step(struct rapl *r, const char *snap, unsigned seconds, double want_j, double total_j) {
        char root[PATH_MAX];
        double j = -1, w = -1, total = -1;

        fixture_sys(snap, root, sizeof root);
        CHECK_EQ_INT(rapl_set_root(r, root), 0);
        CHECK(rapl_sample(r, T(seconds), &j, &w));
        CHECK_NEAR(j, want_j);
        CHECK_NEAR(w, want_j);
        CHECK(rapl_energy_j(r, &total));
        CHECK_NEAR(total, total_j);
}

static void test_fixture_rapl(void) {
        _cleanup_(rapl_freep) struct rapl *r = NULL;
        char root[PATH_MAX];
        double j = -1, w = -1, total;

        fixture_sys("t0", root, sizeof root);
        CHECK_EQ_INT(rapl_new(root, &r), 0);
        CHECK(!rapl_sample(r, T(1000), &j, &w)); /* first sample: unknown */
        CHECK(j == -1 && w == -1);
        CHECK(!rapl_energy_j(r, &total));

        /* t1: the package wraps: (262143328850 - 262140000000) + 11671150 µJ */
        fixture_rapl_step(r, "t1", 1001, 15.0, 15.0);

        /* core 7.0 J and uncore 3.5 J are inside the package, psys (25 W)
         * contains it: read, not added */
        CHECK_EQ_INT(rapl_zone_count(r), 4);
        for (size_t i = 0; i < rapl_zone_count(r); i++) {
                const struct rapl_zone_info *z = rapl_zone(r, i);
                CHECK(z->has_delta);
                if (streq(z->entry, "intel-rapl:0")) {
                        CHECK_STR(z->name, "package-0");
                        CHECK(z->counted);
                        CHECK_NEAR(z->delta_j, 15.0);
                } else if (streq(z->entry, "intel-rapl:0:0")) {
                        CHECK_STR(z->name, "core");
                        CHECK(!z->counted);
                        CHECK_NEAR(z->delta_j, 7.0);
                } else if (streq(z->entry, "intel-rapl:0:1")) {
                        CHECK_STR(z->name, "uncore");
                        CHECK(!z->counted);
                        CHECK_NEAR(z->delta_j, 3.5);
                } else if (streq(z->entry, "intel-rapl:1")) {
                        CHECK_STR(z->name, "psys");
                        CHECK(!z->counted);
                        CHECK_NEAR(z->delta_j, 25.0);
                } else
                        CHECK(!"unexpected zone");
        }
        CHECK(rapl_zone(r, 4) == NULL);

        /* t2: no wrap, 15 J again */
        fixture_rapl_step(r, "t2", 1002, 15.0, 30.0);
}

/* pid 4242's share of the t0 -> t1 package energy: 150 ticks of 600 busy */
static void test_fixture_cpu_share(void) {
        static const char *const snapshots[] = { "t0", "t1" };
        uint64_t busy[2], cpu[2];
        double j = -1;

        for (size_t i = 0; i < ELEMENTSOF(snapshots); i++) {
                struct proc_cpu_total c = {};
                struct proc_stat s = {};
                char path[PATH_MAX];

                xsprintf(path, "%s/%s/proc", fixtures, snapshots[i]);
                CHECK_EQ_INT(proc_read_host_cpu(path, &c), 0);
                int fd = proc_open_pid_dir(path, 4242);
                CHECK(fd >= 0);
                CHECK_EQ_INT(proc_read_stat(fd, &s), 0);
                safe_close(fd);
                busy[i] = c.user + c.nice + c.system + c.irq + c.softirq + c.steal;
                cpu[i] = s.utime_ticks + s.stime_ticks;
        }

        CHECK_EQ_INT(cpu[1] - cpu[0], 150);
        CHECK_EQ_INT(busy[1] - busy[0], 600);
        /* ticks -> ns at USER_HZ 100; the ratio is what matters */
        CHECK(energy_cpu_share_j(15.0, (cpu[1] - cpu[0]) * 10000000, (busy[1] - busy[0]) * 10000000, &j));
        CHECK_NEAR(j, 3.75);
}

/* ---- RAPL in a temporary tree ------------------------------------------- */

#define RAPL_DIR "sys/devices/virtual/powercap/intel-rapl/"

static void add_zone(const char *entry, const char *parent, const char *name, const char *max) {
        char rel[PATH_MAX], target[PATH_MAX];
        const char *sub = parent ? parent : "";

        xsprintf(rel, RAPL_DIR "%s%s%s/name", sub, parent ? "/" : "", entry);
        putf(rel, "%s\n", name);
        xsprintf(rel, RAPL_DIR "%s%s%s/max_energy_range_uj", sub, parent ? "/" : "", entry);
        putf(rel, "%s\n", max);
        xsprintf(rel, "sys/class/powercap/%s", entry);
        xsprintf(target, "../../devices/virtual/powercap/intel-rapl/%s%s%s", sub, parent ? "/" : "", entry);
        link_at(rel, target);
}

static void set_energy(const char *entry, const char *parent, uint64_t uj) {
        char rel[PATH_MAX];
        xsprintf(rel, RAPL_DIR "%s%s%s/energy_uj", parent ? parent : "", parent ? "/" : "", entry);
        putf(rel, "%" PRIu64 "\n", uj);
}

static const struct rapl_zone_info *zone_named(const struct rapl *r, const char *entry) {
        for (size_t i = 0; i < rapl_zone_count(r); i++)
                if (streq(rapl_zone(r, i)->entry, entry))
                        return rapl_zone(r, i);
        return NULL;
}

/* Zones found, sub-zones, psys and mmio not counted, a wrap, a step back. */
static void rapl_tmp_zones(struct rapl *r) {
        const struct rapl_zone_info *z;
        double j, w, total;
        const uint64_t max = 262143328850ULL;

        /* two packages, a dram sub-zone, psys, and mmio's copy of package-0 */
        add_zone("intel-rapl:0", NULL, "package-0", "262143328850");
        add_zone("intel-rapl:0:2", "intel-rapl:0", "dram", "65712999613");
        add_zone("intel-rapl:1", NULL, "package-1", "262143328850");
        add_zone("intel-rapl:2", NULL, "psys", "262143328850");
        add_zone("intel-rapl-mmio:0", NULL, "package-0", "262143328850");
        put("sys/class/powercap/intel-rapl-bogus", "");
        set_energy("intel-rapl:0", NULL, 1000000);
        set_energy("intel-rapl:0:2", "intel-rapl:0", 1000000);
        set_energy("intel-rapl:1", NULL, max - 1000000);
        set_energy("intel-rapl:2", NULL, 1000000);
        set_energy("intel-rapl-mmio:0", NULL, 1000000);
        CHECK(!rapl_sample(r, T(10), &j, &w));
        CHECK_EQ_INT(rapl_zone_count(r), 5);

        /* 100 J + 5 J (1 J to the wrap, 4 J after it) over 2 s */
        set_energy("intel-rapl:0", NULL, 101000000);
        set_energy("intel-rapl:0:2", "intel-rapl:0", 21000000);
        set_energy("intel-rapl:1", NULL, 4000000);
        set_energy("intel-rapl:2", NULL, 301000000);
        set_energy("intel-rapl-mmio:0", NULL, 101000000);
        CHECK(rapl_sample(r, T(12), &j, &w));
        CHECK_NEAR(j, 105);
        CHECK_NEAR(w, 52.5);
        z = zone_named(r, "intel-rapl:0:2");
        CHECK(z && !z->counted && z->has_delta);
        CHECK_NEAR(z ? z->delta_j : -1, 20);
        z = zone_named(r, "intel-rapl:2");
        CHECK(z && !z->counted && streq(z->name, "psys"));
        z = zone_named(r, "intel-rapl-mmio:0");
        CHECK(z && !z->counted && streq(z->name, "package-0"));
        z = zone_named(r, "intel-rapl:1");
        CHECK(z && z->counted);
        CHECK_NEAR(z ? z->delta_j : -1, 5);

        /* package-1 went "back" by a little in 1 s: as a wrap that is 262 kJ,
         * a reset or several wraps, not a plausible interval: dropped, and
         * with it the sum (half the packages is no figure) */
        set_energy("intel-rapl:0", NULL, 201000000);
        set_energy("intel-rapl:1", NULL, 3000000);
        j = w = -1;
        CHECK(!rapl_sample(r, T(13), &j, &w));
        CHECK(j == -1 && w == -1);
        z = zone_named(r, "intel-rapl:1");
        CHECK(z && !z->has_delta);
        z = zone_named(r, "intel-rapl:0");
        CHECK(z && z->has_delta);
        /* from the new value on, it counts again */
        set_energy("intel-rapl:0", NULL, 211000000);
        set_energy("intel-rapl:1", NULL, 13000000);
        CHECK(rapl_sample(r, T(14), &j, &w));
        CHECK_NEAR(j, 20);
        CHECK(rapl_energy_j(r, &total));
        CHECK_NEAR(total, 125);
}

/* Long gaps, wraps right after, the same instant twice, unreadable and
 * vanishing zones. */
static void rapl_tmp_failures(struct rapl *r) {
        double j, w;
        const uint64_t max = 262143328850ULL;

        /* a gap long enough for the counter to wrap twice unseen at the
         * bound (262143 J / 1000 W = 262 s): whatever it reads, dropped */
        set_energy("intel-rapl:0", NULL, 221000000);
        set_energy("intel-rapl:1", NULL, 23000000);
        CHECK(!rapl_sample(r, T(14 + 300), &j, &w));
        /* a plausible wrap right after */
        set_energy("intel-rapl:0", NULL, max - 100);
        set_energy("intel-rapl:1", NULL, 33000000);
        CHECK(!rapl_sample(r, T(14 + 301), &j, &w)); /* 262 kJ in 1 s: no */
        set_energy("intel-rapl:0", NULL, 999900);
        set_energy("intel-rapl:1", NULL, 34000000);
        CHECK(rapl_sample(r, T(14 + 302), &j, &w));
        CHECK_NEAR(j, 1 + 1); /* 100 µJ + 999900 µJ, and 1 J */

        /* the same instant twice: unknown, nothing moved */
        CHECK(!rapl_sample(r, T(14 + 302), &j, &w));
        set_energy("intel-rapl:0", NULL, 1999900);
        set_energy("intel-rapl:1", NULL, 35000000);
        CHECK(rapl_sample(r, T(14 + 303), &j, &w));
        CHECK_NEAR(j, 2);

        /* an unreadable package (a directory where energy_uj should be; as
         * root, mode 0400 does not stop us): unknown, no crash */
        rm_rf(RAPL_DIR "intel-rapl:1/energy_uj");
        mkdirs(RAPL_DIR "intel-rapl:1/energy_uj");
        CHECK(!rapl_sample(r, T(14 + 304), &j, &w));
        /* garbage */
        rm_rf(RAPL_DIR "intel-rapl:1/energy_uj");
        put(RAPL_DIR "intel-rapl:1/energy_uj", "lots\n");
        CHECK(!rapl_sample(r, T(14 + 305), &j, &w));
        /* package-1 goes away (offline): package-0 alone from the next interval */
        rm_rf("sys/class/powercap/intel-rapl:1");
        set_energy("intel-rapl:0", NULL, 2999900);
        CHECK(rapl_sample(r, T(14 + 306), &j, &w));
        CHECK_NEAR(j, 1);
        CHECK_EQ_INT(rapl_zone_count(r), 4);

        /* not root: mode 0400 makes it unknown, with one log line */
        if (geteuid() != 0) {
                char path[PATH_MAX];
                xsprintf(path, "%s/" RAPL_DIR "intel-rapl:0/energy_uj", tmp);
                CHECK_EQ_INT(chmod(path, 0), 0);
                CHECK(!rapl_sample(r, T(14 + 307), &j, &w));
                CHECK(!rapl_sample(r, T(14 + 308), &j, &w));
        }
}

static void test_rapl_tmp(void) {
        _cleanup_(rapl_freep) struct rapl *r = NULL;
        char root[PATH_MAX];
        double j, w;

        rm_rf("sys");
        xsprintf(root, "%s/sys", tmp);
        CHECK_EQ_INT(rapl_new(root, &r), 0);
        CHECK(!rapl_sample(r, T(1), &j, &w)); /* no powercap at all */
        CHECK(!rapl_sample(r, T(2), &j, &w));
        CHECK_EQ_INT(rapl_zone_count(r), 0);

        rapl_tmp_zones(r);
        rapl_tmp_failures(r);
        rm_rf("sys");
}

static void test_counter_delta(void) {
        static const struct {
                uint64_t old, new, max;
                bool ok;
                uint64_t delta;
        } cases[] = {
                { 10, 20, 100, true, 10 },
                { 10, 10, 100, true, 0 },
                { 90, 5, 100, true, 15 },
                { 100, 0, 100, true, 0 },
                { 262140000000ULL, 11671150, 262143328850ULL, true, 15000000 },
                { 150, 5, 100, false, 0 }, /* old beyond the range */
                { 5, 150, 100, false, 0 }, /* new beyond the range */
                { 90, 5, 0, false, 0 },    /* a wrap with no known range */
                { 5, 10, 0, true, 5 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint64_t d = 12345;
                bool ok = rapl_counter_delta_uj(cases[i].old, cases[i].new, cases[i].max, &d);
                if (ok != cases[i].ok || (ok && d != cases[i].delta) || (!ok && d != 12345))
                        TAP_FAIL("rapl_counter_delta_uj case %zu: %d %" PRIu64, i, ok, d);
        }
}

static void test_cpu_share(void) {
        double j = -1;

        CHECK(energy_cpu_share_j(15.0, 150, 600, &j));
        CHECK_NEAR(j, 3.75);
        CHECK(energy_cpu_share_j(15.0, 0, 600, &j));
        CHECK_NEAR(j, 0);
        CHECK(energy_cpu_share_j(15.0, 700, 600, &j)); /* read at slightly different instants */
        CHECK_NEAR(j, 15.0);
        j = -1;
        CHECK(!energy_cpu_share_j(15.0, 150, 0, &j));
        CHECK(!energy_cpu_share_j(NAN, 150, 600, &j));
        CHECK(!energy_cpu_share_j(-1, 150, 600, &j));
        CHECK(!energy_cpu_share_j(INFINITY, 150, 600, &j));
        CHECK(j == -1);
}

int main(int argc, char **argv) {
        static const tree_test_fn tests[] = { test_counter_delta, test_cpu_share, test_rapl_tmp };
        static const tree_test_fn fixture_tests[] = { test_fixture_rapl, test_fixture_cpu_share };

        return tree_main(argc, argv, "test-rapl", "t1/sys/class/powercap", tests, ELEMENTSOF(tests), fixture_tests,
                         ELEMENTSOF(fixture_tests));
}

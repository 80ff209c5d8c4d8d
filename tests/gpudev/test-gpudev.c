/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/collect/accel/gpudev.c (sysfs accelerator devices):
 * the fixture snapshots of tests/fixtures/gpu sampled at t0 = 1000 s,
 * t1 = 1001 s, t2 = 1002 s, then trees built in a temporary directory for
 * what the fixture does not show: devices coming and going, a moving hwmon
 * index, missing and garbage files, counters that go back, a suspended GPU.
 *
 * Usage: test-gpudev [FIXTURES_DIR]   (tests/fixtures/gpu; exits 77 when it
 * is missing and every other check passed) */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collect/accel/gpudev.h"
#include "sysfs-tree.h"

static const struct gpu_device *must_find(const struct gpudev_set *s, const char *id) {
        const struct gpu_device *d = gpudev_find(s, id);
        if (!d)
                TAP_FAIL("device %s not found", id);
        return d;
}

/* Samples one snapshot at `seconds` and finds its three devices; false
 * (and a failure counted) when one is missing. */
static bool fixture_sample(struct gpudev_set *s, const char *snap, unsigned seconds, const struct gpu_device **amd,
                           const struct gpu_device **xe, const struct gpu_device **npu) {
        char root[PATH_MAX];

        fixture_sys(snap, root, sizeof root);
        CHECK_EQ_INT(gpudev_set_root(s, root), 0);
        CHECK_EQ_INT(gpudev_sample(s, T(seconds)), 3);
        *amd = must_find(s, "0000:03:00.0");
        *xe = must_find(s, "0000:00:02.0");
        *npu = must_find(s, "0000:00:0b.0");
        return *amd && *xe && *npu;
}

/* ---- the fixture snapshots ---------------------------------------------- */

static void check_identity(const struct gpu_device *d, const char *driver, const char *kind, const char *node,
                           const char *vendor, const char *model) {
        CHECK_STR(d->driver, driver);
        CHECK_STR(d->kind, kind);
        CHECK_STR(d->node, node);
        CHECK_STR(d->vendor, vendor);
        CHECK_STR(d->model, model);
}

/* t0, the first sample: identity, nodes, and the gauges */
static void fixture_t0(struct gpudev_set *s) {
        const struct gpu_device *amd, *xe, *npu;

        if (!fixture_sample(s, "t0", 1000, &amd, &xe, &npu))
                return;
        CHECK_EQ_INT(gpudev_count(s), 3);
        /* sorted by id */
        CHECK_STR(gpudev_get(s, 0)->id, "0000:00:02.0");
        CHECK_STR(gpudev_get(s, 1)->id, "0000:00:0b.0");
        CHECK_STR(gpudev_get(s, 2)->id, "0000:03:00.0");
        CHECK(gpudev_get(s, 3) == NULL);

        check_identity(amd, "amdgpu", "gpu", "card1", "0x1002", "0x744c");
        check_identity(xe, "xe", "gpu", "card0", "0x8086", "0x64a0");
        check_identity(npu, "intel_vpu", "npu", "accel0", "0x8086", "0x643e");

        /* nodes -> devices, for attributing fds */
        CHECK_STR(gpudev_id_for_node(s, "renderD129"), "0000:03:00.0");
        CHECK_STR(gpudev_id_for_node(s, "card1"), "0000:03:00.0");
        CHECK_STR(gpudev_id_for_node(s, "renderD128"), "0000:00:02.0");
        CHECK_STR(gpudev_id_for_node(s, "card0"), "0000:00:02.0");
        CHECK_STR(gpudev_id_for_node(s, "accel0"), "0000:00:0b.0");
        CHECK_STR(gpudev_id_for_node(s, "/dev/dri/renderD129"), "0000:03:00.0");
        CHECK_STR(gpudev_id_for_node(s, "/dev/accel/accel0"), "0000:00:0b.0");
        CHECK(gpudev_id_for_node(s, "renderD130") == NULL); /* pid 7007's card is not in sysfs */
        CHECK(gpudev_id_for_node(s, "null") == NULL);
        CHECK(gpudev_id_for_node(s, NULL) == NULL);

        /* t0, the first sample: gauges are known, rates are not (never 0) */
        CHECK(amd->has_busy);
        CHECK_NEAR(amd->busy_pct, 58);
        CHECK(amd->has_power);
        CHECK_NEAR(amd->power_w, 208);
        CHECK(!amd->has_energy);
        CHECK(!xe->has_busy);
        CHECK_EQ_INT(xe->n_gts, 2);
        CHECK(!xe->gts[0].has_busy);
        CHECK(!xe->gts[1].has_busy);
        CHECK(xe->has_freq);
        CHECK(!npu->has_busy);
        CHECK(npu->has_mem_used);
}

/* t1: rates from t0 */
static void fixture_t1(struct gpudev_set *s) {
        const struct gpu_device *amd, *xe, *npu;

        if (!fixture_sample(s, "t1", 1001, &amd, &xe, &npu))
                return;

        /* AMD: the latest gauge; VRAM 5905580032 of 25753026560 B; power
         * 212 W (power1_average, not power1_input's 215); energy by
         * trapezoid (208 + 212) / 2 x 1 s = 210 J */
        CHECK(amd->has_busy);
        CHECK_NEAR(amd->busy_pct, 61);
        CHECK(amd->has_mem_used && amd->has_mem_total);
        CHECK_EQ_INT(amd->mem_used_bytes, 5905580032LL);
        CHECK_EQ_INT(amd->mem_total_bytes, 25753026560LL);
        CHECK(amd->has_gtt_used && amd->has_gtt_total);
        CHECK_EQ_INT(amd->gtt_used_bytes, 157286400);
        CHECK_EQ_INT(amd->gtt_total_bytes, 16777216000LL);
        CHECK(amd->has_power);
        CHECK_NEAR(amd->power_w, 212);
        CHECK(amd->has_energy);
        CHECK_NEAR(amd->energy_j, 210);
        CHECK(amd->has_temp);
        CHECK_NEAR(amd->temp_c, 61); /* edge */
        CHECK(amd->has_freq);
        CHECK_NEAR(amd->freq_mhz, 2505);
        CHECK(!amd->has_freq_max);
        CHECK(!amd->suspended);
        CHECK_EQ_INT(amd->n_gts, 0);

        /* xe: gt0 100 x (1 - 400/1000) = 60 %, gt1 (media) 5 %; the device
         * is its render/compute GT; 1950 of rp0 2050 MHz */
        CHECK_EQ_INT(xe->n_gts, 2);
        CHECK_STR(xe->gts[0].name, "gt0-rc");
        CHECK(xe->gts[0].has_busy);
        CHECK_NEAR(xe->gts[0].busy_pct, 60);
        CHECK_STR(xe->gts[1].name, "gt1-mc");
        CHECK(xe->gts[1].has_busy);
        CHECK_NEAR(xe->gts[1].busy_pct, 5);
        CHECK(xe->has_busy);
        CHECK_NEAR(xe->busy_pct, 60);
        CHECK(xe->has_freq && xe->has_freq_max);
        CHECK_NEAR(xe->freq_mhz, 1950);
        CHECK_NEAR(xe->freq_max_mhz, 2050);
        CHECK(!xe->has_mem_used);
        CHECK(!xe->has_power); /* an iGPU: no hwmon, its energy is inside RAPL */
        CHECK(!xe->has_energy);

        /* NPU: (12650000 - 12000000) / 1e6 = 65.0 %; 256 MiB; 1950/1950 MHz */
        CHECK(npu->has_busy);
        CHECK_NEAR(npu->busy_pct, 65.0);
        CHECK(npu->has_mem_used);
        CHECK_EQ_INT(npu->mem_used_bytes, 268435456);
        CHECK(!npu->has_mem_total);
        CHECK(npu->has_freq && npu->has_freq_max);
        CHECK_NEAR(npu->freq_mhz, 1950);
        CHECK_NEAR(npu->freq_max_mhz, 1950);
        CHECK(!npu->suspended);
}

/* t2: the NPU is runtime-suspended: idle at 0 MHz, not an error */
static void fixture_t2(struct gpudev_set *s) {
        const struct gpu_device *amd, *xe, *npu;

        if (!fixture_sample(s, "t2", 1002, &amd, &xe, &npu))
                return;
        CHECK(npu->suspended);
        CHECK(npu->has_freq);
        CHECK_NEAR(npu->freq_mhz, 0);
        CHECK(npu->has_busy); /* the busy counter stood still: 0 %, known */
        CHECK_NEAR(npu->busy_pct, 0);
        CHECK(npu->has_mem_used);
        CHECK_EQ_INT(npu->mem_used_bytes, 268435456);
        CHECK_EQ_INT(amd->mem_used_bytes, 4831838208LL);
        CHECK_NEAR(amd->energy_j, 210 + 212); /* power held at 212 W */
        CHECK_NEAR(xe->gts[0].busy_pct, 60);
        CHECK_NEAR(xe->gts[1].busy_pct, 5);
        /* the card 0000:0a:00.0 that pid 7007 uses is not in sysfs */
        CHECK(gpudev_find(s, "0000:0a:00.0") == NULL);
}

static void test_fixture_devices(void) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = NULL;

        CHECK_EQ_INT(gpudev_set_new(NULL, &s), 0);
        if (!s)
                return;
        fixture_t0(s);
        fixture_t1(s);
        fixture_t2(s);
}

static void test_fixture_i915(void) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = NULL;
        const struct gpu_device *d;
        char root[PATH_MAX];

        fixture_sys("i915-t0", root, sizeof root);
        CHECK_EQ_INT(gpudev_set_new(root, &s), 0);
        CHECK(gpudev_sample(s, T(1000)) >= 1);
        d = must_find(s, "0000:00:02.0");
        if (!d)
                return;
        CHECK_STR(d->driver, "i915");
        CHECK(!d->has_busy);

        fixture_sys("i915-t1", root, sizeof root);
        CHECK_EQ_INT(gpudev_set_root(s, root), 0);
        CHECK(gpudev_sample(s, T(1001)) >= 1);
        d = must_find(s, "0000:00:02.0");
        if (!d)
                return;
        /* rc6 400000 -> 400700 ms over 1000 ms: 30 % busy */
        CHECK(d->has_busy);
        CHECK_NEAR(d->busy_pct, 30);
        CHECK_EQ_INT(d->n_gts, 1);
        CHECK_STR(d->gts[0].name, "gt0");
        CHECK_NEAR(d->gts[0].busy_pct, 30);
        CHECK(d->has_freq && d->has_freq_max);
        CHECK_NEAR(d->freq_mhz, 1300);
        CHECK_NEAR(d->freq_max_mhz, 2250);
        CHECK_STR(gpudev_id_for_node(s, "renderD128"), "0000:00:02.0");
}

#define DEV "sys/devices/pci0000:00/"

/* A PCI device with a DRM or accel node, laid out as sysfs does. */
static void add_device(const char *bdf, const char *class, const char *node, const char *driver, const char *vendor) {
        char rel[PATH_MAX], target[PATH_MAX];

        xsprintf(rel, DEV "%s/%s/%s/device", bdf, class, node);
        xsprintf(target, "../../../%s", bdf);
        link_at(rel, target);
        xsprintf(rel, "sys/class/%s/%s", class, node);
        xsprintf(target, "../../devices/pci0000:00/%s/%s/%s", bdf, class, node);
        link_at(rel, target);
        if (driver) {
                xsprintf(rel, "sys/bus/pci/drivers/%s", driver);
                mkdirs(rel);
                xsprintf(rel, DEV "%s/driver", bdf);
                xsprintf(target, "../../../bus/pci/drivers/%s", driver);
                link_at(rel, target);
        }
        xsprintf(rel, DEV "%s/vendor", bdf);
        putf(rel, "%s\n", vendor);
        xsprintf(rel, DEV "%s/device", bdf);
        put(rel, "0x1234\n");
}

/* A set over tmp/sys, emptied first: each test builds its own tree there. */
static struct gpudev_set *tmp_set(void) {
        struct gpudev_set *s = NULL;
        char root[PATH_MAX];
        rm_rf("sys");
        xsprintf(root, "%s/sys", tmp);
        CHECK_EQ_INT(gpudev_set_new(root, &s), 0);
        return s;
}

/* Samples the temporary tree at `seconds`, expecting n devices, and returns
 * device id (NULL, a failure counted, when it is not there). */
static const struct gpu_device *sample_find(struct gpudev_set *s, unsigned seconds, int n, const char *id) {
        int k = gpudev_sample(s, T(seconds));
        if (k != n)
                TAP_FAIL("sample at %u s: %d devices, expected %d", seconds, k, n);
        return must_find(s, id);
}

/* Samples the temporary tree at `seconds`: its one device, 0000:03:00.0,
 * with its power unknown and its energy so far, energy_j, kept. */
static void check_power_unknown(struct gpudev_set *s, unsigned seconds, double energy_j) {
        const struct gpu_device *d = sample_find(s, seconds, 1, "0000:03:00.0");
        CHECK(d && !d->has_power && d->has_energy);
        CHECK_NEAR(d ? d->energy_j : -1, energy_j);
}

static void test_appear_disappear(void) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = tmp_set();
        const struct gpu_device *d;

        CHECK_EQ_INT(gpudev_sample(s, T(1)), 0); /* no sysfs class dirs at all */
        mkdirs("sys/class/drm");
        put("sys/class/drm/version", "drm 1.1.0 20060810\n");
        CHECK_EQ_INT(gpudev_sample(s, T(2)), 0);

        add_device("0000:03:00.0", "drm", "card0", "amdgpu", "0x1002");
        put(DEV "0000:03:00.0/gpu_busy_percent", "40\n");
        mkdirs(DEV "0000:03:00.0/drm/card0-DP-1"); /* a connector, not a device */
        link_at("sys/class/drm/card0-DP-1", "../../devices/pci0000:00/0000:03:00.0/drm/card0-DP-1");
        add_device("0000:00:0b.0", "accel", "accel0", "intel_vpu", "0x8086");
        put(DEV "0000:00:0b.0/npu_busy_time_us", "1000000\n");
        CHECK_EQ_INT(gpudev_sample(s, T(3)), 2);
        CHECK_STR(gpudev_id_for_node(s, "card0"), "0000:03:00.0");
        CHECK(gpudev_id_for_node(s, "card0-DP-1") == NULL);
        d = gpudev_find(s, "0000:00:0b.0");
        CHECK(d && !d->has_busy); /* new: first sample */

        put(DEV "0000:00:0b.0/npu_busy_time_us", "1500000\n");
        d = sample_find(s, 4, 2, "0000:00:0b.0");
        CHECK(d && d->has_busy);
        CHECK_NEAR(d ? d->busy_pct : -1, 50);

        /* the AMD card goes (unbound: its node is gone) */
        rm_rf("sys/class/drm/card0");
        CHECK_EQ_INT(gpudev_sample(s, T(5)), 1);
        CHECK(gpudev_find(s, "0000:03:00.0") == NULL);
        CHECK(gpudev_id_for_node(s, "card0") == NULL);
        CHECK(gpudev_find(s, "0000:00:0b.0") != NULL);

        /* the NPU goes and comes back: its state starts over */
        rm_rf("sys/class/accel/accel0");
        CHECK_EQ_INT(gpudev_sample(s, T(6)), 0);
        link_at("sys/class/accel/accel0", "../../devices/pci0000:00/0000:00:0b.0/accel/accel0");
        put(DEV "0000:00:0b.0/npu_busy_time_us", "9000000\n");
        d = sample_find(s, 7, 1, "0000:00:0b.0");
        CHECK(d && !d->has_busy);

        /* and the AMD card comes back as card2 */
        link_at("sys/class/drm/card2", "../../devices/pci0000:00/0000:03:00.0/drm/card2");
        link_at(DEV "0000:03:00.0/drm/card2/device", "../../../0000:03:00.0");
        d = sample_find(s, 8, 2, "0000:03:00.0");
        CHECK(d && streq(d->node, "card2") && d->has_busy);
        CHECK_STR(gpudev_id_for_node(s, "card2"), "0000:03:00.0");
}

static void test_hwmon_index_moves(void) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = tmp_set();
        const struct gpu_device *d;

        add_device("0000:03:00.0", "drm", "card1", "amdgpu", "0x1002");
        /* a decoy: another hwmon of the device with another name */
        PUT_FILES({ DEV "0000:03:00.0/hwmon/hwmon1/name", "amdgpu_other\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon1/power1_average", "999000000\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon2/name", "amdgpu\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon2/power1_average", "100000000\n" });
        d = sample_find(s, 10, 1, "0000:03:00.0");
        CHECK(d && d->has_power);
        CHECK_NEAR(d ? d->power_w : -1, 100);

        /* a driver reload renumbers it: hwmon2 -> hwmon7 */
        do_rename(DEV "0000:03:00.0/hwmon/hwmon2", DEV "0000:03:00.0/hwmon/hwmon7");
        put(DEV "0000:03:00.0/hwmon/hwmon7/power1_average", "200000000\n");
        d = sample_find(s, 12, 1, "0000:03:00.0");
        CHECK(d && d->has_power && d->has_energy);
        CHECK_NEAR(d ? d->power_w : -1, 200);
        CHECK_NEAR(d ? d->energy_j : -1, 300); /* (100 + 200) / 2 x 2 s */

        /* and the hwmon goes entirely: power unknown, the energy so far kept */
        rm_rf(DEV "0000:03:00.0/hwmon/hwmon7");
        check_power_unknown(s, 13, 300);
}

static void test_missing_files(void) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = tmp_set();
        const struct gpu_device *d;

        add_device("0000:03:00.0", "drm", "card1", "amdgpu", "0x1002");
        add_device("0000:00:02.0", "drm", "card0", "xe", "0x8086");
        add_device("0000:00:0b.0", "accel", "accel0", "intel_vpu", "0x8086");
        add_device("0000:00:02.1", "drm", "card2", "i915", "0x8086");
        add_device("0000:c4:00.1", "accel", "accel1", "amdxdna", "0x1022");
        add_device("0000:05:00.0", "drm", "card3", NULL, "0x1af4"); /* no driver link... */
        put(DEV "0000:05:00.0/uevent", "PCI_CLASS=30000\nDRIVER=virtio-pci\nPCI_SLOT_NAME=0000:05:00.0\n");
        for (int i = 0; i < 2; i++) {
                CHECK_EQ_INT(gpudev_sample(s, T(20 + i)), 6);
                for (size_t k = 0; k < gpudev_count(s); k++) {
                        d = gpudev_get(s, k);
                        CHECK(!d->has_busy && !d->has_mem_used && !d->has_mem_total && !d->has_gtt_used);
                        CHECK(!d->has_power && !d->has_energy && !d->has_temp && !d->has_freq && !d->has_freq_max);
                        CHECK(!d->suspended);
                        CHECK_EQ_INT(d->n_gts, 0);
                }
        }
        d = gpudev_find(s, "0000:c4:00.1");
        CHECK(d && streq(d->driver, "amdxdna") && streq(d->kind, "npu") && streq(d->vendor, "0x1022"));
        d = gpudev_find(s, "0000:05:00.0");
        CHECK(d && streq(d->driver, "virtio-pci")); /* ...so from uevent */
}

static void test_garbage(void) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = tmp_set();
        static const char *const junk[] = {
                "",
                "\n",
                "abc\n",
                "-5\n",
                "12 34\n",
                "0x10\n",
                "150\n",
                "1e3\n",
                "99999999999999999999999\n",
                "\n12\n",
                "12\n\n",
                "11111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111"
                "11111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111"
                "11111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111\n",
        };
        const struct gpu_device *d;

        add_device("0000:03:00.0", "drm", "card1", "amdgpu", "0x1002");
        add_device("0000:00:02.0", "drm", "card0", "xe", "0x8086");
        add_device("0000:00:0b.0", "accel", "accel0", "intel_vpu", "0x8086");
        put(DEV "0000:00:02.0/tile0/gt0/gtidle/name", "gt0-rc\n");
        put(DEV "0000:03:00.0/hwmon/hwmon0/name", "amdgpu\n");
        for (size_t i = 0; i < ELEMENTSOF(junk); i++) {
                put(DEV "0000:03:00.0/gpu_busy_percent", junk[i]);
                put(DEV "0000:03:00.0/mem_info_vram_used", junk[i]);
                put(DEV "0000:03:00.0/hwmon/hwmon0/power1_average", junk[i]);
                put(DEV "0000:03:00.0/hwmon/hwmon0/temp1_input", junk[i]);
                put(DEV "0000:00:02.0/tile0/gt0/gtidle/idle_residency_ms", junk[i]);
                put(DEV "0000:00:02.0/tile0/gt0/freq0/act_freq", junk[i]);
                put(DEV "0000:00:0b.0/npu_busy_time_us", junk[i]);
                put(DEV "0000:00:0b.0/npu_current_frequency_mhz", junk[i]);
                CHECK_EQ_INT(gpudev_sample(s, T(30 + i)), 3);
                d = gpudev_find(s, "0000:03:00.0");
                if (!d)
                        continue;
                /* "-5" is a valid temperature (m°C) and "150" one of most things */
                bool number = streq(junk[i], "150\n");
                CHECK(!d->has_busy); /* 150 % is not a percentage */
                CHECK(d->has_mem_used == number);
                CHECK(d->has_power == number);
                CHECK(d->has_temp == (number || streq(junk[i], "-5\n")));
                d = gpudev_find(s, "0000:00:0b.0");
                CHECK(d && !d->has_busy);
                CHECK(d && d->has_freq == number);
                d = gpudev_find(s, "0000:00:02.0");
                CHECK(d && !d->has_busy && d->has_freq == number);
        }

        /* the NPU's busy counter at each sample: a counter that goes back
         * (a driver reload) is unknown for that interval, then counts from
         * its new value; time that does not move is unknown, the baseline
         * kept; more busy than wall time (timing skew) is clamped */
        static const struct {
                const char *busy_us;
                unsigned seconds;
                double busy_pct; /* < 0: unknown */
        } steps[] = {
                { "5000000\n", 100, -1 }, { "5250000\n", 101, 25 }, { "1000\n", 102, -1 },     { "101000\n", 103, 10 },
                { "201000\n", 103, -1 },  { NULL, 105, 5 },         { "1301000\n", 106, 100 },
        };
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                if (steps[i].busy_us)
                        put(DEV "0000:00:0b.0/npu_busy_time_us", steps[i].busy_us);
                d = sample_find(s, steps[i].seconds, 3, "0000:00:0b.0");
                if (i == 0)
                        continue; /* the first sample of the counter */
                CHECK(d && d->has_busy == (steps[i].busy_pct >= 0));
                if (steps[i].busy_pct >= 0)
                        CHECK_NEAR(d ? d->busy_pct : -1, steps[i].busy_pct);
        }

        /* unreadable: a directory where a file should be */
        rm_rf(DEV "0000:00:0b.0/npu_busy_time_us");
        mkdirs(DEV "0000:00:0b.0/npu_busy_time_us");
        d = sample_find(s, 107, 3, "0000:00:0b.0");
        CHECK(d && !d->has_busy);
}

/* test_suspended_gpu's xe sampled at `seconds` after its runtime status,
 * GT 0's idle time and its energy counter are written (NULL: left as they
 * are); NULL (a failure counted) when it is not found. */
static const struct gpu_device *xe_at(struct gpudev_set *s, unsigned seconds, const char *status,
                                      const char *gt0_idle_ms, const char *energy_uj) {
        const struct {
                const char *rel, *value;
        } files[] = {
                { DEV "0000:03:00.0/power/runtime_status", status },
                { DEV "0000:03:00.0/tile0/gt0/gtidle/idle_residency_ms", gt0_idle_ms },
                { DEV "0000:03:00.0/hwmon/hwmon3/energy1_input", energy_uj },
        };
        for (size_t i = 0; i < ELEMENTSOF(files); i++)
                if (files[i].value)
                        putf(files[i].rel, "%s\n", files[i].value);
        return sample_find(s, seconds, 1, "0000:03:00.0");
}

/* A suspended GPU is idle and its counters are left alone (they would wake
 * it); the first sample after it resumes is unknown. Also xe's hwmon energy
 * and an xe without GT names. */
static void test_suspended_gpu(void) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = tmp_set();
        const struct gpu_device *d;

        add_device("0000:03:00.0", "drm", "card0", "xe", "0x8086");
        PUT_FILES({ DEV "0000:03:00.0/tile0/gt0/gtidle/idle_residency_ms", "1000\n" },
                  { DEV "0000:03:00.0/tile0/gt1/gtidle/idle_residency_ms", "1000\n" },
                  { DEV "0000:03:00.0/tile0/gt0/freq0/act_freq", "2000\n" },
                  { DEV "0000:03:00.0/tile0/gt0/freq0/max_freq", "2400\n" }, /* no rp0_freq: the soft limit */
                  { DEV "0000:03:00.0/hwmon/hwmon3/name", "xe\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon3/energy1_input", "5000000\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon3/temp2_input", "45000\n" },
                  { DEV "0000:03:00.0/power/runtime_status", "active\n" });
        CHECK_EQ_INT(gpudev_sample(s, T(40)), 1);

        put(DEV "0000:03:00.0/tile0/gt1/gtidle/idle_residency_ms", "2000\n");
        d = xe_at(s, 41, NULL, "1250", "105000000");
        if (!d)
                return;
        CHECK_EQ_INT(d->n_gts, 2);
        CHECK_STR(d->gts[0].name, "gt0"); /* unnamed: the first GT is the render one */
        CHECK_NEAR(d->gts[0].busy_pct, 75);
        CHECK_NEAR(d->gts[1].busy_pct, 0);
        CHECK(d->has_busy);
        CHECK_NEAR(d->busy_pct, 75);
        CHECK_NEAR(d->freq_mhz, 2000);
        CHECK_NEAR(d->freq_max_mhz, 2400);
        CHECK(d->has_power && d->has_energy && d->has_temp);
        CHECK_NEAR(d->power_w, 100);
        CHECK_NEAR(d->energy_j, 100);
        CHECK_NEAR(d->temp_c, 45);

        d = xe_at(s, 42, "suspended", "1250", NULL);
        if (!d)
                return;
        CHECK(d->suspended);
        CHECK(d->has_busy);
        CHECK_NEAR(d->busy_pct, 0);
        CHECK(d->gts[0].has_busy && d->gts[1].has_busy);
        CHECK(!d->has_freq && !d->has_power && !d->has_temp);
        CHECK(d->has_energy); /* what was counted stays */
        CHECK_NEAR(d->energy_j, 100);

        d = xe_at(s, 43, "active", "1300", "125000000");
        if (!d)
                return;
        CHECK(!d->suspended);
        CHECK(!d->has_busy && !d->gts[0].has_busy);
        CHECK(d->has_power); /* the energy counter spans the suspension: 20 J over 2 s */
        CHECK_NEAR(d->power_w, 10);
        CHECK_NEAR(d->energy_j, 120);

        /* an energy counter that goes back: that interval is dropped */
        put(DEV "0000:03:00.0/hwmon/hwmon3/energy1_input", "1000\n");
        check_power_unknown(s, 44, 120);
}

/* i915: the legacy whole-card rc6 file, RP0 over the soft maximum, the
 * hwmon energy counter; a platform (non-PCI) device named by its node; a
 * render node without its card; a rebind to another driver. */
static void test_i915_and_naming(void) {
        _cleanup_(gpudev_set_freep) struct gpudev_set *s = tmp_set();
        const struct gpu_device *d;

        add_device("0000:03:00.0", "drm", "card0", "i915", "0x8086");
        link_at("sys/class/drm/renderD128", "../../devices/pci0000:00/0000:03:00.0/drm/renderD128");
        link_at(DEV "0000:03:00.0/drm/renderD128/device", "../../../0000:03:00.0");
        PUT_FILES({ DEV "0000:03:00.0/drm/card0/power/rc6_residency_ms", "10000\n" },
                  { DEV "0000:03:00.0/drm/card0/gt_act_freq_mhz", "0\n" },
                  { DEV "0000:03:00.0/drm/card0/gt_RP0_freq_mhz", "2400\n" },
                  { DEV "0000:03:00.0/drm/card0/gt_max_freq_mhz", "1800\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon5/name", "i915\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon5/energy1_input", "0\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon6/name", "i915_gt0\n" },
                  { DEV "0000:03:00.0/hwmon/hwmon6/energy1_input", "77000000\n" });

        /* a platform GPU: its device directory is no PCI address */
        mkdirs("sys/devices/platform/fd00000.gpu/drm/card1");
        link_at("sys/devices/platform/fd00000.gpu/drm/card1/device", "../../../fd00000.gpu");
        link_at("sys/devices/platform/fd00000.gpu/drm/renderD129/device", "../../../fd00000.gpu");
        link_at("sys/class/drm/card1", "../../devices/platform/fd00000.gpu/drm/card1");
        link_at("sys/class/drm/renderD129", "../../devices/platform/fd00000.gpu/drm/renderD129");
        mkdirs("sys/bus/platform/drivers/panthor");
        link_at("sys/devices/platform/fd00000.gpu/driver", "../../../bus/platform/drivers/panthor");

        /* a render node whose card node is missing */
        link_at("sys/class/drm/renderD130", "../../devices/pci0000:00/0000:0a:00.0/drm/renderD130");
        link_at(DEV "0000:0a:00.0/drm/renderD130/device", "../../../0000:0a:00.0");

        CHECK_EQ_INT(gpudev_sample(s, T(50)), 2);
        CHECK_STR(gpudev_id_for_node(s, "renderD128"), "0000:03:00.0");
        CHECK_STR(gpudev_id_for_node(s, "renderD129"), "card1");
        CHECK_STR(gpudev_id_for_node(s, "card1"), "card1");
        CHECK_STR(gpudev_id_for_node(s, "renderD130"), "0000:0a:00.0");
        CHECK(gpudev_find(s, "0000:0a:00.0") == NULL);
        d = gpudev_find(s, "card1");
        CHECK(d && streq(d->driver, "panthor") && streq(d->vendor, "") && !d->has_busy);

        put(DEV "0000:03:00.0/drm/card0/power/rc6_residency_ms", "10500\n");
        put(DEV "0000:03:00.0/hwmon/hwmon5/energy1_input", "4000000\n");
        d = sample_find(s, 52, 2, "0000:03:00.0");
        if (!d)
                return;
        CHECK(d->has_busy);
        CHECK_NEAR(d->busy_pct, 75); /* 500 ms idle of 2000 */
        CHECK_EQ_INT(d->n_gts, 1);
        CHECK(d->has_freq && d->has_freq_max);
        CHECK_NEAR(d->freq_mhz, 0);
        CHECK_NEAR(d->freq_max_mhz, 2400);
        CHECK(d->has_power && d->has_energy);
        CHECK_NEAR(d->power_w, 2);
        CHECK_NEAR(d->energy_j, 4);

        /* rebound to vfio-pci (its node kept, as far as this test goes):
         * identity only, state from zero */
        link_at(DEV "0000:03:00.0/driver", "../../../bus/pci/drivers/vfio-pci");
        d = sample_find(s, 53, 2, "0000:03:00.0");
        CHECK(d && streq(d->driver, "vfio-pci") && !d->has_busy && !d->has_energy && d->n_gts == 0);
}

static void test_pci_address(void) {
        static const struct {
                const char *s;
                bool ok;
        } cases[] = {
                { "0000:03:00.0", true },
                { "10000:e1:00.0", true },
                { "0000:00:0b.0", true },
                { "0000:03:00", false },
                { "0000:03:00.0 ", false },
                { "0000:03:00.0x", false },
                { "0000:0A:00.0", false },
                { "000:03:00.0", false },
                { "card1", false },
                { "fd00000.gpu", false },
                { "", false },
                { "123456789:03:00.0", false },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                if (gpudev_is_pci_address(cases[i].s) != cases[i].ok)
                        TAP_FAIL("gpudev_is_pci_address(\"%s\") != %d", cases[i].s, cases[i].ok);
        CHECK(!gpudev_is_pci_address(NULL));
}

int main(int argc, char **argv) {
        static const tree_test_fn tests[] = {
                test_pci_address, test_appear_disappear, test_hwmon_index_moves, test_missing_files,
                test_garbage,     test_suspended_gpu,    test_i915_and_naming,
        };
        static const tree_test_fn fixture_tests[] = { test_fixture_devices, test_fixture_i915 };

        return tree_main(argc, argv, "test-gpudev", "t1/sys/class", tests, ELEMENTSOF(tests), fixture_tests,
                         ELEMENTSOF(fixture_tests));
}

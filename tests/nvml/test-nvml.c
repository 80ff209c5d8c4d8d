/* SPDX-License-Identifier: MIT */
/* Unit tests for daemon/collect/accel/nvml.c against the stand-in libnvidia-ml
 * (tests/nvml/nvml-standin.c), loaded by path through the real dlopen code:
 * version fallbacks, 24- and 16-byte process entries, a pid in two lists,
 * out-of-range samples, unknown values, energy from the counter (and a
 * driver reload) or from the power, failures logged once, and each way the
 * backend stays off (absent, missing symbol, failing init, no device).
 *
 * The test dlopen()s each variant itself as well: the same file gives the
 * same instance, so it reads the stand-in's call counts and steers it.
 *
 * Usage: test-nvml FULL.so OLD.so INITFAIL.so NODEVICE.so NOSYM.so */
#include <dlfcn.h>
#include <math.h>
#include <string.h>

#include "collect/accel/nvml.h"
#include "tap.h"

#define GIB (1024ULL * 1024 * 1024)
#define MIB (1024ULL * 1024)
#define SEC USEC_PER_SEC

enum {
        NVML_ERROR_NOT_SUPPORTED = 3,
        NVML_ERROR_NO_PERMISSION = 4,
        NVML_ERROR_GPU_IS_LOST = 15,
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
        NVML_ERROR_UNKNOWN = 999
};

/* ---- the stand-in's controls --------------------------------------------------- */

struct standin {
        void *dl;
        void (*reset)(void);
        int (*live)(void);
        unsigned (*calls)(const char *fn);
        void (*fail)(const char *fn, unsigned dev, int r);
        void (*energy_reset)(unsigned dev);
        void (*freeze)(int frozen);
};

/* Loads the stand-in's controls and resets it; a failure is a failed check. */
static bool standin_open(const char *path, struct standin *s) {
        static const struct {
                const char *name;
                size_t offset;
        } fns[] = {
                { "standin_reset", offsetof(struct standin, reset) },
                { "standin_live", offsetof(struct standin, live) },
                { "standin_calls", offsetof(struct standin, calls) },
                { "standin_fail", offsetof(struct standin, fail) },
                { "standin_energy_reset", offsetof(struct standin, energy_reset) },
                { "standin_freeze", offsetof(struct standin, freeze) },
        };
        *s = (struct standin){ .dl = dlopen(path, RTLD_NOW | RTLD_LOCAL) };
        if (!s->dl) {
                TAP_FAIL("%s", dlerror());
                return false;
        }
        for (size_t i = 0; i < ELEMENTSOF(fns); i++) {
                void *f = dlsym(s->dl, fns[i].name);
                if (!f) {
                        TAP_FAIL("%s: no %s", path, fns[i].name);
                        dlclose(s->dl);
                        return false;
                }
                memcpy((char *)s + fns[i].offset, &f, sizeof f);
        }
        s->reset();
        return true;
}

static void standin_close(struct standin *s) {
        if (s->dl)
                dlclose(s->dl);
}

/* ---- log lines ------------------------------------------------------------------ */

/* stderr goes to a file between begin and end; end returns the number of
 * lines written and echoes them, indented, for whoever reads the test log. */
static int saved_stderr = -1;
static FILE *captured;

static void capture_begin(void) {
        fflush(stderr);
        captured = tmpfile();
        saved_stderr = dup(STDERR_FILENO);
        dup2(fileno(captured), STDERR_FILENO);
}

static unsigned capture_end(void) {
        char line[1024];
        unsigned lines = 0;

        fflush(stderr);
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        rewind(captured);
        while (fgets(line, sizeof line, captured)) {
                fprintf(stderr, "    | %s", line);
                lines++;
        }
        fclose(captured);
        return lines;
}

/* ---- helpers ------------------------------------------------------------------- */

static const struct nvml_proc *find_proc(const struct nvml_snapshot *s, size_t dev, int pid) {
        for (size_t i = 0; i < s->n_procs; i++)
                if (s->procs[i].device == dev && s->procs[i].pid == pid)
                        return &s->procs[i];
        return NULL;
}

static struct nvml *open_ok(const char *path) {
        struct nvml *n = NULL;
        char err[256] = "";
        int r = nvml_open(path, &n, err, sizeof err);
        CHECK_EQ_INT(r, 0);
        if (r < 0)
                fprintf(stderr, "nvml_open: %s\n", err);
        return n;
}

/* nvml_open fails with want, logs nothing itself, and gives one line
 * holding what. */
static void check_open_fails(const char *path, int want, const char *what) {
        struct nvml *n = NULL;
        char err[256] = "";

        capture_begin();
        int r = nvml_open(path, &n, err, sizeof err);
        CHECK_EQ_INT(capture_end(), 0);
        CHECK_EQ_INT(r, want);
        CHECK(n == NULL);
        CHECK(err[0] != 0 && !strchr(err, '\n'));
        if (!strstr(err, what))
                TAP_FAIL("%s:%d: err \"%s\" does not name \"%s\"", __FILE__, __LINE__, err, what);
        printf("  %s -> %d: %s\n", path ? path : "(default)", r, err);
}

/* ---- pure ------------------------------------------------------------------------- */

static void test_bus_id(void) {
        static const struct {
                const char *in, *out; /* out NULL: -EINVAL */
        } cases[] = {
                { "0000:41:00.0", "0000:41:00.0" },
                { "0000:C1:00.0", "0000:c1:00.0" },
                { "00000000:C1:1F.7", "0000:c1:1f.7" },
                { "00000001:0a:00.1", "0001:0a:00.1" },
                { "00010000:00:02.0", "10000:00:02.0" }, /* VMD domains are wider than 16 bits */
                { "41:00.0", NULL },
                { "0000:41:00", NULL },
                { "0000:41:00.0 ", NULL },
                { "0000:141:00.0", NULL },
                { "0000:41:20.0", NULL }, /* device > 31 */
                { "0000:41:00.8", NULL }, /* function > 7 */
                { "000000000:41:00.0", NULL },
                { "", NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char id[GPU_ID_MAX] = "";
                int r = nvml_normalize_bus_id(cases[i].in, id, sizeof id);
                if (!cases[i].out) {
                        CHECK_EQ_INT(r, -EINVAL);
                        continue;
                }
                CHECK_EQ_INT(r, 0);
                CHECK_STR(id, cases[i].out);
        }
        char small[8];
        CHECK_EQ_INT(nvml_normalize_bus_id("0000:41:00.0", small, sizeof small), -ENOBUFS);
        CHECK_EQ_INT(nvml_normalize_bus_id(NULL, small, sizeof small), -EINVAL);
}

/* ---- absent ------------------------------------------------------------------------ */

static void test_absent(void) {
        check_open_fails("/nonexistent/libnvidia-ml.so.1", -ENOENT, "/nonexistent/libnvidia-ml.so.1");
        check_open_fails("", -EINVAL, "empty");

        /* The real default, on this machine: absent unless a driver is here. */
        struct nvml *n = NULL;
        char err[256] = "";
        int r = nvml_open(NULL, &n, err, sizeof err);
        if (r == 0) {
                printf("  libnvidia-ml.so.1 is installed here: %zu device(s)\n", nvml_device_count(n));
                nvml_close(n);
        } else
                printf("  default library: %d: %s\n", r, err);
        nvml_close(NULL);
}

/* ---- the modern driver ---------------------------------------------------------------- */

static void check_identity_full(const struct nvml_snapshot *s) {
        const struct gpu_device *d0 = &s->devices[0], *d1 = &s->devices[1];
        CHECK_STR(d0->id, "0000:41:00.0");
        CHECK_STR(d1->id, "0000:c1:00.0"); /* "0000:C1:00.0" normalised */
        CHECK_STR(d0->driver, "nvidia");
        CHECK_STR(d0->kind, "gpu");
        CHECK_STR(d0->node, "nvidia0");
        CHECK_STR(d1->node, "nvidia2"); /* the minor number, not the index */
        CHECK_STR(d0->vendor, "0x10de");
        CHECK_STR(d0->model, "0x2330");
        CHECK_STR(d1->model, "0x27b8");
        CHECK_STR(d0->name, "NVIDIA H100 80GB HBM3");
        CHECK_STR(d1->name, "NVIDIA L4");
}

/* The newest versions of every call, and nothing older. */
static void full_open_calls(struct standin *st, struct nvml *n) {
        CHECK_EQ_INT(nvml_device_count(n), 2);
        CHECK_EQ_INT(st->live(), 1);
        /* newest versions only */
        CHECK_EQ_INT(st->calls("nvmlInit_v2"), 1);
        CHECK_EQ_INT(st->calls("nvmlInit"), 0);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetCount_v2"), 1);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetCount"), 0);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetHandleByIndex_v2"), 2);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetHandleByIndex"), 0);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetPciInfo_v3"), 2);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetPciInfo_v2") + st->calls("nvmlDeviceGetPciInfo"), 0);
}

/* The first tick: every counter, and the processes. */
static void full_first_tick(struct standin *st, struct nvml *n, struct nvml_snapshot *s) {
        const struct nvml_proc *p;

        CHECK_EQ_INT(nvml_sample(n, 1 * SEC, s), 0);
        CHECK_EQ_INT(s->n_devices, 2);
        check_identity_full(s);
        const struct gpu_device *d0 = &s->devices[0], *d1 = &s->devices[1];
        CHECK(d0->has_busy && d0->busy_pct == 37);
        CHECK(d1->has_busy && d1->busy_pct == 0);                  /* idle is known, not unknown */
        CHECK(d0->has_mem_used && d0->mem_used_bytes == 10 * GIB); /* _v2: the reserve left out */
        CHECK(d0->has_mem_total && d0->mem_total_bytes == 80 * GIB);
        CHECK(d1->has_mem_used && d1->mem_used_bytes == 0 && d1->mem_total_bytes == 24 * GIB);
        CHECK(d0->has_power);
        CHECK_NEAR(d0->power_w, 215.0);
        CHECK_NEAR(d1->power_w, 72.0);
        CHECK(d0->has_temp && d0->temp_c == 64 && d1->temp_c == 41);
        CHECK(d0->has_energy && d0->energy_j == 0 && d1->has_energy && d1->energy_j == 0);
        CHECK(!d0->has_gtt_used && !d0->has_freq && d0->n_gts == 0 && !d0->suspended);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetMemoryInfo_v2"), 2);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetMemoryInfo"), 0);

        /* processes: 4242 in the compute and graphics lists once, 4343's only
         * samples out of range, 5555 sampled but in no list */
        CHECK(s->procs_known[0] && s->procs_known[1]);
        CHECK_EQ_INT(s->n_procs, 2);
        p = find_proc(s, 0, 4242);
        CHECK(p && p == &s->procs[0]); /* sorted by pid */
        if (p) {
                CHECK_STR(p->device_id, "0000:41:00.0");
                CHECK(p->has_mem && p->mem_bytes == 1 * GIB);
                CHECK(p->has_util);
                CHECK_NEAR(p->sm_util_pct, 55); /* the newest sample, not the older 27 */
                CHECK_NEAR(p->enc_util_pct, 3);
                CHECK_NEAR(p->dec_util_pct, 1);
        }
        p = find_proc(s, 0, 4343);
        CHECK(p != NULL);
        if (p) {
                CHECK(p->has_mem && p->mem_bytes == 512 * MIB); /* the second graphics entry: 24-byte stride */
                CHECK(!p->has_util);                            /* 250 % and 125 %: unknown, not 0 */
        }
        CHECK(!find_proc(s, 0, 5555));
        /* the size query, the surprise INSUFFICIENT_SIZE, the retry; one size query on device 1 */
        CHECK_EQ_INT(st->calls("nvmlDeviceGetComputeRunningProcesses_v3"), 4);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetComputeRunningProcesses_v2"), 0);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetComputeRunningProcesses"), 0);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetGraphicsRunningProcesses_v3"), 3);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetMPSComputeRunningProcesses_v3"), 2);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetProcessUtilization"), 2); /* not on device 1: no process */
}

/* Energy from the counter, across a freeze, a driver reload and a step in no time. */
static void full_energy(struct standin *st, struct nvml *n, struct nvml_snapshot *s) {
        const struct nvml_proc *p;

        /* energy from the counter's differences */
        CHECK_EQ_INT(nvml_sample(n, 2 * SEC, s), 0);
        CHECK_NEAR(s->devices[0].energy_j, 2.150);
        CHECK_NEAR(s->devices[1].energy_j, 0.720);
        p = find_proc(s, 0, 4242);
        CHECK(p && p->has_util && p->sm_util_pct == 55);

        /* no sample newer than the last taken: NOT_FOUND, 0 % for every listed process */
        st->freeze(1);
        CHECK_EQ_INT(nvml_sample(n, 3 * SEC, s), 0);
        p = find_proc(s, 0, 4242);
        CHECK(p && p->has_util && p->sm_util_pct == 0 && p->enc_util_pct == 0);
        p = find_proc(s, 0, 4343);
        CHECK(p && p->has_util && p->sm_util_pct == 0);
        CHECK_NEAR(s->devices[0].energy_j, 4.300);
        st->freeze(0);

        /* a driver reload: the counter goes back, the interval is left out, once said */
        st->energy_reset(0);
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 4 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 1);
        CHECK(s->devices[0].has_energy);
        CHECK_NEAR(s->devices[0].energy_j, 4.300);
        CHECK_NEAR(s->devices[1].energy_j, 2.160);
        CHECK_EQ_INT(nvml_sample(n, 5 * SEC, s), 0);
        CHECK_NEAR(s->devices[0].energy_j, 6.450);
        /* a step in no time is implausible: left out; said at info only the
         * first time for a device (device 0 said the reload already) */
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 5 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 1);
        CHECK_NEAR(s->devices[0].energy_j, 6.450);
        CHECK_NEAR(s->devices[1].energy_j, 2.880);
}

/* Device calls failing, and a lost GPU. */
static void full_device_failures(struct standin *st, struct nvml *n, struct nvml_snapshot *s) {
        const struct gpu_device *d1;

        /* one call failing: that value unknown, the rest intact, one line
         * while it lasts and one when it recovers */
        st->fail("nvmlDeviceGetPowerUsage", 0, NVML_ERROR_UNKNOWN);
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 6 * SEC, s), 0);
        CHECK_EQ_INT(nvml_sample(n, 7 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 1);
        CHECK(!s->devices[0].has_power);
        CHECK(s->devices[0].has_busy && s->devices[0].has_mem_used && s->devices[0].has_temp);
        CHECK(s->devices[0].has_energy); /* the counter does not need the power */
        CHECK(s->devices[1].has_power);
        st->fail("nvmlDeviceGetPowerUsage", 0, 0);
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 8 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 1);
        CHECK(s->devices[0].has_power);

        /* a lost GPU: everything about it unknown, its other calls not made, one line */
        st->fail("nvmlDeviceGetUtilizationRates", 1, NVML_ERROR_GPU_IS_LOST);
        unsigned power_calls = st->calls("nvmlDeviceGetPowerUsage");
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 9 * SEC, s), 0);
        CHECK_EQ_INT(nvml_sample(n, 10 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 1);
        d1 = &s->devices[1];
        CHECK(!d1->has_busy && !d1->has_mem_used && !d1->has_mem_total && !d1->has_power && !d1->has_temp &&
              !d1->has_energy);
        CHECK(!s->procs_known[1] && s->procs_known[0]);
        CHECK(s->devices[0].has_busy && s->devices[0].has_power);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetPowerUsage") - power_calls, 2); /* device 0's only */
        st->fail("nvmlDeviceGetUtilizationRates", 1, 0);
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 11 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 1);
        CHECK(s->devices[1].has_busy && s->devices[1].has_energy && s->procs_known[1]);
        /* steps at 6, 7, 8 and now: the counter's mark survives the gap */
        CHECK_NEAR(s->devices[1].energy_j, 2.880 + 4 * 0.720);
}

/* Process lists and utilisation failing. */
static void full_process_failures(struct standin *st, struct nvml *n, struct nvml_snapshot *s) {
        const struct nvml_proc *p;

        /* a failing process list: the others still read, the list marked partial */
        st->fail("nvmlDeviceGetComputeRunningProcesses_v3", 0, NVML_ERROR_UNKNOWN);
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 12 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 1);
        CHECK(!s->procs_known[0] && s->procs_known[1]);
        CHECK_EQ_INT(s->n_procs, 2);
        p = find_proc(s, 0, 4242); /* from the graphics list */
        CHECK(p && p->has_mem && p->mem_bytes == 1 * GIB && p->has_util && p->sm_util_pct == 55);
        st->fail("nvmlDeviceGetComputeRunningProcesses_v3", 0, 0);

        /* failing process utilisation: unknown, not 0 */
        st->fail("nvmlDeviceGetProcessUtilization", 0, NVML_ERROR_UNKNOWN);
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 13 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 2); /* the compute list's recovery, this failure */
        CHECK(s->procs_known[0]);
        p = find_proc(s, 0, 4242);
        CHECK(p && !p->has_util && p->has_mem);
        st->fail("nvmlDeviceGetProcessUtilization", 0, 0);
}

/* The fallbacks: plain memory info, energy integrated from the power. */
static void full_fallbacks(struct standin *st, struct nvml *n, struct nvml_snapshot *s) {
        /* _v2 memory refused: the plain call from then on (used includes the reserve) */
        st->fail("nvmlDeviceGetMemoryInfo_v2", 0, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 14 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 1); /* process utilisation readable again; the fallback is debug */
        CHECK(s->devices[0].has_mem_used && s->devices[0].mem_used_bytes == 11 * GIB);
        CHECK(s->devices[1].has_mem_used && s->devices[1].mem_used_bytes == 0); /* device 1 still on _v2 */
        st->fail("nvmlDeviceGetMemoryInfo_v2", 0, 0);
        CHECK_EQ_INT(nvml_sample(n, 15 * SEC, s), 0);
        CHECK(s->devices[0].mem_used_bytes == 11 * GIB);
        CHECK_EQ_INT(st->calls("nvmlDeviceGetMemoryInfo"), 2);

        /* no energy counter on device 1 (pre-Volta): the power integrated */
        st->fail("nvmlDeviceGetTotalEnergyConsumption", 1, NVML_ERROR_NOT_SUPPORTED);
        double e1 = s->devices[1].energy_j;
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 16 * SEC, s), 0);
        CHECK_EQ_INT(nvml_sample(n, 18 * SEC, s), 0);
        CHECK_EQ_INT(capture_end(), 0);
        CHECK(s->devices[1].has_energy);
        CHECK_NEAR(s->devices[1].energy_j, e1 + 72.0 * 2);
}

static void test_full(const char *path) {
        struct standin st;
        struct nvml_snapshot s;

        if (!standin_open(path, &st))
                return;
        capture_begin();
        struct nvml *n = open_ok(path);
        CHECK_EQ_INT(capture_end(), 0);
        if (!n)
                goto out;
        full_open_calls(&st, n);
        full_first_tick(&st, n, &s);
        full_energy(&st, n, &s);
        full_device_failures(&st, n, &s);
        full_process_failures(&st, n, &s);
        full_fallbacks(&st, n, &s);

        unsigned shutdowns = st.calls("nvmlShutdown");
        nvml_close(n);
        CHECK_EQ_INT(st.live(), 0);
        CHECK_EQ_INT(st.calls("nvmlShutdown") - shutdowns, 1);
out:
        standin_close(&st);
}

/* The process list from the environment, as a black-box test gives it. */
static void test_env_procs(const char *path) {
        struct standin st;
        struct nvml_snapshot s;
        const struct nvml_proc *p;

        setenv("NVML_STANDIN_PROCS", "779:4096:-:m,777:na:40,778:2048:-:g", 1);
        if (!standin_open(path, &st))
                return;
        struct nvml *n = open_ok(path);
        if (n) {
                CHECK_EQ_INT(nvml_sample(n, 1 * SEC, &s), 0);
                CHECK_EQ_INT(s.n_procs, 3);
                p = find_proc(&s, 0, 777);
                CHECK(p && !p->has_mem && p->has_util && p->sm_util_pct == 40); /* NVML_VALUE_NOT_AVAILABLE */
                p = find_proc(&s, 0, 778);
                CHECK(p && p->has_mem && p->mem_bytes == 2048 && p->has_util && p->sm_util_pct == 0);
                p = find_proc(&s, 0, 779); /* an MPS client */
                CHECK(p && p->has_mem && p->mem_bytes == 4096 && p->has_util && p->sm_util_pct == 0);
                CHECK(s.procs[0].pid == 777 && s.procs[1].pid == 778 && s.procs[2].pid == 779);
                nvml_close(n);
        }
        unsetenv("NVML_STANDIN_PROCS");
        standin_close(&st);
}

/* Devices the caller may not open are skipped; none at all is -ENODEV. */
static void test_handles(const char *path) {
        struct standin st;
        struct nvml_snapshot s;

        if (!standin_open(path, &st))
                return;
        st.fail("nvmlDeviceGetHandleByIndex_v2", 0, NVML_ERROR_NO_PERMISSION);
        capture_begin();
        struct nvml *n = open_ok(path);
        CHECK_EQ_INT(capture_end(), 1);
        if (n) {
                CHECK_EQ_INT(nvml_device_count(n), 1);
                CHECK_EQ_INT(nvml_sample(n, 1 * SEC, &s), 0);
                CHECK_STR(s.devices[0].id, "0000:c1:00.0");
                CHECK_EQ_INT(s.n_procs, 0);
                CHECK(s.procs_known[0]);
                nvml_close(n);
        }
        st.fail("nvmlDeviceGetHandleByIndex_v2", 1, NVML_ERROR_NO_PERMISSION);
        check_open_fails(path, -ENODEV, "Insufficient Permissions");
        CHECK_EQ_INT(st.live(), 0);
        standin_close(&st);
}

/* ---- an old driver ----------------------------------------------------------------------- */

static void test_old(const char *path) {
        struct standin st;
        struct nvml_snapshot s;
        const struct nvml_proc *p;

        if (!standin_open(path, &st))
                return;
        struct nvml *n = open_ok(path);
        if (!n)
                goto out;
        CHECK_EQ_INT(st.calls("nvmlInit"), 1);
        CHECK_EQ_INT(st.calls("nvmlDeviceGetCount"), 1);
        CHECK_EQ_INT(st.calls("nvmlDeviceGetHandleByIndex"), 2);
        CHECK_EQ_INT(st.calls("nvmlDeviceGetPciInfo"), 2);

        CHECK_EQ_INT(nvml_sample(n, 1 * SEC, &s), 0);
        CHECK_STR(s.devices[0].id, "0000:41:00.0");
        CHECK_STR(s.devices[1].id, "0000:c1:00.0");
        CHECK_STR(s.devices[1].node, "nvidia1"); /* no minor number: the index */
        CHECK_STR(s.devices[0].name, "NVIDIA H100 80GB HBM3");
        CHECK(s.devices[0].has_mem_used && s.devices[0].mem_used_bytes == 11 * GIB); /* plain: with the reserve */
        CHECK(s.devices[0].has_busy && s.devices[0].busy_pct == 37);
        CHECK(s.devices[0].has_energy && s.devices[0].energy_j == 0);
        /* 16-byte entries: the second graphics entry read right */
        CHECK_EQ_INT(s.n_procs, 2);
        p = find_proc(&s, 0, 4242);
        CHECK(p && p->has_mem && p->mem_bytes == 1 * GIB && !p->has_util); /* no process utilisation */
        p = find_proc(&s, 0, 4343);
        CHECK(p && p->has_mem && p->mem_bytes == 512 * MIB && !p->has_util);
        CHECK(s.procs_known[0] && s.procs_known[1]);
        CHECK_EQ_INT(st.calls("nvmlDeviceGetComputeRunningProcesses"), 4);

        /* no energy counter: trapezoids over the power */
        CHECK_EQ_INT(nvml_sample(n, 2 * SEC, &s), 0);
        CHECK_NEAR(s.devices[0].energy_j, 215.0);
        CHECK_NEAR(s.devices[1].energy_j, 72.0);
        CHECK_EQ_INT(nvml_sample(n, 3 * SEC + SEC / 2, &s), 0);
        CHECK_NEAR(s.devices[0].energy_j, 215.0 + 322.5);

        /* power unknown: energy unknown, and the interval after the gap left out */
        st.fail("nvmlDeviceGetPowerUsage", 0, NVML_ERROR_UNKNOWN);
        capture_begin();
        CHECK_EQ_INT(nvml_sample(n, 4 * SEC + SEC / 2, &s), 0);
        CHECK(!s.devices[0].has_power && !s.devices[0].has_energy);
        st.fail("nvmlDeviceGetPowerUsage", 0, 0);
        CHECK_EQ_INT(nvml_sample(n, 5 * SEC + SEC / 2, &s), 0);
        CHECK_EQ_INT(capture_end(), 2);
        CHECK(s.devices[0].has_energy);
        CHECK_NEAR(s.devices[0].energy_j, 537.5);
        CHECK_EQ_INT(nvml_sample(n, 6 * SEC + SEC / 2, &s), 0);
        CHECK_NEAR(s.devices[0].energy_j, 537.5 + 215.0);
        CHECK_NEAR(s.devices[1].energy_j, 72.0 * 5.5);

        nvml_close(n);
        CHECK_EQ_INT(st.live(), 0);
out:
        standin_close(&st);
}

/* ---- the backend stays off ------------------------------------------------------------------ */

static void test_off(const char *initfail, const char *nodevice, const char *nosym) {
        struct standin st;

        if (standin_open(initfail, &st)) {
                check_open_fails(initfail, -EIO, "Driver Not Loaded");
                CHECK_EQ_INT(st.calls("nvmlInit_v2"), 1);
                CHECK_EQ_INT(st.calls("nvmlShutdown"), 0); /* nothing to shut down */
                CHECK_EQ_INT(st.live(), 0);
                standin_close(&st);
        }
        if (standin_open(nodevice, &st)) {
                check_open_fails(nodevice, -ENODEV, "no NVIDIA device");
                CHECK_EQ_INT(st.calls("nvmlShutdown"), 1);
                CHECK_EQ_INT(st.live(), 0);
                standin_close(&st);
        }
        if (standin_open(nosym, &st)) {
                check_open_fails(nosym, -ENOSYS, "nvmlDeviceGetUtilizationRates");
                CHECK_EQ_INT(st.calls("nvmlInit_v2"), 0); /* symbols checked before init */
                standin_close(&st);
        }
}

int main(int argc, char **argv) {
        if (argc != 6) {
                fprintf(stderr, "usage: %s FULL.so OLD.so INITFAIL.so NODEVICE.so NOSYM.so\n", argv[0]);
                return 2;
        }
        log_setup("test-nvml");
        log_set_max_level(LOG_INFO);

        test_bus_id();
        test_absent();
        test_full(argv[1]);
        test_env_procs(argv[1]);
        test_handles(argv[1]);
        test_old(argv[2]);
        test_off(argv[3], argv[4], argv[5]);
        TEST_DONE();
}

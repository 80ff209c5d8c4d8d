/* SPDX-License-Identifier: MIT */
/* A stand-in for libnvidia-ml.so.1 with known values, so the tests load
 * mlmond's real NVML code against it: the same symbol names and C
 * signatures as NVML, and the same ABI. Structs are written as bytes at the
 * offsets of NVIDIA's nvml.h layouts (LP64), not through mlmond's
 * declarations, so a layout mistake there shows as wrong values.
 *
 * Variants (one source, -D at build time):
 *   (none)            a modern driver: _v2/_v3 entry points and the old
 *                     ones too (the old ones count their calls, so tests
 *                     see which were picked), energy counter, process
 *                     utilisation, MPS list, minor numbers
 *   STANDIN_OLD       only the unsuffixed entry points of old drivers:
 *                     16-byte process entries, no energy counter, no
 *                     process utilisation, no _v2 memory, no minor number
 *   STANDIN_INITFAIL  nvmlInit_v2 answers DRIVER_NOT_LOADED
 *   STANDIN_NODEVICE  no GPU
 *   STANDIN_NOSYM     nvmlDeviceGetUtilizationRates missing
 *
 * Device 0 ("0000:41:00.0") runs the processes; device 1 ("0000:C1:00.0",
 * uppercase as some drivers write it) none. The process list comes from
 * NVML_STANDIN_PROCS when set (for black-box tests with real pids):
 *
 *   NVML_STANDIN_PROCS="PID:BYTES[:SM[:LISTS]],..."
 *     BYTES  usedGpuMemory, or "na" for NVML_VALUE_NOT_AVAILABLE
 *     SM     smUtil of its utilisation samples, "-" (default) for none
 *     LISTS  which running-process lists show it: any of c (compute,
 *            the default), g (graphics), m (MPS); "" = samples only
 *
 * else from the defaults below. The first sized list call of a lifetime
 * answers INSUFFICIENT_SIZE as if a process had just started. Process
 * utilisation samples are stamped with a clock that advances at each size
 * query (buffer NULL), unless frozen by standin_freeze().
 *
 * Test controls (not NVML): standin_reset, standin_live, standin_calls,
 * standin_fail, standin_energy_reset, standin_freeze. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/accel/nvml-abi.h"

/* NVML's names, incomplete: written through bytes only. */
typedef struct nvmlPciInfo_st nvmlPciInfo_t;
typedef struct nvmlMemory_st nvmlMemory_t;
typedef struct nvmlMemory_v2_st nvmlMemory_v2_t;
typedef struct nvmlUtilization_st nvmlUtilization_t;
typedef struct nvmlProcessInfo_st nvmlProcessInfo_t;
typedef struct nvmlProcessInfo_v1_st nvmlProcessInfo_v1_t;
typedef struct nvmlProcessUtilizationSample_st nvmlProcessUtilizationSample_t;
typedef int nvmlTemperatureSensors_t;

#define GIB (1024ULL * 1024 * 1024)
#define MIB (1024ULL * 1024)
#define MAX_PROCS 64
#define LIST_C 1u
#define LIST_G 2u
#define LIST_M 4u
#define SAMPLE_EPOCH_USEC 1700000000000000ULL /* November 2023, in CPU µs like the driver's */
#define SAMPLE_PERIOD_USEC 100000ULL

struct nvmlDevice_st {
        unsigned index;
};

struct proc {
        unsigned pid;
        unsigned long long mem; /* NVML_VALUE_NOT_AVAILABLE_ULL: unknown */
        int sm;                 /* -1: no samples */
        unsigned enc, dec;
        unsigned lists;
};

struct dev {
        struct nvmlDevice_st h;
        const char *bus_legacy, *bus_id, *name;
        unsigned domain, bus, device, pci_device_id, minor;
        unsigned util_gpu, util_mem, power_mw, temp_c;
        unsigned long long total, reserved, used; /* used as _v2 counts it */
        unsigned long long energy_mj, energy_step_mj;
        struct proc procs[MAX_PROCS];
        size_t n_procs;
};

static struct {
        int live; /* nvmlInit minus nvmlShutdown */
        bool set_up;
        bool grew; /* the one INSUFFICIENT_SIZE surprise was given */
        bool frozen;
        unsigned long long round;
        struct dev devs[2];
        unsigned n_devs;
        struct {
                char name[64];
                unsigned n;
        } calls[64];
        struct {
                char name[64];
                unsigned dev;
                nvmlReturn_t r;
        } fails[16];
} st;

/* ---- byte-level writes (NVML is little-endian x86-64 / aarch64) ----------- */

static void put_u32(void *base, size_t off, unsigned v) {
        memcpy((unsigned char *)base + off, &v, 4);
}
static void put_u64(void *base, size_t off, unsigned long long v) {
        memcpy((unsigned char *)base + off, &v, 8);
}
static void put_str(void *base, size_t off, size_t size, const char *s) {
        memset((unsigned char *)base + off, 0, size);
        memcpy((unsigned char *)base + off, s, strnlen(s, size - 1));
}

/* ---- state ---------------------------------------------------------------- */

static void parse_procs(struct dev *d, const char *spec) {
        char *copy = strdup(spec), *save = NULL;
        d->n_procs = 0;
        for (char *e = strtok_r(copy, ",", &save); e && d->n_procs < MAX_PROCS; e = strtok_r(NULL, ",", &save)) {
                char bytes[32] = "", sm[16] = "-", lists[8] = "c";
                struct proc p = { .sm = -1 };
                int k = sscanf(e, "%u:%31[^:]:%15[^:]:%7[cgm]", &p.pid, bytes, sm, lists);
                if (k < 2) {
                        fprintf(stderr, "nvml-standin: NVML_STANDIN_PROCS: bad entry '%s'\n", e);
                        continue;
                }
                if (k == 3 && e[strlen(e) - 1] == ':')
                        lists[0] = 0; /* "PID:BYTES:SM:" = samples only */
                p.mem = strcmp(bytes, "na") == 0 ? NVML_VALUE_NOT_AVAILABLE_ULL : strtoull(bytes, NULL, 10);
                if (strcmp(sm, "-") != 0)
                        p.sm = atoi(sm);
                for (const char *c = lists; *c; c++)
                        p.lists |= *c == 'c' ? LIST_C : *c == 'g' ? LIST_G : LIST_M;
                d->procs[d->n_procs++] = p;
        }
        free(copy);
}

static void setup(void) {
        memset(st.devs, 0, sizeof st.devs);
        st.devs[0] = (struct dev){
                .h = { 0 },
                .bus_legacy = "0000:41:00.0", .bus_id = "00000000:41:00.0", .name = "NVIDIA H100 80GB HBM3",
                .bus = 0x41, .pci_device_id = 0x233010de, .minor = 0,
                .util_gpu = 37, .util_mem = 12, .power_mw = 215000, .temp_c = 64,
                .total = 80 * GIB, .reserved = 1 * GIB, .used = 10 * GIB,
                .energy_mj = 5000000000ULL, .energy_step_mj = 2150,
                /* graphics list order 4343, 4242: the second entry shows the stride */
                .procs = {
                        { .pid = 4343, .mem = 512 * MIB, .sm = 250, .lists = LIST_G },
                        { .pid = 4242, .mem = 1 * GIB, .sm = 55, .enc = 3, .dec = 1, .lists = LIST_C | LIST_G },
                        { .pid = 5555, .mem = 0, .sm = 30, .lists = 0 }, /* samples but in no list */
                },
                .n_procs = 3,
        };
        st.devs[1] = (struct dev){
                .h = { 1 },
                .bus_legacy = "0000:C1:00.0",
                .bus_id = "00000000:C1:00.0",
                .name = "NVIDIA L4",
                .bus = 0xc1,
                .pci_device_id = 0x27b810de,
                .minor = 2,
                .util_gpu = 0,
                .util_mem = 0,
                .power_mw = 72000,
                .temp_c = 41,
                .total = 24 * GIB,
                .reserved = 512 * MIB,
                .used = 0,
                .energy_mj = 1000000000ULL,
                .energy_step_mj = 720,
        };
        const char *spec = getenv("NVML_STANDIN_PROCS");
        if (spec)
                parse_procs(&st.devs[0], spec);
#ifdef STANDIN_NODEVICE
        st.n_devs = 0;
#else
        st.n_devs = 2;
#endif
        st.grew = st.frozen = false;
        st.round = 0;
        memset(st.calls, 0, sizeof st.calls);
        memset(st.fails, 0, sizeof st.fails);
        st.set_up = true;
}

static void count_call(const char *fn) {
        for (size_t i = 0; i < sizeof st.calls / sizeof st.calls[0]; i++) {
                if (!st.calls[i].name[0])
                        snprintf(st.calls[i].name, sizeof st.calls[i].name, "%s", fn);
                if (strcmp(st.calls[i].name, fn) == 0) {
                        st.calls[i].n++;
                        return;
                }
        }
}

/* What NVML checks of a device call, then an injected failure. */
static nvmlReturn_t check(const char *fn, nvmlDevice_t h, struct dev **ret) {
        if (st.live <= 0)
                return NVML_ERROR_UNINITIALIZED;
        if (!h || h->index >= st.n_devs || h != &st.devs[h->index].h)
                return NVML_ERROR_INVALID_ARGUMENT;
        for (size_t i = 0; i < sizeof st.fails / sizeof st.fails[0]; i++)
                if (st.fails[i].r && st.fails[i].dev == h->index && strcmp(st.fails[i].name, fn) == 0)
                        return st.fails[i].r;
        *ret = &st.devs[h->index];
        return NVML_SUCCESS;
}

/* Every device call starts here. */
static nvmlReturn_t enter(const char *fn, nvmlDevice_t h, struct dev **ret) {
        count_call(fn);
        return check(fn, h, ret);
}

/* The opening of a device entry point: d is the device, out the pointer
 * the caller must not pass NULL. */
#define ENTER(device, out)                               \
        struct dev *d;                                   \
        nvmlReturn_t r_ = enter(__func__, (device), &d); \
        if (r_ != NVML_SUCCESS)                          \
                return r_;                               \
        if (!(out))                                      \
        return NVML_ERROR_INVALID_ARGUMENT

/* ---- test controls ---------------------------------------------------------- */

void standin_reset(void) {
        setup();
}
int standin_live(void) {
        return st.live;
}

unsigned standin_calls(const char *fn) {
        for (size_t i = 0; i < sizeof st.calls / sizeof st.calls[0]; i++)
                if (strcmp(st.calls[i].name, fn) == 0)
                        return st.calls[i].n;
        return 0;
}

/* fn on device dev answers r from now on; r = 0 clears. */
void standin_fail(const char *fn, unsigned dev, int r) {
        size_t free_slot = sizeof st.fails / sizeof st.fails[0];
        for (size_t i = 0; i < sizeof st.fails / sizeof st.fails[0]; i++) {
                if (st.fails[i].dev == dev && strcmp(st.fails[i].name, fn) == 0) {
                        st.fails[i].r = r;
                        return;
                }
                if (!st.fails[i].name[0] && free_slot == sizeof st.fails / sizeof st.fails[0])
                        free_slot = i;
        }
        if (free_slot < sizeof st.fails / sizeof st.fails[0]) {
                snprintf(st.fails[free_slot].name, sizeof st.fails[free_slot].name, "%s", fn);
                st.fails[free_slot].dev = dev;
                st.fails[free_slot].r = r;
        }
}

/* A driver reload: the energy counter starts again near 0. */
void standin_energy_reset(unsigned dev) {
        st.devs[dev].energy_mj = 1000;
}
/* No new utilisation samples while frozen. */
void standin_freeze(int frozen) {
        st.frozen = frozen;
}

/* ---- library ------------------------------------------------------------------ */

static const char *error_text(nvmlReturn_t r) {
        switch (r) {
        case 0:
                return "Success";
        case 1:
                return "Uninitialized";
        case 2:
                return "Invalid Argument";
        case 3:
                return "Not Supported";
        case 4:
                return "Insufficient Permissions";
        case 6:
                return "Not Found";
        case 7:
                return "Insufficient Size";
        case 9:
                return "Driver Not Loaded";
        case 15:
                return "GPU is lost";
        case 25:
                return "Argument version mismatch";
        default:
                return "Unknown Error";
        }
}

const char *nvmlErrorString(nvmlReturn_t result) {
        count_call(__func__);
        return error_text(result);
}

static nvmlReturn_t init(const char *fn) {
        count_call(fn);
        if (!st.set_up)
                setup();
#ifdef STANDIN_INITFAIL
        return NVML_ERROR_DRIVER_NOT_LOADED;
#endif
        st.live++;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void) {
        return init(__func__);
}
nvmlReturn_t nvmlShutdown(void) {
        count_call(__func__);
        if (st.live <= 0)
                return NVML_ERROR_UNINITIALIZED;
        st.live--;
        return NVML_SUCCESS;
}

static nvmlReturn_t get_count(const char *fn, unsigned int *count) {
        count_call(fn);
        if (st.live <= 0)
                return NVML_ERROR_UNINITIALIZED;
        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        *count = st.n_devs;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) {
        return get_count(__func__, deviceCount);
}

static nvmlReturn_t get_handle(const char *fn, unsigned int index, nvmlDevice_t *device) {
        struct dev *d;
        count_call(fn);
        if (st.live <= 0)
                return NVML_ERROR_UNINITIALIZED;
        if (index >= st.n_devs || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        nvmlReturn_t r = check(fn, &st.devs[index].h, &d);
        if (r == NVML_SUCCESS)
                *device = &d->h;
        return r;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
        return get_handle(__func__, index, device);
}

/* 52-byte v1 layout (busId[16], domain, bus, device, pciDeviceId,
 * pciSubSystemId, reserved0..3) or the 68-byte one (busIdLegacy[16], the
 * same five, busId[32]). */
static nvmlReturn_t get_pci(const char *fn, nvmlDevice_t device, nvmlPciInfo_t *pci, bool legacy_layout) {
        struct dev *d;
        nvmlReturn_t r = enter(fn, device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        put_str(pci, 0, 16, d->bus_legacy);
        put_u32(pci, 16, d->domain);
        put_u32(pci, 20, d->bus);
        put_u32(pci, 24, d->device);
        put_u32(pci, 28, d->pci_device_id);
        put_u32(pci, 32, 0x16c110de);
        if (legacy_layout)
                memset((unsigned char *)pci + 36, 0, 16);
        else
                put_str(pci, 36, 32, d->bus_id);
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
        return get_pci(__func__, device, pci, true);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
        ENTER(device, name);
        if (length < strlen(d->name) + 1)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(name, d->name, strlen(d->name) + 1);
        return NVML_SUCCESS;
}

/* v1: total, free, used, 24 bytes; used includes the reserve. */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
        ENTER(device, memory);
        put_u64(memory, 0, d->total);
        put_u64(memory, 8, d->total - d->used - d->reserved);
        put_u64(memory, 16, d->used + d->reserved);
        return NVML_SUCCESS;
}

#ifndef STANDIN_NOSYM
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
        ENTER(device, utilization);
        put_u32(utilization, 0, d->util_gpu);
        put_u32(utilization, 4, d->util_mem);
        return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
        ENTER(device, power);
        *power = d->power_mw;
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp) {
        ENTER(device, temp && sensorType == 0 /* NVML_TEMPERATURE_GPU */);
        *temp = d->temp_c;
        return NVML_SUCCESS;
}

/* Running processes: pid @0, usedGpuMemory @8, and from v2 on
 * gpuInstanceId @16, computeInstanceId @20 (0xFFFFFFFF outside MIG). */
static nvmlReturn_t list(const char *fn, nvmlDevice_t device, unsigned int *count, void *infos, unsigned which,
                         size_t stride) {
        struct dev *d;
        nvmlReturn_t r = enter(fn, device, &d);
        if (r != NVML_SUCCESS)
                return r;
        if (!count || (!infos && *count != 0))
                return NVML_ERROR_INVALID_ARGUMENT;
        unsigned need = 0;
        for (size_t i = 0; i < d->n_procs; i++)
                need += !!(d->procs[i].lists & which);
        if (infos && !st.grew) {
                /* a process started since the size query: one more than room */
                st.grew = true;
                *count += 1;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        if (*count < need) {
                *count = need;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        unsigned char *e = infos;
        for (size_t i = 0; i < d->n_procs; i++) {
                if (!(d->procs[i].lists & which))
                        continue;
                memset(e, 0, stride);
                put_u32(e, 0, d->procs[i].pid);
                put_u64(e, 8, d->procs[i].mem);
                if (stride == 24) {
                        put_u32(e, 16, 0xffffffffu);
                        put_u32(e, 20, 0xffffffffu);
                }
                e += stride;
        }
        *count = need;
        return NVML_SUCCESS;
}

/* nvmlReturn_t NAME(nvmlDevice_t device, unsigned int *infoCount, TYPE *infos) */
#define LIST_ENTRY(name, type, which, stride)                                          \
        nvmlReturn_t name(nvmlDevice_t device, unsigned int *infoCount, type *infos) { \
                return list(__func__, device, infoCount, infos, which, stride);        \
        }

LIST_ENTRY(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, LIST_C, 16)
LIST_ENTRY(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, LIST_G, 16)

#ifndef STANDIN_OLD
nvmlReturn_t nvmlInit_v2(void) {
        return init(__func__);
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
        return get_count(__func__, deviceCount);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
        return get_handle(__func__, index, device);
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
        return get_pci(__func__, device, pci, false);
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
        return get_pci(__func__, device, pci, false);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) {
        ENTER(device, minorNumber);
        *minorNumber = d->minor;
        return NVML_SUCCESS;
}

/* v2: version @0, total @8, reserved @16, free @24, used @32; the version
 * must be nvmlMemory_v2 = 40 | 2 << 24. */
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
        unsigned version;
        ENTER(device, memory);
        memcpy(&version, memory, 4);
        if (version != 0x02000028)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        put_u64(memory, 8, d->total);
        put_u64(memory, 16, d->reserved);
        put_u64(memory, 24, d->total - d->reserved - d->used);
        put_u64(memory, 32, d->used);
        return NVML_SUCCESS;
}

/* mJ since the driver loaded; each call sees it advanced by a step. */
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
        ENTER(device, energy);
        *energy = d->energy_mj;
        d->energy_mj += d->energy_step_mj;
        return NVML_SUCCESS;
}

LIST_ENTRY(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t, LIST_C, 24)
LIST_ENTRY(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t, LIST_C, 24)
LIST_ENTRY(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_t, LIST_G, 24)
LIST_ENTRY(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t, LIST_G, 24)
LIST_ENTRY(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t, LIST_M, 16)
LIST_ENTRY(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_t, LIST_M, 24)
LIST_ENTRY(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t, LIST_M, 24)

/* Per sampled process, two samples a round: one now with its smUtil, an
 * older one with half of it. pid @0, timeStamp @8, smUtil @16, memUtil
 * @20, encUtil @24, decUtil @28. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp) {
        ENTER(device, processSamplesCount);
        if (!utilization && !st.frozen)
                st.round++;
        unsigned long long now = SAMPLE_EPOCH_USEC + st.round * SAMPLE_PERIOD_USEC;
        unsigned need = 0;
        for (int pass = 0; pass < 2; pass++) {
                unsigned k = 0;
                for (size_t i = 0; i < d->n_procs; i++) {
                        const struct proc *p = &d->procs[i];
                        for (int old = 0; old < 2 && p->sm >= 0; old++) {
                                unsigned long long ts = now - (old ? SAMPLE_PERIOD_USEC / 2 : 0);
                                if (ts <= lastSeenTimeStamp)
                                        continue;
                                if (pass == 1) {
                                        unsigned char *e = (unsigned char *)utilization + 32 * k;
                                        memset(e, 0, 32);
                                        put_u32(e, 0, p->pid);
                                        put_u64(e, 8, ts);
                                        put_u32(e, 16, old ? (unsigned)p->sm / 2 : (unsigned)p->sm);
                                        put_u32(e, 20, 20);
                                        put_u32(e, 24, p->enc);
                                        put_u32(e, 28, p->dec);
                                }
                                k++;
                        }
                }
                if (pass == 0) {
                        need = k;
                        if (need == 0) {
                                *processSamplesCount = 0;
                                return NVML_ERROR_NOT_FOUND;
                        }
                        if (!utilization || *processSamplesCount < need) {
                                *processSamplesCount = need;
                                return NVML_ERROR_INSUFFICIENT_SIZE;
                        }
                }
        }
        *processSamplesCount = need;
        return NVML_SUCCESS;
}
#endif

/* SPDX-License-Identifier: MIT */
/* NVML backend: dlopen("libnvidia-ml.so.1"), newest entry points first,
 * device counters and per-process use each tick. See nvml.h for the API.
 * The layouts below are NVIDIA's nvml.h ones on LP64 (x86-64, aarch64), as
 * nvtop reads them too. */
#include "collect/accel/nvml.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <string.h>

#include "collect/accel/nvml-abi.h"
#include "collect/procfs-text.h"

/* ---- the NVML ABI ---------------------------------------------------------
 * Declared here rather than taken from NVIDIA's nvml.h, which is not on a
 * build machine without CUDA (and some copies of it, DCGM's, carry a 32-byte
 * nvmlProcessInfo_t that would misread every entry after the first). Only
 * what mlmond calls, laid out for LP64 and pinned by the asserts; the return
 * codes and the handle are in nvml-abi.h, shared with the tests' stand-in. */

#define NVML_TEMPERATURE_GPU 0
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96 /* nvmlDeviceGetName's largest name + NUL */

/* Entries of the plain Get*RunningProcesses; the _v2/_v3 entries are the same
 * plus gpuInstanceId and computeInstanceId, 24 bytes. */
typedef struct {
        unsigned int pid;
        unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
        unsigned int pid;
        unsigned long long usedGpuMemory;
        unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct {
        unsigned int pid;
        unsigned long long timeStamp; /* CPU µs */
        unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
        unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct {
        unsigned long long total, free, used; /* used includes the driver's reserve */
} nvmlMemory_t;
typedef struct {
        unsigned int version;
        unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
/* NVML_STRUCT_VERSION(Memory, 2): the size in the low bits, 2 in the top byte. */
#define NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* The 68-byte layout of GetPciInfo_v2/_v3. The plain call's older struct
 * is a 52-byte prefix of it with the same busId (now busIdLegacy) first. */
typedef struct {
        char busIdLegacy[16]; /* "0000:41:00.0" */
        unsigned int domain, bus, device;
        unsigned int pciDeviceId; /* device << 16 | vendor */
        unsigned int pciSubSystemId;
        char busId[32]; /* "00000000:41:00.0" */
} nvmlPciInfo_t;

_Static_assert(sizeof(nvmlReturn_t) == 4, "nvmlReturn_t");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t");
_Static_assert(offsetof(nvmlProcessInfo_v1_t, usedGpuMemory) == 8, "v1 usedGpuMemory");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t is 24 bytes, not 32");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, usedGpuMemory) == 8, "v2 usedGpuMemory");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, gpuInstanceId) == 16, "v2 gpuInstanceId");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, computeInstanceId) == 20, "v2 computeInstanceId");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, timeStamp) == 8, "timeStamp");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16, "smUtil");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, decUtil) == 28, "decUtil");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t");
_Static_assert(offsetof(nvmlMemory_v2_t, total) == 8 && offsetof(nvmlMemory_v2_t, reserved) == 16 &&
                       offsetof(nvmlMemory_v2_t, free) == 24 && offsetof(nvmlMemory_v2_t, used) == 32,
               "nvmlMemory_v2_t");
_Static_assert(NVML_MEMORY_V2 == 0x02000028, "nvmlMemory_v2");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t");
_Static_assert(offsetof(nvmlPciInfo_t, domain) == 16 && offsetof(nvmlPciInfo_t, pciDeviceId) == 28 &&
                       offsetof(nvmlPciInfo_t, busId) == 36,
               "nvmlPciInfo_t");

/* ---- entry points ---------------------------------------------------------- */

enum { LIST_COMPUTE, LIST_GRAPHICS, LIST_MPS, N_LISTS };

typedef nvmlReturn_t (*list_fn)(nvmlDevice_t, unsigned int *count, void *infos);

struct nvml_api {
        nvmlReturn_t (*init)(void);
        nvmlReturn_t (*shutdown)(void);
        const char *(*error_string)(nvmlReturn_t);
        nvmlReturn_t (*get_count)(unsigned int *);
        nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t *);
        nvmlReturn_t (*get_pci)(nvmlDevice_t, nvmlPciInfo_t *);
        nvmlReturn_t (*get_name)(nvmlDevice_t, char *, unsigned int);
        nvmlReturn_t (*get_minor)(nvmlDevice_t, unsigned int *);
        nvmlReturn_t (*get_mem_v2)(nvmlDevice_t, nvmlMemory_v2_t *);
        nvmlReturn_t (*get_mem)(nvmlDevice_t, nvmlMemory_t *);
        nvmlReturn_t (*get_util)(nvmlDevice_t, nvmlUtilization_t *);
        nvmlReturn_t (*get_power)(nvmlDevice_t, unsigned int *mw);
        nvmlReturn_t (*get_energy)(nvmlDevice_t, unsigned long long *mj);
        nvmlReturn_t (*get_temp)(nvmlDevice_t, int sensor, unsigned int *c);
        list_fn get_procs[N_LISTS];
        nvmlReturn_t (*get_proc_util)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *count,
                                      unsigned long long last_seen_usec);
};

/* Newest name first. Process lists: the plain name (the last) takes 16-byte
 * entries, the suffixed ones 24. */
static const struct symbol {
        size_t offset; /* of the pointer in struct nvml_api */
        bool required;
        const char *names[3];
} symbols[] = {
#define API(field) offsetof(struct nvml_api, field)
        { API(init), true, { "nvmlInit_v2", "nvmlInit" } },
        { API(shutdown), true, { "nvmlShutdown" } },
        { API(error_string), true, { "nvmlErrorString" } },
        { API(get_count), true, { "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount" } },
        { API(get_handle), true, { "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex" } },
        { API(get_pci), true, { "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo" } },
        { API(get_name), false, { "nvmlDeviceGetName" } },
        { API(get_minor), false, { "nvmlDeviceGetMinorNumber" } },
        /* one of the two memory calls is required, checked apart */
        { API(get_mem_v2), false, { "nvmlDeviceGetMemoryInfo_v2" } },
        { API(get_mem), false, { "nvmlDeviceGetMemoryInfo" } },
        { API(get_util), true, { "nvmlDeviceGetUtilizationRates" } },
        { API(get_power), true, { "nvmlDeviceGetPowerUsage" } },
        { API(get_energy), false, { "nvmlDeviceGetTotalEnergyConsumption" } },
        { API(get_temp), true, { "nvmlDeviceGetTemperature" } },
        { API(get_procs[LIST_COMPUTE]),
          true,
          { "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
            "nvmlDeviceGetComputeRunningProcesses" } },
        { API(get_procs[LIST_GRAPHICS]),
          true,
          { "nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2",
            "nvmlDeviceGetGraphicsRunningProcesses" } },
        { API(get_procs[LIST_MPS]),
          false,
          { "nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v2",
            "nvmlDeviceGetMPSComputeRunningProcesses" } },
        { API(get_proc_util), false, { "nvmlDeviceGetProcessUtilization" } },
#undef API
};

/* The calls made every tick, for logging a failure once per device. */
enum call {
        CALL_UTIL,
        CALL_MEM,
        CALL_POWER,
        CALL_ENERGY,
        CALL_TEMP,
        CALL_LIST_FIRST,
        CALL_PROC_UTIL = CALL_LIST_FIRST + N_LISTS,
        N_CALLS
};
static const char *const call_names[N_CALLS] = {
        [CALL_UTIL] = "utilisation",
        [CALL_MEM] = "memory",
        [CALL_POWER] = "power",
        [CALL_ENERGY] = "energy counter",
        [CALL_TEMP] = "temperature",
        [CALL_LIST_FIRST + LIST_COMPUTE] = "compute processes",
        [CALL_LIST_FIRST + LIST_GRAPHICS] = "graphics processes",
        [CALL_LIST_FIRST + LIST_MPS] = "MPS processes",
        [CALL_PROC_UTIL] = "process utilisation",
};

/* ---- limits ---------------------------------------------------------------- */

/* The largest nodes (HGX, DGX) carry 8 or 16 GPUs: a count above 64 is a
 * broken library, and the devices past it are left out. */
#define NVML_MAX_DEVICES 64
/* A sized query is retried while the list outgrows the buffer (processes
 * start between two calls); each retry adds a quarter plus 8 entries, so
 * four misses in a row within microseconds is a fork storm: the call counts
 * as failed this tick. */
#define SIZED_TRIES 4
/* Entries one list may have: a GPU holds at most a few hundred contexts
 * (an MPS server takes a few dozen clients per device); 16384 is far beyond
 * any real list and bounds the buffer at 512 KiB (32-byte samples). */
#define MAX_ENTRIES 16384
/* Plausibility bound on one device's mean power, watts: the hungriest parts
 * are rated 1000-1200 W (B200, GB200); an energy-counter step above twice
 * that over its interval is not a reading and is left out. */
#define NVML_DEVICE_MAX_W 2400.0

/* ---- state ------------------------------------------------------------------ */

struct nvml_dev {
        nvmlDevice_t handle;
        bool lost;        /* GPU_IS_LOST during this tick: its other calls skipped */
        bool mem_v1;      /* GetMemoryInfo_v2 refused: the plain call from now on */
        bool integrate;   /* no energy counter: energy from the power readings */
        bool energy_said; /* a counter step was left out and said so (info once, then debug) */
        bool has_energy_mark;
        uint64_t energy_mark_mj;
        usec_t energy_mark_usec;
        bool has_power_mark;
        double power_mark_w;
        usec_t power_mark_usec;
        double energy_j;
        unsigned long long util_seen_usec; /* newest process-utilisation sample taken */
        nvmlReturn_t failing[N_CALLS];     /* the code a call was last logged failing with; 0 = works */
};

struct nvml {
        void *dl;
        char lib[64]; /* for log lines */
        bool initialized;
        struct nvml_api api;
        size_t list_stride[N_LISTS];
        struct nvml_dev *devs;
        struct gpu_device *out;
        bool *procs_known;
        size_t n_devices;
        struct nvml_proc *procs;
        size_t n_procs;
        void *buf; /* scratch for the sized queries */
        size_t buf_size;
};

/* ---- helpers ------------------------------------------------------------------ */

static const char *nvml_errstr(const struct nvml *n, nvmlReturn_t r) {
        const char *s = n->api.error_string ? n->api.error_string(r) : NULL;
        return s ? s : "unknown error";
}

_printf_(4, 5) static int fail(char *err, size_t errlen, int r, const char *fmt, ...) {
        if (err && errlen > 0) {
                char msg[512];
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(msg, sizeof msg, fmt, ap);
                va_end(ap);
                str_printable(msg, err, errlen); /* library text: one line, whatever it holds */
        }
        return r;
}

static bool hex_field(const char **p, size_t min_digits, size_t max_digits, unsigned *ret) {
        size_t k = strspn(*p, "0123456789abcdefABCDEF");
        uint64_t v;

        if (k < min_digits || k > max_digits || word_to_hex(*p, k, &v) < 0)
                return false;
        *p += k;
        *ret = (unsigned)v;
        return true;
}

int nvml_normalize_bus_id(const char *s, char *ret, size_t size) {
        unsigned domain, bus, dev, fn;
        const char *p = s;

        /* DOMAIN:BB:DD.F, the domain 4 (legacy) or 8 (busId) hex digits */
        if (!s || !hex_field(&p, 4, 8, &domain) || *p++ != ':' || !hex_field(&p, 2, 2, &bus) || *p++ != ':' ||
            !hex_field(&p, 2, 2, &dev) || *p++ != '.' || !hex_field(&p, 1, 1, &fn) || *p)
                return -EINVAL;
        if (dev > 0x1f || fn > 7)
                return -EINVAL;
        int k = snprintf(ret, size, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
        return k < 0 || (size_t)k >= size ? -ENOBUFS : 0;
}

/* True when r is success. A failure is logged when it begins (or its code
 * changes), not every tick; the first success after it is logged too. */
static bool call_ok(struct nvml *n, struct nvml_dev *d, const struct gpu_device *g, enum call c, nvmlReturn_t r) {
        if (r == NVML_SUCCESS) {
                if (d->failing[c] == NVML_ERROR_GPU_IS_LOST)
                        log_info("nvml: %s: the device answers again", g->id);
                else if (d->failing[c] != NVML_SUCCESS)
                        log_info("nvml: %s: %s readable again", g->id, call_names[c]);
                d->failing[c] = NVML_SUCCESS;
                return true;
        }
        if (r == NVML_ERROR_GPU_IS_LOST) {
                /* its other calls are skipped this tick: one line says it all */
                if (d->failing[c] != r)
                        log_warning("nvml: %s: %s (%d): every value of the device unknown", g->id, nvml_errstr(n, r),
                                    r);
                d->lost = true;
        } else if (d->failing[c] != r)
                /* NOT_SUPPORTED is the board's nature (no power sensor on
                 * some GeForce, no process utilisation under MIG): not news */
                log_internal(r == NVML_ERROR_NOT_SUPPORTED ? LOG_DEBUG : LOG_WARNING, 0,
                             "nvml: %s: %s unknown: %s (%d)", g->id, call_names[c], nvml_errstr(n, r), r);
        d->failing[c] = r;
        return false;
}

static int grow_buf(struct nvml *n, size_t bytes) {
        if (bytes <= n->buf_size)
                return 0;
        void *b = realloc(n->buf, bytes);
        if (!b)
                return -ENOMEM;
        n->buf = b;
        n->buf_size = bytes;
        return 0;
}

static int reserve_procs(struct nvml *n, size_t more) {
        if (more > SIZE_MAX - n->n_procs || !GREEDY_REALLOC(n->procs, n->n_procs + more))
                return -ENOMEM;
        return 0;
}

/* One NVML "sized" query: call with no buffer for the count, then with room
 * to spare, again while the answer outgrows it. Entries land in n->buf. */
struct sized_query {
        nvmlReturn_t (*call)(const struct sized_query *q, unsigned int *count, void *buf);
        nvmlDevice_t handle;
        list_fn list;
        nvmlReturn_t (*proc_util)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned int *, unsigned long long);
        unsigned long long since_usec;
        size_t stride;
};

static nvmlReturn_t call_list(const struct sized_query *q, unsigned int *count, void *buf) {
        return q->list(q->handle, count, buf);
}

static nvmlReturn_t call_proc_util(const struct sized_query *q, unsigned int *count, void *buf) {
        return q->proc_util(q->handle, buf, count, q->since_usec);
}

/* Returns 0 with *ret_r the last NVML code and *ret_count the entries when
 * it is success, or -ENOMEM. */
static int sized_query(struct nvml *n, const struct sized_query *q, nvmlReturn_t *ret_r, unsigned *ret_count) {
        unsigned int count = 0, room = 0;
        nvmlReturn_t r = q->call(q, &count, NULL);

        /* Most calls answer INSUFFICIENT_SIZE with the count; success with a
         * count > 0 and no buffer is read as the same. */
        if (r == NVML_SUCCESS && count > 0)
                r = NVML_ERROR_INSUFFICIENT_SIZE;
        for (unsigned tries = 0; r == NVML_ERROR_INSUFFICIENT_SIZE && tries < SIZED_TRIES; tries++) {
                if (count > MAX_ENTRIES)
                        break;
                room = count + count / 4 + 8;
                if (grow_buf(n, room * q->stride) < 0)
                        return -ENOMEM;
                memset(n->buf, 0, room * q->stride);
                count = room;
                r = q->call(q, &count, n->buf);
        }
        *ret_r = r;
        *ret_count = r == NVML_SUCCESS ? (count < room ? count : room) : 0;
        return 0;
}

/* ---- open / close ------------------------------------------------------------ */

static int resolve(struct nvml *n, char *err, size_t errlen) {
        char used[1024] = "";
        size_t used_len = 0;

        for (size_t i = 0; i < ELEMENTSOF(symbols); i++) {
                const struct symbol *s = &symbols[i];
                void *f = NULL;
                size_t v, n_names = 0;
                while (n_names < ELEMENTSOF(s->names) && s->names[n_names])
                        n_names++;
                for (v = 0; v < n_names; v++)
                        if ((f = dlsym(n->dl, s->names[v])))
                                break;
                if (!f && s->required)
                        return fail(err, errlen, -ENOSYS, "%s: no %s%s%s%s%s", n->lib, s->names[0],
                                    s->names[1] ? " or " : "", s->names[1] ? s->names[1] : "",
                                    s->names[2] ? " or " : "", s->names[2] ? s->names[2] : "");
                /* dlsym gives an object pointer; POSIX guarantees it converts */
                memcpy((char *)&n->api + s->offset, &f, sizeof f);
                if (!f)
                        continue;
                if (s->offset >= offsetof(struct nvml_api, get_procs) &&
                    s->offset < offsetof(struct nvml_api, get_procs) + sizeof n->api.get_procs) {
                        size_t l = (s->offset - offsetof(struct nvml_api, get_procs)) / sizeof(list_fn);
                        bool plain = v == n_names - 1; /* the unsuffixed name */
                        n->list_stride[l] = plain ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_v2_t);
                }
                int k = snprintf(used + used_len, sizeof used - used_len, " %s", s->names[v]);
                if (k > 0 && (size_t)k < sizeof used - used_len)
                        used_len += (size_t)k;
        }
        if (!n->api.get_mem_v2 && !n->api.get_mem)
                return fail(err, errlen, -ENOSYS, "%s: no nvmlDeviceGetMemoryInfo_v2 or nvmlDeviceGetMemoryInfo",
                            n->lib);
        log_debug("nvml: %s: using%s", n->lib, used);
        return 0;
}

/* Identity, read once: PCI address (the id), /dev/nvidiaN minor, name. */
static void identify(struct nvml *n, unsigned index, struct nvml_dev *d, struct gpu_device *g) {
        nvmlPciInfo_t pci = {};
        unsigned int minor;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";

        snprintf(g->driver, sizeof g->driver, "nvidia");
        snprintf(g->kind, sizeof g->kind, "gpu");
        if (n->api.get_minor && n->api.get_minor(d->handle, &minor) == NVML_SUCCESS)
                snprintf(g->node, sizeof g->node, "nvidia%u", minor);
        else
                snprintf(g->node, sizeof g->node, "nvidia%u", index);

        nvmlReturn_t r = n->api.get_pci(d->handle, &pci);
        if (r == NVML_SUCCESS) {
                pci.busIdLegacy[sizeof pci.busIdLegacy - 1] = 0;
                pci.busId[sizeof pci.busId - 1] = 0;
                if (nvml_normalize_bus_id(pci.busIdLegacy, g->id, sizeof g->id) < 0 &&
                    nvml_normalize_bus_id(pci.busId, g->id, sizeof g->id) < 0)
                        g->id[0] = 0;
                if (pci.pciDeviceId != 0) {
                        snprintf(g->vendor, sizeof g->vendor, "0x%04x", pci.pciDeviceId & 0xffff);
                        snprintf(g->model, sizeof g->model, "0x%04x", pci.pciDeviceId >> 16);
                }
        }
        if (!g->id[0]) {
                snprintf(g->id, sizeof g->id, "%s", g->node);
                log_warning("nvml: device %u: no PCI address (%s), named %s", index,
                            r == NVML_SUCCESS ? "unparsable" : nvml_errstr(n, r), g->id);
        }

        if (n->api.get_name && n->api.get_name(d->handle, name, sizeof name) == NVML_SUCCESS) {
                name[sizeof name - 1] = 0;
                snprintf(g->name, sizeof g->name, "%.*s", (int)sizeof g->name - 1, name);
        }
        d->integrate = !n->api.get_energy;
}

int nvml_open(const char *path, struct nvml **ret, char *err, size_t errlen) {
        _cleanup_(nvml_closep) struct nvml *n = NULL;
        unsigned int count = 0, skipped = 0;
        nvmlReturn_t r, skip_r = NVML_SUCCESS;

        if (!path)
                path = NVML_DEFAULT_LIBRARY;
        if (!*path)
                return fail(err, errlen, -EINVAL, "nvml: empty library path");

        n = calloc(1, sizeof *n);
        if (!n)
                return fail(err, errlen, -ENOMEM, "nvml: out of memory");
        snprintf(n->lib, sizeof n->lib, "%s", path);

        /* RTLD_LOCAL: NVML's symbols stay out of the global namespace */
        n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!n->dl) {
                const char *e = dlerror();
                return fail(err, errlen, -ENOENT, "%s", e ? e : path);
        }
        int k = resolve(n, err, errlen);
        if (k < 0)
                return k;

        r = n->api.init();
        if (r != NVML_SUCCESS)
                return fail(err, errlen, -EIO, "%s: nvmlInit: %s (%d)", n->lib, nvml_errstr(n, r), r);
        n->initialized = true;

        r = n->api.get_count(&count);
        if (r != NVML_SUCCESS)
                return fail(err, errlen, -EIO, "%s: nvmlDeviceGetCount: %s (%d)", n->lib, nvml_errstr(n, r), r);
        if (count == 0)
                return fail(err, errlen, -ENODEV, "%s: no NVIDIA device", n->lib);
        unsigned reported = count;
        if (count > NVML_MAX_DEVICES)
                count = NVML_MAX_DEVICES;

        n->devs = calloc(count, sizeof *n->devs);
        n->out = calloc(count, sizeof *n->out);
        n->procs_known = calloc(count, sizeof *n->procs_known);
        if (!n->devs || !n->out || !n->procs_known)
                return fail(err, errlen, -ENOMEM, "nvml: out of memory");

        for (unsigned i = 0; i < count; i++) {
                struct nvml_dev *d = &n->devs[n->n_devices];
                /* A device the caller may not use (a container's cgroup, a
                 * GPU fallen off the bus) answers NO_PERMISSION or GPU_IS_LOST
                 * here: the others still work. */
                r = n->api.get_handle(i, &d->handle);
                if (r != NVML_SUCCESS) {
                        if (skipped++ == 0)
                                skip_r = r;
                        continue;
                }
                identify(n, i, d, &n->out[n->n_devices]);
                n->n_devices++;
        }
        if (n->n_devices == 0)
                return fail(err, errlen, -ENODEV,
                            "%s: no usable NVIDIA device of %u: nvmlDeviceGetHandleByIndex: %s (%d)", n->lib, count,
                            nvml_errstr(n, skip_r), skip_r);
        if (reported > count)
                log_warning("nvml: %u devices reported, using the first %u", reported, count);
        if (skipped > 0)
                log_warning("nvml: %u of %u devices skipped: nvmlDeviceGetHandleByIndex: %s (%d)", skipped, count,
                            nvml_errstr(n, skip_r), skip_r);

        *ret = TAKE_PTR(n);
        return 0;
}

void nvml_close(struct nvml *n) {
        if (!n)
                return;
        if (n->initialized)
                n->api.shutdown();
        if (n->dl)
                dlclose(n->dl);
        free(n->devs);
        free(n->out);
        free(n->procs_known);
        free(n->procs);
        free(n->buf);
        free(n);
}

size_t nvml_device_count(const struct nvml *n) {
        return n ? n->n_devices : 0;
}

/* ---- device counters ------------------------------------------------------------ */

static void read_memory(struct nvml *n, struct nvml_dev *d, struct gpu_device *g) {
        nvmlReturn_t r;

        /* _v2's used leaves out the driver's reserve, which the plain call
         * counts as used: the figure that matches what processes hold */
        if (n->api.get_mem_v2 && !d->mem_v1) {
                nvmlMemory_v2_t m = { .version = NVML_MEMORY_V2 };
                r = n->api.get_mem_v2(d->handle, &m);
                bool refused = r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH || r == NVML_ERROR_NOT_SUPPORTED ||
                               r == NVML_ERROR_FUNCTION_NOT_FOUND;
                if (!refused || !n->api.get_mem) {
                        if (call_ok(n, d, g, CALL_MEM, r)) {
                                g->has_mem_used = g->has_mem_total = true;
                                g->mem_used_bytes = m.used;
                                g->mem_total_bytes = m.total;
                        }
                        return;
                }
                log_debug("nvml: %s: nvmlDeviceGetMemoryInfo_v2: %s, using the plain call", g->id, nvml_errstr(n, r));
                d->mem_v1 = true;
        }
        nvmlMemory_t m = {};
        if (call_ok(n, d, g, CALL_MEM, n->api.get_mem(d->handle, &m))) {
                g->has_mem_used = g->has_mem_total = true;
                g->mem_used_bytes = m.used;
                g->mem_total_bytes = m.total;
        }
}

/* A counter step left out: said at info the first time, then at debug, so
 * a counter that keeps misbehaving does not fill the log. */
static void energy_step_skipped(struct nvml_dev *d, const struct gpu_device *g, const char *why) {
        log_internal(d->energy_said ? LOG_DEBUG : LOG_INFO, 0, "nvml: %s: energy counter %s, interval left out", g->id,
                     why);
        d->energy_said = true;
}

static void energy_from_counter(struct nvml_dev *d, struct gpu_device *g, uint64_t mj, usec_t now_usec) {
        if (d->has_energy_mark && mj < d->energy_mark_mj)
                energy_step_skipped(d, g, "went back (driver reloaded)");
        else if (d->has_energy_mark) {
                double step_j = (double)(mj - d->energy_mark_mj) / 1000.0;
                double dt_s = now_usec > d->energy_mark_usec ? (double)(now_usec - d->energy_mark_usec) / USEC_PER_SEC
                                                             : 0;
                if (step_j > NVML_DEVICE_MAX_W * dt_s)
                        energy_step_skipped(d, g, "jumped implausibly");
                else
                        d->energy_j += step_j;
        }
        d->has_energy_mark = true;
        d->energy_mark_mj = mj;
        d->energy_mark_usec = now_usec;
        g->has_energy = true;
        g->energy_j = d->energy_j;
}

/* Trapezoid rule over consecutive power readings; an interval with an
 * unknown end is left out rather than guessed. */
static void energy_from_power(struct nvml_dev *d, struct gpu_device *g, usec_t now_usec) {
        if (!g->has_power) {
                d->has_power_mark = false;
                return;
        }
        if (d->has_power_mark && now_usec > d->power_mark_usec)
                d->energy_j += (d->power_mark_w + g->power_w) / 2.0 * (double)(now_usec - d->power_mark_usec) /
                               USEC_PER_SEC;
        d->has_power_mark = true;
        d->power_mark_w = g->power_w;
        d->power_mark_usec = now_usec;
        g->has_energy = true;
        g->energy_j = d->energy_j;
}

static void read_energy(struct nvml *n, struct nvml_dev *d, struct gpu_device *g, usec_t now_usec) {
        if (!d->integrate) {
                unsigned long long mj = 0;
                nvmlReturn_t r = n->api.get_energy(d->handle, &mj);
                if (r != NVML_ERROR_NOT_SUPPORTED) {
                        if (call_ok(n, d, g, CALL_ENERGY, r))
                                energy_from_counter(d, g, mj, now_usec);
                        return;
                }
                /* before Volta: no counter */
                log_debug("nvml: %s: no energy counter, integrating the power", g->id);
                d->integrate = true;
        }
        energy_from_power(d, g, now_usec);
}

static void read_device(struct nvml *n, struct nvml_dev *d, struct gpu_device *g, usec_t now_usec) {
        nvmlUtilization_t u;
        unsigned int mw, temp;

        g->has_busy = g->has_mem_used = g->has_mem_total = g->has_power = g->has_energy = g->has_temp = false;
        d->lost = false;

        if (call_ok(n, d, g, CALL_UTIL, n->api.get_util(d->handle, &u)) && u.gpu <= 100) {
                g->has_busy = true;
                g->busy_pct = u.gpu;
        }
        if (!d->lost)
                read_memory(n, d, g);
        if (!d->lost && call_ok(n, d, g, CALL_POWER, n->api.get_power(d->handle, &mw))) {
                g->has_power = true;
                g->power_w = mw / 1000.0;
        }
        if (!d->lost && call_ok(n, d, g, CALL_TEMP, n->api.get_temp(d->handle, NVML_TEMPERATURE_GPU, &temp))) {
                g->has_temp = true;
                g->temp_c = temp;
        }
        if (d->lost)
                d->has_power_mark = false; /* the next power interval has an unknown start */
        else
                read_energy(n, d, g, now_usec);
}

/* ---- processes ------------------------------------------------------------------ */

static int cmp_proc_pid(const void *a, const void *b) {
        const struct nvml_proc *x = a, *y = b;
        return (x->pid > y->pid) - (x->pid < y->pid);
}

static int cmp_sample(const void *a, const void *b) {
        const nvmlProcessUtilizationSample_t *x = a, *y = b;
        if (x->pid != y->pid)
                return (x->pid > y->pid) - (x->pid < y->pid);
        return (x->timeStamp > y->timeStamp) - (x->timeStamp < y->timeStamp);
}

/* Appends one list's entries for device i; *ret_ok false when unknown. */
static int read_list(struct nvml *n, size_t i, int l, bool *ret_ok) {
        struct nvml_dev *d = &n->devs[i];
        const struct gpu_device *g = &n->out[i];
        struct sized_query q = {
                .call = call_list, .handle = d->handle, .list = n->api.get_procs[l], .stride = n->list_stride[l]
        };
        nvmlReturn_t r;
        unsigned count;

        *ret_ok = true;
        if (!q.list)
                return 0;
        int k = sized_query(n, &q, &r, &count);
        if (k < 0)
                return k;
        if (l == LIST_MPS && r == NVML_ERROR_NOT_SUPPORTED)
                return 0; /* no MPS on this device: an empty list */
        if (!call_ok(n, d, g, CALL_LIST_FIRST + l, r)) {
                *ret_ok = false;
                return 0;
        }
        if (reserve_procs(n, count) < 0)
                return -ENOMEM;
        for (unsigned e = 0; e < count; e++) {
                nvmlProcessInfo_v1_t info; /* the v2 entry begins with the same two fields */
                memcpy(&info, (const char *)n->buf + e * q.stride, sizeof info);
                struct nvml_proc *p = &n->procs[n->n_procs++];
                *p = (struct nvml_proc){
                        .pid = (int)info.pid,
                        .device = i,
                        .has_mem = info.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL,
                        .mem_bytes = info.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL ? info.usedGpuMemory : 0,
                };
                memcpy(p->device_id, g->id, sizeof p->device_id);
        }
        return 0;
}

/* One record per pid: a process with both a compute and a graphics context
 * is listed twice with the same usedGpuMemory (the process's, not the
 * context's), so the largest known value is kept, never the sum. */
static size_t merge_pids(struct nvml_proc *p, size_t n) {
        size_t w = 0;
        sort_array(p, n, sizeof *p, cmp_proc_pid);
        for (size_t r = 0; r < n; r++) {
                if (w > 0 && p[w - 1].pid == p[r].pid) {
                        struct nvml_proc *a = &p[w - 1];
                        if (p[r].has_mem && (!a->has_mem || p[r].mem_bytes > a->mem_bytes)) {
                                a->has_mem = true;
                                a->mem_bytes = p[r].mem_bytes;
                        }
                } else
                        p[w++] = p[r];
        }
        return w;
}

static bool sample_valid(const nvmlProcessUtilizationSample_t *s) {
        /* percentages; larger values come from drivers that have been seen
         * to report garbage for a process just started or ended */
        return s->smUtil <= 100 && s->memUtil <= 100 && s->encUtil <= 100 && s->decUtil <= 100;
}

/* Joins the samples newer than the last taken with procs[0..np) (sorted by
 * pid). A listed process without a new sample was idle: 0 %. */
static int read_proc_util(struct nvml *n, struct nvml_dev *d, const struct gpu_device *g, struct nvml_proc *procs,
                          size_t np) {
        struct sized_query q = { .call = call_proc_util,
                                 .handle = d->handle,
                                 .proc_util = n->api.get_proc_util,
                                 .since_usec = d->util_seen_usec,
                                 .stride = sizeof(nvmlProcessUtilizationSample_t) };
        nvmlReturn_t r;
        unsigned count;

        if (!q.proc_util || np == 0)
                return 0;
        int k = sized_query(n, &q, &r, &count);
        if (k < 0)
                return k;
        if (r == NVML_ERROR_NOT_FOUND) {
                /* no sample newer than the last: nothing ran */
                (void)call_ok(n, d, g, CALL_PROC_UTIL, NVML_SUCCESS);
                count = 0;
        } else if (!call_ok(n, d, g, CALL_PROC_UTIL, r))
                return 0;

        for (size_t i = 0; i < np; i++) {
                procs[i].has_util = true;
                procs[i].sm_util_pct = procs[i].enc_util_pct = procs[i].dec_util_pct = 0;
        }
        nvmlProcessUtilizationSample_t *s = n->buf;
        sort_array(s, count, sizeof *s, cmp_sample); /* by pid, then oldest first */
        unsigned long long newest = d->util_seen_usec;
        size_t b;
        for (size_t a = 0; a < count; a = b) {
                const nvmlProcessUtilizationSample_t *take = NULL;
                bool rejected = false;
                for (b = a; b < count && s[b].pid == s[a].pid; b++) {
                        if (s[b].timeStamp <= d->util_seen_usec)
                                continue; /* the driver should not return these */
                        if (sample_valid(&s[b]))
                                take = &s[b];
                        else
                                rejected = true;
                }
                struct nvml_proc key = { .pid = (int)s[a].pid };
                struct nvml_proc *p = bsearch(&key, procs, np, sizeof *procs, cmp_proc_pid);
                if (!p)
                        continue; /* a process the lists do not show (yet, or any more) */
                if (take) {
                        p->sm_util_pct = take->smUtil;
                        p->enc_util_pct = take->encUtil;
                        p->dec_util_pct = take->decUtil;
                        if (take->timeStamp > newest)
                                newest = take->timeStamp;
                } else if (rejected)
                        p->has_util = false;
        }
        d->util_seen_usec = newest;
        return 0;
}

static int read_procs(struct nvml *n, size_t i) {
        struct nvml_dev *d = &n->devs[i];
        size_t start = n->n_procs;
        bool known = !d->lost;

        for (int l = 0; l < N_LISTS && !d->lost; l++) {
                bool ok;
                int k = read_list(n, i, l, &ok);
                if (k < 0)
                        return k;
                known = known && ok;
        }
        n->n_procs = start + merge_pids(n->procs + start, n->n_procs - start);
        n->procs_known[i] = known && !d->lost;
        if (d->lost)
                return 0;
        return read_proc_util(n, d, &n->out[i], n->procs + start, n->n_procs - start);
}

int nvml_sample(struct nvml *n, usec_t now_usec, struct nvml_snapshot *ret) {
        n->n_procs = 0;
        for (size_t i = 0; i < n->n_devices; i++) {
                read_device(n, &n->devs[i], &n->out[i], now_usec);
                int k = read_procs(n, i);
                if (k < 0)
                        return k;
        }
        *ret = (struct nvml_snapshot){
                .devices = n->out,
                .n_devices = n->n_devices,
                .procs_known = n->procs_known,
                .procs = n->procs,
                .n_procs = n->n_procs,
        };
        return 0;
}

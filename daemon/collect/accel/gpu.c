/* SPDX-License-Identifier: MIT */
#include "collect/accel/gpu.h"

#include <string.h>

#include "util.h"

/* Copies a name that may fill its source array, always terminated. */
static void copy_name(char *dst, size_t size, const char *src) {
        size_t l = strnlen(src, size - 1);
        memcpy(dst, src, l);
        dst[l] = 0;
}

/* The element of v[0 .. *n) whose name (a NUL-terminated char array of
 * name_size bytes at the start of each element) is name; else a zeroed one appended with
 * that name, or NULL when max are there already. */
static void *named_get(void *v, size_t *n, size_t max, size_t size, size_t name_size, const char *name) {
        char *e = v;
        for (size_t i = 0; i < *n; i++, e += size)
                if (streq(e, name))
                        return e;
        if (*n == max)
                return NULL;
        (*n)++;
        memset(e, 0, size);
        copy_name(e, name_size, name);
        return e;
}

struct gpu_use *gpu_use_get(struct gpu_use *uses, size_t *n, size_t max, const char *device) {
        return named_get(uses, n, max, sizeof *uses, sizeof uses->device, device);
}

void gpu_use_add_engine(struct gpu_use *u, const char *name, bool known, double pct) {
        struct gpu_engine *e = named_get(u->engines, &u->n_engines, GPU_MAX_ENGINES, sizeof *e, sizeof e->name, name);
        if (e && known) {
                e->util_pct = (e->has_util ? e->util_pct : 0) + pct;
                e->has_util = true;
        }
}

void gpu_use_add_region(struct gpu_use *u, const char *name, uint64_t bytes) {
        u->has_mem = true;
        u->mem_bytes += bytes;
        struct gpu_region *g = named_get(u->regions, &u->n_regions, GPU_MAX_REGIONS, sizeof *g, sizeof g->name, name);
        if (g)
                g->resident_bytes += bytes;
}

void gpu_use_finish(struct gpu_use *u) {
        u->has_util = false;
        for (size_t j = 0; j < u->n_engines; j++) {
                struct gpu_engine *e = &u->engines[j];
                if (!e->has_util)
                        continue;
                if (e->util_pct > 100.0) /* clients of one class add up past the engines' capacity */
                        e->util_pct = 100.0;
                if (!u->has_util || e->util_pct > u->util_pct)
                        u->util_pct = e->util_pct;
                u->has_util = true;
        }
}

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

struct gpu_use *gpu_use_get(struct gpu_use *uses, size_t *n, size_t max, const char *device) {
        for (size_t i = 0; i < *n; i++)
                if (streq(uses[i].device, device))
                        return &uses[i];
        if (*n == max)
                return NULL;
        struct gpu_use *u = &uses[(*n)++];
        *u = (struct gpu_use){ 0 };
        copy_name(u->device, sizeof u->device, device);
        return u;
}

void gpu_use_add_engine(struct gpu_use *u, const char *name, bool known, double pct) {
        struct gpu_engine *e = NULL;
        for (size_t i = 0; i < u->n_engines && !e; i++)
                if (streq(u->engines[i].name, name))
                        e = &u->engines[i];
        if (!e) {
                if (u->n_engines == GPU_MAX_ENGINES)
                        return;
                e = &u->engines[u->n_engines++];
                *e = (struct gpu_engine){ 0 };
                copy_name(e->name, sizeof e->name, name);
        }
        if (known) {
                e->util_pct = (e->has_util ? e->util_pct : 0) + pct;
                e->has_util = true;
        }
}

void gpu_use_add_region(struct gpu_use *u, const char *name, uint64_t bytes) {
        u->has_mem = true;
        u->mem_bytes += bytes;
        struct gpu_region *g = NULL;
        for (size_t i = 0; i < u->n_regions && !g; i++)
                if (streq(u->regions[i].name, name))
                        g = &u->regions[i];
        if (!g) {
                if (u->n_regions == GPU_MAX_REGIONS)
                        return;
                g = &u->regions[u->n_regions++];
                *g = (struct gpu_region){ 0 };
                copy_name(g->name, sizeof g->name, name);
        }
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

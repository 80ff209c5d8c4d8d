/* SPDX-License-Identifier: MIT */
#include "collect/accel/gpu.h"

#include <string.h>

#include "util.h"

void *gpu_named_get(void *v, size_t *n, size_t max, size_t size, size_t name_size, const char *name, size_t len,
                    bool *ret_added) {
        char *e = v;
        if (ret_added)
                *ret_added = false;
        for (size_t i = 0; i < *n; i++, e += size)
                if (len < name_size && strncmp(e, name, len) == 0 && e[len] == 0)
                        return e;
        if (*n == max)
                return NULL;
        (*n)++;
        memset(e, 0, size);
        memcpy(e, name, len < name_size ? len : name_size - 1);
        if (ret_added)
                *ret_added = true;
        return e;
}

struct gpu_use *gpu_use_get(struct gpu_use *uses, size_t *n, size_t max, const char *device) {
        return gpu_named_get(uses, n, max, sizeof *uses, sizeof uses->device, device, strlen(device), NULL);
}

void gpu_use_add_engine(struct gpu_use *u, const char *name, bool known, double pct) {
        struct gpu_engine *e = gpu_named_get(u->engines, &u->n_engines, GPU_MAX_ENGINES, sizeof *e, sizeof e->name,
                                             name, strlen(name), NULL);
        if (e && known) {
                e->util_pct = (e->has_util ? e->util_pct : 0) + pct;
                e->has_util = true;
        }
}

void gpu_use_add_region(struct gpu_use *u, const char *name, uint64_t bytes) {
        u->has_mem = true;
        u->mem_bytes += bytes;
        struct gpu_region *g = gpu_named_get(u->regions, &u->n_regions, GPU_MAX_REGIONS, sizeof *g, sizeof g->name,
                                             name, strlen(name), NULL);
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

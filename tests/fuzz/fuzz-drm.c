/* SPDX-License-Identifier: MIT */
/* libFuzzer target: drm_fdinfo_parse() on the input, then the input cut in
 * two at its middle as two readings of one client, one second apart,
 * through the client table: every utilisation known must be in [0, 100].
 *
 *   tools/fuzz.sh 60 drm
 *
 * Also #included by tests/gpu/test-drm.c, which runs it on the fixture
 * files cut and spliced. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collect/accel/drm.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool fuzz_name_ok(const char *s, size_t size) {
        size_t n = strnlen(s, size);
        return n > 0 && n < size;
}

static void fuzz_check_info(const struct drm_fdinfo *fi) {
        if (!fuzz_name_ok(fi->driver, sizeof fi->driver) || strnlen(fi->pdev, sizeof fi->pdev) >= sizeof fi->pdev)
                abort();
        if (fi->n_engines > GPU_MAX_ENGINES || fi->n_regions > GPU_MAX_REGIONS)
                abort();
        for (size_t i = 0; i < fi->n_engines; i++)
                if (!fuzz_name_ok(fi->engines[i].name, sizeof fi->engines[i].name) || fi->engines[i].capacity == 0)
                        abort();
        for (size_t i = 0; i < fi->n_regions; i++) {
                const struct drm_region_stat *r = &fi->regions[i];
                uint64_t want = r->has_resident ? r->resident_bytes : r->has_memory ? r->memory_bytes : 0;
                if (!fuzz_name_ok(r->name, sizeof r->name) || drm_region_resident(r) != want)
                        abort();
        }
}

static void fuzz_check_engines(const struct drm_fdinfo *fi, const struct gpu_engine *eng) {
        for (size_t i = 0; i < fi->n_engines; i++) {
                if (!streq(eng[i].name, fi->engines[i].name))
                        abort();
                if (eng[i].has_util && !(isfinite(eng[i].util_pct) && eng[i].util_pct >= 0 && eng[i].util_pct <= 100))
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *)data;
        struct drm_fdinfo a, b;
        struct gpu_engine eng[GPU_MAX_ENGINES];
        struct drm_clients *t = NULL;
        size_t half = size / 2;

        if (drm_fdinfo_parse(text, size, &a) == 0)
                fuzz_check_info(&a);

        if (drm_fdinfo_parse(text, half, &a) < 0 || drm_fdinfo_parse(text + half, size - half, &b) < 0)
                return 0;
        fuzz_check_info(&a);
        fuzz_check_info(&b);
        /* one client: the second reading keyed as the first */
        b.has_client_id = a.has_client_id;
        b.client_id = a.client_id;
        if (drm_clients_new(&t) < 0)
                return 0;
        drm_clients_begin(t, 1000000000ULL);
        if (drm_clients_observe(t, "dev", 1, 3, &a, eng, NULL) != 1)
                abort();
        fuzz_check_engines(&a, eng);
        if (drm_clients_observe(t, "dev", 2, 3, &a, eng, NULL) != (a.has_client_id ? 0 : 1))
                abort(); /* the same client in the same sweep: a duplicate (without an id: another fd) */
        drm_clients_end(t, 2000000ULL);
        drm_clients_begin(t, 1001000000ULL);
        if (drm_clients_observe(t, "dev", 1, 3, &b, eng, NULL) != 1)
                abort();
        fuzz_check_engines(&b, eng);
        drm_clients_end(t, 0);
        if (drm_clients_count(t) != 1)
                abort();
        drm_clients_free(t);
        return 0;
}

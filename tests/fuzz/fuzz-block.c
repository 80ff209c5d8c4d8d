/* SPDX-License-Identifier: MIT */
/* libFuzzer target for daemon/store/block.c, the stored sample blocks:
 *  - the input as a block: if it decodes, it encodes again, and that
 *    decodes to the same samples;
 *  - the input as the samples themselves (the bytes laid over struct
 *    sample, flags made booleans, a rate whose flag is off 0): they encode,
 *    and decode back bit for bit;
 *  - the input as a packed row of the minute or hour tier (store/tier.c)
 *    and as a packed head row (store/head.c): if it unpacks, its figures
 *    pack again and unpack to the same;
 *  - the samples above as head rows: each packs, and unpacks bit for bit.
 *
 *   tools/fuzz.sh 60 block */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/block.h"
#include "store/head.h"
#include "store/tier.h"

#include "fuzz/fuzz-assert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The fields a block keeps, compared as bits (NaN included). */
static bool same(const struct sample *a, const struct sample *b) {
        struct sample x = *a, y = *b;
        /* padding aside: copy field by field into zeroed structs */
        struct sample cx, cy;
        memset(&cx, 0, sizeof cx);
        memset(&cy, 0, sizeof cy);
#define COPY(f)     \
        cx.f = x.f; \
        cy.f = y.f
        COPY(ts_ms);
        COPY(interval_us);
        COPY(has_cpu_pct);
        COPY(cpu_pct);
        COPY(cpu_time_ns);
        COPY(user_time_ns);
        COPY(system_time_ns);
        COPY(has_rss);
        COPY(rss_bytes);
        COPY(rss_anon_bytes);
        COPY(has_peak_rss);
        COPY(peak_rss_bytes);
        COPY(threads);
        COPY(processes);
        COPY(has_io);
        COPY(has_io_rate);
        COPY(read_bytes);
        COPY(write_bytes);
        COPY(rchar_bytes);
        COPY(wchar_bytes);
        COPY(read_bytes_per_s);
        COPY(write_bytes_per_s);
        COPY(has_net);
        COPY(has_net_rate);
        COPY(netns_rx_bytes);
        COPY(netns_tx_bytes);
        COPY(netns_rx_bytes_per_s);
        COPY(netns_tx_bytes_per_s);
        COPY(has_gpu_mem);
        COPY(has_gpu_util);
        COPY(gpu_mem_bytes);
        COPY(gpu_util_pct);
        COPY(has_energy);
        COPY(energy_j);
        COPY(has_pss);
        COPY(has_pss_anon);
        COPY(pss_bytes);
        COPY(uss_bytes);
        COPY(pss_anon_bytes);
#undef COPY
        return memcmp(&cx, &cy, sizeof cx) == 0;
}

static void round_trip(const struct sample *v, size_t n) {
        uint8_t *p = NULL;
        size_t len = 0, m = 0;
        struct sample *back = NULL;
        int r = block_encode(v, n, &p, &len);
        if (r == -ENOMEM)
                return;
        fuzz_assert(r == 0);
        r = block_decode(p, len, &back, &m);
        fuzz_assert(r == 0 || r == -ENOMEM);
        if (r == 0) {
                fuzz_assert(m == n);
                for (size_t i = 0; i < n; i++)
                        fuzz_assert(same(&v[i], &back[i]));
        }
        free(back);
        free(p);
}

/* A byte's worth of truth, as a bool field holds it. */
static bool as_bool(bool *b) {
        unsigned char c;
        memcpy(&c, b, 1);
        return c & 1;
}

static void tier_row(const uint8_t *data, size_t size) {
        struct sample_agg a, b;
        if (sample_agg_unpack(data, size, &a) < 0)
                return;
        uint8_t buf[SAMPLE_AGG_PACKED_MAX], again[SAMPLE_AGG_PACKED_MAX];
        size_t n = sample_agg_pack(&a, buf);
        fuzz_assert(n <= SAMPLE_AGG_PACKED_MAX && sample_agg_unpack(buf, n, &b) == 0);
        /* compared as packed: the structs' padding is no figure */
        fuzz_assert(sample_agg_pack(&b, again) == n && memcmp(buf, again, n) == 0);
}

static void head_row(const uint8_t *data, size_t size) {
        struct sample a, b;
        if (head_unpack(1, data, size, &a) < 0)
                return;
        uint8_t buf[HEAD_PACKED_MAX], again[HEAD_PACKED_MAX];
        size_t n = head_pack(&a, buf);
        fuzz_assert(head_unpack(1, buf, n, &b) == 0);
        fuzz_assert(head_pack(&b, again) == n && memcmp(buf, again, n) == 0);
}

/* A sample as a head row: it keeps every figure (rates whatever their flags). */
static void head_round_trip(const struct sample *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                uint8_t buf[HEAD_PACKED_MAX];
                struct sample back;
                fuzz_assert(head_unpack(v[i].ts_ms, buf, head_pack(&v[i], buf), &back) == 0);
                fuzz_assert(same(&v[i], &back));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct sample *v = NULL;
        size_t n = 0;
        tier_row(data, size);
        head_row(data, size);
        if (block_decode(data, size, &v, &n) == 0) {
                round_trip(v, n);
                free(v);
        }
        n = size / sizeof(struct sample);
        if (n == 0 || n > BLOCK_MAX_SAMPLES)
                return 0;
        v = malloc(n * sizeof *v);
        if (!v)
                return 0;
        memcpy(v, data, n * sizeof *v);
        for (size_t i = 0; i < n; i++) {
                struct sample *s = &v[i];
                bool *flags[] = { &s->has_cpu_pct,  &s->has_rss,    &s->has_peak_rss, &s->has_io,
                                  &s->has_io_rate,  &s->has_net,    &s->has_net_rate, &s->has_gpu_mem,
                                  &s->has_gpu_util, &s->has_energy, &s->has_pss,      &s->has_pss_anon };
                for (size_t k = 0; k < sizeof flags / sizeof *flags; k++)
                        *flags[k] = as_bool(flags[k]);
                if (!s->has_cpu_pct)
                        s->cpu_pct = 0;
                if (!s->has_io_rate)
                        s->read_bytes_per_s = s->write_bytes_per_s = 0;
                if (!s->has_net_rate)
                        s->netns_rx_bytes_per_s = s->netns_tx_bytes_per_s = 0;
        }
        head_round_trip(v, n);
        round_trip(v, n);
        free(v);
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* The sample block codec (store/block.c): every sample comes back bit for
 * bit, the rates it leaves out included, and anything that is not a whole
 * block is refused. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/block.h"
#include "sample-series.h"
#include "tap.h"
#include "util.h"
#include "xorshift.h"

/* Field by field: padding between them may differ. */
static bool same(const struct sample *a, const struct sample *b) {
#define F(f) (a->f == b->f)
#define D(f) (memcmp(&a->f, &b->f, sizeof a->f) == 0)
        return F(ts_ms) && F(interval_us) && F(has_cpu_pct) && D(cpu_pct) && F(cpu_time_ns) && F(user_time_ns) &&
               F(system_time_ns) && F(has_rss) && F(rss_bytes) && F(rss_anon_bytes) && F(has_peak_rss) &&
               F(peak_rss_bytes) && F(threads) && F(processes) && F(has_io) && F(has_io_rate) && F(read_bytes) &&
               F(write_bytes) && F(rchar_bytes) && F(wchar_bytes) && D(read_bytes_per_s) && D(write_bytes_per_s) &&
               F(has_net) && F(has_net_rate) && F(netns_rx_bytes) && F(netns_tx_bytes) && D(netns_rx_bytes_per_s) &&
               D(netns_tx_bytes_per_s) && F(has_gpu_mem) && F(has_gpu_util) && F(gpu_mem_bytes) && D(gpu_util_pct) &&
               F(has_energy) && D(energy_j) && F(has_pss) && F(has_pss_anon) && F(pss_bytes) && F(uss_bytes) &&
               F(pss_anon_bytes);
#undef F
#undef D
}

/* Encodes, decodes, compares; the encoded size. */
static size_t round_trip(const char *what, const struct sample *v, size_t n) {
        uint8_t *p = NULL;
        size_t len = 0, m = 0;
        struct sample *back = NULL;
        CHECK_EQ_INT(block_encode(v, n, &p, &len), 0);
        CHECK_EQ_INT(block_decode(p, len, &back, &m), 0);
        CHECK_EQ_INT(m, n);
        size_t bad = 0;
        for (size_t i = 0; back && i < n && i < m; i++)
                if (!same(&v[i], &back[i]))
                        bad++;
        if (bad)
                printf("# %s: %zu of %zu samples differ\n", what, bad, n);
        CHECK_EQ_INT(bad, 0);
        free(back);
        free(p);
        return len;
}

static void test_sample_series(void) {
        uint64_t seed = 42;
        struct sample v[600];
        sample_series(v, 60, 0, 50 << 20, false, &seed);
        size_t idle = round_trip("idle", v, 60);
        sample_series(v, 60, 950000000, 500 << 20, true, &seed);
        size_t busy = round_trip("busy", v, 60);
        printf("# a minute at 1 s: idle %zu bytes, busy with I/O %zu bytes\n", idle, busy);
        /* an idle process's minute is its timestamps and intervals, a few bytes a sample */
        CHECK(idle < 6 * 60);
        sample_series(v, 600, 400000000, 1 << 30, true, &seed);
        round_trip("600 at 100 ms", v, 600);
        round_trip("one sample", v + 7, 1);
        round_trip("two samples", v + 7, 2);
}

/* Rates the encoder cannot leave out: the first sample's (its previous
 * sample is in another block), after a sample that was not stored, and
 * rates that are not their counters' deltas at all. */
static void test_rates_kept(void) {
        uint64_t seed = 7;
        struct sample v[60];
        sample_series(v, 60, 300000000, 1 << 20, true, &seed);
        v[10] = v[11]; /* a gap: 11's rates are over a sample that is not here */
        v[10].ts_ms -= 1;
        v[20].cpu_pct = 12.5;
        v[30].netns_tx_bytes_per_s = -1.0;
        v[40].interval_us = 0; /* rates with no interval to recompute them over */
        round_trip("exceptions", v, 60);
}

/* Counters and flags of any value: wrap-around, 2^63, all 64 bits (a rate
 * whose flag is off is 0, as the probe and the store leave it). */
static void test_any_values(void) {
        uint64_t seed = 99;
        struct sample v[200];
        for (int round = 0; round < 50; round++) {
                memset(v, 0, sizeof v);
                for (size_t i = 0; i < 200; i++) {
                        uint64_t r = xorshift64s(&seed);
                        struct sample *s = &v[i];
                        s->ts_ms = (int64_t)(r % 4 == 0 ? xorshift64s(&seed) : (uint64_t)i * 1000);
                        s->interval_us = r % 5 == 0 ? UINT64_MAX - i : 1000000;
                        s->cpu_time_ns = round % 2 ? xorshift64s(&seed) : UINT64_C(1) << 63;
                        s->rss_bytes = (uint64_t)INT64_MIN + i;
                        s->threads = (uint32_t)xorshift64s(&seed);
                        s->has_cpu_pct = r & 1;
                        s->cpu_pct = !s->has_cpu_pct ? 0 : r & 2 ? NAN : (double)r;
                        s->has_gpu_util = r & 4;
                        s->gpu_util_pct = (double)(r % 1000) / 7.0;
                        s->has_energy = r & 8;
                        s->energy_j = r & 16 ? -0.0 : (double)i * 1.5;
                        s->has_io = s->has_io_rate = r & 32;
                        s->read_bytes = xorshift64s(&seed);
                        s->read_bytes_per_s = s->has_io_rate ? 1e300 : 0;
                        s->has_pss = r & 64; /* a tree's PSS, read every few samples */
                        s->has_pss_anon = s->has_pss && (r & 128);
                        s->pss_bytes = s->has_pss ? xorshift64s(&seed) : 0;
                        s->uss_bytes = s->has_pss ? s->pss_bytes / 3 : 0;
                        s->pss_anon_bytes = s->has_pss_anon ? s->pss_bytes / 2 : 0;
                }
                round_trip("any values", v, 1 + (size_t)round * 4 % 200);
        }
}

static void test_bad_input(void) {
        uint64_t seed = 3;
        struct sample v[30], *back = NULL;
        size_t n = 0, len = 0;
        uint8_t *p = NULL;
        sample_series(v, 30, 500000000, 1 << 22, true, &seed);
        CHECK_EQ_INT(block_encode(v, 0, &p, &len), -EINVAL);
        CHECK_EQ_INT(block_encode(v, BLOCK_MAX_SAMPLES + 1, &p, &len), -EINVAL);
        CHECK_EQ_INT(block_encode(v, 30, &p, &len), 0);
        /* every truncation and a trailing byte are refused */
        size_t refused = 0;
        for (size_t cut = 0; cut < len; cut++)
                if (block_decode(p, cut, &back, &n) == -EBADMSG)
                        refused++;
        CHECK_EQ_INT(refused, len);
        uint8_t *longer = malloc(len + 1);
        memcpy(longer, p, len);
        longer[len] = 0;
        CHECK_EQ_INT(block_decode(longer, len + 1, &back, &n), -EBADMSG);
        longer[0] = 4; /* a version this code does not know */
        CHECK_EQ_INT(block_decode(longer, len, &back, &n), -EBADMSG);
        free(longer);
        /* flipped bytes never crash; what decodes has the right count */
        for (size_t i = 1; i < len; i++) {
                uint8_t saved = p[i];
                p[i] ^= 0xff;
                if (block_decode(p, len, &back, &n) == 0) {
                        CHECK_EQ_INT(n, 30);
                        free(back);
                }
                p[i] = saved;
        }
        free(p);
}

/* Blocks of the earlier versions, as stored (the fuzz target's seeds,
 * written by that code): they decode, and what they hold comes back from a
 * block of this version. */
static void test_older_versions(const char *corpus) {
        static const struct {
                const char *file;
                uint8_t version;
                size_t n;
        } seeds[] = { { "one-sample", 1, 1 }, { "twenty-samples", 1, 20 }, { "tree-with-pss", 2, 0 } };
        for (size_t i = 0; i < ELEMENTSOF(seeds); i++) {
                char path[1024];
                snprintf(path, sizeof path, "%s/%s", corpus, seeds[i].file);
                FILE *f = fopen(path, "rb");
                CHECK(f != NULL);
                if (!f)
                        continue;
                uint8_t buf[65536];
                size_t len = fread(buf, 1, sizeof buf, f);
                fclose(f);
                CHECK(len > 0 && buf[0] == seeds[i].version);
                struct sample *v = NULL;
                size_t n = 0;
                CHECK_EQ_INT(block_decode(buf, len, &v, &n), 0);
                CHECK(seeds[i].n == 0 || n == seeds[i].n);
                if (n > 0)
                        round_trip(seeds[i].file, v, n);
                free(v);
        }
}

int main(int argc, char **argv) {
        test_sample_series();
        test_rates_kept();
        test_any_values();
        test_bad_input();
        if (argc == 2)
                test_older_versions(argv[1]);
        TEST_DONE();
}

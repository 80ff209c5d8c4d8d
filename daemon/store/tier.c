/* SPDX-License-Identifier: MIT */
#include "store/tier.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "store/pack.h"
#include "util.h"

static uint64_t umax(uint64_t a, uint64_t b) {
        return a > b ? a : b;
}

void sample_agg_add(struct sample_agg *a, const struct sample *s) {
        a->samples++;
        if (s->has_cpu_pct) {
                a->cpu_pct_max = a->cpu_pct_n == 0 || s->cpu_pct > a->cpu_pct_max ? s->cpu_pct : a->cpu_pct_max;
                a->cpu_pct_n++;
                a->cpu_pct_sum += s->cpu_pct;
        }
        a->cpu_time_ns = umax(a->cpu_time_ns, s->cpu_time_ns);
        a->user_time_ns = umax(a->user_time_ns, s->user_time_ns);
        a->system_time_ns = umax(a->system_time_ns, s->system_time_ns);
        if (s->has_rss) {
                a->rss_max = a->rss_n == 0 ? s->rss_bytes : umax(a->rss_max, s->rss_bytes);
                a->rss_anon_max = a->rss_n == 0 ? s->rss_anon_bytes : umax(a->rss_anon_max, s->rss_anon_bytes);
                a->rss_n++;
                a->rss_sum += (double)s->rss_bytes;
                a->rss_anon_sum += (double)s->rss_anon_bytes;
        }
        if (s->has_peak_rss) {
                a->peak_rss_bytes = a->has_peak ? umax(a->peak_rss_bytes, s->peak_rss_bytes) : s->peak_rss_bytes;
                a->has_peak = true;
        }
        a->threads_max = s->threads > a->threads_max ? s->threads : a->threads_max;
        a->processes_max = s->processes > a->processes_max ? s->processes : a->processes_max;
        if (s->has_io) {
                a->read_bytes = a->has_io ? umax(a->read_bytes, s->read_bytes) : s->read_bytes;
                a->write_bytes = a->has_io ? umax(a->write_bytes, s->write_bytes) : s->write_bytes;
                a->rchar_bytes = a->has_io ? umax(a->rchar_bytes, s->rchar_bytes) : s->rchar_bytes;
                a->wchar_bytes = a->has_io ? umax(a->wchar_bytes, s->wchar_bytes) : s->wchar_bytes;
                a->has_io = true;
        }
        if (s->has_io_rate) {
                a->io_rate_n++;
                a->read_rate_sum += s->read_bytes_per_s;
                a->write_rate_sum += s->write_bytes_per_s;
        }
        if (s->has_net) {
                a->netns_rx_bytes = a->has_net ? umax(a->netns_rx_bytes, s->netns_rx_bytes) : s->netns_rx_bytes;
                a->netns_tx_bytes = a->has_net ? umax(a->netns_tx_bytes, s->netns_tx_bytes) : s->netns_tx_bytes;
                a->has_net = true;
        }
        if (s->has_net_rate) {
                a->net_rate_n++;
                a->rx_rate_sum += s->netns_rx_bytes_per_s;
                a->tx_rate_sum += s->netns_tx_bytes_per_s;
        }
        if (s->has_gpu_mem) {
                a->gpu_mem_max = a->has_gpu_mem ? umax(a->gpu_mem_max, s->gpu_mem_bytes) : s->gpu_mem_bytes;
                a->has_gpu_mem = true;
        }
        if (s->has_gpu_util) {
                a->gpu_util_n++;
                a->gpu_util_sum += s->gpu_util_pct;
        }
        if (s->has_energy) {
                a->energy_j = a->has_energy && a->energy_j > s->energy_j ? a->energy_j : s->energy_j;
                a->has_energy = true;
        }
        if (s->has_pss) {
                a->pss_max = a->pss_n == 0 ? s->pss_bytes : umax(a->pss_max, s->pss_bytes);
                a->uss_max = a->pss_n == 0 ? s->uss_bytes : umax(a->uss_max, s->uss_bytes);
                a->pss_n++;
                a->pss_sum += (double)s->pss_bytes;
                a->uss_sum += (double)s->uss_bytes;
        }
        if (s->has_pss_anon) {
                a->pss_anon_max = a->pss_anon_n == 0 ? s->pss_anon_bytes : umax(a->pss_anon_max, s->pss_anon_bytes);
                a->pss_anon_n++;
                a->pss_anon_sum += (double)s->pss_anon_bytes;
        }
}

void sample_agg_merge(struct sample_agg *a, const struct sample_agg *b) {
        if (b->cpu_pct_n)
                a->cpu_pct_max = a->cpu_pct_n == 0 || b->cpu_pct_max > a->cpu_pct_max ? b->cpu_pct_max : a->cpu_pct_max;
        if (b->rss_n) {
                a->rss_max = a->rss_n == 0 ? b->rss_max : umax(a->rss_max, b->rss_max);
                a->rss_anon_max = a->rss_n == 0 ? b->rss_anon_max : umax(a->rss_anon_max, b->rss_anon_max);
        }
        a->samples += b->samples;
        a->cpu_pct_n += b->cpu_pct_n;
        a->cpu_pct_sum += b->cpu_pct_sum;
        a->cpu_time_ns = umax(a->cpu_time_ns, b->cpu_time_ns);
        a->user_time_ns = umax(a->user_time_ns, b->user_time_ns);
        a->system_time_ns = umax(a->system_time_ns, b->system_time_ns);
        a->rss_n += b->rss_n;
        a->rss_sum += b->rss_sum;
        a->rss_anon_sum += b->rss_anon_sum;
        if (b->has_peak)
                a->peak_rss_bytes = a->has_peak ? umax(a->peak_rss_bytes, b->peak_rss_bytes) : b->peak_rss_bytes;
        a->has_peak = a->has_peak || b->has_peak;
        a->threads_max = b->threads_max > a->threads_max ? b->threads_max : a->threads_max;
        a->processes_max = b->processes_max > a->processes_max ? b->processes_max : a->processes_max;
        if (b->has_io) {
                a->read_bytes = a->has_io ? umax(a->read_bytes, b->read_bytes) : b->read_bytes;
                a->write_bytes = a->has_io ? umax(a->write_bytes, b->write_bytes) : b->write_bytes;
                a->rchar_bytes = a->has_io ? umax(a->rchar_bytes, b->rchar_bytes) : b->rchar_bytes;
                a->wchar_bytes = a->has_io ? umax(a->wchar_bytes, b->wchar_bytes) : b->wchar_bytes;
                a->has_io = true;
        }
        a->io_rate_n += b->io_rate_n;
        a->read_rate_sum += b->read_rate_sum;
        a->write_rate_sum += b->write_rate_sum;
        if (b->has_net) {
                a->netns_rx_bytes = a->has_net ? umax(a->netns_rx_bytes, b->netns_rx_bytes) : b->netns_rx_bytes;
                a->netns_tx_bytes = a->has_net ? umax(a->netns_tx_bytes, b->netns_tx_bytes) : b->netns_tx_bytes;
                a->has_net = true;
        }
        a->net_rate_n += b->net_rate_n;
        a->rx_rate_sum += b->rx_rate_sum;
        a->tx_rate_sum += b->tx_rate_sum;
        if (b->has_gpu_mem)
                a->gpu_mem_max = a->has_gpu_mem ? umax(a->gpu_mem_max, b->gpu_mem_max) : b->gpu_mem_max;
        a->has_gpu_mem = a->has_gpu_mem || b->has_gpu_mem;
        a->gpu_util_n += b->gpu_util_n;
        a->gpu_util_sum += b->gpu_util_sum;
        if (b->has_energy)
                a->energy_j = a->has_energy && a->energy_j > b->energy_j ? a->energy_j : b->energy_j;
        a->has_energy = a->has_energy || b->has_energy;
        if (b->pss_n) {
                a->pss_max = a->pss_n == 0 ? b->pss_max : umax(a->pss_max, b->pss_max);
                a->uss_max = a->pss_n == 0 ? b->uss_max : umax(a->uss_max, b->uss_max);
        }
        a->pss_n += b->pss_n;
        a->pss_sum += b->pss_sum;
        a->uss_sum += b->uss_sum;
        if (b->pss_anon_n)
                a->pss_anon_max = a->pss_anon_n == 0 ? b->pss_anon_max : umax(a->pss_anon_max, b->pss_anon_max);
        a->pss_anon_n += b->pss_anon_n;
        a->pss_anon_sum += b->pss_anon_sum;
}

void sample_agg_point(const struct sample_agg *a, int64_t ts, struct sample *ret) {
        struct sample s = {
                .ts_ms = ts,
                .has_cpu_pct = a->cpu_pct_n > 0,
                .cpu_pct = a->cpu_pct_n ? a->cpu_pct_sum / (double)a->cpu_pct_n : 0,
                .cpu_time_ns = a->cpu_time_ns,
                .user_time_ns = a->user_time_ns,
                .system_time_ns = a->system_time_ns,
                .has_rss = a->rss_n > 0,
                /* the average of whole bytes, truncated as SQL's CAST does */
                .rss_bytes = a->rss_n ? (uint64_t)(a->rss_sum / (double)a->rss_n) : 0,
                .rss_anon_bytes = a->rss_n ? (uint64_t)(a->rss_anon_sum / (double)a->rss_n) : 0,
                .has_peak_rss = a->has_peak,
                .peak_rss_bytes = a->peak_rss_bytes,
                .threads = a->threads_max,
                .processes = a->processes_max,
                .has_io = a->has_io,
                .read_bytes = a->read_bytes,
                .write_bytes = a->write_bytes,
                .rchar_bytes = a->rchar_bytes,
                .wchar_bytes = a->wchar_bytes,
                .has_io_rate = a->io_rate_n > 0,
                .read_bytes_per_s = a->io_rate_n ? a->read_rate_sum / (double)a->io_rate_n : 0,
                .write_bytes_per_s = a->io_rate_n ? a->write_rate_sum / (double)a->io_rate_n : 0,
                .has_net = a->has_net,
                .netns_rx_bytes = a->netns_rx_bytes,
                .netns_tx_bytes = a->netns_tx_bytes,
                .has_net_rate = a->net_rate_n > 0,
                .netns_rx_bytes_per_s = a->net_rate_n ? a->rx_rate_sum / (double)a->net_rate_n : 0,
                .netns_tx_bytes_per_s = a->net_rate_n ? a->tx_rate_sum / (double)a->net_rate_n : 0,
                .has_gpu_mem = a->has_gpu_mem,
                .gpu_mem_bytes = a->gpu_mem_max,
                .has_gpu_util = a->gpu_util_n > 0,
                .gpu_util_pct = a->gpu_util_n ? a->gpu_util_sum / (double)a->gpu_util_n : 0,
                .has_energy = a->has_energy,
                .energy_j = a->energy_j,
                .has_pss = a->pss_n > 0,
                .pss_bytes = a->pss_n ? (uint64_t)(a->pss_sum / (double)a->pss_n) : 0,
                .uss_bytes = a->pss_n ? (uint64_t)(a->uss_sum / (double)a->pss_n) : 0,
                .has_pss_anon = a->pss_anon_n > 0,
                .pss_anon_bytes = a->pss_anon_n ? (uint64_t)(a->pss_anon_sum / (double)a->pss_anon_n) : 0,
        };
        *ret = s;
}

/* ---- a tier row, packed -------------------------------------------------------- */

#define AGG_PACK_VERSION 1

/* The figures of a row, in the order of the columns of version 9's rows. */
static const struct pack_field agg_fields[] = {
        { offsetof(struct sample_agg, samples), PACK_U64 },
        { offsetof(struct sample_agg, cpu_pct_n), PACK_U64 },
        { offsetof(struct sample_agg, cpu_pct_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, cpu_pct_max), PACK_DOUBLE },
        { offsetof(struct sample_agg, cpu_time_ns), PACK_U64 },
        { offsetof(struct sample_agg, user_time_ns), PACK_U64 },
        { offsetof(struct sample_agg, system_time_ns), PACK_U64 },
        { offsetof(struct sample_agg, rss_n), PACK_U64 },
        { offsetof(struct sample_agg, rss_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, rss_max), PACK_U64 },
        { offsetof(struct sample_agg, rss_anon_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, rss_anon_max), PACK_U64 },
        { offsetof(struct sample_agg, peak_rss_bytes), PACK_U64 },
        { offsetof(struct sample_agg, threads_max), PACK_U32 },
        { offsetof(struct sample_agg, processes_max), PACK_U32 },
        { offsetof(struct sample_agg, read_bytes), PACK_U64 },
        { offsetof(struct sample_agg, write_bytes), PACK_U64 },
        { offsetof(struct sample_agg, rchar_bytes), PACK_U64 },
        { offsetof(struct sample_agg, wchar_bytes), PACK_U64 },
        { offsetof(struct sample_agg, io_rate_n), PACK_U64 },
        { offsetof(struct sample_agg, read_rate_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, write_rate_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, netns_rx_bytes), PACK_U64 },
        { offsetof(struct sample_agg, netns_tx_bytes), PACK_U64 },
        { offsetof(struct sample_agg, net_rate_n), PACK_U64 },
        { offsetof(struct sample_agg, rx_rate_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, tx_rate_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, gpu_mem_max), PACK_U64 },
        { offsetof(struct sample_agg, gpu_util_n), PACK_U64 },
        { offsetof(struct sample_agg, gpu_util_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, energy_j), PACK_DOUBLE },
        { offsetof(struct sample_agg, pss_n), PACK_U64 },
        { offsetof(struct sample_agg, pss_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, pss_max), PACK_U64 },
        { offsetof(struct sample_agg, uss_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, uss_max), PACK_U64 },
        { offsetof(struct sample_agg, pss_anon_n), PACK_U64 },
        { offsetof(struct sample_agg, pss_anon_sum), PACK_DOUBLE },
        { offsetof(struct sample_agg, pss_anon_max), PACK_U64 },
};
/* The figures known only where a sample had them, as flags. */
static const size_t agg_flags[] = { offsetof(struct sample_agg, has_peak), offsetof(struct sample_agg, has_io),
                                    offsetof(struct sample_agg, has_net), offsetof(struct sample_agg, has_gpu_mem),
                                    offsetof(struct sample_agg, has_energy) };

_Static_assert(PACK_MAX(ELEMENTSOF(agg_fields)) <= SAMPLE_AGG_PACKED_MAX, "a packed tier row fits its buffer");

static const struct pack_layout agg_layout = { .version = AGG_PACK_VERSION,
                                               .fields = agg_fields,
                                               .n_fields = ELEMENTSOF(agg_fields),
                                               .flags = agg_flags,
                                               .n_flags = ELEMENTSOF(agg_flags) };

size_t sample_agg_pack(const struct sample_agg *a, uint8_t buf[static SAMPLE_AGG_PACKED_MAX]) {
        return pack_struct(&agg_layout, a, buf);
}

int sample_agg_unpack(const void *data, size_t len, struct sample_agg *ret) {
        struct sample_agg a = {};
        if (unpack_struct(&agg_layout, data, len, &a) < 0)
                return -EBADMSG;
        *ret = a;
        return 0;
}

/* tier_pack(<the 39 columns of version 9's rows>): those figures packed,
 * for the migration that packs the rows stored before. A column is NULL
 * where no sample had its figure. */
static void tier_pack_sql(sqlite3_context *c, int argc, sqlite3_value **v) {
        struct sample_agg a = {};
        for (int i = 0; i < argc && (size_t)i < ELEMENTSOF(agg_fields); i++) {
                char *f = (char *)&a + agg_fields[i].off;
                if (agg_fields[i].type == PACK_DOUBLE) {
                        double d = sqlite3_value_double(v[i]); /* NULL reads 0 */
                        memcpy(f, &d, sizeof d);
                        continue;
                }
                int64_t x = sqlite3_value_int64(v[i]);
                uint64_t u = x < 0 ? 0 : (uint64_t)x;
                if (agg_fields[i].type == PACK_U32)
                        *(uint32_t *)f = u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
                else
                        memcpy(f, &u, sizeof u);
        }
        /* what a NULL column said: the figure was never known */
        a.has_peak = sqlite3_value_type(v[12]) != SQLITE_NULL;
        a.has_io = sqlite3_value_type(v[15]) != SQLITE_NULL;
        a.has_net = sqlite3_value_type(v[22]) != SQLITE_NULL;
        a.has_gpu_mem = sqlite3_value_type(v[27]) != SQLITE_NULL;
        a.has_energy = sqlite3_value_type(v[30]) != SQLITE_NULL;
        uint8_t buf[SAMPLE_AGG_PACKED_MAX];
        size_t n = sample_agg_pack(&a, buf);
        sqlite3_result_blob(c, buf, (int)n, SQLITE_TRANSIENT);
}

int tier_register_pack(sqlite3 *db) {
        int rc = sqlite3_create_function_v2(db, "tier_pack", (int)ELEMENTSOF(agg_fields),
                                            SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, tier_pack_sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : -EIO;
}

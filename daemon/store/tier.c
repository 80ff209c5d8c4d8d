/* SPDX-License-Identifier: MIT */
#include "store/tier.h"

#include <string.h>

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

void sample_agg_params(const struct sample_agg *a, struct param *v) {
        size_t k = 0;
        v[k++] = p_u64(true, a->samples);
        v[k++] = p_u64(true, a->cpu_pct_n);
        v[k++] = p_double(a->cpu_pct_n > 0, a->cpu_pct_sum);
        v[k++] = p_double(a->cpu_pct_n > 0, a->cpu_pct_max);
        v[k++] = p_u64(a->samples > 0, a->cpu_time_ns);
        v[k++] = p_u64(a->samples > 0, a->user_time_ns);
        v[k++] = p_u64(a->samples > 0, a->system_time_ns);
        v[k++] = p_u64(true, a->rss_n);
        v[k++] = p_double(a->rss_n > 0, a->rss_sum);
        v[k++] = p_u64(a->rss_n > 0, a->rss_max);
        v[k++] = p_double(a->rss_n > 0, a->rss_anon_sum);
        v[k++] = p_u64(a->rss_n > 0, a->rss_anon_max);
        v[k++] = p_u64(a->has_peak, a->peak_rss_bytes);
        v[k++] = p_u64(a->samples > 0, a->threads_max);
        v[k++] = p_u64(a->samples > 0, a->processes_max);
        v[k++] = p_u64(a->has_io, a->read_bytes);
        v[k++] = p_u64(a->has_io, a->write_bytes);
        v[k++] = p_u64(a->has_io, a->rchar_bytes);
        v[k++] = p_u64(a->has_io, a->wchar_bytes);
        v[k++] = p_u64(true, a->io_rate_n);
        v[k++] = p_double(a->io_rate_n > 0, a->read_rate_sum);
        v[k++] = p_double(a->io_rate_n > 0, a->write_rate_sum);
        v[k++] = p_u64(a->has_net, a->netns_rx_bytes);
        v[k++] = p_u64(a->has_net, a->netns_tx_bytes);
        v[k++] = p_u64(true, a->net_rate_n);
        v[k++] = p_double(a->net_rate_n > 0, a->rx_rate_sum);
        v[k++] = p_double(a->net_rate_n > 0, a->tx_rate_sum);
        v[k++] = p_u64(a->has_gpu_mem, a->gpu_mem_max);
        v[k++] = p_u64(true, a->gpu_util_n);
        v[k++] = p_double(a->gpu_util_n > 0, a->gpu_util_sum);
        v[k++] = p_double(a->has_energy, a->energy_j);
        v[k++] = p_u64(true, a->pss_n);
        v[k++] = p_double(a->pss_n > 0, a->pss_sum);
        v[k++] = p_u64(a->pss_n > 0, a->pss_max);
        v[k++] = p_double(a->pss_n > 0, a->uss_sum);
        v[k++] = p_u64(a->pss_n > 0, a->uss_max);
        v[k++] = p_u64(true, a->pss_anon_n);
        v[k++] = p_double(a->pss_anon_n > 0, a->pss_anon_sum);
        v[k++] = p_u64(a->pss_anon_n > 0, a->pss_anon_max);
}

/* Column c as an unsigned integer, false when NULL. */
static bool tier_u64(sqlite3_stmt *st, int c, uint64_t *ret) {
        if (sqlite3_column_type(st, c) == SQLITE_NULL)
                return false;
        int64_t v = sqlite3_column_int64(st, c);
        *ret = v < 0 ? 0 : (uint64_t)v;
        return true;
}

static double col_double(sqlite3_stmt *st, int c) {
        return sqlite3_column_double(st, c); /* NULL reads 0 */
}

void sample_agg_row(sqlite3_stmt *st, int c, struct sample_agg *ret) {
        struct sample_agg a = {};
        uint64_t u = 0;
        tier_u64(st, c + 0, &a.samples);
        tier_u64(st, c + 1, &a.cpu_pct_n);
        a.cpu_pct_sum = col_double(st, c + 2);
        a.cpu_pct_max = col_double(st, c + 3);
        tier_u64(st, c + 4, &a.cpu_time_ns);
        tier_u64(st, c + 5, &a.user_time_ns);
        tier_u64(st, c + 6, &a.system_time_ns);
        tier_u64(st, c + 7, &a.rss_n);
        a.rss_sum = col_double(st, c + 8);
        tier_u64(st, c + 9, &a.rss_max);
        a.rss_anon_sum = col_double(st, c + 10);
        tier_u64(st, c + 11, &a.rss_anon_max);
        a.has_peak = tier_u64(st, c + 12, &a.peak_rss_bytes);
        if (tier_u64(st, c + 13, &u))
                a.threads_max = (uint32_t)u;
        if (tier_u64(st, c + 14, &u))
                a.processes_max = (uint32_t)u;
        a.has_io = tier_u64(st, c + 15, &a.read_bytes);
        tier_u64(st, c + 16, &a.write_bytes);
        tier_u64(st, c + 17, &a.rchar_bytes);
        tier_u64(st, c + 18, &a.wchar_bytes);
        tier_u64(st, c + 19, &a.io_rate_n);
        a.read_rate_sum = col_double(st, c + 20);
        a.write_rate_sum = col_double(st, c + 21);
        a.has_net = tier_u64(st, c + 22, &a.netns_rx_bytes);
        tier_u64(st, c + 23, &a.netns_tx_bytes);
        tier_u64(st, c + 24, &a.net_rate_n);
        a.rx_rate_sum = col_double(st, c + 25);
        a.tx_rate_sum = col_double(st, c + 26);
        a.has_gpu_mem = tier_u64(st, c + 27, &a.gpu_mem_max);
        tier_u64(st, c + 28, &a.gpu_util_n);
        a.gpu_util_sum = col_double(st, c + 29);
        a.has_energy = sqlite3_column_type(st, c + 30) != SQLITE_NULL;
        a.energy_j = col_double(st, c + 30);
        tier_u64(st, c + 31, &a.pss_n);
        a.pss_sum = col_double(st, c + 32);
        tier_u64(st, c + 33, &a.pss_max);
        a.uss_sum = col_double(st, c + 34);
        tier_u64(st, c + 35, &a.uss_max);
        tier_u64(st, c + 36, &a.pss_anon_n);
        a.pss_anon_sum = col_double(st, c + 37);
        tier_u64(st, c + 38, &a.pss_anon_max);
        *ret = a;
}

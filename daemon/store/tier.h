/* SPDX-License-Identifier: MIT */
/* What the minute and hour tiers keep of a run's samples over their span,
 * and the point a step of a plot is made of. The aggregates merge: a step
 * of ten minutes from ten minute rows is what it would be from their raw
 * samples (rates and gauges averaged over the samples that had them,
 * counters and peaks at their largest). */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "collect/sample.h"
#include "store/param.h"

struct sample_agg {
        uint64_t samples;
        uint64_t cpu_pct_n;
        double cpu_pct_sum, cpu_pct_max;
        uint64_t cpu_time_ns, user_time_ns, system_time_ns;
        uint64_t rss_n;
        double rss_sum, rss_anon_sum;
        uint64_t rss_max, rss_anon_max;
        bool has_peak;
        uint64_t peak_rss_bytes;
        uint32_t threads_max, processes_max;
        bool has_io;
        uint64_t read_bytes, write_bytes, rchar_bytes, wchar_bytes;
        uint64_t io_rate_n;
        double read_rate_sum, write_rate_sum;
        bool has_net;
        uint64_t netns_rx_bytes, netns_tx_bytes;
        uint64_t net_rate_n;
        double rx_rate_sum, tx_rate_sum;
        bool has_gpu_mem;
        uint64_t gpu_mem_max;
        uint64_t gpu_util_n;
        double gpu_util_sum;
        bool has_energy;
        double energy_j;
        uint64_t pss_n; /* samples with a PSS reading; USS comes with it */
        double pss_sum, uss_sum;
        uint64_t pss_max, uss_max;
        uint64_t pss_anon_n;
        double pss_anon_sum;
        uint64_t pss_anon_max;
};

void sample_agg_add(struct sample_agg *a, const struct sample *s);
void sample_agg_merge(struct sample_agg *a, const struct sample_agg *b);
/* The point standing for the aggregate at ts. */
void sample_agg_point(const struct sample_agg *a, int64_t ts, struct sample *ret);

/* The tiers' columns after run_id and ts, in their order. */
#define TIER_COLUMNS                                                                                       \
        "samples, cpu_pct_n, cpu_pct_sum, cpu_pct_max, cpu_time_ns, user_time_ns, system_time_ns, rss_n, " \
        "rss_sum, rss_max, rss_anon_sum, rss_anon_max, peak_rss_bytes, threads_max, processes_max, "       \
        "read_bytes, write_bytes, rchar_bytes, wchar_bytes, io_rate_n, read_rate_sum, write_rate_sum, "    \
        "netns_rx_bytes, netns_tx_bytes, net_rate_n, rx_rate_sum, tx_rate_sum, gpu_mem_max, gpu_util_n, "  \
        "gpu_util_sum, energy_j, pss_n, pss_sum, pss_max, uss_sum, uss_max, pss_anon_n, pss_anon_sum, "    \
        "pss_anon_max"
#define TIER_N_COLUMNS 39
#define TIER_PLACEHOLDERS "?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?" /* 39 */
/* The same merged in SQL over a GROUP BY (sums of the counts and sums,
 * maxima of the rest). */
#define TIER_MERGE_COLUMNS                                                                                    \
        "sum(samples), sum(cpu_pct_n), sum(cpu_pct_sum), max(cpu_pct_max), max(cpu_time_ns), "                \
        "max(user_time_ns), max(system_time_ns), sum(rss_n), sum(rss_sum), max(rss_max), sum(rss_anon_sum), " \
        "max(rss_anon_max), max(peak_rss_bytes), max(threads_max), max(processes_max), max(read_bytes), "     \
        "max(write_bytes), max(rchar_bytes), max(wchar_bytes), sum(io_rate_n), sum(read_rate_sum), "          \
        "sum(write_rate_sum), max(netns_rx_bytes), max(netns_tx_bytes), sum(net_rate_n), sum(rx_rate_sum), "  \
        "sum(tx_rate_sum), max(gpu_mem_max), sum(gpu_util_n), sum(gpu_util_sum), max(energy_j), sum(pss_n), " \
        "sum(pss_sum), max(pss_max), sum(uss_sum), max(uss_max), sum(pss_anon_n), sum(pss_anon_sum), "        \
        "max(pss_anon_max)"

/* The TIER_N_COLUMNS parameters of a tier row into v. */
void sample_agg_params(const struct sample_agg *a, struct param *v);
/* Columns first .. first + TIER_N_COLUMNS - 1 of a row into *ret. */
void sample_agg_row(sqlite3_stmt *st, int first, struct sample_agg *ret);

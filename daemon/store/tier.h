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

/* A tier row's figures, packed into a blob (version, which flags are set,
 * which figures are not 0, then those: integers as varints, sums as the 8
 * bytes of their double): a few tens of bytes, read as one column where 39
 * columns cost SQLite ten times as much to step through. */
#define SAMPLE_AGG_PACKED_MAX 512
size_t sample_agg_pack(const struct sample_agg *a, uint8_t buf[static SAMPLE_AGG_PACKED_MAX]);
/* -EBADMSG for anything sample_agg_pack() did not write. */
int sample_agg_unpack(const void *data, size_t len, struct sample_agg *ret);
/* The SQL function tier_pack() of the migration that packed the rows of
 * versions 9 to 11 (sql/012), on db. */
int tier_register_pack(sqlite3 *db);

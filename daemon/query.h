/* SPDX-License-Identifier: MIT */
/* Read-only questions to the store, on its reader connection, each bounded
 * in time (a progress handler) and in rows. Knows nothing of /proc or HTTP. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sample.h"
#include "util.h"
#include "store.h"

struct query_limits {
        usec_t timeout_usec;
        unsigned max_rows;
};

/* -ENOENT: no such run; -ETIMEDOUT: over the time budget; -EIO. */
int query_run(struct store *s, const struct query_limits *l, int64_t id, struct run_info *ret);

struct runs_filter {
        int state;        /* enum run_state, or -1 for all */
        const char *name; /* NULL = any */
        int pid;          /* 0 = any */
};
int query_runs(struct store *s, const struct query_limits *l, const struct runs_filter *f, struct run_info **ret,
               size_t *ret_n, bool *ret_truncated);
void run_infos_free(struct run_info *v, size_t n);

/* The sample of run_id at exactly ts (the latest of a finished run). */
int query_sample_at(struct store *s, const struct query_limits *l, int64_t run_id, int64_t ts, struct sample *ret);

/* Samples in [from, until], oldest first, at most limit; step_ms > 0 merges
 * each step into one point (averages of rates and gauges, last counters). */
int query_samples(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                  unsigned limit, int64_t step_ms, struct sample **ret, size_t *ret_n, bool *ret_truncated);

/* Rates over [from, until] from the first and last samples inside it. */
struct window_rates {
        int64_t from_ms, until_ms;
        uint64_t samples;
        bool has_cpu;
        double cpu_pct;
        bool has_io;
        double read_bytes_per_s, write_bytes_per_s;
        bool has_net;
        double netns_rx_bytes_per_s, netns_tx_bytes_per_s;
        bool has_gpu;
        double gpu_util_pct;
};
int query_window(struct store *s, const struct query_limits *l, int64_t run_id, int64_t from, int64_t until,
                 struct window_rates *ret);

/* Pure: rates between two cumulative samples (exposed for tests). */
void window_rates_from(const struct sample *first, const struct sample *last, struct window_rates *w);

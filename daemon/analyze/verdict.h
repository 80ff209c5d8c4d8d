/* SPDX-License-Identifier: MIT */
/* The verdicts beside the leak verdict, as pure functions over plain data
 * with the sentence that says why: input-bound (the steps wait for the data
 * loader), GPU held but idle, and the time until a growing run reaches the
 * limit that will kill it. No I/O, no clock: the manager feeds them what it
 * sampled, the benchmark what it generated. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VERDICT_REASON_MAX 512

/* ---- input-bound ------------------------------------------------------------
 * Over a window: the data wait's share of the step time (data wait plus
 * productive step). Judged once the run's data cover min_coverage of the
 * window, on at least min_steps steps that took at least min_busy of it (a loop that mostly sleeps is not held up by its
 * data); then input-bound when the share reaches share_pct over the window
 * and in at least two thirds of its sixths that have steps: one stall (a slow
 * file, a collection) lifts the share of a minute, a loader that cannot keep
 * up lifts it all along. The loader workers (the tree's children) at
 * saturated_pct of a core or more each are saturated; at idle_worker_pct or
 * less they wait themselves. */
#define INPUT_BOUND_PARTS 6
struct input_bound_params {
        double share_pct;       /* default 20 */
        double window_s;        /* default 60 */
        double min_steps;       /* default 10 */
        double min_busy;        /* default 0.1: steps and data wait cover a tenth of the window */
        double min_coverage;    /* default 0.5: judged once the run's data cover half the window */
        double saturated_pct;   /* default 80 */
        double idle_worker_pct; /* default 30 */
};
void input_bound_params_default(struct input_bound_params *p);

struct input_bound_in {
        double covered_s;        /* of the window: the part the run has data for */
        double data_ms, step_ms; /* productive step time (the data wait taken off where it is inside) */
        double steps;            /* step op timings */
        const char *step_op;     /* for the sentence */
        bool tree;               /* the run counts its children (else the workers are unknown) */
        unsigned workers;        /* children seen in the window */
        bool has_workers_cpu;    /* workers > 0 and their CPU was read */
        double workers_cpu_pct;  /* mean per worker over the window (100 = one core) */
        bool has_gpu;            /* a GPU is known */
        double gpu_util_pct;     /* the run's utilisation over the window */
        unsigned parts;          /* the window's sixths with steps or data wait (input_bound_sum()) */
        unsigned parts_over;     /* those whose own share reaches share_pct */
};
/* The window's seconds, oldest first, into in: the sums and its sixths
 * (parts_in_step: the data wait was timed inside the steps, and is taken
 * off them). */
void input_bound_sum(const struct input_bound_params *p, const double *data_ms, const double *step_ms,
                     const double *steps, size_t n, bool parts_in_step, struct input_bound_in *in);

struct input_bound_verdict {
        bool flagged;
        bool evaluated; /* judged: share_pct and the seconds mean something */
        double share_pct, data_wait_s, step_s, window_s;
        unsigned workers;
        bool has_workers_cpu;
        double workers_cpu_pct;
        bool has_gpu;
        double gpu_util_pct;
        int64_t since_ms;     /* flagged since (set by the caller); 0: not flagged */
        int64_t evaluated_ms; /* the last evaluation (the caller's) */
        char reason[VERDICT_REASON_MAX];
};
void input_bound_evaluate(const struct input_bound_params *p, const struct input_bound_in *in,
                          struct input_bound_verdict *ret);

/* ---- GPU held but idle ------------------------------------------------------
 * A device on which the run holds at least min_mem_bytes with utilisation
 * below max_util_pct at every sample for for_s is idle; a sample with more
 * use, less memory or an unknown utilisation starts the clock again. */
struct gpu_idle_params {
        double min_mem_bytes; /* default 1 GiB */
        double max_util_pct;  /* default 5 */
        double for_s;         /* default 600 */
};
void gpu_idle_params_default(struct gpu_idle_params *p);

#define GPU_IDLE_DEVICES 16
#define GPU_IDLE_ID_MAX 64

/* One device's use at a sample. */
struct gpu_idle_use {
        const char *device;
        bool has_mem;
        uint64_t mem_bytes;
        bool has_util;
        double util_pct;
};

struct gpu_idle_verdict {
        bool flagged;
        bool evaluated; /* a device's memory and utilisation were known */
        bool lingering; /* the main process is gone and a member still holds the memory */
        char device[GPU_IDLE_ID_MAX];
        bool has_mem;
        uint64_t mem_bytes;
        bool has_util;
        double util_pct;  /* mean over the idle stretch, else the latest */
        double idle_s;    /* the idle stretch so far */
        int64_t since_ms; /* start of the idle stretch; 0: none */
        int lingering_pid;
        char lingering_state; /* /proc/PID/stat state of that member: R, S, D, Z, T ... */
        int64_t evaluated_ms;
        char reason[VERDICT_REASON_MAX];
};

/* The idle stretches of a run's devices. */
struct gpu_idle_watch {
        struct {
                char device[GPU_IDLE_ID_MAX];
                int64_t since_ms; /* 0: not idle */
                double util_sum;
                uint64_t n;
        } dev[GPU_IDLE_DEVICES];
        size_t n;
        bool flagged;
};

/* A sample at ts_ms: has_gpu false when nothing could be looked at (no
 * device, NVML off: the verdict cannot be reached). Fills *ret; returns
 * true when flagged changed. */
bool gpu_idle_step(struct gpu_idle_watch *w, const struct gpu_idle_params *p, int64_t ts_ms, bool has_gpu,
                   const struct gpu_idle_use *uses, size_t n, struct gpu_idle_verdict *ret);
/* The run's main process (main_pid) is gone or a zombie, and member pid
 * (its stat state) still holds mem_bytes on device: flagged at once. */
void gpu_idle_lingering(struct gpu_idle_verdict *v, int main_pid, int pid, char state, const char *device,
                        uint64_t mem_bytes);

/* ---- time to OOM -----------------------------------------------------------
 * What will stop a growing run: its cgroup's memory.max (v2) or
 * memory.limit_in_bytes (v1), else the host's available memory; for GPU
 * memory the device's free memory. The forecast divides the room left by
 * the growth's lower confidence bound (the leak verdict's), so a noisy
 * trend forecasts later, never sooner. */
enum oom_source { OOM_NONE, OOM_MEMORY_MAX, OOM_LIMIT_IN_BYTES, OOM_MEM_AVAILABLE, OOM_DEVICE, _OOM_SOURCE_MAX };
/* "memory.max", "memory.limit_in_bytes", "MemAvailable", "device"; NULL for none. */
const char *oom_source_name(enum oom_source s);

struct oom_limit {
        enum oom_source source;
        uint64_t limit_bytes; /* the limit, or what is available/free now (MemAvailable, device) */
        bool has_usage;
        uint64_t usage_bytes; /* what counts against the limit now (the cgroup's usage) */
        bool has_high;
        uint64_t high_bytes; /* memory.high, where lower than the limit: throttling starts there */
        char where[256];     /* the cgroup's path, or the device */
};

struct oom_forecast {
        bool known;
        double eta_s;
        double slope_lo_bytes_per_s;
        struct oom_limit limit;
        bool has_high_eta;
        double high_eta_s;
        char reason[VERDICT_REASON_MAX];
};

/* slope_lo_bytes_per_s: the growth's lower confidence bound (0: no growth
 * to forecast); why_not: the leak verdict's reason when there is none. */
void oom_forecast_make(const struct oom_limit *l, double slope_lo_bytes_per_s, const char *why_not,
                       struct oom_forecast *ret);

/* A run's verdicts beside the leak, as plain data for whoever shows or
 * keeps them; oom[OOM_RSS] is the forecast on anonymous RSS, oom[OOM_GPU]
 * on GPU memory. */
enum { OOM_RSS, OOM_GPU, _OOM_METRIC_MAX };
struct verdict_report {
        bool has_input_bound;
        struct input_bound_verdict input_bound;
        bool has_gpu_idle;
        struct gpu_idle_verdict gpu_idle;
        bool has_oom[_OOM_METRIC_MAX];
        struct oom_forecast oom[_OOM_METRIC_MAX];
        int64_t oom_evaluated_ms[_OOM_METRIC_MAX];
};
/* "rss_anon_bytes", "gpu_mem_bytes": the series a forecast is of. */
const char *oom_metric_name(int metric);

/* "1 min 40 s", "2 h 5 min", "3.2 s": a span for a sentence. */
void verdict_fmt_duration(char *buf, size_t size, double s);
/* "38.2 GiB", "300 MiB", "512 KiB". */
void verdict_fmt_bytes(char *buf, size_t size, double bytes);

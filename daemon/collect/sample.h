/* SPDX-License-Identifier: MIT */
/* The plain data that flows collect -> store -> query -> api. No behaviour. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One reading of a run's counters at one instant. Counters (cpu_time_ns,
 * read_bytes, ...) are cumulative since registration; rates are over the
 * interval since the previous sample. has_* false = unknown (JSON null). */
struct sample {
        int64_t ts_ms;
        uint64_t interval_us; /* what the rates are over: the time since the previous sample (0: none) */
        bool has_cpu_pct;
        double cpu_pct; /* 100 = one core */
        uint64_t cpu_time_ns, user_time_ns, system_time_ns;
        bool has_rss;
        uint64_t rss_bytes, rss_anon_bytes;
        bool has_peak_rss;
        uint64_t peak_rss_bytes; /* the run's peak: its highest sampled RSS, or the main process's VmHWM if higher */
        uint32_t threads, processes;
        /* a tree's memory with each shared page counted once: the sums of
         * its members' smaps_rollup (Pss, Pss_Anon, Private_Clean +
         * Private_Dirty), read every pss_interval (has_pss false between
         * two readings, and for a run of one process) */
        bool has_pss, has_pss_anon;
        uint64_t pss_bytes, pss_anon_bytes, uss_bytes;
        bool has_io, has_io_rate;
        uint64_t read_bytes, write_bytes, rchar_bytes, wchar_bytes;
        double read_bytes_per_s, write_bytes_per_s;
        bool has_net, has_net_rate;
        uint64_t netns_rx_bytes, netns_tx_bytes;
        double netns_rx_bytes_per_s, netns_tx_bytes_per_s;
        /* accelerators: summed over the devices the tree uses (the
         * per-device breakdown travels beside the sample, as JSON) */
        bool has_gpu_mem, has_gpu_util;
        uint64_t gpu_mem_bytes;
        double gpu_util_pct; /* 100 = one device's busiest engine fully busy */
        /* estimated energy since registration: CPU share of the package +
         * GPU share of each device used (doc/gpu.md) */
        bool has_energy;
        double energy_j;
        /* the state letter of the main process's /proc/PID/stat (field 3),
         * for a tree its worst member's (proc_state_badness()); 0: unknown.
         * Not stored: the latest sample of a running run carries it. */
        char proc_state;
};

enum run_state { RUN_RUNNING, RUN_EXITED, RUN_UNREGISTERED, _RUN_STATE_MAX };
const char *run_state_to_string(enum run_state s);
int run_state_from_string(const char *s); /* -EINVAL if unknown */

/* A process's CPU and I/O counters as the kernel keeps them: absolute,
 * since the process began. has_io false: /proc/PID/io was unreadable. */
struct proc_counters {
        uint64_t cpu_ns, utime_ticks, stime_ticks;
        bool has_io;
        uint64_t read_bytes, write_bytes, rchar_bytes, wchar_bytes;
};

/* One process of a run's baseline: its counters when the run was
 * registered. What the run used since then is the counters now less these,
 * so it holds across a daemon restart. */
struct baseline_member {
        int pid;
        uint64_t start_ticks;
        struct proc_counters c;
};

/* A network namespace a run's processes are in, with its counters (every
 * interface but lo) when the run first saw it there. */
struct netns_baseline {
        uint64_t inode;
        uint64_t rx_bytes, tx_bytes;
};

/* What a restarted mlmond needs to go on counting a run from where it was
 * registered: its processes' baseline, what the members and namespaces it
 * has left used meanwhile. */
struct run_baseline {
        struct baseline_member *members;
        size_t n_members;
        struct proc_counters left;
        struct netns_baseline *netns;
        size_t n_netns;
        uint64_t left_rx_bytes, left_tx_bytes;
};

void run_baseline_done(struct run_baseline *b);

/* Running totals of a run since registration (the summary's raw material). */
struct run_totals {
        int64_t last_ts_ms; /* 0 = no sample yet */
        uint64_t samples;
        uint64_t cpu_time_ns, user_time_ns, system_time_ns;
        bool has_rss;
        uint64_t peak_rss_bytes, final_rss_bytes;
        uint32_t threads_max;
        bool has_pss, has_final_pss; /* a span's last reading may lie too far back to look for */
        uint64_t peak_pss_bytes, final_pss_bytes, final_uss_bytes;
        bool has_io;
        uint64_t read_bytes, write_bytes;
        bool has_net;
        uint64_t netns_rx_bytes, netns_tx_bytes;
        bool has_gpu_mem;
        uint64_t peak_gpu_mem_bytes;
        uint64_t gpu_util_samples; /* samples with a known gpu_util_pct */
        double gpu_util_sum_pct;
        bool has_energy;
        double energy_j;
};

struct leak_report;

/* A run as stored: identity, options, state and totals. */
struct run_info {
        int64_t id;
        int pid;
        uint64_t start_time_ticks;
        char boot_id[64];
        bool has_uid;
        uid_t uid;
        char *name; /* NULL = none */
        char *comm; /* raw bytes from the kernel; sanitized when rendered */
        char *cmdline;
        char *tags_json; /* a JSON object, "{}" when none */
        int64_t interval_ms;
        bool children;
        enum run_state state;
        int64_t registered_ts_ms;
        int64_t ended_ts_ms; /* 0 = still running */
        struct run_totals totals;
        char *step_op;            /* the op of its steps, as registered; NULL: [goodput] step_op */
        int64_t first_step_ts_ms; /* when its first step op timing arrived; 0: none yet */
        double first_step_ms;     /* that timing */
        struct leak_report *leak; /* the last stored verdicts (analyze/leakwatch.h), NULL if none */
        bool leak_detected;       /* a leak was suspected at some point */
        /* a running tree's processes left out of it at its latest sample
         * (another user's, or not dumpable: collect/tree.c); not stored */
        bool has_left_out;
        uint32_t left_out;
        /* how its process ended, where mlmond could see it (the zombie's
         * stat, or what the process's parent handed over): an exit status,
         * or the signal that killed it */
        bool has_exit_code, has_exit_signal;
        int exit_code;   /* 0..255 */
        int exit_signal; /* 1..64 */
};

void run_info_done(struct run_info *ri);
/* A deep copy of src's strings; its leak is not copied (NULL). -ENOMEM. */
int run_info_copy(const struct run_info *src, struct run_info *ret);

/* The exit status of wait(2) into has_exit_code/exit_code (an exit) or
 * has_exit_signal/exit_signal (killed by a signal); anything else (a stop)
 * leaves both unknown. */
void run_info_set_exit(struct run_info *ri, int wait_status);

/* Fold one sample into the totals. */
void run_totals_add(struct run_totals *t, const struct sample *s);

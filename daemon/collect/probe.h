/* SPDX-License-Identifier: MIT */
/* A probe: the registered process instance (and, for a tree, its
 * descendants) pinned by fds, and the collector that turns its /proc files
 * into samples (deltas, rates). The manager owns one per running run, beside
 * the run's other state; the probe is the collector's alone. Knows nothing of
 * SQL or HTTP. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "collect/accel/accel.h"
#include "collect/procfs.h"
#include "collect/sample.h"

/* The /proc files of a tree member kept open from one sample to the next
 * (-1: none): its /proc/PID, statm, and its thread's children list. Each
 * is bound to the process it was opened for, never a recycled pid's. */
struct member_fds {
        int dir, statm, children;
};
#define MEMBER_FDS_NONE ((struct member_fds){ -1, -1, -1 })

/* One process of a run's tree, with its counters at the previous sample
 * and at its baseline: at registration for a process that was there, zero
 * for one born since (a new process's counters start at zero). */
struct member {
        int pid;
        uint64_t start_ticks;
        struct proc_counters now, base;
        bool seen; /* matched by the sample being taken */
        bool has_netns;
        uint64_t netns;          /* network namespace inode */
        uint64_t netns_tick;     /* run tick at which netns was last read */
        struct accel_member acc; /* its GPU/NPU fds */
        /* its children's CPU (stat's cutime and cstime) at the previous
         * sample: what grew since is the children it reaped meanwhile */
        uint64_t prev_cutime_ticks, prev_cstime_ticks;
        /* its stat when last read, and how many samples since reused it;
         * the same for its statm */
        bool has_st, has_statm;
        uint8_t st_reused, statm_reused;
        struct proc_statm statm;
        /* its CPU clock and resident pages when the tree's smaps_rollup was
         * last read (has_smaps: it was read then) */
        bool has_smaps;
        uint64_t smaps_cpu_ns, smaps_resident_pages;
        struct member_fds fds;
        struct proc_stat st;
};

/* A network namespace some member is in, with its counters at the
 * previous sample and when the run first saw it. */
struct netns_counter {
        uint64_t inode;
        uint64_t rx_bytes, tx_bytes;
        uint64_t base_rx_bytes, base_tx_bytes;
};

struct probe {
        /* the process instance: pid and start time (stat field 22) */
        int pid;
        uint64_t start_ticks;
        bool children; /* the whole tree, not the process alone */
        bool has_uid;
        uid_t uid;  /* real uid at attach */
        char *comm; /* raw bytes from the kernel */
        char *cmdline;
        bool identity_changed; /* comm/cmdline re-read (exec): store them */
        int pidfd;             /* -1 under a fixture proc root */
        int dirfd;             /* /proc/PID */
        /* kept open and pread each tick: cheaper than open/read/close, and a
         * kept fd is bound to this task (ESRCH once it is reaped, never a
         * recycled pid's data) */
        int fd_stat, fd_statm, fd_io; /* schedstat is read only where the CPU clock cannot be */
        bool io_readable;             /* fd_io could be opened (it is not kept near the fd limit) */
        usec_t last_sample_usec;      /* CLOCK_MONOTONIC of the previous sample */
        uint64_t ticks;
        struct member *members;
        size_t n_members;
        struct netns_counter *netns;
        size_t n_netns;
        bool has_peak;
        bool has_peak_cpu;       /* peak_cpu_ns holds the main process's CPU clock when VmHWM was read */
        uint64_t peak_cpu_ns;
        uint64_t peak_rss_bytes; /* the tree's highest sampled RSS, or VmHWM if higher */
        /* What members that left used since registration (their counters
         * when last seen less their baseline); left_changed: store it. */
        struct proc_counters left;
        bool left_changed;
        /* The same for the namespaces the run has left; netns_changed: a
         * namespace came or went, store them. */
        uint64_t left_rx_bytes, left_tx_bytes;
        bool netns_changed;
        /* Resumed after a daemon restart: members[] holds the stored
         * baseline, last the last stored sample, and the next sample
         * spans the outage. */
        bool resume;
        bool resume_net; /* with the namespaces' baseline */
        bool has_last;
        struct sample last;
        struct accel_run accel; /* per-device use and the energy estimate */
        bool has_dir_uid;
        uid_t dir_uid; /* owner of /proc/PID at attach: moves with the process's credentials */
        /* a tree's smaps_rollup: when last read (0: never), and the main
         * process's own anonymous memory then (shared pages included:
         * flat while forked workers merely copy the pages they share) */
        usec_t pss_read_usec;
        uint32_t left_out; /* tree members left out at the last sample: not the owner's (collect/tree.c) */
        bool has_main_anon;
        uint64_t main_anon_bytes;
        /* the sums of the last reading, and how many times since they were
         * taken again for a tree that had not run */
        bool has_pss, has_pss_anon;
        uint64_t pss_bytes, uss_bytes, pss_anon_bytes;
        uint8_t pss_reused;
};

/* Host-wide context the collector needs. */
struct collect_ctx {
        const char *proc_root;
        usec_t pss_interval_usec; /* how often a tree's smaps_rollup is read; 0: never */
        bool real_proc;           /* proc_root is the kernel's /proc: use pidfds */
        long clk_tck;
        long page_size;
        /* per tick cache of net/dev by namespace inode */
        struct netns_cache {
                uint64_t inode;
                int r;
                struct proc_netdev nd;
        } * nscache;
        size_t n_nscache;
        uint64_t tick_id;
        struct accel *accel; /* NULL: no GPU/NPU/energy collection */
        int keep_fds_below;  /* tree members' fds kept below this number; 0: not known yet */
};

/* The fd number below which optional fds are kept open, so that those a
 * registration needs are never taken: num/den of the open-files limit
 * (tree members' fds: 1/2; a run's io: 3/4). */
int fds_kept_below(unsigned num, unsigned den);

/* Identity and authorization facts read at registration. */
struct proc_identity {
        int pid;
        uint64_t start_ticks;
        char comm[PROC_COMM_MAX];
        uid_t uid_real, uid_effective, uid_saved, uid_fs;
        bool dumpable;
        int tgid;
};

/* Pins pid: pidfd (real /proc), /proc/PID dirfd, identity. On success the
 * fds are owned by *ret (a new probe with pid, start_ticks and uid set;
 * children as given). If
 * expect_start_ticks != 0 the process must have that start time (restore
 * after a daemon restart). -ESRCH: no such process (or a different one);
 * -EINVAL: pid is a thread, not a process (ret_id->tgid names the process). */
int probe_attach(const struct collect_ctx *ctx, int pid, uint64_t expect_start_ticks, bool children, struct probe **ret,
                 struct proc_identity *ret_id);
void probe_free(struct probe *r);
/* Resumes a run from its stored baseline and its last stored sample: the
 * next sample counts what the processes used while nobody watched, and its
 * rates are the averages over that gap. Copies from b; -ENOMEM. */
int probe_resume(struct probe *r, const struct run_baseline *b, const struct sample *last, usec_t last_mono_usec);
/* The run's baseline now (at registration: its members' counters now);
 * run_baseline_done() it. */
int probe_baseline(const struct probe *r, struct run_baseline *ret);
void probe_close_fds(struct probe *r);

/* Reads the run's tree now and produces a sample. The first call takes the
 * baseline (rates unknown). Returns -ESRCH when the process is gone, and
 * -EPERM (nothing read kept) when a process of a non-root owner changed
 * credentials (a setuid exec, setuid(), became non-dumpable): what it
 * does now is no longer its owner's to see.
 * final: the process has exited but not been reaped (pidfd readable): a
 * zombie still shows its CPU time and I/O; its RSS is kept from before. */
int probe_sample(struct collect_ctx *ctx, struct probe *r, usec_t now_mono_usec, int64_t now_ms, bool final,
                 struct sample *ret);

/* How the main process ended, as wait(2) reports it (/proc/PID/stat field
 * 52), read while it is a zombie: after its exit, until its parent reaps it.
 * -EBUSY: it has not exited; -ESRCH: it is gone (reaped); -ENODATA: the
 * kernel does not tell (before 3.5). A process the reader may not trace
 * reads as 0, an exit with status 0. */
int probe_exit_status(const struct probe *r, int *ret_status);

/* A member that still holds GPU memory after the main process exited
 * (linger.c): its pid and stat state, and one device it holds memory on. */
struct probe_linger {
        int pid;
        char state;
        char device[GPU_ID_MAX];
        uint64_t mem_bytes;
};
/* 1 and *ret when a member of the last sample (the main process as a
 * zombie, or a child that lingers) is still there and holds GPU memory,
 * 0 when none does. */
int probe_lingering_gpu(struct collect_ctx *ctx, struct probe *r, struct probe_linger *ret);

void collect_ctx_new_tick(struct collect_ctx *ctx);
void collect_ctx_done(struct collect_ctx *ctx);

/* The tree walk (tree.c). */
/* Closes what f holds and marks it empty. */
void member_fds_close(struct member_fds *f);
/* Moves src into dst (empty), keeping what the budget of open files
 * allows: fds numbered at or above half the soft limit are closed, as is
 * everything under a proc root that is not the kernel's (its files may be
 * replaced between samples). */
void member_fds_keep(struct collect_ctx *ctx, struct member_fds *dst, struct member_fds *src);

/* One process of a run read for a sample (probe.c), before its deltas. */
struct reading {
        int pid;
        struct proc_stat st;
        bool has_cpu;
        uint64_t cpu_ns; /* all threads, exited ones included */
        bool zombie;
        bool has_statm;
        struct proc_statm statm;
        bool has_io;
        struct proc_io io;
        uint64_t netns;
        bool has_netns;
        bool reused_st;        /* st and io are the previous sample's */
        bool reused_statm;     /* and so is statm */
        int dirfd;             /* the run's, or fds.dir */
        struct member_fds fds; /* owned */
};

/* A tree's memory with each shared page counted once (pss_bytes,
 * uss_bytes, pss_anon_bytes of *s) from its members' smaps_rollup, every
 * pss_interval, the members' readings in rd and their new state in nm
 * (tree.c). */
void tree_pss(const struct collect_ctx *ctx, struct probe *r, const struct reading *rd, struct member *nm, size_t nrd,
              usec_t now_mono_usec, bool final, struct sample *s);

/* Descendants of the main process, breadth first (pids[0] is the run's
 * own), each with the fds it was listed through, taken over from the
 * previous sample's member of that pid where there was one (the main
 * process's dir is the run's: fds[0].dir is -1). The caller owns the fds. */
int tree_collect(const struct collect_ctx *ctx, struct probe *r, int **ret_pids, struct member_fds **ret_fds,
                 size_t *ret_n);

/* SPDX-License-Identifier: MIT */
/* A process's files: kernel text -> structs. Parsers are pure functions of
 * a NUL-terminated buffer (fixtures and fuzzers reach them directly);
 * readers take a /proc/PID directory fd, so every file is read relative to
 * an injectable root (procfs-host.h has the host-wide files).
 *
 * Conventions: int return, 0 or -errno; outputs written only on success;
 * -EINVAL for text that does not parse; ENOENT/ESRCH from a reader mean the
 * process is gone (normal, not an error). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

#define PROC_COMM_MAX 64

/* /proc/PID/stat, see proc(5). comm is between the first '(' and the LAST
 * ')' because comm itself may contain ')', spaces and newlines. */
struct proc_stat {
        int pid;
        char comm[PROC_COMM_MAX]; /* raw bytes, NUL-terminated, may be invalid UTF-8 */
        char state;
        int ppid;
        uint64_t minflt, majflt;
        uint64_t utime_ticks, stime_ticks;   /* fields 14, 15 */
        uint64_t cutime_ticks, cstime_ticks; /* fields 16, 17: of its children it has waited for */
        int64_t num_threads;                 /* field 20 */
        uint64_t starttime_ticks;            /* field 22, clock ticks since boot */
        uint64_t vsize_bytes;                /* field 23 */
        int64_t rss_pages;                   /* field 24 (approximate, prefer statm) */
        unsigned flags;                      /* field 9, PF_KTHREAD = 0x00200000 */
};
int proc_parse_stat(const char *text, struct proc_stat *ret);
#define PROC_PF_KTHREAD 0x00200000u
/* The state letter (field 3) and the exit status (field 52, as wait(2)
 * reports it: meaningful for a zombie) of /proc/PID/stat. -ENODATA: the
 * kernel prints no field 52 (before 3.5). */
int proc_parse_stat_exit(const char *text, char *ret_state, int *ret_status);
/* "running", "sleeping", "disk-sleep", "stopped", "zombie" for a state
 * letter; NULL for one the API does not name. */
const char *proc_state_name(char state);
/* 0 (unknown) to 5 (stopped): the order in which a tree's members' states
 * make the tree's. */
int proc_state_badness(char state);

/* /proc/PID/statm: "size resident shared text lib data dt" in pages.
 * resident - shared = anonymous resident pages (RssAnon). */
struct proc_statm {
        uint64_t size_pages, resident_pages, shared_pages;
};
int proc_parse_statm(const char *text, struct proc_statm *ret);

/* /proc/PID/schedstat: "run_ns wait_ns timeslices". */
struct proc_schedstat {
        uint64_t run_ns, wait_ns, timeslices;
};
int proc_parse_schedstat(const char *text, struct proc_schedstat *ret);

/* /proc/PID/io: "rchar: N\nwchar: N\nsyscr: ...\nread_bytes: N\nwrite_bytes: N\ncancelled_write_bytes: N". */
struct proc_io {
        uint64_t rchar, wchar, syscr, syscw, read_bytes, write_bytes, cancelled_write_bytes;
};
int proc_parse_io(const char *text, struct proc_io *ret); /* all 7 keys required */

/* /proc/PID/status: the few keys we need. A missing key leaves has_* false. */
struct proc_status {
        bool has_uids, has_tgid, has_vmhwm, has_vmrss, has_rssanon, has_threads;
        uid_t uid_real, uid_effective, uid_saved, uid_fs;
        int tgid, ppid;
        uint64_t vmhwm_bytes, vmrss_bytes, rssanon_bytes; /* "kB" in the file = KiB */
        int64_t threads;
};
int proc_parse_status(const char *text, struct proc_status *ret);

/* /proc/PID/smaps_rollup: the process's memory as its mappings' sums. A
 * page shared by n processes counts 1/n in each one's Pss; Pss_Anon
 * (Linux 5.9+) is the anonymous part of it; Private_Clean + Private_Dirty is
 * what the process alone maps (its USS). Each "kB" = KiB. */
struct proc_smaps {
        bool has_pss_anon;
        uint64_t rss_bytes, pss_bytes, pss_anon_bytes, private_clean_bytes, private_dirty_bytes;
        uint64_t anonymous_bytes; /* anonymous pages mapped, shared or not (0 when absent) */
};
int proc_parse_smaps_rollup(const char *text, struct proc_smaps *ret);
int proc_read_smaps_rollup(int piddir, struct proc_smaps *ret);

/* /proc/PID/net/dev: sum over every interface except "lo". */
struct proc_netdev {
        uint64_t rx_bytes, tx_bytes, rx_packets, tx_packets;
        unsigned interfaces; /* counted, lo excluded */
};
int proc_parse_netdev(const char *text, struct proc_netdev *ret);

/* /proc/PID/task/TID/children: space-separated pids. Appends to *pids. */
int proc_parse_pid_list(const char *text, int **pids, size_t *n);

/* ---- readers (relative to a /proc/PID dirfd) --------------------------- */

/* Opens "<proc_root>/<pid>" O_RDONLY|O_DIRECTORY|O_CLOEXEC; returns the fd or -errno. */
int proc_open_pid_dir(const char *proc_root, int pid);
int proc_read_stat(int piddir, struct proc_stat *ret);
int proc_read_status(int piddir, struct proc_status *ret);
int proc_read_statm(int piddir, struct proc_statm *ret);
int proc_read_io(int piddir, struct proc_io *ret);
int proc_read_schedstat(int piddir, struct proc_schedstat *ret);
int proc_read_netdev(int piddir, struct proc_netdev *ret);
/* cmdline with NULs turned into spaces, trailing NUL trimmed, at most max bytes. */
int proc_read_cmdline(int piddir, size_t max, char **ret);
/* Direct children of every thread of the process (task/TID/children),
 * sorted and deduplicated; *ret_pids is NULL when *ret_n is 0. -ENOENT when
 * task/ is missing (process gone), -EOPNOTSUPP when the kernel has no
 * children files (CONFIG_PROC_CHILDREN=n). */
int proc_read_children(int piddir, int **ret_pids, size_t *ret_n);
/* The same for the one thread tid (task/TID/children), without listing
 * task/: enough for a process with a single thread. -ENOENT when the
 * thread or the file is missing. */
int proc_read_thread_children(int piddir, int tid, int **ret_pids, size_t *ret_n);
/* Inode of the process's network namespace (readlink ns/net "net:[N]"),
 * or -errno. Under a fixture tree where ns/net is a regular file holding
 * "net:[N]" the file's text is used. */
int proc_read_netns_inode(int piddir, uint64_t *ret);
/* The inodes of the process's sockets (fd/N -> "socket:[N]"), appended to
 * *inodes (grown with GREEDY_REALLOC); at most max of them. -errno. */
int proc_read_socket_inodes(int piddir, size_t max, uint64_t **inodes, size_t *n);
/* CPU time of the whole thread group of pid in ns, from the process CPU
 * clock (clock_getcpuclockid): exact like schedstat, but /proc/PID/schedstat
 * is the main thread's alone, and task/TID/schedstat loses exited threads.
 * Any process may read another's process clock. 0 or -errno. */
int proc_read_cpu_clock(int pid, uint64_t *ret);

/* ENOENT / ESRCH: the process is gone. */
static inline bool proc_errno_is_gone(int r) {
        return r == -ENOENT || r == -ESRCH;
}

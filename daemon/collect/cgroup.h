/* SPDX-License-Identifier: MIT */
/* The memory limit that will stop a process: its cgroup's, read from the
 * cgroup file system under the sys root, on cgroup v2 (memory.max,
 * memory.high, memory.current) and on the v1 memory controller of hosts
 * that still run the hybrid or legacy hierarchy (memory.limit_in_bytes,
 * memory.usage_in_bytes). A limit set on an ancestor applies to every
 * cgroup below it, so the path is walked up to the root and the tightest
 * limit wins. Parsing is pure (text to struct); reading goes through the
 * sys root, so fixture trees reach it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CGROUP_PATH_MAX 512

/* /proc/PID/cgroup, the lines that matter:
 *
 *   0::/user.slice/user-1000.slice/session-2.scope        (v2)
 *   4:memory:/process_api/169316f400da5a97cc154549a0500356 (v1 memory)
 *
 * A path is relative to the hierarchy's root as the reader's cgroup
 * namespace sees it (the host's, for mlmond under systemd). */
struct cgroup_paths {
        bool has_v2;
        char v2[CGROUP_PATH_MAX];
        bool has_v1_memory;
        char v1_memory[CGROUP_PATH_MAX];
};
/* One line of it, split: the hierarchy id, the controllers (empty for v2)
 * and the path, which starts with '/'. Returns the line's start (NULL at the
 * end of the text) and moves *p past it; *ret_ok false for a line that is
 * not "ID:CONTROLLERS:/PATH". Blank lines are skipped. */
struct cgroup_line {
        unsigned id;
        const char *controllers, *path;
        size_t controllers_len, path_len;
};
const char *cgroup_next_line(const char **p, struct cgroup_line *ret, bool *ret_ok);
/* -EINVAL for a line that is not "ID:CONTROLLERS:/PATH" (a path too long
 * is left out, not an error). */
int cgroup_parse_paths(const char *text, struct cgroup_paths *ret);

/* A limit file: "max" (no limit: *ret_unlimited) or bytes. v1 writes "no
 * limit" as the largest page-aligned counter (9223372036854771712): any
 * value of 2^62 or more counts as none. -EINVAL otherwise. */
int cgroup_parse_limit(const char *text, uint64_t *ret, bool *ret_unlimited);

enum cgroup_version { CGROUP_NONE, CGROUP_V2, CGROUP_V1 };

struct cgroup_memory {
        enum cgroup_version version; /* CGROUP_NONE: no limit anywhere up the path */
        char path[CGROUP_PATH_MAX];  /* the cgroup whose limit is tightest */
        uint64_t limit_bytes;        /* its memory.max / memory.limit_in_bytes */
        bool has_usage;
        uint64_t usage_bytes; /* its memory.current / memory.usage_in_bytes */
        bool has_high;
        uint64_t high_bytes; /* v2: the tightest memory.high up the path */
};

/* The limit of the process whose /proc/PID is pid_dirfd, under sys_root
 * (/sys). v2 is looked for at fs/cgroup (unified) and fs/cgroup/unified
 * (hybrid), v1 at fs/cgroup/memory. 0 with version CGROUP_NONE when no
 * cgroup on the path has a limit (or none could be read); -errno when the
 * process's cgroup file cannot be read. */
int cgroup_memory_of(int pid_dirfd, const char *sys_root, struct cgroup_memory *ret);
/* The same from the paths, for tests: v2 first, then v1. */
int cgroup_memory_lookup(const char *sys_root, const struct cgroup_paths *p, struct cgroup_memory *ret);

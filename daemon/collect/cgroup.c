/* SPDX-License-Identifier: MIT */
#include "collect/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "collect/procfs-text.h"

/* v1's "no limit": PAGE_COUNTER_MAX pages, 9223372036854771712 with 4 KiB
 * pages (LONG_MAX rounded down to a page); other page sizes round to other
 * values, all far above any real limit. */
#define V1_UNLIMITED (UINT64_C(1) << 62)

const char *cgroup_next_line(const char **p, struct cgroup_line *ret, bool *ret_ok) {
        const char *line, *end;
        do
                line = next_line(p, &end);
        while (line && line == end);
        if (!line)
                return NULL;
        const char *c1 = memchr(line, ':', (size_t)(end - line));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
        *ret_ok = c2 && word_to_uint(line, (size_t)(c1 - line), &ret->id) == 0 && c2 + 1 < end && c2[1] == '/';
        if (*ret_ok) {
                ret->controllers = c1 + 1;
                ret->controllers_len = (size_t)(c2 - c1 - 1);
                ret->path = c2 + 1;
                ret->path_len = (size_t)(end - c2 - 1);
        }
        return line;
}

/* "cpu,cpuacct", "memory": is name in the comma-separated list? */
static bool has_controller(const char *list, size_t len, const char *name) {
        size_t n = strlen(name);
        for (const char *c = list, *end = list + len; c < end;) {
                const char *comma = memchr(c, ',', (size_t)(end - c));
                const char *ce = comma ? comma : end;
                if ((size_t)(ce - c) == n && memcmp(c, name, n) == 0)
                        return true;
                c = ce + 1;
        }
        return false;
}

int cgroup_parse_paths(const char *text, struct cgroup_paths *ret) {
        const char *p = text;
        struct cgroup_paths r = {};
        struct cgroup_line l;
        bool ok;
        while (cgroup_next_line(&p, &l, &ok)) {
                if (!ok)
                        return -EINVAL;
                if (l.path_len >= CGROUP_PATH_MAX || memchr(l.path, 0, l.path_len))
                        continue;
                char *dst = l.id == 0 && l.controllers_len == 0                          ? r.v2
                            : has_controller(l.controllers, l.controllers_len, "memory") ? r.v1_memory
                                                                                         : NULL;
                if (!dst)
                        continue;
                memcpy(dst, l.path, l.path_len);
                dst[l.path_len] = 0;
                if (dst == r.v2)
                        r.has_v2 = true;
                else
                        r.has_v1_memory = true;
        }
        *ret = r;
        return 0;
}

int cgroup_parse_limit(const char *text, uint64_t *ret, bool *ret_unlimited) {
        size_t n = strlen(text);
        while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
                n--;
        if (n == 3 && memcmp(text, "max", 3) == 0) {
                *ret = UINT64_MAX;
                *ret_unlimited = true;
                return 0;
        }
        uint64_t v;
        int r = word_to_u64(text, n, &v);
        if (r < 0)
                return -EINVAL;
        *ret = v;
        *ret_unlimited = v >= V1_UNLIMITED;
        return 0;
}

/* One file of a cgroup directory as a number; -ENOENT and friends when it
 * cannot be read, -EINVAL when it does not parse. */
static int read_value(const char *dir, const char *name, uint64_t *ret, bool *ret_unlimited) {
        char path[PATH_MAX], buf[64];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
                return -ENAMETOOLONG;
        int r = read_small_at(AT_FDCWD, path, buf, sizeof buf);
        if (r < 0)
                return r;
        return cgroup_parse_limit(buf, ret, ret_unlimited);
}

/* The tightest limit at root/path and its ancestors (down to root itself,
 * where v1 keeps its own). -ENOENT: the controller is not there. */
static int walk_up(const char *root, const char *path, enum cgroup_version v, struct cgroup_memory *ret) {
        const char *limit_file = v == CGROUP_V2 ? "memory.max" : "memory.limit_in_bytes";
        const char *usage_file = v == CGROUP_V2 ? "memory.current" : "memory.usage_in_bytes";
        char rel[CGROUP_PATH_MAX], dir[PATH_MAX];
        snprintf(rel, sizeof rel, "%s", path);
        struct cgroup_memory best = { .version = CGROUP_NONE };
        bool found = false;
        for (;;) {
                size_t l = strlen(rel);
                while (l > 0 && rel[l - 1] == '/')
                        rel[--l] = 0;
                if ((size_t)snprintf(dir, sizeof dir, "%s%s", root, rel) >= sizeof dir)
                        return -ENAMETOOLONG;
                uint64_t lim, high;
                bool unl, hunl;
                int r = read_value(dir, limit_file, &lim, &unl);
                if (r == 0) {
                        found = true;
                        if (!unl && (best.version == CGROUP_NONE || lim < best.limit_bytes)) {
                                best.version = v;
                                best.limit_bytes = lim;
                                snprintf(best.path, sizeof best.path, "%s", l > 0 ? rel : "/");
                                best.has_usage = read_value(dir, usage_file, &best.usage_bytes, &unl) == 0;
                        }
                }
                if (v == CGROUP_V2 && read_value(dir, "memory.high", &high, &hunl) == 0 && !hunl &&
                    (!best.has_high || high < best.high_bytes)) {
                        best.has_high = true;
                        best.high_bytes = high;
                }
                if (l == 0)
                        break;
                char *slash = strrchr(rel, '/');
                if (!slash)
                        break;
                *slash = 0;
        }
        if (!found)
                return -ENOENT;
        if (best.version == CGROUP_NONE)
                best.has_usage = false;
        /* memory.high without a memory.max: still worth saying */
        *ret = best;
        return 0;
}

int cgroup_memory_lookup(const char *sys_root, const struct cgroup_paths *p, struct cgroup_memory *ret) {
        char root[PATH_MAX];
        *ret = (struct cgroup_memory){ .version = CGROUP_NONE };
        if (p->has_v2) {
                /* unified: fs/cgroup itself; hybrid: fs/cgroup/unified */
                static const char *const mounts[] = { "fs/cgroup", "fs/cgroup/unified" };
                for (size_t i = 0; i < 2; i++) {
                        if ((size_t)snprintf(root, sizeof root, "%s/%s", sys_root, mounts[i]) >= sizeof root)
                                return -ENAMETOOLONG;
                        struct cgroup_memory m;
                        if (walk_up(root, p->v2, CGROUP_V2, &m) == 0) {
                                if (m.version != CGROUP_NONE || m.has_high) {
                                        *ret = m;
                                        return 0;
                                }
                                break;
                        }
                }
        }
        if (p->has_v1_memory) {
                if ((size_t)snprintf(root, sizeof root, "%s/fs/cgroup/memory", sys_root) >= sizeof root)
                        return -ENAMETOOLONG;
                struct cgroup_memory m;
                if (walk_up(root, p->v1_memory, CGROUP_V1, &m) == 0)
                        *ret = m;
        }
        return 0;
}

int cgroup_memory_of(int pid_dirfd, const char *sys_root, struct cgroup_memory *ret) {
        _cleanup_free_ char *text = NULL;
        int r = read_big_at(pid_dirfd, "cgroup", PROC_BIG_MAX, &text);
        if (r < 0)
                return r;
        struct cgroup_paths p;
        r = cgroup_parse_paths(text, &p);
        if (r < 0)
                return r;
        return cgroup_memory_lookup(sys_root, &p, ret);
}

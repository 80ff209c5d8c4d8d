/* SPDX-License-Identifier: MIT */
#include "collect/discover.h"

#include "collect/cgroup.h"

#include <string.h>

#include "collect/procfs-text.h"
#include "jobenv.h"

/* the environment's tags come first, in jobenv.h's order */
_Static_assert(DT_JOB_ID == (int)JOBENV_JOB_ID && DT_RANK == (int)JOBENV_RANK &&
                       DT_LOCAL_RANK == (int)JOBENV_LOCAL_RANK && DT_WORLD_SIZE == (int)JOBENV_WORLD_SIZE &&
                       DT_ATTEMPT == (int)JOBENV_ATTEMPT,
               "the environment's tags as jobenv.h numbers them");

static const char *const tag_keys[_DT_MAX] = {
        [DT_JOB_ID] = "job_id",
        [DT_RANK] = "rank",
        [DT_LOCAL_RANK] = "local_rank",
        [DT_WORLD_SIZE] = "world_size",
        [DT_ATTEMPT] = "attempt",
        [DT_UNIT] = "unit",
        [DT_CONTAINER_ID] = "container_id",
        [DT_POD_UID] = "pod_uid",
};

const char *discover_tag_key(enum discover_tag t) {
        return t < _DT_MAX ? tag_keys[t] : NULL;
}

/* ---- environment ---------------------------------------------------------- */

void discover_parse_environ(const char *buf, size_t len, struct discovered *ret) {
        struct jobenv e;
        jobenv_parse(buf, len, &e);
        for (enum jobenv_tag t = 0; t < _JOBENV_MAX; t++)
                if (e.var[t] && !ret->value[t][0])
                        memcpy(ret->value[t], e.value[t], sizeof e.value[t]);
}

static bool printable(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (s[i] <= ' ' || s[i] > '~')
                        return false;
        return true;
}

/* ---- cgroup ------------------------------------------------------------------ */

static bool is_hex(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool strip_suffix(const char *s, size_t *n, const char *suffix) {
        size_t k = strlen(suffix);
        if (*n < k || memcmp(s + *n - k, suffix, k) != 0)
                return false;
        *n -= k;
        return true;
}

static bool strip_prefix(const char **s, size_t *n, const char *prefix) {
        size_t k = strlen(prefix);
        if (*n < k || memcmp(*s, prefix, k) != 0)
                return false;
        *s += k;
        *n -= k;
        return true;
}

static void set_value(char *dst, const char *s, size_t n) {
        memcpy(dst, s, n);
        dst[n] = 0;
}

/* The systemd unit: after the slices, the first component, if it is a
 * service or a scope (as systemd's cg_path_get_unit()). */
static bool unit_component(const char *s, size_t n, char *dst) {
        size_t k = n;
        if (!strip_suffix(s, &k, ".service") && !strip_suffix(s, &k, ".scope"))
                return false;
        if (k == 0 || n > DISCOVER_VALUE_MAX || !printable(s, n))
                return false;
        set_value(dst, s, n);
        return true;
}

/* A container's scope or directory: "<runtime->64 hex>[.scope]", or the
 * 64 hex alone (cgroupfs drivers: /docker/ID, /kubepods/.../podUID/ID). */
static bool container_component(const char *s, size_t n, char *dst) {
        static const char *const prefixes[] = { "docker-", "cri-containerd-", "crio-", "libpod-" };
        (void)strip_suffix(s, &n, ".scope");
        for (size_t i = 0; i < ELEMENTSOF(prefixes); i++)
                if (strip_prefix(&s, &n, prefixes[i]))
                        break;
        if (n != 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_hex(s[i]))
                        return false;
        set_value(dst, s, n);
        return true;
}

/* "kubepods[-QOS]-pod<UID>.slice" (systemd driver, '_' for '-') or
 * "pod<UID>" below a kubepods component (cgroupfs driver). */
static bool pod_component(const char *s, size_t n, bool below_kubepods, char *dst) {
        const size_t uid_len = 36;
        (void)strip_suffix(s, &n, ".slice");
        if (n < 3 + uid_len)
                return false;
        const char *uid = s + n - uid_len;
        if (memcmp(uid - 3, "pod", 3) != 0)
                return false;
        bool alone = n == 3 + uid_len;
        if (!(alone && below_kubepods) && !(startswith(s, "kubepods") && uid[-4] == '-'))
                return false;
        char out[36 + 1];
        for (size_t i = 0; i < uid_len; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                if (dash ? uid[i] != '-' && uid[i] != '_' : !is_hex(uid[i]))
                        return false;
                out[i] = dash ? '-' : uid[i];
        }
        set_value(dst, out, uid_len);
        return true;
}

static void parse_cgroup_path(const char *path, size_t len, struct discovered *ret) {
        struct discovered d = {};
        bool slices = true, kubepods = false;
        for (const char *p = path, *end = path + len; p < end;) {
                const char *slash = memchr(p, '/', (size_t)(end - p));
                size_t n = (size_t)((slash ? slash : end) - p);
                if (n > 0) {
                        size_t k = n;
                        bool slice = strip_suffix(p, &k, ".slice");
                        if (slices && !slice && !d.value[DT_UNIT][0])
                                (void)unit_component(p, n, d.value[DT_UNIT]);
                        slices = slices && slice;
                        (void)container_component(p, n, d.value[DT_CONTAINER_ID]);
                        (void)pod_component(p, n, kubepods, d.value[DT_POD_UID]);
                        kubepods = kubepods || (n >= 8 && memcmp(p, "kubepods", 8) == 0);
                }
                p = slash ? slash + 1 : end;
        }
        for (enum discover_tag t = DT_UNIT; t <= DT_POD_UID; t++)
                if (!ret->value[t][0])
                        memcpy(ret->value[t], d.value[t], sizeof d.value[t]);
}

int discover_parse_cgroup(const char *text, struct discovered *ret) {
        const char *p = text, *chosen = NULL;
        size_t chosen_len = 0;
        struct cgroup_line l;
        bool ok;
        int best = 3;

        while (cgroup_next_line(&p, &l, &ok)) {
                if (!ok)
                        return -EINVAL;
                if (l.path_len == 1)
                        continue; /* "/": the root, or a v1 hierarchy nobody uses */
                /* 0 the v2 line, 1 systemd's v1 hierarchy, 2 any other */
                size_t clen = l.controllers_len;
                int rank = l.id == 0 && clen == 0                                                               ? 0
                           : clen == strlen("name=systemd") && memcmp(l.controllers, "name=systemd", clen) == 0 ? 1
                                                                                                                : 2;
                if (rank < best) {
                        best = rank;
                        chosen = l.path;
                        chosen_len = l.path_len;
                }
        }
        if (chosen)
                parse_cgroup_path(chosen, chosen_len, ret);
        return 0;
}

/* ---- reader ---------------------------------------------------------------- */

/* The environment is the process's own memory: a process may make it
 * anything (setproctitle() writes over it), so it is read whole up to a
 * bound and only its complete entries are believed. */
#define ENVIRON_MAX (1024u * 1024u)

void discover_read(int piddir, struct discovered *ret) {
        *ret = (struct discovered){};
        _cleanup_free_ char *env = NULL, *cg = NULL;
        size_t len;
        if (read_file_at(piddir, "environ", ENVIRON_MAX, &env, &len) == 0)
                discover_parse_environ(env, len, ret);
        if (read_big_at(piddir, "cgroup", PROC_BIG_MAX, &cg) == 0)
                (void)discover_parse_cgroup(cg, ret);
}

/* SPDX-License-Identifier: MIT */
#include "collect/accel/drm.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "util.h"

/* ---- parsing ---------------------------------------------------------------
 *
 * What the drivers print, after the generic pos/flags/mnt_id/ino lines
 * (amdgpu on 6.13, i915, xe, panthor):
 *
 *   drm-driver:\tamdgpu
 *   drm-client-id:\t11
 *   drm-pdev:\t0000:03:00.0
 *   drm-resident-vram:\t4096 MiB
 *   drm-memory-gtt: \t120832 KiB          <- a space, then a TAB
 *   drm-engine-gfx:\t1000000000 ns
 *   drm-engine-capacity-video:\t2         (i915)
 *   drm-cycles-rcs:\t28257900              (xe)
 *   drm-total-cycles-rcs:\t7655183225
 *   drm-maxfreq-panthor:\t1000000000 Hz   (panthor)
 */

static bool is_blank(char c) {
        return c == ' ' || c == '\t';
}

struct unit {
        const char *name;
        uint64_t mult;
};

/* drm_fdinfo_print_size() prints "", " KiB" or " MiB"; 5.14-5.18 amdgpu "kB" */
static const struct unit size_units[] = { { "", 1 }, { "KiB", 1024 }, { "MiB", 1024 * 1024 }, { "kB", 1024 } };
static const struct unit time_units[] = { { "", 1 }, { "ns", 1 } };
/* the spec spells it "KHz"; "kHz" is what a driver author would likely type */
static const struct unit freq_units[] = {
        { "", 1 }, { "Hz", 1 }, { "KHz", 1000 }, { "kHz", 1000 }, { "MHz", 1000000 }
};
static const struct unit no_unit[] = { { "", 1 } };

/* "<digits>[<blanks>]<unit>" in [v, v + n), the unit one of units[]. */
static int parse_number(const char *v, size_t n, const struct unit *units, size_t n_units, uint64_t *ret) {
        uint64_t x = 0;
        size_t i = 0;

        if (n == 0 || v[0] < '0' || v[0] > '9')
                return -EINVAL;
        for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
                unsigned d = (unsigned)(v[i] - '0');
                if (x > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                x = x * 10 + d;
        }
        while (i < n && is_blank(v[i]))
                i++;
        for (size_t k = 0; k < n_units; k++) {
                if (strlen(units[k].name) != n - i || memcmp(units[k].name, v + i, n - i) != 0)
                        continue;
                if (x > UINT64_MAX / units[k].mult)
                        return -ERANGE;
                *ret = x * units[k].mult;
                return 0;
        }
        return -EINVAL;
}

/* Keys "<prefix><name>": where the number goes (an engine's or a region's
 * field, and its has_ flag), in which units. The first match wins, so a
 * prefix comes before any shorter one it starts with:
 * drm-engine-capacity-video is not engine "capacity-video",
 * drm-total-cycles-rcs not region "cycles-rcs". */
#define NO_FLAG SIZE_MAX
#define ENGINE_KEY(prefix, units, value, flag)                                                    \
        {                                                                                         \
                prefix, false, units, ELEMENTSOF(units), offsetof(struct drm_engine_stat, value), \
                        offsetof(struct drm_engine_stat, flag), false                             \
        }
#define REGION_KEY(prefix, value, flag)                                                                    \
        {                                                                                                  \
                prefix, true, size_units, ELEMENTSOF(size_units), offsetof(struct drm_region_stat, value), \
                        offsetof(struct drm_region_stat, flag), false                                      \
        }
static const struct prefixed_key {
        const char *prefix;
        bool region; /* a struct drm_region_stat field, else a struct drm_engine_stat one */
        const struct unit *units;
        size_t n_units;
        size_t value, flag; /* offsets of the uint64_t and its bool */
        bool nonzero;       /* 0 is not allowed */
} prefixed_keys[] = {
        /* "0 is not allowed": the default 1 stays */
        { "drm-engine-capacity-", false, no_unit, ELEMENTSOF(no_unit), offsetof(struct drm_engine_stat, capacity),
          NO_FLAG, true },
        ENGINE_KEY("drm-engine-", time_units, ns, has_ns),
        ENGINE_KEY("drm-cycles-", no_unit, cycles, has_cycles),
        ENGINE_KEY("drm-total-cycles-", no_unit, total_cycles, has_total_cycles),
        ENGINE_KEY("drm-maxfreq-", freq_units, maxfreq_hz, has_maxfreq),
        REGION_KEY("drm-resident-", resident_bytes, has_resident),
        REGION_KEY("drm-memory-", memory_bytes, has_memory),
        REGION_KEY("drm-total-", total_bytes, has_total),
};

static struct drm_engine_stat *engine_get(struct drm_fdinfo *fi, const char *name, size_t n) {
        bool added;
        struct drm_engine_stat *e = gpu_named_get(fi->engines, &fi->n_engines, GPU_MAX_ENGINES, sizeof *e,
                                                  sizeof e->name, name, n, &added);
        if (added)
                e->capacity = 1;
        return e;
}

static struct drm_region_stat *region_get(struct drm_fdinfo *fi, const char *name, size_t n) {
        return gpu_named_get(fi->regions, &fi->n_regions, GPU_MAX_REGIONS, sizeof(struct drm_region_stat),
                             sizeof fi->regions[0].name, name, n, NULL);
}

/* drm-driver and drm-pdev end up in JSON, labels and logs: printable ASCII
 * without blanks, or the file is not one we trust. */
static int copy_word(char *dst, size_t size, const char *v, size_t n) {
        if (n == 0 || n >= size)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
                        return -EINVAL;
        memcpy(dst, v, n);
        dst[n] = 0;
        return 0;
}

static bool key_is(const char *k, size_t n, const char *lit) {
        return strlen(lit) == n && memcmp(k, lit, n) == 0;
}

static int parse_key(struct drm_fdinfo *fi, const char *k, size_t kn, const char *v, size_t vn, bool *has_driver) {
        uint64_t x;
        int r;

        if (key_is(k, kn, "drm-driver")) {
                r = copy_word(fi->driver, sizeof fi->driver, v, vn);
                if (r == 0)
                        *has_driver = true;
                return r;
        }
        if (key_is(k, kn, "drm-pdev"))
                return copy_word(fi->pdev, sizeof fi->pdev, v, vn);
        if (key_is(k, kn, "drm-client-id")) {
                if (parse_number(v, vn, no_unit, ELEMENTSOF(no_unit), &x) < 0)
                        fi->n_skipped++;
                else {
                        fi->has_client_id = true;
                        fi->client_id = x;
                }
                return 0;
        }
        if (key_is(k, kn, "ino")) {
                if (parse_number(v, vn, no_unit, ELEMENTSOF(no_unit), &x) == 0) {
                        fi->has_ino = true;
                        fi->ino = x;
                }
                return 0;
        }

        const struct prefixed_key *pk = NULL;
        for (size_t i = 0; i < ELEMENTSOF(prefixed_keys) && !pk; i++) {
                size_t pn = strlen(prefixed_keys[i].prefix);
                if (kn > pn && memcmp(k, prefixed_keys[i].prefix, pn) == 0)
                        pk = &prefixed_keys[i];
        }
        if (!pk)
                return 0; /* drm-shared-*, drm-active-*, drm-curfreq-*, amd-*, pasid ... */

        size_t pn = strlen(pk->prefix), nn = kn - pn;
        const char *name = k + pn;
        void *stat = NULL;
        if (nn < GPU_NAME_MAX && parse_number(v, vn, pk->units, pk->n_units, &x) == 0 && (x != 0 || !pk->nonzero))
                stat = pk->region ? (void *)region_get(fi, name, nn) : (void *)engine_get(fi, name, nn);
        if (!stat) {
                fi->n_skipped++;
                return 0;
        }
        *(uint64_t *)((char *)stat + pk->value) = x;
        if (pk->flag != NO_FLAG)
                *(bool *)((char *)stat + pk->flag) = true;
        return 0;
}

int drm_fdinfo_parse(const char *text, size_t len, struct drm_fdinfo *ret) {
        struct drm_fdinfo fi = {};
        bool has_driver = false;
        int r;

        if (len == 0)
                return -ENOENT;
        if (memchr(text, 0, len))
                return -EINVAL;
        for (const char *p = text, *end = text + len; p < end;) {
                const char *line = p, *le = memchr(p, '\n', (size_t)(end - p));
                p = le ? le + 1 : end;
                if (!le)
                        le = end;
                while (le > line && (is_blank(le[-1]) || le[-1] == '\r'))
                        le--;
                if (le == line)
                        continue;

                const char *colon = memchr(line, ':', (size_t)(le - line));
                if (!colon || colon == line)
                        return -EINVAL;
                size_t kn = (size_t)(colon - line);
                bool blank = false;
                for (size_t i = 0; i < kn; i++) {
                        unsigned char c = (unsigned char)line[i];
                        if (is_blank((char)c))
                                blank = true;
                        else if (c < 0x21 || c > 0x7e)
                                return -EINVAL;
                }
                if (blank)
                        continue; /* 5.14 amdgpu's "vram mem:": not a key we read */
                const char *v = colon + 1;
                while (v < le && is_blank(*v))
                        v++;
                r = parse_key(&fi, line, kn, v, (size_t)(le - v), &has_driver);
                if (r < 0)
                        return r;
        }
        if (!has_driver)
                return -ENOENT;
        *ret = fi;
        return 0;
}

/* ---- utilisation ------------------------------------------------------------ */

/* Moves *held up to cur (never down); returns how far it moved. */
static uint64_t hold(bool *has, uint64_t *held, bool cur_has, uint64_t cur) {
        if (!cur_has)
                return 0;
        uint64_t d = *has ? sat_sub_u64(cur, *held) : 0;
        if (!*has || cur > *held)
                *held = cur;
        *has = true;
        return d;
}

bool drm_engine_util(struct drm_engine_counters *held, const struct drm_engine_stat *cur, uint64_t dt_ns,
                     double *ret_pct) {
        const struct drm_engine_counters prev = *held;
        uint64_t d_ns = hold(&held->has_ns, &held->ns, cur->has_ns, cur->ns);
        uint64_t d_cycles = hold(&held->has_cycles, &held->cycles, cur->has_cycles, cur->cycles);
        uint64_t d_total = hold(&held->has_total_cycles, &held->total_cycles, cur->has_total_cycles, cur->total_cycles);
        double cap = (double)(cur->capacity ? cur->capacity : 1);
        double pct;

        if (cur->has_cycles && cur->has_total_cycles && prev.has_cycles && prev.has_total_cycles) {
                if (d_total == 0) /* the GPU clock did not move (or went back): no interval */
                        return false;
                pct = 100.0 * (double)d_cycles / ((double)d_total * cap);
        } else if (cur->has_ns && prev.has_ns) {
                if (dt_ns == 0)
                        return false;
                pct = 100.0 * (double)d_ns / ((double)dt_ns * cap);
        } else if (cur->has_cycles && prev.has_cycles && cur->has_maxfreq && cur->maxfreq_hz > 0) {
                if (dt_ns == 0)
                        return false;
                pct = 100.0 * (double)d_cycles * 1e9 / ((double)cur->maxfreq_hz * (double)dt_ns * cap);
        } else
                return false;

        /* busy longer than the interval: the counters and the clock were not
         * read at one instant (or a driver over-reports); clamp, as qmassa */
        *ret_pct = pct > 100.0 ? 100.0 : pct;
        return true;
}

/* ---- client table ------------------------------------------------------------- */

struct client_engine {
        char name[GPU_NAME_MAX];
        struct drm_engine_counters held;
};

struct client {
        /* key */
        char device[GPU_ID_MAX];
        bool has_id;
        uint64_t id;
        int pid, fd; /* part of the key only without a client id */

        usec_t seen_usec; /* the latest counted reading */
        uint64_t sweep;   /* ... and its sweep */
        int owner_pid;    /* ... and who made it */
        struct client_engine engines[GPU_MAX_ENGINES];
        size_t n_engines;
};

struct client_key {
        const char *device;
        bool has_id;
        uint64_t id;
        int pid, fd;
};

/* Clients in a dense array; an open-addressing index over it (slot =
 * index + 1, 0 = empty), at most half full. Lookup is per client per tick,
 * expiry compacts the array and rebuilds the index. */
struct drm_clients {
        struct client *v;
        size_t n;
        uint32_t *slots;
        size_t n_slots; /* a power of two */
        uint64_t sweep;
        usec_t now_usec;
};

static uint64_t mix(uint64_t h, uint64_t x) {
        return (h ^ x) * 0x100000001b3ULL;
}

static uint64_t key_hash(const struct client_key *k) {
        uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
        for (const char *s = k->device; *s; s++)
                h = mix(h, (unsigned char)*s);
        if (k->has_id)
                h = mix(h, k->id);
        else
                h = mix(mix(h, (uint32_t)k->pid), (uint32_t)k->fd);
        return h ^ (h >> 29);
}

static bool key_eq(const struct client *c, const struct client_key *k) {
        if (c->has_id != k->has_id || !streq(c->device, k->device))
                return false;
        return k->has_id ? c->id == k->id : c->pid == k->pid && c->fd == k->fd;
}

static size_t key_slot(const struct client *c) {
        struct client_key k = { c->device, c->has_id, c->id, c->pid, c->fd };
        return (size_t)key_hash(&k);
}

static int index_rebuild(struct drm_clients *t, size_t n_slots) {
        uint32_t *s = calloc(n_slots, sizeof *s);
        if (!s)
                return -ENOMEM;
        free(t->slots);
        t->slots = s;
        t->n_slots = n_slots;
        for (size_t i = 0; i < t->n; i++) {
                size_t j = key_slot(&t->v[i]) & (n_slots - 1);
                while (s[j])
                        j = (j + 1) & (n_slots - 1);
                s[j] = (uint32_t)(i + 1);
        }
        return 0;
}

static struct client *client_find(struct drm_clients *t, const struct client_key *k) {
        if (t->n_slots == 0)
                return NULL;
        for (size_t j = (size_t)key_hash(k) & (t->n_slots - 1); t->slots[j]; j = (j + 1) & (t->n_slots - 1)) {
                struct client *c = &t->v[t->slots[j] - 1];
                if (key_eq(c, k))
                        return c;
        }
        return NULL;
}

static int client_add(struct drm_clients *t, const struct client_key *k, struct client **ret) {
        if (t->n >= DRM_MAX_CLIENTS)
                return -ENOSPC;
        if (!GREEDY_REALLOC(t->v, t->n + 1))
                return -ENOMEM;
        if ((t->n + 1) * 2 > t->n_slots) {
                int r = index_rebuild(t, t->n_slots ? t->n_slots * 2 : 64);
                if (r < 0)
                        return r;
        }
        struct client *c = &t->v[t->n];
        *c = (struct client){ .has_id = k->has_id, .id = k->id, .pid = k->pid, .fd = k->fd };
        snprintf(c->device, sizeof c->device, "%s", k->device);
        size_t j = key_slot(c) & (t->n_slots - 1);
        while (t->slots[j])
                j = (j + 1) & (t->n_slots - 1);
        t->slots[j] = (uint32_t)(++t->n);
        *ret = c;
        return 0;
}

int drm_clients_new(struct drm_clients **ret) {
        struct drm_clients *t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        *ret = t;
        return 0;
}

struct drm_clients *drm_clients_free(struct drm_clients *t) {
        if (t) {
                free(t->v);
                free(t->slots);
                free(t);
        }
        return NULL;
}

void drm_clients_begin(struct drm_clients *t, usec_t now_usec) {
        t->sweep++;
        t->now_usec = now_usec;
}

void drm_clients_end(struct drm_clients *t, usec_t max_age_usec) {
        (void)drm_clients_expire(t, t->now_usec, max_age_usec);
}

size_t drm_clients_expire(struct drm_clients *t, usec_t now_usec, usec_t max_age_usec) {
        size_t kept = 0, n = t->n;
        for (size_t i = 0; i < n; i++) {
                if (sat_sub_u64(now_usec, t->v[i].seen_usec) > max_age_usec)
                        continue;
                if (kept != i)
                        t->v[kept] = t->v[i];
                kept++;
        }
        if (kept == n)
                return 0;
        t->n = kept;
        /* same size: cannot fail for want of memory if the old one is reused */
        memset(t->slots, 0, t->n_slots * sizeof *t->slots);
        for (size_t i = 0; i < t->n; i++) {
                size_t j = key_slot(&t->v[i]) & (t->n_slots - 1);
                while (t->slots[j])
                        j = (j + 1) & (t->n_slots - 1);
                t->slots[j] = (uint32_t)(i + 1);
        }
        return n - kept;
}

size_t drm_clients_count(const struct drm_clients *t) {
        return t->n;
}

static struct client_engine *client_engine_get(struct client *c, const char *name) {
        return gpu_named_get(c->engines, &c->n_engines, GPU_MAX_ENGINES, sizeof c->engines[0],
                             sizeof c->engines[0].name, name, strlen(name), NULL);
}

int drm_clients_observe(struct drm_clients *t, const char *device, int pid, int fd, const struct drm_fdinfo *info,
                        struct gpu_engine ret_engines[GPU_MAX_ENGINES], int *ret_owner_pid) {
        struct client_key k = {
                .device = device,
                .has_id = info->has_client_id,
                .id = info->has_client_id ? info->client_id : 0,
                .pid = info->has_client_id ? 0 : pid,
                .fd = info->has_client_id ? 0 : fd,
        };
        struct client *c = client_find(t, &k);
        int r;

        if (c && c->sweep == t->sweep) {
                if (ret_owner_pid)
                        *ret_owner_pid = c->owner_pid;
                return 0;
        }
        if (!c) {
                r = client_add(t, &k, &c);
                if (r < 0)
                        return r;
        }
        /* 0 for a new client: every engine then has nothing held: unknown */
        uint64_t dt_ns = sat_sub_u64(t->now_usec, c->seen_usec) * 1000;
        for (size_t i = 0; i < info->n_engines && i < GPU_MAX_ENGINES; i++) {
                struct gpu_engine *out = &ret_engines[i];
                *out = (struct gpu_engine){};
                memcpy(out->name, info->engines[i].name, sizeof out->name);
                struct client_engine *e = client_engine_get(c, info->engines[i].name);
                if (e && drm_engine_util(&e->held, &info->engines[i], dt_ns, &out->util_pct))
                        out->has_util = true;
        }
        c->seen_usec = t->now_usec;
        c->sweep = t->sweep;
        c->owner_pid = pid;
        return 1;
}

/* ---- a process's fds ------------------------------------------------------------ */

/* Reads and parses fdinfo/FD under piddir. -ENODATA: the file is there but
 * has no drm keys (parse's -ENOENT, told apart from the file missing). */
static int fdinfo_read(int piddir, int fd, struct drm_fdinfo *ret) {
        char path[32], buf[DRM_FDINFO_READ_MAX];
        snprintf(path, sizeof path, "fdinfo/%d", fd);
        _cleanup_close_ int f = openat(piddir, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (f < 0)
                return -errno;
        ssize_t n = pread_text(f, buf, sizeof buf);
        if (n < 0)
                return (int)n;
        size_t len = (size_t)n;
        if (len == sizeof buf - 1) { /* full: the last line may be cut short */
                const char *nl = memrchr(buf, '\n', len);
                len = nl ? (size_t)(nl - buf) + 1 : 0;
        }
        int r = drm_fdinfo_parse(buf, len, ret);
        return r == -ENOENT ? -ENODATA : r;
}

/* Is target a node we keep? "/dev/dri/renderD129" (a client if its
 * fdinfo says so), "/dev/accel/accel0" (a client or a holder),
 * "/dev/nvidia0" (a holder). Not nvidiactl, nvidia-uvm or nvidia-modeset:
 * every CUDA process holds those, they name no GPU. Not a deleted node
 * ("/dev/dri/renderD128 (deleted)"). */
static bool classify(const char *target, enum drm_fd_kind *ret_kind, char node[GPU_NAME_MAX]) {
        static const char node_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
        enum drm_fd_kind kind;
        const char *s;

        if (startswith(target, "/dev/dri/")) {
                kind = DRM_FD_CLIENT;
                s = target + strlen("/dev/dri/");
        } else if (startswith(target, "/dev/accel/")) {
                kind = DRM_FD_ACCEL;
                s = target + strlen("/dev/accel/");
        } else if (startswith(target, "/dev/nvidia")) {
                kind = DRM_FD_NVIDIA;
                s = target + strlen("/dev/");
                const char *num = s + strlen("nvidia");
                if (!*num || strspn(num, "0123456789") != strlen(num))
                        return false;
        } else
                return false;
        size_t n = strlen(s);
        if (n == 0 || n >= GPU_NAME_MAX || strspn(s, node_chars) != n)
                return false;
        memcpy(node, s, n + 1);
        *ret_kind = kind;
        return true;
}

/* The holder of node kept so far, if any. */
static struct drm_fd *holder_of(struct drm_proc_cache *c, enum drm_fd_kind kind, const char *node) {
        for (size_t i = 0; i < c->n_fds; i++)
                if (c->fds[i].kind == kind && streq(c->fds[i].node, node))
                        return &c->fds[i];
        return NULL;
}

/* One fd per held node, the lowest (readdir's order is not promised). */
static bool holder_seen(struct drm_proc_cache *c, enum drm_fd_kind kind, const char *node, int fd) {
        struct drm_fd *h = holder_of(c, kind, node);
        if (h && fd < h->fd)
                h->fd = fd;
        return h;
}

static int fd_cmp(const void *a, const void *b) {
        int x = ((const struct drm_fd *)a)->fd, y = ((const struct drm_fd *)b)->fd;
        return (x > y) - (x < y);
}

static int read_target(int dirfd, const char *name, char *buf, size_t size) {
        ssize_t k = readlinkat(dirfd, name, buf, size - 1);
        if (k < 0)
                return -errno;
        buf[k] = 0;
        return 0;
}

static int cache_list(int piddir, struct drm_proc_cache *c) {
        c->n_fds = 0;
        c->dropped = 0;
        c->lists++;
        c->listed_at = c->calls;

        int dfd = openat(piddir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        DIR *d = fdopendir(dfd);
        if (!d) {
                int r = -errno;
                safe_close(dfd);
                return r;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                unsigned u;
                char target[64], node[GPU_NAME_MAX];
                enum drm_fd_kind kind;

                if (safe_atou(de->d_name, &u) < 0 || u > INT_MAX)
                        continue;
                /* a target longer than the buffer is cut, and then is no node we know */
                if (read_target(dirfd(d), de->d_name, target, sizeof target) < 0 || !classify(target, &kind, node))
                        continue; /* closed meanwhile, or not a device of ours */
                if (kind == DRM_FD_NVIDIA && holder_seen(c, kind, node, (int)u))
                        continue;
                if (c->n_fds == DRM_PROC_MAX_FDS) {
                        c->dropped++;
                        continue;
                }
                if (!GREEDY_REALLOC(c->fds, c->n_fds + 1)) {
                        closedir(d);
                        c->n_fds = 0;
                        return -ENOMEM;
                }
                struct drm_fd *f = &c->fds[c->n_fds];
                if (kind != DRM_FD_NVIDIA) {
                        int q = fdinfo_read(piddir, (int)u, &f->info);
                        if (q == 0)
                                kind = DRM_FD_CLIENT;
                        else if (q != -ENODATA || kind != DRM_FD_ACCEL)
                                continue; /* gone, or a DRM node without usage stats */
                        else if (holder_seen(c, kind, node, (int)u))
                                continue; /* held through another fd already */
                }
                f->fd = (int)u;
                f->kind = kind;
                memcpy(f->node, node, sizeof f->node);
                f->ino = kind == DRM_FD_CLIENT && f->info.has_ino ? f->info.ino : 0;
                c->n_fds++;
        }
        closedir(d);
        /* the owner rule takes a process's fds in order: readdir's is not
         * promised (a fixture tree's is the file system's) */
        if (c->n_fds > 1) /* (fds is NULL when none was ever kept) */
                sort_array(c->fds, c->n_fds, sizeof *c->fds, fd_cmp);
        return (int)c->n_fds;
}

/* Re-reads the kept fds; -ESTALE when the table must be listed again. */
static int cache_refresh(int piddir, struct drm_proc_cache *c) {
        for (size_t i = 0; i < c->n_fds; i++) {
                struct drm_fd *f = &c->fds[i];
                char name[32];
                if (f->kind == DRM_FD_CLIENT) {
                        if (fdinfo_read(piddir, f->fd, &f->info) < 0 || (f->info.has_ino && f->info.ino != f->ino))
                                return -ESTALE;
                        continue;
                }
                char target[64], node[GPU_NAME_MAX];
                enum drm_fd_kind kind;
                snprintf(name, sizeof name, "fd/%d", f->fd);
                if (read_target(piddir, name, target, sizeof target) < 0 || !classify(target, &kind, node) ||
                    kind != f->kind || !streq(node, f->node))
                        return -ESTALE;
        }
        return 0;
}

struct drm_proc_cache *drm_proc_cache_free(struct drm_proc_cache *c) {
        if (c) {
                free(c->fds);
                free(c);
        }
        return NULL;
}

int drm_proc_scan(int piddir, struct drm_proc_cache *c, unsigned relist_every) {
        c->calls++;
        if (c->lists > 0 && c->calls - c->listed_at < relist_every && cache_refresh(piddir, c) == 0)
                return (int)c->n_fds;
        int r = cache_list(piddir, c);
        if (r < 0)
                c->n_fds = 0;
        return r;
}

/* ---- one run, one tick --------------------------------------------------------- */

static void use_add(struct gpu_use *u, const struct drm_fdinfo *info, const struct gpu_engine *engines) {
        if (!u->driver[0])
                memcpy(u->driver, info->driver, sizeof u->driver);
        u->clients++;
        for (size_t i = 0; i < info->n_engines; i++)
                gpu_use_add_engine(u, engines[i].name, engines[i].has_util, engines[i].util_pct);
        for (size_t i = 0; i < info->n_regions; i++)
                if (drm_region_has_resident(&info->regions[i]))
                        gpu_use_add_region(u, info->regions[i].name, drm_region_resident(&info->regions[i]));
}

static void holder_add(struct drm_holder *holders, size_t max, size_t *n, const struct drm_fd *f) {
        for (size_t i = 0; i < *n; i++)
                if (holders[i].kind == f->kind && streq(holders[i].node, f->node)) {
                        holders[i].procs++;
                        return;
                }
        if (*n == max)
                return;
        struct drm_holder *h = &holders[(*n)++];
        *h = (struct drm_holder){ .kind = f->kind, .procs = 1 };
        memcpy(h->node, f->node, sizeof h->node);
}

int drm_collect(struct drm_clients *t, const struct drm_proc *procs, size_t n_procs, unsigned relist_every,
                struct gpu_use *uses, size_t max_uses, size_t *ret_n_uses, struct drm_holder *holders,
                size_t max_holders, size_t *ret_n_holders) {
        size_t n_uses = 0, n_holders = 0;
        int r;

        for (size_t i = 0; i < n_procs; i++) {
                const struct drm_proc *p = &procs[i];
                if (p->dirfd < 0)
                        continue;
                if (!*p->cache) {
                        *p->cache = calloc(1, sizeof **p->cache);
                        if (!*p->cache)
                                return -ENOMEM;
                }
                struct drm_proc_cache *c = *p->cache;
                r = drm_proc_scan(p->dirfd, c, relist_every);
                if (r == -ENOMEM)
                        return r;
                if (r < 0) {
                        if (r != -ESRCH && r != -ENOENT && r != -EACCES)
                                log_debug_errno(r, "pid %d: DRM fd scan failed: %m", p->pid);
                        continue;
                }
                for (size_t j = 0; j < c->n_fds; j++) {
                        const struct drm_fd *f = &c->fds[j];
                        if (f->kind != DRM_FD_CLIENT) {
                                holder_add(holders, max_holders, &n_holders, f);
                                continue;
                        }
                        const char *device = f->info.pdev[0] ? f->info.pdev : f->node;
                        struct gpu_engine engines[GPU_MAX_ENGINES];
                        r = drm_clients_observe(t, device, p->pid, f->fd, &f->info, engines, NULL);
                        if (r == -ENOMEM)
                                return r;
                        if (r <= 0)
                                continue; /* counted already this sweep, or the table full */
                        struct gpu_use *u = gpu_use_get(uses, &n_uses, max_uses, device);
                        if (u)
                                use_add(u, &f->info, engines);
                }
        }

        for (size_t i = 0; i < n_uses; i++)
                gpu_use_finish(&uses[i]);
        *ret_n_uses = n_uses;
        *ret_n_holders = n_holders;
        return 0;
}

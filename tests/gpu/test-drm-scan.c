/* SPDX-License-Identifier: MIT */
/* daemon/collect/accel/drm.c's fd scanner, drm_proc_scan(), on a scratch
 * process tree: which fds it keeps (one holder per node, DRM clients by
 * their fdinfo), how often it lists the fd table, which changes make it
 * list again at once, a vanished process, a cut fdinfo and the bound on fds.
 *
 *   test-drm-scan */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collect/accel/drm.h"
#include "tap.h"
#include "util.h"

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        return remove(path);
}

static void put(int dir, const char *name, const char *text) {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s.tmp", name);
        _cleanup_close_ int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
        CHECK(renameat(dir, tmp, dir, name) == 0);
}

static void link_fd(int dir, int fd, const char *target) {
        char name[32];
        snprintf(name, sizeof name, "fd/%d", fd);
        (void)unlinkat(dir, name, 0);
        CHECK(symlinkat(target, dir, name) == 0);
}

static void fd_with_info(int dir, int fd, const char *target, const char *info) {
        char name[32];
        link_fd(dir, fd, target);
        snprintf(name, sizeof name, "fdinfo/%d", fd);
        put(dir, name, info);
}

#define GENERIC "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1277\n"
#define CLIENT(id, ino) \
        GENERIC "drm-driver:\tamdgpu\ndrm-client-id:\t" #id "\ndrm-pdev:\t0000:03:00.0\nino:\t" #ino "\n"

/* A process directory p/ with fds of every kind. */
static void make_process(int p) {
        fd_with_info(p, 0, "/dev/null", GENERIC);
        fd_with_info(p, 3, "/dev/dri/renderD129", CLIENT(40, 1089));
        fd_with_info(p, 4, "/dev/dri/card0", GENERIC); /* nouveau, nvidia-drm: no usage stats */
        fd_with_info(p, 5, "/dev/accel/accel0", GENERIC);
        fd_with_info(p, 6, "/dev/accel/accel0", GENERIC); /* one holder per node */
        fd_with_info(p, 7, "/dev/nvidia0", GENERIC);
        fd_with_info(p, 8, "/dev/nvidia0", GENERIC);
        fd_with_info(p, 9, "/dev/nvidiactl", GENERIC);
        fd_with_info(p, 10, "/dev/nvidia-uvm", GENERIC);
        fd_with_info(p, 11, "/dev/nvidia1", GENERIC);
        fd_with_info(p, 12, "/dev/dri/renderD128 (deleted)", CLIENT(41, 1090));
        fd_with_info(p, 13, "/dev/accel/accel1",
                     GENERIC "drm-driver:\tamdxdna_accel_driver\ndrm-client-id:\t2\ndrm-pdev:\t0000:c5:00.1\n"
                             "drm-total-memory:\t16480 KiB\ndrm-resident-memory:\t16480 KiB\n");
        fd_with_info(p, 14, "socket:[12345]", CLIENT(42, 1091)); /* a drm-driver line alone does not make a GPU */
}

/* What the first listing keeps, and the listing cadence. */
static void scan_listing(int p, struct drm_proc_cache *c) {
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_U64(c->lists, 1);
        static const struct {
                int fd;
                enum drm_fd_kind kind;
                const char *node;
        } want[] = {
                { 3, DRM_FD_CLIENT, "renderD129" }, { 5, DRM_FD_ACCEL, "accel0" },   { 7, DRM_FD_NVIDIA, "nvidia0" },
                { 11, DRM_FD_NVIDIA, "nvidia1" },   { 13, DRM_FD_CLIENT, "accel1" },
        };
        for (size_t i = 0; i < ELEMENTSOF(want) && i < c->n_fds; i++) {
                CHECK_EQ_INT(c->fds[i].fd, want[i].fd);
                CHECK_EQ_INT(c->fds[i].kind, want[i].kind);
                CHECK(streq(c->fds[i].node, want[i].node));
        }
        CHECK_U64(c->fds[0].info.client_id, 40);

        /* listed every 3 calls, re-read in between */
        fd_with_info(p, 3, "/dev/dri/renderD129", CLIENT(40, 1089) "drm-engine-gfx:\t7 ns\n");
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_U64(c->lists, 1);
        CHECK(c->fds[0].info.n_engines == 1 && c->fds[0].info.engines[0].ns == 7);
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_U64(c->lists, 1);
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_U64(c->lists, 2);

        /* a new GPU fd is seen at the next listing, not before */
        fd_with_info(p, 15, "/dev/dri/renderD128", CLIENT(43, 2048));
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 6);
        CHECK_U64(c->lists, 3);
}

/* A stale fd table is listed again at once. */
static void scan_stale(int p, struct drm_proc_cache *c) {
        /* stale: an fdinfo that stopped being DRM (fd reused): listed at once */
        put(p, "fdinfo/15", GENERIC);
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_U64(c->lists, 4);
        /* stale: another inode behind a client fd */
        put(p, "fdinfo/3", CLIENT(44, 4444));
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_U64(c->lists, 5);
        CHECK_U64(c->fds[0].ino, 4444);
        CHECK_U64(c->fds[0].info.client_id, 44);
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_U64(c->lists, 5);
        /* stale: a holder fd closed (fd 7): nvidia0 still held through fd 8 */
        CHECK(unlinkat(p, "fd/7", 0) == 0);
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 5);
        CHECK_U64(c->lists, 6);
        CHECK_EQ_INT(c->fds[2].fd, 8);
        /* stale: a client fd closed */
        CHECK(unlinkat(p, "fd/13", 0) == 0 && unlinkat(p, "fdinfo/13", 0) == 0);
        CHECK_EQ_INT(drm_proc_scan(p, c, 3), 4);
        CHECK_U64(c->lists, 7);
        /* every call when relist_every is 0 or 1 */
        CHECK_EQ_INT(drm_proc_scan(p, c, 1), 4);
        CHECK_EQ_INT(drm_proc_scan(p, c, 0), 4);
        CHECK_U64(c->lists, 9);
}

static void scan_gone(int rootfd, struct drm_proc_cache *c) {
        /* a process gone: no fd/ under its directory */
        _cleanup_close_ int g = openat(rootfd, "gone", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK_EQ_INT(drm_proc_scan(g, c, 3), -ESRCH);
        CHECK_EQ_INT(c->n_fds, 0);
        CHECK_EQ_INT(drm_proc_scan(g, c, 3), 0); /* quiet until the next listing */
}

static void scan_long_fdinfo(int rootfd) {
        /* an fdinfo longer than one read: the cut line is dropped, not misread */
        CHECK(mkdirat(rootfd, "long", 0755) == 0 && mkdirat(rootfd, "long/fd", 0755) == 0 &&
              mkdirat(rootfd, "long/fdinfo", 0755) == 0);
        _cleanup_close_ int l = openat(rootfd, "long", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char text[DRM_FDINFO_READ_MAX + 64];
        size_t cut = DRM_FDINFO_READ_MAX - 1, at = cut - 8; /* the gfx line starts 8 bytes before the cut */
        int k = snprintf(text, sizeof text, "drm-driver:\tamdgpu\ndrm-client-id:\t9\n");
        while ((size_t)k + 20 < at)
                k += snprintf(text + k, sizeof text - (size_t)k, "x-pad:\t%010d\n", k);
        k += snprintf(text + k, sizeof text - (size_t)k, "%-*s\n", (int)(at - (size_t)k - 1), "x:");
        CHECK_EQ_INT(k, (int)at);
        snprintf(text + k, sizeof text - (size_t)k, "drm-engine-gfx:\t123456789 ns\n");
        fd_with_info(l, 3, "/dev/dri/renderD128", text);
        struct drm_proc_cache lc = {};
        CHECK_EQ_INT(drm_proc_scan(l, &lc, 3), 1);
        CHECK(lc.n_fds == 1 && lc.fds[0].info.has_client_id && lc.fds[0].info.n_engines == 0);
        free(lc.fds);
}

static void scan_bound(int rootfd) {
        /* the bound on fds kept */
        CHECK(mkdirat(rootfd, "many", 0755) == 0 && mkdirat(rootfd, "many/fd", 0755) == 0 &&
              mkdirat(rootfd, "many/fdinfo", 0755) == 0);
        _cleanup_close_ int m = openat(rootfd, "many", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int i = 0; i < DRM_PROC_MAX_FDS + 6; i++) {
                char info[256];
                snprintf(info, sizeof info, GENERIC "drm-driver:\tamdgpu\ndrm-client-id:\t%d\n", 100 + i);
                fd_with_info(m, 10 + i, "/dev/dri/renderD129", info);
        }
        struct drm_proc_cache mc = {};
        CHECK_EQ_INT(drm_proc_scan(m, &mc, 3), DRM_PROC_MAX_FDS);
        CHECK_EQ_INT(mc.dropped, 6);
        free(mc.fds);
}

static void test_scanner(void) {
        char root[] = "/tmp/test-drm-XXXXXX";
        if (!mkdtemp(root)) {
                TAP_FAIL("mkdtemp: %m");
                return;
        }
        _cleanup_close_ int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(mkdirat(rootfd, "p", 0755) == 0 && mkdirat(rootfd, "p/fd", 0755) == 0 &&
              mkdirat(rootfd, "p/fdinfo", 0755) == 0 && mkdirat(rootfd, "gone", 0755) == 0);
        _cleanup_close_ int p = openat(rootfd, "p", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        make_process(p);

        struct drm_proc_cache c = {};
        scan_listing(p, &c);
        scan_stale(p, &c);
        scan_gone(rootfd, &c);
        scan_long_fdinfo(rootfd);
        scan_bound(rootfd);

        free(c.fds);
        CHECK(nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0);
}

int main(void) {
        test_scanner();
        TEST_DONE();
}

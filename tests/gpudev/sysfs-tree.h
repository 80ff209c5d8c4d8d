/* SPDX-License-Identifier: MIT */
/* For the sysfs tests (test-gpudev, test-rapl): the fixture snapshots of
 * tests/fixtures/gpu, and trees built under a temporary directory tmp. */
#pragma once

#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "util.h"

/* monotonic sample times */
#define T(s) ((usec_t)(s)*USEC_PER_SEC)

/* snprintf into an array, a cut path being a bug in the test */
#define xsprintf(buf, ...)                                                          \
        do {                                                                        \
                if ((size_t)snprintf(buf, sizeof(buf), __VA_ARGS__) >= sizeof(buf)) \
                        abort();                                                    \
        } while (0)

static const char *fixtures;

static inline void fixture_sys(const char *snap, char *buf, size_t size) {
        if ((size_t)snprintf(buf, size, "%s/%s/sys", fixtures, snap) >= size)
                abort();
}

/* ---- trees built in a temporary directory ------------------------------- */

static char tmp[PATH_MAX];

static inline void mkdirs(const char *rel) {
        char path[PATH_MAX];
        xsprintf(path, "%s/%s", tmp, rel);
        for (char *p = path + strlen(tmp) + 1; *p; p++)
                if (*p == '/') {
                        *p = 0;
                        (void)mkdir(path, 0755);
                        *p = '/';
                }
        (void)mkdir(path, 0755);
}

static inline void parent_dirs(const char *rel) {
        char dir[PATH_MAX];
        xsprintf(dir, "%s", rel);
        char *slash = strrchr(dir, '/');
        if (slash) {
                *slash = 0;
                mkdirs(dir);
        }
}

static inline void put(const char *rel, const char *text) {
        char path[PATH_MAX];
        parent_dirs(rel);
        xsprintf(path, "%s/%s", tmp, rel);
        FILE *f = fopen(path, "we");
        if (!f) {
                TAP_FAIL("cannot write %s: %m", path);
                return;
        }
        fputs(text, f);
        fclose(f);
}

/* Several files at once: PUT_FILES({ "a/b", "1\n" }, { "a/c", "2\n" }). */
struct tree_file {
        const char *rel, *text;
};
#define PUT_FILES(...)                                                    \
        do {                                                              \
                static const struct tree_file _files[] = { __VA_ARGS__ }; \
                for (size_t _i = 0; _i < ELEMENTSOF(_files); _i++)        \
                        put(_files[_i].rel, _files[_i].text);             \
        } while (0)

static inline void putf(const char *rel, const char *fmt, ...) _printf_(2, 3);
static inline void putf(const char *rel, const char *fmt, ...) {
        char text[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        put(rel, text);
}

static inline void link_at(const char *rel, const char *target) {
        char path[PATH_MAX];
        parent_dirs(rel);
        xsprintf(path, "%s/%s", tmp, rel);
        (void)unlink(path);
        if (symlink(target, path) < 0) {
                TAP_FAIL("cannot link %s: %m", path);
        }
}

static inline int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        return remove(path) < 0 ? -1 : 0;
}

static inline void rm_rf(const char *rel) {
        char path[PATH_MAX];
        xsprintf(path, "%s/%s", tmp, rel);
        (void)nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void do_rename(const char *from, const char *to) {
        char a[PATH_MAX], b[PATH_MAX];
        xsprintf(a, "%s/%s", tmp, from);
        xsprintf(b, "%s/%s", tmp, to);
        CHECK_EQ_INT(rename(a, b), 0);
}

/* A test's start: fixtures from argv[1], $FIXTURES_DIR or the source tree,
 * tmp made. Returns whether the fixture tree has probe (a path below it),
 * or -1 when tmp cannot be made. */
static inline int tree_setup(int argc, char **argv, const char *name, const char *probe) {
        char dir[64], path[PATH_MAX];

        log_setup(name);
        fixtures = argc > 1 ? argv[1] : getenv("FIXTURES_DIR");
        if (!fixtures)
                fixtures = "tests/fixtures/gpu";
        xsprintf(path, "%s/%s", fixtures, probe);
        xsprintf(dir, "/tmp/%s-XXXXXX", name);
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return -1;
        }
        xsprintf(tmp, "%s", dir);
        return access(path, F_OK) == 0;
}

/* tmp removed; 77 (skipped) when the fixture checks could not run and
 * nothing else failed, else the failure count as TEST_DONE() gives it. */
static inline int tree_finish(bool have_fixture) {
        (void)nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        if (!have_fixture) {
                fprintf(stderr, "no fixture tree at %s: its checks skipped\n", fixtures);
                if (tap_failures == 0)
                        return 77;
        }
        TEST_DONE();
}

/* A test program's main: the tests, then the fixture_tests when the fixture
 * tree has probe (else they are skipped), tmp made for them and removed. */
typedef void (*tree_test_fn)(void);
static inline int tree_main(int argc, char **argv, const char *name, const char *probe, const tree_test_fn *tests,
                            size_t n_tests, const tree_test_fn *fixture_tests, size_t n_fixture_tests) {
        int have_fixture = tree_setup(argc, argv, name, probe);
        if (have_fixture < 0)
                return 1;
        for (size_t i = 0; i < n_tests; i++)
                tests[i]();
        for (size_t i = 0; have_fixture && i < n_fixture_tests; i++)
                fixture_tests[i]();
        return tree_finish(have_fixture);
}

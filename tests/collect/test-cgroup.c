/* SPDX-License-Identifier: MIT */
/* The memory limit of a process's cgroup, on fixture trees of a unified
 * (v2) host and of a hybrid one with the v1 memory controller (as this
 * project's own machines run): the tightest limit up the path, its usage,
 * memory.high, and the files' values. argv[1]: tests/fixtures. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "collect/cgroup.h"
#include "tap.h"
#include "util.h"

static const char *fixtures;

/* The limit for the /proc/PID/cgroup text in cgroupfs/proc/NAME, under
 * the sys root cgroupfs/ROOT. */
static int lookup(const char *root, const char *name, struct cgroup_memory *ret) {
        char path[PATH_MAX], sys[PATH_MAX];
        _cleanup_free_ char *text = NULL;
        size_t len;
        snprintf(path, sizeof path, "%s/cgroupfs/proc/%s", fixtures, name);
        snprintf(sys, sizeof sys, "%s/cgroupfs/%s", fixtures, root);
        int r = read_file_at(AT_FDCWD, path, 65536, &text, &len);
        if (r < 0)
                return r;
        struct cgroup_paths p;
        r = cgroup_parse_paths(text, &p);
        return r < 0 ? r : cgroup_memory_lookup(sys, &p, ret);
}

static void test_v2(void) {
        struct cgroup_memory m;
        CHECK_R(lookup("v2", "v2-service", &m), 0);
        CHECK_EQ_INT(m.version, CGROUP_V2);
        CHECK(streq(m.path, "/system.slice/train.service"));
        CHECK_U64(m.limit_bytes, 314572800);
        CHECK(m.has_usage);
        CHECK_U64(m.usage_bytes, 94371840);
        CHECK(m.has_high);
        CHECK_U64(m.high_bytes, 262144000);
        /* a limit on an ancestor holds for the session below it */
        CHECK_R(lookup("v2", "v2-session", &m), 0);
        CHECK_EQ_INT(m.version, CGROUP_V2);
        CHECK(streq(m.path, "/user.slice"));
        CHECK_U64(m.limit_bytes, 1073741824);
        CHECK_U64(m.usage_bytes, 536870912);
        CHECK(!m.has_high);
        /* "max" all the way up: no limit */
        CHECK_R(lookup("v2", "v2-unlimited", &m), 0);
        CHECK_EQ_INT(m.version, CGROUP_NONE);
        /* a v2 path on a host without it: nothing, not an error */
        CHECK_R(lookup("hybrid", "v2-service", &m), 0);
        CHECK_EQ_INT(m.version, CGROUP_NONE);
}

static void test_v1(void) {
        struct cgroup_memory m;
        /* hybrid: v2 has no memory controller there, v1's memory holds the
         * limit on the job's parent */
        CHECK_R(lookup("hybrid", "hybrid-job", &m), 0);
        CHECK_EQ_INT(m.version, CGROUP_V1);
        CHECK(streq(m.path, "/process_api/169316f400da5a97cc154549a0500356"));
        CHECK_U64(m.limit_bytes, 209715200);
        CHECK(m.has_usage);
        CHECK_U64(m.usage_bytes, 10485760);
        CHECK(!m.has_high);
        CHECK_R(lookup("hybrid", "v1-only", &m), 0);
        CHECK_EQ_INT(m.version, CGROUP_V1);
        CHECK_U64(m.limit_bytes, 209715200);
        CHECK_R(lookup("v2", "v1-only", &m), 0);
        CHECK_EQ_INT(m.version, CGROUP_NONE);
}

static void test_parse(void) {
        uint64_t v;
        bool unl;
        CHECK_R(cgroup_parse_limit("max\n", &v, &unl), 0);
        CHECK(unl);
        CHECK_R(cgroup_parse_limit("314572800\n", &v, &unl), 0);
        CHECK(!unl);
        CHECK_U64(v, 314572800);
        CHECK_R(cgroup_parse_limit("9223372036854771712\n", &v, &unl), 0);
        CHECK(unl);
        CHECK_R(cgroup_parse_limit("", &v, &unl), -EINVAL);
        CHECK_R(cgroup_parse_limit("12 MB\n", &v, &unl), -EINVAL);
        CHECK_R(cgroup_parse_limit("-1\n", &v, &unl), -EINVAL);
        CHECK_R(cgroup_parse_limit("99999999999999999999999\n", &v, &unl), -EINVAL);

        struct cgroup_paths p;
        CHECK_R(cgroup_parse_paths("12:cpu,cpuacct:/a\n4:memory,hugetlb:/b/c\n0::/d\n", &p), 0);
        CHECK(p.has_v2 && streq(p.v2, "/d"));
        CHECK(p.has_v1_memory && streq(p.v1_memory, "/b/c"));
        CHECK_R(cgroup_parse_paths("4:memorybank:/b\n", &p), 0);
        CHECK(!p.has_v1_memory && !p.has_v2);
        CHECK_R(cgroup_parse_paths("0::relative\n", &p), -EINVAL);
        CHECK_R(cgroup_parse_paths("x::/a\n", &p), -EINVAL);
        CHECK_R(cgroup_parse_paths("", &p), 0);
        CHECK(!p.has_v2);
}

int main(int argc, char **argv) {
        if (argc < 2) {
                fprintf(stderr, "usage: test-cgroup FIXTURES\n");
                return 2;
        }
        fixtures = argv[1];
        test_parse();
        test_v2();
        test_v1();
        return tap_failures ? 1 : 0;
}

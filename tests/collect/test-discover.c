/* SPDX-License-Identifier: MIT */
/* Unit tests for job and rank discovery: the environment parser
 * (lib/jobenv.c) and the cgroup parser and reader (daemon/collect/
 * discover.c), over the fixture files of tests/fixtures/{environ,cgroup,
 * discover}.
 *
 * Usage: test-discover FIXTURES_DIR */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/discover.h"
#include "jobenv.h"
#include "tap.h"
#include "util.h"

static char *fixture(const char *dir, const char *sub, const char *name, size_t *ret_len) {
        char path[4096];
        char *buf = NULL;
        snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
        if (read_file_at(AT_FDCWD, path, 1 << 20, &buf, ret_len) < 0) {
                TAP_FAIL("cannot read %s", path);
                return NULL;
        }
        return buf;
}

#define CHECK_VALUE(name, got, want)                                                       \
        do {                                                                               \
                if (strcmp(got, want) != 0)                                                \
                        TAP_FAIL("[%s] %s is '%s', expected '%s'", name, #got, got, want); \
        } while (0)

static void test_environ(const char *dir) {
        static const struct {
                const char *file, *job_id, *rank, *local_rank, *world_size, *attempt, *rank_var;
        } cases[] = {
                /* torchrun's variables win over Slurm's (its restart count too) */
                { "torchrun-under-slurm", "exp-42", "3", "1", "8", "2", "RANK" },
                { "slurm", "12345", "2", "2", "4", "3", "SLURM_PROCID" },
                /* torchrun's default rendezvous id is no id */
                { "torchrun-no-id", "77.pbs01", "0", "0", "1", "", "RANK" },
                { "openmpi", "555", "5", "1", "6", "", "OMPI_COMM_WORLD_RANK" },
                /* invalid values are skipped: the next valid one counts */
                { "hostile", "f3qk", "2", "0", "4", "", "RANK" },
                /* the entry cut short at the end is not believed */
                { "cut-short", "", "4", "0", "8", "", "RANK" },
                { "odd-entries", "", "4", "", "", "", "RANK" },
                { "empty", "", "", "", "", "", NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t len;
                _cleanup_free_ char *buf = fixture(dir, "environ", cases[i].file, &len);
                if (!buf)
                        continue;
                struct jobenv e;
                jobenv_parse(buf, len, &e);
                CHECK_VALUE(cases[i].file, e.value[JOBENV_JOB_ID], cases[i].job_id);
                CHECK_VALUE(cases[i].file, e.value[JOBENV_RANK], cases[i].rank);
                CHECK_VALUE(cases[i].file, e.value[JOBENV_LOCAL_RANK], cases[i].local_rank);
                CHECK_VALUE(cases[i].file, e.value[JOBENV_WORLD_SIZE], cases[i].world_size);
                CHECK_VALUE(cases[i].file, e.value[JOBENV_ATTEMPT], cases[i].attempt);
                CHECK_CASE(cases[i].file,
                           streq(e.var[JOBENV_RANK], cases[i].rank_var) || (!e.var[JOBENV_RANK] && !cases[i].rank_var));
        }
        /* a value longer than a tag value may be is no value */
        char big[300] = "SLURM_JOB_ID=";
        memset(big + 13, 'j', 129);
        struct jobenv e;
        jobenv_parse(big, 13 + 129 + 1, &e);
        CHECK_VALUE("long", e.value[JOBENV_JOB_ID], "");
        jobenv_parse("RANK=1234567890", sizeof "RANK=1234567890", &e);
        CHECK_VALUE("rank over int", e.value[JOBENV_RANK], "");
}

#define H "0f3e2d1c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
#define POD "1b2c3d4e-5f60-4a1b-8c2d-3e4f5a6b7c8d"

static void test_cgroup(const char *dir) {
        static const struct {
                const char *file;
                int r;
                const char *unit, *container_id, *pod_uid;
        } cases[] = {
                { "v2-service", 0, "train.service", "", "" },
                { "v2-session", 0, "session-3.scope", "", "" },
                { "v2-docker", 0, "docker-" H ".scope", H, "" },
                /* cgroup v1: the name=systemd line, since the v2 one is "/" */
                { "v1-docker", 0, "", H, "" },
                { "v2-kubepods", 0, "cri-containerd-" H ".scope", H, POD },
                { "v1-kubepods", 0, "", H, POD },
                { "v2-podman", 0, "user@1000.service", H, "" },
                /* the conmon's scope is not the container's */
                { "v2-conmon", 0, "crio-conmon-" H ".scope", "", "" },
                { "v2-root", 0, "", "", "" },
                /* not a unit name; the v2 line is the one read all the same */
                { "v2-space", 0, "", "", "" },
                { "bad-line", -EINVAL, "", "", "" },
                { "bad-colons", -EINVAL, "", "", "" },
                { "bad-id", -EINVAL, "", "", "" },
                { "bad-relative", -EINVAL, "", "", "" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t len;
                _cleanup_free_ char *buf = fixture(dir, "cgroup", cases[i].file, &len);
                if (!buf)
                        continue;
                struct discovered d = {};
                int r = discover_parse_cgroup(buf, &d);
                CHECK_CASE(cases[i].file, r == cases[i].r);
                CHECK_VALUE(cases[i].file, d.value[DT_UNIT], cases[i].unit);
                CHECK_VALUE(cases[i].file, d.value[DT_CONTAINER_ID], cases[i].container_id);
                CHECK_VALUE(cases[i].file, d.value[DT_POD_UID], cases[i].pod_uid);
        }
        /* a tag found already stays */
        struct discovered d = {};
        strcpy(d.value[DT_UNIT], "given.service");
        CHECK_R(discover_parse_cgroup("0::/system.slice/train.service\n", &d), 0);
        CHECK_VALUE("kept", d.value[DT_UNIT], "given.service");
}

static void test_read(const char *dir) {
        char path[4096];
        struct discovered d;

        snprintf(path, sizeof path, "%s/discover/4242", dir);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0);
        discover_read(fd, &d);
        CHECK_VALUE("4242", d.value[DT_JOB_ID], "exp-42");
        CHECK_VALUE("4242", d.value[DT_RANK], "3");
        CHECK_VALUE("4242", d.value[DT_POD_UID], POD);
        CHECK_VALUE("4242", d.value[DT_CONTAINER_ID], H);
        close(fd);

        /* no environ (unreadable, or gone): the cgroup's tags alone */
        snprintf(path, sizeof path, "%s/discover/4243", dir);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(fd >= 0);
        discover_read(fd, &d);
        CHECK_VALUE("4243", d.value[DT_JOB_ID], "");
        CHECK_VALUE("4243", d.value[DT_UNIT], "train.service");
        close(fd);

        for (enum discover_tag t = 0; t < _DT_MAX; t++)
                CHECK(discover_tag_key(t) != NULL);
        CHECK(streq(discover_tag_key(DT_LOCAL_RANK), jobenv_key(JOBENV_LOCAL_RANK)));
}

int main(int argc, char **argv) {
        const char *dir = argc > 1 ? argv[1] : getenv("FIXTURES_DIR");
        if (!dir) {
                fprintf(stderr, "usage: %s FIXTURES_DIR\n", argv[0]);
                return 2;
        }
        test_environ(dir);
        test_cgroup(dir);
        test_read(dir);
        return tap_failures;
}

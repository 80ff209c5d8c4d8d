/* SPDX-License-Identifier: MIT */
/* A process's job and rank identity, discovered at registration from its
 * environment (/proc/PID/environ: what launchers and batch systems set) and
 * its cgroup (/proc/PID/cgroup: the systemd unit, the container, the
 * Kubernetes pod). Parsers are pure functions of a buffer, like procfs.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

enum discover_tag {
        DT_JOB_ID,
        DT_RANK,
        DT_LOCAL_RANK,
        DT_WORLD_SIZE,
        DT_ATTEMPT,
        DT_UNIT,
        DT_CONTAINER_ID,
        DT_POD_UID,
        _DT_MAX,
};

/* A discovered value is 1 to this many bytes of printable ASCII. */
#define DISCOVER_VALUE_MAX 128

/* What was found: value[t] is "" when tag t was not. */
struct discovered {
        char value[_DT_MAX][DISCOVER_VALUE_MAX + 1];
};

/* "job_id", "rank", ...: the tag key. */
const char *discover_tag_key(enum discover_tag t);

/* The variables of an environ block into the job_id, rank, local_rank,
 * world_size and attempt tags, as jobenv_parse() (lib/jobenv.h) finds them. Tags found
 * already in *ret are kept. */
void discover_parse_environ(const char *buf, size_t len, struct discovered *ret);

/* /proc/PID/cgroup ("ID:controllers:/path" lines) into the unit,
 * container_id and pod_uid tags, from the cgroup v2 line ("0::/path"),
 * else the name=systemd one, else the first other line; lines whose path
 * is "/" do not count. -EINVAL (and *ret untouched) for a line that is not
 * of that form. Tags found already in *ret are kept. */
int discover_parse_cgroup(const char *text, struct discovered *ret);

/* Both files of a /proc/PID directory fd into *ret (zeroed first). A file
 * that cannot be read (another user's process, a process gone) or does
 * not parse adds nothing: discovery never fails a registration. */
void discover_read(int piddir, struct discovered *ret);

/* SPDX-License-Identifier: MIT */
/* Job and rank identity in a process's environment: the variables that
 * launchers (torchrun, srun, mpirun) and batch systems set, as the tags
 * job_id, rank, local_rank, world_size and attempt (the restart count of an
 * elastic or requeued job). mlmond discovers a run's tags
 * with it; mlmonctl run --ranks tells the ranks of a launcher with it. */
#pragma once

#include <stddef.h>

enum jobenv_tag {
        JOBENV_JOB_ID,
        JOBENV_RANK,
        JOBENV_LOCAL_RANK,
        JOBENV_WORLD_SIZE,
        JOBENV_ATTEMPT,
        _JOBENV_MAX,
};

/* A value is 1 to this many bytes: a decimal number for ranks and sizes,
 * printable ASCII without spaces for a job id. */
#define JOBENV_VALUE_MAX 128

struct jobenv {
        char value[_JOBENV_MAX][JOBENV_VALUE_MAX + 1]; /* "": not found */
        const char *var[_JOBENV_MAX];                  /* the variable it came from, NULL: none */
};

/* "job_id", "rank", "local_rank", "world_size", "attempt". */
const char *jobenv_key(enum jobenv_tag t);

/* An environment block ("NAME=value" entries, each NUL-terminated, as in
 * /proc/PID/environ; an entry cut short at the end of buf is ignored)
 * into *ret. For each tag the first variable of its list (see jobenv.c)
 * that holds a valid value wins, whatever the order of the block. */
void jobenv_parse(const char *buf, size_t len, struct jobenv *ret);

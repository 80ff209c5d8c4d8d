/* SPDX-License-Identifier: MIT */
/* The stall verdict of a job: its ranks have stopped completing their step
 * op for longer than its steps ever take, and which rank holds the others.
 *
 * A job is stalled when no rank has completed a step for more than
 * max(floor, factor x the job's recent p99 step): a step normally ends well
 * within its p99, so a pause several times as long is no slow step but one
 * that does not end. The ranks held responsible, in order of evidence:
 *   - those the kernel shows stopped (SIGSTOP, a debugger) or in
 *     uninterruptible sleep (stuck on I/O or in a driver);
 *   - else those that ended while the others wait for them;
 *   - else the wavefront: the ranks whose latest timing of any op is the
 *     oldest, by more than STALL_WAVEFRONT_MS. In a job whose ranks meet in
 *     collectives, the others have gone on to time what comes before the
 *     next collective and wait there; the one that went no further is the
 *     one they wait for.
 * Pure: no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Timings arrive late by what the clients batch (the mlmon package holds a
 * line up to 50 ms): a rank is behind the others only by more than a few of
 * those. */
#define STALL_WAVEFRONT_MS 250

/* One rank of the job as the verdict sees it. */
struct stall_rank {
        bool running;         /* its process runs; false: it ended (at ended_ms) */
        char proc_state;      /* its /proc/PID/stat state letter; 0: unknown */
        int64_t last_step_ms; /* Unix ms of its latest timing of the step op; 0: none yet */
        int64_t last_op_ms;   /* of its latest timing of any op; 0: none */
        int64_t ended_ms;
};

enum stall_cause {
        STALL_NONE,
        STALL_STOPPED,    /* stopped by a signal or a tracer */
        STALL_DISK_SLEEP, /* in uninterruptible sleep */
        STALL_EXITED,     /* ended while the others wait */
        STALL_BEHIND,     /* the wavefront: the others went further */
};

struct stall_verdict {
        bool judged;          /* false: no step yet, or no rank runs (nothing to stall) */
        bool stalled;         /* no step for more than threshold_ms */
        int64_t last_step_ms; /* the latest step of any rank: the job's progress stopped there */
        int64_t threshold_ms; /* max(floor, factor x p99) */
        int64_t idle_ms;      /* now - last_step_ms */
};

/* The verdict at now_ms over ranks[0..n), p99_ms the job's recent p99 of
 * the step op (NaN: unknown, the floor alone counts); ret_causes[i] says
 * why rank i is held responsible (STALL_NONE: it is not, or the job is not
 * stalled). */
void stall_judge(const struct stall_rank *ranks, size_t n, double p99_ms, double factor, int64_t floor_ms,
                 int64_t now_ms, enum stall_cause *ret_causes, struct stall_verdict *ret);

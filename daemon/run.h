/* SPDX-License-Identifier: MIT */
/* A running run as the manager owns it: what is stored of it (info), the
 * collector's probe of its processes, its schedule, and the state of the
 * analyses fed by the tick and by what the application reports. Only the
 * manager's files include this header: the HTTP and StatsD layers ask the
 * manager questions through manager-ops.h and get copies, never a pointer
 * into this struct. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "analyze/leakwatch.h"
#include "analyze/ops.h"
#include "collect/probe.h"
#include "collect/sample.h"

struct run {
        struct run_info info;
        struct probe *probe;          /* the collector's: fds, members, baselines, the last sample */
        sd_event_source *exit_source; /* the pidfd turning readable */
        usec_t next_due_usec;         /* CLOCK_MONOTONIC */
        void *owner;                  /* the manager, for event callbacks */
        struct op_table ops;          /* what the application reports (StatsD, observations) */
        bool gauges_live;             /* every gauge stored for the run is in ops too (false: a
                                      * resumed run whose gauges could not be read back) */
        struct leakwatch leak;        /* anonymous memory floors and the leak verdict */
        bool leak_pss;                /* leak judges a tree's Pss_Anon sum, not its RssAnon sum */
        struct leakwatch leak_main;   /* a tree's main process's own anonymous memory, once read */
        struct leakwatch leak_gpu;    /* the same on GPU memory, once it is known */
};

/* A new run around a probe it takes over (info.pid, start time, uid and
 * children from the probe); -ENOMEM leaves the probe to the caller. */
int run_new(struct probe *p, struct run **ret);
void run_free(struct run *r);

/* The probe read a new comm and cmdline (an exec): copies them into info
 * and says so, for the caller to store. */
bool run_take_identity(struct run *r);

/* The run's verdicts as plain data (analyze/leakwatch.h). */
void run_leak_report(const struct run *r, struct leak_report *ret);

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

#include "analyze/goodput.h"
#include "analyze/leakwatch.h"
#include "analyze/ops.h"
#include "analyze/verdict.h"
#include "collect/probe.h"
#include "collect/sample.h"

/* One second of the input-bound window: what the run's ops of those kinds
 * took, and the running sums of what its samples said up to then (the
 * window's figures are the difference between two seconds). */
struct verdict_second {
        int64_t ts_ms;
        double data_ms, step_ms, steps;
        double child_cpu_ns, child_ns; /* its children's CPU; their number x time */
        double gpu_util_ms, gpu_ms;    /* utilisation x time, time with a known utilisation */
        unsigned workers;              /* the most children the run had in that second */
};

/* The goodput ledger and the verdicts of a running run (manager-verdicts.c). */
struct run_verdicts {
        struct goodput_stream *gp;  /* the ledger since registration (or since mlmond started): NULL until
                                    * the run reports an op or a mark */
        int64_t gp_from_ms;         /* where it starts */
        struct hist steps;          /* the step op's timings: the typical step */
        int64_t typical_ms;         /* when the typical step was last worked out */
        bool first_step_dirty;      /* the first step is not stored yet */
        struct verdict_second *win; /* the input-bound window, one entry per second (a ring) */
        size_t win_cap, win_head, win_n;
        int64_t win_next_ms;       /* the next second to enter it */
        struct verdict_second cum; /* the running sums now */
        unsigned workers;          /* children at the last sample */
        struct {
                int pid;
                uint64_t start_ticks, cpu_ns;
        } * prev; /* the members' CPU at the last sample */
        size_t n_prev;
        struct gpu_idle_watch gpu_watch;
        int64_t limit_read_ms; /* when the memory limit was last read */
        struct oom_limit limit;
        int64_t oom_leak_ms[_OOM_METRIC_MAX]; /* the leak verdict each forecast was made from (its evaluated_ms) */
        struct verdict_report report; /* the latest verdicts */
        bool dirty;                   /* to store at the next tick */
};

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
        struct run_verdicts v;        /* the goodput ledger, input-bound, GPU idle, time to OOM */
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

/* SPDX-License-Identifier: MIT */
#include "run.h"

#include <stdlib.h>
#include <string.h>

int run_new(struct probe *p, struct run **ret) {
        struct run *r = calloc(1, sizeof *r);
        if (!r)
                return -ENOMEM;
        r->probe = p;
        r->info.pid = p->pid;
        r->info.start_time_ticks = p->start_ticks;
        r->info.has_uid = p->has_uid;
        r->info.uid = p->uid;
        r->info.children = p->children;
        *ret = r;
        return 0;
}

void run_free(struct run *r) {
        if (!r)
                return;
        sd_event_source_disable_unref(r->exit_source);
        probe_free(r->probe);
        run_info_done(&r->info);
        ops_table_done(&r->ops);
        leakwatch_done(&r->leak);
        leakwatch_done(&r->leak_gpu);
        leakwatch_done(&r->leak_main);
        free(r->v.gp);
        hist_done(&r->v.steps);
        free(r->v.win);
        free(r->v.prev);
        free(r);
}

void run_leak_report(const struct run *r, struct leak_report *ret) {
        leakwatch_state(&r->leak, r->info.registered_ts_ms, &ret->rss);
        ret->pss = r->leak_pss;
        ret->has_gpu = r->leak_gpu.pts != NULL;
        if (ret->has_gpu)
                leakwatch_state(&r->leak_gpu, r->info.registered_ts_ms, &ret->gpu);
}

bool run_take_identity(struct run *r) {
        struct probe *p = r->probe;
        if (!p->identity_changed)
                return false;
        char *comm = p->comm ? strdup(p->comm) : NULL, *cmdline = p->cmdline ? strdup(p->cmdline) : NULL;
        if ((p->comm && !comm) || (p->cmdline && !cmdline)) {
                free(comm);
                free(cmdline);
                return false; /* tried again at the next sample */
        }
        free(r->info.comm);
        free(r->info.cmdline);
        r->info.comm = comm;
        r->info.cmdline = cmdline;
        p->identity_changed = false;
        return true;
}

/* SPDX-License-Identifier: MIT */
#include "collect/sample.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "util.h"

static const char *const run_state_table[_RUN_STATE_MAX] = {
        [RUN_RUNNING] = "running",
        [RUN_EXITED] = "exited",
        [RUN_UNREGISTERED] = "unregistered",
};

const char *run_state_to_string(enum run_state s) {
        return (unsigned)s < _RUN_STATE_MAX ? run_state_table[s] : NULL;
}

int run_state_from_string(const char *s) {
        for (int i = 0; i < _RUN_STATE_MAX; i++)
                if (streq(run_state_table[i], s))
                        return i;
        return -EINVAL;
}

void run_info_done(struct run_info *ri) {
        free(ri->name);
        free(ri->comm);
        free(ri->cmdline);
        free(ri->tags_json);
        free(ri->step_op);
        free(ri->leak); /* plain data */
        ri->leak = NULL;
        ri->name = ri->comm = ri->cmdline = ri->tags_json = ri->step_op = NULL;
}

void run_baseline_done(struct run_baseline *b) {
        free(b->members);
        free(b->netns);
        *b = (struct run_baseline){};
}

void run_totals_add(struct run_totals *t, const struct sample *s) {
        t->last_ts_ms = s->ts_ms;
        t->samples++;
        t->cpu_time_ns = s->cpu_time_ns;
        t->user_time_ns = s->user_time_ns;
        t->system_time_ns = s->system_time_ns;
        if (s->has_rss) {
                uint64_t peak = s->rss_bytes;
                if (s->has_peak_rss && s->peak_rss_bytes > peak)
                        peak = s->peak_rss_bytes;
                if (!t->has_rss || peak > t->peak_rss_bytes)
                        t->peak_rss_bytes = peak;
                t->final_rss_bytes = s->rss_bytes;
                t->has_rss = true;
        }
        if (s->threads > t->threads_max)
                t->threads_max = s->threads;
        if (s->has_pss) {
                if (!t->has_pss || s->pss_bytes > t->peak_pss_bytes)
                        t->peak_pss_bytes = s->pss_bytes;
                t->final_pss_bytes = s->pss_bytes;
                t->final_uss_bytes = s->uss_bytes;
                t->has_pss = t->has_final_pss = true;
        }
        if (s->has_io) {
                t->has_io = true;
                t->read_bytes = s->read_bytes;
                t->write_bytes = s->write_bytes;
        }
        if (s->has_net) {
                t->has_net = true;
                t->netns_rx_bytes = s->netns_rx_bytes;
                t->netns_tx_bytes = s->netns_tx_bytes;
        }
        if (s->has_gpu_mem) {
                if (!t->has_gpu_mem || s->gpu_mem_bytes > t->peak_gpu_mem_bytes)
                        t->peak_gpu_mem_bytes = s->gpu_mem_bytes;
                t->has_gpu_mem = true;
        }
        if (s->has_gpu_util) {
                t->gpu_util_samples++;
                t->gpu_util_sum_pct += s->gpu_util_pct;
        }
        if (s->has_energy) {
                t->has_energy = true;
                t->energy_j = s->energy_j;
        }
}

int run_info_copy(const struct run_info *src, struct run_info *ret) {
        struct run_info c = *src;
        c.leak = NULL;
        c.name = src->name ? strdup(src->name) : NULL;
        c.comm = src->comm ? strdup(src->comm) : NULL;
        c.cmdline = src->cmdline ? strdup(src->cmdline) : NULL;
        c.tags_json = src->tags_json ? strdup(src->tags_json) : NULL;
        c.step_op = src->step_op ? strdup(src->step_op) : NULL;
        if ((src->name && !c.name) || (src->comm && !c.comm) || (src->cmdline && !c.cmdline) ||
            (src->tags_json && !c.tags_json) || (src->step_op && !c.step_op)) {
                run_info_done(&c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

void run_info_set_exit(struct run_info *ri, int wait_status) {
        ri->has_exit_code = WIFEXITED(wait_status);
        ri->exit_code = ri->has_exit_code ? WEXITSTATUS(wait_status) : 0;
        ri->has_exit_signal = WIFSIGNALED(wait_status);
        ri->exit_signal = ri->has_exit_signal ? WTERMSIG(wait_status) : 0;
}

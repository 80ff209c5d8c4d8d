/* SPDX-License-Identifier: MIT */
/* A run's baseline, as stored with it (the counters of each member and
 * each network namespace at registration, and what members that left had
 * used), and a probe set back to it when mlmond starts again and the run's
 * process is still alive. */
#include "collect/probe.h"

#include <stdlib.h>

int probe_resume(struct probe *r, const struct run_baseline *b, const struct sample *last, usec_t last_mono_usec) {
        struct member *m = calloc(b->n_members ? b->n_members : 1, sizeof *m);
        struct netns_counter *ns = calloc(b->n_netns ? b->n_netns : 1, sizeof *ns);
        if (!m || !ns) {
                free(m);
                free(ns);
                return -ENOMEM;
        }
        for (size_t i = 0; i < b->n_members; i++) {
                const struct baseline_member *v = &b->members[i];
                m[i] = (struct member){
                        .pid = v->pid,
                        .start_ticks = v->start_ticks,
                        .now = v->c,
                        .base = v->c,
                        .acc = { .pid = v->pid, .start_ticks = v->start_ticks },
                        .fds = MEMBER_FDS_NONE,
                };
        }
        for (size_t i = 0; i < b->n_netns; i++) {
                const struct netns_baseline *v = &b->netns[i];
                ns[i] = (struct netns_counter){ .inode = v->inode,
                                                .rx_bytes = v->rx_bytes,
                                                .tx_bytes = v->tx_bytes,
                                                .base_rx_bytes = v->rx_bytes,
                                                .base_tx_bytes = v->tx_bytes };
        }
        for (size_t i = 0; i < r->n_members; i++) {
                accel_member_done(&r->members[i].acc);
                member_fds_close(&r->members[i].fds);
        }
        free(r->members);
        r->members = m;
        r->n_members = b->n_members;
        free(r->netns);
        r->netns = ns;
        r->n_netns = b->n_netns;
        r->left = b->left;
        r->left_rx_bytes = b->left_rx_bytes;
        r->left_tx_bytes = b->left_tx_bytes;
        r->last = *last;
        r->has_last = true;
        r->last_sample_usec = last_mono_usec;
        if (last->has_peak_rss && (!r->has_peak || last->peak_rss_bytes > r->peak_rss_bytes)) {
                r->has_peak = true;
                r->peak_rss_bytes = last->peak_rss_bytes;
        }
        r->resume = true;
        r->resume_net = b->n_netns > 0;
        return 0;
}

int probe_baseline(const struct probe *r, struct run_baseline *ret) {
        struct run_baseline b = {
                .members = calloc(r->n_members ? r->n_members : 1, sizeof *b.members),
                .n_members = r->n_members,
                .left = r->left,
                .netns = calloc(r->n_netns ? r->n_netns : 1, sizeof *b.netns),
                .n_netns = r->n_netns,
                .left_rx_bytes = r->left_rx_bytes,
                .left_tx_bytes = r->left_tx_bytes,
        };
        if (!b.members || !b.netns) {
                run_baseline_done(&b);
                return -ENOMEM;
        }
        for (size_t i = 0; i < r->n_members; i++)
                b.members[i] = (struct baseline_member){ .pid = r->members[i].pid,
                                                         .start_ticks = r->members[i].start_ticks,
                                                         .c = r->members[i].base };
        for (size_t i = 0; i < r->n_netns; i++)
                b.netns[i] = (struct netns_baseline){ .inode = r->netns[i].inode,
                                                      .rx_bytes = r->netns[i].base_rx_bytes,
                                                      .tx_bytes = r->netns[i].base_tx_bytes };
        *ret = b;
        return 0;
}

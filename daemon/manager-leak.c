/* SPDX-License-Identifier: MIT */
/* The leak watches of a run, fed by the tick: which memory series each
 * judges, a tree's copy-on-access told from a leak, and the verdicts stored
 * and logged as they change. */
#include <stdio.h>

#include "format.h"
#include "manager.h"

void manager_store_leak(struct manager *m, struct run *r) {
        struct leak_report rep;
        run_leak_report(r, &rep);
        if (store_update_run_leak(m->store, r->info.id, &rep) < 0)
                m->tick_errors++;
}

/* A tree's anonymous memory (Pss_Anon, each page once) grows: is it the
 * main process's own, or forked workers copying the pages they share with
 * it? Copy-on-access (a DataLoader worker's refcount updates write to
 * every Python object of a dataset the parent built) grows the workers'
 * private memory toward the parent's shared size while the parent's own
 * anonymous memory (shared pages included) stays flat; a leak in the
 * parent grows the latter. True, with the reason, for the former. */
static bool copy_on_access(struct manager *m, struct run *r, char *why, size_t n) {
        struct leak_verdict mv;
        const struct leak_verdict *tv = &r->leak.v;
        if (!r->leak_main.pts || leakwatch_evaluate(&r->leak_main, &m->leak_params, &mv) < 0)
                return false;
        /* judged, and flat: a quarter of the tree's growth is no copy */
        if (!mv.evaluated || mv.suspected || mv.slope_bytes_per_s >= 0.25 * tv->slope_bytes_per_s)
                return false;
        char grew[32], rate[32];
        snprintf(why, n,
                 "workers copy the parent's shared pages: the tree's anonymous memory grew %s in %.0f s (%s) "
                 "while the main process's own did not grow; forked workers touching data the parent holds (a "
                 "DataLoader's dataset) do this, up to the parent's size per worker",
                 format_bytes(grew, sizeof grew, tv->growth_bytes, "", false), tv->window_s,
                 format_bytes(rate, sizeof rate, tv->slope_bytes_per_s, "/s", false));
        return true;
}

/* Feeds one memory series to its leak watch (inside the tick's
 * transaction): a change of verdict is stored and logged. */
static void leak_feed(struct manager *m, struct run *r, struct leakwatch *w, const char *metric, const struct sample *s,
                      uint64_t bytes) {
        double t_s = (double)(s->ts_ms - r->info.registered_ts_ms) / 1000.0;
        enum leakwatch_change c = leakwatch_add(w, &m->leak_params, t_s, s->ts_ms, (double)bytes,
                                                (int64_t)(m->config.leak_clear_after_usec / USEC_PER_MSEC));
        char why[sizeof w->v.reason];
        if (c == LEAKWATCH_SUSPECTED && w == &r->leak && r->leak_pss && copy_on_access(m, r, why, sizeof why)) {
                leakwatch_veto(w, why);
                manager_store_leak(m, r);
                return;
        }
        if (c == LEAKWATCH_NONE)
                return;
        bool suspected = c == LEAKWATCH_SUSPECTED;
        if (store_insert_leak_event(m->store, r->info.id, s->ts_ms, suspected, metric, &w->v) < 0)
                m->tick_errors++;
        if (suspected)
                r->info.leak_detected = true;
        manager_store_leak(m, r);
        log_notice("run %lld (pid %d): %s leak %s: %s", (long long)r->info.id, r->info.pid, metric,
                   suspected ? "suspected" : "cleared", w->v.reason);
}

/* The watch on a tree's main process, fed with the tree's PSS readings. */
static void leak_main_feed(struct manager *m, struct run *r, const struct sample *s) {
        double t_s = (double)(s->ts_ms - r->info.registered_ts_ms) / 1000.0;
        if (!r->probe->has_main_anon)
                return;
        if (!r->leak_main.pts) {
                if (leakwatch_init(&r->leak_main, &m->leak_params) < 0)
                        return;
                leakwatch_mark(&r->leak_main, r->leak.grace_from_t);
        }
        (void)leakwatch_feed(&r->leak_main, t_s, (double)r->probe->main_anon_bytes);
}

/* Anonymous memory always: a run of one process's RssAnon; a tree's
 * Pss_Anon sum when its smaps_rollup is read (an RssAnon sum counts a page
 * shared by forked workers once per process, and each new worker maps the
 * parent's grown heap again); GPU memory once the run has some (its watch
 * starts then, with the grace). */
void manager_leak_step(struct manager *m, struct run *r, const struct sample *s) {
        bool pss = r->info.children && m->collect.pss_interval_usec > 0;
        if (pss != r->leak_pss) { /* at the first sample, or [daemon] pss_interval turned on or off */
                double t_s = (double)(s->ts_ms - r->info.registered_ts_ms) / 1000.0;
                r->leak_pss = pss;
                leakwatch_done(&r->leak_main);
                leakwatch_done(&r->leak);
                if (leakwatch_init(&r->leak, &m->leak_params) < 0)
                        return;
                if (r->info.totals.samples > 1)
                        leakwatch_mark(&r->leak, t_s);
        }
        if (pss && s->has_pss_anon) {
                leak_main_feed(m, r, s);
                leak_feed(m, r, &r->leak, "pss_anon_bytes", s, s->pss_anon_bytes);
        } else if (!pss && s->has_rss)
                leak_feed(m, r, &r->leak, "rss_anon_bytes", s, s->rss_anon_bytes);
        if (s->has_gpu_mem && s->gpu_mem_bytes > 0) {
                if (!r->leak_gpu.pts) {
                        if (leakwatch_init(&r->leak_gpu, &m->leak_params) < 0)
                                return;
                        leakwatch_mark(&r->leak_gpu, (double)(s->ts_ms - r->info.registered_ts_ms) / 1000.0);
                }
                leak_feed(m, r, &r->leak_gpu, "gpu_mem_bytes", s, s->gpu_mem_bytes);
        }
}

/* SPDX-License-Identifier: MIT */
/* The typed rows beside the samples: each sample's use of the devices its
 * run holds, the devices' own figures, and the runs' leak verdicts. The
 * API's JSON is made from them by http/, never stored. */
#include "store/details.h"

#include <stddef.h>

#include "analyze/leakwatch.h"
#include "collect/accel/gpu.h"
#include "store/param.h"
#include "store/store.h"

/* A sample's use of one device, with its engines and regions (empty
 * regions, amdgpu lists 7, left out). */
int store_insert_gpu_use(struct store *s, int64_t run_id, int64_t ts_ms, const struct gpu_use *u) {
        int r = store_exec(s,
                           "INSERT OR REPLACE INTO sample_gpu (ts, run_id, device, driver, estimated, clients, "
                           "mem_bytes, util_pct) VALUES (?,?,?,?,?,?,?,?)",
                           PARAMS(p_int(ts_ms), p_int(run_id), p_text(u->device),
                                  p_text(u->driver[0] ? u->driver : NULL), p_int(u->estimated), p_int(u->clients),
                                  p_u64(u->has_mem, u->mem_bytes), p_double(u->has_util, u->util_pct)));
        static const char part[] = "INSERT OR REPLACE INTO sample_gpu_parts (ts, run_id, device, kind, name, value) "
                                   "VALUES (?,?,?,?,?,?)";
        for (size_t i = 0; r == 0 && i < u->n_engines; i++)
                r = store_exec(s, part,
                               PARAMS(p_int(ts_ms), p_int(run_id), p_text(u->device), p_text("engine"),
                                      p_text(u->engines[i].name),
                                      p_double(u->engines[i].has_util, u->engines[i].util_pct)));
        for (size_t i = 0; r == 0 && i < u->n_regions; i++)
                if (u->regions[i].resident_bytes > 0)
                        r = store_exec(s, part,
                                       PARAMS(p_int(ts_ms), p_int(run_id), p_text(u->device), p_text("region"),
                                              p_text(u->regions[i].name), p_u64(true, u->regions[i].resident_bytes)));
        return r;
}

int store_insert_device_sample(struct store *s, int64_t ts_ms, const struct gpu_device *d) {
        int r = store_exec(s,
                           "INSERT OR REPLACE INTO device_samples (ts, device, kind, driver, busy_pct, "
                           "mem_used_bytes, mem_total_bytes, power_w, energy_j, temp_c, freq_mhz, gtt_used_bytes, "
                           "gtt_total_bytes, freq_max_mhz, suspended) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           PARAMS(p_int(ts_ms), p_text(d->id), p_text(d->kind), p_text(d->driver[0] ? d->driver : NULL),
                                  p_double(d->has_busy, d->busy_pct), p_u64(d->has_mem_used, d->mem_used_bytes),
                                  p_u64(d->has_mem_total, d->mem_total_bytes), p_double(d->has_power, d->power_w),
                                  p_double(d->has_energy, d->energy_j), p_double(d->has_temp, d->temp_c),
                                  p_double(d->has_freq, d->freq_mhz), p_u64(d->has_gtt_used, d->gtt_used_bytes),
                                  p_u64(d->has_gtt_total, d->gtt_total_bytes),
                                  p_double(d->has_freq_max, d->freq_max_mhz), p_int(d->suspended)));
        for (size_t i = 0; r == 0 && i < d->n_gts; i++)
                r = store_exec(s,
                               "INSERT OR REPLACE INTO device_gt_samples (ts, device, gt, busy_pct) VALUES (?,?,?,?)",
                               PARAMS(p_int(ts_ms), p_text(d->id), p_text(d->gts[i].name),
                                      p_double(d->gts[i].has_busy, d->gts[i].busy_pct)));
        return r;
}

static int store_leak_state(struct store *s, int64_t run_id, const char *metric, const struct leak_state *l) {
        bool ev = l->evaluated;
        return store_exec(s,
                          "INSERT OR REPLACE INTO run_leak (run_id, metric, suspected, evaluated, ended, "
                          "slope_bytes_per_s, growth_bytes, window_s, confidence, since_ts, suspected_ts, "
                          "evaluated_ts, reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                          PARAMS(p_int(run_id), p_text(metric), p_int(l->suspected), p_int(ev), p_int(l->ended),
                                 p_double(ev, l->slope_bytes_per_s), p_double(ev, l->growth_bytes),
                                 p_double(ev, l->window_s), p_double(ev, l->confidence),
                                 ev ? p_int(l->since_ms) : p_null(),
                                 l->suspected ? p_int(l->suspected_at_ms) : p_null(),
                                 l->evaluated_ts_ms ? p_int(l->evaluated_ts_ms) : p_null(), p_text(l->reason)));
}

int store_update_run_leak(struct store *s, int64_t run_id, const struct leak_report *r) {
        /* one verdict on anonymous memory: a run's watch moves from one
         * series to the other when [daemon] pss_interval turns on or off */
        int q = store_exec(s, "DELETE FROM run_leak WHERE run_id=? AND metric=?",
                           PARAMS(p_int(run_id), p_text(r->pss ? "rss_anon_bytes" : "pss_anon_bytes")));
        if (q == 0)
                q = store_leak_state(s, run_id, r->pss ? "pss_anon_bytes" : "rss_anon_bytes", &r->rss);
        if (q == 0 && r->has_gpu)
                q = store_leak_state(s, run_id, "gpu_mem_bytes", &r->gpu);
        return q;
}

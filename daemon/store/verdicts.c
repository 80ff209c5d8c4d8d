/* SPDX-License-Identifier: MIT */
#include "store/verdicts.h"

#include <stdio.h>
#include <string.h>

#include "store/param.h"
#include "store/reader.h"

static struct param p_ts(int64_t ts_ms) {
        return ts_ms ? p_int(ts_ms) : p_null();
}

static int write_input_bound(struct store *s, int64_t run_id, const struct input_bound_verdict *v) {
        bool ev = v->evaluated;
        return store_exec(s,
                          "INSERT OR REPLACE INTO run_input_bound (run_id, flagged, evaluated, share_pct, "
                          "data_wait_s, step_s, window_s, workers, workers_cpu_pct, gpu_util_pct, since_ts, "
                          "evaluated_ts, reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                          PARAMS(p_int(run_id), p_int(v->flagged), p_int(ev), p_double(ev, v->share_pct),
                                 p_double(ev, v->data_wait_s), p_double(ev, v->step_s), p_double(true, v->window_s),
                                 p_u64(ev, v->workers), p_double(ev && v->has_workers_cpu, v->workers_cpu_pct),
                                 p_double(ev && v->has_gpu, v->gpu_util_pct), p_ts(v->since_ms), p_ts(v->evaluated_ms),
                                 p_text(v->reason)));
}

static int write_gpu_idle(struct store *s, int64_t run_id, const struct gpu_idle_verdict *v) {
        char state[2] = { v->lingering_state, 0 };
        return store_exec(s,
                          "INSERT OR REPLACE INTO run_gpu_idle (run_id, flagged, evaluated, lingering, device, "
                          "mem_bytes, util_pct, idle_s, since_ts, lingering_pid, lingering_state, evaluated_ts, "
                          "reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                          PARAMS(p_int(run_id), p_int(v->flagged), p_int(v->evaluated), p_int(v->lingering),
                                 p_text(v->device[0] ? v->device : NULL), p_u64(v->has_mem, v->mem_bytes),
                                 p_double(v->has_util, v->util_pct), p_double(v->since_ms != 0, v->idle_s),
                                 p_ts(v->since_ms), v->lingering ? p_int(v->lingering_pid) : p_null(),
                                 p_text(v->lingering && state[0] ? state : NULL), p_ts(v->evaluated_ms),
                                 p_text(v->reason)));
}

static int write_oom(struct store *s, int64_t run_id, int metric, const struct oom_forecast *f, int64_t ts_ms) {
        const struct oom_limit *l = &f->limit;
        bool lim = l->source != OOM_NONE;
        return store_exec(s,
                          "INSERT OR REPLACE INTO run_oom (run_id, metric, known, eta_s, slope_lo_bytes_per_s, "
                          "source, limit_bytes, usage_bytes, high_bytes, high_eta_s, location, evaluated_ts, "
                          "reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                          PARAMS(p_int(run_id), p_text(oom_metric_name(metric)), p_int(f->known),
                                 p_double(f->known, f->eta_s),
                                 p_double(f->slope_lo_bytes_per_s > 0, f->slope_lo_bytes_per_s),
                                 p_text(oom_source_name(l->source)), p_u64(lim, l->limit_bytes),
                                 p_u64(lim && l->has_usage, l->usage_bytes), p_u64(lim && l->has_high, l->high_bytes),
                                 p_double(f->has_high_eta, f->high_eta_s), p_text(lim && l->where[0] ? l->where : NULL),
                                 p_ts(ts_ms), p_text(f->reason)));
}

int store_update_run_verdicts(struct store *s, int64_t run_id, const struct verdict_report *r) {
        int q = 0;
        if (r->has_input_bound)
                q = write_input_bound(s, run_id, &r->input_bound);
        if (q == 0 && r->has_gpu_idle)
                q = write_gpu_idle(s, run_id, &r->gpu_idle);
        for (int m = 0; q == 0 && m < _OOM_METRIC_MAX; m++)
                if (r->has_oom[m])
                        q = write_oom(s, run_id, m, &r->oom[m], r->oom_evaluated_ms[m]);
        return q;
}

/* ---- reads ------------------------------------------------------------------ */

static double col_d(sqlite3_stmt *st, int i, bool *ret_known) {
        bool known = sqlite3_column_type(st, i) != SQLITE_NULL;
        if (ret_known)
                *ret_known = known;
        return known ? sqlite3_column_double(st, i) : 0;
}

static void col_text(sqlite3_stmt *st, int i, char *buf, size_t size) {
        const unsigned char *t = sqlite3_column_text(st, i);
        snprintf(buf, size, "%s", t ? (const char *)t : "");
}

static void input_bound_row(sqlite3_stmt *st, struct input_bound_verdict *v) {
        *v = (struct input_bound_verdict){
                .flagged = sqlite3_column_int(st, 0) != 0,
                .evaluated = sqlite3_column_int(st, 1) != 0,
                .share_pct = col_d(st, 2, NULL),
                .data_wait_s = col_d(st, 3, NULL),
                .step_s = col_d(st, 4, NULL),
                .window_s = col_d(st, 5, NULL),
                .workers = (unsigned)sqlite3_column_int(st, 6),
                .since_ms = sqlite3_column_int64(st, 9),
                .evaluated_ms = sqlite3_column_int64(st, 10),
        };
        v->workers_cpu_pct = col_d(st, 7, &v->has_workers_cpu);
        v->gpu_util_pct = col_d(st, 8, &v->has_gpu);
        col_text(st, 11, v->reason, sizeof v->reason);
}

static void gpu_idle_row(sqlite3_stmt *st, struct gpu_idle_verdict *v) {
        *v = (struct gpu_idle_verdict){
                .flagged = sqlite3_column_int(st, 0) != 0,
                .evaluated = sqlite3_column_int(st, 1) != 0,
                .lingering = sqlite3_column_int(st, 2) != 0,
                .mem_bytes = (uint64_t)sqlite3_column_int64(st, 4),
                .idle_s = col_d(st, 6, NULL),
                .since_ms = sqlite3_column_int64(st, 7),
                .lingering_pid = sqlite3_column_int(st, 8),
                .evaluated_ms = sqlite3_column_int64(st, 10),
        };
        col_text(st, 3, v->device, sizeof v->device);
        v->has_mem = sqlite3_column_type(st, 4) != SQLITE_NULL;
        v->util_pct = col_d(st, 5, &v->has_util);
        const unsigned char *state = sqlite3_column_text(st, 9);
        v->lingering_state = state ? (char)state[0] : 0;
        col_text(st, 11, v->reason, sizeof v->reason);
}

static void oom_row(sqlite3_stmt *st, struct oom_forecast *f) {
        *f = (struct oom_forecast){
                .known = sqlite3_column_int(st, 1) != 0,
                .eta_s = col_d(st, 2, NULL),
                .slope_lo_bytes_per_s = col_d(st, 3, NULL),
        };
        const unsigned char *src = sqlite3_column_text(st, 4);
        for (int k = 0; src && k < _OOM_SOURCE_MAX; k++)
                if (oom_source_name(k) && streq(oom_source_name(k), (const char *)src))
                        f->limit.source = (enum oom_source)k;
        f->limit.limit_bytes = (uint64_t)sqlite3_column_int64(st, 5);
        f->limit.has_usage = sqlite3_column_type(st, 6) != SQLITE_NULL;
        f->limit.usage_bytes = (uint64_t)sqlite3_column_int64(st, 6);
        f->limit.has_high = sqlite3_column_type(st, 7) != SQLITE_NULL;
        f->limit.high_bytes = (uint64_t)sqlite3_column_int64(st, 7);
        f->high_eta_s = col_d(st, 8, &f->has_high_eta);
        col_text(st, 9, f->limit.where, sizeof f->limit.where);
        col_text(st, 11, f->reason, sizeof f->reason);
}

int query_run_verdicts(struct store *s, const struct query_limits *l, int64_t id, struct verdict_report *ret) {
        struct budget b;
        sqlite3 *db = reader_begin(s, l, &b);
        _cleanup_reset_ sqlite3_stmt *a = NULL, *g = NULL, *o = NULL;
        struct verdict_report rep = {};
        int r = reader_prepare(s, db,
                               "SELECT flagged, evaluated, share_pct, data_wait_s, step_s, window_s, workers, "
                               "workers_cpu_pct, gpu_util_pct, since_ts, evaluated_ts, reason FROM run_input_bound "
                               "WHERE run_id=?",
                               &a);
        if (r == 0) {
                bind_params(a, PARAMS(p_int(id)));
                if ((r = step_one(db, a)) == 1) {
                        rep.has_input_bound = true;
                        input_bound_row(a, &rep.input_bound);
                }
        }
        if (r >= 0)
                r = reader_prepare(s, db,
                                   "SELECT flagged, evaluated, lingering, device, mem_bytes, util_pct, idle_s, "
                                   "since_ts, lingering_pid, lingering_state, evaluated_ts, reason FROM run_gpu_idle "
                                   "WHERE run_id=?",
                                   &g);
        if (r == 0) {
                bind_params(g, PARAMS(p_int(id)));
                if ((r = step_one(db, g)) == 1) {
                        rep.has_gpu_idle = true;
                        gpu_idle_row(g, &rep.gpu_idle);
                }
        }
        if (r >= 0)
                r = reader_prepare(s, db,
                                   "SELECT metric, known, eta_s, slope_lo_bytes_per_s, source, limit_bytes, "
                                   "usage_bytes, high_bytes, high_eta_s, location, evaluated_ts, reason FROM run_oom "
                                   "WHERE run_id=?",
                                   &o);
        if (r == 0)
                bind_params(o, PARAMS(p_int(id)));
        while (r >= 0 && (r = step_one(db, o)) == 1) {
                const unsigned char *metric = sqlite3_column_text(o, 0);
                int m = metric && streq((const char *)metric, "gpu_mem_bytes") ? OOM_GPU : OOM_RSS;
                rep.has_oom[m] = true;
                oom_row(o, &rep.oom[m]);
                rep.oom_evaluated_ms[m] = sqlite3_column_int64(o, 10);
        }
        reader_end(s);
        if (r < 0)
                return r;
        *ret = rep;
        return 0;
}

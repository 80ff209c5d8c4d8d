/* SPDX-License-Identifier: MIT */
#include "analyze/stall.h"

#include <math.h>

/* The wavefront among the running ranks: those whose latest timing is the
 * oldest by more than STALL_WAVEFRONT_MS; none when they all are. */
static size_t mark_behind(const struct stall_rank *ranks, size_t n, enum stall_cause *causes) {
        int64_t oldest = INT64_MAX;
        for (size_t i = 0; i < n; i++)
                if (ranks[i].running && ranks[i].last_op_ms > 0 && ranks[i].last_op_ms < oldest)
                        oldest = ranks[i].last_op_ms;
        size_t behind = 0, ahead = 0;
        for (size_t i = 0; i < n; i++)
                if (ranks[i].running && ranks[i].last_op_ms > 0) {
                        if (ranks[i].last_op_ms <= oldest + STALL_WAVEFRONT_MS)
                                behind++;
                        else
                                ahead++;
                }
        if (ahead == 0)
                return 0; /* all stopped at the same point: none is behind */
        for (size_t i = 0; i < n; i++)
                if (ranks[i].running && ranks[i].last_op_ms > 0 && ranks[i].last_op_ms <= oldest + STALL_WAVEFRONT_MS)
                        causes[i] = STALL_BEHIND;
        return behind;
}

static enum stall_cause state_cause(char state) {
        switch (state) {
        case 'T':
        case 't':
                return STALL_STOPPED;
        case 'D':
                return STALL_DISK_SLEEP;
        }
        return STALL_NONE;
}

void stall_judge(const struct stall_rank *ranks, size_t n, double p99_ms, double factor, int64_t floor_ms,
                 int64_t now_ms, enum stall_cause *ret_causes, struct stall_verdict *ret) {
        struct stall_verdict v = {};
        bool running = false;
        for (size_t i = 0; i < n; i++) {
                ret_causes[i] = STALL_NONE;
                running = running || ranks[i].running;
                if (ranks[i].last_step_ms > v.last_step_ms)
                        v.last_step_ms = ranks[i].last_step_ms;
        }
        double k = isfinite(p99_ms) && p99_ms > 0 ? factor * p99_ms : 0;
        v.threshold_ms = k > (double)floor_ms ? (int64_t)ceil(k) : floor_ms;
        v.judged = running && v.last_step_ms > 0;
        if (!v.judged) {
                *ret = v;
                return;
        }
        v.idle_ms = now_ms - v.last_step_ms;
        v.stalled = v.idle_ms > v.threshold_ms;
        if (v.stalled) {
                size_t named = 0;
                for (size_t i = 0; i < n; i++)
                        if (ranks[i].running && (ret_causes[i] = state_cause(ranks[i].proc_state)) != STALL_NONE)
                                named++;
                size_t exited = 0;
                for (size_t i = 0; named == 0 && i < n; i++)
                        exited += !ranks[i].running;
                for (size_t i = 0; exited > 0 && i < n; i++)
                        if (!ranks[i].running)
                                ret_causes[i] = STALL_EXITED;
                if (named == 0 && exited == 0)
                        mark_behind(ranks, n, ret_causes);
        }
        *ret = v;
}

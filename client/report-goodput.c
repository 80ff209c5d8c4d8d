/* SPDX-License-Identifier: MIT */
/* The goodput ledger and the verdicts beside the leak as mlmonctl prints
 * them: a report's (and report --job's) goodput section, and the lines of
 * `show`. Knows nothing of HTTP but the one fetch of the ledger. */
#include <inttypes.h>
#include <string.h>

#include "mlmonctl.h"
#include "output.h"
#include "report.h"

static const struct {
        const char *key, *label;
} parts[] = {
        { "startup_s", "startup" },     { "step_s", "step" },
        { "data_wait_s", "data wait" }, { "checkpoint_s", "checkpoint" },
        { "eval_s", "eval" },           { "idle_s", "idle" },
        { "lost_s", "lost" },           { "other_s", "other" },
};

/* "123 J", "186.2 kJ" */
static const char *fmt_joules(char *buf, size_t size, double j) {
        if (j >= 1e6)
                snprintf(buf, size, "%.1f MJ", j / 1e6);
        else if (j >= 1e4)
                snprintf(buf, size, "%.1f kJ", j / 1e3);
        else
                snprintf(buf, size, "%.3g J", j);
        return buf;
}

void print_goodput(FILE *f, json_object *gp, const char *whose) {
        char a[FMT_MAX], b[FMT_MAX], c[FMT_MAX];
        double wall = 0, v, pct, ideal, steps;
        if (!gp)
                return;
        _cleanup_free_ char *op = text_printable(json_get_str(gp, "step_op"));
        json_get_number(gp, "wall_s", &wall);
        if (!json_get_number(gp, "step_s", &v)) {
                _cleanup_free_ char *why = text_printable(json_get_str(gp, "reason"));
                fprintf(f, "Goodput%s: no figures: %s\n", whose, why ? why : "-");
                return;
        }
        bool has_pct = json_get_number(gp, "goodput_pct", &pct),
             has_ideal = json_get_number(gp, "ideal_step_ms", &ideal);
        json_get_number(gp, "steps", &steps);
        fprintf(f, "Goodput%s: %s (%.0f steps of %s, ideal step %s, over %s)\n", whose,
                fmt_pct(a, sizeof a, has_pct, pct), steps, op ? op : "-", fmt_ms(b, sizeof b, has_ideal, ideal),
                fmt_seconds(c, sizeof c, true, wall));
        static const char *const titles[] = { "Part", "Time", "Share" };
        static const bool right[] = { false, true, true };
        struct table t = { .ncols = 3, .titles = titles, .right = right };
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                bool known = json_get_number(gp, parts[i].key, &v);
                table_add(&t, parts[i].label);
                table_add(&t, fmt_seconds(a, sizeof a, known, v));
                table_add(&t, fmt_pct(b, sizeof b, known && wall > 0, wall > 0 ? 100 * v / wall : 0));
        }
        table_print(f, &t, "  ", 0, 0);
        table_done(&t);
        double e, per_step, per_hour;
        if (json_get_number(gp, "energy_j", &e)) {
                bool s = json_get_number(gp, "energy_per_step_j", &per_step),
                     h = json_get_number(gp, "energy_per_productive_hour_j", &per_hour);
                fprintf(f, "  energy: %s", fmt_joules(a, sizeof a, e));
                if (s)
                        fprintf(f, ", %s per step", fmt_joules(b, sizeof b, per_step));
                if (h)
                        fprintf(f, ", %s per productive hour", fmt_joules(c, sizeof c, per_hour));
                fputc('\n', f);
        }
}

int fetch_goodput(const char *path, json_object **ret) {
        /* an older mlmond has no ledger: the report goes on without it */
        *ret = NULL;
        return api_call_full("GET", path, NULL, true, ret, NULL) < 0 ? -1 : 0;
}

/* "input-bound: YES (reason)", "GPU idle: no verdict (reason)" */
static void verdict_line(FILE *f, const char *title, json_object *v, const char *yes) {
        if (!v) {
                fprintf(f, "%s: not evaluated\n", title);
                return;
        }
        _cleanup_free_ char *reason = text_printable(json_get_str(v, "reason"));
        int flagged = json_get_bool(v, "flagged");
        bool judged = json_get_bool(v, "evaluated") == 1;
        fprintf(f, "%s: %s (%s)\n", title, flagged == 1 ? yes : judged ? "no" : "no verdict", reason ? reason : "-");
}

void print_verdicts(FILE *f, json_object *run) {
        json_object *leak = json_get_object(run, "leak");
        json_object *oom = json_get_object(leak, "oom"),
                    *gpu_oom = json_get_object(json_get_object(leak, "gpu_mem"), "oom");
        char a[FMT_MAX];
        double eta;
        for (int i = 0; i < 2; i++) {
                json_object *o = i == 0 ? oom : gpu_oom;
                if (!o)
                        continue;
                _cleanup_free_ char *reason = text_printable(json_get_str(o, "reason"));
                bool known = json_get_number(o, "eta_s", &eta);
                if (known)
                        fprintf(f, "%s: %s (%s)\n", i == 0 ? "time to OOM" : "time to GPU OOM",
                                fmt_seconds(a, sizeof a, true, eta), reason ? reason : "-");
                else
                        fprintf(f, "%s: %s\n", i == 0 ? "time to OOM" : "time to GPU OOM", reason ? reason : "-");
        }
        verdict_line(f, "input-bound", json_get_object(run, "input_bound"), "YES");
        verdict_line(f, "GPU idle", json_get_object(run, "gpu_idle"), "YES");
}

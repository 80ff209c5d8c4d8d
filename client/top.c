/* SPDX-License-Identifier: MIT */
#include "top.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output.h"
#include "util.h"

/* Highest CPU first; unknown CPU last; then by id. */
static int top_cmp(const void *a, const void *b) {
        const struct top_run *x = a, *y = b;
        double cx = 0, cy = 0;
        bool kx = json_get_number(json_get_object(x->run, "latest"), "cpu_pct", &cx);
        bool ky = json_get_number(json_get_object(y->run, "latest"), "cpu_pct", &cy);
        if (kx != ky)
                return kx ? -1 : 1;
        if (kx && cx != cy)
                return cx > cy ? -1 : 1;
        int64_t ix = 0, iy = 0;
        (void)json_get_int(x->run, "id", &ix);
        (void)json_get_int(y->run, "id", &iy);
        return ix < iy ? -1 : ix > iy;
}

/* The op with the most events in the window: among the timed ops (they have
 * a p99), else among all the window's ops (counters). Ties: by name. */
static const char *top_op(const struct top_run *t) {
        const char *best = NULL;
        double best_count = -1;
        json_object *sets[2] = { json_get_object(t->latency, "ops"), json_get_object(t->window, "ops") };
        for (size_t s = 0; s < ELEMENTSOF(sets) && !best; s++) {
                if (!sets[s])
                        continue;
                json_object_object_foreach(sets[s], name, o) {
                        double c;
                        if (!json_get_number(o, "count", &c))
                                continue;
                        if (c > best_count || (c == best_count && best && strcmp(name, best) < 0)) {
                                best = name;
                                best_count = c;
                        }
                }
        }
        return best;
}

static void add_number(struct table *t, json_object *o, const char *key, int decimals) {
        double d;
        if (json_get_number(o, key, &d))
                table_addf(t, "%.*f", decimals, d);
        else
                table_add(t, NULL);
}

static void print_header(FILE *f, json_object *health, int64_t now_ms) {
        char clock[32] = "-", b[FMT_MAX];
        time_t tt = (time_t)(now_ms / 1000);
        struct tm tm;
        double d;
        if (localtime_r(&tt, &tm))
                strftime(clock, sizeof clock, "%H:%M:%S", &tm);
        fprintf(f, "mlmonctl top - %s - ", clock);
        if (!health) {
                fputs("mlmond: health unavailable\n", f);
                return;
        }
        _cleanup_free_ char *status = text_printable(json_get_str(health, "status"));
        fprintf(f, "mlmond %s", status ? status : "-");
        if (json_get_number(health, "runs_active", &d))
                fprintf(f, ", runs_active %.0f", d);
        else
                fputs(", runs_active -", f);
        if (json_get_number(health, "last_tick_ms", &d))
                fprintf(f, ", last_tick %s", fmt_ms(b, sizeof b, true, d));
        else
                fputs(", last_tick -", f);
        if (json_get_number(health, "self_cpu_pct", &d))
                fprintf(f, ", self CPU %.1f %%", d);
        fputc('\n', f);
}

void print_top(FILE *f, json_object *health, struct top_run *runs, size_t n, int64_t now_ms, int max_width) {
        static const char *const titles[] = { "ID",     "PID",     "NAME",   "CPU%", "RSS",
                                              "READ/s", "WRITE/s", "TOP-OP", "P99",  "OPS/s" };
        static const bool right[] = { true, true, false, true, true, true, true, false, true, true };
        enum { NAME_COL = 2 };
        struct table t = { .ncols = ELEMENTSOF(titles), .titles = titles, .right = right };

        print_header(f, health, now_ms);
        fputc('\n', f);
        if (n == 0) {
                fputs("No running runs.\n", f);
                return;
        }
        qsort(runs, n, sizeof *runs, top_cmp);
        for (size_t i = 0; i < n; i++) {
                json_object *run = runs[i].run, *latest = json_get_object(run, "latest");
                char b[FMT_MAX];
                double d;
                add_number(&t, run, "id", 0);
                add_number(&t, run, "pid", 0);
                const char *name = json_get_str(run, "name");
                table_add(&t, name ? name : json_get_str(run, "comm"));
                add_number(&t, latest, "cpu_pct", 1);
                bool known = json_get_number(latest, "rss_bytes", &d);
                table_add(&t, fmt_bytes(b, sizeof b, known, d));
                known = json_get_number(latest, "read_bytes_per_s", &d);
                table_add(&t, fmt_rate(b, sizeof b, known, d));
                known = json_get_number(latest, "write_bytes_per_s", &d);
                table_add(&t, fmt_rate(b, sizeof b, known, d));

                const char *op = top_op(&runs[i]);
                table_add(&t, op);
                json_object *lop = op ? json_get_object(json_get_object(runs[i].latency, "ops"), op) : NULL;
                known = json_get_number(lop, "p99_ms", &d);
                table_add(&t, fmt_ms(b, sizeof b, known, d));
                if (op && json_get_number(json_get_object(json_get_object(runs[i].window, "ops"), op), "per_s", &d))
                        table_addf(&t, "%.1f", d);
                else
                        table_add(&t, NULL);
        }
        table_print(f, &t, NULL, max_width, NAME_COL);
        table_done(&t);
}

/* SPDX-License-Identifier: MIT */
/* `mlmonctl report --job JOB_ID`: the job document of GET /v1/jobs/JOB_ID
 * (runs, the ops of every rank merged, each rank against the job, the
 * stragglers), printed as the run report's op tables and a table of ranks
 * per op. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "mlmonctl.h"
#include "output.h"
#include "report.h"
#include "util.h"

/* Whether the straggler list names run id for op. */
static bool is_straggler(json_object *stragglers, int64_t run, const char *op) {
        for (size_t i = 0; stragglers && i < json_object_array_length(stragglers); i++) {
                json_object *s = json_object_array_get_idx(stragglers, i);
                int64_t id;
                const char *o = json_get_str(s, "op");
                if (json_get_int(s, "run", &id) && id == run && o && streq(o, op))
                        return true;
        }
        return false;
}

/* "Ranks, train_step:" and rank, run, count, p50, p99, p50 against the
 * job's merged p50, and the flag. */
static void print_ranks(FILE *f, json_object *doc, const char *op, json_object *ranks) {
        static const char *const titles[] = { "Rank", "Run", "Count", "p50", "p99", "p50 vs job", "" };
        static const bool right[] = { false, true, true, true, true, true, false };
        struct table t = { .ncols = ELEMENTSOF(titles), .titles = titles, .right = right };
        json_object *stragglers = json_get_array(doc, "stragglers");
        double job_p50;
        bool job_known = json_get_number(json_get_object(json_get_object(doc, "ops"), op), "p50_ms", &job_p50);
        for (size_t i = 0; i < json_object_array_length(ranks); i++) {
                json_object *r = json_object_array_get_idx(ranks, i);
                char b[FMT_MAX];
                double count = 0, p50 = NAN, p99 = NAN;
                int64_t run = 0;
                const char *rank = json_get_str(r, "rank");
                _cleanup_free_ char *prank = rank ? text_printable(rank) : NULL;
                table_add(&t, prank ? prank : "-");
                bool rknown = json_get_int(r, "run", &run);
                if (rknown)
                        table_addf(&t, "%" PRId64, run);
                else
                        table_add(&t, NULL);
                (void)json_get_number(r, "count", &count);
                table_addf(&t, "%.0f", count);
                bool p50_known = json_get_number(r, "p50_ms", &p50), p99_known = json_get_number(r, "p99_ms", &p99);
                table_add(&t, fmt_ms(b, sizeof b, p50_known, p50));
                table_add(&t, fmt_ms(b, sizeof b, p99_known, p99));
                if (p50_known && job_known && job_p50 > 0)
                        table_addf(&t, "%+.1f%%", (p50 / job_p50 - 1) * 100 + 0.0);
                else
                        table_add(&t, NULL);
                table_add(&t, rknown && is_straggler(stragglers, run, op) ? "STRAGGLER" : "");
        }
        _cleanup_free_ char *pop = text_printable(op);
        fprintf(f, "\nRanks, %s:\n", pop ? pop : "?");
        table_print(f, &t, "  ", 0, 0);
        table_done(&t);
}

static void print_stragglers(FILE *f, json_object *doc) {
        json_object *s = json_get_array(doc, "stragglers");
        size_t n = s ? json_object_array_length(s) : 0;
        double pct = NAN;
        (void)json_get_number(doc, "straggler_pct", &pct);
        if (n == 0) {
                fprintf(f, "\nNo stragglers (a rank's median more than %g%% slower than the others', beyond noise).\n",
                        pct);
                return;
        }
        fprintf(f, "\n%zu straggler%s:\n", n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *why = text_printable(json_get_str(json_object_array_get_idx(s, i), "reason"));
                fprintf(f, "  %s\n", why ? why : "?");
        }
}

static void print_job_report(FILE *f, json_object *doc) {
        json_object *runs = json_get_array(doc, "runs"), *ranks = json_get_object(doc, "ranks");
        char b[FMT_MAX], e[FMT_MAX], d[FMT_MAX];
        int64_t from = 0, until = 0;
        size_t nruns = runs ? json_object_array_length(runs) : 0, running = 0;
        for (size_t i = 0; i < nruns; i++) {
                const char *st = json_get_str(json_object_array_get_idx(runs, i), "state");
                running += st && streq(st, "running");
        }
        _cleanup_free_ char *id = text_printable(json_get_str(doc, "job_id"));
        fprintf(f, "job %s: %zu run%s, %zu running\n", id ? id : "?", nruns, nruns == 1 ? "" : "s", running);
        bool fknown = json_get_int(doc, "from", &from), uknown = json_get_int(doc, "until", &until);
        fmt_ts_ms(b, sizeof b, fknown, from);
        fmt_ts_ms(e, sizeof e, uknown, until);
        const char *mark = json_get_str(doc, "since_mark");
        _cleanup_free_ char *label = mark ? text_printable(mark) : NULL;
        _cleanup_free_ char *span = NULL;
        if (asprintf(&span, "%s .. %s (%s)%s%s", b, e,
                     fmt_seconds(d, sizeof d, fknown && uknown, (double)(until - from) / 1000),
                     label ? ", each run since its mark " : "", label ? label : "") < 0)
                span = NULL;
        print_field(f, "span:", span ? span : "-");

        fputc('\n', f);
        if (!json_get_object(doc, "ops") || json_object_object_length(json_get_object(doc, "ops")) == 0) {
                fputs("No timed operations in this span.\n", f);
                return;
        }
        fputs("Operations over the span, all ranks merged:\n", f);
        print_op_tables(f, doc, NULL);
        if (ranks) {
                json_object_object_foreach(ranks, op, arr) {
                        if (json_object_is_type(arr, json_type_array))
                                print_ranks(f, doc, op, arr);
                }
        }
        print_stragglers(f, doc);
        json_object *gp = json_get_object(doc, "goodput");
        if (gp) {
                fputc('\n', f);
                print_goodput(f, gp, " of the job (the mean of its ranks)");
        }
}

int verb_report_job(struct args *a) {
        _cleanup_json_ json_object *doc = NULL;
        _cleanup_free_ char *id = NULL, *path = NULL, *q = NULL, *span = NULL, *gpath = NULL;
        if (!*a->job)
                return usage_error("--job: empty job ID");
        if (a->n_operands > 0)
                return usage_error("report: --job and a run ID cannot both be given");
        if (a->n_slo > 0)
                return usage_error("report: --slo applies to one run, not to --job");
        if (a->window && a->since_mark)
                return usage_error(
                        "--window and --since-mark cannot both be given: the span starts at each run's mark");
        if (!(id = url_escape(a->job)))
                return oom();
        if (a->window)
                q = url_escape(a->window);
        else if (a->since_mark)
                q = url_escape(a->since_mark);
        if ((a->window || a->since_mark) && !q)
                return oom();
        /* the span, the same for the job and its goodput ledger (asprintf
         * leaves its pointer undefined on failure) */
        if (asprintf(&span, "%s%s", a->window ? "window=" : a->since_mark ? "since_mark=" : "", q ? q : "") < 0)
                return span = NULL, oom();
        if (asprintf(&path, "/v1/jobs/%s?q=" REPORT_QUANTILES "%s%s", id, *span ? "&" : "", span) < 0)
                return path = NULL, oom();
        if (asprintf(&gpath, "/v1/jobs/%s/goodput%s%s", id, *span ? "?" : "", span) < 0)
                return gpath = NULL, oom();
        if (api_call("GET", path, NULL, &doc, NULL) < 0)
                return EXIT_FAILED;
        json_object *gp = NULL;
        if (fetch_goodput(gpath, &gp) == 0 && gp)
                json_object_object_add(doc, "goodput", gp);
        if (arg_json) {
                if (print_json_pretty(doc) < 0)
                        return oom();
        } else
                print_job_report(stdout, doc);
        return finish_stdout(EXIT_OK);
}

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

/* What the verdicts say of run id in op: "STRAGGLER" (slower than the
 * others), "WAITED-FOR" (the others wait for it in a collective op), "". */
static const char *verdict_of(json_object *stragglers, int64_t run, const char *op) {
        for (size_t i = 0; stragglers && i < json_object_array_length(stragglers); i++) {
                json_object *s = json_object_array_get_idx(stragglers, i);
                int64_t id;
                const char *o = json_get_str(s, "op"), *kind = json_get_str(s, "kind");
                if (json_get_int(s, "run", &id) && id == run && o && streq(o, op))
                        return kind && streq(kind, "waited_for") ? "WAITED-FOR" : "STRAGGLER";
        }
        return "";
}

static bool is_collective(json_object *doc, const char *op) {
        json_object *c = json_get_array(doc, "collective_ops");
        for (size_t i = 0; c && i < json_object_array_length(c); i++) {
                const char *name = json_object_get_string(json_object_array_get_idx(c, i));
                if (name && streq(name, op))
                        return true;
        }
        return false;
}

/* A score, with a star when it is below the threshold (flagged). */
static void add_score(struct table *t, json_object *r, const char *key, double threshold, bool flagged) {
        double v;
        if (!json_get_number(r, key, &v)) {
                table_add(t, NULL);
                return;
        }
        table_addf(t, "%.3f%s", v, flagged && v < threshold ? "*" : "");
}

/* "Ranks, train_step:" and rank, run, count, p50, p99, p50 against the
 * other ranks' (what the verdict compares with), NVIDIA's two scores, and
 * the verdict. */
static void print_ranks(FILE *f, json_object *doc, const char *op, json_object *ranks) {
        static const char *const titles[] = { "Rank",          "Run",      "Count",      "p50", "p99",
                                              "p50 vs others", "relative", "individual", "" };
        static const bool right[] = { false, true, true, true, true, true, true, true, false };
        struct table t = { .ncols = ELEMENTSOF(titles), .titles = titles, .right = right };
        json_object *stragglers = json_get_array(doc, "stragglers");
        double thr = NAN;
        (void)json_get_number(doc, "score_threshold", &thr);
        for (size_t i = 0; i < json_object_array_length(ranks); i++) {
                json_object *r = json_object_array_get_idx(ranks, i);
                char b[FMT_MAX];
                double count = 0, p50 = NAN, p99 = NAN, vs = NAN;
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
                if (json_get_number(r, "vs_others_pct", &vs))
                        table_addf(&t, "%+.1f%%", vs + 0.0);
                else
                        table_add(&t, NULL);
                bool flagged = json_get_bool(r, "score_flagged") == 1;
                add_score(&t, r, "relative_score", thr, flagged);
                add_score(&t, r, "individual_score", thr, flagged);
                table_add(&t, rknown ? verdict_of(stragglers, run, op) : "");
        }
        _cleanup_free_ char *pop = text_printable(op);
        fprintf(f, "\nRanks, %s%s:\n", pop ? pop : "?",
                is_collective(doc, op) ? " (holds a collective: the others wait for the fastest)" : "");
        table_print(f, &t, "  ", 0, 0);
        table_done(&t);
}

/* The reasons of the entries of doc's array key, under a heading. */
static size_t print_reasons(FILE *f, json_object *doc, const char *key, const char *one, const char *many) {
        json_object *s = json_get_array(doc, key);
        size_t n = s ? json_object_array_length(s) : 0;
        if (n > 0)
                fprintf(f, "\n%zu %s:\n", n, n == 1 ? one : many);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *why = text_printable(json_get_str(json_object_array_get_idx(s, i), "reason"));
                fprintf(f, "  %s\n", why ? why : "?");
        }
        return n;
}

static void print_stragglers(FILE *f, json_object *doc) {
        double pct = NAN, thr = NAN;
        (void)json_get_number(doc, "straggler_pct", &pct);
        (void)json_get_number(doc, "score_threshold", &thr);
        size_t n = print_reasons(f, doc, "stragglers", "straggler", "stragglers");
        n += print_reasons(f, doc, "undecided", "difference nothing settles", "differences nothing settles");
        if (n == 0)
                fprintf(f,
                        "\nNo stragglers (a rank's median more than %g%% slower than the others', or the others "
                        "waiting for it in a collective, beyond noise).\n",
                        pct);
        if (isfinite(thr))
                fprintf(f,
                        "Scores: NVIDIA's, the fastest rank's median (relative) or the rank's best recent one "
                        "(individual) over its median; * below %g, in ops that hold no collective.\n",
                        thr);
}

/* "job J, attempt 1: 3 runs, 3 running; all 3 ranks on this host", the
 * attempts before it, and a stall. */
static void print_job_head(FILE *f, json_object *doc) {
        json_object *runs = json_get_array(doc, "runs"), *attempts = json_get_array(doc, "attempts");
        size_t nruns = runs ? json_object_array_length(runs) : 0, running = 0;
        int64_t attempt = 0;
        for (size_t i = 0; i < nruns; i++) {
                const char *st = json_get_str(json_object_array_get_idx(runs, i), "state");
                running += st && streq(st, "running");
        }
        _cleanup_free_ char *id = text_printable(json_get_str(doc, "job_id"));
        const char *v = json_get_str(doc, "view");
        _cleanup_free_ char *view = v ? text_printable(v) : NULL;
        fprintf(f, "job %s", id ? id : "?");
        if (json_get_int(doc, "attempt", &attempt) && (attempt > 0 || json_object_array_length(attempts) > 1))
                fprintf(f, ", attempt %" PRId64, attempt);
        fprintf(f, ": %zu run%s, %zu running%s%s\n", nruns, nruns == 1 ? "" : "s", running, view ? "; " : "",
                view ? view : "");
        if (json_get_bool(doc, "partial") == 1)
                fputs("  (the verdicts compare the ranks this host sees; Prometheus compares all of them)\n", f);
        for (size_t i = 0; attempts && i < json_object_array_length(attempts); i++) {
                json_object *a = json_object_array_get_idx(attempts, i);
                int64_t n = 0;
                const char *w = json_get_str(a, "end_reason");
                _cleanup_free_ char *why = w ? text_printable(w) : NULL;
                if (json_get_int(a, "attempt", &n) && n != attempt)
                        fprintf(f, "  attempt %" PRId64 ": %s%s%s\n", n, json_get_str(a, "state"), why ? ", " : "",
                                why ? why : "");
        }
}

/* "STALLED: no rank has completed a step since ...", and the ranks that
 * hold the job, each with its reason. */
static void print_stall(FILE *f, json_object *doc) {
        const char *state = json_get_str(doc, "state");
        int64_t since;
        char b[FMT_MAX];
        if (!state || !streq(state, "stalled") || !json_get_int(doc, "stalled_since", &since))
                return;
        fprintf(f, "\nSTALLED: no rank has completed a step since %s\n", fmt_ts_ms(b, sizeof b, true, since));
        json_object *s = json_get_array(doc, "stalled_ranks");
        for (size_t i = 0; s && i < json_object_array_length(s); i++) {
                _cleanup_free_ char *why = text_printable(json_get_str(json_object_array_get_idx(s, i), "reason"));
                fprintf(f, "  %s\n", why ? why : "?");
        }
}

static void print_job_report(FILE *f, json_object *doc) {
        json_object *ranks = json_get_object(doc, "ranks");
        char b[FMT_MAX], e[FMT_MAX], d[FMT_MAX];
        int64_t from = 0, until = 0;
        print_job_head(f, doc);
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
        const char *end = json_get_str(doc, "end_reason");
        _cleanup_free_ char *ended = end ? text_printable(end) : NULL;
        if (ended)
                print_field(f, "ended:", ended);
        print_stall(f, doc);

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
        unsigned attempt = 0;
        char at[32] = "";
        if (!*a->job)
                return usage_error("--job: empty job ID");
        if (a->attempt && safe_atou(a->attempt, &attempt) < 0)
                return usage_error("--attempt: '%s' is not an attempt number (0, 1, ...)", a->attempt);
        if (a->attempt)
                snprintf(at, sizeof at, "&attempt=%u", attempt);
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
        if (asprintf(&path, "/v1/jobs/%s?q=" REPORT_QUANTILES "%s%s%s", id, *span ? "&" : "", span, at) < 0)
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

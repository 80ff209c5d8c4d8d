/* SPDX-License-Identifier: MIT */
#include "report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "mlmonctl.h"
#include "output.h"
#include "util.h"

bool latency_span(json_object *latency, int64_t *ret_from, int64_t *ret_until) {
        int64_t from, until;
        double window_s;
        if (!json_get_int(latency, "until", &until))
                return false;
        /* "from" is where the first 1-second slice of data begins, which
         * may be before the span asked for: window_s is the span */
        if (json_get_number(latency, "window_s", &window_s) && window_s >= 0 && window_s < 1e12)
                from = until - llround(window_s * 1000);
        else if (!json_get_int(latency, "from", &from))
                return false;
        if (from > until)
                return false;
        *ret_from = from;
        *ret_until = until;
        return true;
}

/* ---- the ops of a latency answer ------------------------------------------ */

struct op {
        const char *name;
        const char *category; /* NULL: none */
        json_object *o;       /* the op's object in "ops" */
        bool total_known;
        double total_ms;
};

/* Categories by name, "no category" last; in a category, the op that took
 * the most time first (unknown totals last), then by name. */
static int op_cmp(const void *a, const void *b) {
        const struct op *x = a, *y = b;
        if (!x->category != !y->category)
                return x->category ? -1 : 1;
        if (x->category) {
                int c = strcmp(x->category, y->category);
                if (c != 0)
                        return c;
        }
        if (x->total_known != y->total_known)
                return x->total_known ? -1 : 1;
        if (x->total_known && x->total_ms != y->total_ms)
                return x->total_ms > y->total_ms ? -1 : 1;
        return strcmp(x->name, y->name);
}

/* The ops of latency["ops"], sorted for printing; NULL (and 0) if none. */
static struct op *collect_ops(json_object *latency, size_t *ret_n) {
        json_object *ops = json_get_object(latency, "ops");
        size_t n = 0, k = 0;
        *ret_n = 0;
        if (!ops)
                return NULL;
        n = (size_t)json_object_object_length(ops);
        if (n == 0)
                return NULL;
        struct op *v = calloc(n, sizeof *v);
        if (!v)
                oom_exit();
        json_object_object_foreach(ops, name, o) {
                if (!json_object_is_type(o, json_type_object))
                        continue;
                const char *cat = json_get_str(o, "category");
                v[k] = (struct op){
                        .name = name,
                        .category = cat && *cat ? cat : NULL,
                        .o = o,
                };
                v[k].total_known = json_get_number(o, "total_ms", &v[k].total_ms);
                k++;
        }
        sort_array(v, k, sizeof *v, op_cmp);
        *ret_n = k;
        return v;
}

static bool same_category(const struct op *a, const struct op *b) {
        return (!a->category && !b->category) || (a->category && b->category && streq(a->category, b->category));
}

static void add_ms(struct table *t, json_object *o, const char *key) {
        char b[FMT_MAX];
        double d;
        bool known = json_get_number(o, key, &d);
        table_add(t, fmt_ms(b, sizeof b, known, d));
}

/* "124.0", "0.52", "12345" */
static const char *fmt_per_s(char *buf, size_t size, double v) {
        if (v >= 1000)
                snprintf(buf, size, "%.0f", v);
        else if (v >= 1 || v == 0)
                snprintf(buf, size, "%.1f", v);
        else
                snprintf(buf, size, "%.2g", v);
        return buf;
}

/* "  ops/s: a 124.0, b 3.5" for the ops in v[0..n) that the window has a
 * rate for. */
static void print_ops_rates(FILE *f, const struct op *v, size_t n, json_object *window) {
        json_object *tops = json_get_object(window, "ops");
        bool any = false;
        for (size_t i = 0; i < n; i++) {
                char b[FMT_MAX];
                double per_s;
                if (!json_get_number(json_get_object(tops, v[i].name), "per_s", &per_s))
                        continue;
                _cleanup_free_ char *name = text_printable(v[i].name);
                fprintf(f, "%s%s %s", any ? ", " : "  ops/s: ", name ? name : "?", fmt_per_s(b, sizeof b, per_s));
                any = true;
        }
        if (any)
                fputc('\n', f);
}

void print_op_tables(FILE *f, json_object *latency, json_object *throughput) {
        static const char *const titles[] = { "Operation", "Count", "Total", "Avg", "Min",
                                              "Max",       "p50",   "p90",   "p99", "Share" };
        static const bool right[] = { false, true, true, true, true, true, true, true, true, true };
        size_t n;
        _cleanup_free_ struct op *v = collect_ops(latency, &n);
        double sum = 0;

        if (n == 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (v[i].total_known && v[i].total_ms > 0)
                        sum += v[i].total_ms;

        for (size_t start = 0, end; start < n; start = end) {
                for (end = start + 1; end < n && same_category(&v[start], &v[end]); end++)
                        ;
                _cleanup_free_ char *cat = text_printable(v[start].category ? v[start].category : "(none)");
                fprintf(f, "%scategory %s\n", start > 0 ? "\n" : "", cat ? cat : "?");

                struct table t = { .ncols = ELEMENTSOF(titles), .titles = titles, .right = right };
                for (size_t i = start; i < end; i++) {
                        json_object *o = v[i].o;
                        double d;
                        table_add(&t, v[i].name);
                        if (json_get_number(o, "count", &d))
                                table_addf(&t, "%.0f", d);
                        else
                                table_add(&t, NULL);
                        add_ms(&t, o, "total_ms");
                        add_ms(&t, o, "mean_ms");
                        add_ms(&t, o, "min_ms");
                        add_ms(&t, o, "max_ms");
                        add_ms(&t, o, "p50_ms");
                        add_ms(&t, o, "p90_ms");
                        add_ms(&t, o, "p99_ms");
                        if (v[i].total_known && sum > 0)
                                table_addf(&t, "%.1f%%", v[i].total_ms / sum * 100);
                        else
                                table_add(&t, NULL);
                }
                table_print(f, &t, "  ", 0, 0);
                table_done(&t);
                print_ops_rates(f, v + start, end - start, throughput);
        }
}

/* ---- throughput ------------------------------------------------------------ */

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

void print_throughput(FILE *f, json_object *window, json_object *latency) {
        char w[FMT_MAX], c[FMT_MAX], r[FMT_MAX], wr[FMT_MAX], rx[FMT_MAX], tx[FMT_MAX];
        double d;
        bool known;

        if (!window)
                return;
        known = json_get_number(window, "window_s", &d);
        fputs("Throughput", f);
        if (known)
                fprintf(f, " over %s", fmt_seconds(w, sizeof w, true, d));
        known = json_get_number(window, "cpu_pct", &d);
        fprintf(f, ": CPU %s", fmt_pct(c, sizeof c, known, d));
        known = json_get_number(window, "read_bytes_per_s", &d);
        fprintf(f, ", read %s", fmt_rate(r, sizeof r, known, d));
        known = json_get_number(window, "write_bytes_per_s", &d);
        fprintf(f, ", write %s", fmt_rate(wr, sizeof wr, known, d));
        known = json_get_number(window, "netns_rx_bytes_per_s", &d);
        fprintf(f, ", netns rx %s", fmt_rate(rx, sizeof rx, known, d));
        known = json_get_number(window, "netns_tx_bytes_per_s", &d);
        fprintf(f, ", tx %s\n", fmt_rate(tx, sizeof tx, known, d));

        /* ops without timings (counters), which no table showed */
        json_object *ops = json_get_object(window, "ops"), *timed = json_get_object(latency, "ops");
        size_t n = ops ? (size_t)json_object_object_length(ops) : 0, k = 0;
        if (n == 0)
                return;
        _cleanup_free_ const char **names = calloc(n, sizeof(char *));
        if (!names)
                return;
        json_object_object_foreach(ops, name, o) {
                if (json_get_object(timed, name) || !json_object_is_type(o, json_type_object))
                        continue;
                names[k++] = name;
        }
        sort_array(names, k, sizeof(char *), name_cmp);
        for (size_t i = 0; i < k; i++) {
                char b[FMT_MAX];
                double per_s, count;
                json_object *op = json_get_object(ops, names[i]);
                _cleanup_free_ char *p = text_printable(names[i]);
                fprintf(f, "%s%s ", i == 0 ? "  ops/s: " : ", ", p ? p : "?");
                if (json_get_number(op, "per_s", &per_s))
                        fputs(fmt_per_s(b, sizeof b, per_s), f);
                else
                        fputc('-', f);
                if (json_get_number(op, "count", &count))
                        fprintf(f, " (%.0f)", count);
        }
        if (k > 0)
                fputc('\n', f);
}

/* ---- gauges ---------------------------------------------------------------- */

/* The gauges of the throughput window: last value, min and max over the span. */
static void print_report_gauges(FILE *f, json_object *window) {
        json_object *gauges = json_get_object(window, "gauges");
        if (!gauges || json_object_object_length(gauges) == 0)
                return;
        fputc('\n', f);
        print_gauges(f, "Gauges over the span", gauges, true);
}

/* ---- service-level objectives -------------------------------------------- */

static bool slo_met(json_object *o) {
        return json_get_bool(o, "met") == 1;
}

void print_slos(FILE *f, json_object *slo) {
        static const char *const titles[] = { "Objective", "Count", "Measured", "Over target", "Result" };
        static const bool right[] = { false, true, true, true, false };
        struct table t = { .ncols = ELEMENTSOF(titles), .titles = titles, .right = right };
        size_t missed = 0, n = json_object_array_length(slo);
        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_array_get_idx(slo, i);
                char tb[FMT_MAX], mb[FMT_MAX];
                double target = NAN, pct = NAN, p = NAN, share = NAN, count = 0, over = 0;
                (void)json_get_number(o, "target_ms", &target);
                (void)json_get_number(o, "percentile", &pct);
                (void)json_get_number(o, "count", &count);
                bool known = json_get_number(o, "percentile_ms", &p);
                bool sknown = json_get_number(o, "over_share", &share) && json_get_number(o, "over", &over);
                _cleanup_free_ char *op = text_printable(json_get_str(o, "op"));
                table_addf(&t, "%s p%g <= %s", op ? op : "?", pct, fmt_ms(tb, sizeof tb, isfinite(target), target));
                table_addf(&t, "%.0f", count);
                table_addf(&t, "p%g %s", pct, fmt_ms(mb, sizeof mb, known, p));
                if (sknown)
                        table_addf(&t, "%.1f%% (%.0f)", share * 100, over);
                else
                        table_add(&t, NULL);
                bool met = slo_met(o);
                table_add(&t, met ? "MET" : known ? "MISSED" : "no timings");
                missed += !met;
        }
        fputs("Objectives over the span:\n", f);
        table_print(f, &t, "  ", 0, 0);
        table_done(&t);
        if (missed > 0)
                fprintf(f, "%zu of %zu objective%s missed or without timings.\n", missed, n, n == 1 ? "" : "s");
        else
                fprintf(f, "All %zu objective%s met.\n", n, n == 1 ? "" : "s");
}

bool slos_met(json_object *latency) {
        json_object *slo = json_get_array(latency, "slo");
        for (size_t i = 0; slo && i < json_object_array_length(slo); i++)
                if (!slo_met(json_object_array_get_idx(slo, i)))
                        return false;
        return true;
}

/* ---- the whole report -------------------------------------------------------- */

void print_report(FILE *f, json_object *doc) {
        json_object *run = json_get_object(doc, "run"), *latency = json_get_object(doc, "latency"),
                    *window = json_get_object(doc, "throughput");
        char b[FMT_MAX], e[FMT_MAX], d[FMT_MAX], line[4 * FMT_MAX + 128];
        int64_t id = 0, from, until;

        bool known = json_get_int(run, "id", &id);
        const char *name = json_get_str(run, "name"), *cmd = json_get_str(run, "cmdline");
        if (!cmd || !*cmd)
                cmd = json_get_str(run, "comm");
        _cleanup_free_ char *pname = name ? text_printable(name) : NULL;
        _cleanup_free_ char *pcmd = text_printable(cmd);
        fprintf(f, "run %s%s%s%s: %s\n", known ? (snprintf(b, sizeof b, "%" PRId64, id), b) : "-", pname ? " (" : "",
                pname ? pname : "", pname ? ")" : "", pcmd ? pcmd : "-");
        print_field(f, "pid:", json_get_int(run, "pid", &id) ? (snprintf(b, sizeof b, "%" PRId64, id), b) : "-");
        _cleanup_free_ char *state = text_printable(json_get_str(run, "state"));
        print_field(f, "state:", state ? state : "-");

        /* the span the op figures cover: the latency answer's, else the run's */
        bool fknown, uknown;
        int64_t reg;
        if (latency_span(latency, &from, &until)) {
                fknown = uknown = true;
                /* a window longer than the run: the span is the run's */
                if (json_get_int(run, "registered_ts", &reg) && from < reg && until > reg)
                        from = reg;
        } else {
                fknown = json_get_int(run, "registered_ts", &from);
                uknown = json_get_int(run, "ended_ts", &until);
        }
        fmt_ts_ms(b, sizeof b, fknown, from);
        if (uknown)
                fmt_ts_ms(e, sizeof e, true, until);
        else
                strcpy(e, "now");
        int l = snprintf(line, sizeof line, "%s .. %s", b, e);
        if (fknown && uknown && until >= from && l > 0 && (size_t)l < sizeof line)
                l += snprintf(line + l, sizeof line - (size_t)l, " (%s)",
                              fmt_seconds(d, sizeof d, true, (double)(until - from) / 1000));
        json_object *mark = json_get_object(latency, "since_mark");
        if (mark && l > 0 && (size_t)l < sizeof line) {
                _cleanup_free_ char *label = text_printable(json_get_str(mark, "label"));
                snprintf(line + l, sizeof line - (size_t)l, ", since mark %s", label ? label : "?");
        }
        print_field(f, "span:", line);

        /* a span's own summary when the report has one, else the run's */
        json_object *summary = json_get_object(doc, "summary");
        print_field(f, "summary of:", summary ? "the span" : "the whole run");
        if (!summary)
                summary = json_get_object(run, "summary");
        if (summary)
                print_summary(f, summary);

        fputc('\n', f);
        size_t n;
        _cleanup_free_ struct op *v = collect_ops(latency, &n);
        if (!latency)
                fputs("No latency figures.\n", f);
        else if (n == 0)
                fputs("No timed operations in this span.\n", f);
        else {
                fputs("Operations over the span:\n", f);
                print_op_tables(f, latency, window);
        }
        if (window) {
                fputc('\n', f);
                print_throughput(f, window, latency);
        }
        print_report_gauges(f, window);
        json_object *slo = json_get_array(latency, "slo");
        if (slo) {
                fputc('\n', f);
                print_slos(f, slo);
        }
        json_object *gp = json_get_object(doc, "goodput");
        if (gp) {
                fputc('\n', f);
                print_goodput(f, gp, " over the span");
                print_verdicts(f, run);
        }
}

/* ---- the verb ------------------------------------------------------------ */

/* "slo=" and the objectives as the API writes them, escaped; "" if none. */
static char *slo_query(const struct args *a) {
        _cleanup_free_ char *joined = NULL, *esc = NULL;
        size_t len = 0;
        char *out;
        for (size_t i = 0; i < a->n_slo; i++) {
                struct slo o;
                char err[128], one[SLO_OP_MAX + 80];
                if (slo_parse(a->slo[i], '=', &o, err, sizeof err) < 0)
                        continue; /* checked by the option parser */
                /* the API's separator is ':' (the op ends at the last '=' before
                 * the '@'); it takes the 'p' too */
                snprintf(one, sizeof one, "%s%s:%s", i > 0 ? "," : "", o.op, a->slo[i] + strlen(o.op) + 1);
                char *j = realloc(joined, len + strlen(one) + 1);
                if (!j)
                        return NULL;
                joined = j;
                strcpy(joined + len, one);
                len += strlen(one);
        }
        if (!joined)
                return strdup("");
        if (!(esc = url_escape(joined)) || asprintf(&out, "&slo=%s", esc) < 0)
                return NULL;
        return out;
}

/* The span's own summary (GET .../summary) for a report over part of a run. */
static int fetch_span_summary(uint64_t id, const char *span_query, json_object **ret) {
        _cleanup_free_ char *path = NULL;
        if (asprintf(&path, "/v1/runs/%" PRIu64 "/summary?%s", id, span_query) < 0)
                return oom();
        return api_call("GET", path, NULL, ret, NULL) < 0 ? EXIT_FAILED : EXIT_OK;
}

int verb_report(struct args *a) {
        _cleanup_json_ json_object *run = NULL, *latency = NULL, *window = NULL, *doc = NULL, *summary = NULL;
        _cleanup_free_ char *sq = NULL, *lq = NULL, *tq = NULL, *w = NULL, *mark = NULL, *slo = NULL;
        char path[64];
        uint64_t id = 0;
        int64_t from, until;
        int r;

        if (a->job)
                return verb_report_job(a);
        if (a->attempt)
                return usage_error("report: --attempt is of a job (--job JOB_ID)");
        if (a->n_operands == 0)
                return usage_error("report: missing run ID (or --job JOB_ID)");
        if ((r = parse_id(a->operands[0], "run ID", INT64_MAX, &id)) != CONTINUE)
                return r;
        /* both would set where the span starts */
        if (a->window && a->since_mark)
                return usage_error("--window and --since-mark cannot both be given: the span starts at the mark and "
                                   "ends with the run (or now)");

        snprintf(path, sizeof path, "/v1/runs/%" PRIu64, id);
        if (api_call("GET", path, NULL, &run, NULL) < 0)
                return EXIT_FAILED;
        if (a->since_mark && !(mark = url_escape(a->since_mark)))
                return oom();
        if (a->window && !(w = url_escape(a->window)))
                return oom();
        if (!(slo = slo_query(a)))
                return oom();
        if (!a->window && !run_span(run, &from, &until)) {
                error_line("%s: mlmond's run %" PRIu64 " has no registration time", daemon_address(), id);
                return EXIT_FAILED;
        }
        if (a->window)
                r = asprintf(&sq, "window=%s", w);
        else if (mark)
                r = asprintf(&sq, "since_mark=%s&until=%" PRId64, mark, until);
        else
                r = asprintf(&sq, "from=%" PRId64 "&until=%" PRId64, from, until);
        if (r >= 0)
                r = asprintf(&lq, "%s%s", sq, slo);
        if (r >= 0)
                r = a->window ? asprintf(&tq, "window=%s", w)
                              : asprintf(&tq, "window=%" PRId64 "ms&until=%" PRId64,
                                         until - from > 0 ? until - from : 1, until);
        if (r < 0) {
                sq = lq = tq = NULL;
                return oom();
        }
        if (fetch_op_figures((int64_t)id, lq, tq, false, &latency, &window) < 0)
                return EXIT_FAILED;
        if ((a->window || mark) && fetch_span_summary(id, sq, &summary) != EXIT_OK)
                return EXIT_FAILED;
        _cleanup_free_ char *gpath = NULL;
        _cleanup_json_ json_object *gp = NULL;
        if (asprintf(&gpath, "/v1/runs/%" PRIu64 "/goodput?%s", id, sq) < 0)
                return gpath = NULL, oom();
        (void)fetch_goodput(gpath, &gp);

        doc = report_document(run, latency, window);
        if (!doc)
                return oom();
        if (summary)
                json_object_object_add(doc, "summary", json_object_get(summary));
        if (gp)
                json_object_object_add(doc, "goodput", json_object_get(gp));
        if (arg_json) {
                if (print_json_pretty(doc) < 0)
                        return oom();
        } else
                print_report(stdout, doc);
        /* a missed objective fails the command, as a regression fails compare */
        return finish_stdout(slos_met(latency) ? EXIT_OK : EXIT_FAILED);
}

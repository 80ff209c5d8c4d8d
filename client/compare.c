/* SPDX-License-Identifier: MIT */
#include "compare.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "mlmonctl.h"
#include "output.h"
#include "util.h"

/* A report is a few KiB per op; this only stops a wrong file (a dataset, a
 * core dump) from being read whole. */
#define REPORT_MAX ((size_t)64 << 20)

/* A verdict beyond the threshold must be beyond it by more than rounding:
 * 100 -> 110 is +10.000000000000009 %. */
#define CHANGE_EPSILON 1e-9

static int fail(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return -1;
}

/* json-c takes NaN and Infinity even in strict mode; JSON has neither. */
static bool has_nonstandard_number(json_object *o) {
        switch (json_object_get_type(o)) {
        case json_type_double: {
                const char *text = json_object_to_json_string(o); /* as written */
                return text && strpbrk(text, "nNiI");
        }
        case json_type_object: {
                json_object_object_foreach(o, k, v) {
                        (void)k;
                        if (has_nonstandard_number(v))
                                return true;
                }
                return false;
        }
        case json_type_array:
                for (size_t i = 0; i < json_object_array_length(o); i++)
                        if (has_nonstandard_number(json_object_array_get_idx(o, i)))
                                return true;
                return false;
        default:
                return false;
        }
}

/* A job document (report --job --json, GET /v1/jobs/ID): its merged ops
 * are its "ops". */
static bool is_job(json_object *doc) {
        return json_get_str(doc, "job_id") != NULL;
}

/* "run", "latency", "throughput": each an object, null or absent, and at
 * least one of them an object; or a job document with an "ops" object. */
static const char *check_document(json_object *doc) {
        static const char *const keys[] = { "run", "latency", "throughput" };
        bool any = false;
        if (!json_object_is_type(doc, json_type_object))
                return "not a report document (expected a JSON object)";
        if (is_job(doc))
                return json_get_object(doc, "ops") ? NULL : "not a job report document (\"ops\" must be an object)";
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                json_object *v;
                if (!json_object_object_get_ex(doc, keys[i], &v) || !v)
                        continue;
                if (!json_object_is_type(v, json_type_object))
                        return "not a report document (\"run\", \"latency\" and \"throughput\" must be objects)";
                any = true;
        }
        if (!any)
                return "not a report document (no \"run\", \"latency\" or \"throughput\")";
        json_object *latency = json_get_object(doc, "latency"), *v;
        if (latency && json_object_object_get_ex(latency, "ops", &v) && v && !json_object_is_type(v, json_type_object))
                return "not a report document (\"latency\".\"ops\" must be an object)";
        json_object *throughput = json_get_object(doc, "throughput");
        if (throughput && json_object_object_get_ex(throughput, "ops", &v) && v &&
            !json_object_is_type(v, json_type_object))
                return "not a report document (\"throughput\".\"ops\" must be an object)";
        return NULL;
}

int report_load(const char *path, json_object **ret, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r;

        *ret_error = NULL;
        r = read_file_at(AT_FDCWD, path, REPORT_MAX, &text, &len);
        if (r < 0) {
                errno = -r; /* what %m prints */
                return fail(ret_error, "cannot read %s: %m", path);
        }
        if (len >= REPORT_MAX)
                return fail(ret_error, "%s: larger than %zu MiB, not a report", path, REPORT_MAX >> 20);
        if (strlen(text) != len)
                return fail(ret_error, "%s: not a report document (contains NUL bytes)", path);
        if (!utf8_is_valid(text, len))
                return fail(ret_error, "%s: not valid JSON (invalid UTF-8)", path);

        json_tokener *tok = json_tokener_new();
        if (!tok)
                return fail(ret_error, "out of memory");
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        json_object *doc = json_tokener_parse_ex(tok, text, (int)len);
        enum json_tokener_error jerr = json_tokener_get_error(tok);
        size_t end = tok->char_offset;
        json_tokener_free(tok);
        if (!doc || jerr != json_tokener_success) {
                json_object_put(doc);
                if (jerr == json_tokener_continue || jerr == json_tokener_success)
                        return fail(ret_error, "%s: not valid JSON (it ends too early)", path);
                return fail(ret_error, "%s: not valid JSON at offset %zu: %s", path, end,
                            json_tokener_error_desc(jerr));
        }
        for (size_t i = end; i < len; i++)
                if (!strchr(" \t\r\n", text[i])) {
                        json_object_put(doc);
                        return fail(ret_error, "%s: not valid JSON (trailing data at offset %zu)", path, i);
                }
        if (has_nonstandard_number(doc)) {
                json_object_put(doc);
                return fail(ret_error, "%s: not valid JSON (NaN or Infinity)", path);
        }
        const char *why = check_document(doc);
        if (why) {
                json_object_put(doc);
                return fail(ret_error, "%s: %s", path, why);
        }
        *ret = doc;
        return 0;
}

/* ---- comparing -------------------------------------------------------------- */

static int str_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static json_object *ops_of(json_object *doc, const char *part) {
        if (is_job(doc)) /* a job document has no throughput window */
                return streq(part, "latency") ? json_get_object(doc, "ops") : NULL;
        return json_get_object(json_get_object(doc, part), "ops");
}

static bool has_op(json_object *doc, const char *name) {
        return json_get_object(ops_of(doc, "latency"), name) || json_get_object(ops_of(doc, "throughput"), name);
}

/* The names of the ops of both documents, sorted, without repeats. */
static char **op_names(json_object *base, json_object *current, size_t *ret_n) {
        json_object *sets[4] = {
                ops_of(base, "latency"),
                ops_of(base, "throughput"),
                ops_of(current, "latency"),
                ops_of(current, "throughput"),
        };
        size_t cap = 0, n = 0;
        for (size_t i = 0; i < ELEMENTSOF(sets); i++)
                if (sets[i])
                        cap += (size_t)json_object_object_length(sets[i]);
        char **names = calloc(cap + 1, sizeof(char *));
        if (!names)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(sets); i++) {
                if (!sets[i])
                        continue;
                json_object_object_foreach(sets[i], k, v) {
                        (void)v;
                        names[n++] = k;
                }
        }
        sort_array(names, n, sizeof(char *), str_cmp);
        size_t u = 0;
        for (size_t i = 0; i < n; i++)
                if (u == 0 || !streq(names[u - 1], names[i]))
                        names[u++] = names[i];
        *ret_n = u;
        return names;
}

/* The value as the document wrote it (json-c keeps a parsed number's text),
 * or null. */
static json_object *number_or_null(bool known, json_object *o, const char *field) {
        json_object *v;
        if (!known || !json_object_object_get_ex(o, field, &v))
                return NULL;
        return json_object_get(v);
}

/* Adds one row; returns 1 if it is a regression. */
static int add_metric(json_object *rows, const char *op, const char *field, bool higher_worse, json_object *bo,
                      json_object *co, const char *only, double threshold) {
        double b = 0, c = 0, change = 0;
        bool bknown = json_get_number(bo, field, &b), cknown = json_get_number(co, field, &c);
        bool change_known = false;
        const char *verdict;
        int regressed = 0;

        if (only)
                verdict = only;
        else if (!bknown || !cknown)
                verdict = "skipped";
        else {
                double worse;
                if (b != 0) {
                        change = (c - b) / fabs(b) * 100;
                        change_known = true;
                        worse = higher_worse ? change : -change;
                } else if (c == 0) {
                        change_known = true; /* 0 -> 0: no change */
                        worse = 0;
                } else /* from nothing to something: past any threshold */
                        worse = (higher_worse ? c > 0 : c < 0) ? INFINITY : -INFINITY;
                if (worse > threshold + CHANGE_EPSILON) {
                        verdict = "REGRESSED";
                        regressed = 1;
                } else if (worse < -threshold - CHANGE_EPSILON)
                        verdict = "improved";
                else
                        verdict = "ok";
        }

        json_object *row = json_object_new_object();
        if (!row)
                return -1;
        char *metric = NULL;
        if (op ? asprintf(&metric, "%s %s", op, field) < 0 : !(metric = strdup(field))) {
                json_object_put(row);
                return -1;
        }
        json_object_object_add(row, "metric", json_string_sanitized(metric, strlen(metric)));
        free(metric);
        json_object_object_add(row, "op", op ? json_string_sanitized(op, strlen(op)) : NULL);
        json_object_object_add(row, "field", json_object_new_string(field));
        json_object_object_add(row, "base", number_or_null(bknown, bo, field));
        json_object_object_add(row, "current", number_or_null(cknown, co, field));
        /* 3 decimals; "+ 0.0" turns a rounded -0.0 into 0 */
        json_object_object_add(row, "change_pct",
                               change_known ? json_number_short(round(change * 1000) / 1000 + 0.0) : NULL);
        json_object_object_add(row, "verdict", json_object_new_string(verdict));
        json_object_array_add(rows, row);
        return regressed;
}

json_object *compare_reports(json_object *base, json_object *current, double threshold) {
        static const char *const latency_fields[] = { "p50_ms", "p90_ms", "p99_ms" };
        static const char *const summary_fields[] = { "peak_rss_bytes", "cpu_time_s", "wall_time_s" };
        _cleanup_json_ json_object *result = json_object_new_object();
        json_object *rows = json_object_new_array();
        size_t n = 0;
        _cleanup_free_ char **names = op_names(base, current, &n);
        int regressions = 0, r;
        bool job = is_job(base);

        if (!result || !rows || !names) {
                json_object_put(rows);
                return NULL;
        }
        json_object_object_add(result, "regressions", json_object_new_int(0)); /* first: set at the end */
        json_object_object_add(result, "metrics", rows);
        for (size_t i = 0; i < n; i++) {
                const char *op = names[i];
                bool in_base = has_op(base, op), in_current = has_op(current, op);
                const char *only = !in_current ? "only in base" : !in_base ? "only in current" : NULL;
                json_object *bl = json_get_object(ops_of(base, "latency"), op),
                            *cl = json_get_object(ops_of(current, "latency"), op);
                for (size_t k = 0; k < ELEMENTSOF(latency_fields); k++) {
                        if ((r = add_metric(rows, op, latency_fields[k], true, bl, cl, only, threshold)) < 0)
                                return NULL;
                        regressions += r;
                }
                if (job)
                        continue;
                json_object *bt = json_get_object(ops_of(base, "throughput"), op),
                            *ct = json_get_object(ops_of(current, "throughput"), op);
                if ((r = add_metric(rows, op, "per_s", false, bt, ct, only, threshold)) < 0)
                        return NULL;
                regressions += r;
        }
        /* a job has no run summary */
        for (size_t k = 0; !job && k < ELEMENTSOF(summary_fields); k++) {
                json_object *bs = json_get_object(json_get_object(base, "run"), "summary"),
                            *cs = json_get_object(json_get_object(current, "run"), "summary");
                if ((r = add_metric(rows, NULL, summary_fields[k], true, bs, cs, NULL, threshold)) < 0)
                        return NULL;
                regressions += r;
        }
        json_object_object_add(result, "regressions", json_object_new_int(regressions));
        return TAKE_PTR(result);
}

/* ---- printing ---------------------------------------------------------------- */

static bool has_suffix(const char *s, const char *suffix) {
        size_t l = strlen(s), k = strlen(suffix);
        return l >= k && streq(s + l - k, suffix);
}

/* A value in its field's unit: "12.70ms", "1.5 GiB", "2.35 s", "124.00/s". */
static const char *fmt_value(char *buf, size_t size, const char *field, json_object *row, const char *key) {
        double v;
        if (!json_get_number(row, key, &v) || !field)
                return "-";
        if (has_suffix(field, "_ms"))
                return fmt_ms(buf, size, true, v);
        if (has_suffix(field, "_bytes"))
                return fmt_bytes(buf, size, true, v);
        if (streq(field, "per_s")) {
                snprintf(buf, size, "%.2f/s", v);
                return buf;
        }
        if (has_suffix(field, "_s"))
                return fmt_seconds(buf, size, true, v);
        snprintf(buf, size, "%g", v);
        return buf;
}

void print_comparison(FILE *f, json_object *result, double threshold) {
        static const char *const titles[] = { "Metric", "Base", "Current", "Change %", "Verdict" };
        static const bool right[] = { false, true, true, true, false };
        struct table t = { .ncols = ELEMENTSOF(titles), .titles = titles, .right = right };
        json_object *rows = json_get_array(result, "metrics");
        size_t n = rows ? json_object_array_length(rows) : 0;
        int64_t regressions = 0;

        for (size_t i = 0; i < n; i++) {
                json_object *row = json_object_array_get_idx(rows, i);
                const char *field = json_get_str(row, "field");
                char b[FMT_MAX];
                double change, bv, cv;
                table_add(&t, json_get_str(row, "metric"));
                table_add(&t, fmt_value(b, sizeof b, field, row, "base"));
                table_add(&t, fmt_value(b, sizeof b, field, row, "current"));
                if (json_get_number(row, "change_pct", &change))
                        table_addf(&t, "%+.1f%%", change == 0 ? 0.0 : change);
                else if (json_get_number(row, "base", &bv) && json_get_number(row, "current", &cv) && bv == 0)
                        table_add(&t, cv > 0 ? "+inf" : "-inf");
                else
                        table_add(&t, NULL);
                table_add(&t, json_get_str(row, "verdict"));
        }
        table_print(f, &t, NULL, 0, 0);
        table_done(&t);
        (void)json_get_int(result, "regressions", &regressions);
        if (regressions > 0)
                fprintf(f, "\n%" PRId64 " regression%s past the %g%% threshold.\n", regressions,
                        regressions == 1 ? "" : "s", threshold);
        else
                fprintf(f, "\nNo regressions past the %g%% threshold.\n", threshold);
}

/* ---- the verb ------------------------------------------------------------ */

/* worse by more than this many percent is a regression */
#define DEFAULT_THRESHOLD_PCT 10.0

int verb_compare(struct args *a) {
        _cleanup_json_ json_object *base = NULL, *current = NULL, *result = NULL;
        int64_t regressions = 0;

        double threshold = isnan(a->threshold) ? DEFAULT_THRESHOLD_PCT : a->threshold;

        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *err = NULL;
                if (report_load(a->operands[i], i == 0 ? &base : &current, &err) < 0) {
                        if (!err)
                                return oom(), EXIT_USAGE;
                        error_line("%s", err);
                        return EXIT_USAGE;
                }
        }
        if (is_job(base) != is_job(current)) {
                error_line("%s is a job report and %s a run report: compare two of a kind",
                           is_job(base) ? a->operands[0] : a->operands[1],
                           is_job(base) ? a->operands[1] : a->operands[0]);
                return EXIT_USAGE;
        }
        result = compare_reports(base, current, threshold);
        if (!result)
                return oom();
        (void)json_get_int(result, "regressions", &regressions);
        if (arg_json) {
                if (print_json_pretty(result) < 0)
                        return oom();
        } else
                print_comparison(stdout, result, threshold);
        return finish_stdout(regressions > 0 ? EXIT_FAILED : EXIT_OK);
}

/* SPDX-License-Identifier: MIT */
#include "output.h"

#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "report.h"
#include "util.h"

/* ---- typed lookups -------------------------------------------------------- */

static json_object *get_typed(json_object *o, const char *key, json_type type) {
        json_object *v;
        if (!o || !json_object_is_type(o, json_type_object))
                return NULL;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
                return NULL;
        return v;
}

json_object *json_get_object(json_object *o, const char *key) {
        return get_typed(o, key, json_type_object);
}

json_object *json_get_array(json_object *o, const char *key) {
        return get_typed(o, key, json_type_array);
}

const char *json_get_str(json_object *o, const char *key) {
        json_object *v = get_typed(o, key, json_type_string);
        return v ? json_object_get_string(v) : NULL;
}

bool json_get_number(json_object *o, const char *key, double *ret) {
        json_object *v = get_typed(o, key, json_type_double);
        if (!v)
                v = get_typed(o, key, json_type_int);
        if (!v)
                return false;
        double d = json_object_get_double(v);
        if (!isfinite(d))
                return false;
        *ret = d;
        return true;
}

bool json_get_int(json_object *o, const char *key, int64_t *ret) {
        json_object *v = get_typed(o, key, json_type_int);
        if (!v)
                return false;
        *ret = json_object_get_int64(v);
        return true;
}

int json_get_bool(json_object *o, const char *key) {
        json_object *v = get_typed(o, key, json_type_boolean);
        return v ? json_object_get_boolean(v) : -1;
}

/* v in the fewest significant digits that read back as v. */
static const char *fmt_shortest(char *buf, size_t size, double v) {
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(buf, size, "%.*g", prec, v);
                if (strtod(buf, NULL) == v)
                        break;
        }
        return buf;
}

json_object *json_number_short(double v) {
        char buf[32];
        return json_object_new_double_s(v, fmt_shortest(buf, sizeof buf, v));
}

/* ---- text ----------------------------------------------------------------- */

char *text_printable(const char *s) {
        if (!s)
                return strdup("-");
        char *c = strdup(s);
        if (!c)
                return NULL;
        /* C0 controls and DEL; UTF-8 bytes >= 0x80 stay (the daemon sends
         * valid UTF-8). C1 controls (U+0080..U+009F, "\xc2\x80".."\xc2\x9f")
         * can also start escape sequences on some terminals. */
        for (unsigned char *p = (unsigned char *)c; *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        *p = ' ';
                else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        p[0] = '?';
                        memmove(p + 1, p + 2, strlen((char *)p + 2) + 1);
                }
        }
        return c;
}

const char *fmt_bytes(char *buf, size_t size, bool known, double bytes) {
        if (!known)
                return "-";
        return format_bytes(buf, size, bytes, "", 0);
}

const char *fmt_rate(char *buf, size_t size, bool known, double bytes_per_s) {
        if (!known)
                return "-";
        return format_bytes(buf, size, bytes_per_s, "/s", 0);
}

const char *fmt_seconds(char *buf, size_t size, bool known, double s) {
        if (!known)
                return "-";
        if (s < 60) {
                snprintf(buf, size, "%.2f s", s);
                return buf;
        }
        uint64_t t = (uint64_t)llround(s);
        uint64_t d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;
        if (d > 0)
                snprintf(buf, size, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", d, h, m);
        else if (h > 0)
                snprintf(buf, size, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", h, m, sec);
        else
                snprintf(buf, size, "%" PRIu64 "m %02" PRIu64 "s", m, sec);
        return buf;
}

const char *fmt_pct(char *buf, size_t size, bool known, double pct) {
        if (!known)
                return "-";
        snprintf(buf, size, "%.1f %%", pct);
        return buf;
}

const char *fmt_ts_ms(char *buf, size_t size, bool known, int64_t ts_ms) {
        if (!known)
                return "-";
        time_t t = (time_t)(ts_ms / 1000);
        struct tm tm;
        char zone[8];
        if (!localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm) == 0 ||
            strftime(zone, sizeof zone, "%z", &tm) != 5) {
                snprintf(buf, size, "@%" PRId64 "ms", ts_ms);
                return buf;
        }
        /* "+0100" -> "+01:00" (ISO 8601 extended format) */
        size_t l = strlen(buf);
        snprintf(buf + l, size - l, "%.3s:%.2s", zone, zone + 3);
        return buf;
}

const char *fmt_ms(char *buf, size_t size, bool known, double ms) {
        if (!known)
                return "-";
        /* each bound is where the finer unit would round up to 1000 */
        double a = fabs(ms);
        if (a < 0.99995)
                snprintf(buf, size, "%.1fus", ms * 1000);
        else if (a < 999.995)
                snprintf(buf, size, "%.2fms", ms);
        else if (a < 59999.5)
                snprintf(buf, size, "%.3fs", ms / 1000);
        else
                return fmt_seconds(buf, size, true, (double)llround(ms / 1000));
        return buf;
}

/* ---- table ---------------------------------------------------------------- */

/* Display width: code points, since the daemon sends valid UTF-8 (wide CJK
 * characters are rare enough in process names to not matter here). */
static size_t text_width(const char *s) {
        size_t w = 0;
        for (; *s; s++)
                if (((unsigned char)*s & 0xC0) != 0x80)
                        w++;
        return w;
}

/* Cuts s to at most width display columns, ending in "..." when cut. */
static void text_truncate(char *s, size_t width) {
        if (text_width(s) <= width)
                return;
        size_t keep = width > 3 ? width - 3 : 0, w = 0;
        char *p = s;
        for (; *p; p++) {
                if (((unsigned char)*p & 0xC0) != 0x80) {
                        if (w == keep)
                                break;
                        w++;
                }
        }
        strcpy(p, width >= 3 ? "..." : "");
}

static const char *fmt_int(char *buf, size_t size, bool known, int64_t v) {
        if (!known)
                return "-";
        snprintf(buf, size, "%" PRId64, v);
        return buf;
}

_Noreturn void oom_exit(void) {
        fputs("mlmonctl: out of memory\n", stderr);
        exit(EXIT_FAILURE);
}

char *text_vprintf(const char *fmt, va_list ap) {
        char *s;
        return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

/* The process's state while it runs ("stopped"), how it ended once it has
 * ("killed by SIGKILL", "exited with status 1"; brief: "SIGKILL", "exit
 * 1"), NULL when unknown. */
static const char *process_text(json_object *run, bool brief, char *buf, size_t size) {
        int64_t v;
        const char *st = json_get_str(run, "proc_state");
        if (st)
                return st;
        if (json_get_int(run, "exit_signal", &v)) {
                const char *name = v > 0 && v < 65 ? sigabbrev_np((int)v) : NULL;
                if (name)
                        snprintf(buf, size, "%sSIG%s", brief ? "" : "killed by ", name);
                else
                        snprintf(buf, size, "%s %" PRId64, brief ? "signal" : "killed by signal", v);
                return buf;
        }
        if (json_get_int(run, "exit_code", &v)) {
                snprintf(buf, size, "%s %" PRId64, brief ? "exit" : "exited with status", v);
                return buf;
        }
        return NULL;
}

static void run_row(struct table *t, json_object *run) {
        char b[FMT_MAX];
        int64_t i = 0;
        double d = 0;
        json_object *latest = json_get_object(run, "latest");

        bool known = json_get_int(run, "id", &i);
        table_add(t, fmt_int(b, sizeof b, known, i));
        known = json_get_int(run, "pid", &i);
        table_add(t, fmt_int(b, sizeof b, known, i));
        table_add(t, json_get_str(run, "name"));
        table_add(t, json_get_str(run, "state"));
        const char *process = process_text(run, true, b, sizeof b);
        table_add(t, process ? process : "-");
        known = json_get_number(latest, "cpu_pct", &d);
        if (known)
                snprintf(b, sizeof b, "%.1f", d);
        table_add(t, known ? b : "-");
        known = json_get_number(latest, "rss_bytes", &d);
        table_add(t, fmt_bytes(b, sizeof b, known, d));
        if (json_get_int(run, "interval_ms", &i) && i >= 0)
                format_duration((usec_t)i * USEC_PER_MSEC, b, sizeof b);
        else
                strcpy(b, "-");
        table_add(t, b);
        const char *cmd = json_get_str(run, "cmdline");
        if (!cmd || !*cmd)
                cmd = json_get_str(run, "comm"); /* kernel threads, zombies */
        table_add(t, cmd);
}

static void print_cell(FILE *f, const char *s, size_t width, bool right, bool last) {
        size_t pad = width - text_width(s);
        if (right)
                fprintf(f, "%*s%s", (int)pad, "", s);
        else if (last)
                fputs(s, f);
        else
                fprintf(f, "%s%*s", s, (int)pad, "");
        fputs(last ? "\n" : "  ", f);
}

void print_run_table(FILE *f, json_object *runs, int max_width) {
        static const char *const titles[] = { "ID",   "PID", "NAME",     "STATE",  "PROCESS",
                                              "CPU%", "RSS", "INTERVAL", "COMMAND" };
        static const bool right[] = { true, true, false, false, false, true, true, true, false };
        size_t n = runs && json_object_is_type(runs, json_type_array) ? json_object_array_length(runs) : 0;
        _cleanup_(table_done) struct table t = { .ncols = ELEMENTSOF(titles), .titles = titles, .right = right };

        for (size_t r = 0; r < n; r++)
                run_row(&t, json_object_array_get_idx(runs, r));
        /* on a terminal, one line per run: COMMAND gets what is left */
        table_print(f, &t, NULL, max_width, t.ncols - 1);
}

/* ---- generic tables ------------------------------------------------------- */

void table_add(struct table *t, const char *cell) {
        if (!GREEDY_REALLOC(t->cells, t->ncells + 1))
                oom_exit();
        char *c = text_printable(cell);
        if (!c)
                oom_exit();
        t->cells[t->ncells++] = c;
}

void table_addf(struct table *t, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *s = text_vprintf(fmt, ap);
        va_end(ap);
        if (!s)
                oom_exit();
        table_add(t, s);
}

size_t table_rows(const struct table *t) {
        return t->ncols ? t->ncells / t->ncols : 0;
}

void table_print(FILE *f, const struct table *t, const char *indent, int max_width, size_t shrink) {
        size_t nrows = table_rows(t);
        _cleanup_free_ size_t *width = calloc(t->ncols + 1, sizeof(size_t));

        if (!width)
                oom_exit();
        for (size_t c = 0; c < t->ncols; c++) {
                width[c] = text_width(t->titles[c]);
                for (size_t r = 0; r < nrows; r++) {
                        size_t w = text_width(t->cells[r * t->ncols + c]);
                        if (w > width[c])
                                width[c] = w;
                }
        }
        if (max_width > 0 && shrink < t->ncols && !t->right[shrink]) {
                size_t used = indent ? strlen(indent) : 0;
                for (size_t c = 0; c < t->ncols; c++)
                        if (c != shrink)
                                used += width[c] + 2;
                size_t left = (size_t)max_width > used ? (size_t)max_width - used : 0;
                if (left < text_width(t->titles[shrink]))
                        left = text_width(t->titles[shrink]);
                if (left < width[shrink]) {
                        width[shrink] = left;
                        for (size_t r = 0; r < nrows; r++)
                                text_truncate(t->cells[r * t->ncols + shrink], left);
                }
        }
        for (size_t r = 0; r <= nrows; r++) {
                const char *const *row = r == 0 ? t->titles : (const char *const *)&t->cells[(r - 1) * t->ncols];
                size_t last = t->ncols - 1; /* empty cells at the end leave no spaces behind */
                while (last > 0 && text_width(row[last]) == 0)
                        last--;
                fputs(indent ? indent : "", f);
                for (size_t c = 0; c <= last; c++)
                        print_cell(f, row[c], width[c], t->right[c], c == last);
        }
}

void table_done(struct table *t) {
        for (size_t i = 0; i < t->ncells; i++)
                free(t->cells[i]);
        free(t->cells);
        t->cells = NULL;
        t->ncells = 0;
}

/* ---- blocks ----------------------------------------------------------------- */

#define LABEL_WIDTH 14

static void field(FILE *f, const char *label, const char *value) {
        fprintf(f, "  %-*s %s\n", LABEL_WIDTH, label, value);
}

void print_field(FILE *f, const char *label, const char *value) {
        field(f, label, value);
}

static void field_text(FILE *f, const char *label, const char *value) {
        _cleanup_free_ char *p = text_printable(value);
        field(f, label, p ? p : "-");
}

typedef const char *(*fmt_number_t)(char *buf, size_t size, bool known, double v);

/* A number field rendered by fmt ("-" when unknown). */
static void field_number(FILE *f, const char *label, json_object *o, const char *key, fmt_number_t fmt) {
        char b[FMT_MAX];
        double d;
        bool known = json_get_number(o, key, &d);
        field(f, label, fmt(b, sizeof b, known, d));
}

/* "12.0 MiB (1.0 MiB/s)" */
static void field_bytes_rate(FILE *f, const char *label, json_object *o, const char *key, const char *rate_key) {
        char b[FMT_MAX], r[FMT_MAX], line[2 * FMT_MAX + 8];
        double d, dr;
        bool known = json_get_number(o, key, &d), rknown = json_get_number(o, rate_key, &dr);
        if (rknown)
                snprintf(line, sizeof line, "%s (%s)", fmt_bytes(b, sizeof b, known, d),
                         fmt_rate(r, sizeof r, rknown, dr));
        else
                snprintf(line, sizeof line, "%s", fmt_bytes(b, sizeof b, known, d));
        field(f, label, line);
}

static void field_int(FILE *f, const char *label, json_object *o, const char *key) {
        char b[FMT_MAX];
        double d;
        if (json_get_number(o, key, &d))
                snprintf(b, sizeof b, "%.0f", d);
        else
                strcpy(b, "-");
        field(f, label, b);
}

static void field_ts(FILE *f, const char *label, json_object *o, const char *key) {
        char b[FMT_MAX];
        int64_t t;
        bool known = json_get_int(o, key, &t);
        field(f, label, fmt_ts_ms(b, sizeof b, known, t));
}

static bool has_value(json_object *o, const char *key) {
        double d;
        return json_get_number(o, key, &d);
}

void print_summary(FILE *f, json_object *s) {
        char b[FMT_MAX], u[FMT_MAX], y[FMT_MAX], line[3 * FMT_MAX + 32];
        double d, du, dy;

        field_number(f, "wall time:", s, "wall_time_s", fmt_seconds);
        bool known = json_get_number(s, "cpu_time_s", &d);
        bool uknown = json_get_number(s, "user_time_s", &du);
        bool yknown = json_get_number(s, "system_time_s", &dy);
        snprintf(line, sizeof line, "%s (user %s, system %s)", fmt_seconds(b, sizeof b, known, d),
                 fmt_seconds(u, sizeof u, uknown, du), fmt_seconds(y, sizeof y, yknown, dy));
        field(f, "CPU time:", line);
        field_number(f, "avg CPU:", s, "cpu_util_avg_pct", fmt_pct);
        field_number(f, "peak RSS:", s, "peak_rss_bytes", fmt_bytes);
        field_number(f, "final RSS:", s, "final_rss_bytes", fmt_bytes);
        /* a tree's footprint, each shared page once (its RSS sums count a
         * page its forked workers share once per process) */
        if (has_value(s, "peak_pss_bytes")) {
                field_number(f, "peak PSS:", s, "peak_pss_bytes", fmt_bytes);
                field_number(f, "final PSS:", s, "final_pss_bytes", fmt_bytes);
        }
        field_number(f, "read:", s, "read_bytes", fmt_bytes);
        field_number(f, "write:", s, "write_bytes", fmt_bytes);
        field_number(f, "netns rx:", s, "netns_rx_bytes", fmt_bytes);
        field_number(f, "netns tx:", s, "netns_tx_bytes", fmt_bytes);
        field_int(f, "threads max:", s, "threads_max");
        /* Only on hosts that have them: a column of "-" for every CPU-only
         * host would be noise. */
        if (has_value(s, "peak_gpu_mem_bytes"))
                field_number(f, "peak GPU mem:", s, "peak_gpu_mem_bytes", fmt_bytes);
        if (has_value(s, "gpu_util_avg_pct"))
                field_number(f, "avg GPU util:", s, "gpu_util_avg_pct", fmt_pct);
        if (json_get_number(s, "energy_j", &d)) {
                snprintf(b, sizeof b, "%.1f J", d);
                field(f, "energy:", b);
        }
        if (json_get_number(s, "co2_g", &d)) {
                snprintf(b, sizeof b, "%.2f g", d);
                field(f, "CO2:", b);
        }
        if (json_get_bool(s, "leak_detected") == 1)
                field(f, "leak:", "suspected");
        field_int(f, "samples:", s, "samples");
}

/* One line per device the run uses: "0000:03:00.0 amdgpu: 50.0 % (gfx 50.0 %, compute 20.0 %), 4.1 GiB". */
static void print_gpu_uses(FILE *f, json_object *latest) {
        json_object *arr;
        if (!json_object_object_get_ex(latest, "gpu", &arr) || !json_object_is_type(arr, json_type_array))
                return;
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
                json_object *u = json_object_array_get_idx(arr, i), *v, *eng;
                char line[512], b[64], m[64];
                double d, mem;
                const char *dev = json_object_object_get_ex(u, "device", &v) ? json_object_get_string(v) : "?";
                const char *drv = json_object_object_get_ex(u, "driver", &v) && v ? json_object_get_string(v) : "";
                bool uk = json_get_number(u, "util_pct", &d), mk = json_get_number(u, "mem_bytes", &mem);
                int k = snprintf(line, sizeof line, "%s %s: %s", dev, drv, fmt_pct(b, sizeof b, uk, d));
                if (json_object_object_get_ex(u, "engines", &eng) && json_object_object_length(eng) > 0) {
                        const char *sep = " (";
                        json_object_object_foreach(eng, name, val) {
                                if (k < 0 || (size_t)k >= sizeof line)
                                        break;
                                k += snprintf(line + k, sizeof line - (size_t)k, "%s%s %s", sep, name,
                                              fmt_pct(b, sizeof b, val != NULL, val ? json_object_get_double(val) : 0));
                                sep = ", ";
                        }
                        if (k > 0 && (size_t)k < sizeof line)
                                k += snprintf(line + k, sizeof line - (size_t)k, ")");
                }
                if (k > 0 && (size_t)k < sizeof line)
                        snprintf(line + k, sizeof line - (size_t)k, ", %s%s", fmt_bytes(m, sizeof m, mk, mem),
                                 json_get_bool(u, "estimated") == 1 ? " (estimated)" : "");
                field(f, "GPU device:", line);
        }
}

static void print_tags(FILE *f, json_object *run) {
        json_object *tags = json_get_object(run, "tags");
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        _cleanup_fclose_ FILE *m = open_memstream(&buf, &len);
        if (!m)
                return;
        bool first = true;
        if (tags) {
                json_object_object_foreach(tags, k, v) {
                        fprintf(m, "%s%s=%s", first ? "" : ", ", k,
                                json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                                                                         : json_object_to_json_string(v));
                        first = false;
                }
        }
        if (fflush(m) != 0)
                return;
        field_text(f, "tags:", first ? "-" : buf);
}

static void print_leak(FILE *f, json_object *run) {
        char b[FMT_MAX];
        double d;
        int64_t t;
        json_object *leak = json_get_object(run, "leak");
        if (!leak) {
                fputs("leak: not evaluated\n", f);
                return;
        }
        int suspected = json_get_bool(leak, "suspected");
        _cleanup_free_ char *reason = text_printable(json_get_str(leak, "reason"));
        /* not judged (yet, or ever for a run that ended): neither verdict */
        bool judged = json_get_bool(leak, "evaluated") != 0;
        const char *verdict = suspected == 1   ? "SUSPECTED"
                              : !judged        ? "no verdict"
                              : suspected == 0 ? "not suspected"
                                               : "unknown";
        if (reason && !streq(reason, "-"))
                fprintf(f, "leak: %s (%s)\n", verdict, reason);
        else
                fprintf(f, "leak: %s\n", verdict);
        /* each change of the verdict, oldest first */
        json_object *hist = json_get_array(leak, "history");
        size_t nh = hist ? json_object_array_length(hist) : 0;
        for (size_t i = 0; i < nh; i++) {
                json_object *e = json_object_array_get_idx(hist, i);
                int64_t ts = 0;
                bool has_ts = json_get_int(e, "ts", &ts);
                _cleanup_free_ char *why = text_printable(json_get_str(e, "reason"));
                const char *what = json_get_str(e, "verdict");
                fprintf(f, "  %s %s: %s\n", fmt_ts_ms(b, sizeof b, has_ts, ts), what ? what : "-", why ? why : "-");
        }
        if (suspected != 1)
                return;
        field_text(f, "metric:", json_get_str(leak, "metric"));
        field_bytes_rate(f, "growth:", leak, "growth_bytes", "slope_bytes_per_s");
        field_number(f, "window:", leak, "window_s", fmt_seconds);
        if (json_get_number(leak, "confidence", &d)) {
                snprintf(b, sizeof b, "%.2f", d);
                field(f, "confidence:", b);
        }
        if (json_get_int(leak, "since", &t))
                field(f, "since:", fmt_ts_ms(b, sizeof b, true, t));
}

/* A gauge value: whole numbers as they are ("40"), others in the fewest
 * digits that read back the same ("7.5"); "-" when unknown. */
static void add_gauge_number(struct table *t, json_object *g, const char *key) {
        double v;
        if (!json_get_number(g, key, &v)) {
                table_add(t, NULL);
                return;
        }
        if (v == trunc(v) && fabs(v) < 0x1p53) {
                table_addf(t, "%.0f", v);
                return;
        }
        char buf[32];
        table_add(t, fmt_shortest(buf, sizeof buf, v));
}

void print_gauges(FILE *f, const char *title, json_object *gauges, bool stats) {
        static const char *const titles[] = { "Gauge", "Value", "Min", "Max", "Count", "At" };
        static const char *const short_titles[] = { "Gauge", "Value", "At" };
        static const bool right[] = { false, true, true, true, true, false };
        static const bool short_right[] = { false, true, false };
        if (!gauges || json_object_object_length(gauges) == 0)
                return;
        struct table t = { .ncols = stats ? ELEMENTSOF(titles) : ELEMENTSOF(short_titles),
                           .titles = stats ? titles : short_titles,
                           .right = stats ? right : short_right };
        json_object_object_foreach(gauges, name, g) {
                char b[FMT_MAX];
                int64_t ts;
                table_add(&t, name);
                add_gauge_number(&t, g, "value");
                if (stats) {
                        add_gauge_number(&t, g, "min");
                        add_gauge_number(&t, g, "max");
                        add_gauge_number(&t, g, "count");
                }
                bool known = json_get_int(g, "ts", &ts);
                table_add(&t, fmt_ts_ms(b, sizeof b, known, ts));
        }
        fprintf(f, "%s\n", title);
        table_print(f, &t, "  ", 0, 0);
        table_done(&t);
}

void print_run(FILE *f, json_object *run) {
        char b[FMT_MAX];
        int64_t i = 0;
        json_object *latest = json_get_object(run, "latest");
        json_object *summary = json_get_object(run, "summary");

        bool known = json_get_int(run, "id", &i);
        fprintf(f, "run %s\n", fmt_int(b, sizeof b, known, i));
        field_int(f, "pid:", run, "pid");
        field_text(f, "name:", json_get_str(run, "name"));
        field_text(f, "state:", json_get_str(run, "state"));
        field_text(f, "process:", process_text(run, false, b, sizeof b));
        field_text(f, "comm:", json_get_str(run, "comm"));
        field_text(f, "cmdline:", json_get_str(run, "cmdline"));
        field_int(f, "uid:", run, "uid");
        field_ts(f, "registered:", run, "registered_ts");
        field_ts(f, "ended:", run, "ended_ts");
        if (json_get_int(run, "interval_ms", &i) && i >= 0)
                format_duration((usec_t)i * USEC_PER_MSEC, b, sizeof b);
        else
                strcpy(b, "-");
        field(f, "interval:", b);
        int children = json_get_bool(run, "children");
        field(f, "children:", children == 1 ? "yes" : children == 0 ? "no" : "-");
        json_object *left = json_get_object(run, "processes_left_out");
        if (left && json_get_int(left, "count", &i) && i > 0) {
                const char *why = json_get_str(left, "reason");
                snprintf(b, sizeof b, "%" PRId64 " process%s (%s)", i, i == 1 ? "" : "es", why ? why : "-");
                field(f, "left out:", b);
        }
        print_tags(f, run);

        fputc('\n', f);
        if (!latest)
                fputs("latest sample: none yet\n", f);
        else {
                if (json_get_int(latest, "ts", &i))
                        fprintf(f, "latest sample (%s):\n", fmt_ts_ms(b, sizeof b, true, i));
                else
                        fputs("latest sample:\n", f);
                field_number(f, "CPU:", latest, "cpu_pct", fmt_pct);
                field_number(f, "RSS:", latest, "rss_bytes", fmt_bytes);
                field_number(f, "anon RSS:", latest, "rss_anon_bytes", fmt_bytes);
                field_number(f, "peak RSS:", latest, "peak_rss_bytes", fmt_bytes);
                field_int(f, "threads:", latest, "threads");
                field_int(f, "processes:", latest, "processes");
                field_bytes_rate(f, "read:", latest, "read_bytes", "read_bytes_per_s");
                field_bytes_rate(f, "write:", latest, "write_bytes", "write_bytes_per_s");
                field_bytes_rate(f, "netns rx:", latest, "netns_rx_bytes", "netns_rx_bytes_per_s");
                field_bytes_rate(f, "netns tx:", latest, "netns_tx_bytes", "netns_tx_bytes_per_s");
                if (has_value(latest, "gpu_mem_bytes"))
                        field_number(f, "GPU memory:", latest, "gpu_mem_bytes", fmt_bytes);
                if (has_value(latest, "gpu_util_pct"))
                        field_number(f, "GPU util:", latest, "gpu_util_pct", fmt_pct);
                print_gpu_uses(f, latest);
        }

        fputc('\n', f);
        if (!summary)
                fputs("summary: none\n", f);
        else {
                fputs("summary:\n", f);
                print_summary(f, summary);
        }

        json_object *gauges = json_get_object(run, "gauges");
        if (gauges && json_object_object_length(gauges) > 0) {
                fputc('\n', f);
                print_gauges(f, "gauges (latest):", gauges, false);
        }

        fputc('\n', f);
        print_leak(f, run);
        print_verdicts(f, run);
}

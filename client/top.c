/* SPDX-License-Identifier: MIT */
#include "top.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json-util.h"
#include "mlmonctl.h"
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

/* The op that cost the most time in the window: the timed op with the
 * largest total_ms, else (counters only) the op with the most events. Ties:
 * by name. */
static const char *top_op(const struct top_run *t) {
        static const char *const keys[] = { "total_ms", "count" };
        json_object *sets[] = { json_get_object(t->latency, "ops"), json_get_object(t->window, "ops") };
        const char *best = NULL;
        double best_value = -1;
        for (size_t s = 0; s < ELEMENTSOF(sets) && !best; s++) {
                if (!sets[s])
                        continue;
                json_object_object_foreach(sets[s], name, o) {
                        double v;
                        if (!json_get_number(o, keys[s], &v))
                                continue;
                        if (v > best_value || (v == best_value && best && strcmp(name, best) < 0)) {
                                best = name;
                                best_value = v;
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

/* "Gauges:" and a line per run that has any: "ID NAME: name value ..." */
static void print_run_gauges(FILE *f, const struct top_run *runs, size_t n) {
        bool any = false;
        for (size_t i = 0; i < n; i++) {
                if (!runs[i].gauges || json_object_object_length(runs[i].gauges) == 0)
                        continue;
                if (!any)
                        fputs("\nGauges (latest):\n", f);
                any = true;
                int64_t id = 0;
                (void)json_get_int(runs[i].run, "id", &id);
                const char *name = json_get_str(runs[i].run, "name");
                _cleanup_free_ char *pname = text_printable(name ? name : json_get_str(runs[i].run, "comm"));
                fprintf(f, "  %" PRId64 " %s:", id, pname ? pname : "-");
                const char *sep = " ";
                json_object_object_foreach(runs[i].gauges, g, v) {
                        _cleanup_free_ char *pg = text_printable(g);
                        if (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))
                                fprintf(f, "%s%s %.6g", sep, pg ? pg : "-", json_object_get_double(v));
                        else
                                fprintf(f, "%s%s -", sep, pg ? pg : "-");
                        sep = ", ";
                }
                fputc('\n', f);
        }
}

void print_top(FILE *f, json_object *health, struct top_run *runs, size_t n, const char *want_op, int64_t now_ms,
               int max_width) {
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
        sort_array(runs, n, sizeof *runs, top_cmp);
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

                const char *op = want_op ? want_op : top_op(&runs[i]);
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
        print_run_gauges(f, runs, n);
}

/* ---- the verb ------------------------------------------------------------ */

static volatile sig_atomic_t top_quit;

static void top_signal(int sig _unused_) {
        top_quit = 1;
}

/* Sleeps until deadline (CLOCK_MONOTONIC) or a quit signal. */
static void top_sleep_until(usec_t deadline) {
        while (!top_quit) {
                usec_t now = now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        return;
                usec_t left = deadline - now;
                struct timespec ts = { .tv_sec = (time_t)(left / USEC_PER_SEC),
                                       .tv_nsec = (long)(left % USEC_PER_SEC * 1000) };
                (void)nanosleep(&ts, NULL); /* EINTR: look at top_quit */
        }
}

/* {name: value} of run id's latest gauges (GET /v1/runs/ID "gauges":
 * {name: {"value", "ts"}}; a list's runs do not carry them), or NULL when
 * it has none. */
static json_object *latest_gauges(int64_t id) {
        _cleanup_json_ json_object *run = NULL;
        json_object *gauges = NULL;
        char path[64];
        snprintf(path, sizeof path, "/v1/runs/%" PRId64, id);
        if (api_call_full("GET", path, NULL, true, &run, NULL) < 0 ||
            !json_object_object_get_ex(run, "gauges", &gauges) || !json_object_is_type(gauges, json_type_object) ||
            json_object_object_length(gauges) == 0)
                return NULL;
        _cleanup_json_ json_object *latest = json_object_new_object();
        if (!latest)
                return NULL;
        json_object_object_foreach(gauges, name, g) {
                json_object *v = NULL;
                if (json_object_object_get_ex(g, "value", &v))
                        json_object_object_add(latest, name, json_object_get(v));
        }
        return TAKE_PTR(latest);
}

/* One refresh: the running runs and, per run, its op figures over the last
 * TOP_WINDOW. Writes the screen (or, --json, one JSON line) to *ret_text.
 * Returns 0, or -1 (printed) when the run list could not be had. */
static int top_frame(const char *op, char **ret_text) {
        _cleanup_json_ json_object *answer = NULL, *health = NULL, *out = NULL;
        _cleanup_free_ struct top_run *runs = NULL;
        char *text = NULL;
        size_t len = 0, n = 0;
        int r = -1;

        if (api_list_runs("/v1/runs", false, &answer) < 0)
                return -1;
        json_object *list = json_get_array(answer, "runs");
        if (!list) {
                error_line("%s: mlmond's answer has no \"runs\" list", daemon_address());
                return -1;
        }
        /* a missing figure is shown as "-", not an error: a run may end
         * between the list and its figures */
        (void)api_call_full("GET", "/v1/health", NULL, true, &health, NULL);
        n = json_object_array_length(list);
        runs = calloc(n + 1, sizeof *runs);
        if (!runs)
                return oom(), -1;
        for (size_t i = 0; i < n && !top_quit; i++) {
                char path[128];
                int64_t id;
                _cleanup_json_ json_object *t = NULL;
                runs[i].run = json_object_array_get_idx(list, i);
                if (!json_get_int(runs[i].run, "id", &id))
                        continue;
                snprintf(path, sizeof path, "/v1/runs/%" PRId64 "/latency?window=" TOP_WINDOW "&q=99", id);
                (void)api_call_full("GET", path, NULL, true, &runs[i].latency, NULL);
                snprintf(path, sizeof path, "/v1/runs/%" PRId64 "/throughput?window=" TOP_WINDOW, id);
                if (api_call_full("GET", path, NULL, true, &t, NULL) == 0)
                        runs[i].window = json_object_get(throughput_window(t));
                runs[i].gauges = latest_gauges(id);
        }

        FILE *f = open_memstream(&text, &len);
        if (!f)
                goto finish;
        if (arg_json) {
                json_object *arr = json_object_new_array();
                out = json_object_new_object();
                if (!out || !arr) {
                        json_object_put(arr);
                        fclose(f);
                        goto finish;
                }
                json_object_object_add(out, "ts", json_object_new_int64(now_realtime_ms()));
                json_object_object_add(out, "health", json_object_get(health));
                json_object_object_add(out, "runs", arr);
                for (size_t i = 0; i < n; i++) {
                        json_object *o = report_document(runs[i].run, runs[i].latency, runs[i].window);
                        if (!o)
                                break;
                        json_object_object_add(o, "gauges", json_object_get(runs[i].gauges));
                        json_object_array_add(arr, o);
                }
                fprintf(f, "%s\n", json_to_string(out));
        } else
                print_top(f, health, runs, n, op, now_realtime_ms(), terminal_width());
        if (fclose(f) != 0) {
                free(text);
                text = NULL;
        } else
                r = 0;
finish:
        for (size_t i = 0; i < n; i++) {
                json_object_put(runs[i].latency);
                json_object_put(runs[i].window);
                json_object_put(runs[i].gauges);
        }
        if (r < 0)
                return oom(), -1;
        *ret_text = text;
        return 0;
}

/* Whether the last failed refresh lost mlmond itself (gone, restarting)
 * rather than being refused. */
static bool daemon_lost(void) {
        return last_transport_error_of_request() != 0;
}

int verb_top(struct args *a) {
        static const int quit_signals[] = { SIGINT, SIGTERM };
        struct sigaction saved[ELEMENTSOF(quit_signals)];
        usec_t interval = USEC_PER_SEC;
        int code = EXIT_OK;
        bool shown = false, lost = false;

        if (a->interval)
                (void)parse_duration(a->interval, &interval); /* checked by parse_options */
        /* on a terminal, refresh until Ctrl-C; into a pipe or file, one
         * screen (a script that wants more says how many) */
        bool screen = isatty(STDOUT_FILENO) && !arg_json;
        uint64_t iterations = a->iterations > 0 ? a->iterations : isatty(STDOUT_FILENO) ? 0 : 1;

        /* no SA_RESTART: a signal ends the sleep at once */
        struct sigaction sa = { .sa_handler = top_signal };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(quit_signals); i++)
                sigaction(quit_signals[i], &sa, &saved[i]);
        if (screen)
                fputs("\033[?25l", stdout); /* hide the cursor while we redraw */

        for (uint64_t i = 0; !top_quit && (iterations == 0 || i < iterations); i++) {
                usec_t start = now_usec(CLOCK_MONOTONIC);
                _cleanup_free_ char *text = NULL, *err = NULL;
                capture_errors(&err);
                int r = top_frame(a->op, &text);
                capture_errors(NULL);
                if (r < 0 && (!shown || !daemon_lost())) {
                        /* a wrong address, a refusal: said once, and out */
                        error_line("%s", err ? err : "out of memory");
                        code = EXIT_FAILED;
                        break;
                }
                if (r < 0 && !lost)
                        /* a restart, most likely: the view waits for it */
                        error_line("mlmond at %s went away; reconnecting...", daemon_address());
                if (r == 0 && lost)
                        error_line("reconnected to mlmond at %s", daemon_address());
                lost = r < 0;
                code = r < 0 ? EXIT_FAILED : EXIT_OK;
                if (top_quit)
                        break;
                if (r == 0) {
                        if (screen)
                                fputs("\033[H\033[2J", stdout);
                        else if (shown && !arg_json)
                                fputc('\n', stdout);
                        fputs(text, stdout);
                        shown = true;
                        if (fflush(stdout) != 0)
                                break; /* finish_stdout says why */
                }
                if (iterations == 0 || i + 1 < iterations)
                        top_sleep_until(start + interval);
        }

        if (screen)
                fputs("\033[?25h", stdout); /* the cursor back, whatever ended us */
        for (size_t i = 0; i < ELEMENTSOF(quit_signals); i++)
                sigaction(quit_signals[i], &saved[i], NULL);
        return finish_stdout(code);
}

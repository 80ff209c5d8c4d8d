/* SPDX-License-Identifier: MIT */
/* mlmonctl's messages and its calls to mlmond: one request per call (over
 * the unix socket, TCP or TLS: see endpoint.c), errors turned into one line
 * on stderr, the op figures of a run, and the output helpers every verb
 * ends with. */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>

#include "http-client.h"
#include "json-util.h"
#include "mlmonctl.h"
#include "output.h"
#include "report.h"

const char *arg_socket = DEFAULT_SOCKET;
bool arg_json;

/* ---- messages ------------------------------------------------------------ */

static char **captured_error;

static void error_linev(const char *fmt, va_list ap);

int usage_error(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        if (captured_error)
                error_linev(fmt, ap);
        else {
                fputs("mlmonctl: ", stderr);
                vfprintf(stderr, fmt, ap);
                fputs("\nTry 'mlmonctl --help'.\n", stderr);
        }
        va_end(ap);
        return EXIT_USAGE;
}

void capture_errors(char **where) {
        captured_error = where;
}

static void error_linev(const char *fmt, va_list ap) {
        _cleanup_free_ char *msg = text_vprintf(fmt, ap);
        if (!msg) {
                oom();
                return;
        }
        _cleanup_free_ char *p = text_printable(msg);
        if (captured_error) {
                if (!*captured_error)
                        *captured_error = p ? TAKE_PTR(p) : TAKE_PTR(msg);
                return;
        }
        fprintf(stderr, "mlmonctl: %s\n", p ? p : msg);
}

void error_line(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        error_linev(fmt, ap);
        va_end(ap);
}

void error_line_errno(int error, const char *fmt, ...) {
        int saved = errno;
        va_list ap;
        errno = abs(error); /* what %m prints */
        va_start(ap, fmt);
        error_linev(fmt, ap);
        va_end(ap);
        errno = saved;
}

int oom(void) {
        fputs("mlmonctl: out of memory\n", stderr);
        return EXIT_FAILED;
}

/* ---- talking to the daemon ------------------------------------------------ */

/* the transport's error of the last request, 0 if it got an answer */
static int last_transport_error;
/* the API's error code of the last failed request */
static char last_code[32];

int last_transport_error_of_request(void) {
        return last_transport_error;
}

const char *last_error_code(void) {
        return last_code[0] ? last_code : "internal";
}

static void set_error_code(const char *code) {
        snprintf(last_code, sizeof last_code, "%s", code);
}

int print_json_error(const char *code, const char *message, int exit_code) {
        _cleanup_json_ json_object *o = json_object_new_object(), *e = json_object_new_object();
        if (!o || !e)
                return oom();
        json_object_object_add(e, "code", json_object_new_string(code));
        json_object_object_add(e, "message", json_string_sanitized(message, strlen(message)));
        json_object_object_add(o, "error", json_object_get(e));
        puts(json_to_string(o));
        return finish_stdout(exit_code);
}

static void print_request_error(int r) {
        const char *where = daemon_address();

        if (endpoint.detail[0]) {
                /* the transport's own words: a name not resolved, a
                 * certificate refused, a failed TLS handshake */
                error_line("cannot talk to mlmond at %s: %s", where, endpoint.detail);
                return;
        }
        switch (-r) {
        case ENOENT:
        case ECONNREFUSED:
                if (arg_url)
                        error_line_errno(r,
                                         "cannot connect to %s: %m (is mlmond running and listening there? "
                                         "another address: --url URL or $MLMON_URL; on this machine: --socket PATH)",
                                         where);
                else
                        error_line_errno(r,
                                         "cannot connect to %s: %m (is mlmond running? another socket: --socket "
                                         "PATH or $MLMON_SOCKET; a remote mlmond: --url URL or $MLMON_URL)",
                                         where);
                break;
        case EACCES:
        case EPERM:
        case ENOTDIR:
        case ENOTSOCK:
        case ENAMETOOLONG:
        case EPROTOTYPE:
        case EHOSTUNREACH:
        case ENETUNREACH:
        case EADDRNOTAVAIL:
                error_line_errno(r, "cannot connect to %s: %m", where);
                break;
        case ECONNRESET:
        case EPIPE:
                error_line("%s: mlmond closed the connection without answering", where);
                break;
        case ETIMEDOUT:
                error_line("%s: mlmond did not answer within %d s", where, REQUEST_TIMEOUT_MS / 1000);
                break;
        case EPROTO:
                if (arg_url)
                        error_line("%s: not a valid HTTP answer (is this mlmond? http:// or https://?)", where);
                else
                        error_line("%s: not a valid HTTP answer (is this mlmond's socket?)", where);
                break;
        case EFBIG:
                error_line("%s: answer too large", where);
                break;
        default:
                error_line_errno(r, "cannot talk to mlmond at %s: %m", where);
        }
}

/* Prints the daemon's error for a non-2xx answer: error.message, or what
 * there is. */
static void print_http_error(const struct http_response *resp) {
        _cleanup_json_ json_object *j = json_tokener_parse(resp->body);
        const char *msg = json_get_str(json_get_object(j, "error"), "message");
        const char *code = json_get_str(json_get_object(j, "error"), "code");
        if (code && *code)
                set_error_code(code);
        if (msg && *msg)
                error_line("%s", msg);
        else if (code && *code)
                error_line("request failed: HTTP %d (%s)", resp->status, code);
        else if (resp->body_len > 0 && resp->body_len <= 200 && !j)
                error_line("request failed: HTTP %d: %s", resp->status, resp->body);
        else
                error_line("request failed: HTTP %d", resp->status);
}

int api_call_full(const char *method, const char *path, json_object *body, bool quiet, json_object **ret_json,
                  char **ret_raw) {
        struct http_response resp = {};
        const char *b = body ? json_to_string(body) : NULL;
        int r;

        if (body && !b) {
                oom();
                return -1;
        }
        r = http_request(&endpoint, method, path, b, REQUEST_TIMEOUT_MS, &resp);
        last_transport_error = r < 0 ? r : 0;
        set_error_code(r < 0 ? "unavailable" : "internal");
        if (r < 0) {
                if (!quiet)
                        print_request_error(r);
                return -1;
        }
        if (resp.status < 200 || resp.status > 299) {
                if (!quiet)
                        print_http_error(&resp);
                http_response_done(&resp);
                return -1;
        }
        json_object *j = json_tokener_parse(resp.body);
        if (!j) {
                if (!quiet)
                        error_line("%s: mlmond's answer is not valid JSON", daemon_address());
                http_response_done(&resp);
                return -1;
        }
        *ret_json = j;
        if (ret_raw)
                *ret_raw = TAKE_PTR(resp.body);
        http_response_done(&resp);
        return 0;
}

/* More pages than a list can have: max_rows is at least 1 and the runs are
 * bounded by [storage] ended_runs_per_uid for each user; a daemon that
 * sends "next" for ever is not followed for ever. */
#define LIST_PAGES_MAX 100000

int api_list_runs(const char *path, bool quiet, json_object **ret_json) {
        _cleanup_json_ json_object *all = NULL;
        if (api_call_full("GET", path, NULL, quiet, &all, NULL) < 0)
                return -1;
        json_object *runs = json_get_array(all, "runs");
        for (unsigned pages = 1; runs && json_get_str(all, "next"); pages++) {
                _cleanup_json_ json_object *page = NULL;
                _cleanup_free_ char *next = strdup(json_get_str(all, "next"));
                if (!next)
                        return oom(), -1;
                if (pages >= LIST_PAGES_MAX || strncmp(next, "/v1/runs?", 9) != 0) {
                        if (!quiet)
                                error_line("%s: mlmond's list of runs does not end", daemon_address());
                        return -1;
                }
                if (api_call_full("GET", next, NULL, quiet, &page, NULL) < 0)
                        return -1;
                json_object *more = json_get_array(page, "runs");
                for (size_t i = 0; more && i < json_object_array_length(more); i++)
                        json_object_array_add(runs, json_object_get(json_object_array_get_idx(more, i)));
                json_object_object_add(all, "truncated", json_object_get(json_object_object_get(page, "truncated")));
                json_object_object_add(all, "next", json_object_get(json_object_object_get(page, "next")));
        }
        *ret_json = TAKE_PTR(all);
        return 0;
}

void print_raw(FILE *f, const char *body) {
        size_t l = strlen(body);
        fputs(body, f);
        if (l == 0 || body[l - 1] != '\n')
                fputc('\n', f);
}

int finish_stdout(int code) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
                if (errno != EPIPE)
                        error_line_errno(errno, "cannot write to stdout: %m");
                return code == EXIT_OK ? EXIT_FAILED : code;
        }
        return code;
}

int finish_answer(const char *raw) {
        if (arg_json)
                print_raw(stdout, raw);
        return finish_stdout(EXIT_OK);
}

int print_json_pretty(json_object *doc) {
        const char *text = json_pretty(doc);
        if (!text)
                return -ENOMEM;
        puts(text);
        return 0;
}

/* ---- op figures and reports --------------------------------------------------------------- */

char *url_escape(const char *s) {
        static const char hex[] = "0123456789ABCDEF";
        char *out = malloc(strlen(s) * 3 + 1), *o = out;
        if (!out)
                return NULL;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                    strchr("-._~", *p))
                        *o++ = (char)*p;
                else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        }
        *o = 0;
        return out;
}

bool run_span(json_object *run, int64_t *ret_from, int64_t *ret_until) {
        if (!json_get_int(run, "registered_ts", ret_from))
                return false;
        if (!json_get_int(run, "ended_ts", ret_until))
                *ret_until = now_realtime_ms();
        if (*ret_until < *ret_from)
                *ret_until = *ret_from;
        return true;
}

json_object *throughput_window(json_object *answer) {
        json_object *windows = json_get_array(answer, "windows");
        json_object *w = windows && json_object_array_length(windows) > 0 ? json_object_array_get_idx(windows, 0)
                                                                          : NULL;
        return w && json_object_is_type(w, json_type_object) ? w : NULL;
}

int fetch_op_figures(int64_t id, const char *latency_query, const char *throughput_fallback, bool partial,
                     json_object **ret_latency, json_object **ret_window) {
        _cleanup_free_ char *lpath = NULL, *tpath = NULL;
        _cleanup_json_ json_object *latency = NULL, *throughput = NULL;
        int64_t from = 0, until = 0;
        int r = 0, k;

        *ret_latency = *ret_window = NULL;
        if (asprintf(&lpath, "/v1/runs/%" PRId64 "/latency?%s&q=" REPORT_QUANTILES, id, latency_query) < 0) {
                lpath = NULL;
                oom();
                return -1;
        }
        if (api_call("GET", lpath, NULL, &latency, NULL) < 0) {
                if (!partial)
                        return -1;
                r = -1;
        }
        if (latency_span(latency, &from, &until))
                k = asprintf(&tpath, "/v1/runs/%" PRId64 "/throughput?window=%" PRId64 "ms&until=%" PRId64, id,
                             until - from > 0 ? until - from : 1, until);
        else
                k = asprintf(&tpath, "/v1/runs/%" PRId64 "/throughput?%s", id, throughput_fallback);
        if (k < 0) {
                tpath = NULL;
                oom();
                return -1;
        }
        if (api_call("GET", tpath, NULL, &throughput, NULL) < 0)
                r = -1;
        else {
                json_object *w = throughput_window(throughput);
                if (!w) {
                        error_line("%s: mlmond's throughput answer has no window", daemon_address());
                        r = -1;
                } else
                        *ret_window = json_object_get(w);
        }
        *ret_latency = TAKE_PTR(latency);
        return r;
}

int fetch_run_op_figures(int64_t id, json_object *run, json_object **ret_latency, json_object **ret_window) {
        char lq[96], tq[96];
        int64_t from, until;
        *ret_latency = *ret_window = NULL;
        if (!run_span(run, &from, &until)) {
                error_line("%s: mlmond's run %" PRId64 " has no registration time", daemon_address(), id);
                return -1;
        }
        snprintf(lq, sizeof lq, "from=%" PRId64 "&until=%" PRId64, from, until);
        snprintf(tq, sizeof tq, "window=%" PRId64 "ms&until=%" PRId64, until - from > 0 ? until - from : 1, until);
        return fetch_op_figures(id, lq, tq, true, ret_latency, ret_window);
}

json_object *report_document(json_object *run, json_object *latency, json_object *window) {
        json_object *doc = json_object_new_object();
        if (!doc)
                return NULL;
        json_object_object_add(doc, "run", json_object_get(run));
        json_object_object_add(doc, "latency", json_object_get(latency));
        json_object_object_add(doc, "throughput", json_object_get(window));
        return doc;
}

const char *json_pretty(json_object *doc) {
        return json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE);
}

bool has_ops(json_object *latency, json_object *window) {
        json_object *l = json_get_object(latency, "ops"), *t = json_get_object(window, "ops");
        return (l && json_object_object_length(l) > 0) || (t && json_object_object_length(t) > 0);
}

int register_pid(const struct args *a, pid_t pid, char **ret_raw, int64_t *ret_id) {
        _cleanup_json_ json_object *body = registration_body(a, pid), *run = NULL;
        _cleanup_free_ char *raw = NULL;
        int64_t id;

        if (!body) {
                oom();
                return -1;
        }
        if (api_call("POST", "/v1/runs", body, &run, &raw) < 0)
                return -1;
        if (!json_get_int(run, "id", &id) || id <= 0) {
                error_line("%s: mlmond's answer has no run id", daemon_address());
                return -1;
        }
        *ret_id = id;
        if (ret_raw)
                *ret_raw = TAKE_PTR(raw);
        return 0;
}

int register_pid_quiet(const struct args *a, pid_t pid, int64_t *ret_id, char **ret_error, int *ret_unreachable) {
        *ret_error = NULL;
        captured_error = ret_error;
        last_transport_error = 0;
        int r = register_pid(a, pid, NULL, ret_id);
        captured_error = NULL;
        *ret_unreachable = r < 0 ? last_transport_error : 0;
        return r;
}

int terminal_width(void) {
        struct winsize ws;
        if (!isatty(STDOUT_FILENO))
                return 0; /* piped: never cut */
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
                return ws.ws_col;
        unsigned c;
        const char *e = getenv("COLUMNS");
        if (e && safe_atou(e, &c) >= 0 && c > 0 && c < 10000)
                return (int)c;
        return 80;
}

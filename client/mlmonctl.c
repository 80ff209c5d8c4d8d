/* SPDX-License-Identifier: MIT */
/* mlmonctl: command-line client of mlmond. Talks HTTP/JSON to the daemon's
 * unix socket (--socket); see DESIGN.md "mlmonctl" and doc/api-contract.md.
 *
 * Exit codes: 0 success, 1 a refused or failed request (the daemon's message
 * on stderr), 2 a usage error. `run` exits with the job's own status. */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "compare.h"
#include "http-client.h"
#include "json-util.h"
#include "output.h"
#include "report.h"
#include "top.h"
#include "util.h"
#include "version.h"

#define DEFAULT_SOCKET "/run/mlmond/mlmond.sock"

/* Every request is a few local syscalls for the daemon; 10 s only trips on a
 * daemon that is wedged, not one that is busy. */
#define REQUEST_TIMEOUT_MS 10000
/* `run`: how long to wait for the daemon to see the job's exit (it learns of
 * it through a pidfd, i.e. at once), and how often to ask. */
#define EXIT_WAIT_USEC (3 * USEC_PER_SEC)
#define EXIT_POLL_USEC (50 * USEC_PER_MSEC)
/* `compare`: worse by more than this many percent is a regression */
#define DEFAULT_THRESHOLD_PCT 10.0
/* mark labels, as the API takes them */
#define LABEL_MAX 64

enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1,
        EXIT_USAGE = 2,
};

/* returned by the option parser when the command should go on */
#define CONTINUE (-1)

static const char *arg_socket = DEFAULT_SOCKET;
static bool arg_json;

/* ---- messages ------------------------------------------------------------ */

static int usage_error(const char *fmt, ...) _printf_(1, 2);
static int usage_error(const char *fmt, ...) {
        va_list ap;
        fputs("mlmonctl: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs("\nTry 'mlmonctl --help'.\n", stderr);
        return EXIT_USAGE;
}

/* One line on stderr, prefixed; the text may come from the daemon, so it is
 * made printable and kept on one line. */
static void error_line(const char *fmt, ...) _printf_(1, 2);
static void error_line(const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0) {
                fputs("mlmonctl: out of memory\n", stderr);
                return;
        }
        _cleanup_free_ char *p = text_printable(msg);
        fprintf(stderr, "mlmonctl: %s\n", p ? p : msg);
}

static int oom(void) {
        fputs("mlmonctl: out of memory\n", stderr);
        return EXIT_FAILED;
}

static void help(void) {
        printf("Usage: mlmonctl [OPTIONS] COMMAND [ARGS...]\n"
               "\n"
               "Control mlmond, the per-process metrics daemon.\n"
               "\n"
               "Commands:\n"
               "  register PID [--name N] [--interval DUR] [--children] [--tag K=V]...\n"
               "                         Start a run for a running process; prints its id\n"
               "  unregister ID          Stop sampling a run; its data stays\n"
               "  list [--all]           List running runs (--all: ended ones too)\n"
               "  show ID                One run: identity, latest sample, summary, leak verdict\n"
               "  run [REGISTER OPTIONS] [--report FILE] -- CMD [ARGS...]\n"
               "                         Run CMD as a registered run, forward signals to it,\n"
               "                         print its report on stderr when it ends (and write it\n"
               "                         as JSON to FILE); exits with CMD's status\n"
               "  observe [--id ID] [--category C] OP MS\n"
               "                         Record one timing of MS milliseconds for operation OP\n"
               "                         (default run: this process's or its nearest registered\n"
               "                         ancestor's)\n"
               "  mark ID LABEL          Put a phase marker on a running run (e.g. warmup-done)\n"
               "  report ID [--window W] [--since-mark LABEL]\n"
               "                         Profiling report: summary, then per operation count,\n"
               "                         total, avg, min, max, p50, p90, p99 and share of time,\n"
               "                         grouped by category; default span: the whole run\n"
               "  compare BASE.json CUR.json [--threshold PCT]\n"
               "                         Compare two reports (report --json, run --report):\n"
               "                         per op p50/p90/p99 and ops/s, peak RSS, CPU and wall\n"
               "                         time; exit 1 if any got worse by more than PCT\n"
               "                         (default 10%%); needs no daemon\n"
               "  top [--interval DUR] [--iterations N]\n"
               "                         Live view of running runs: CPU, RSS, I/O and the\n"
               "                         busiest operation over the last " TOP_WINDOW ", refreshed\n"
               "                         every DUR (default 1s) until Ctrl-C or N refreshes\n"
               "                         (default 1 when stdout is not a terminal)\n"
               "\n"
               "Register options:\n"
               "  --name N               Name the run\n"
               "  --interval DUR         Sampling interval (500ms, 1s, 1m, ...)\n"
               "  --children             Include the whole process tree\n"
               "  --tag K=V              Attach a tag (repeatable)\n"
               "\n"
               "Options (before or after the command):\n"
               "  --socket PATH          mlmond's socket (default: $MLMON_SOCKET, else\n"
               "                         " DEFAULT_SOCKET ")\n"
               "  --json                 Print the API's JSON answer instead of tables\n"
               "  -h --help              Show this help\n"
               "  --version              Show the version\n"
               "\n"
               "Exit status: 0 success, 1 request refused or failed, 2 usage error;\n"
               "`run` exits with CMD's status (128+N if killed by signal N); `compare`\n"
               "exits 1 when a figure regressed, 2 when a file cannot be read.\n");
}

/* ---- options --------------------------------------------------------------- */

enum {
        ARG_SOCKET = 0x100,
        ARG_JSON,
        ARG_VERSION,
        ARG_NAME,
        ARG_INTERVAL,
        ARG_CHILDREN,
        ARG_TAG,
        ARG_ALL,
        ARG_REPORT,
        ARG_ID,
        ARG_CATEGORY,
        ARG_WINDOW,
        ARG_SINCE_MARK,
        ARG_THRESHOLD,
        ARG_ITERATIONS,
};

#define OPTIONS_GLOBAL                                                                              \
        { "socket", required_argument, NULL, ARG_SOCKET }, { "json", no_argument, NULL, ARG_JSON }, \
                { "help", no_argument, NULL, 'h' }, {                                               \
                "version", no_argument, NULL, ARG_VERSION                                           \
        }

#define OPTIONS_REGISTER                                                                                      \
        { "name", required_argument, NULL, ARG_NAME }, { "interval", required_argument, NULL, ARG_INTERVAL }, \
                { "children", no_argument, NULL, ARG_CHILDREN }, {                                            \
                "tag", required_argument, NULL, ARG_TAG                                                       \
        }

/* Everything any command may be given; which options a command accepts is
 * decided by the table it passes to parse_options(). */
struct args {
        const char *name;
        const char *interval;
        bool children;
        json_object *tags; /* owned */
        bool all;
        const char *report;
        uint64_t id; /* --id; 0: not given */
        const char *category;
        const char *window;
        const char *since_mark;
        double threshold;    /* --threshold; NAN: not given */
        uint64_t iterations; /* 0: not given */

        char **operands; /* pointers into argv, owned array */
        size_t n_operands;
        int rest; /* in order: argv index of the first operand */
};

static void args_done(struct args *a) {
        json_object_put(a->tags);
        free(a->operands);
}

static int add_tag(struct args *a, const char *kv) {
        const char *eq = strchr(kv, '=');
        if (!eq)
                return usage_error("invalid tag '%s': expected KEY=VALUE", kv);
        if (eq == kv)
                return usage_error("invalid tag '%s': the key is empty", kv);
        if (!a->tags && !(a->tags = json_object_new_object()))
                return oom();
        /* argv need not be UTF-8; the JSON we send must be */
        _cleanup_free_ char *key = utf8_sanitize(kv, (size_t)(eq - kv));
        json_object *v = json_string_sanitized(eq + 1, strlen(eq + 1));
        if (!key || !v) {
                json_object_put(v);
                return oom();
        }
        json_object_object_add(a->tags, key, v); /* a repeated key: the last wins */
        return CONTINUE;
}

/* Positive decimal id or pid. */
static int parse_id(const char *s, const char *what, uint64_t max, uint64_t *ret) {
        uint64_t v;
        if (safe_atou64(s, &v) < 0 || v == 0 || v > max)
                return usage_error("invalid %s '%s': expected a positive integer", what, s);
        *ret = v;
        return CONTINUE;
}

/* Mark labels: 1-64 bytes of UTF-8 without control characters. */
static int check_label(const char *what, const char *s) {
        size_t l = strlen(s);
        if (l == 0)
                return usage_error("%s: the label is empty", what);
        if (l > LABEL_MAX)
                return usage_error("%s: the label is longer than %d bytes", what, LABEL_MAX);
        if (!utf8_is_valid(s, l))
                return usage_error("%s: the label is not valid UTF-8", what);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
                        return usage_error("%s: the label contains control characters", what);
        return CONTINUE;
}

/* "5", "5%", "12.5 %" */
static int parse_threshold(const char *s, double *ret) {
        char buf[64];
        size_t l = strlen(s);
        if (l == 0 || l >= sizeof buf)
                return -EINVAL;
        memcpy(buf, s, l + 1);
        if (buf[l - 1] == '%')
                buf[--l] = 0;
        while (l > 0 && buf[l - 1] == ' ')
                buf[--l] = 0;
        double v;
        if (safe_atod(buf, &v) < 0 || v < 0 || buf[0] == ' ')
                return -EINVAL;
        *ret = v;
        return 0;
}

/* Parses argv[1..] with opts. in_order: stop at the first operand and leave
 * it and the rest as operands (the global level stops at the command, `run`
 * at CMD); otherwise options and operands may be mixed ("register 42 --name
 * x"). Returns CONTINUE, or an exit code (help, version, usage error). */
static int parse_options(int argc, char *argv[], const struct option *opts, bool in_order, struct args *a) {
        /* '+': stop at the first operand, '-': operands in order as 1;
         * ':': report a missing argument as ':' and print nothing */
        const char *optstring = in_order ? "+:h" : "-:h";
        int c, r;

        a->operands = calloc((size_t)argc + 1, sizeof(char *));
        if (!a->operands)
                return oom();

        opterr = 0;
        optind = 0; /* full reset: each command parses with another table */
        while ((c = getopt_long(argc, argv, optstring, opts, NULL)) >= 0) {
                switch (c) {
                case 1:
                        a->operands[a->n_operands++] = optarg;
                        break;
                case 'h':
                        help();
                        return EXIT_OK;
                case ARG_VERSION:
                        printf("mlmonctl %s\n", MLMOND_VERSION);
                        return EXIT_OK;
                case ARG_SOCKET:
                        if (!*optarg)
                                return usage_error("--socket: empty path");
                        arg_socket = optarg;
                        break;
                case ARG_JSON:
                        arg_json = true;
                        break;
                case ARG_NAME:
                        a->name = optarg;
                        break;
                case ARG_INTERVAL: {
                        usec_t u;
                        if (parse_duration(optarg, &u) < 0)
                                return usage_error("invalid interval '%s': expected a duration like 500ms, 1s, 1m",
                                                   optarg);
                        if (u == 0)
                                return usage_error("invalid interval '%s': must be more than 0", optarg);
                        a->interval = optarg;
                        break;
                }
                case ARG_CHILDREN:
                        a->children = true;
                        break;
                case ARG_TAG:
                        r = add_tag(a, optarg);
                        if (r != CONTINUE)
                                return r;
                        break;
                case ARG_ALL:
                        a->all = true;
                        break;
                case ARG_REPORT:
                        if (!*optarg)
                                return usage_error("--report: empty file name");
                        a->report = optarg;
                        break;
                case ARG_ID:
                        r = parse_id(optarg, "run ID", INT64_MAX, &a->id);
                        if (r != CONTINUE)
                                return r;
                        break;
                case ARG_CATEGORY:
                        if (!*optarg)
                                return usage_error("--category: empty category");
                        if (!utf8_is_valid(optarg, strlen(optarg)))
                                return usage_error("--category: not valid UTF-8");
                        a->category = optarg;
                        break;
                case ARG_WINDOW: {
                        usec_t u;
                        if (parse_duration(optarg, &u) < 0 || u == 0)
                                return usage_error("invalid window '%s': expected a duration like 30s, 5m, 1h", optarg);
                        a->window = optarg;
                        break;
                }
                case ARG_SINCE_MARK:
                        r = check_label("--since-mark", optarg);
                        if (r != CONTINUE)
                                return r;
                        a->since_mark = optarg;
                        break;
                case ARG_THRESHOLD:
                        if (parse_threshold(optarg, &a->threshold) < 0)
                                return usage_error("invalid threshold '%s': expected a percentage like 10 or 5%%",
                                                   optarg);
                        break;
                case ARG_ITERATIONS:
                        if (safe_atou64(optarg, &a->iterations) < 0 || a->iterations == 0)
                                return usage_error("invalid iterations '%s': expected a positive integer", optarg);
                        break;
                case ':':
                        return usage_error("option '%s' requires an argument", argv[optind - 1]);
                case '?':
                default:
                        if (optopt >= 0x100) /* a long option given "=value" it does not take */
                                return usage_error("option '%s' doesn't allow an argument", argv[optind - 1]);
                        if (optopt > 0 && optopt != '?')
                                return usage_error("invalid option -- '%c'", optopt);
                        return usage_error("unrecognized option '%s'", argv[optind - 1]);
                }
        }
        a->rest = optind;
        for (int i = optind; i < argc; i++)
                a->operands[a->n_operands++] = argv[i];
        return CONTINUE;
}

static int expect_operands(const struct args *a, const char *cmd, size_t n, const char *what) {
        if (a->n_operands < n)
                return usage_error("%s: missing %s", cmd, what);
        if (a->n_operands > n)
                return usage_error("%s: unexpected argument '%s'", cmd, a->operands[n]);
        return CONTINUE;
}

/* ---- talking to the daemon ------------------------------------------------ */

static void print_request_error(int r) {
        switch (-r) {
        case ENOENT:
        case ECONNREFUSED:
                error_line("cannot connect to %s: %s (is mlmond running?)", arg_socket, strerror(-r));
                break;
        case EACCES:
        case EPERM:
        case ENOTDIR:
        case ENOTSOCK:
        case ENAMETOOLONG:
        case EPROTOTYPE:
                error_line("cannot connect to %s: %s", arg_socket, strerror(-r));
                break;
        case ECONNRESET:
        case EPIPE:
                error_line("%s: mlmond closed the connection without answering", arg_socket);
                break;
        case ETIMEDOUT:
                error_line("%s: mlmond did not answer within %d s", arg_socket, REQUEST_TIMEOUT_MS / 1000);
                break;
        case EPROTO:
                error_line("%s: not a valid HTTP answer (is this mlmond's socket?)", arg_socket);
                break;
        case EFBIG:
                error_line("%s: answer too large", arg_socket);
                break;
        default:
                error_line("cannot talk to mlmond at %s: %s", arg_socket, strerror(-r));
        }
}

/* Prints the daemon's error for a non-2xx answer: error.message, or what
 * there is. */
static void print_http_error(const struct http_response *resp) {
        _cleanup_json_ json_object *j = json_tokener_parse(resp->body);
        const char *msg = json_get_str(json_get_object(j, "error"), "message");
        const char *code = json_get_str(json_get_object(j, "error"), "code");
        if (msg && *msg)
                error_line("%s", msg);
        else if (code && *code)
                error_line("request failed: HTTP %d (%s)", resp->status, code);
        else if (resp->body_len > 0 && resp->body_len <= 200 && !j)
                error_line("request failed: HTTP %d: %s", resp->status, resp->body);
        else
                error_line("request failed: HTTP %d", resp->status);
}

/* One API call. On success (2xx) returns 0 with the parsed answer in
 * *ret_json and, if ret_raw, the body as sent; else prints one error line
 * (unless quiet) and returns -1. */
static int api_call_full(const char *method, const char *path, json_object *body, int timeout_ms, bool quiet,
                         json_object **ret_json, char **ret_raw) {
        struct http_response resp = {};
        const char *b = body ? json_to_string(body) : NULL;
        int r;

        if (body && !b) {
                oom();
                return -1;
        }
        r = http_request_unix(arg_socket, method, path, b, timeout_ms, &resp);
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
                        error_line("%s: mlmond's answer is not valid JSON", arg_socket);
                http_response_done(&resp);
                return -1;
        }
        *ret_json = j;
        if (ret_raw)
                *ret_raw = TAKE_PTR(resp.body);
        http_response_done(&resp);
        return 0;
}

static int api_call(const char *method, const char *path, json_object *body, int timeout_ms, json_object **ret_json,
                    char **ret_raw) {
        return api_call_full(method, path, body, timeout_ms, false, ret_json, ret_raw);
}

/* --json: the body verbatim, ending in a newline. */
static void print_raw(FILE *f, const char *body) {
        size_t l = strlen(body);
        fputs(body, f);
        if (l == 0 || body[l - 1] != '\n')
                fputc('\n', f);
}

static int finish_stdout(int code) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
                if (errno != EPIPE)
                        error_line("cannot write to stdout: %s", strerror(errno));
                return code == EXIT_OK ? EXIT_FAILED : code;
        }
        return code;
}

/* ---- op figures --------------------------------------------------------------- */

/* Percent-encodes s for a query string: all but RFC 3986's unreserved
 * characters. */
static char *url_escape(const char *s) {
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

/* The span of a whole run for its latency and throughput queries: from its
 * registration to its end, or now while it runs. */
static bool run_span(json_object *run, int64_t *ret_from, int64_t *ret_until) {
        if (!json_get_int(run, "registered_ts", ret_from))
                return false;
        if (!json_get_int(run, "ended_ts", ret_until))
                *ret_until = now_realtime_ms();
        if (*ret_until < *ret_from)
                *ret_until = *ret_from;
        return true;
}

/* The op figures of run id: GET .../latency?<latency_query>&q=50,90,99,
 * then the throughput window over the span that answer covers (see
 * latency_span()), else GET .../throughput?<throughput_fallback>. Errors
 * are printed; partial: go on to the throughput after a failed latency
 * query. A part that did not come stays NULL. Returns 0 if both came. */
static int fetch_op_figures(int64_t id, const char *latency_query, const char *throughput_fallback, bool partial,
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
        if (api_call("GET", lpath, NULL, REQUEST_TIMEOUT_MS, &latency, NULL) < 0) {
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
        if (api_call("GET", tpath, NULL, REQUEST_TIMEOUT_MS, &throughput, NULL) < 0)
                r = -1;
        else {
                json_object *windows = json_get_array(throughput, "windows");
                json_object *w = windows && json_object_array_length(windows) > 0
                                         ? json_object_array_get_idx(windows, 0)
                                         : NULL;
                if (!w || !json_object_is_type(w, json_type_object)) {
                        error_line("%s: mlmond's throughput answer has no window", arg_socket);
                        r = -1;
                } else
                        *ret_window = json_object_get(w);
        }
        *ret_latency = TAKE_PTR(latency);
        return r;
}

/* The op figures of a whole run (see run_span), as much of them as came. */
static int fetch_run_op_figures(int64_t id, json_object *run, json_object **ret_latency, json_object **ret_window) {
        char lq[96], tq[96];
        int64_t from, until;
        *ret_latency = *ret_window = NULL;
        if (!run_span(run, &from, &until)) {
                error_line("%s: mlmond's run %" PRId64 " has no registration time", arg_socket, id);
                return -1;
        }
        snprintf(lq, sizeof lq, "from=%" PRId64 "&until=%" PRId64, from, until);
        snprintf(tq, sizeof tq, "window=%" PRId64 "ms&until=%" PRId64, until - from > 0 ? until - from : 1, until);
        return fetch_op_figures(id, lq, tq, true, ret_latency, ret_window);
}

/* {"run", "latency", "throughput"}: see doc/api-contract.md, "The report
 * document". NULL parts are null. */
static json_object *report_document(json_object *run, json_object *latency, json_object *window) {
        json_object *doc = json_object_new_object();
        if (!doc)
                return NULL;
        json_object_object_add(doc, "run", json_object_get(run));
        json_object_object_add(doc, "latency", json_object_get(latency));
        json_object_object_add(doc, "throughput", json_object_get(window));
        return doc;
}

static const char *json_pretty(json_object *doc) {
        return json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE);
}

static bool has_ops(json_object *latency, json_object *window) {
        json_object *l = json_get_object(latency, "ops"), *t = json_get_object(window, "ops");
        return (l && json_object_object_length(l) > 0) || (t && json_object_object_length(t) > 0);
}

/* ---- register ------------------------------------------------------------- */

static json_object *registration_body(const struct args *a, pid_t pid) {
        _cleanup_json_ json_object *o = json_object_new_object();
        if (!o)
                return NULL;
        if (json_object_object_add(o, "pid", json_object_new_int64(pid)) < 0)
                return NULL;
        if (a->name && json_object_object_add(o, "name", json_string_sanitized(a->name, strlen(a->name))) < 0)
                return NULL;
        if (a->interval && json_object_object_add(o, "interval", json_object_new_string(a->interval)) < 0)
                return NULL;
        if (a->children && json_object_object_add(o, "children", json_object_new_boolean(true)) < 0)
                return NULL;
        if (a->tags && json_object_object_add(o, "tags", json_object_get(a->tags)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* POST /v1/runs; on success the run object and its id. Prints errors. */
static int register_pid(const struct args *a, pid_t pid, json_object **ret_run, char **ret_raw, int64_t *ret_id) {
        _cleanup_json_ json_object *body = registration_body(a, pid), *run = NULL;
        _cleanup_free_ char *raw = NULL;
        int64_t id;

        if (!body) {
                oom();
                return -1;
        }
        if (api_call("POST", "/v1/runs", body, REQUEST_TIMEOUT_MS, &run, &raw) < 0)
                return -1;
        if (!json_get_int(run, "id", &id) || id <= 0) {
                error_line("%s: mlmond's answer has no run id", arg_socket);
                return -1;
        }
        *ret_id = id;
        if (ret_run)
                *ret_run = TAKE_PTR(run);
        if (ret_raw)
                *ret_raw = TAKE_PTR(raw);
        return 0;
}

static int cmd_register(int argc, char *argv[]) {
        static const struct option opts[] = { OPTIONS_GLOBAL, OPTIONS_REGISTER, {} };
        _cleanup_(args_done) struct args a = {};
        _cleanup_free_ char *raw = NULL;
        uint64_t pid = 0;
        int64_t id;
        int r;

        if ((r = parse_options(argc, argv, opts, false, &a)) != CONTINUE)
                return r;
        if ((r = expect_operands(&a, "register", 1, "PID")) != CONTINUE)
                return r;
        if ((r = parse_id(a.operands[0], "PID", INT_MAX, &pid)) != CONTINUE)
                return r;

        if (register_pid(&a, (pid_t)pid, NULL, &raw, &id) < 0)
                return EXIT_FAILED;
        if (arg_json)
                print_raw(stdout, raw);
        else
                printf("%" PRId64 "\n", id);
        return finish_stdout(EXIT_OK);
}

/* ---- unregister, list, show ------------------------------------------------- */

/* The commands that take one run ID and make one request on /v1/runs/ID. */
static int run_id_request(int argc, char *argv[], const char *command, const char *method, json_object **ret_run,
                          char **ret_raw) {
        static const struct option opts[] = { OPTIONS_GLOBAL, {} };
        _cleanup_(args_done) struct args a = {};
        char path[64];
        uint64_t id = 0;
        int r;

        if ((r = parse_options(argc, argv, opts, false, &a)) != CONTINUE)
                return r;
        if ((r = expect_operands(&a, command, 1, "run ID")) != CONTINUE)
                return r;
        if ((r = parse_id(a.operands[0], "run ID", INT64_MAX, &id)) != CONTINUE)
                return r;
        snprintf(path, sizeof path, "/v1/runs/%" PRIu64, id);
        if (api_call(method, path, NULL, REQUEST_TIMEOUT_MS, ret_run, ret_raw) < 0)
                return EXIT_FAILED;
        return CONTINUE;
}

static int cmd_unregister(int argc, char *argv[]) {
        _cleanup_json_ json_object *run = NULL;
        _cleanup_free_ char *raw = NULL;
        int r = run_id_request(argc, argv, "unregister", "DELETE", &run, &raw);
        if (r != CONTINUE)
                return r;
        if (arg_json)
                print_raw(stdout, raw);
        return finish_stdout(EXIT_OK);
}

static int terminal_width(void) {
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

static int cmd_list(int argc, char *argv[]) {
        static const struct option opts[] = { OPTIONS_GLOBAL, { "all", no_argument, NULL, ARG_ALL }, {} };
        _cleanup_(args_done) struct args a = {};
        _cleanup_json_ json_object *answer = NULL;
        _cleanup_free_ char *raw = NULL;
        int r;

        if ((r = parse_options(argc, argv, opts, false, &a)) != CONTINUE)
                return r;
        if ((r = expect_operands(&a, "list", 0, "")) != CONTINUE)
                return r;

        if (api_call("GET", a.all ? "/v1/runs?state=all" : "/v1/runs", NULL, REQUEST_TIMEOUT_MS, &answer, &raw) < 0)
                return EXIT_FAILED;
        if (arg_json) {
                print_raw(stdout, raw);
                return finish_stdout(EXIT_OK);
        }
        json_object *runs = json_get_array(answer, "runs");
        if (!runs) {
                error_line("%s: mlmond's answer has no \"runs\" list", arg_socket);
                return EXIT_FAILED;
        }
        if (json_object_array_length(runs) == 0)
                puts(a.all ? "No runs." : "No running runs (--all shows ended ones).");
        else
                print_run_table(stdout, runs, terminal_width());
        return finish_stdout(EXIT_OK);
}

static int cmd_show(int argc, char *argv[]) {
        _cleanup_json_ json_object *run = NULL;
        _cleanup_free_ char *raw = NULL;
        int r = run_id_request(argc, argv, "show", "GET", &run, &raw);
        if (r != CONTINUE)
                return r;
        if (arg_json)
                print_raw(stdout, raw);
        else
                print_run(stdout, run);
        return finish_stdout(EXIT_OK);
}

/* ---- run -------------------------------------------------------------------- */

static volatile sig_atomic_t forward_pid;

static const int forwarded_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

static void forward_signal(int sig, siginfo_t *si, void *ctx _unused_) {
        int saved = errno;
        pid_t pid = forward_pid;
        /* The terminal (Ctrl-C, Ctrl-\, hangup) signals the whole foreground
         * process group, which the job shares with us: it got this signal
         * already, and a second SIGINT could cut short its own cleanup
         * (Python's KeyboardInterrupt handlers). Only what was sent to us
         * alone (kill, systemd, a batch scheduler) is passed on. */
        if (pid > 0 && si->si_code != SI_KERNEL)
                kill(pid, sig);
        errno = saved;
}

static struct sigaction saved_actions[ELEMENTSOF(forwarded_signals)];

static void set_forwarding(bool on) {
        struct sigaction sa = {
                .sa_sigaction = forward_signal,
                .sa_flags = SA_SIGINFO | SA_RESTART,
        };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(forwarded_signals); i++) {
                int sig = forwarded_signals[i];
                if (!on) {
                        sigaction(sig, &saved_actions[i], NULL);
                        continue;
                }
                /* A signal ignored on entry (nohup, a background job of a
                 * non-interactive shell) stays ignored, as shells do: the
                 * job inherited that too. */
                if (sigaction(sig, NULL, &saved_actions[i]) == 0 && saved_actions[i].sa_handler == SIG_IGN)
                        continue;
                sigaction(sig, &sa, NULL);
        }
}

/* In the child: wait for the go from the parent (sent once the process is
 * registered, so that not a single instruction of CMD runs unobserved), then
 * become CMD. EOF without the go byte means mlmonctl died or gave up. */
_Noreturn static void child_exec(int fd, char **cmd) {
        char go;
        ssize_t k;
        do
                k = read(fd, &go, 1);
        while (k < 0 && errno == EINTR);
        if (k != 1)
                _exit(127);
        close(fd);
        execvp(cmd[0], cmd);
        int e = errno;
        fprintf(stderr, "mlmonctl: %s: %s\n", cmd[0], strerror(e));
        /* the shell's convention: 127 not found, 126 found but not runnable */
        _exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

/* Waits for the job to end without reaping it: until reap_child() the pid
 * cannot be reused, so a late forwarded signal cannot hit a stranger, and
 * the daemon can still read the exited job's final CPU time and I/O. */
static int wait_child_exited(pid_t pid) {
        siginfo_t si = {};
        while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0)
                if (errno != EINTR)
                        return -errno;
        forward_pid = 0;
        set_forwarding(false);
        return 0;
}

static int reap_child(pid_t pid, int *ret_status) {
        while (waitpid(pid, ret_status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

/* Waits until the daemon has seen the job end (state no longer "running"),
 * for up to EXIT_WAIT_USEC; returns the last run object it got (NULL if
 * none; the error is printed). */
static json_object *fetch_final_run(int64_t id) {
        char path[64];
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + EXIT_WAIT_USEC;
        json_object *run = NULL;

        snprintf(path, sizeof path, "/v1/runs/%" PRId64, id);
        for (;;) {
                json_object_put(run);
                run = NULL;
                if (api_call("GET", path, NULL, REQUEST_TIMEOUT_MS, &run, NULL) < 0)
                        break;
                const char *state = json_get_str(run, "state");
                if (!streq(state, "running") || now_usec(CLOCK_MONOTONIC) >= deadline)
                        break;
                nanosleep(&(struct timespec){ .tv_nsec = EXIT_POLL_USEC * 1000 }, NULL);
        }
        return run;
}

static int write_report(const char *file, json_object *run, json_object *latency, json_object *window, char **cmd,
                        int exit_status, int sig) {
        _cleanup_json_ json_object *doc = report_document(run, latency, window), *command = json_object_new_array();
        if (!doc || !command)
                return -ENOMEM;
        for (char **c = cmd; *c; c++)
                json_object_array_add(command, json_string_sanitized(*c, strlen(*c)));
        json_object_object_add(doc, "command", json_object_get(command));
        json_object_object_add(doc, "exit_status", json_object_new_int(exit_status));
        json_object_object_add(doc, "signal", sig > 0 ? json_object_new_int(sig) : NULL);

        const char *s = json_pretty(doc);
        if (!s)
                return -ENOMEM;
        if (!file)
                return fprintf(stderr, "%s\n", s) < 0 ? -EIO : 0;
        _cleanup_fclose_ FILE *f = fopen(file, "we");
        if (!f)
                return -errno;
        if (fprintf(f, "%s\n", s) < 0 || fflush(f) != 0)
                return errno > 0 ? -errno : -EIO;
        int r = fclose(TAKE_PTR(f));
        return r != 0 ? -errno : 0;
}

static void print_run_report(FILE *f, int64_t id, const char *name, char **cmd, int exit_status, int sig, double wall_s,
                             json_object *run, json_object *latency, json_object *window) {
        _cleanup_free_ char *pname = name ? text_printable(name) : NULL;
        _cleanup_free_ char *pcmd = text_printable(cmd[0]);
        char what[64];

        if (sig > 0)
                snprintf(what, sizeof what, "was killed by signal %d (SIG%s)", sig,
                         sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        else
                snprintf(what, sizeof what, "exited with status %d", exit_status);
        fprintf(f, "mlmonctl: run %" PRId64 "%s%s%s %s %s after %.2f s\n", id, pname ? " (" : "", pname ? pname : "",
                pname ? ")" : "", pcmd ? pcmd : cmd[0], what, wall_s);
        if (run)
                print_summary(f, json_get_object(run, "summary"));
        if (has_ops(latency, window)) {
                fputc('\n', f);
                print_op_tables(f, latency, window);
                fputc('\n', f);
                print_throughput(f, window, latency);
        }
}

static int cmd_run(int argc, char *argv[]) {
        static const struct option opts[] = {
                OPTIONS_GLOBAL,
                OPTIONS_REGISTER,
                { "report", required_argument, NULL, ARG_REPORT },
                {},
        };
        _cleanup_(args_done) struct args a = {};
        _cleanup_json_ json_object *run = NULL, *latency = NULL, *window = NULL;
        int sv[2], r, status;
        int64_t id;

        if ((r = parse_options(argc, argv, opts, true, &a)) != CONTINUE)
                return r;
        if (a.n_operands == 0)
                return usage_error("run: missing command (mlmonctl run [OPTIONS] -- CMD [ARGS...])");
        char **cmd = a.operands;

        /* Inherited SIGCHLD=SIG_IGN would have the kernel reap the job and
         * take its exit status with it. */
        signal(SIGCHLD, SIG_DFL);
        /* a socketpair rather than a pipe: send(MSG_NOSIGNAL) cannot raise
         * SIGPIPE if the child is already gone */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                error_line("socketpair: %s", strerror(errno));
                return EXIT_FAILED;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
                error_line("fork: %s", strerror(errno));
                close(sv[0]);
                close(sv[1]);
                return EXIT_FAILED;
        }
        if (pid == 0) {
                close(sv[0]);
                child_exec(sv[1], cmd);
        }
        close(sv[1]);
        _cleanup_close_ int go_fd = sv[0];

        forward_pid = pid;
        set_forwarding(true);

        if (register_pid(&a, pid, NULL, NULL, &id) < 0) {
                forward_pid = 0;
                kill(pid, SIGKILL);
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                return EXIT_FAILED;
        }

        usec_t start = now_usec(CLOCK_MONOTONIC);
        ssize_t k;
        do
                k = send(go_fd, "g", 1, MSG_NOSIGNAL);
        while (k < 0 && errno == EINTR);
        /* k < 0: the child is gone already (killed meanwhile); waitpid says how */
        go_fd = safe_close(go_fd);

        r = wait_child_exited(pid);
        double wall_s = (double)(now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_SEC;
        /* the daemon takes its last sample of the exited (unreaped) job */
        if (r == 0)
                run = fetch_final_run(id);
        if (r == 0)
                r = reap_child(pid, &status);
        if (r < 0) {
                error_line("waiting for %s: %s", cmd[0], strerror(-r));
                return EXIT_FAILED;
        }
        /* From here on the exit code is the job's: a closed stderr (`2>&1 |
         * head`) must not turn it into 141. */
        signal(SIGPIPE, SIG_IGN);
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        int exit_status = sig > 0 ? 128 + sig : WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_FAILED;

        /* the ops of the whole run; what did not come is left out (and said) */
        if (run)
                (void)fetch_run_op_figures(id, run, &latency, &window);

        if (arg_json) {
                /* stdout is the job's; the JSON report goes where the text
                 * one would */
                (void)write_report(NULL, run, latency, window, cmd, exit_status, sig);
        } else
                print_run_report(stderr, id, a.name, cmd, exit_status, sig, wall_s, run, latency, window);

        if (a.report) {
                r = write_report(a.report, run, latency, window, cmd, exit_status, sig);
                if (r < 0)
                        error_line("cannot write report to %s: %s", a.report, strerror(-r));
        }
        return exit_status;
}

/* ---- observe, mark ------------------------------------------------------------ */

static int cmd_observe(int argc, char *argv[]) {
        static const struct option opts[] = {
                OPTIONS_GLOBAL,
                { "id", required_argument, NULL, ARG_ID },
                { "category", required_argument, NULL, ARG_CATEGORY },
                {},
        };
        _cleanup_(args_done) struct args a = {};
        _cleanup_json_ json_object *answer = NULL, *body = NULL;
        _cleanup_free_ char *raw = NULL;
        char path[64];
        double ms;
        int r;

        if ((r = parse_options(argc, argv, opts, false, &a)) != CONTINUE)
                return r;
        if ((r = expect_operands(&a, "observe", 2, a.n_operands == 0 ? "OP and MS" : "MS")) != CONTINUE)
                return r;
        const char *op = a.operands[0];
        if (!*op)
                return usage_error("observe: empty operation name");
        if (!utf8_is_valid(op, strlen(op)))
                return usage_error("observe: the operation name is not valid UTF-8");
        if (safe_atod(a.operands[1], &ms) < 0 || ms < 0)
                return usage_error("invalid MS '%s': expected a non-negative number of milliseconds", a.operands[1]);

        json_object *item = json_object_new_object();
        body = json_object_new_array();
        if (!item || !body) {
                json_object_put(item);
                return oom();
        }
        json_object_array_add(body, item);
        json_object_object_add(item, "op", json_object_new_string(op));
        json_object_object_add(item, "ms", json_number_short(ms == 0 ? 0 : ms)); /* no "-0" */
        if (a.category)
                json_object_object_add(item, "category", json_object_new_string(a.category));

        if (a.id > 0)
                snprintf(path, sizeof path, "/v1/runs/%" PRIu64 "/observations", a.id);
        else
                /* the daemon finds the run from our pid (SO_PEERCRED) */
                snprintf(path, sizeof path, "/v1/observations");
        if (api_call("POST", path, body, REQUEST_TIMEOUT_MS, &answer, &raw) < 0)
                return EXIT_FAILED;
        if (arg_json)
                print_raw(stdout, raw);
        return finish_stdout(EXIT_OK);
}

static int cmd_mark(int argc, char *argv[]) {
        static const struct option opts[] = { OPTIONS_GLOBAL, {} };
        _cleanup_(args_done) struct args a = {};
        _cleanup_json_ json_object *answer = NULL, *body = NULL;
        _cleanup_free_ char *raw = NULL;
        char path[64];
        uint64_t id = 0;
        int r;

        if ((r = parse_options(argc, argv, opts, false, &a)) != CONTINUE)
                return r;
        if ((r = expect_operands(&a, "mark", 2, a.n_operands == 0 ? "run ID and LABEL" : "LABEL")) != CONTINUE)
                return r;
        if ((r = parse_id(a.operands[0], "run ID", INT64_MAX, &id)) != CONTINUE)
                return r;
        if ((r = check_label("mark", a.operands[1])) != CONTINUE)
                return r;

        body = json_object_new_object();
        if (!body)
                return oom();
        json_object_object_add(body, "label", json_object_new_string(a.operands[1]));
        snprintf(path, sizeof path, "/v1/runs/%" PRIu64 "/marks", id);
        if (api_call("POST", path, body, REQUEST_TIMEOUT_MS, &answer, &raw) < 0)
                return EXIT_FAILED;
        if (arg_json)
                print_raw(stdout, raw);
        return finish_stdout(EXIT_OK);
}

/* ---- report ------------------------------------------------------------------ */

static int cmd_report(int argc, char *argv[]) {
        static const struct option opts[] = {
                OPTIONS_GLOBAL,
                { "window", required_argument, NULL, ARG_WINDOW },
                { "since-mark", required_argument, NULL, ARG_SINCE_MARK },
                {},
        };
        _cleanup_(args_done) struct args a = {};
        _cleanup_json_ json_object *run = NULL, *latency = NULL, *window = NULL, *doc = NULL;
        _cleanup_free_ char *lq = NULL, *tq = NULL, *w = NULL, *mark = NULL;
        char path[64];
        uint64_t id = 0;
        int64_t from, until;
        int r;

        if ((r = parse_options(argc, argv, opts, false, &a)) != CONTINUE)
                return r;
        if ((r = expect_operands(&a, "report", 1, "run ID")) != CONTINUE)
                return r;
        if ((r = parse_id(a.operands[0], "run ID", INT64_MAX, &id)) != CONTINUE)
                return r;

        snprintf(path, sizeof path, "/v1/runs/%" PRIu64, id);
        if (api_call("GET", path, NULL, REQUEST_TIMEOUT_MS, &run, NULL) < 0)
                return EXIT_FAILED;
        if (a.since_mark && !(mark = url_escape(a.since_mark)))
                return oom();
        if (a.window) {
                if (!(w = url_escape(a.window)))
                        return oom();
                r = asprintf(&lq, "window=%s%s%s", w, mark ? "&since_mark=" : "", mark ? mark : "");
                if (r >= 0)
                        r = asprintf(&tq, "window=%s", w);
        } else {
                if (!run_span(run, &from, &until)) {
                        error_line("%s: mlmond's run %" PRIu64 " has no registration time", arg_socket, id);
                        return EXIT_FAILED;
                }
                r = asprintf(&lq, "from=%" PRId64 "&until=%" PRId64 "%s%s", from, until, mark ? "&since_mark=" : "",
                             mark ? mark : "");
                if (r >= 0)
                        r = asprintf(&tq, "window=%" PRId64 "ms&until=%" PRId64, until - from > 0 ? until - from : 1,
                                     until);
        }
        if (r < 0) {
                lq = tq = NULL;
                return oom();
        }
        if (fetch_op_figures((int64_t)id, lq, tq, false, &latency, &window) < 0)
                return EXIT_FAILED;

        doc = report_document(run, latency, window);
        if (!doc)
                return oom();
        if (arg_json) {
                const char *text = json_pretty(doc);
                if (!text)
                        return oom();
                puts(text);
        } else
                print_report(stdout, doc);
        return finish_stdout(EXIT_OK);
}

/* ---- compare ----------------------------------------------------------------- */

static int cmd_compare(int argc, char *argv[]) {
        static const struct option opts[] = {
                OPTIONS_GLOBAL,
                { "threshold", required_argument, NULL, ARG_THRESHOLD },
                {},
        };
        _cleanup_(args_done) struct args a = { .threshold = NAN };
        _cleanup_json_ json_object *base = NULL, *current = NULL, *result = NULL;
        int64_t regressions = 0;
        int r;

        if ((r = parse_options(argc, argv, opts, false, &a)) != CONTINUE)
                return r;
        if ((r = expect_operands(&a, "compare", 2, a.n_operands == 0 ? "BASE.json and CUR.json" : "CUR.json")) !=
            CONTINUE)
                return r;
        double threshold = isnan(a.threshold) ? DEFAULT_THRESHOLD_PCT : a.threshold;

        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *err = NULL;
                if (report_load(a.operands[i], i == 0 ? &base : &current, &err) < 0) {
                        if (!err)
                                return oom(), EXIT_USAGE;
                        error_line("%s", err);
                        return EXIT_USAGE;
                }
        }
        result = compare_reports(base, current, threshold);
        if (!result)
                return oom();
        (void)json_get_int(result, "regressions", &regressions);
        if (arg_json) {
                const char *text = json_pretty(result);
                if (!text)
                        return oom();
                puts(text);
        } else
                print_comparison(stdout, result, threshold);
        return finish_stdout(regressions > 0 ? EXIT_FAILED : EXIT_OK);
}

/* ---- top --------------------------------------------------------------------- */

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

/* One refresh: the running runs and, per run, its op figures over the last
 * TOP_WINDOW. Writes the screen (or, --json, one JSON line) to *ret_text.
 * Returns 0, or -1 (printed) when the run list could not be had. */
static int top_frame(char **ret_text) {
        _cleanup_json_ json_object *answer = NULL, *health = NULL, *out = NULL;
        _cleanup_free_ struct top_run *runs = NULL;
        char *text = NULL;
        size_t len = 0, n = 0;
        int r = -1;

        if (api_call("GET", "/v1/runs", NULL, REQUEST_TIMEOUT_MS, &answer, NULL) < 0)
                return -1;
        json_object *list = json_get_array(answer, "runs");
        if (!list) {
                error_line("%s: mlmond's answer has no \"runs\" list", arg_socket);
                return -1;
        }
        /* a missing figure is shown as "-", not an error: a run may end
         * between the list and its figures */
        (void)api_call_full("GET", "/v1/health", NULL, REQUEST_TIMEOUT_MS, true, &health, NULL);
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
                (void)api_call_full("GET", path, NULL, REQUEST_TIMEOUT_MS, true, &runs[i].latency, NULL);
                snprintf(path, sizeof path, "/v1/runs/%" PRId64 "/throughput?window=" TOP_WINDOW, id);
                if (api_call_full("GET", path, NULL, REQUEST_TIMEOUT_MS, true, &t, NULL) == 0) {
                        json_object *windows = json_get_array(t, "windows");
                        json_object *w = windows && json_object_array_length(windows) > 0
                                                 ? json_object_array_get_idx(windows, 0)
                                                 : NULL;
                        if (w && json_object_is_type(w, json_type_object))
                                runs[i].window = json_object_get(w);
                }
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
                        json_object *o = json_object_new_object();
                        if (!o)
                                break;
                        json_object_object_add(o, "run", json_object_get(runs[i].run));
                        json_object_object_add(o, "latency", json_object_get(runs[i].latency));
                        json_object_object_add(o, "throughput", json_object_get(runs[i].window));
                        json_object_array_add(arr, o);
                }
                fprintf(f, "%s\n", json_to_string(out));
        } else
                print_top(f, health, runs, n, now_realtime_ms(), terminal_width());
        if (fclose(f) != 0) {
                free(text);
                text = NULL;
        } else
                r = 0;
finish:
        for (size_t i = 0; i < n; i++) {
                json_object_put(runs[i].latency);
                json_object_put(runs[i].window);
        }
        if (r < 0)
                return oom(), -1;
        *ret_text = text;
        return 0;
}

static int cmd_top(int argc, char *argv[]) {
        static const struct option opts[] = {
                OPTIONS_GLOBAL,
                { "interval", required_argument, NULL, ARG_INTERVAL },
                { "iterations", required_argument, NULL, ARG_ITERATIONS },
                {},
        };
        static const int quit_signals[] = { SIGINT, SIGTERM };
        struct sigaction saved[ELEMENTSOF(quit_signals)];
        _cleanup_(args_done) struct args a = {};
        usec_t interval = USEC_PER_SEC;
        int r, code = EXIT_OK;

        if ((r = parse_options(argc, argv, opts, false, &a)) != CONTINUE)
                return r;
        if ((r = expect_operands(&a, "top", 0, "")) != CONTINUE)
                return r;
        if (a.interval)
                (void)parse_duration(a.interval, &interval); /* checked by parse_options */
        /* on a terminal, refresh until Ctrl-C; into a pipe or file, one
         * screen (a script that wants more says how many) */
        bool screen = isatty(STDOUT_FILENO) && !arg_json;
        uint64_t iterations = a.iterations > 0 ? a.iterations : isatty(STDOUT_FILENO) ? 0 : 1;

        /* no SA_RESTART: a signal ends the sleep at once */
        struct sigaction sa = { .sa_handler = top_signal };
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(quit_signals); i++)
                sigaction(quit_signals[i], &sa, &saved[i]);
        if (screen)
                fputs("\033[?25l", stdout); /* hide the cursor while we redraw */

        for (uint64_t i = 0; !top_quit && (iterations == 0 || i < iterations); i++) {
                usec_t start = now_usec(CLOCK_MONOTONIC);
                _cleanup_free_ char *text = NULL;
                if (top_frame(&text) < 0) {
                        code = EXIT_FAILED;
                        break;
                }
                if (top_quit)
                        break;
                if (screen)
                        fputs("\033[H\033[2J", stdout);
                else if (i > 0 && !arg_json)
                        fputc('\n', stdout);
                fputs(text, stdout);
                if (fflush(stdout) != 0)
                        break; /* finish_stdout says why */
                if (iterations == 0 || i + 1 < iterations)
                        top_sleep_until(start + interval);
        }

        if (screen)
                fputs("\033[?25h", stdout); /* the cursor back, whatever ended us */
        for (size_t i = 0; i < ELEMENTSOF(quit_signals); i++)
                sigaction(quit_signals[i], &saved[i], NULL);
        return finish_stdout(code);
}

/* ---- main ------------------------------------------------------------------ */

static const struct command {
        const char *name;
        int (*fn)(int argc, char *argv[]);
} commands[] = {
        { "register", cmd_register }, { "unregister", cmd_unregister },
        { "list", cmd_list },         { "show", cmd_show },
        { "run", cmd_run },           { "observe", cmd_observe },
        { "mark", cmd_mark },         { "report", cmd_report },
        { "compare", cmd_compare },   { "top", cmd_top },
};

int main(int argc, char *argv[]) {
        static const struct option opts[] = { OPTIONS_GLOBAL, {} };
        _cleanup_(args_done) struct args a = {};
        int r;

        const char *env = getenv("MLMON_SOCKET");
        if (env && *env)
                arg_socket = env;

        if ((r = parse_options(argc, argv, opts, true, &a)) != CONTINUE)
                return r;
        if (a.n_operands == 0)
                return usage_error("missing command");

        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (streq(commands[i].name, a.operands[0]))
                        return commands[i].fn(argc - a.rest, argv + a.rest);
        return usage_error("unknown command '%s'", a.operands[0]);
}

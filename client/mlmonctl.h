/* SPDX-License-Identifier: MIT */
/* What mlmonctl's files share: the global options, the parsed arguments of a
 * verb, messages, the calls to the daemon and the verbs themselves.
 *
 * Exit codes: 0 success, 1 a refused or failed request (the daemon's message
 * on stderr), 2 a usage error. `run` exits with the job's own status. */
#pragma once

#include <getopt.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "slo.h"
#include "util.h"

#define DEFAULT_SOCKET "/run/mlmond/mlmond.sock"

/* Every request is a few local syscalls for the daemon; 10 s only trips on a
 * daemon that is wedged, not one that is busy. */
#define REQUEST_TIMEOUT_MS 10000

enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1,
        EXIT_USAGE = 2,
};

/* returned by the option parser when the command should go on */
#define CONTINUE (-1)

extern const char *arg_socket;
extern bool arg_json;

/* ---- where the daemon is (endpoint.c) ------------------------------------------ */

extern bool arg_socket_given; /* --socket on the command line */
extern const char *arg_url;
extern const char *arg_token_file;
extern const char *arg_ca_file;
/* What requests go to; set up by endpoint_setup(). */
struct http_endpoint;
extern struct http_endpoint endpoint;

/* After the options: the URL or the socket, the token, the CA file, from
 * the options or the environment. Returns CONTINUE or an exit code
 * (printed: EXIT_USAGE for a bad URL, a token file readable by others or
 * empty). */
int endpoint_setup(void);
/* The daemon in messages: the URL or the socket path. */
const char *daemon_address(void);

/* ---- options (options.c) ---------------------------------------------------- */

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
        ARG_SLO,
        ARG_THRESHOLD,
        ARG_ITERATIONS,
        ARG_URL,
        ARG_TOKEN_FILE,
        ARG_CA_FILE,
        ARG_REQUIRE_DAEMON,
        ARG_OP,
        ARG_NO_DISCOVER,
        ARG_RANKS,
        ARG_JOB,
        ARG_ATTEMPT,
        ARG_STEP_OP,
};

#define OPTIONS_GLOBAL                                                                              \
        { "socket", required_argument, NULL, ARG_SOCKET }, { "json", no_argument, NULL, ARG_JSON }, \
                { "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, ARG_VERSION },  \
                { "url", required_argument, NULL, ARG_URL },                                        \
                { "token-file", required_argument, NULL, ARG_TOKEN_FILE }, {                        \
                "ca-file", required_argument, NULL, ARG_CA_FILE                                     \
        }

/* The register options, taken by `register` and `run` */
#define OPTIONS_REGISTER                                                                                      \
        { "name", required_argument, NULL, ARG_NAME }, { "interval", required_argument, NULL, ARG_INTERVAL }, \
                { "children", no_argument, NULL, ARG_CHILDREN }, { "tag", required_argument, NULL, ARG_TAG }, \
                { "no-discover", no_argument, NULL, ARG_NO_DISCOVER }, {                                      \
                "step-op", required_argument, NULL, ARG_STEP_OP                                               \
        }

/* Everything any verb may be given; which options a verb accepts is decided
 * by the table it is parsed with. */
struct args {
        const char *name;
        const char *interval;
        bool children;
        json_object *tags; /* owned */
        bool no_discover;  /* "discover": false */
        bool ranks;        /* run: register the launcher's ranks */
        bool all;
        const char *report;
        bool require_daemon; /* run: refuse to run the job unmonitored */
        uint64_t id;         /* --id; 0: not given */
        const char *category;
        const char *window;
        const char *since_mark;
        const char *slo[SLO_MAX]; /* --slo OP=TARGET@pPCT, as given */
        size_t n_slo;
        double threshold;    /* --threshold; NAN: not given */
        uint64_t iterations; /* 0: not given */
        const char *op;      /* top --op */
        const char *job;     /* report --job */
        const char *attempt; /* report --job --attempt */
        const char *step_op; /* register, run: the op of the run's steps (goodput) */

        char **operands; /* pointers into argv, owned array, NULL-terminated */
        size_t n_operands;
        int rest; /* in order: argv index of the first operand */
};

void args_done(struct args *a);

/* Parses argv[1..] with opts. in_order: stop at the first operand and leave
 * it and the rest as operands (the global level stops at the verb, `run` at
 * CMD); otherwise options and operands may be mixed ("register 42 --name
 * x"). Returns CONTINUE, or an exit code (help, version, usage error). */
int parse_options(int argc, char *argv[], const struct option *opts, bool in_order, struct args *a);

/* Positive decimal id or pid. Returns CONTINUE or EXIT_USAGE (printed). */
int parse_id(const char *s, const char *what, uint64_t max, uint64_t *ret);
/* Mark labels: 1-64 bytes of UTF-8 without control characters. */
int check_label(const char *what, const char *s);

/* The POST /v1/runs body of the register options for pid. */
json_object *registration_body(const struct args *a, pid_t pid);

/* ---- messages (api.c) ------------------------------------------------------- */

/* "mlmonctl: <message>" and a pointer to --help; returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) _printf_(1, 2);
/* One line on stderr, prefixed; the text may come from the daemon, so it is
 * made printable and kept on one line. */
void error_line(const char *fmt, ...) _printf_(1, 2);
/* The same, with "%m" printing error (an errno, either sign). */
void error_line_errno(int error, const char *fmt, ...) _printf_(2, 3);
/* While where is not NULL, error lines are not printed: the first one is
 * kept in *where (to be freed; set it to NULL first). */
void capture_errors(char **where);
/* The transport's error (negative errno) of the last request, 0 when it
 * got an answer. */
int last_transport_error_of_request(void);
/* The API's error code of the last failed request: the daemon's, or
 * "unavailable" when it could not be reached. */
const char *last_error_code(void);
/* {"error":{"code":code,"message":message}} on stdout, as the API answers
 * errors (--json); returns exit_code (EXIT_FAILED if stdout failed). */
int print_json_error(const char *code, const char *message, int exit_code);
/* Prints "out of memory"; returns EXIT_FAILED. */
int oom(void);
void help(void);

/* ---- talking to the daemon (api.c) ------------------------------------------ */

/* One API call. On success (2xx) returns 0 with the parsed answer in
 * *ret_json and, if ret_raw, the body as sent; else prints one error line
 * (unless quiet) and returns -1. */
int api_call_full(const char *method, const char *path, json_object *body, bool quiet, json_object **ret_json,
                  char **ret_raw);
static inline int api_call(const char *method, const char *path, json_object *body, json_object **ret_json,
                           char **ret_raw) {
        return api_call_full(method, path, body, false, ret_json, ret_raw);
}

/* GET path, a list of runs (/v1/runs?...), and the pages after it: the
 * answer's "next" is followed until it is null, each page's runs added to
 * the first's. On success 0 and the whole list as one answer ("truncated"
 * false, "next" null); else as api_call_full(). */
int api_list_runs(const char *path, bool quiet, json_object **ret_json);

/* POST /v1/runs; on success the run's id and, if ret_raw, the answer as
 * sent. Prints errors. */
int register_pid(const struct args *a, pid_t pid, char **ret_raw, int64_t *ret_id);
/* The same, printing nothing: on failure *ret_error is the line it would
 * have printed (NULL when out of memory) and *ret_unreachable is the
 * transport's error (negative errno) when mlmond could not be reached at
 * all, 0 when it answered and refused. */
int register_pid_quiet(const struct args *a, pid_t pid, int64_t *ret_id, char **ret_error, int *ret_unreachable);

/* ---- run --ranks (ranks.c) ------------------------------------------------- */

struct rank_run {
        pid_t pid;
        int64_t id; /* 0: not registered */
        char rank[132];
};
struct rank_runs {
        struct rank_run *v;
        size_t n;
};
/* Until the launcher exits (left unreaped): registers each process of its
 * tree with a rank of its own, polling /proc. -errno if it cannot wait. */
int ranks_watch(const struct args *a, pid_t launcher, struct rank_runs *ranks);
/* "mlmonctl: ranks: run ID (rank R), ..." when any was registered. */
void ranks_print(FILE *f, const struct rank_runs *ranks);

/* windows[0] of a throughput answer (borrowed), or NULL. */
json_object *throughput_window(json_object *answer);

/* The op figures of run id: GET .../latency?<latency_query>&q=50,90,99,
 * then the throughput window over the span that answer covers (see
 * latency_span()), else GET .../throughput?<throughput_fallback>. Errors
 * are printed; partial: go on to the throughput after a failed latency
 * query. A part that did not come stays NULL. Returns 0 if both came. */
int fetch_op_figures(int64_t id, const char *latency_query, const char *throughput_fallback, bool partial,
                     json_object **ret_latency, json_object **ret_window);
/* The span of a whole run: from its registration to its end, or now while
 * it runs. */
bool run_span(json_object *run, int64_t *ret_from, int64_t *ret_until);
/* The op figures of a whole run (see run_span), as much of them as came. */
int fetch_run_op_figures(int64_t id, json_object *run, json_object **ret_latency, json_object **ret_window);

/* Percent-encodes s for a query string: all but the unreserved characters
 * (letters, digits, "-._~"). */
char *url_escape(const char *s);

/* ---- output (api.c) --------------------------------------------------------- */

/* {"run", "latency", "throughput"}: see doc/api-contract.md, "The report
 * document". NULL parts are null. */
json_object *report_document(json_object *run, json_object *latency, json_object *window);
const char *json_pretty(json_object *doc);
bool has_ops(json_object *latency, json_object *window);
/* Columns of the terminal on stdout; 0 when it is not one (never cut). */
int terminal_width(void);

/* --json: the body verbatim, ending in a newline. */
void print_raw(FILE *f, const char *body);
/* Flushes stdout; a write error turns success into EXIT_FAILED. */
int finish_stdout(int code);
/* --json prints raw, else nothing; then finish_stdout(EXIT_OK). */
int finish_answer(const char *raw);
/* doc as pretty JSON and a newline on stdout; -ENOMEM. */
int print_json_pretty(json_object *doc);

/* ---- verbs: argument counts are checked before they are called ---------------- */

int verb_register(struct args *a);   /* mlmonctl.c */
int verb_unregister(struct args *a); /* mlmonctl.c */
int verb_list(struct args *a);       /* mlmonctl.c */
int verb_show(struct args *a);       /* mlmonctl.c */
int verb_observe(struct args *a);    /* mlmonctl.c */
int verb_mark(struct args *a);       /* mlmonctl.c */
int verb_run(struct args *a);        /* run.c */
int verb_report(struct args *a);     /* report.c */
int verb_report_job(struct args *a); /* report-job.c */
int verb_compare(struct args *a);    /* compare.c */
int verb_top(struct args *a);        /* top.c */

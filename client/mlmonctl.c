/* SPDX-License-Identifier: MIT */
/* mlmonctl: command-line client of mlmond. Talks HTTP/JSON to the daemon's
 * unix socket (--socket); see DESIGN.md "mlmonctl" and doc/api-contract.md.
 *
 * Exit codes: 0 success, 1 a refused or failed request (the daemon's message
 * on stderr), 2 a usage error. `run` exits with the job's own status. */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "http-client.h"
#include "json-util.h"
#include "output.h"
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
               "`run` exits with CMD's status (128+N if killed by signal N).\n");
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
};

#define OPTIONS_GLOBAL                                                  \
        { "socket", required_argument, NULL, ARG_SOCKET },              \
        { "json", no_argument, NULL, ARG_JSON },                        \
        { "help", no_argument, NULL, 'h' },                             \
        { "version", no_argument, NULL, ARG_VERSION }

#define OPTIONS_REGISTER                                                \
        { "name", required_argument, NULL, ARG_NAME },                  \
        { "interval", required_argument, NULL, ARG_INTERVAL },          \
        { "children", no_argument, NULL, ARG_CHILDREN },                \
        { "tag", required_argument, NULL, ARG_TAG }

/* Everything any command may be given; which options a command accepts is
 * decided by the table it passes to parse_options(). */
struct args {
        const char *name;
        const char *interval;
        bool children;
        json_object *tags; /* owned */
        bool all;
        const char *report;

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

/* Positive decimal id or pid. */
static int parse_id(const char *s, const char *what, uint64_t max, uint64_t *ret) {
        uint64_t v;
        if (safe_atou64(s, &v) < 0 || v == 0 || v > max)
                return usage_error("invalid %s '%s': expected a positive integer", what, s);
        *ret = v;
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
 * and returns -1. */
static int api_call(const char *method, const char *path, json_object *body, int timeout_ms,
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
                print_request_error(r);
                return -1;
        }
        if (resp.status < 200 || resp.status > 299) {
                print_http_error(&resp);
                http_response_done(&resp);
                return -1;
        }
        json_object *j = json_tokener_parse(resp.body);
        if (!j) {
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

        if (api_call("GET", a.all ? "/v1/runs?state=all" : "/v1/runs", NULL, REQUEST_TIMEOUT_MS, &answer, &raw) <
            0)
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

static int write_report(const char *file, json_object *run, char **cmd, int exit_status, int sig) {
        _cleanup_json_ json_object *doc = json_object_new_object(), *command = json_object_new_array();
        if (!doc || !command)
                return -ENOMEM;
        for (char **c = cmd; *c; c++)
                json_object_array_add(command, json_string_sanitized(*c, strlen(*c)));
        json_object_object_add(doc, "run", json_object_get(run)); /* NULL: null */
        json_object_object_add(doc, "command", json_object_get(command));
        json_object_object_add(doc, "exit_status", json_object_new_int(exit_status));
        json_object_object_add(doc, "signal", sig > 0 ? json_object_new_int(sig) : NULL);

        const char *s = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                    JSON_C_TO_STRING_NOSLASHESCAPE);
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

static void print_run_report(FILE *f, int64_t id, const char *name, char **cmd, int exit_status, int sig,
                             double wall_s, json_object *run) {
        _cleanup_free_ char *pname = name ? text_printable(name) : NULL;
        _cleanup_free_ char *pcmd = text_printable(cmd[0]);
        char what[64];

        if (sig > 0)
                snprintf(what, sizeof what, "was killed by signal %d (SIG%s)", sig,
                         sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        else
                snprintf(what, sizeof what, "exited with status %d", exit_status);
        fprintf(f, "mlmonctl: run %" PRId64 "%s%s%s %s %s after %.2f s\n", id, pname ? " (" : "",
                pname ? pname : "", pname ? ")" : "", pcmd ? pcmd : cmd[0], what, wall_s);
        if (run)
                print_summary(f, json_get_object(run, "summary"));
}

static int cmd_run(int argc, char *argv[]) {
        static const struct option opts[] = {
                OPTIONS_GLOBAL,
                OPTIONS_REGISTER,
                { "report", required_argument, NULL, ARG_REPORT },
                {},
        };
        _cleanup_(args_done) struct args a = {};
        _cleanup_json_ json_object *run = NULL;
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

        if (arg_json) {
                /* stdout is the job's; the JSON report goes where the text
                 * one would */
                (void) write_report(NULL, run, cmd, exit_status, sig);
        } else
                print_run_report(stderr, id, a.name, cmd, exit_status, sig, wall_s, run);

        if (a.report) {
                r = write_report(a.report, run, cmd, exit_status, sig);
                if (r < 0)
                        error_line("cannot write report to %s: %s", a.report, strerror(-r));
        }
        return exit_status;
}

/* ---- main ------------------------------------------------------------------ */

static const struct command {
        const char *name;
        int (*fn)(int argc, char *argv[]);
} commands[] = {
        { "register", cmd_register },
        { "unregister", cmd_unregister },
        { "list", cmd_list },
        { "show", cmd_show },
        { "run", cmd_run },
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

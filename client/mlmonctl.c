/* SPDX-License-Identifier: MIT */
/* mlmonctl: command-line client of mlmond. Talks HTTP/JSON to the daemon's
 * unix socket (--socket) or, with --url, to its TCP listener over HTTP or
 * HTTPS (endpoint.c); the API is doc/api-contract.md.
 *
 * main() parses the global options, then dispatch_verb() finds the verb in
 * verbs[], parses its options, checks its argument count and calls it. The
 * small verbs are here; run, report, compare and top have a file each. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "json-util.h"
#include "mlmonctl.h"
#include "output.h"
#include "top.h"

void help(void) {
        printf("Usage: mlmonctl [OPTIONS] COMMAND [ARGS...]\n"
               "\n"
               "Control mlmond, the per-process metrics daemon.\n"
               "\n"
               "Commands:\n"
               "  register PID [--name N] [--interval DUR] [--children] [--tag K=V]... [--no-discover]\n"
               "           [--step-op OP]\n"
               "                         Start a run for a running process; prints its id\n"
               "  unregister ID          Stop sampling a run; its data stays\n"
               "  list [--all]           List running runs (--all: ended ones too)\n"
               "  show ID                One run: identity, latest sample, summary, leak verdict\n"
               "  run [REGISTER OPTIONS] [--report FILE] [--require-daemon] [--ranks] -- CMD [ARGS...]\n"
               "                         Run CMD as a registered run, forward signals to it,\n"
               "                         print its report on stderr when it ends (and write it\n"
               "                         as JSON to FILE); exits with CMD's status. Without\n"
               "                         mlmond CMD runs unmonitored (one warning), unless\n"
               "                         --require-daemon. CMD gets MLMON_RUN_ID, MLMON_SOCKET\n"
               "                         and MLMON_STATSD_SOCKET. --ranks: every process of CMD's\n"
               "                         tree with a rank variable (RANK, SLURM_PROCID, ...)\n"
               "                         becomes a run of its own, with its children; CMD gets\n"
               "                         MLMON_LAUNCHER_RUN_ID instead of MLMON_RUN_ID\n"
               "  observe [--id ID] [--category C] OP MS\n"
               "                         Record one timing of MS milliseconds for operation OP\n"
               "                         (default run: this process's or its nearest registered\n"
               "                         ancestor's)\n"
               "  mark [ID] LABEL        Put a phase marker on a running run (e.g. warmup-done;\n"
               "                         default run: $MLMON_RUN_ID, set by `run` for its job)\n"
               "  report ID [--window W | --since-mark LABEL] [--slo OP=TARGET@pPCT]...\n"
               "                         Profiling report: summary, then per operation count,\n"
               "                         total, avg, min, max, p50, p90, p99 and share of time,\n"
               "                         grouped by category; default span: the whole run;\n"
               "                         then the goodput ledger and the verdicts;\n"
               "                         exit 1 if an objective (--slo) is missed\n"
               "  report --job JOB_ID [--attempt N] [--window W | --since-mark LABEL]\n"
               "                         The ranks of job JOB_ID (of its latest attempt, or\n"
               "                         attempt N): ops of all ranks merged, each rank's\n"
               "                         p50/p99 against the others' and NVIDIA's scores, the\n"
               "                         stragglers (slower than the others, or waited for in\n"
               "                         a collective), a stall, how the ranks ended, and\n"
               "                         the job's goodput ledger\n"
               "  compare BASE.json CUR.json [--threshold PCT]\n"
               "                         Compare two reports (report --json, run --report):\n"
               "                         per op p50/p90/p99 and ops/s, peak RSS, CPU and wall\n"
               "                         time; exit 1 if any got worse by more than PCT\n"
               "                         (default 10%%); needs no daemon\n"
               "  top [--interval DUR] [--iterations N] [--op OP]\n"
               "                         Live view of running runs: CPU, RSS, I/O, the op\n"
               "                         with the most time (or OP) over the last " TOP_WINDOW "\n"
               "                         and the latest gauges, refreshed every DUR (default\n"
               "                         1s) until Ctrl-C or N refreshes (default 1 when\n"
               "                         stdout is not a terminal); waits for a restarted mlmond\n"
               "\n"
               "Register options:\n"
               "  --name N               Name the run\n"
               "  --interval DUR         Sampling interval (500ms, 1s, 1m, ...)\n"
               "  --children             Include the whole process tree\n"
               "  --tag K=V              Attach a tag (repeatable); a given tag wins over a\n"
               "                         discovered one\n"
               "  --no-discover          No job_id, rank, ... tags from the process's\n"
               "                         environment and cgroup\n"
               "  --step-op OP           The op whose timings are the run's steps (goodput;\n"
               "                         default: [goodput] step_op, \"step\")\n"
               "\n"
               "Options (before or after the command):\n"
               "  --socket PATH          mlmond's socket (default: $MLMON_SOCKET, else\n"
               "                         " DEFAULT_SOCKET ")\n"
               "  --url URL              mlmond over TCP: http://HOST[:PORT] or https://HOST[:PORT]\n"
               "                         (default port 9477; default: $MLMON_URL, else the socket)\n"
               "  --token-file FILE      Send the token in FILE as \"Authorization: Bearer\"\n"
               "                         (default: $MLMON_TOKEN_FILE); FILE must not be\n"
               "                         readable by others\n"
               "  --ca-file FILE         Trust the certificates in FILE (PEM) for https://\n"
               "                         (default: the system's trusted certificates)\n"
               "  --json                 Print the API's JSON answer instead of tables\n"
               "  -h --help              Show this help\n"
               "  --version              Show the version\n"
               "\n"
               "Exit status: 0 success, 1 request refused or failed, 2 usage error;\n"
               "`run` exits with CMD's status (128+N if killed by signal N; 1 if CMD\n"
               "exited 0 but the --report FILE could not be written); `compare`\n"
               "exits 1 when a figure regressed, 2 when a file cannot be read.\n");
}

/* ---- small verbs -------------------------------------------------------------- */

int verb_register(struct args *a) {
        _cleanup_free_ char *raw = NULL;
        uint64_t pid = 0;
        int64_t id;
        int r;

        if (arg_json) {
                /* --json: the errors too, in the API's shape */
                _cleanup_free_ char *err = NULL;
                capture_errors(&err);
                r = parse_id(a->operands[0], "PID", INT_MAX, &pid);
                if (r == CONTINUE && register_pid(a, (pid_t)pid, &raw, &id) < 0)
                        r = EXIT_FAILED;
                capture_errors(NULL);
                if (r != CONTINUE)
                        return print_json_error(r == EXIT_USAGE ? "bad_request" : last_error_code(),
                                                err ? err : "out of memory", r);
                print_raw(stdout, raw);
                return finish_stdout(EXIT_OK);
        }
        if ((r = parse_id(a->operands[0], "PID", INT_MAX, &pid)) != CONTINUE)
                return r;
        if (register_pid(a, (pid_t)pid, &raw, &id) < 0)
                return EXIT_FAILED;
        printf("%" PRId64 "\n", id);
        return finish_stdout(EXIT_OK);
}

/* One request on /v1/runs/ID<suffix>. --json prints the answer as it came;
 * else print, if given, shows it. */
static int run_request(uint64_t id, const char *method, const char *suffix, json_object *body,
                       void (*print)(FILE *f, json_object *answer)) {
        _cleanup_json_ json_object *answer = NULL;
        _cleanup_free_ char *raw = NULL;
        char path[64];

        snprintf(path, sizeof path, "/v1/runs/%" PRIu64 "%s", id, suffix);
        if (api_call(method, path, body, &answer, &raw) < 0)
                return EXIT_FAILED;
        if (arg_json)
                print_raw(stdout, raw);
        else if (print)
                print(stdout, answer);
        return finish_stdout(EXIT_OK);
}

/* unregister and show */
static int run_id_verb(const struct args *a, const char *method, void (*print)(FILE *f, json_object *run)) {
        uint64_t id = 0;
        int r = parse_id(a->operands[0], "run ID", INT64_MAX, &id);
        if (r != CONTINUE)
                return r;
        return run_request(id, method, "", NULL, print);
}

int verb_unregister(struct args *a) {
        return run_id_verb(a, "DELETE", NULL);
}

int verb_show(struct args *a) {
        return run_id_verb(a, "GET", print_run);
}

int verb_list(struct args *a) {
        _cleanup_json_ json_object *answer = NULL;

        /* every run: the ended ones come a page at a time */
        if (api_list_runs(a->all ? "/v1/runs?state=all" : "/v1/runs", false, &answer) < 0)
                return EXIT_FAILED;
        if (arg_json)
                return finish_answer(json_to_string(answer));
        json_object *runs = json_get_array(answer, "runs");
        if (!runs) {
                error_line("%s: mlmond's answer has no \"runs\" list", daemon_address());
                return EXIT_FAILED;
        }
        if (json_object_array_length(runs) == 0)
                puts(a->all ? "No runs." : "No running runs (--all shows ended ones).");
        else
                print_run_table(stdout, runs, terminal_width());
        return finish_stdout(EXIT_OK);
}

int verb_observe(struct args *a) {
        _cleanup_json_ json_object *answer = NULL, *body = NULL;
        _cleanup_free_ char *raw = NULL;
        char path[64];
        double ms;

        const char *op = a->operands[0];
        if (!*op)
                return usage_error("observe: empty operation name");
        if (!utf8_is_valid(op, strlen(op)))
                return usage_error("observe: the operation name is not valid UTF-8");
        if (safe_atod(a->operands[1], &ms) < 0 || ms < 0)
                return usage_error("invalid MS '%s': expected a non-negative number of milliseconds", a->operands[1]);

        json_object *item = json_object_new_object();
        body = json_object_new_array();
        if (!item || !body) {
                json_object_put(item);
                return oom();
        }
        json_object_array_add(body, item);
        json_object_object_add(item, "op", json_object_new_string(op));
        json_object_object_add(item, "ms", json_number_short(ms == 0 ? 0 : ms)); /* no "-0" */
        if (a->category)
                json_object_object_add(item, "category", json_object_new_string(a->category));

        if (a->id > 0)
                snprintf(path, sizeof path, "/v1/runs/%" PRIu64 "/observations", a->id);
        else
                /* the daemon finds the run from our pid (SO_PEERCRED) */
                snprintf(path, sizeof path, "/v1/observations");
        if (api_call("POST", path, body, &answer, &raw) < 0)
                return EXIT_FAILED;
        return finish_answer(raw);
}

int verb_mark(struct args *a) {
        _cleanup_json_ json_object *body = NULL;
        uint64_t id = 0;
        int r;

        /* `mark LABEL` in a job of `mlmonctl run`: its own run */
        const char *given = a->n_operands == 2 ? a->operands[0] : getenv("MLMON_RUN_ID");
        const char *label = a->operands[a->n_operands - 1];
        if (!given || !*given)
                return usage_error("mark: no run ID given and $MLMON_RUN_ID is not set");
        if ((r = parse_id(given, a->n_operands == 2 ? "run ID" : "$MLMON_RUN_ID", INT64_MAX, &id)) != CONTINUE)
                return r;
        if ((r = check_label("mark", label)) != CONTINUE)
                return r;
        body = json_object_new_object();
        if (!body)
                return oom();
        json_object_object_add(body, "label", json_object_new_string(label));
        return run_request(id, "POST", "/marks", body, NULL);
}

/* ---- the verb table ------------------------------------------------------------ */

#define VERB_ANY UINT_MAX

enum {
        /* options end at the first operand: the rest is a command line */
        VERB_IN_ORDER = 1 << 0,
        /* talks to no daemon: no --url, token or CA file to set up */
        VERB_OFFLINE = 1 << 1,
};

struct verb {
        const char *name;
        unsigned min_args, max_args; /* operands after the verb */
        unsigned flags;
        int (*fn)(struct args *a);
        const struct option *options;
        /* what each operand is, for "missing ..." */
        const char *const *operands;
};

/* A verb's options: the global ones and those given. */
#define OPTIONS(...) ((const struct option[]){ OPTIONS_GLOBAL, ##__VA_ARGS__, {} })
#define REQUIRED(name, val) \
        { name, required_argument, NULL, val }
#define OPERANDS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const struct verb verbs[] = {
        { "register", 1, 1, 0, verb_register, OPTIONS(OPTIONS_REGISTER), OPERANDS("PID") },
        { "unregister", 1, 1, 0, verb_unregister, OPTIONS(), OPERANDS("run ID") },
        { "list", 0, 0, 0, verb_list, OPTIONS({ "all", no_argument, NULL, ARG_ALL }), NULL },
        { "show", 1, 1, 0, verb_show, OPTIONS(), OPERANDS("run ID") },
        { "run", 1, VERB_ANY, VERB_IN_ORDER, verb_run,
          OPTIONS(OPTIONS_REGISTER, REQUIRED("report", ARG_REPORT),
                  { "require-daemon", no_argument, NULL, ARG_REQUIRE_DAEMON },
                  { "ranks", no_argument, NULL, ARG_RANKS }),
          OPERANDS("command (mlmonctl run [OPTIONS] -- CMD [ARGS...])") },
        { "observe", 2, 2, 0, verb_observe, OPTIONS(REQUIRED("id", ARG_ID), REQUIRED("category", ARG_CATEGORY)),
          OPERANDS("OP", "MS") },
        { "mark", 1, 2, 0, verb_mark, OPTIONS(), OPERANDS("LABEL") },
        { "report", 0, 1, 0, verb_report,
          OPTIONS(REQUIRED("window", ARG_WINDOW), REQUIRED("since-mark", ARG_SINCE_MARK), REQUIRED("slo", ARG_SLO),
                  REQUIRED("job", ARG_JOB), REQUIRED("attempt", ARG_ATTEMPT)),
          OPERANDS("run ID") },
        { "compare", 2, 2, VERB_OFFLINE, verb_compare, OPTIONS(REQUIRED("threshold", ARG_THRESHOLD)),
          OPERANDS("BASE.json", "CUR.json") },
        { "top", 0, 0, 0, verb_top,
          OPTIONS(REQUIRED("interval", ARG_INTERVAL), REQUIRED("iterations", ARG_ITERATIONS), REQUIRED("op", ARG_OP)),
          NULL },
};

/* "missing OP and MS": the operands from the first one not given */
static int missing_operands(const struct verb *v, size_t given) {
        _cleanup_free_ char *what = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&what, &len);
        if (!f)
                return oom();
        for (size_t i = given; i < v->min_args; i++)
                fprintf(f, "%s%s", i > given ? " and " : "", v->operands[i]);
        if (fclose(f) != 0)
                return oom();
        return usage_error("%s: missing %s", v->name, what);
}

/* argv[0] is the verb. Parses its options, checks how many operands it got
 * and calls it. */
static int dispatch_verb(int argc, char *argv[]) {
        _cleanup_(args_done) struct args a = { .threshold = NAN };
        const struct verb *v = NULL;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, argv[0]))
                        v = &verbs[i];
        if (!v)
                return usage_error("unknown command '%s'", argv[0]);

        if ((r = parse_options(argc, argv, v->options, v->flags & VERB_IN_ORDER, &a)) != CONTINUE)
                return r;
        if (a.n_operands < v->min_args)
                return missing_operands(v, a.n_operands);
        if (v->max_args != VERB_ANY && a.n_operands > v->max_args)
                return usage_error("%s: unexpected argument '%s'", v->name, a.operands[v->max_args]);
        if (!(v->flags & VERB_OFFLINE) && (r = endpoint_setup()) != CONTINUE)
                return r;
        return v->fn(&a);
}

int main(int argc, char *argv[]) {
        _cleanup_(args_done) struct args a = {};
        int r;

        const char *env = getenv("MLMON_SOCKET");
        if (env && *env)
                arg_socket = env;

        if ((r = parse_options(argc, argv, OPTIONS(), true, &a)) != CONTINUE)
                return r;
        if (a.n_operands == 0)
                return usage_error("missing command");
        return dispatch_verb(argc - a.rest, argv + a.rest);
}

/* SPDX-License-Identifier: MIT */
/* mlmonctl's option parsing: one getopt_long() loop for every verb's table,
 * the checks of each option's value, and the registration body the register
 * options make (shared by `register` and `run`). */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "json-util.h"
#include "mlmonctl.h"
#include "version.h"

/* mark labels, as the API takes them */
#define LABEL_MAX 64

void args_done(struct args *a) {
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

int parse_id(const char *s, const char *what, uint64_t max, uint64_t *ret) {
        uint64_t v;
        if (safe_atou64(s, &v) < 0 || v == 0 || v > max)
                return usage_error("invalid %s '%s': expected a positive integer", what, s);
        *ret = v;
        return CONTINUE;
}

int check_label(const char *what, const char *s) {
        size_t l = strlen(s);
        if (l == 0)
                return usage_error("%s: the label is empty", what);
        if (l > LABEL_MAX)
                return usage_error("%s: the label is longer than %d bytes", what, LABEL_MAX);
        if (!utf8_is_valid(s, l))
                return usage_error("%s: the label is not valid UTF-8", what);
        if (!utf8_is_plain_text(s, l))
                return usage_error("%s: the label contains control or bidirectional formatting characters", what);
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

/* Where the daemon is: --socket, --url, --token-file, --ca-file. Checked
 * further once all options are in (endpoint_setup()). */
static int set_address_option(int c, const char *arg) {
        static const struct {
                int c;
                const char *name, *what;
                const char **var;
        } table[] = {
                { ARG_SOCKET, "--socket", "path", &arg_socket },
                { ARG_URL, "--url", "URL", &arg_url },
                { ARG_TOKEN_FILE, "--token-file", "file name", &arg_token_file },
                { ARG_CA_FILE, "--ca-file", "file name", &arg_ca_file },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                if (table[i].c != c)
                        continue;
                if (!*arg)
                        return usage_error("%s: empty %s", table[i].name, table[i].what);
                *table[i].var = arg;
                if (c == ARG_SOCKET)
                        arg_socket_given = true;
                return CONTINUE;
        }
        return usage_error("unknown option");
}

/* --category, --op: a non-empty UTF-8 name */
static int check_word(const char *option, const char *what, const char *s) {
        if (!*s)
                return usage_error("%s: empty %s", option, what);
        if (!utf8_is_valid(s, strlen(s)))
                return usage_error("%s: not valid UTF-8", option);
        return CONTINUE;
}

/* "-5", "-0.5": an operand, never an option */
static bool is_negative_number(const char *s) {
        double d;
        return s[0] == '-' && s[1] >= '0' && s[1] <= '9' && safe_atod(s, &d) >= 0;
}

/* What getopt is given: argv, but where options and operands mix, a
 * negative number is shown without its '-' (and put back as it comes out):
 * `register -5` is a bad PID, not a bad option. */
static char **argv_view(int argc, char *argv[], bool in_order) {
        char **view = calloc((size_t)argc + 1, sizeof(char *));
        if (!view)
                return NULL;
        for (int i = 0; i < argc; i++)
                view[i] = !in_order && i > 0 && is_negative_number(argv[i]) ? argv[i] + 1 : argv[i];
        return view;
}

/* --slo OP=TARGET@pPCT, checked here, passed on as given. */
static int add_slo(struct args *a, const char *text) {
        struct slo o;
        char err[128];
        if (slo_parse(text, '=', &o, err, sizeof err) < 0)
                return usage_error("invalid objective '%s': %s", text, err);
        if (a->n_slo == SLO_MAX)
                return usage_error("--slo: at most %d objectives", SLO_MAX);
        a->slo[a->n_slo++] = text;
        return CONTINUE;
}

/* What getopt returned ':' (a missing argument) or '?' for, in words. */
static int getopt_error(int c, const char *arg) {
        if (c == ':')
                return usage_error("option '%s' requires an argument", arg);
        if (optopt >= 0x100) /* a long option given "=value" it does not take */
                return usage_error("option '%s' doesn't allow an argument", arg);
        if (optopt > 0 && optopt != '?')
                return usage_error("invalid option -- '%c'", optopt);
        return usage_error("unrecognized option '%s'", arg);
}

/* The field of a flag option (one without an argument). */
static bool *flag_option(struct args *a, int c) {
        switch (c) {
        case ARG_CHILDREN:
                return &a->children;
        case ARG_NO_DISCOVER:
                return &a->no_discover;
        case ARG_RANKS:
                return &a->ranks;
        case ARG_ALL:
                return &a->all;
        default:
                return &a->require_daemon;
        }
}

int parse_options(int argc, char *argv[], const struct option *opts, bool in_order, struct args *a) {
        /* '+': stop at the first operand, '-': operands in order as 1;
         * ':': report a missing argument as ':' and print nothing */
        const char *optstring = in_order ? "+:h" : "-:h";
        int c, r;

        a->operands = calloc((size_t)argc + 1, sizeof(char *));
        _cleanup_free_ char **view = argv_view(argc, argv, in_order);
        if (!a->operands || !view)
                return oom();

        opterr = 0;
        optind = 0; /* full reset: each command parses with another table */
        while ((c = getopt_long(argc, view, optstring, opts, NULL)) >= 0) {
                if (optarg && optind > 0 && optarg == view[optind - 1] && view[optind - 1] != argv[optind - 1])
                        optarg = argv[optind - 1];
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
                case ARG_URL:
                case ARG_TOKEN_FILE:
                case ARG_CA_FILE:
                        r = set_address_option(c, optarg);
                        if (r != CONTINUE)
                                return r;
                        break;
                case ARG_JSON:
                        arg_json = true;
                        break;
                case ARG_NAME:
                case ARG_JOB:     /* report --job: checked by verb_report_job() */
                case ARG_ATTEMPT: /* ... and its --attempt */
                        *(c == ARG_NAME ? &a->name : c == ARG_JOB ? &a->job : &a->attempt) = optarg;
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
                case ARG_NO_DISCOVER:
                case ARG_RANKS:
                case ARG_ALL:
                case ARG_REQUIRE_DAEMON:
                        *flag_option(a, c) = true;
                        break;
                case ARG_TAG:
                case ARG_SLO:
                        r = c == ARG_TAG ? add_tag(a, optarg) : add_slo(a, optarg);
                        if (r != CONTINUE)
                                return r;
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
                case ARG_OP:
                case ARG_STEP_OP:
                        r = c == ARG_OP        ? check_word("--op", "operation name", optarg)
                            : c == ARG_STEP_OP ? check_word("--step-op", "operation name", optarg)
                                               : check_word("--category", "category", optarg);
                        if (r != CONTINUE)
                                return r;
                        *(c == ARG_OP ? &a->op : c == ARG_STEP_OP ? &a->step_op : &a->category) = optarg;
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
                default:
                        return getopt_error(c, argv[optind - 1]);
                }
        }
        a->rest = optind;
        for (int i = optind; i < argc; i++)
                a->operands[a->n_operands++] = argv[i];
        return CONTINUE;
}

json_object *registration_body(const struct args *a, pid_t pid) {
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
        if (a->no_discover && json_object_object_add(o, "discover", json_object_new_boolean(false)) < 0)
                return NULL;
        if (a->step_op && json_object_object_add(o, "step_op", json_object_new_string(a->step_op)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

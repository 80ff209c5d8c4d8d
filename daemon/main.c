/* SPDX-License-Identifier: MIT */
/* mlmond: parse the command line, load the configuration, run the manager. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "json-util.h"
#include "manager.h"
#include "version.h"

static void help(void) {
        printf("Usage: mlmond [OPTIONS]\n"
               "Per-process metrics daemon: samples registered processes into SQLite and serves them over HTTP.\n\n"
               "  -c, --config PATH        INI config (default " MLMOND_SYSCONFDIR "/mlmond/mlmond.conf;\n"
               "                           a missing default file means all defaults)\n"
               "      --db PATH            SQLite database (default /var/lib/mlmond/mlmond.db)\n"
               "      --listen HOST:PORT   HTTP API over TCP (read-only without [http] token_file),\n"
               "                           or 'none' (default 127.0.0.1:9477)\n"
               "      --socket PATH        read-write HTTP API on a unix socket (default /run/mlmond/mlmond.sock)\n"
               "      --statsd-socket PATH StatsD unix datagram socket (default /run/mlmond/statsd.sock)\n"
               "      --statsd-udp HOST:PORT StatsD over UDP, or 'none' (default 127.0.0.1:8125)\n"
               "      --interval DUR       default sampling interval (default 1s, at least 100ms)\n"
               "      --proc-root DIR      where /proc files are read (default /proc)\n"
               "      --sys-root DIR       where /sys files are read (default /sys)\n"
               "      --check-config       validate the configuration and exit 0 or 1\n"
               "      --version            print the version and exit\n"
               "  -h, --help               this text\n\n"
               "Signals: SIGHUP reloads the config (a bad one is reported and the old one kept);\n"
               "SIGTERM and SIGINT commit, checkpoint and exit 0.\n");
}

static int add_override(struct manager *m, size_t *n, const char *key, const char *value) {
        char **o = GREEDY_REALLOC(m->overrides, *n + 3);
        if (!o)
                return -ENOMEM;
        o[*n] = strdup(key);
        o[*n + 1] = strdup(value);
        o[*n + 2] = NULL;
        if (!o[*n] || !o[*n + 1])
                return -ENOMEM;
        *n += 2;
        return 0;
}

int main(int argc, char **argv) {
        enum {
                ARG_DB = 0x100,
                ARG_LISTEN,
                ARG_SOCKET,
                ARG_STATSD_SOCKET,
                ARG_STATSD_UDP,
                ARG_INTERVAL,
                ARG_PROC_ROOT,
                ARG_SYS_ROOT,
                ARG_CHECK,
                ARG_VERSION
        };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "db", required_argument, NULL, ARG_DB },
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "statsd-socket", required_argument, NULL, ARG_STATSD_SOCKET },
                { "statsd-udp", required_argument, NULL, ARG_STATSD_UDP },
                { "interval", required_argument, NULL, ARG_INTERVAL },
                { "proc-root", required_argument, NULL, ARG_PROC_ROOT },
                { "sys-root", required_argument, NULL, ARG_SYS_ROOT },
                { "check-config", no_argument, NULL, ARG_CHECK },
                { "version", no_argument, NULL, ARG_VERSION },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        static const struct {
                int opt;
                const char *key;
        } override_keys[] = {
                { ARG_DB, "db" },
                { ARG_LISTEN, "listen" },
                { ARG_SOCKET, "socket" },
                { ARG_STATSD_SOCKET, "statsd_socket" },
                { ARG_STATSD_UDP, "statsd_udp" },
                { ARG_INTERVAL, "interval" },
                { ARG_PROC_ROOT, "proc_root" },
                { ARG_SYS_ROOT, "sys_root" },
        };
        struct manager *m = NULL;
        bool check = false;
        size_t n_over = 0;
        int c, r;

        log_setup("mlmond");
        json_c_set_serialization_double_format("%.10g", JSON_C_OPTION_GLOBAL);
        if (manager_new(&m) < 0) {
                fprintf(stderr, "mlmond: out of memory\n");
                return 1;
        }
        while ((c = getopt_long(argc, argv, "c:h", options, NULL)) >= 0) {
                switch (c) {
                case 'c':
                        free(m->config_path);
                        m->config_path = strdup(optarg);
                        m->config_path_explicit = true;
                        break;
                case 'h':
                        help();
                        manager_free(m);
                        return 0;
                case ARG_VERSION:
                        printf("mlmond %s\n", MLMOND_VERSION);
                        manager_free(m);
                        return 0;
                case ARG_CHECK:
                        check = true;
                        break;
                case '?':
                        fprintf(stderr, "Try 'mlmond --help'.\n");
                        manager_free(m);
                        return 2;
                default:
                        for (size_t i = 0; i < ELEMENTSOF(override_keys); i++)
                                if (override_keys[i].opt == c &&
                                    add_override(m, &n_over, override_keys[i].key, optarg) < 0) {
                                        fprintf(stderr, "mlmond: out of memory\n");
                                        manager_free(m);
                                        return 1;
                                }
                }
        }
        if (optind < argc) {
                fprintf(stderr, "mlmond: unexpected argument '%s'\nTry 'mlmond --help'.\n", argv[optind]);
                manager_free(m);
                return 2;
        }

        char err[512];
        r = manager_load_config(m, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "mlmond: configuration error: %s\n", err);
                sd_notifyf(false, "STATUS=configuration error: %s", err);
                manager_free(m);
                return 1;
        }
        if (check) {
                printf("configuration OK\n");
                manager_free(m);
                return 0;
        }

        r = manager_start(m);
        if (r >= 0)
                r = manager_run(m);
        sd_notify(false, "STOPPING=1");
        manager_free(m);
        return r < 0 ? 1 : 0;
}

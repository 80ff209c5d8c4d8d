/* SPDX-License-Identifier: MIT */
/* The config table: defaults, parsing, bounds, overrides, and that
 * etc/mlmond.conf documents every key. */
#include <string.h>

#include "config.h"
#include "tap.h"

static void test_defaults(void) {
        struct config c;
        char err[256];
        CHECK_EQ_INT(config_init_defaults(&c), 0);
        CHECK(strcmp(c.db_path, "/var/lib/mlmond/mlmond.db") == 0);
        CHECK(strcmp(c.listen, "127.0.0.1:9477") == 0);
        CHECK(strcmp(c.socket_path, "/run/mlmond/mlmond.sock") == 0);
        CHECK_EQ_INT(c.interval_usec, USEC_PER_SEC);
        CHECK_EQ_INT(c.retention_raw_usec, 7 * USEC_PER_DAY);
        CHECK_EQ_INT(c.retention_rollup_usec, 90 * USEC_PER_DAY);
        CHECK_EQ_INT(c.http_max_body_bytes, 65536);
        CHECK_EQ_INT(config_validate(&c, err, sizeof err), 0);
        config_done(&c);
}

static void test_parse(void) {
        static const struct {
                const char *text;
                int ok;
                const char *err_has;
        } cases[] = {
                { "[daemon]\ninterval = 500ms\n", 1, NULL },
                { "[daemon]\ninterval = 0s\n", 0, "interval" },
                { "[daemon]\ninterval = 50ms\n", 0, "out of range" },
                { "[daemon]\ninterval = 2h\n", 0, "out of range" },
                { "[daemon]\ninterval = fast\n", 0, "not a duration" },
                { "[daemon]\nbogus = 1\n", 0, "unknown key 'bogus'" },
                { "[nosuch]\ninterval = 1s\n", 0, "unknown key" },
                { "[storage]\nsynchronous = sometimes\n", 0, "not one of" },
                { "[storage]\nsynchronous = full\n", 1, NULL },
                { "[http]\nmax_rows = -5\n", 0, "whole number" },
                { "[http]\nconnection_limit = 1\n", 0, "out of range" },
                { "this is not ini\n", 0, "syntax" },
                { "# only comments\n; and more\n", 1, NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct config c;
                char err[256] = "";
                config_init_defaults(&c);
                int r = config_load_string(&c, cases[i].text, "test.conf", err, sizeof err);
                if ((r == 0) != cases[i].ok || (cases[i].err_has && !strstr(err, cases[i].err_has)))
                        fprintf(stderr, "case %zu: r=%d err='%s'\n", i, r, err);
                CHECK((r == 0) == cases[i].ok);
                if (cases[i].err_has)
                        CHECK(strstr(err, cases[i].err_has) != NULL);
                config_done(&c);
        }
}

static void test_validate_and_set(void) {
        struct config c;
        char err[256];
        config_init_defaults(&c);
        CHECK_EQ_INT(config_set(&c, "listen", "localhost", err, sizeof err), 0);
        CHECK(config_validate(&c, err, sizeof err) < 0);
        CHECK(strstr(err, "listen") != NULL);
        CHECK_EQ_INT(config_set(&c, "listen", "none", err, sizeof err), 0);
        CHECK_EQ_INT(config_validate(&c, err, sizeof err), 0);
        CHECK_EQ_INT(config_set(&c, "listen", "[::1]:9477", err, sizeof err), 0);
        CHECK_EQ_INT(config_validate(&c, err, sizeof err), 0);
        CHECK_EQ_INT(config_set(&c, "storage.retention_raw", "100d", err, sizeof err), 0);
        CHECK(config_validate(&c, err, sizeof err) < 0); /* rollups must outlive raw samples */
        CHECK(config_set(&c, "nope", "1", err, sizeof err) < 0);
        CHECK_EQ_INT(config_set(&c, "storage.retention_raw", "7d", err, sizeof err), 0);
        static const char *const bad_windows[] = {
                "5m,30s", "30s,30s", "5s", "", "1x", ",", "1m,2m,3m,4m,5m,6m,7m,8m,9m", "2d"
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_windows); i++) {
                CHECK_EQ_INT(config_set(&c, "leak.windows", bad_windows[i], err, sizeof err), 0);
                CHECK(config_validate(&c, err, sizeof err) < 0);
                CHECK(strstr(err, "leak windows") != NULL);
        }
        CHECK_EQ_INT(config_set(&c, "leak.windows", "20s,10m", err, sizeof err), 0);
        CHECK_EQ_INT(config_validate(&c, err, sizeof err), 0);
        CHECK(config_set(&c, "leak.min_z", "0.5", err, sizeof err) < 0);
        CHECK(config_set(&c, "leak.min_growth_pct", "nan", err, sizeof err) < 0);
        CHECK_EQ_INT(config_set(&c, "leak.min_growth_pct", "2.5", err, sizeof err), 0);
        CHECK(c.leak_min_growth_pct == 2.5);
        struct config d;
        CHECK_EQ_INT(config_copy(&d, &c), 0);
        CHECK(d.listen != c.listen && strcmp(d.listen, c.listen) == 0);
        config_done(&d);
        config_done(&c);

        char host[64];
        uint16_t port;
        CHECK_EQ_INT(parse_host_port("127.0.0.1:9477", host, sizeof host, &port), 0);
        CHECK(strcmp(host, "127.0.0.1") == 0 && port == 9477);
        CHECK(parse_host_port("127.0.0.1:0", host, sizeof host, &port) < 0);
        CHECK(parse_host_port("127.0.0.1:65536", host, sizeof host, &port) < 0);
        CHECK(parse_host_port(":80", host, sizeof host, &port) < 0);
        CHECK(parse_host_port("[::1", host, sizeof host, &port) < 0);
}

/* etc/mlmond.conf is the documentation of every key: uncommenting every
 * "#key = value" line must parse and give exactly the defaults. */
static void test_shipped_file(const char *path) {
        FILE *f = fopen(path, "re");
        CHECK(f != NULL);
        if (!f)
                return;
        char line[512], text[16384] = "";
        unsigned keys = 0;
        while (fgets(line, sizeof line, f)) {
                const char *p = line;
                if (p[0] == '#' && p[1] != ' ' && p[1] != '#' && p[1] != '\n' && strchr(p, '=')) {
                        p++;
                        keys++;
                }
                if (p[0] == '[' || (p[0] != '#' && strchr(p, '=')))
                        strncat(text, p, sizeof text - strlen(text) - 1);
        }
        fclose(f);
        struct config c, def;
        char err[256] = "";
        config_init_defaults(&c);
        config_init_defaults(&def);
        int r = config_load_string(&c, text, path, err, sizeof err);
        if (r < 0)
                fprintf(stderr, "%s\n", err);
        CHECK_EQ_INT(r, 0);
        CHECK_EQ_INT(keys, 46);
        CHECK(strcmp(c.db_path, def.db_path) == 0 && c.interval_usec == def.interval_usec &&
              c.retention_raw_usec == def.retention_raw_usec && c.http_max_rows == def.http_max_rows);
        config_done(&c);
        config_done(&def);
}

int main(int argc, char **argv) {
        test_defaults();
        test_parse();
        test_validate_and_set();
        test_shipped_file(argc > 1 ? argv[1] : "etc/mlmond.conf");
        TEST_DONE();
}

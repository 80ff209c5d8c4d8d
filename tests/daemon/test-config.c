/* SPDX-License-Identifier: MIT */
/* The config table: defaults, parsing, bounds, overrides, and that
 * etc/mlmond.conf documents every key. */
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

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
                { "[categories]\ninfer* = model_inference\n", 1, NULL },
                { "[categories]\ninfer* = model inference\n", 0, "not a category" },
                { "[categories]\ninfer* = a:b\n", 0, "not a category" },
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

/* [categories]: file order, first match wins, copies are deep. */
static void test_categories(void) {
        struct config c, d;
        char err[256] = "";
        CHECK_EQ_INT(config_init_defaults(&c), 0);
        CHECK(config_category_for(&c, "infer", 5) == NULL);
        CHECK_EQ_INT(config_load_string(&c, "[categories]\ninfer_gpu = gpu\ninfer* = model_inference\n*.load = io\n",
                                        "test.conf", err, sizeof err),
                     0);
        CHECK_EQ_INT(c.n_categories, 3);
        CHECK(streq(config_category_for(&c, "infer_gpu", 9), "gpu"));
        CHECK(streq(config_category_for(&c, "infer_cpu", 9), "model_inference"));
        CHECK(streq(config_category_for(&c, "infer_gpu_x", 9), "gpu")); /* only op_len bytes count */
        CHECK(streq(config_category_for(&c, "weights.load", 12), "io"));
        CHECK(config_category_for(&c, "tokenize", 8) == NULL);
        CHECK_EQ_INT(config_copy(&d, &c), 0);
        CHECK(d.categories != c.categories && streq(config_category_for(&d, "infer", 5), "model_inference"));
        config_done(&d);
        config_done(&c);
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
        CHECK(c.leak.min_growth_pct == 2.5);
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

/* A "key = value" or commented "#key = value" / "# key = value" line (or
 * "#key =" for an empty value): its key and value, trimmed; false for
 * anything else (prose, sections). */
static bool conf_line(char *line, char **ret_key, char **ret_value) {
        char *p = line;
        if (*p == '#')
                p++;
        if (*p == ' ' && p != line)
                p++;
        size_t kl = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
        bool empty = streq(p + kl, " =\n") || streq(p + kl, " ="); /* "#token_file =": the default "" */
        if (kl == 0 || (!empty && strncmp(p + kl, " = ", 3) != 0))
                return false;
        p[kl] = 0;
        char *v = empty ? p + kl : p + kl + 3;
        v[strcspn(v, "\n")] = 0;
        *ret_key = p;
        *ret_value = v;
        return true;
}

/* etc/mlmond.conf documents every key: each key of the table appears in its
 * section with the table's default, and each key there is in the table. */
static void test_shipped_file(const char *path) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        CHECK(f != NULL);
        if (!f)
                return;
        struct config def;
        CHECK_EQ_INT(config_init_defaults(&def), 0);
        bool seen[128] = {};
        char line[512], section[32] = "";
        while (fgets(line, sizeof line, f)) {
                char *key, *value;
                if (line[0] == '[') {
                        snprintf(section, sizeof section, "%.*s", (int)strcspn(line + 1, "]"), line + 1);
                        continue;
                }
                /* [categories] is a table of patterns, not keys */
                if (streq(section, "categories") || !conf_line(line, &key, &value))
                        continue;
                int r = config_key_equals(&def, section, key, value);
                if (r != 1)
                        fprintf(stderr, "%s: [%s] %s = %s: %s\n", path, section, key, value,
                                r == 0 ? "not the default" : "not a key of the table");
                CHECK_EQ_INT(r, 1);
                const char *s, *n;
                for (size_t i = 0; config_key_at(i, &s, &n) && i < ELEMENTSOF(seen); i++)
                        if (streq(s, section) && streq(n, key))
                                seen[i] = true;
        }
        const char *s, *n;
        size_t i;
        for (i = 0; config_key_at(i, &s, &n) && i < ELEMENTSOF(seen); i++) {
                if (!seen[i])
                        fprintf(stderr, "%s: [%s] %s is not documented\n", path, s, n);
                CHECK(seen[i]);
        }
        CHECK_EQ_INT(i, 80);
        config_done(&def);
}

/* The [leak] keys land in the detector's parameters, in its units. */
static void test_leak_params(void) {
        struct config c;
        struct leak_params p, d;
        char err[256];
        leak_params_default(&d);
        CHECK_EQ_INT(config_init_defaults(&c), 0);
        CHECK_EQ_INT(config_leak_params(&c, &p), 0);
        CHECK(memcmp(&p, &d, sizeof p) == 0);
        CHECK(strcmp(c.leak_windows, "30s,1m,2m,5m,15m") == 0);
        CHECK_EQ_INT(config_load_string(&c,
                                        "[leak]\ngrace = 2m\nmin_growth_mib = 32\ndrop_min_mib = 1.5\n"
                                        "min_floors = 10\nwindows = 20s,10m\n",
                                        "test.conf", err, sizeof err),
                     0);
        CHECK_EQ_INT(config_leak_params(&c, &p), 0);
        CHECK(p.grace_s == 120 && p.min_growth_bytes == 32 * 1048576.0 && p.drop_min_bytes == 1.5 * 1048576.0);
        CHECK(p.min_floors == 10 && p.n_windows == 2 && p.windows_s[0] == 20 && p.windows_s[1] == 600);
        CHECK(config_set(&c, "leak.min_growth_mib", "1.5", err, sizeof err) < 0);
        CHECK(config_set(&c, "leak.min_floors", "13", err, sizeof err) < 0);
        config_done(&c);
}

/* TLS takes both files; a token needs TLS beyond loopback. */
static void test_validate_tls_token(void) {
        struct config c;
        char err[256];
        config_init_defaults(&c);
        CHECK_EQ_INT(config_set(&c, "http.tls_cert", "/etc/cert.pem", err, sizeof err), 0);
        CHECK(config_validate(&c, err, sizeof err) < 0 && strstr(err, "both or neither"));
        CHECK_EQ_INT(config_set(&c, "http.tls_key", "/etc/key.pem", err, sizeof err), 0);
        CHECK_EQ_INT(config_validate(&c, err, sizeof err), 0);
        CHECK_EQ_INT(config_set(&c, "http.token_file", "/etc/token", err, sizeof err), 0);
        CHECK_EQ_INT(config_set(&c, "listen", "0.0.0.0:9477", err, sizeof err), 0);
        CHECK_EQ_INT(config_validate(&c, err, sizeof err), 0);
        CHECK_EQ_INT(config_set(&c, "http.tls_cert", "", err, sizeof err), 0);
        CHECK_EQ_INT(config_set(&c, "http.tls_key", "", err, sizeof err), 0);
        CHECK(config_validate(&c, err, sizeof err) < 0 && strstr(err, "clear text"));
        static const char *const loopback[] = { "127.0.0.1:9477", "[::1]:9477", "localhost:9477", "none" };
        for (size_t i = 0; i < ELEMENTSOF(loopback); i++) {
                CHECK_EQ_INT(config_set(&c, "listen", loopback[i], err, sizeof err), 0);
                CHECK_EQ_INT(config_validate(&c, err, sizeof err), 0);
        }
        config_done(&c);
}

/* A token file of content and mode: what config_load_secrets() says. */
static int load_token(const char *content, mode_t mode, char *err, size_t errlen, struct config *c) {
        char path[] = "/tmp/test-config-token-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        CHECK(write(fd, content, strlen(content)) == (ssize_t)strlen(content));
        CHECK_EQ_INT(fchmod(fd, mode), 0);
        close(fd);
        config_init_defaults(c);
        CHECK_EQ_INT(config_set(c, "http.token_file", path, err, errlen), 0);
        int r = config_load_secrets(c, err, errlen);
        unlink(path);
        return r;
}

static void test_secrets(void) {
        struct config c, d;
        char err[512];
        CHECK_EQ_INT(load_token("0123456789abcdef\n", 0600, err, sizeof err, &c), 0);
        CHECK(c.http_token && streq(c.http_token, "0123456789abcdef") && c.http_token_len == 16);
        CHECK_EQ_INT(config_copy(&d, &c), 0);
        CHECK(d.http_token != c.http_token && streq(d.http_token, c.http_token));
        config_done(&d);
        config_done(&c);
        CHECK(load_token("0123456789abcdef\n", 0640, err, sizeof err, &c) < 0);
        CHECK(strstr(err, "not readable by group or others") && !strstr(err, "0123456789abcdef"));
        CHECK(c.http_token == NULL);
        config_done(&c);
        static const char *const bad[] = { "short\n", "0123456789 abcdef\n", "0123456789abcdef\n\n", "" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                CHECK(load_token(bad[i], 0600, err, sizeof err, &c) < 0);
                CHECK(strstr(err, "16 to 4096 visible ASCII characters") != NULL);
                config_done(&c);
        }
        config_init_defaults(&c);
        CHECK_EQ_INT(config_set(&c, "http.tls_cert", "/nonexistent/cert.pem", err, sizeof err), 0);
        CHECK_EQ_INT(config_set(&c, "http.tls_key", "/nonexistent/key.pem", err, sizeof err), 0);
        CHECK(config_load_secrets(&c, err, sizeof err) < 0 && strstr(err, "tls_cert: /nonexistent/cert.pem"));
        config_done(&c);
}

int main(int argc, char **argv) {
        test_defaults();
        test_parse();
        test_categories();
        test_validate_and_set();
        test_leak_params();
        test_validate_tls_token();
        test_secrets();
        test_shipped_file(argc > 1 ? argv[1] : "etc/mlmond.conf");
        TEST_DONE();
}

/* SPDX-License-Identifier: MIT */
/* lib/: duration and number parsing, UTF-8 repair and JSON output. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json-util.h"
#include "slo.h"
#include "tap.h"
#include "util.h"

static void check_duration(const char *in, int want_r, usec_t want) {
        usec_t u = 12345;
        int r = parse_duration(in, &u);
        if (r != want_r || (r == 0 && u != want))
                fprintf(stderr, "parse_duration(\"%s\") = %d, %llu\n", in, r, (unsigned long long)u);
        CHECK_EQ_INT(r, want_r);
        if (r == 0)
                CHECK_EQ_INT(u, want);
}

static void test_durations(void) {
        static const struct {
                const char *in;
                usec_t out;
        } good[] = {
                { "500ms", 500 * USEC_PER_MSEC },
                { "10s", 10 * USEC_PER_SEC },
                { "5m", 5 * USEC_PER_MINUTE },
                { "2h", 2 * USEC_PER_HOUR },
                { "7d", 7 * USEC_PER_DAY },
                { "1.5s", 1500 * USEC_PER_MSEC },
                { "250us", 250 },
                { "0s", 0 },
        };
        static const char *const invalid[] = { "5x", "", "10", "s", "-1s", "1e3s", "1..2s", " 1s", "1s ", "nans" };
        static const char *const too_large[] = { "99999999999999999999d", "36501d" };

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                check_duration(good[i].in, 0, good[i].out);
        for (size_t i = 0; i < ELEMENTSOF(invalid); i++)
                check_duration(invalid[i], -EINVAL, 0);
        for (size_t i = 0; i < ELEMENTSOF(too_large); i++)
                check_duration(too_large[i], -ERANGE, 0);

        char buf[32];
        format_duration(500 * USEC_PER_MSEC, buf, sizeof buf);
        CHECK(strcmp(buf, "500ms") == 0);
        format_duration(90 * USEC_PER_SEC, buf, sizeof buf);
        CHECK(strcmp(buf, "90s") == 0);
        format_duration(7 * USEC_PER_DAY, buf, sizeof buf);
        CHECK(strcmp(buf, "7d") == 0);
}

static void test_numbers(void) {
        uint64_t u;
        int64_t i;
        CHECK_EQ_INT(safe_atou64("18446744073709551615", &u), 0);
        CHECK(u == UINT64_MAX);
        CHECK_EQ_INT(safe_atou64("18446744073709551616", &u), -ERANGE);
        CHECK_EQ_INT(safe_atou64("-1", &u), -EINVAL);
        CHECK_EQ_INT(safe_atou64("12a", &u), -EINVAL);
        CHECK_EQ_INT(safe_atou64("", &u), -EINVAL);
        CHECK_EQ_INT(safe_atoi64("-42", &i), 0);
        CHECK_EQ_INT(i, -42);
        CHECK_EQ_INT(safe_atoi64("9223372036854775808", &i), -ERANGE);
        unsigned x;
        CHECK_EQ_INT(safe_atou("4294967296", &x), -ERANGE);
        double d;
        CHECK_EQ_INT(safe_atod("nan", &d), -EINVAL);
        CHECK_EQ_INT(safe_atod("1e999", &d), -EINVAL);
        CHECK_EQ_INT(safe_atod("2.5", &d), 0);
        CHECK_EQ_INT(sat_sub_u64(3, 5), 0);
        CHECK_EQ_INT(sat_sub_u64(5, 3), 2);
}

static void test_utf8(void) {
        static const char bad[] = "a\xff\x01\"\\/b\xc3\x28";
        CHECK(!utf8_is_valid(bad, sizeof bad - 1));
        char *s = utf8_sanitize(bad, sizeof bad - 1);
        CHECK(s && utf8_is_valid(s, strlen(s)));
        CHECK(s && strstr(s, "\xEF\xBF\xBD") != NULL);
        free(s);
        /* overlong, surrogate, above U+10FFFF */
        CHECK(!utf8_is_valid("\xc0\xaf", 2));
        CHECK(!utf8_is_valid("\xed\xa0\x80", 3));
        CHECK(!utf8_is_valid("\xf4\x90\x80\x80", 4));
        CHECK(utf8_is_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
        /* NUL bytes (cmdline separators) become spaces */
        s = utf8_sanitize("a\0b", 3);
        CHECK(s && strcmp(s, "a b") == 0);
        free(s);
}

/* Names and labels users give: every control and bidirectional formatting
 * character is refused, each at the edge of its range, and the characters
 * just outside those ranges are not. */
static void test_plain_text(void) {
        static const char *const refused[] = {
                "a\nb",         /* C0 */
                "a\tb",         /* C0 */
                "\x01",         /* C0 */
                "\x1f",         /* C0 */
                "a\x7f",        /* DEL */
                "\xc2\x80",     /* U+0080, C1 */
                "\xc2\x9b[31m", /* U+009B, C1 (CSI) */
                "\xc2\x9f",     /* U+009F, C1 */
                "\xd8\x9c",     /* U+061C */
                "\xe2\x80\x8e", /* U+200E */
                "\xe2\x80\x8f", /* U+200F */
                "\xe2\x80\xaa", /* U+202A */
                "gpj.\xe2\x80\xae"
                "exe",          /* U+202E */
                "\xe2\x81\xa6", /* U+2066 */
                "\xe2\x81\xa9", /* U+2069 */
                "\xc3\x28",     /* not UTF-8 */
                "\xed\xa0\x80", /* a surrogate */
        };
        static const char *const kept[] = {
                "resnet",           /* ASCII */
                "a b",              /* a space */
                "h\xc3\xa9llo",     /* U+00E9 */
                "\xc2\xa0",         /* U+00A0, after C1 */
                "\xd8\x9b",         /* U+061B */
                "\xd8\x9d",         /* U+061D */
                "\xe2\x80\x8d",     /* U+200D */
                "\xe2\x80\x90",     /* U+2010 */
                "\xe2\x80\xa9",     /* U+2029 */
                "\xe2\x80\xaf",     /* U+202F */
                "\xe2\x81\xa5",     /* U+2065 */
                "\xe2\x81\xaa",     /* U+206A */
                "\xf0\x9f\x98\x80", /* an emoji */
        };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (utf8_is_plain_text(refused[i], strlen(refused[i])))
                        TAP_FAIL("refused[%zu] was taken as plain text", i);
        for (size_t i = 0; i < ELEMENTSOF(kept); i++)
                if (!utf8_is_plain_text(kept[i], strlen(kept[i])))
                        TAP_FAIL("kept[%zu] was refused", i);
        CHECK(!utf8_is_plain_text("a\0b", 3)); /* NUL */
        CHECK(utf8_is_plain_text("", 0));
}

static void test_json(void) {
        json_c_set_serialization_double_format("%.10g", JSON_C_OPTION_GLOBAL);
        _cleanup_json_ json_object *o = json_object_new_object();
        json_add_double(o, "nan", true, NAN);
        json_add_double(o, "inf", true, INFINITY);
        json_add_double(o, "unknown", false, 5);
        json_add_double(o, "pct", true, 31.2);
        json_add_u64(o, "big", true, UINT64_MAX);
        json_object_object_add(o, "name", json_string_sanitized("x\xff)", 3));
        const char *t = json_to_string(o);
        CHECK(strstr(t, "\"nan\":null"));
        CHECK(strstr(t, "\"inf\":null"));
        CHECK(strstr(t, "\"unknown\":null"));
        CHECK(strstr(t, "\"pct\":31.2"));
        CHECK(strstr(t, "\"big\":18446744073709551615"));
        CHECK(utf8_is_valid(t, strlen(t)));
        CHECK(!strstr(t, "NaN") && !strstr(t, "Infinity"));
        _cleanup_json_ json_object *e = json_error_new("bad_request", "window: '5x' is not a duration");
        CHECK(streq(json_to_string(e),
                    "{\"error\":{\"code\":\"bad_request\",\"message\":\"window: '5x' is not a duration\"}}"));
}

/* JSON written as text is byte for byte what json-c writes for the same
 * fields: numbers of every size and sign, nulls, escapes, invalid UTF-8,
 * nesting. */
static void test_json_text(void) {
        static const double doubles[] = { 0,         -0.0,          0.0004,      -0.0004,     0.0005,
                                          0.001,     1.5,           12,          -12,         99.994,
                                          99.9945,   31.2,          3629653.014, 9999999.999, 9999999.9996,
                                          1e7,       123456789.125, 1e10,        -2.5e12,     1.23456789012e15,
                                          1e300,     5e-324,        NAN,         INFINITY,    -INFINITY,
                                          0.1 + 0.2, 1.0 / 3 };
        static const char *const strings[] = { "plain",          "quote\" back\\slash /slash", "ctl\x01\x1f\b\f\n\r\t",
                                               "bad \xff utf-8", "h\xc3\xa9llo \xe2\x82\xac",  "" };
        _cleanup_json_ json_object *o = json_object_new_object();
        struct json_text t = {};
        struct json_fields fo = { .obj = o }, ft = { .text = &t };
        json_text_open(&t, '{');
        char key[32];
        for (size_t i = 0; i < ELEMENTSOF(doubles); i++) {
                snprintf(key, sizeof key, "d%zu", i);
                json_field_double(&fo, key, true, doubles[i]);
                json_field_double(&ft, key, true, doubles[i]);
                snprintf(key, sizeof key, "p%zu", i);
                json_field_precise(&fo, key, true, doubles[i]);
                json_field_precise(&ft, key, true, doubles[i]);
        }
        static const int64_t ints[] = { 0, 1, -1, INT64_MAX, INT64_MIN, 1800000000000 };
        for (size_t i = 0; i < ELEMENTSOF(ints); i++) {
                snprintf(key, sizeof key, "i%zu", i);
                json_field_i64(&fo, key, true, ints[i]);
                json_field_i64(&ft, key, true, ints[i]);
                snprintf(key, sizeof key, "u%zu", i);
                json_field_u64(&fo, key, true, (uint64_t)ints[i]);
                json_field_u64(&ft, key, true, (uint64_t)ints[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(strings); i++) {
                json_field_string(&fo, strings[i], strings[i]);
                json_field_string(&ft, strings[i], strings[i]);
        }
        json_field_u64(&fo, "unknown", false, 1);
        json_field_u64(&ft, "unknown", false, 1);
        json_field_double(&fo, "unknown_d", false, 1);
        json_field_double(&ft, "unknown_d", false, 1);
        json_field_string(&fo, "none", NULL);
        json_field_string(&ft, "none", NULL);
        json_field_json(&fo, "nested", json_error_new("a", "b"));
        json_field_json(&ft, "nested", json_error_new("a", "b"));
        json_field_json(&fo, "null", NULL);
        json_field_json(&ft, "null", NULL);
        json_object *arr = json_object_new_array();
        json_text_key(&t, "list");
        json_text_open(&t, '[');
        for (int i = 0; i < 3; i++) {
                json_object *e = json_object_new_object();
                json_add_i64(e, "k", true, -i);
                json_object_array_add(arr, e);
                json_text_open(&t, '{');
                json_field_i64(&ft, "k", true, -i);
                json_text_close(&t, '}');
        }
        json_object_array_add(arr, NULL);
        json_text_null(&t);
        json_object_array_add(arr, json_object_new_boolean(true));
        json_text_bool(&t, true);
        json_text_close(&t, ']');
        json_object_object_add(o, "list", arr);
        json_text_close(&t, '}');
        size_t len = 0;
        char *text = json_text_take(&t, &len);
        const char *want = json_to_string(o);
        CHECK(text && len == strlen(want) + 1 && text[len - 1] == '\n');
        if (text && strncmp(text, want, strlen(want)) != 0) {
                size_t k = 0;
                while (text[k] == want[k])
                        k++;
                fprintf(stderr, "json text differs at %zu:\n  %.60s\n  %.60s\n", k, text + k, want + k);
                CHECK(false);
        }
        free(text);
}

static bool int_below(size_t i, const void *ctx) {
        static const int v[] = { 1, 3, 3, 3, 7, 9 };
        return v[i] < *(const int *)ctx;
}

/* The first element not below the key, at both ends and among equals. */
static void test_lower_bound(void) {
        static const struct {
                int key;
                size_t want;
        } cases[] = { { 0, 0 }, { 1, 0 }, { 2, 1 }, { 3, 1 }, { 4, 4 }, { 9, 5 }, { 10, 6 } };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                CHECK_EQ_INT(lower_bound(6, int_below, &cases[i].key), cases[i].want);
        CHECK_EQ_INT(lower_bound(0, int_below, &cases[0].key), 0);
}

/* "%m" prints the error passed in, not whatever errno held, and errno is
 * left as it was. */
static void test_log_errno(void) {
        char tmpl[] = "/tmp/test-util-XXXXXX";
        int fd = mkstemp(tmpl);
        CHECK(fd >= 0);
        if (fd < 0)
                return;
        unlink(tmpl);
        fflush(stderr);
        int saved = dup(2);
        dup2(fd, 2);
        errno = 0;
        int r = log_error_errno(-ENOENT, "open x: %m");
        CHECK_EQ_INT(errno, 0);
        errno = EBADF;
        int r2 = log_warning_errno(EACCES, "read y: %m");
        CHECK_EQ_INT(errno, EBADF);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        CHECK_EQ_INT(r, -ENOENT);
        CHECK_EQ_INT(r2, -EACCES);
        char buf[512] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        close(fd);
        CHECK(n > 0);
        CHECK(strstr(buf, "open x: No such file or directory\n") != NULL);
        CHECK(strstr(buf, "read y: Permission denied\n") != NULL);

        char msg[64];
        errno = 0;
        CHECK_EQ_INT(errorf(msg, sizeof msg, -EPIPE, "send: %m"), -EPIPE);
        CHECK_STR(msg, "send: Broken pipe");
        CHECK_EQ_INT(errno, 0);
        CHECK_EQ_INT(errorf(msg, sizeof msg, 0, "odd"), -EIO);
}

/* GREEDY_REALLOC keeps what was there, grows geometrically and refuses a
 * size that overflows. */
static void test_greedy_realloc(void) {
        int *v = NULL;
        size_t n = 0;
        void *last = NULL;
        unsigned moves = 0;
        for (int i = 0; i < 10000; i++) {
                CHECK(GREEDY_REALLOC(v, n + 1) != NULL);
                if (v != last)
                        moves++;
                last = v;
                v[n++] = i;
        }
        bool same = true;
        for (int i = 0; i < 10000; i++)
                same = same && v[i] == i;
        CHECK(same);
        CHECK(moves < 40); /* log2(10000) ~ 13 growths, far from 10000 */
        CHECK(GREEDY_REALLOC(v, SIZE_MAX / 2) == NULL);
        CHECK_EQ_INT(v[9999], 9999); /* untouched on failure */
        free(v);
}

/* Runs fn with stderr sent to a file; returns what it wrote (malloc'ed). */
static char *capture_stderr(void (*fn)(void)) {
        char path[] = "/tmp/test-util-log-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        fflush(stderr);
        int saved = dup(STDERR_FILENO);
        dup2(fd, STDERR_FILENO);
        fn();
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        char *out = NULL;
        size_t len = 0;
        CHECK_EQ_INT(read_file_at(AT_FDCWD, path, 1 << 20, &out, &len), 0);
        close(fd);
        unlink(path);
        return out;
}

static unsigned count_lines(const char *s, const char *needle) {
        unsigned n = 0;
        for (const char *p = s; p && (p = strstr(p, needle)); p++)
                n++;
        return n;
}

static void log_flood(void) {
        for (int i = 0; i < 100; i++)
                log_warning("write failed: %d", i);
        for (int i = 0; i < 3; i++)
                log_warning("another failure %d", i); /* a format of its own */
        for (int i = 0; i < 100; i++)
                log_info("routine %d", i); /* below warning: never limited */
}

static void log_after_interval(void) {
        usleep(60 * 1000);
        log_warning("write failed: %d", 100);
}

/* Warnings are limited per format: a burst, then one line saying how many
 * were dropped once the interval is over. */
static void test_log_ratelimit(void) {
        log_set_ratelimit(50 * USEC_PER_MSEC, 5);
        _cleanup_free_ char *a = capture_stderr(log_flood);
        CHECK_EQ_INT(count_lines(a, "write failed"), 5);
        CHECK_EQ_INT(count_lines(a, "another failure"), 3);
        CHECK_EQ_INT(count_lines(a, "routine"), 100);
        _cleanup_free_ char *b = capture_stderr(log_after_interval);
        CHECK(b && strstr(b, "write failed: 100 (\u2026 95 more suppressed)"));
        log_set_ratelimit(10 * USEC_PER_SEC, 5);
}

/* ct_equal: equal only with the same length and bytes, wherever they differ. */
static void test_ct_equal(void) {
        CHECK(ct_equal("abc", 3, "abc", 3));
        CHECK(ct_equal("", 0, "", 0));
        CHECK(!ct_equal("abc", 3, "abd", 3));
        CHECK(!ct_equal("xbc", 3, "abc", 3));
        CHECK(!ct_equal("abc", 3, "abcd", 4));
        CHECK(!ct_equal("abcd", 4, "abc", 3));
        CHECK(!ct_equal("abc", 3, "", 0));
        /* a shorter one padded with NULs is still not equal */
        CHECK(!ct_equal("ab\0", 3, "ab", 2));
}

/* read_secret: one trailing newline stripped, too long and NUL refused. */
static void check_secret(const char *content, size_t clen, size_t max, int want_r, const char *want) {
        char path[] = "/tmp/test-util-secret-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        if (fd < 0)
                return;
        CHECK(write(fd, content, clen) == (ssize_t)clen);
        close(fd);
        struct stat st;
        _cleanup_close_ int rfd = open_regular(path, &st);
        CHECK(rfd >= 0);
        _cleanup_free_ char *got = NULL;
        size_t len = 0;
        int r = read_secret(rfd, max, &got, &len);
        unlink(path);
        CHECK_EQ_INT(r, want_r);
        if (r == 0 && want)
                CHECK(len == strlen(want) && streq(got, want));
}

static void test_read_secret(void) {
        check_secret("token\n", 6, 5, 0, "token");
        check_secret("token", 5, 5, 0, "token");
        check_secret("token\n\n", 7, 5, -EFBIG, NULL); /* one newline only */
        check_secret("token\n\n", 7, 16, 0, "token\n");
        check_secret("tokens", 6, 5, -EFBIG, NULL);
        check_secret("tok\0en", 6, 16, -EBADMSG, NULL);
        check_secret("", 0, 16, 0, "");
        struct stat st;
        CHECK_EQ_INT(open_regular("/", &st), -EBADFD);
        CHECK_EQ_INT(open_regular("/nonexistent/x", &st), -ENOENT);
}

static void test_slo(void) {
        static const struct {
                const char *in;
                char sep;
                int r;
                const char *op;
                double target_ms, pct;
        } cases[] = {
                { "inference:50ms@95", ':', 0, "inference", 50, 95 },
                { "a:b:0.5s@p99.9", ':', 0, "a:b", 500, 99.9 },
                { "load=750us@50", '=', 0, "load", 0.75, 50 },
                { "x=y=1ms@p1", '=', 0, "x=y", 1, 1 },
                { "inference:50@95", ':', -EINVAL },
                { "inference:50m@95", ':', -EINVAL },
                { "inference:0ms@95", ':', -EINVAL },
                { "inference:1e3ms@95", ':', -EINVAL },
                { "inference:50ms@100", ':', -EINVAL },
                { "inference:50ms@0", ':', -EINVAL },
                { "inference:50ms@1e1", ':', -EINVAL },
                { "inference:50ms@", ':', -EINVAL },
                { "inference:50ms", ':', -EINVAL },
                { ":50ms@95", ':', -EINVAL },
                { "a,b:50ms@95", ':', -EINVAL },
                { "inference=50ms@95", ':', -EINVAL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct slo o;
                char err[128] = "";
                int r = slo_parse(cases[i].in, cases[i].sep, &o, err, sizeof err);
                if (r != cases[i].r)
                        fprintf(stderr, "slo_parse(\"%s\") = %d (%s)\n", cases[i].in, r, err);
                CHECK_EQ_INT(r, cases[i].r);
                if (r == 0) {
                        CHECK(streq(o.op, cases[i].op));
                        CHECK(fabs(o.target_ms - cases[i].target_ms) < 1e-12 && o.percentile == cases[i].pct);
                } else
                        CHECK(err[0] != 0);
        }
}

int main(void) {
        test_durations();
        test_numbers();
        test_utf8();
        test_plain_text();
        test_json();
        test_json_text();
        test_lower_bound();
        test_log_errno();
        test_greedy_realloc();
        test_log_ratelimit();
        test_ct_equal();
        test_read_secret();
        test_slo();
        TEST_DONE();
}

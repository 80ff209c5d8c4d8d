/* SPDX-License-Identifier: MIT */
/* daemon/ingest/statsd.c: one table of lines and what each must parse to (or
 * -EINVAL), one of events (marks), the edge cases that need built inputs
 * (NUL bytes, long names), the decimal fast path against strtod(), and
 * datagram splitting. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/statsd.h"
#include "tap.h"
#include "util.h"

#define BAD -EINVAL

struct line_case {
        const char *in;
        int r;
        const char *name;
        enum statsd_type type;
        double value;
        double rate; /* 0 means 1 (absent) */
        bool delta;
        int64_t run;          /* 0: no run tag */
        int32_t pid;          /* 0: no pid tag */
        const char *category; /* NULL: no category tag */
};

#define OK(in_, name_, type_, value_, ...) \
        { .in = (in_), .r = 0, .name = (name_), .type = (type_), .value = (value_), __VA_ARGS__ }
/* STATSD_CATEGORY_MAX bytes */
#define CAT64 "0123456789012345678901234567890123456789012345678901234567890123"
#define NO(in_) \
        { .in = (in_), .r = BAD }

static const struct line_case line_cases[] = {
        /* the plain forms */
        OK("inference:12.7|ms", "inference", STATSD_TIMING, 12.7),
        OK("inference:12.7|h", "inference", STATSD_TIMING, 12.7),
        OK("requests:1|c", "requests", STATSD_COUNTER, 1),
        OK("requests:3|c|@0.5", "requests", STATSD_COUNTER, 3, .rate = 0.5),
        OK("requests:-2|c", "requests", STATSD_COUNTER, -2),
        OK("requests:+2|c", "requests", STATSD_COUNTER, 2),
        OK("q:5|g", "q", STATSD_GAUGE, 5),
        OK("q:+5|g", "q", STATSD_GAUGE, 5, .delta = true),
        OK("q:-5|g", "q", STATSD_GAUGE, -5, .delta = true),
        OK("q:-0|g", "q", STATSD_GAUGE, 0, .delta = true),
        OK("t:0|ms", "t", STATSD_TIMING, 0),
        OK("t:+3|ms", "t", STATSD_TIMING, 3),
        OK("t:.5|ms", "t", STATSD_TIMING, 0.5),
        OK("t:5.|ms", "t", STATSD_TIMING, 5),
        OK("t:1e-05|ms", "t", STATSD_TIMING, 1e-05),
        OK("t:1.5E3|ms", "t", STATSD_TIMING, 1500),
        OK("t:1e-999|ms", "t", STATSD_TIMING, 0), /* underflow: kept as 0 */
        /* the bounds (statsd.h), on the bound and just past it */
        OK("t:1e9|ms", "t", STATSD_TIMING, 1e9),
        OK("t:1000000000.0|h", "t", STATSD_TIMING, 1e9),
        OK("c:9007199254740992|c", "c", STATSD_COUNTER, 9007199254740992.0),
        OK("c:-9007199254740992|c", "c", STATSD_COUNTER, -9007199254740992.0),
        OK("q:9007199254740992|g", "q", STATSD_GAUGE, 9007199254740992.0),
        OK("q:-9007199254740992|g", "q", STATSD_GAUGE, -9007199254740992.0, .delta = true),
        OK("t:1|ms|@1e-6", "t", STATSD_TIMING, 1, .rate = 1e-6),
        OK("c:1|c|@0.000001", "c", STATSD_COUNTER, 1, .rate = 1e-6),
        OK("t:1|ms|@1", "t", STATSD_TIMING, 1, .rate = 1),
        OK("t:1|ms|@1e-3", "t", STATSD_TIMING, 1, .rate = 0.001),
        OK("a.b-c_d/e,f:1|c", "a.b-c_d/e,f", STATSD_COUNTER, 1),
        OK("h\xc3\xa9llo\xe2\x82\xac:1|c", "h\xc3\xa9llo\xe2\x82\xac", STATSD_COUNTER, 1),

        /* tags */
        OK("a:1|ms|#run:7", "a", STATSD_TIMING, 1, .run = 7),
        OK("a:1|ms|#pid:42,category:model_inference", "a", STATSD_TIMING, 1, .pid = 42, .category = "model_inference"),
        OK("a:1|ms|@0.5|#category:x", "a", STATSD_TIMING, 1, .rate = 0.5, .category = "x"),
        OK("a:1|ms|#category:x|@0.5", "a", STATSD_TIMING, 1, .rate = 0.5, .category = "x"),
        OK("a:1|ms|#foo,bar:baz", "a", STATSD_TIMING, 1),
        OK("a:1|ms|#run:9223372036854775807", "a", STATSD_TIMING, 1, .run = INT64_MAX),
        OK("a:1|ms|#pid:2147483647", "a", STATSD_TIMING, 1, .pid = INT32_MAX),
        OK("a:1|ms|#run:007", "a", STATSD_TIMING, 1, .run = 7),
        OK("a:1|ms|#Run:abc,env:prod,,x:", "a", STATSD_TIMING, 1), /* unknown, empty: ignored */
        OK("a:1|ms|#run", "a", STATSD_TIMING, 1),                  /* bare tag: ignored */
        OK("a:1|ms|#", "a", STATSD_TIMING, 1),                     /* no tags at all */
        OK("a:1|ms|#x:\x01\xff", "a", STATSD_TIMING, 1),           /* unknown tag, not read */
        OK("a:1|ms|#category:caf\xc3\xa9", "a", STATSD_TIMING, 1, .category = "caf\xc3\xa9"),
        OK("a:1|ms|#category:" CAT64, "a", STATSD_TIMING, 1, .category = CAT64),
        OK("a:1|ms\r", "a", STATSD_TIMING, 1),
        OK("a:1|c|#run:3\r", "a", STATSD_COUNTER, 1, .run = 3),

        /* garbage */
        NO(""),
        NO("\r"),
        NO(":"),
        NO("a:"),
        NO(":1|c"),
        NO("a"),
        NO("a:1"),
        NO("a:1|"),
        NO("a:|c"),
        NO("a:1|x"),
        NO("a:1|s"),
        NO("a:1|d"),
        NO("a:1|C"),
        NO("a:1|msx"),
        NO("a:NaN|ms"),
        NO("a:nan|ms"),
        NO("a:inf|ms"),
        NO("a:-inf|c"),
        NO("a:infinity|g"),
        NO("a:1e999|ms"),
        NO("t:12345678901234567890|ms"),
        NO("t:1000000000.0001|ms"),
        NO("t:1e10|h"),
        NO("c:1.79e308|c"),
        NO("c:-1.79e308|c"),
        NO("c:9007199254740994|c"),
        NO("c:1e16|c"),
        NO("q:1e300|g"),
        NO("q:+1.79e308|g"),
        NO("q:-1e20|g"),
        NO("t:1|ms|@1e-300"),
        NO("t:1|ms|@9.99e-7"),
        NO("c:1|c|@4.9e-324"),
        NO("a:-1e999|c"),
        NO("a:0x10|c"),
        NO("a:1,5|c"),
        NO("a:1.2.3|c"),
        NO("a:1e|c"),
        NO("a:+|c"),
        NO("a:.|c"),
        NO("a:--1|c"),
        NO("a:-1|ms"),
        NO("a:-0|ms"),
        NO("a:-1|h"),
        NO("a:1|ms|@0"),
        NO("a:1|ms|@-0.5"),
        NO("a:1|ms|@1.5"),
        NO("a:1|ms|@x"),
        NO("a:1|ms|@"),
        NO("a:1|ms|@nan"),
        NO("a:1|ms|#run:0"),
        NO("a:1|ms|#run:abc"),
        NO("a:1|ms|#run:"),
        NO("a:1|ms|#run:+5"),
        NO("a:1|ms|#run:9223372036854775808"),
        NO("a:1|ms|#pid:-3"),
        NO("a:1|ms|#pid:2147483648"),
        NO("a:1|ms|#pid:1 "),
        NO("a:1|ms|#run:1,run:1"),
        NO("a:1|ms|#category:"),
        NO("a:1|ms|#category:a:b"),
        NO("a:1|ms|#category:a@b"),
        NO("a:1|ms|#category:a#b"),
        NO("a:1|ms|#category:a b"),
        NO("a:1|ms|#category:a\tb"),
        NO("a:1|ms|#category:\xff"),
        NO("a:1|ms|#category:\xc2\x9b"),
        NO("a:1|ms|#category:x,category:y"),
        NO("a:1|ms|#category:" CAT64 "4"),
        NO("a:1|ms|@0.5|@0.5"),
        NO("a:1|ms|#run:1|#pid:2"),
        NO("a:1|ms|"),
        NO("a:1|ms||@0.5"),
        NO("a:1|c|c:abc"), /* DogStatsD container id: not understood */
        NO("a:1|c|T1700000000"),
        NO("a:1 |ms"),
        NO("a: 1|ms"),
        NO(" a:1|c"),
        NO("a :1|c"),
        NO("a b:1|c"),
        NO("a:1|ms "),
        NO("a:1|ms\r\r"),
        NO("a\r:1|c"),
        NO("\xff:1|c"),
        NO("a\xc3:1|c"),        /* truncated sequence */
        NO("\xc0\xaf:1|c"),     /* overlong */
        NO("\xed\xa0\x80:1|c"), /* surrogate */
        NO("\xc2\x85:1|c"),     /* C1 control (NEL) */
        NO("a\x01:1|c"),
        NO("a\x1b[31m:1|c"),
        NO("a\x7f:1|c"),
        NO("a|b:1|c"),
        NO("a@b:1|c"),
        NO("a#b:1|c"),
        NO("a:b:1|c"),
};

/* a literal and its length, without the terminating NUL */
#define S(lit) (lit), (sizeof(lit) - 1)

/* the run and pid tags (0: none) */
static void check_ids(const struct statsd_metric *m, int64_t run, int32_t pid) {
        CHECK_EQ_INT(m->has_run, run != 0);
        if (run)
                CHECK_EQ_INT(m->run, run);
        CHECK_EQ_INT(m->has_pid, pid != 0);
        if (pid)
                CHECK_EQ_INT(m->pid, pid);
}

struct types {
        size_t n;
        enum statsd_type type[4];
};

static void types_fn(const struct statsd_metric *m, void *userdata) {
        struct types *t = userdata;
        if (t->n < ELEMENTSOF(t->type))
                t->type[t->n] = m->type;
        t->n++;
}

struct event_case {
        const char *in;
        int r;
        const char *title;
        int64_t run; /* 0: no run tag */
        int32_t pid; /* 0: no pid tag */
};

#define EV(in_, title_, ...) \
        { .in = (in_), .r = 0, .title = (title_), __VA_ARGS__ }
#define NOEV(in_) \
        { .in = (in_), .r = BAD }
/* STATSD_TITLE_MAX bytes */
#define TITLE64 CAT64

static const struct event_case event_cases[] = {
        EV("_e{11,0}:warmup-done|", "warmup-done"),
        EV("_e{5,4}:epoch|done", "epoch"),
        EV("_e{7,0}:epoch 3|", "epoch 3"), /* a label may hold a space */
        EV("_e{13,0}:load:start|#a|", "load:start|#a"),
        EV("_e{5,0}:a,b@c|", "a,b@c"),
        EV("_e{5,0}:caf\xc3\xa9|", "caf\xc3\xa9"), /* lengths are in bytes */
        EV("_e{4,3}:mark|a|b", "mark"),            /* the text may hold '|' */
        EV("_e{4,0}:mark||#run:7", "mark", .run = 7),
        EV("_e{4,0}:mark||#pid:42,category:x,env:prod", "mark", .pid = 42),
        EV("_e{4,2}:mark|hi|d:1700000000|h:host|k:key|p:low|s:src|t:info|#run:3", "mark", .run = 3),
        EV("_e{4,0}:mark||t:info|#run:3|d:1", "mark", .run = 3),
        EV("_e{4,0}:mark|\r", "mark"),
        EV("_e{04,00}:mark|", "mark"),
        EV("_e{1,1}:5|c", "5"), /* "_e{" makes it an event, not a counter */
        EV("_e{64,0}:" TITLE64 "|", TITLE64),

        NOEV("_e{0,0}:|"),
        NOEV("_e{65,0}:" TITLE64 "4|"),
        NOEV("_e{4,0}:mark"),
        NOEV("_e{4,0}:markx|"),
        NOEV("_e{5,0}:mark|"),
        NOEV("_e{3,0}:mark|"),
        NOEV("_e{4,1}:mark|"),
        NOEV("_e{4,0}:mark|x"),
        NOEV("_e{4,0}:mark|x|"),
        NOEV("_e{4,0}:mark||"),
        NOEV("_e{4,0}:mark||x:1"),
        NOEV("_e{4,0}:mark||d"),
        NOEV("_e{4,0}:mark||d:1|d:2"),
        NOEV("_e{4,0}:mark||#run:1|#pid:2"),
        NOEV("_e{4,0}:mark||#run:0"),
        NOEV("_e{4,0}:mark||#category:a b"),
        NOEV("_e{4,0}:mark||@0.5"),
        NOEV("_e{4,0}mark|"),
        NOEV("_e{4}:mark|"),
        NOEV("_e{4,}:mark|"),
        NOEV("_e{,0}:mark|"),
        NOEV("_e{-4,0}:mark|"),
        NOEV("_e{+4,0}:mark|"),
        NOEV("_e{ 4,0}:mark|"),
        NOEV("_e{000004,0}:mark|"), /* more than 5 digits */
        NOEV("_e{4,99999}:mark|"),
        NOEV("_e{4,0}:m\x01rk|"),
        NOEV("_e{4,0}:mar\x7f|"),
        NOEV("_e{4,0}:mar\t|"),
        NOEV("_e{2,0}:\xc3\x28|"),
        NOEV("_e{"),
        NOEV("_e{4,0}:"),
};

static void test_events(void) {
        for (size_t i = 0; i < ELEMENTSOF(event_cases); i++) {
                const struct event_case *c = &event_cases[i];
                size_t len = strlen(c->in);
                char *copy = malloc(len);
                memcpy(copy, c->in, len);
                struct statsd_metric m;
                memset(&m, 0xA5, sizeof m);
                int r = statsd_parse_line(copy, len, &m);
                if (r != c->r)
                        fprintf(stderr, "statsd_parse_line(\"%s\") = %d, expected %d\n", c->in, r, c->r);
                CHECK_EQ_INT(r, c->r);
                if (r == 0 && c->r == 0) {
                        CHECK_EQ_INT(m.type, STATSD_EVENT);
                        CHECK_EQ_INT(m.name_len, strlen(c->title));
                        CHECK(m.name > copy && m.name + m.name_len <= copy + len);
                        CHECK(memcmp(m.name, c->title, m.name_len) == 0);
                        CHECK(m.value == 0 && m.sample_rate == 1.0 && !m.gauge_delta);
                        check_ids(&m, c->run, c->pid);
                }
                free(copy);
        }

        /* NUL in the title, the text or a section */
        static const char title_nul[] = "_e{4,0}:ma\0k|";
        static const char text_nul[] = "_e{4,2}:mark|a\0";
        static const char section_nul[] = "_e{4,0}:mark||h:a\0";
        struct statsd_metric m;
        CHECK_EQ_INT(statsd_parse_line(title_nul, sizeof title_nul - 1, &m), BAD);
        CHECK_EQ_INT(statsd_parse_line(text_nul, sizeof text_nul - 1, &m), BAD);
        CHECK_EQ_INT(statsd_parse_line(section_nul, sizeof section_nul - 1, &m), BAD);

        /* in a datagram, in order with the timings around it */
        struct types t = {};
        CHECK_EQ_INT(statsd_parse_datagram(S("a:1|ms\n_e{4,0}:done|\nb:2|ms"), types_fn, &t, NULL), 3);
        CHECK_EQ_INT(t.n, 3);
        CHECK(t.type[0] == STATSD_TIMING && t.type[1] == STATSD_EVENT && t.type[2] == STATSD_TIMING);
}

static bool same_double(double a, double b) {
        return a == b || (a != 0 && fabs(a - b) <= fabs(a) * 1e-15);
}

static void check_case(const char *in, size_t len, const struct line_case *c) {
        struct statsd_metric m;
        memset(&m, 0xA5, sizeof m);
        int r = statsd_parse_line(in, len, &m);
        if (r != c->r)
                fprintf(stderr, "statsd_parse_line(\"%s\") = %d, expected %d\n", in, r, c->r);
        CHECK_EQ_INT(r, c->r);
        if (r < 0 || c->r < 0)
                return;
        CHECK(m.name == in);
        CHECK_EQ_INT(m.name_len, strlen(c->name));
        CHECK(memcmp(m.name, c->name, m.name_len) == 0);
        CHECK_EQ_INT(m.type, c->type);
        if (!same_double(m.value, c->value))
                fprintf(stderr, "\"%s\": value %.17g, expected %.17g\n", in, m.value, c->value);
        CHECK(same_double(m.value, c->value));
        CHECK(isfinite(m.value));
        CHECK(m.sample_rate == (c->rate == 0 ? 1.0 : c->rate));
        CHECK_EQ_INT(m.gauge_delta, c->delta);
        check_ids(&m, c->run, c->pid);
        if (c->category) {
                CHECK(m.category != NULL);
                CHECK_EQ_INT(m.category_len, strlen(c->category));
                CHECK(m.category && memcmp(m.category, c->category, m.category_len) == 0);
                CHECK(m.category >= in && m.category + m.category_len <= in + len);
        } else
                CHECK(m.category == NULL);
}

static void test_lines(void) {
        for (size_t i = 0; i < ELEMENTSOF(line_cases); i++) {
                /* a heap copy of exactly len bytes, so ASan sees any read past it */
                size_t len = strlen(line_cases[i].in);
                char *copy = malloc(len ? len : 1);
                memcpy(copy, line_cases[i].in, len);
                check_case(copy, len, &line_cases[i]);
                free(copy);
        }
        /* the parser never reads past len: a prefix of a longer line */
        struct statsd_metric m;
        CHECK_EQ_INT(statsd_parse_line("a:1|c|@0.5", 5, &m), 0);
        CHECK(m.sample_rate == 1.0 && m.type == STATSD_COUNTER);
        CHECK_EQ_INT(statsd_parse_line("a:12|c", 3, &m), BAD);
        CHECK_EQ_INT(statsd_parse_line("a:1|ms", 5, &m), BAD); /* type "m" */
        CHECK_EQ_INT(statsd_parse_line(NULL, 0, &m), BAD);

        /* on error *ret is untouched */
        memset(&m, 0x5A, sizeof m);
        struct statsd_metric before = m;
        CHECK_EQ_INT(statsd_parse_line("a:1|ms|#run:0", 13, &m), BAD);
        CHECK(memcmp(&m, &before, sizeof m) == 0);
}

static void test_nul(void) {
        struct statsd_metric m;
        static const char name_nul[] = "a\0b:1|c";
        static const char value_nul[] = "a:1\0|c";
        static const char type_nul[] = "a:1|c\0";
        static const char rate_nul[] = "a:1|c|@0.5\0";
        static const char tag_nul[] = "a:1|c|#foo:\0bar";
        static const char cat_nul[] = "a:1|c|#category:a\0";
        CHECK_EQ_INT(statsd_parse_line(name_nul, sizeof name_nul - 1, &m), BAD);
        CHECK_EQ_INT(statsd_parse_line(value_nul, sizeof value_nul - 1, &m), BAD);
        CHECK_EQ_INT(statsd_parse_line(type_nul, sizeof type_nul - 1, &m), BAD);
        CHECK_EQ_INT(statsd_parse_line(rate_nul, sizeof rate_nul - 1, &m), BAD);
        CHECK_EQ_INT(statsd_parse_line(tag_nul, sizeof tag_nul - 1, &m), BAD);
        CHECK_EQ_INT(statsd_parse_line(cat_nul, sizeof cat_nul - 1, &m), BAD);
}

/* name of n bytes of 'x' followed by suffix, in an exact-size heap buffer */
static int parse_long_name(size_t n, const char *suffix, struct statsd_metric *m, char **ret_buf) {
        size_t sl = strlen(suffix);
        char *b = malloc(n + sl);
        memset(b, 'x', n);
        memcpy(b + n, suffix, sl);
        int r = statsd_parse_line(b, n + sl, m);
        *ret_buf = b;
        return r;
}

static void test_lengths(void) {
        struct statsd_metric m;
        char *b;

        CHECK_EQ_INT(parse_long_name(STATSD_NAME_MAX, ":1|c", &m, &b), 0);
        CHECK_EQ_INT(m.name_len, STATSD_NAME_MAX);
        free(b);
        CHECK_EQ_INT(parse_long_name(STATSD_NAME_MAX + 1, ":1|c", &m, &b), BAD);
        free(b);
        CHECK_EQ_INT(parse_long_name(60 * 1024, ":1|c", &m, &b), BAD);
        free(b);
        CHECK_EQ_INT(parse_long_name(60 * 1024, "", &m, &b), BAD); /* no ':' at all */
        free(b);

        /* a 200-byte name made of 2-byte characters is fine; 201 bytes is not */
        char name[STATSD_NAME_MAX + 16];
        for (size_t i = 0; i < STATSD_NAME_MAX; i += 2)
                memcpy(name + i, "\xc3\xa9", 2);
        memcpy(name + STATSD_NAME_MAX, ":1|c", 4);
        CHECK_EQ_INT(statsd_parse_line(name, STATSD_NAME_MAX + 4, &m), 0);
        name[STATSD_NAME_MAX] = 'x';
        memcpy(name + STATSD_NAME_MAX + 1, ":1|c", 4);
        CHECK_EQ_INT(statsd_parse_line(name, STATSD_NAME_MAX + 5, &m), BAD);

        /* numbers: 64 bytes fine, 65 malformed */
        char line[256];
        memcpy(line, "a:", 2);
        memset(line + 2, '0', 63);
        line[2 + 63] = '1';
        memcpy(line + 2 + 64, "|c", 2);
        CHECK_EQ_INT(statsd_parse_line(line, 2 + 64 + 2, &m), 0);
        CHECK(m.value == 1);
        memset(line + 2, '0', 64);
        line[2 + 64] = '1';
        memcpy(line + 2 + 65, "|c", 2);
        CHECK_EQ_INT(statsd_parse_line(line, 2 + 65 + 2, &m), BAD);
        /* same for the rate */
        int n = snprintf(line, sizeof line, "a:1|c|@0.5%062d", 0);
        CHECK_EQ_INT(statsd_parse_line(line, (size_t)n, &m), BAD); /* 65 bytes after '@' */
        n = snprintf(line, sizeof line, "a:1|c|@0.5%061d", 0);
        CHECK_EQ_INT(statsd_parse_line(line, (size_t)n, &m), 0);
        CHECK(m.sample_rate == 0.5);
}

/* The fast path for plain decimals must agree with strtod() to the bit. */
static void test_numbers_vs_strtod(void) {
        static const char *fixed[] = {
                "0.1",
                "0.3",
                "12.734",
                "999999999999999",
                "0.000000000000001",
                "123456789.012345",
                "9007199254740993",
                "0.1234567890123456789",
                "1.7976931348623157e308",
                "4.9e-324",
                "2.2250738585072011e-308",
                "-0.0",
                "+000000000000000000000001.5",
        };
        char line[128], num[80];
        struct statsd_metric m;
        unsigned seed = 12345, mismatches = 0;

        for (size_t i = 0; i < ELEMENTSOF(fixed) + 200000; i++) {
                if (i < ELEMENTSOF(fixed))
                        snprintf(num, sizeof num, "%s", fixed[i]);
                else {
                        /* random digits with a random point, 1..20 digits */
                        seed = seed * 1103515245u + 12345u;
                        unsigned nd = 1 + (seed >> 16) % 20;
                        seed = seed * 1103515245u + 12345u;
                        unsigned dot = (seed >> 16) % (nd + 1);
                        size_t k = 0;
                        for (unsigned d = 0; d < nd; d++) {
                                if (d == dot && d > 0)
                                        num[k++] = '.';
                                seed = seed * 1103515245u + 12345u;
                                num[k++] = (char)('0' + (seed >> 16) % 10);
                        }
                        num[k] = 0;
                }
                int n = snprintf(line, sizeof line, "x:%s|c", num);
                double want = strtod(num, NULL);
                /* beyond STATSD_VALUE_MAX the line is malformed instead */
                bool in_bounds = fabs(want) <= STATSD_VALUE_MAX;
                int r = statsd_parse_line(line, (size_t)n, &m);
                if (in_bounds ? r < 0 || memcmp(&m.value, &want, sizeof want) != 0 : r != BAD) {
                        if (mismatches++ < 5)
                                fprintf(stderr, "\"%s\": %.17g, strtod %.17g\n", num, m.value, want);
                }
        }
        CHECK_EQ_INT(mismatches, 0);
}

struct collect {
        size_t n;
        char names[8][16];
        double values[8];
};

static void collect_fn(const struct statsd_metric *m, void *userdata) {
        struct collect *c = userdata;
        if (c->n < 8) {
                snprintf(c->names[c->n], sizeof c->names[c->n], "%.*s", (int)m->name_len, m->name);
                c->values[c->n] = m->value;
        }
        c->n++;
}

static size_t datagram(const char *buf, size_t len, struct collect *c, uint64_t *malformed) {
        memset(c, 0, sizeof *c);
        *malformed = 12345;
        return statsd_parse_datagram(buf, len, collect_fn, c, malformed);
}

static void test_datagrams(void) {
        static const struct {
                const char *what, *text;
                size_t len, n;
                uint64_t bad;
        } cases[] = {
                { "one bad line", S("a:1|c\nb:x|c\nc:3|ms"), 2, 1 },
                { "a trailing newline", S("a:1|c\nb:2|c\n"), 2, 0 },
                { "only newlines", S("\n\n\n"), 0, 0 },
                { "empty", S(""), 0, 0 },
                { "NULL", NULL, 0, 0, 0 },
                { "CRLF line ends, a lone \\r line", S("a:1|c\r\n\r\nb:2|g\r\n"), 2, 0 },
                { "a NUL inside one line spoils that line only", S("a:1|c\nb:\0002|c\nc:3|c"), 2, 1 },
                { "a line that is only a NUL is malformed, not empty", S("\0\n"), 0, 1 },
                { "a blank line is not empty", S(" \na:1|c"), 1, 1 },
                { "the length bounds the datagram, not a NUL", "a:1|c\nb:2|c", 5, 1, 0 },
        };
        struct collect c;
        uint64_t bad;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t n = datagram(cases[i].text, cases[i].len, &c, &bad);
                CHECK_CASE(cases[i].what, n == cases[i].n);
                CHECK_CASE(cases[i].what, bad == cases[i].bad);
        }

        /* what the callback saw: the good lines, in order */
        (void)datagram(cases[0].text, cases[0].len, &c, &bad);
        CHECK_EQ_INT(c.n, 2);
        CHECK(strcmp(c.names[0], "a") == 0 && c.values[0] == 1);
        CHECK(strcmp(c.names[1], "c") == 0 && c.values[1] == 3);
        (void)datagram(cases[2].text, cases[2].len, &c, &bad);
        CHECK_EQ_INT(c.n, 0);
        (void)datagram(cases[6].text, cases[6].len, &c, &bad);
        CHECK(strcmp(c.names[1], "c") == 0);

        /* no callback, no malformed counter: still counts */
        CHECK_EQ_INT(statsd_parse_datagram(S("a:1|c\nb:1|c\nx"), NULL, NULL, NULL), 2);
}

int main(void) {
        test_lines();
        test_events();
        test_nul();
        test_lengths();
        test_numbers_vs_strtod();
        test_datagrams();
        printf("%zu line cases, %zu event cases\n", ELEMENTSOF(line_cases), ELEMENTSOF(event_cases));
        TEST_DONE();
}

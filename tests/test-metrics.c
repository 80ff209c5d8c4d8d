/* SPDX-License-Identifier: MIT */
/* The pieces of GET /metrics that are pure: label-value escaping, sample
 * values, and the op totals that must never decrease. (The exposition as a
 * whole, checked by promtool and scraped by a real Prometheus, is
 * tests/blackbox/test_metrics.py.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "http/metrics.h"
#include "http/tag-labels.h"
#include "tap.h"
#include "json-util.h"
#include "util.h"

static void check_escape(const char *in, const char *want, int line) {
        struct metrics_buf b = {};
        metrics_put_label_value(&b, in);
        const char *got = b.data ? b.data : "";
        if (b.oom || strcmp(got, want) != 0) {
                fprintf(stderr, "line %d: escape gave '%s', expected '%s'\n", line, got, want);
                tap_failures++;
        }
        metrics_buf_done(&b);
}
#define ESCAPE(in, want) check_escape(in, want, __LINE__)

static void test_escape(void) {
        ESCAPE("resnet", "resnet");
        ESCAPE("", "");
        ESCAPE(NULL, "");
        /* the three the format names, and nothing else */
        ESCAPE("a\"b", "a\\\"b");
        ESCAPE("a\\b", "a\\\\b");
        ESCAPE("a\nb", "a\\nb");
        ESCAPE("\"\\\n", "\\\"\\\\\\n");
        ESCAPE("we\"ird\\name\n", "we\\\"ird\\\\name\\n");
        /* an escape sequence in the input is two plain characters, escaped */
        ESCAPE("\\n", "\\\\n");
        /* tab, carriage return and other UTF-8 go through as they are */
        ESCAPE("a\tb\rc", "a\tb\rc");
        ESCAPE("caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93");
        /* a comm is raw bytes: invalid UTF-8 becomes U+FFFD (Prometheus
         * refuses a label value that is not UTF-8) */
        ESCAPE("a\xff\"", "a\xef\xbf\xbd\\\"");
        ESCAPE("\xc3", "\xef\xbf\xbd");

        /* a long value grows the buffer past its first allocation */
        char big[10001];
        memset(big, '"', sizeof big - 1);
        big[sizeof big - 1] = 0;
        struct metrics_buf b = {};
        metrics_put_label_value(&b, big);
        CHECK(!b.oom);
        CHECK_EQ_INT(b.len, 20000);
        CHECK(b.data && strncmp(b.data, "\\\"\\\"", 4) == 0 && b.data[b.len] == 0);
        metrics_buf_done(&b);
}

static void check_value(double v, const char *want, int line) {
        char buf[40];
        metrics_format_value(v, buf, sizeof buf);
        if (strcmp(buf, want) != 0) {
                fprintf(stderr, "line %d: %.17g formats as '%s', expected '%s'\n", line, v, buf, want);
                tap_failures++;
        }
}
#define VALUE(v, want) check_value(v, want, __LINE__)

static void test_values(void) {
        VALUE(0, "0");
        VALUE(-0.0, "0");
        VALUE(1, "1");
        VALUE(1802240, "1802240");
        VALUE(25276518400.0, "25276518400");
        VALUE(-3, "-3");
        VALUE(0.5, "0.5");
        VALUE(0.1, "0.1");
        VALUE(0.0125, "0.0125");
        VALUE(1795280645.708, "1795280645.708");
        VALUE(1e-9, "1e-09");
        VALUE(1.0 / 3.0, "0.3333333333333333");
        VALUE(0x1p53, "9007199254740992");
        VALUE(1.8446744073709552e19, "1.8446744073709552e+19");
        VALUE(NAN, "NaN");
        VALUE(INFINITY, "+Inf");
        VALUE(-INFINITY, "-Inf");

        /* whatever the value, the text reads back as exactly it */
        srand(7);
        for (int i = 0; i < 100000; i++) {
                double v = ldexp((double)rand() / RAND_MAX, rand() % 200 - 100) * (rand() % 2 ? 1 : -1);
                char buf[40];
                metrics_format_value(v, buf, sizeof buf);
                if (strtod(buf, NULL) != v) {
                        fprintf(stderr, "%.17g formats as '%s', which reads back differently\n", v, buf);
                        tap_failures++;
                        break;
                }
        }
}

/* An op aggregate as the store or the op table would hand it over. */
static void agg(struct op_aggs *a, const char *op, double count, const double *timings_ms, size_t n) {
        struct hist h;
        hist_init(&h);
        for (size_t i = 0; i < n; i++)
                CHECK(hist_add(&h, timings_ms[i], 1) == 0);
        CHECK(op_aggs_add(a, op, NULL, count, n ? &h : NULL) == 0);
        hist_done(&h);
}

static const struct metrics_op_total *total(const struct metrics_op_ledger *l, const char *op) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->v[i].op, op))
                        return &l->v[i];
        return NULL;
}

static void test_ledger(void) {
        struct metrics_op_ledger l = { .run_id = 1, .folded_until_ms = 0 };
        struct op_aggs closed = {}, open = {};
        const struct metrics_op_total *t;

        /* closed slices up to 1000: 3 timings of "z" and a counter "a" */
        agg(&closed, "z", 3, (const double[]){ 1, 2, 3 }, 3);
        agg(&closed, "a", 5, NULL, 0);
        CHECK(metrics_ledger_fold(&l, &closed, 1000) == 0);
        op_aggs_done(&closed);
        CHECK(l.caught_up);
        CHECK_EQ_INT(l.folded_until_ms, 1000);
        /* nothing exported before export */
        CHECK((t = total(&l, "z")) && t->out_count == 0 && t->out_timings == 0);

        /* the open slice adds on top */
        agg(&open, "z", 1, (const double[]){ 4 }, 1);
        agg(&open, "b", 2, NULL, 0);
        CHECK(metrics_ledger_export(&l, &open) == 0);
        op_aggs_done(&open);
        CHECK_EQ_INT(l.n, 3);
        /* sorted by op name: a stable order between scrapes */
        CHECK(streq(l.v[0].op, "a") && streq(l.v[1].op, "b") && streq(l.v[2].op, "z"));
        CHECK((t = total(&l, "z")) && t->out_count == 4 && t->out_timings == 4 && t->out_sum_ms == 10);
        CHECK((t = total(&l, "a")) && t->out_count == 5 && t->out_timings == 0);
        CHECK((t = total(&l, "b")) && t->out_count == 2);

        /* that slice closes: folded once, not counted twice */
        agg(&closed, "z", 1, (const double[]){ 4 }, 1);
        agg(&closed, "b", 2, NULL, 0);
        CHECK(metrics_ledger_fold(&l, &closed, 2000) == 0);
        op_aggs_done(&closed);
        CHECK(metrics_ledger_export(&l, NULL) == 0);
        CHECK((t = total(&l, "z")) && t->out_count == 4 && t->out_timings == 4 && t->out_sum_ms == 10);
        CHECK((t = total(&l, "b")) && t->out_count == 2);

        /* a StatsD counter decrement ("b:-3|c") does not take a counter
         * down; the total goes on once it is above its old high again */
        agg(&closed, "b", -3, NULL, 0);
        CHECK(metrics_ledger_fold(&l, &closed, 3000) == 0);
        op_aggs_done(&closed);
        CHECK(metrics_ledger_export(&l, NULL) == 0);
        CHECK((t = total(&l, "b")) && t->out_count == 2 && t->closed_count == -1);
        agg(&open, "b", 2, NULL, 0);
        CHECK(metrics_ledger_export(&l, &open) == 0);
        op_aggs_done(&open);
        CHECK((t = total(&l, "b")) && t->out_count == 2);
        agg(&open, "b", 6, NULL, 0);
        CHECK(metrics_ledger_export(&l, &open) == 0);
        op_aggs_done(&open);
        CHECK((t = total(&l, "b")) && t->out_count == 5);
        /* ... and an open slice that shrinks again does not either */
        CHECK(metrics_ledger_export(&l, NULL) == 0);
        CHECK((t = total(&l, "b")) && t->out_count == 5);

        metrics_ledger_done(&l);
        CHECK(l.n == 0 && l.v == NULL);
}

static void test_tag_labels(void) {
        struct tag_label tl[TAGS_MAX];
        _cleanup_json_ json_object *tags = json_tokener_parse(
                "{\"rank\":\"1\",\"job-id\":\"j\\\"1\",\"job.id\":\"second\",\"k8s/pod\":\"p\",\"n\":7}");
        CHECK(tags);
        /* sorted keys; "job.id" sanitises to the name "job-id" took first;
         * a value that is not a string is no label */
        size_t n = tag_labels(tags, tl);
        CHECK_EQ_INT(n, 3);
        CHECK(n == 3 && streq(tl[0].name, "tag_job_id") && streq(tl[0].value, "j\"1"));
        CHECK(n == 3 && streq(tl[1].name, "tag_k8s_pod") && streq(tl[1].value, "p"));
        CHECK(n == 3 && streq(tl[2].name, "tag_rank") && streq(tl[2].value, "1"));
        CHECK_EQ_INT(tag_labels(NULL, tl), 0);

        /* at most TAGS_MAX, the first in key order */
        _cleanup_json_ json_object *many = json_object_new_object();
        for (int i = 0; i < 20; i++) {
                char k[8];
                snprintf(k, sizeof k, "k%02d", i);
                json_object_object_add(many, k, json_object_new_string("v"));
        }
        CHECK_EQ_INT(tag_labels(many, tl), TAGS_MAX);
        CHECK(streq(tl[0].name, "tag_k00") && streq(tl[TAGS_MAX - 1].name, "tag_k15"));
}

int main(void) {
        test_tag_labels();
        test_escape();
        test_values();
        test_ledger();
        TEST_DONE();
}

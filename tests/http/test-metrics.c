/* SPDX-License-Identifier: MIT */
/* The pieces of GET /metrics that are pure: label-value escaping, sample
 * values, the op totals that must never decrease, the Accept header's
 * format and the native histogram's buckets. (The exposition as a
 * whole, checked by promtool and scraped by a real Prometheus, is
 * tests/blackbox/test_metrics.py.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "http/metrics.h"
#include "http/tag-labels.h"
#include "metrics.pb-c.h"
#include "tap.h"
#include "json-util.h"
#include "util.h"

static void check_escape(const char *in, const char *want, int line) {
        struct metrics_out b = {};
        metrics_put_label_value(&b, in);
        const char *got = b.data ? b.data : "";
        if (b.oom || strcmp(got, want) != 0) {
                fprintf(stderr, "line %d: escape gave '%s', expected '%s'\n", line, got, want);
                tap_failures++;
        }
        metrics_out_done(&b);
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
        struct metrics_out b = {};
        metrics_put_label_value(&b, big);
        CHECK(!b.oom);
        CHECK_EQ_INT(b.len, 20000);
        CHECK(b.data && strncmp(b.data, "\\\"\\\"", 4) == 0 && b.data[b.len] == 0);
        metrics_out_done(&b);
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
        /* the timings' buckets likewise: the closed ones plus the open */
        CHECK((t = total(&l, "z")) && t->out_h.count == 4 && t->out_h.sum == 10 && t->closed_h.count == 3);

        /* that slice closes: folded once, not counted twice */
        agg(&closed, "z", 1, (const double[]){ 4 }, 1);
        agg(&closed, "b", 2, NULL, 0);
        CHECK(metrics_ledger_fold(&l, &closed, 2000) == 0);
        op_aggs_done(&closed);
        CHECK(metrics_ledger_export(&l, NULL) == 0);
        CHECK((t = total(&l, "z")) && t->out_count == 4 && t->out_timings == 4 && t->out_sum_ms == 10);
        CHECK((t = total(&l, "b")) && t->out_count == 2);
        CHECK((t = total(&l, "z")) && t->out_h.count == 4 && t->closed_h.count == 4);

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

static void test_negotiate(void) {
        static const char proto[] = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                                    "encoding=delimited";
        CHECK(metrics_negotiate(NULL) == METRICS_TEXT);
        CHECK(metrics_negotiate("") == METRICS_TEXT);
        CHECK(metrics_negotiate(proto) == METRICS_PROTO);
        /* what Prometheus 2.42 sends with native histograms on */
        CHECK(metrics_negotiate("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                                "encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,"
                                "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,"
                                "*/*;q=0.1") == METRICS_PROTO);
        /* ... and without them: text first */
        CHECK(metrics_negotiate("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                                "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1") == METRICS_TEXT);
        CHECK(metrics_negotiate(" application/vnd.google.protobuf ; encoding=delimited ; "
                                "proto=io.prometheus.client.MetricFamily ; q=0.9 , text/plain;q=0.8") == METRICS_PROTO);
        CHECK(metrics_negotiate("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily") ==
              METRICS_TEXT);
        CHECK(metrics_negotiate("text/plain;q=0.5,application/vnd.google.protobuf;q=0.9") == METRICS_TEXT);
        CHECK(metrics_negotiate("*/*;q=0.9,application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                                "encoding=delimited;q=0.9") == METRICS_TEXT);
        CHECK(metrics_negotiate("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                                "encoding=delimited;q=zz") == METRICS_TEXT);
}

/* One family with one native histogram through the protobuf encoder,
 * decoded back with protoc-c's unpacker: labels are the model's pairs (no
 * escaping: the text format's is not the protobuf's), the buckets become
 * spans of non-empty buckets and deltas. */
static void test_native(void) {
        uint64_t counts[] = { 2, 0, 0, 1, 3, 0 };
        struct hist h = { .count = 7, .zero_count = 1, .sum = 0, .lo = -3, .n = 6, .counts = counts };
        struct metrics_out out = {};
        struct metrics_encoder *e = NULL;
        const struct metric_family f = { "x_seconds", METRIC_LATENCY, "help", "native help" };
        const struct metric_label run[] = { { "run", "1" }, { "name", "a\\b\"c\nd" } }, op = { "op", "step" };
        CHECK(metrics_proto_encoder(&out, &e) == 0);
        if (!e)
                return;
        e->begin(e, &f);
        e->series(
                e, &f,
                &(struct metric_series){
                        .labels = run, .n_labels = 2, .extra = &op, .n_extra = 1, .h = &h, .sum_s = 2.5, .count = 7 });
        e->end(e, &f);
        e->free(e);
        /* one message: its length (one varint byte here), then the message */
        CHECK(!out.oom && out.len > 1 && (size_t)(uint8_t)out.data[0] == out.len - 1);
        Io__Prometheus__Client__MetricFamily *m = io__prometheus__client__metric_family__unpack(
                NULL, out.len - 1, (const uint8_t *)out.data + 1);
        CHECK(m && streq(m->name, "x_seconds") && streq(m->help, "native help") &&
              m->type == IO__PROMETHEUS__CLIENT__METRIC_TYPE__HISTOGRAM);
        /* the bytes protoc-c's packer writes for it, to the byte */
        if (m) {
                size_t size = io__prometheus__client__metric_family__get_packed_size(m);
                uint8_t *again = malloc(size);
                CHECK(again && size == out.len - 1);
                if (again && size == out.len - 1)
                        CHECK(io__prometheus__client__metric_family__pack(m, again) == size &&
                              memcmp(again, out.data + 1, size) == 0);
                free(again);
        }
        if (m && m->n_metric == 1) {
                const Io__Prometheus__Client__Metric *x = m->metric[0];
                const Io__Prometheus__Client__Histogram *hh = x->histogram;
                CHECK_EQ_INT(x->n_label, 3);
                CHECK(x->n_label == 3 && streq(x->label[1]->name, "name") && streq(x->label[1]->value, "a\\b\"c\nd"));
                CHECK(x->n_label == 3 && streq(x->label[2]->name, "op") && streq(x->label[2]->value, "step"));
                CHECK(hh && hh->schema == 7 && hh->zero_threshold == 1e-9 && hh->zero_count == 1);
                CHECK(hh && hh->sample_count == 7 && hh->sample_sum == 2.5);
                CHECK(hh && hh->n_positive_span == 2 && hh->n_positive_delta == 3);
                if (hh && hh->n_positive_span == 2 && hh->n_positive_delta == 3) {
                        /* buckets -3 (2), then 0 and 1 (1, 3) */
                        CHECK(hh->positive_span[0]->offset == -3 && hh->positive_span[0]->length == 1);
                        CHECK(hh->positive_span[1]->offset == 2 && hh->positive_span[1]->length == 2);
                        CHECK(hh->positive_delta[0] == 2 && hh->positive_delta[1] == -1 && hh->positive_delta[2] == 2);
                }
        } else
                CHECK(!"one metric");
        io__prometheus__client__metric_family__free_unpacked(m, NULL);
        metrics_out_done(&out);

        /* the same model in the text format: the label escaped there alone */
        CHECK(metrics_text_encoder(&out, &e) == 0);
        if (!e)
                return;
        const struct metric_family g = { "y", METRIC_GAUGE, "help", NULL };
        e->begin(e, &g);
        e->series(e, &g, &(struct metric_series){ .labels = run, .n_labels = 2, .value = 0.25 });
        e->end(e, &g);
        e->free(e);
        CHECK(out.data &&
              streq(out.data, "# HELP y help\n# TYPE y gauge\ny{run=\"1\",name=\"a\\\\b\\\"c\\nd\"} 0.25\n"));
        metrics_out_done(&out);
}

/* Gauges and counters, a family without series (not written), a label
 * without a value, long strings: every message of the stream is what
 * protoc-c's packer writes for what its unpacker reads back. */
static void test_proto_stream(void) {
        struct metrics_out out = {};
        struct metrics_encoder *e = NULL;
        CHECK(metrics_proto_encoder(&out, &e) == 0);
        if (!e)
                return;
        char long_value[300];
        memset(long_value, 'v', sizeof long_value - 1);
        long_value[sizeof long_value - 1] = 0;
        const struct metric_label labels[] = { { "run", "12" }, { "tag_x", NULL }, { "tag_long", long_value } };
        const struct metric_family fams[] = { { "g", METRIC_GAUGE, "a gauge", NULL },
                                              { "empty", METRIC_GAUGE, "none", NULL },
                                              { "c_total", METRIC_COUNTER, "a counter", NULL } };
        static const double values[] = { 0, -1.5, 1e300 };
        for (size_t k = 0; k < ELEMENTSOF(fams); k++) {
                e->begin(e, &fams[k]);
                for (size_t i = 0; k != 1 && i < ELEMENTSOF(values); i++)
                        e->series(e, &fams[k],
                                  &(struct metric_series){ .labels = labels, .n_labels = 1 + i, .value = values[i] });
                e->end(e, &fams[k]);
        }
        e->free(e);
        CHECK(!out.oom);
        size_t at = 0, messages = 0;
        while (at < out.len) {
                uint64_t len = 0;
                for (unsigned shift = 0; at < out.len; shift += 7) {
                        uint8_t b = (uint8_t)out.data[at++];
                        len |= (uint64_t)(b & 0x7f) << shift;
                        if (!(b & 0x80))
                                break;
                }
                CHECK(at + len <= out.len);
                if (at + len > out.len)
                        break;
                Io__Prometheus__Client__MetricFamily *m = io__prometheus__client__metric_family__unpack(
                        NULL, len, (const uint8_t *)out.data + at);
                CHECK(m && m->n_metric == 3);
                if (m) {
                        uint8_t *again = malloc(len);
                        CHECK(io__prometheus__client__metric_family__get_packed_size(m) == len);
                        CHECK(again && io__prometheus__client__metric_family__pack(m, again) == len &&
                              memcmp(again, out.data + at, len) == 0);
                        free(again);
                        CHECK(m->n_metric == 3 && m->metric[2]->n_label == 3 &&
                              streq(m->metric[2]->label[2]->value, long_value) &&
                              streq(m->metric[2]->label[1]->value, ""));
                }
                io__prometheus__client__metric_family__free_unpacked(m, NULL);
                at += len;
                messages++;
        }
        CHECK_EQ_INT(messages, 2);
        metrics_out_done(&out);
}

int main(void) {
        test_tag_labels();
        test_escape();
        test_values();
        test_ledger();
        test_negotiate();
        test_native();
        test_proto_stream();
        TEST_DONE();
}

/* SPDX-License-Identifier: MIT */
#include "http/metrics-proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "metrics.pb-c.h"
#include "util.h"

#ifndef HIST_SCHEMA
/* The Prometheus schema of struct hist's buckets: base 2^(2^-7), about
 * 0.27% wide. analyze/histogram.h defines it once its buckets follow it. */
#define HIST_SCHEMA 7
#endif
#ifndef HIST_ZERO_THRESHOLD_S
/* struct hist's zero bucket: the values below 1 ns. */
#define HIST_ZERO_THRESHOLD_S 1e-9
#endif

typedef Io__Prometheus__Client__MetricFamily Family;
typedef Io__Prometheus__Client__Metric Metric;
typedef Io__Prometheus__Client__LabelPair LabelPair;
typedef Io__Prometheus__Client__BucketSpan BucketSpan;

/* ---- Accept ------------------------------------------------------------------ */

static bool token_eq(const char *s, size_t n, const char *lit) {
        return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

static void trim(const char **s, size_t *n) {
        while (*n > 0 && (**s == ' ' || **s == '\t'))
                (*s)++, (*n)--;
        while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
                (*n)--;
}

/* One media range of an Accept header ("type/sub;k=v;q=0.5"): its weight,
 * and whether it is the delimited MetricFamily stream or a text type. */
static void media_range(const char *s, size_t n, double *ret_q, bool *ret_proto, bool *ret_text) {
        const char *semi = memchr(s, ';', n);
        const char *type = s;
        size_t type_len = semi ? (size_t)(semi - s) : n;
        bool proto_ok = false, delimited = false;
        double q = 1;
        trim(&type, &type_len);
        while (semi) {
                const char *p = semi + 1;
                size_t left = n - (size_t)(p - s);
                semi = memchr(p, ';', left);
                size_t len = semi ? (size_t)(semi - p) : left;
                const char *eq = memchr(p, '=', len);
                if (!eq)
                        continue;
                const char *k = p, *v = eq + 1;
                size_t klen = (size_t)(eq - p), vlen = len - klen - 1;
                trim(&k, &klen);
                trim(&v, &vlen);
                /* a parameter's value may be a quoted string (RFC 9110, 5.6.6):
                 * proto="io.prometheus.client.MetricFamily" is the same token */
                if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"')
                        v++, vlen -= 2;
                if (token_eq(k, klen, "q")) {
                        char num[16] = "";
                        memcpy(num, v, vlen < sizeof num - 1 ? vlen : sizeof num - 1);
                        char *end;
                        q = strtod(num, &end);
                        if (end == num || q < 0 || q > 1)
                                q = 0; /* malformed: not acceptable */
                } else if (token_eq(k, klen, "proto"))
                        proto_ok = token_eq(v, vlen, "io.prometheus.client.MetricFamily");
                else if (token_eq(k, klen, "encoding"))
                        delimited = token_eq(v, vlen, "delimited");
        }
        *ret_q = q;
        *ret_proto = token_eq(type, type_len, "application/vnd.google.protobuf") && proto_ok && delimited;
        *ret_text = token_eq(type, type_len, "text/plain") || token_eq(type, type_len, "text/*") ||
                    token_eq(type, type_len, "*/*") || token_eq(type, type_len, "application/openmetrics-text");
}

enum metrics_format metrics_negotiate(const char *accept) {
        double q_proto = 0, q_text = 0;
        for (const char *s = accept; s && *s;) {
                const char *comma = strchr(s, ',');
                size_t n = comma ? (size_t)(comma - s) : strlen(s);
                double q;
                bool proto, text;
                media_range(s, n, &q, &proto, &text);
                if (proto && q > q_proto)
                        q_proto = q;
                if (text && q > q_text)
                        q_text = q;
                s = comma ? comma + 1 : NULL;
        }
        return q_proto > q_text ? METRICS_PROTO : METRICS_TEXT;
}

/* ---- the encoder ---------------------------------------------------------------- */

/* One series and everything its message points to. */
struct series {
        Metric m; /* first: the family's Metric pointers are series pointers */
        Io__Prometheus__Client__Gauge gauge;
        Io__Prometheus__Client__Counter counter;
        Io__Prometheus__Client__Histogram hist;
        LabelPair *pairs; /* m.label points at these; their strings are the model's */
        LabelPair **pair_ptrs;
        BucketSpan *spans; /* hist.positive_span points at these */
        BucketSpan **span_ptrs;
        int64_t *deltas;
};

struct proto_encoder {
        struct metrics_encoder e; /* first */
        Family fam;
};

static void series_free(struct series *s) {
        if (!s)
                return;
        free(s->pairs);
        free(s->pair_ptrs);
        free(s->spans);
        free(s->span_ptrs);
        free(s->deltas);
        free(s);
}

static void family_clear(struct proto_encoder *p) {
        for (size_t i = 0; i < p->fam.n_metric; i++)
                series_free((struct series *)p->fam.metric[i]);
        p->fam.n_metric = 0;
}

static void proto_begin(struct metrics_encoder *e, const struct metric_family *f) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        Io__Prometheus__Client__Metric **metric = p->fam.metric;
        family_clear(p);
        io__prometheus__client__metric_family__init(&p->fam);
        p->fam.metric = metric;
        /* the family's strings are the producer's constants, alive until its end */
        p->fam.name = (char *)f->name;
        p->fam.help = (char *)(f->type == METRIC_LATENCY && f->help_native ? f->help_native : f->help);
        p->fam.has_type = true;
        p->fam.type = f->type == METRIC_COUNTER   ? IO__PROMETHEUS__CLIENT__METRIC_TYPE__COUNTER
                      : f->type == METRIC_LATENCY ? IO__PROMETHEUS__CLIENT__METRIC_TYPE__HISTOGRAM
                                                  : IO__PROMETHEUS__CLIENT__METRIC_TYPE__GAUGE;
}

/* The positive buckets as spans of consecutive non-empty buckets (offset:
 * the gap since the end of the span before, or the first bucket's index)
 * and deltas (each bucket's count minus the one before, across spans). */
static int native_buckets(struct series *s, const struct hist *h) {
        size_t used = 0;
        for (uint32_t i = 0; i < h->n; i++)
                used += h->counts[i] > 0;
        s->deltas = calloc(used ? used : 1, sizeof *s->deltas);
        s->spans = calloc(used ? used : 1, sizeof *s->spans);
        s->span_ptrs = calloc(used ? used : 1, sizeof *s->span_ptrs);
        if (!s->deltas || !s->spans || !s->span_ptrs)
                return -ENOMEM;
        Io__Prometheus__Client__Histogram *x = &s->hist;
        int64_t end = 0; /* index after the last span's last bucket */
        uint64_t prev = 0;
        BucketSpan *span = NULL;
        for (uint32_t i = 0; i < h->n; i++) {
                int64_t idx = (int64_t)h->lo + i;
                if (h->counts[i] == 0) {
                        span = NULL;
                        continue;
                }
                if (!span) {
                        span = &s->spans[x->n_positive_span];
                        io__prometheus__client__bucket_span__init(span);
                        span->has_offset = span->has_length = true;
                        span->offset = (int32_t)(idx - end);
                        s->span_ptrs[x->n_positive_span++] = span;
                }
                span->length++;
                end = idx + 1;
                s->deltas[x->n_positive_delta++] = (int64_t)(h->counts[i] - prev);
                prev = h->counts[i];
        }
        x->positive_span = s->span_ptrs;
        x->positive_delta = s->deltas;
        return 0;
}

static int series_labels(struct series *s, const struct metric_series *m) {
        size_t n = m->n_labels + m->n_extra;
        s->pairs = calloc(n ? n : 1, sizeof *s->pairs);
        s->pair_ptrs = calloc(n ? n : 1, sizeof *s->pair_ptrs);
        if (!s->pairs || !s->pair_ptrs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const struct metric_label *l = i < m->n_labels ? &m->labels[i] : &m->extra[i - m->n_labels];
                io__prometheus__client__label_pair__init(&s->pairs[i]);
                s->pairs[i].name = (char *)l->name;
                s->pairs[i].value = (char *)(l->value ? l->value : "");
                s->pair_ptrs[i] = &s->pairs[i];
        }
        s->m.n_label = n;
        s->m.label = s->pair_ptrs;
        return 0;
}

static void proto_series(struct metrics_encoder *e, const struct metric_family *f, const struct metric_series *m) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        struct series *s = calloc(1, sizeof *s);
        if (!s || !GREEDY_REALLOC(p->fam.metric, p->fam.n_metric + 1)) {
                series_free(s);
                e->out->oom = true;
                return;
        }
        io__prometheus__client__metric__init(&s->m);
        p->fam.metric[p->fam.n_metric++] = &s->m;
        if (series_labels(s, m) < 0) {
                e->out->oom = true;
                return;
        }
        if (f->type == METRIC_LATENCY) {
                Io__Prometheus__Client__Histogram *x = &s->hist;
                io__prometheus__client__histogram__init(x);
                x->has_sample_count = x->has_sample_sum = x->has_schema = x->has_zero_threshold = true;
                x->has_zero_count = true;
                x->sample_count = m->count;
                x->sample_sum = m->sum_s;
                x->schema = HIST_SCHEMA;
                x->zero_threshold = HIST_ZERO_THRESHOLD_S;
                x->zero_count = m->h ? m->h->zero_count : 0;
                s->m.histogram = x;
                if (m->h && native_buckets(s, m->h) < 0)
                        e->out->oom = true;
        } else if (f->type == METRIC_COUNTER) {
                io__prometheus__client__counter__init(&s->counter);
                s->counter.has_value = true;
                s->counter.value = m->value;
                s->m.counter = &s->counter;
        } else {
                io__prometheus__client__gauge__init(&s->gauge);
                s->gauge.has_value = true;
                s->gauge.value = m->value;
                s->m.gauge = &s->gauge;
        }
}

/* Writes the family: its length as a varint, then the message. */
static void proto_end(struct metrics_encoder *e, const struct metric_family *f) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        struct metrics_out *o = e->out;
        if (p->fam.n_metric == 0)
                return; /* a family without series is not written */
        size_t size = io__prometheus__client__metric_family__get_packed_size(&p->fam);
        uint8_t len[10];
        size_t k = 0;
        for (size_t v = size;; v >>= 7) {
                len[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                if (v <= 0x7f)
                        break;
        }
        metrics_out_put(o, (const char *)len, k);
        if (metrics_out_reserve(o, size)) {
                o->len += io__prometheus__client__metric_family__pack(&p->fam, (uint8_t *)o->data + o->len);
                o->data[o->len] = 0;
        }
        family_clear(p);
}

static void proto_free(struct metrics_encoder *e) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        family_clear(p);
        free(p->fam.metric);
        free(p);
}

int metrics_proto_encoder(struct metrics_out *out, struct metrics_encoder **ret) {
        struct proto_encoder *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->e = (struct metrics_encoder){
                .begin = proto_begin, .series = proto_series, .end = proto_end, .free = proto_free, .out = out
        };
        *ret = &p->e;
        return 0;
}

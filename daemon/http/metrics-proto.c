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

/* ---- building ---------------------------------------------------------------- */

/* One series and everything its message points to. */
struct series {
        Metric m; /* first: the family's Metric pointers are series pointers */
        Io__Prometheus__Client__Gauge gauge;
        Io__Prometheus__Client__Counter counter;
        Io__Prometheus__Client__Histogram hist;
        char *text;        /* the label names and values, unescaped in place */
        LabelPair *pairs;  /* m.label points at these */
        BucketSpan *spans; /* hist.positive_span points at these */
        BucketSpan **span_ptrs;
        int64_t *deltas;
};

struct metrics_proto {
        Family fam;
        bool open;
        char *out;
        size_t len;
        bool oom, bad;
};

static void series_free(struct series *s) {
        if (!s)
                return;
        free(s->text);
        free(s->m.label);
        free(s->pairs);
        free(s->spans);
        free(s->span_ptrs);
        free(s->deltas);
        free(s);
}

int metrics_proto_new(struct metrics_proto **ret) {
        struct metrics_proto *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static void family_clear(struct metrics_proto *p) {
        for (size_t i = 0; i < p->fam.n_metric; i++)
                series_free((struct series *)p->fam.metric[i]);
        p->fam.n_metric = 0;
        p->open = false;
}

void metrics_proto_free(struct metrics_proto *p) {
        if (!p)
                return;
        family_clear(p);
        free(p->fam.metric);
        free(p->out);
        free(p);
}

static bool out_reserve(struct metrics_proto *p, size_t extra) {
        if (!p->oom && !GREEDY_REALLOC(p->out, p->len + extra))
                p->oom = true;
        return !p->oom;
}

/* Writes the open family: its length as a varint, then the message. */
static void family_flush(struct metrics_proto *p) {
        if (!p->open)
                return;
        size_t size = io__prometheus__client__metric_family__get_packed_size(&p->fam);
        if (out_reserve(p, size + 10)) {
                size_t v = size;
                do {
                        p->out[p->len++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
                        v >>= 7;
                } while (v);
                p->len += io__prometheus__client__metric_family__pack(&p->fam, (uint8_t *)p->out + p->len);
        }
        family_clear(p);
}

void metrics_proto_family(struct metrics_proto *p, const char *name, enum metrics_proto_type type, const char *help) {
        static const Io__Prometheus__Client__MetricType types[] = {
                [METRICS_PROTO_GAUGE] = IO__PROMETHEUS__CLIENT__METRIC_TYPE__GAUGE,
                [METRICS_PROTO_COUNTER] = IO__PROMETHEUS__CLIENT__METRIC_TYPE__COUNTER,
                [METRICS_PROTO_HISTOGRAM] = IO__PROMETHEUS__CLIENT__METRIC_TYPE__HISTOGRAM,
        };
        family_flush(p);
        Io__Prometheus__Client__Metric **metric = p->fam.metric;
        io__prometheus__client__metric_family__init(&p->fam);
        p->fam.metric = metric;
        /* the family's strings are the caller's constants, alive until the flush */
        p->fam.name = (char *)name;
        p->fam.help = (char *)help;
        p->fam.has_type = true;
        p->fam.type = types[type];
        p->open = true;
}

/* Reads `k="v",...` (escaped as the text format wants: \\, \" and \n) in
 * place: names and values end up NUL-terminated in s->text. */
static int parse_labels(struct series *s) {
        size_t max = 0;
        for (const char *c = s->text; *c; c++)
                max += *c == '"';
        max /= 2;
        s->pairs = calloc(max ? max : 1, sizeof *s->pairs);
        s->m.label = calloc(max ? max : 1, sizeof *s->m.label);
        if (!s->pairs || !s->m.label)
                return -ENOMEM;
        char *r = s->text, *w = s->text;
        while (*r) {
                if (s->m.n_label == max)
                        return -EINVAL;
                LabelPair *lp = &s->pairs[s->m.n_label];
                io__prometheus__client__label_pair__init(lp);
                lp->name = w;
                while (*r && *r != '=')
                        *w++ = *r++;
                if (r[0] != '=' || r[1] != '"')
                        return -EINVAL;
                *w++ = 0;
                r += 2;
                lp->value = w;
                while (*r && *r != '"') {
                        if (*r == '\\') {
                                r++;
                                if (*r != '\\' && *r != '"' && *r != 'n')
                                        return -EINVAL;
                                *w++ = *r == 'n' ? '\n' : *r;
                                r++;
                        } else
                                *w++ = *r++;
                }
                if (*r != '"')
                        return -EINVAL;
                *w++ = 0;
                r++;
                s->m.label[s->m.n_label++] = lp;
                if (*r == ',')
                        r++;
                else if (*r)
                        return -EINVAL;
        }
        return 0;
}

/* A new series of the open family, its labels read from labels + extra. */
static struct series *series_add(struct metrics_proto *p, const char *labels, const char *extra) {
        if (p->oom || p->bad)
                return NULL;
        if (!p->open) {
                p->bad = true;
                return NULL;
        }
        if (!GREEDY_REALLOC(p->fam.metric, p->fam.n_metric + 1)) {
                p->oom = true;
                return NULL;
        }
        struct series *s = calloc(1, sizeof *s);
        size_t la = labels ? strlen(labels) : 0, le = extra ? strlen(extra) : 0;
        if (s)
                s->text = malloc(la + le + 2);
        if (!s || !s->text) {
                series_free(s);
                p->oom = true;
                return NULL;
        }
        io__prometheus__client__metric__init(&s->m);
        memcpy(s->text, labels ? labels : "", la);
        size_t at = la;
        if (la && le)
                s->text[at++] = ',';
        memcpy(s->text + at, extra ? extra : "", le);
        s->text[at + le] = 0;
        int r = parse_labels(s);
        if (r < 0) {
                series_free(s);
                if (r == -ENOMEM)
                        p->oom = true;
                else
                        p->bad = true;
                return NULL;
        }
        p->fam.metric[p->fam.n_metric++] = &s->m;
        return s;
}

void metrics_proto_sample(struct metrics_proto *p, const char *labels, const char *extra, double v) {
        struct series *s = series_add(p, labels, extra);
        if (!s)
                return;
        if (p->fam.type == IO__PROMETHEUS__CLIENT__METRIC_TYPE__COUNTER) {
                io__prometheus__client__counter__init(&s->counter);
                s->counter.has_value = true;
                s->counter.value = v;
                s->m.counter = &s->counter;
        } else {
                io__prometheus__client__gauge__init(&s->gauge);
                s->gauge.has_value = true;
                s->gauge.value = v;
                s->m.gauge = &s->gauge;
        }
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

void metrics_proto_native(struct metrics_proto *p, const char *labels, const char *extra, const struct hist *h,
                          double sum_s) {
        struct series *s = series_add(p, labels, extra);
        if (!s)
                return;
        Io__Prometheus__Client__Histogram *x = &s->hist;
        io__prometheus__client__histogram__init(x);
        x->has_sample_count = x->has_sample_sum = x->has_schema = x->has_zero_threshold = x->has_zero_count = true;
        x->sample_count = h->count;
        x->sample_sum = sum_s;
        x->schema = HIST_SCHEMA;
        x->zero_threshold = HIST_ZERO_THRESHOLD_S;
        x->zero_count = h->zero_count;
        s->m.histogram = x;
        if (native_buckets(s, h) < 0)
                p->oom = true;
}

int metrics_proto_finish(struct metrics_proto *p, char **ret, size_t *ret_len) {
        family_flush(p);
        if (p->oom)
                return -ENOMEM;
        if (p->bad)
                return -EINVAL;
        if (!out_reserve(p, 1))
                return -ENOMEM;
        *ret = TAKE_PTR(p->out);
        *ret_len = p->len;
        p->len = 0;
        return 0;
}

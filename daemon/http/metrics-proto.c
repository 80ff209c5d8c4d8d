/* SPDX-License-Identifier: MIT */
#include "http/metrics-proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* The messages are written straight in the wire format, each field in the
 * order of its number as protoc-c's packer writes them: building protoc-c's
 * messages took five allocations a series, and packing them measured every
 * nested message (and every label's strings) again at each level, which
 * made the format twice as slow to write as the text. */

/* Field keys: (number << 3) | wire type (0 varint, 1 64-bit, 2 length-delimited). */
enum {
        KEY_FAMILY_NAME = 1 << 3 | 2,
        KEY_FAMILY_HELP = 2 << 3 | 2,
        KEY_FAMILY_TYPE = 3 << 3 | 0,
        KEY_FAMILY_METRIC = 4 << 3 | 2,
        KEY_METRIC_LABEL = 1 << 3 | 2,
        KEY_METRIC_GAUGE = 2 << 3 | 2,
        KEY_METRIC_COUNTER = 3 << 3 | 2,
        KEY_METRIC_HISTOGRAM = 7 << 3 | 2,
        KEY_LABEL_NAME = 1 << 3 | 2,
        KEY_LABEL_VALUE = 2 << 3 | 2,
        KEY_VALUE = 1 << 3 | 1, /* Gauge's and Counter's */
        KEY_HIST_COUNT = 1 << 3 | 0,
        KEY_HIST_SUM = 2 << 3 | 1,
        KEY_HIST_SCHEMA = 5 << 3 | 0,
        KEY_HIST_ZERO_THRESHOLD = 6 << 3 | 1,
        KEY_HIST_ZERO_COUNT = 7 << 3 | 0,
        KEY_HIST_POSITIVE_SPAN = 12 << 3 | 2,
        KEY_HIST_POSITIVE_DELTA = 13 << 3 | 0,
        KEY_SPAN_OFFSET = 1 << 3 | 0,
        KEY_SPAN_LENGTH = 2 << 3 | 0,
};

/* MetricType */
enum { TYPE_COUNTER = 0, TYPE_GAUGE = 1, TYPE_HISTOGRAM = 4 };

struct proto_encoder {
        struct metrics_encoder e;   /* first */
        struct metrics_out metrics; /* the family's Metric fields so far */
        struct metrics_out m;       /* one series' message */
};

static size_t varint_len(uint64_t v) {
        size_t n = 1;
        for (; v > 0x7f; v >>= 7)
                n++;
        return n;
}

static void put_varint(struct metrics_out *o, uint64_t v) {
        uint8_t b[10];
        size_t k = 0;
        for (; v > 0x7f; v >>= 7)
                b[k++] = (uint8_t)(v | 0x80);
        b[k++] = (uint8_t)v;
        metrics_out_put(o, (const char *)b, k);
}

static uint64_t zigzag64(int64_t v) {
        return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static uint64_t zigzag32(int32_t v) {
        return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

static void put_double(struct metrics_out *o, unsigned key, double d) {
        uint64_t u;
        uint8_t b[9] = { (uint8_t)key };
        memcpy(&u, &d, sizeof u);
        for (int k = 0; k < 8; k++)
                b[1 + k] = (uint8_t)(u >> (8 * k));
        metrics_out_put(o, (const char *)b, sizeof b);
}

static void put_bytes(struct metrics_out *o, unsigned key, const char *s, size_t n) {
        put_varint(o, key);
        put_varint(o, n);
        metrics_out_put(o, s, n);
}

static void put_label(struct metrics_out *o, const struct metric_label *l) {
        const char *value = l->value ? l->value : "";
        size_t nn = strlen(l->name), vn = strlen(value);
        put_varint(o, KEY_METRIC_LABEL);
        put_varint(o, 1 + varint_len(nn) + nn + 1 + varint_len(vn) + vn);
        put_bytes(o, KEY_LABEL_NAME, l->name, nn);
        put_bytes(o, KEY_LABEL_VALUE, value, vn);
}

/* The positive buckets as spans of consecutive non-empty buckets (offset:
 * the gap since the end of the span before, or the first bucket's index)
 * and deltas (each bucket's count minus the one before, across spans). */
static void put_native_buckets(struct metrics_out *o, const struct hist *h) {
        int64_t end = 0; /* index after the last span's last bucket */
        for (uint32_t i = 0; i < h->n;) {
                if (h->counts[i] == 0) {
                        i++;
                        continue;
                }
                uint32_t first = i;
                while (i < h->n && h->counts[i] > 0)
                        i++;
                int32_t offset = (int32_t)(h->lo + (int64_t)first - end);
                put_varint(o, KEY_HIST_POSITIVE_SPAN);
                put_varint(o, 1 + varint_len(zigzag32(offset)) + 1 + varint_len(i - first));
                put_varint(o, KEY_SPAN_OFFSET);
                put_varint(o, zigzag32(offset));
                put_varint(o, KEY_SPAN_LENGTH);
                put_varint(o, i - first);
                end = h->lo + (int64_t)i;
        }
        uint64_t prev = 0;
        for (uint32_t i = 0; i < h->n; i++) {
                if (h->counts[i] == 0)
                        continue;
                put_varint(o, KEY_HIST_POSITIVE_DELTA);
                put_varint(o, zigzag64((int64_t)(h->counts[i] - prev)));
                prev = h->counts[i];
        }
}

static void put_histogram(struct metrics_out *o, const struct metric_series *m) {
        put_varint(o, KEY_HIST_COUNT);
        put_varint(o, m->count);
        put_double(o, KEY_HIST_SUM, m->sum_s);
        put_varint(o, KEY_HIST_SCHEMA);
        put_varint(o, zigzag32(HIST_SCHEMA));
        put_double(o, KEY_HIST_ZERO_THRESHOLD, HIST_ZERO_THRESHOLD_S);
        put_varint(o, KEY_HIST_ZERO_COUNT);
        put_varint(o, m->h ? m->h->zero_count : 0);
        if (m->h)
                put_native_buckets(o, m->h);
}

static void proto_begin(struct metrics_encoder *e, const struct metric_family *f) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        p->metrics.len = 0;
}

static void proto_series(struct metrics_encoder *e, const struct metric_family *f, const struct metric_series *m) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        struct metrics_out *o = &p->m;
        o->len = 0;
        for (size_t i = 0; i < m->n_labels + m->n_extra; i++)
                put_label(o, i < m->n_labels ? &m->labels[i] : &m->extra[i - m->n_labels]);
        if (f->type == METRIC_LATENCY) {
                /* the histogram's message after its length: written apart */
                size_t at = o->len;
                put_histogram(o, m);
                size_t n = o->len - at;
                uint8_t head[16]; /* a key and a varint: never grown */
                struct metrics_out h = { .data = (char *)head, .cap = sizeof head };
                put_varint(&h, KEY_METRIC_HISTOGRAM);
                put_varint(&h, n);
                if (metrics_out_reserve(o, h.len)) {
                        memmove(o->data + at + h.len, o->data + at, n);
                        memcpy(o->data + at, head, h.len);
                        o->len += h.len;
                }
        } else {
                put_varint(o, f->type == METRIC_COUNTER ? KEY_METRIC_COUNTER : KEY_METRIC_GAUGE);
                put_varint(o, 9);
                put_double(o, KEY_VALUE, m->value);
        }
        if (o->oom) {
                e->out->oom = true;
                return;
        }
        put_bytes(&p->metrics, KEY_FAMILY_METRIC, o->data, o->len);
        if (p->metrics.oom)
                e->out->oom = true;
}

/* Writes the family: its length as a varint, then the message. */
static void proto_end(struct metrics_encoder *e, const struct metric_family *f) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        struct metrics_out *o = e->out;
        if (p->metrics.len == 0)
                return; /* a family without series is not written */
        const char *help = f->type == METRIC_LATENCY && f->help_native ? f->help_native : f->help;
        unsigned type = f->type == METRIC_COUNTER   ? TYPE_COUNTER
                        : f->type == METRIC_LATENCY ? TYPE_HISTOGRAM
                                                    : TYPE_GAUGE;
        size_t nn = strlen(f->name), hn = help ? strlen(help) : 0;
        size_t size = 1 + varint_len(nn) + nn + (help ? 1 + varint_len(hn) + hn : 0) + 1 + varint_len(type) +
                      p->metrics.len;
        put_varint(o, size);
        put_bytes(o, KEY_FAMILY_NAME, f->name, nn);
        if (help)
                put_bytes(o, KEY_FAMILY_HELP, help, hn);
        put_varint(o, KEY_FAMILY_TYPE);
        put_varint(o, type);
        metrics_out_put(o, p->metrics.data, p->metrics.len);
        p->metrics.len = 0;
}

static void proto_free(struct metrics_encoder *e) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        metrics_out_done(&p->metrics);
        metrics_out_done(&p->m);
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

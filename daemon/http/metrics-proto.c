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
        struct metrics_out m, h;    /* one series' message, its histogram's */
};

/* A cursor into room reserved beforehand (metrics_out_reserve()): a field
 * is written without a check or a call of its own. */
struct pb {
        uint8_t *p;
};

static struct pb pb_at(struct metrics_out *o) {
        return (struct pb){ (uint8_t *)o->data + o->len };
}

static void pb_done(struct metrics_out *o, struct pb b) {
        o->len = (size_t)((char *)b.p - o->data);
}

static size_t varint_len(uint64_t v) {
        size_t n = 1;
        for (; v > 0x7f; v >>= 7)
                n++;
        return n;
}

static void pb_varint(struct pb *b, uint64_t v) {
        for (; v > 0x7f; v >>= 7)
                *b->p++ = (uint8_t)(v | 0x80);
        *b->p++ = (uint8_t)v;
}

static uint64_t zigzag64(int64_t v) {
        return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static uint64_t zigzag32(int32_t v) {
        return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

static void pb_double(struct pb *b, unsigned key, double d) {
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        *b->p++ = (uint8_t)key;
        for (int k = 0; k < 8; k++)
                *b->p++ = (uint8_t)(u >> (8 * k));
}

static void pb_bytes(struct pb *b, unsigned key, const void *s, size_t n) {
        pb_varint(b, key);
        pb_varint(b, n);
        memcpy(b->p, s, n);
        b->p += n;
}

/* A key, a length and a varint each: at most this many bytes. */
#define PB_FIELD_MAX 11

static void put_label(struct metrics_out *o, const struct metric_label *l) {
        const char *value = l->value ? l->value : "";
        size_t nn = strlen(l->name), vn = strlen(value);
        if (!metrics_out_reserve(o, 3 * PB_FIELD_MAX + nn + vn))
                return;
        struct pb b = pb_at(o);
        pb_varint(&b, KEY_METRIC_LABEL);
        pb_varint(&b, 1 + varint_len(nn) + nn + 1 + varint_len(vn) + vn);
        pb_bytes(&b, KEY_LABEL_NAME, l->name, nn);
        pb_bytes(&b, KEY_LABEL_VALUE, value, vn);
        pb_done(o, b);
}

/* The positive buckets as spans of consecutive non-empty buckets (offset:
 * the gap since the end of the span before, or the first bucket's index)
 * and deltas (each bucket's count minus the one before, across spans). */
static void put_native_buckets(struct pb *b, const struct hist *h) {
        int64_t end = 0; /* index after the last span's last bucket */
        for (uint32_t i = 0; i < h->n;) {
                if (h->counts[i] == 0) {
                        i++;
                        continue;
                }
                uint32_t first = i;
                while (i < h->n && h->counts[i] > 0)
                        i++;
                uint64_t offset = zigzag32((int32_t)(h->lo + (int64_t)first - end));
                pb_varint(b, KEY_HIST_POSITIVE_SPAN);
                pb_varint(b, 1 + varint_len(offset) + 1 + varint_len(i - first));
                pb_varint(b, KEY_SPAN_OFFSET);
                pb_varint(b, offset);
                pb_varint(b, KEY_SPAN_LENGTH);
                pb_varint(b, i - first);
                end = h->lo + (int64_t)i;
        }
        uint64_t prev = 0;
        for (uint32_t i = 0; i < h->n; i++) {
                if (h->counts[i] == 0)
                        continue;
                pb_varint(b, KEY_HIST_POSITIVE_DELTA);
                pb_varint(b, zigzag64((int64_t)(h->counts[i] - prev)));
                prev = h->counts[i];
        }
}

/* The histogram's message, then it as a field of the series' message. */
static void put_histogram(struct proto_encoder *p, const struct metric_series *m) {
        struct metrics_out *h = &p->h;
        h->len = 0;
        /* a span (3 fields) and a delta (1) at most per bucket */
        if (!metrics_out_reserve(h, 5 * PB_FIELD_MAX + (m->h ? (size_t)m->h->n * 4 * PB_FIELD_MAX : 0)))
                return;
        struct pb b = pb_at(h);
        pb_varint(&b, KEY_HIST_COUNT);
        pb_varint(&b, m->count);
        pb_double(&b, KEY_HIST_SUM, m->sum_s);
        pb_varint(&b, KEY_HIST_SCHEMA);
        pb_varint(&b, zigzag32(HIST_SCHEMA));
        pb_double(&b, KEY_HIST_ZERO_THRESHOLD, HIST_ZERO_THRESHOLD_S);
        pb_varint(&b, KEY_HIST_ZERO_COUNT);
        pb_varint(&b, m->h ? m->h->zero_count : 0);
        if (m->h)
                put_native_buckets(&b, m->h);
        pb_done(h, b);
        if (!metrics_out_reserve(&p->m, 2 * PB_FIELD_MAX + h->len))
                return;
        b = pb_at(&p->m);
        pb_bytes(&b, KEY_METRIC_HISTOGRAM, h->data, h->len);
        pb_done(&p->m, b);
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
        if (f->type == METRIC_LATENCY)
                put_histogram(p, m);
        else if (metrics_out_reserve(o, 2 * PB_FIELD_MAX + 9)) {
                struct pb b = pb_at(o);
                pb_varint(&b, f->type == METRIC_COUNTER ? KEY_METRIC_COUNTER : KEY_METRIC_GAUGE);
                pb_varint(&b, 9);
                pb_double(&b, KEY_VALUE, m->value);
                pb_done(o, b);
        }
        if (o->oom || p->h.oom || !metrics_out_reserve(&p->metrics, 2 * PB_FIELD_MAX + o->len)) {
                e->out->oom = true;
                return;
        }
        struct pb b = pb_at(&p->metrics);
        pb_bytes(&b, KEY_FAMILY_METRIC, o->data, o->len);
        pb_done(&p->metrics, b);
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
        if (!metrics_out_reserve(o, 4 * PB_FIELD_MAX + size))
                return;
        struct pb b = pb_at(o);
        pb_varint(&b, size);
        pb_bytes(&b, KEY_FAMILY_NAME, f->name, nn);
        if (help)
                pb_bytes(&b, KEY_FAMILY_HELP, help, hn);
        pb_varint(&b, KEY_FAMILY_TYPE);
        pb_varint(&b, type);
        memcpy(b.p, p->metrics.data, p->metrics.len);
        b.p += p->metrics.len;
        pb_done(o, b);
        o->data[o->len] = 0;
        p->metrics.len = 0;
}

static void proto_free(struct metrics_encoder *e) {
        struct proto_encoder *p = (struct proto_encoder *)e;
        metrics_out_done(&p->metrics);
        metrics_out_done(&p->m);
        metrics_out_done(&p->h);
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

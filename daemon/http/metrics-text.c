/* SPDX-License-Identifier: MIT */
#include "http/metrics-text.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "util.h"

/* Text format 0.0.4: "label_value can be any sequence of UTF-8 characters,
 * but the backslash (\), double-quote ("), and line feed (\n) characters
 * have to be escaped as \\, \", and \n, respectively." */
static void put_escaped(struct metrics_out *o, const char *s, size_t len) {
        size_t start = 0;
        for (size_t i = 0; i < len; i++) {
                const char *rep = s[i] == '\\' ? "\\\\" : s[i] == '"' ? "\\\"" : s[i] == '\n' ? "\\n" : NULL;
                if (!rep)
                        continue;
                metrics_out_put(o, s + start, i - start);
                metrics_out_put(o, rep, 2);
                start = i + 1;
        }
        metrics_out_put(o, s + start, len - start);
}

void metrics_put_label_value(struct metrics_out *o, const char *s) {
        if (!s)
                return;
        size_t len = strlen(s);
        if (utf8_is_valid(s, len)) {
                put_escaped(o, s, len);
                return;
        }
        _cleanup_free_ char *clean = utf8_sanitize(s, len);
        if (!clean) {
                o->oom = true;
                return;
        }
        put_escaped(o, clean, strlen(clean));
}

void metrics_format_value(double v, char *buf, size_t size) {
        if (isnan(v))
                snprintf(buf, size, "NaN");
        else if (isinf(v))
                snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
        else if (v == 0)
                snprintf(buf, size, "0"); /* and not "-0" */
        else if (v == trunc(v) && fabs(v) < 0x1p53)
                snprintf(buf, size, "%.0f", v); /* counters and bytes: exact, no exponent */
        else
                /* the fewest digits that read back as v (%.17g always does) */
                for (int prec = 15; prec <= 17; prec++) {
                        snprintf(buf, size, "%.*g", prec, v);
                        if (strtod(buf, NULL) == v)
                                break;
                }
}

static void put_labels(struct metrics_out *o, const struct metric_label *v, size_t n, bool *first) {
        for (size_t i = 0; i < n; i++) {
                metrics_out_puts(o, *first ? "{" : ",");
                *first = false;
                metrics_out_puts(o, v[i].name);
                metrics_out_puts(o, "=\"");
                metrics_put_label_value(o, v[i].value);
                metrics_out_puts(o, "\"");
        }
}

/* name+suffix{labels,extra,more} value */
static void put_line(struct metrics_out *o, const char *name, const char *suffix, const struct metric_series *s,
                     const struct metric_label *more, double v) {
        bool first = true;
        char num[40];
        metrics_out_puts(o, name);
        metrics_out_puts(o, suffix);
        put_labels(o, s->labels, s->n_labels, &first);
        put_labels(o, s->extra, s->n_extra, &first);
        if (more)
                put_labels(o, more, 1, &first);
        metrics_out_puts(o, first ? " " : "} ");
        metrics_format_value(v, num, sizeof num);
        metrics_out_puts(o, num);
        metrics_out_puts(o, "\n");
}

/* The text encoder writes a family's header before its first series: a
 * family without any is not written at all. */
struct text_encoder {
        struct metrics_encoder e; /* first */
        const struct metric_family *pending;
};

static void text_begin(struct metrics_encoder *e, const struct metric_family *f) {
        ((struct text_encoder *)e)->pending = f;
}

static void put_header(struct metrics_out *o, const struct metric_family *f) {
        static const char *const type_names[] = {
                [METRIC_GAUGE] = "gauge", [METRIC_COUNTER] = "counter", [METRIC_LATENCY] = "summary"
        };
        metrics_out_puts(o, "# HELP ");
        metrics_out_puts(o, f->name);
        metrics_out_puts(o, " ");
        metrics_out_puts(o, f->help); /* ours: no backslash or line feed to escape */
        metrics_out_puts(o, "\n# TYPE ");
        metrics_out_puts(o, f->name);
        metrics_out_puts(o, " ");
        metrics_out_puts(o, type_names[f->type]);
        metrics_out_puts(o, "\n");
}

static void text_series(struct metrics_encoder *e, const struct metric_family *f, const struct metric_series *s) {
        struct text_encoder *t = (struct text_encoder *)e;
        if (t->pending) {
                put_header(e->out, t->pending);
                t->pending = NULL;
        }
        if (f->type != METRIC_LATENCY) {
                put_line(e->out, f->name, NULL, s, NULL, s->value);
                return;
        }
        for (size_t k = 0; s->has_quantiles && k < METRIC_QUANTILES; k++) {
                const struct metric_label q = { "quantile", metric_quantile_labels[k] };
                put_line(e->out, f->name, NULL, s, &q, s->quantile_s[k]);
        }
        if (isfinite(s->sum_s)) /* an overflowed sum is no counter: left out */
                put_line(e->out, f->name, "_sum", s, NULL, s->sum_s);
        put_line(e->out, f->name, "_count", s, NULL, (double)s->count);
}

static void text_end(struct metrics_encoder *e, const struct metric_family *f) {
        ((struct text_encoder *)e)->pending = NULL;
}

static void text_free(struct metrics_encoder *e) {
        free(e);
}

int metrics_text_encoder(struct metrics_out *out, struct metrics_encoder **ret) {
        struct text_encoder *t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->e = (struct metrics_encoder){
                .begin = text_begin, .series = text_series, .end = text_end, .free = text_free, .out = out
        };
        *ret = &t->e;
        return 0;
}

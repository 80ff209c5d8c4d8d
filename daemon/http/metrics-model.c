/* SPDX-License-Identifier: MIT */
/* What the model of GET /metrics shares between its producer and its
 * encoders (metrics-model.h): the quantiles, the output buffer. */
#include "http/metrics-model.h"

#include <stdlib.h>
#include <string.h>

const double metric_quantiles[METRIC_QUANTILES] = { 0.5, 0.9, 0.99 };
const char *const metric_quantile_labels[METRIC_QUANTILES] = { "0.5", "0.9", "0.99" };

void metrics_out_done(struct metrics_out *o) {
        free(o->data);
        *o = (struct metrics_out){};
}

bool metrics_out_reserve(struct metrics_out *o, size_t extra) {
        if (o->oom)
                return false;
        if (o->len + extra < o->cap)
                return true;
        size_t cap = o->cap ? o->cap : 4096;
        while (cap <= o->len + extra) {
                if (cap > SIZE_MAX / 2) {
                        o->oom = true;
                        return false;
                }
                cap *= 2;
        }
        char *n = realloc(o->data, cap);
        if (!n) {
                o->oom = true;
                return false;
        }
        o->data = n;
        o->cap = cap;
        return true;
}

void metrics_out_put(struct metrics_out *o, const char *s, size_t len) {
        if (!metrics_out_reserve(o, len))
                return;
        memcpy(o->data + o->len, s, len);
        o->len += len;
        o->data[o->len] = 0;
}

void metrics_out_puts(struct metrics_out *o, const char *s) {
        if (s)
                metrics_out_put(o, s, strlen(s));
}

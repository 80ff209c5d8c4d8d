/* SPDX-License-Identifier: MIT */
/* libFuzzer target for daemon/analyze/histogram.c:
 *  - the input as an encoded histogram: if it decodes, it re-encodes to the
 *    same bytes (the same count, zero bucket and extremes when it was the
 *    older version 1), decodes again to an equal histogram, and its
 *    quantiles lie within [min, max]; merged as it is encoded
 *    (hist_merge_encoded) into a histogram of its own, it is what merging
 *    the decoded one is, and what does not decode leaves that one as it
 *    was;
 *  - the input as little-endian doubles to add: count, min and max as
 *    tracked here, the buckets add up, a histogram of the first half merged
 *    with one of the second equals the histogram of all, and it round-trips.
 *
 *   tools/fuzz.sh 60 histogram */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/histogram.h"
#include "util.h"

#include "fuzz/fuzz-assert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t bucket_at(const struct hist *h, int64_t idx) {
        if (idx < h->lo || idx >= (int64_t)h->lo + h->n)
                return 0;
        return h->counts[idx - h->lo];
}

static bool same_buckets(const struct hist *a, const struct hist *b) {
        if (a->count != b->count || a->zero_count != b->zero_count)
                return false;
        int64_t lo = a->lo < b->lo ? a->lo : b->lo;
        int64_t ha = (int64_t)a->lo + a->n, hb = (int64_t)b->lo + b->n;
        for (int64_t i = lo; i < (ha > hb ? ha : hb); i++)
                if (bucket_at(a, i) != bucket_at(b, i))
                        return false;
        return true;
}

static bool same_bits(double a, double b) {
        return memcmp(&a, &b, sizeof a) == 0;
}

static void check_consistent(const struct hist *h) {
        uint64_t t = 0;
        for (uint32_t k = 0; k < h->n; k++)
                t += h->counts[k];
        fuzz_assert(t == h->count - h->zero_count);
        fuzz_assert(h->zero_count <= h->count);
        if (h->count == 0) {
                fuzz_assert(isnan(hist_quantile(h, 0.5)));
                return;
        }
        fuzz_assert(h->min <= h->max);
        static const double qs[] = { 0, 0.5, 0.99, 1 };
        for (size_t k = 0; k < ELEMENTSOF(qs); k++) {
                double q = hist_quantile(h, qs[k]);
                fuzz_assert(q >= h->min && q <= h->max);
        }
        fuzz_assert(hist_mean(h) >= 0 && hist_stddev(h) >= 0);
}

static void round_trip(const struct hist *h) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        if (hist_encode(h, &buf, &len) < 0)
                return;
        struct hist d;
        hist_init(&d);
        fuzz_assert(hist_decode(&d, buf, len) == 0);
        fuzz_assert(same_buckets(h, &d));
        fuzz_assert(same_bits(h->sum, d.sum) && same_bits(h->sum_sq, d.sum_sq));
        fuzz_assert(same_bits(h->min, d.min) && same_bits(h->max, d.max));
        hist_done(&d);
}

/* The input merged as it is encoded into a histogram holding some values
 * already: the same as merging it decoded (h, NULL: it did not decode, and
 * the target stays as it was). */
static void merge_encoded(const uint8_t *data, size_t size, const struct hist *h) {
        struct hist a, b;
        hist_init(&a);
        hist_init(&b);
        fuzz_assert(hist_add(&a, 12.5, 3) == 0 && hist_add(&a, 0.25, 1) == 0);
        fuzz_assert(hist_merge(&b, &a) == 0);
        int r = hist_merge_encoded(&a, data, size);
        if (!h)
                fuzz_assert(r == -EINVAL);
        else if (hist_merge(&b, h) < 0)
                fuzz_assert(r < 0);
        if (r < 0) {
                /* untouched: still b's values before any merge */
                struct hist c;
                hist_init(&c);
                fuzz_assert(hist_add(&c, 12.5, 3) == 0 && hist_add(&c, 0.25, 1) == 0);
                fuzz_assert(same_buckets(&a, &c) && same_bits(a.sum, c.sum) && same_bits(a.max, c.max));
                hist_done(&c);
        } else {
                fuzz_assert(same_buckets(&a, &b) && same_bits(a.sum, b.sum) && same_bits(a.sum_sq, b.sum_sq));
                fuzz_assert(same_bits(a.min, b.min) && same_bits(a.max, b.max));
        }
        hist_done(&a);
        hist_done(&b);
}

static void fuzz_decode(const uint8_t *data, size_t size) {
        struct hist h;
        hist_init(&h);
        if (hist_decode(&h, data, size) < 0) {
                fuzz_assert(h.count == 0 && h.zero_count == 0 && isnan(hist_quantile(&h, 0.5)));
                merge_encoded(data, size, NULL);
                hist_done(&h);
                return;
        }
        merge_encoded(data, size, &h);
        check_consistent(&h);

        /* canonical: the same bytes again; version 1 comes back as the
         * current version, nothing lost */
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        if (hist_encode(&h, &buf, &len) == 0) {
                if (data[0] == HIST_ENCODING_VERSION)
                        fuzz_assert(len == size && memcmp(buf, data, size) == 0);
                else
                        fuzz_assert(buf[0] == HIST_ENCODING_VERSION && data[0] == 1);
                round_trip(&h);
        }

        /* merging with itself and a copy keeps it consistent */
        struct hist m;
        hist_init(&m);
        if (hist_merge(&m, &h) == 0) {
                fuzz_assert(same_buckets(&m, &h));
                if (hist_merge(&m, &h) == 0)
                        check_consistent(&m);
        }
        hist_done(&m);
        hist_done(&h);
}

static void fuzz_add(const uint8_t *data, size_t size) {
        size_t n = size / 8;
        struct hist all, first, second;
        hist_init(&all);
        hist_init(&first);
        hist_init(&second);
        uint64_t count = 0;
        double min = 0, max = 0;
        bool all_ok = true;

        for (size_t k = 0; k < n; k++) {
                uint64_t u = 0;
                for (int b = 0; b < 8; b++)
                        u |= (uint64_t)data[k * 8 + (size_t)b] << (8 * b);
                double v;
                memcpy(&v, &u, sizeof v);
                uint64_t weight = 1 + (u & 3); /* from the mantissa's last bits */

                int r = hist_add(&all, v, weight);
                if (isnan(v) || isinf(v) || v < 0) {
                        fuzz_assert(r == -EINVAL);
                        continue;
                }
                fuzz_assert(r == 0 || r == -ERANGE);
                if (r < 0) {
                        all_ok = false;
                        continue;
                }
                if (v == 0)
                        v = 0; /* stored as +0 */
                if (count == 0 || v < min)
                        min = v;
                if (count == 0 || v > max)
                        max = v;
                count += weight;
                fuzz_assert(all.count == count);
                fuzz_assert(same_bits(all.min, min) && same_bits(all.max, max));

                if (hist_add(k < n / 2 ? &first : &second, v, weight) < 0)
                        all_ok = false;
        }
        check_consistent(&all);
        round_trip(&all);

        if (all_ok && hist_merge(&first, &second) == 0) {
                fuzz_assert(same_buckets(&first, &all));
                fuzz_assert(first.min == all.min && first.max == all.max);
                if (all.count)
                        fuzz_assert(same_bits(hist_quantile(&first, 0.5), hist_quantile(&all, 0.5)));
        }

        hist_done(&all);
        hist_done(&first);
        hist_done(&second);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        fuzz_decode(data, size);
        fuzz_add(data, size);
        return 0;
}

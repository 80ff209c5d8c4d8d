/* SPDX-License-Identifier: MIT */
/* daemon/analyze/histogram.c, the encoding: round trip, every truncation,
 * random bit flips, crafted bad inputs, version 1 (the log buckets before
 * schema 7) through a copy of its encoder, and the fuzz target on random
 * bytes. --write-corpus writes the current version's seeds; the v1-* seeds
 * were written by the version-1 code.
 *
 *   test-histogram-encoding                    run the checks
 *   test-histogram-encoding --write-corpus DIR write the fuzz seed corpus */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/histogram.h"
#include "hist-values.h"
#include "tap.h"
#include "util.h"

/* bucket_at(), same_buckets() and same_bits() come with the fuzz target,
 * which test_fuzz_target() runs. */
#include "fuzz/fuzz-histogram.c"

static bool hist_equal(const struct hist *a, const struct hist *b) {
        return same_buckets(a, b) && same_bits(a->sum, b->sum) && same_bits(a->sum_sq, b->sum_sq) &&
               same_bits(a->min, b->min) && same_bits(a->max, b->max);
}

/* ---- encoding ------------------------------------------------------------- */

/* A tiny writer for crafted inputs. */
struct wbuf {
        uint8_t b[1 << 16];
        size_t n;
};

static void w_u8(struct wbuf *w, uint8_t v) {
        w->b[w->n++] = v;
}
static void w_varint(struct wbuf *w, uint64_t v) {
        while (v >= 0x80) {
                w_u8(w, (uint8_t)(v | 0x80));
                v >>= 7;
        }
        w_u8(w, (uint8_t)v);
}
static void w_zigzag(struct wbuf *w, int64_t v) {
        w_varint(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}
static void w_double(struct wbuf *w, double d) {
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        for (int k = 0; k < 8; k++)
                w_u8(w, (uint8_t)(u >> (8 * k)));
}
static void w_doubles(struct wbuf *w, double sum, double sum_sq, double min, double max) {
        w_double(w, sum);
        w_double(w, sum_sq);
        w_double(w, min);
        w_double(w, max);
}

/* After a failed decode: empty, usable, still consistent. */
static void check_empty_valid(struct hist *h) {
        CHECK_EQ_INT(h->count, 0);
        CHECK_EQ_INT(h->zero_count, 0);
        CHECK_EQ_INT(bucket_total(h), 0);
        CHECK(h->sum == 0 && h->sum_sq == 0 && h->min == 0 && h->max == 0);
        CHECK(isnan(hist_quantile(h, 0.5)));
}

static int decode_bytes(struct hist *h, const struct wbuf *w) {
        return hist_decode(h, w->b, w->n);
}

/* The middle of bucket i + 1, in milliseconds. */
static double bucket_value(int i) {
        return 1000.0 * exp2((i + 0.5) / 128.0);
}

/* A good encoding by hand: 3 values, 1 zero, buckets 100 (x1) and 103 (x1):
 * version, count, zero count, first bucket, buckets, then (delta, count). */
static void good_encoding(struct wbuf *w) {
        static const uint64_t rest[] = { 2, 0, 1, 3, 1 };
        double v100 = bucket_value(99), v103 = bucket_value(102);
        w->n = 0;
        w_u8(w, HIST_ENCODING_VERSION);
        w_varint(w, 3);
        w_varint(w, 1);
        w_zigzag(w, 100);
        for (size_t i = 0; i < ELEMENTSOF(rest); i++)
                w_varint(w, rest[i]);
        w_doubles(w, v100 + v103, v100 * v100 + v103 * v103, 0, v103);
}

static void test_encoding_good(void) {
        struct hist h;
        hist_init(&h);
        struct wbuf w;
        double v100 = bucket_value(99), v103 = bucket_value(102);
        good_encoding(&w);
        CHECK_EQ_INT(decode_bytes(&h, &w), 0);
        CHECK_EQ_INT(h.count, 3);
        CHECK_EQ_INT(h.zero_count, 1);
        CHECK_EQ_INT(bucket_at(&h, 100), 1);
        CHECK_EQ_INT(bucket_at(&h, 103), 1);
        CHECK_EQ_INT(bucket_total(&h), 2);
        {
                struct hist same;
                hist_init(&same);
                CHECK_EQ_INT(hist_add(&same, 0, 1), 0);
                CHECK_EQ_INT(hist_add(&same, v100, 1), 0);
                CHECK_EQ_INT(hist_add(&same, v103, 1), 0);
                CHECK(same_buckets(&same, &h));
                _cleanup_free_ uint8_t *enc = NULL;
                size_t len;
                CHECK_EQ_INT(hist_encode(&same, &enc, &len), 0);
                CHECK(len == w.n && memcmp(enc, w.b, len) == 0); /* the format, byte for byte */
                hist_done(&same);
        }

        /* the empty histogram */
        w.n = 0;
        w_u8(&w, HIST_ENCODING_VERSION);
        for (int k = 0; k < 4; k++)
                w_varint(&w, 0);
        w_doubles(&w, 0, 0, 0, 0);
        CHECK_EQ_INT(decode_bytes(&h, &w), 0);
        check_empty_valid(&h);
        CHECK_EQ_INT(w.n, 37);

        hist_done(&h);
}

/* Inputs hist_decode() must refuse. */
struct bad_case {
        const char *label;
        uint8_t b[128];
        size_t n;
};

static size_t bad_cases(struct bad_case *cases) {
        struct wbuf w;
        size_t ncases = 0;
#define ADD_CASE(lbl, ...)                         \
        do {                                       \
                w.n = 0;                           \
                __VA_ARGS__;                       \
                cases[ncases].label = (lbl);       \
                memcpy(cases[ncases].b, w.b, w.n); \
                cases[ncases].n = w.n;             \
                ncases++;                          \
        } while (0)
#define HDR(ver, count, zero, lo, nb) \
        w_u8(&w, ver), w_varint(&w, count), w_varint(&w, zero), w_zigzag(&w, lo), w_varint(&w, nb)
#define DBL_OK w_doubles(&w, 10, 100, 1, 9)

        ADD_CASE("version 0", HDR(0, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("version 3", HDR(3, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("zero > count", HDR(2, 1, 2, 0, 0), DBL_OK);
        ADD_CASE("counts short", HDR(2, 3, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 2), DBL_OK);
        ADD_CASE("counts over", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 2), DBL_OK);
        ADD_CASE("no buckets, lo", HDR(2, 1, 1, 5, 0), DBL_OK);
        ADD_CASE("lo below range", HDR(2, 1, 0, -3827, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("lo above range", HDR(2, 1, 0, 2553, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("lo huge", HDR(2, 1, 0, INT64_MIN, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("index beyond range", HDR(2, 2, 0, 2552, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, 1),
                 w_varint(&w, 1), DBL_OK);
        ADD_CASE("delta wraps", HDR(2, 2, 0, 5, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, UINT64_MAX),
                 w_varint(&w, 1), DBL_OK);
        ADD_CASE("first delta not 0", HDR(2, 1, 0, 5, 1), w_varint(&w, 1), w_varint(&w, 1), DBL_OK);
        ADD_CASE("repeated index", HDR(2, 2, 0, 5, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, 0),
                 w_varint(&w, 1), DBL_OK);
        ADD_CASE("empty bucket listed", HDR(2, 1, 0, 5, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, 1),
                 w_varint(&w, 0), DBL_OK);
        ADD_CASE("bucket counts overflow", HDR(2, 0, 0, 5, 2), w_varint(&w, 0), w_varint(&w, 1ull << 63),
                 w_varint(&w, 1), w_varint(&w, 1ull << 63), w_doubles(&w, 0, 0, 0, 0));
        ADD_CASE("nb huge", HDR(2, 1, 0, 5, UINT64_MAX), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("nb beyond the bytes", HDR(2, 1, 0, 5, 3000), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("overlong varint", w_u8(&w, 2), w_u8(&w, 0x81), w_u8(&w, 0x00), w_varint(&w, 0), w_zigzag(&w, 5),
                 w_varint(&w, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("varint 11 bytes", w_u8(&w, 2), memset(w.b + w.n, 0xff, 10), w.n += 10, w_u8(&w, 0x01),
                 w_varint(&w, 0), w_zigzag(&w, 0), w_varint(&w, 0), DBL_OK);
        ADD_CASE("varint over 64 bits", w_u8(&w, 2), memset(w.b + w.n, 0xff, 9), w.n += 9, w_u8(&w, 0x02),
                 w_varint(&w, 0), w_zigzag(&w, 0), w_varint(&w, 0), DBL_OK);
        ADD_CASE("trailing byte", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK, w_u8(&w, 0));
        ADD_CASE("doubles short", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_double(&w, 1),
                 w_double(&w, 1), w_double(&w, 1));
        ADD_CASE("sum NaN", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, NAN, 1, 1, 1));
        ADD_CASE("sum_sq inf", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, INFINITY, 1, 1));
        ADD_CASE("min -inf", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, -INFINITY, 1));
        ADD_CASE("max NaN", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, 1, NAN));
        ADD_CASE("min negative", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, -1, 1));
        ADD_CASE("min -0", HDR(2, 1, 1, 0, 0), w_doubles(&w, 0, 0, -0.0, 0));
        ADD_CASE("sum negative", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, -1, 1, 1, 1));
        ADD_CASE("min > max", HDR(2, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, 2, 1));
        ADD_CASE("empty with a sum", HDR(2, 0, 0, 0, 0), w_doubles(&w, 1, 0, 0, 0));
        ADD_CASE("empty with a max", HDR(2, 0, 0, 0, 0), w_doubles(&w, 0, 0, 0, 1));
        /* version 1's own range and rules */
        ADD_CASE("v1 lo below range", HDR(1, 1, 0, -1382, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("v1 lo above range", HDR(1, 1, 0, 2074, 1), w_varint(&w, 0), w_varint(&w, 1), DBL_OK);
        ADD_CASE("v1 index beyond range", HDR(1, 2, 0, 2073, 2), w_varint(&w, 0), w_varint(&w, 1), w_varint(&w, 1),
                 w_varint(&w, 1), DBL_OK);
        ADD_CASE("v1 counts short", HDR(1, 3, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 2), DBL_OK);
        ADD_CASE("v1 min > max", HDR(1, 1, 0, 5, 1), w_varint(&w, 0), w_varint(&w, 1), w_doubles(&w, 1, 1, 2, 1));
        ADD_CASE("nothing", (void)0);
        ADD_CASE("version only", w_u8(&w, 2));

#undef ADD_CASE
#undef HDR
#undef DBL_OK
        return ncases;
}

/* Each bad input decoded over a good histogram leaves it empty and usable. */
static void test_encoding_crafted(void) {
        struct hist h;
        hist_init(&h);
        struct wbuf w;
        struct bad_case cases[64];
        size_t ncases = bad_cases(cases);
        for (size_t c = 0; c < ncases; c++) {
                good_encoding(&w);
                CHECK_EQ_INT(decode_bytes(&h, &w), 0);
                CHECK_EQ_INT(h.count, 3);
                int r = hist_decode(&h, cases[c].b, cases[c].n);
                if (r != -EINVAL)
                        fprintf(stderr, "crafted input \"%s\" decoded: %d\n", cases[c].label, r);
                CHECK_EQ_INT(r, -EINVAL);
                check_empty_valid(&h);
                CHECK_EQ_INT(hist_add(&h, 2.0, 1), 0); /* still usable */
                CHECK_EQ_INT(h.count, 1);
        }
        CHECK_EQ_INT(hist_decode(&h, NULL, 0), -EINVAL);
        check_empty_valid(&h);

        hist_done(&h);
}

/* Every prefix of good encodings, then random bit flips. */
static void test_encoding_damage(void) {
        double *v = gen_values(&dists[1], 99, 2000);
        struct hist h[4];
        for (int k = 0; k < 4; k++)
                hist_init(&h[k]);
        fill(&h[0], v, 2000);
        CHECK_EQ_INT(hist_add(&h[0], 0, 3), 0);
        CHECK_EQ_INT(hist_add(&h[0], 1e12, 2), 0);
        CHECK_EQ_INT(hist_add(&h[1], 1e-7, 1), 0);
        CHECK_EQ_INT(hist_add(&h[2], 42.0, 1ull << 40), 0);
        /* h[3] empty */

        struct hist d;
        hist_init(&d);
        rng_seed(1234);
        unsigned decoded_flips = 0, flips = 0;
        for (int k = 0; k < 4; k++) {
                _cleanup_free_ uint8_t *buf = NULL;
                size_t len;
                CHECK_EQ_INT(hist_encode(&h[k], &buf, &len), 0);
                CHECK_EQ_INT(hist_decode(&d, buf, len), 0);
                CHECK(hist_equal(&d, &h[k]));

                for (size_t cut = 0; cut < len; cut++) {
                        /* an exact-size copy so ASan sees any read past the end */
                        uint8_t *p = malloc(cut ? cut : 1);
                        memcpy(p, buf, cut);
                        CHECK_EQ_INT(hist_decode(&d, p, cut), -EINVAL);
                        check_empty_valid(&d);
                        free(p);
                }

                uint8_t *p = malloc(len);
                for (int t = 0; t < 20000; t++) {
                        memcpy(p, buf, len);
                        int nflips = 1 + (int)(rng_next() % 3);
                        for (int f = 0; f < nflips; f++) {
                                size_t bit = rng_next() % (len * 8);
                                p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                        }
                        if (memcmp(p, buf, len) == 0)
                                continue;
                        flips++;
                        int r = hist_decode(&d, p, len);
                        CHECK(r == 0 || r == -EINVAL);
                        if (r < 0) {
                                check_empty_valid(&d);
                                continue;
                        }
                        /* it decoded (a flipped double, say): canonical (unless
                         * it became version 1), consistent */
                        decoded_flips++;
                        _cleanup_free_ uint8_t *again = NULL;
                        size_t alen;
                        CHECK_EQ_INT(hist_encode(&d, &again, &alen), 0);
                        CHECK(p[0] == 1 || (alen == len && memcmp(again, p, len) == 0));
                        CHECK_EQ_INT(bucket_total(&d), d.count - d.zero_count);
                        if (d.count) {
                                double q = hist_quantile(&d, 0.5);
                                CHECK(q >= d.min && q <= d.max);
                        }
                }
                free(p);
        }
        printf("bit flips: %u tried, %u still decoded (all canonical)\n", flips, decoded_flips);

        hist_done(&d);
        for (int k = 0; k < 4; k++)
                hist_done(&h[k]);
        free(v);
}

/* ---- version 1 ------------------------------------------------------------ */

/* The encoder of version 1, kept here only: log buckets of gamma =
 * 1.005 / 0.995 over milliseconds, i in [-1381, 2073], index(v) =
 * ceil(ln(v) / ln(gamma)). */
static void v1_encode(struct wbuf *w, const double *v, size_t n, const uint64_t *weight) {
        enum { V1_MIN = -1381, V1_MAX = 2073 };
        static uint64_t buckets[V1_MAX - V1_MIN + 1];
        uint64_t count = 0, zero = 0;
        double sum = 0, sum_sq = 0, min = 0, max = 0;
        memset(buckets, 0, sizeof buckets);
        for (size_t k = 0; k < n; k++) {
                double x = v[k];
                uint64_t c = weight ? weight[k] : 1;
                if (x < 1e-6)
                        zero += c;
                else
                        buckets[(x > 1e9 ? V1_MAX : (int)ceil(log(x) * 99.99916666111281)) - V1_MIN] += c;
                sum += x * (double)c;
                sum_sq += x * x * (double)c;
                if (count == 0 || x < min)
                        min = x;
                if (count == 0 || x > max)
                        max = x;
                count += c;
        }
        int first = -1, last = -1, nb = 0;
        for (int i = 0; i <= V1_MAX - V1_MIN; i++)
                if (buckets[i]) {
                        if (first < 0)
                                first = i;
                        last = i;
                        nb++;
                }
        w->n = 0;
        w_u8(w, 1);
        w_varint(w, count);
        w_varint(w, zero);
        w_zigzag(w, first < 0 ? 0 : first + V1_MIN);
        w_varint(w, (uint64_t)nb);
        for (int i = first, prev = first; first >= 0 && i <= last; i++)
                if (buckets[i]) {
                        w_varint(w, (uint64_t)(i - prev));
                        w_varint(w, buckets[i]);
                        prev = i;
                }
        w_doubles(w, sum, sum_sq, min, max);
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* The worst relative error of 1001 quantiles of h against sorted[0..n). */
static double worst_quantile_error(const struct hist *h, const double *sorted, size_t n) {
        double worst = 0;
        for (int p = 0; p <= 1000; p++) {
                double want = sorted[(size_t)floor(p / 1000.0 * (double)(n - 1))], got = hist_quantile(h, p / 1000.0);
                double e = got == want ? 0 : fabs(got - want) / want;
                CHECK(got >= h->min && got <= h->max);
                if (e > worst)
                        worst = e;
        }
        return worst;
}

/* Version 1 histograms (slices stored before the base-2 buckets) decode
 * into the current buckets: count, zero bucket, sum and extremes exact,
 * quantiles within 0.5% + HIST_RELATIVE_ACCURACY, alone and merged with
 * new ones; they re-encode as the current version. */
static void test_version1(void) {
        enum { N = 20000 };
        const double bound = 1.005 * (1 + HIST_RELATIVE_ACCURACY) - 1 + 1e-9;
        static struct wbuf w;
        struct hist d, again, native;
        hist_init(&d);
        hist_init(&again);
        hist_init(&native);
        for (size_t k = 0; k < N_DISTS; k++) {
                double *v = gen_values(&dists[k], 77 + k, 2 * N);
                v[0] = 0; /* the zero bucket, the range's ends */
                v[1] = 1e-6;
                v[2] = 2e9;
                v1_encode(&w, v, N, NULL);
                CHECK_EQ_INT(decode_bytes(&d, &w), 0);
                CHECK_EQ_INT(d.count, N);
                CHECK_EQ_INT(d.zero_count, 1);
                CHECK_EQ_INT(bucket_total(&d), N - 1);
                double sum = 0, min = v[0], max = v[0];
                for (size_t i = 0; i < N; i++) {
                        sum += v[i];
                        min = v[i] < min ? v[i] : min;
                        max = v[i] > max ? v[i] : max;
                }
                CHECK(d.sum == sum && d.min == min && d.max == max);

                /* alone */
                double *sorted = malloc(2 * N * sizeof sorted[0]);
                memcpy(sorted, v, N * sizeof sorted[0]);
                qsort(sorted, N, sizeof sorted[0], cmp_double);
                double e1 = worst_quantile_error(&d, sorted, N);
                CHECK(e1 <= bound);

                /* the current version, byte for byte canonical again */
                _cleanup_free_ uint8_t *enc = NULL;
                size_t len;
                CHECK_EQ_INT(hist_encode(&d, &enc, &len), 0);
                CHECK(enc[0] == HIST_ENCODING_VERSION);
                CHECK_EQ_INT(hist_decode(&again, enc, len), 0);
                CHECK(hist_equal(&again, &d));

                /* merged with a histogram of new values */
                hist_reset(&native);
                fill(&native, v + N, N);
                CHECK_EQ_INT(hist_merge(&d, &native), 0);
                memcpy(sorted, v, 2 * N * sizeof sorted[0]);
                qsort(sorted, 2 * N, sizeof sorted[0], cmp_double);
                double e2 = worst_quantile_error(&d, sorted, 2 * N);
                CHECK(e2 <= bound);
                printf("version 1 %-18s worst relative error %.5f, merged with new values %.5f (bound %.5f)\n",
                       dists[k].name, e1, e2, bound);
                free(sorted);
                free(v);
        }

        /* one value, weights: exact through the clamp to [min, max] */
        static const double one[] = { 5.0 };
        static const uint64_t weights[] = { 1000 };
        v1_encode(&w, one, 1, weights);
        CHECK_EQ_INT(decode_bytes(&d, &w), 0);
        CHECK(d.count == 1000 && hist_quantile(&d, 0.5) == 5.0);
        CHECK_EQ_INT(bucket_total(&d), 1000);
        hist_reset(&again);
        CHECK_EQ_INT(hist_add(&again, 5.0, 1000), 0);
        CHECK(same_buckets(&d, &again));

        hist_done(&d);
        hist_done(&again);
        hist_done(&native);
}

/* ---- fuzz seed corpus ------------------------------------------------------ */

static int write_file(const char *dir, const char *name, const void *p, size_t len) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
                perror(path);
                return -1;
        }
        return 0;
}

static int write_encoded(const char *dir, const char *name, const struct hist *h) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        if (hist_encode(h, &buf, &len) < 0)
                return -1;
        return write_file(dir, name, buf, len);
}

static int write_corpus(const char *dir) {
        struct hist h;
        int r = 0;
        hist_init(&h);

        r |= write_encoded(dir, "empty", &h);
        hist_add(&h, 5.0, 1);
        r |= write_encoded(dir, "one-value", &h);
        hist_add(&h, 0, 2);
        hist_add(&h, 1e-7, 1);
        hist_add(&h, 1e12, 3);
        hist_add(&h, 1e-3, 1);
        r |= write_encoded(dir, "extremes", &h);

        hist_reset(&h);
        double *v = gen_values(&dists[1], 5, 500);
        for (int k = 0; k < 500; k++)
                hist_add(&h, v[k], 1 + (uint64_t)(k % 3));
        free(v);
        r |= write_encoded(dir, "lognormal-500", &h);

        hist_reset(&h);
        v = gen_values(&dists[2], 6, 200);
        for (int k = 0; k < 200; k++)
                hist_add(&h, v[k], 1);
        free(v);
        r |= write_encoded(dir, "bimodal-200", &h);

        /* raw doubles, for the second half of the target */
        static const double raw[] = { 1.5, 0.25, 1000.0, 3.6e6, 0, 1e-7, 42.0, 1e12, 7.0, 0.001 };
        uint8_t rb[sizeof raw];
        for (size_t k = 0; k < ELEMENTSOF(raw); k++) {
                uint64_t u;
                memcpy(&u, &raw[k], 8);
                for (int b = 0; b < 8; b++)
                        rb[k * 8 + b] = (uint8_t)(u >> (8 * b));
        }
        r |= write_file(dir, "doubles", rb, sizeof rb);

        hist_done(&h);
        return r ? 1 : 0;
}

/* The fuzz target on random bytes: it must not abort. */
static void test_fuzz_target(void) {
        uint8_t buf[256];
        rng_seed(7);
        for (int k = 0; k < 500; k++) {
                size_t n = 1 + rng_next() % sizeof buf;
                for (size_t i = 0; i < n; i++)
                        buf[i] = (uint8_t)rng_next();
                CHECK_EQ_INT(LLVMFuzzerTestOneInput(buf, n), 0);
        }
}

int main(int argc, char *argv[]) {
        if (argc == 3 && streq(argv[1], "--write-corpus"))
                return write_corpus(argv[2]);
        test_encoding_good();
        test_encoding_crafted();
        test_encoding_damage();
        test_version1();
        test_fuzz_target();
        TEST_DONE();
}

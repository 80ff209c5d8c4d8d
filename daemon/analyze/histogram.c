/* SPDX-License-Identifier: MIT */
/* Base-2 exponential histogram, see histogram.h.
 *
 * Bucket k holds (2^((k-1)/128), 2^(k/128)] seconds. index(v): with
 * v / 1000 = f 2^e, f in [0.5, 1) (frexp, exact), k = 128 (e - 1) + j where
 * j is the first j in [0, 128] with f <= hist_bounds[j] (hist_bounds[128]
 * being 1): the scheme of Prometheus's Go client, which finds j by binary
 * search; here a polynomial guesses it and the table corrects the guess.
 * hist_bounds[j] is the largest double not above 2^(j/128) / 2, so a value
 * exactly on a boundary, or within an ulp of it, lands where exact
 * arithmetic puts it (test-histogram checks the table against the
 * formula). Its
 * representative value 2 lo hi / (lo + hi) = 2 hi / (2^(1/128) + 1) is
 * within (2^(1/128) - 1) / (2^(1/128) + 1) of every value of the bucket.
 *
 * Beyond the header's contract:
 *  - weight 0 is a no-op (the value is still validated);
 *  - hist_add() and hist_merge() return -ERANGE, leaving the histogram as it
 *    was, when the count would overflow 64 bits or the sum or the sum of
 *    squares would stop being finite (a value above ~1e154 ms): every
 *    histogram therefore encodes, and decodes again;
 *  - -0.0 is stored as 0;
 *  - an empty histogram has sum = sum_sq = min = max = 0;
 *  - hist_decode() needs *h initialised (hist_init) and accepts only the
 *    canonical encoding hist_encode() writes (minimal varints, first bucket
 *    at lo, strictly increasing indexes, no empty bucket listed, no negative
 *    zero), so encode(decode(buf)) == buf byte for byte for version 2.
 *
 * Encoding, versions 1 and 2 (which differ only in their buckets):
 *   u8 version, varint count, varint zero_count, varint zigzag(lo), varint nb,
 *   nb x (varint index delta, varint count), f64le sum, sum_sq, min, max
 * lo is the index of the first non-empty bucket (0 when there is none); the
 * first delta is 0, each next one the distance from the previous bucket. */
#include "analyze/histogram.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HIST_PER_OCTAVE (1 << HIST_SCHEMA)

/* The largest double not above 2^(j/128) / 2, j = 0..127. */
/* clang-format off */
static const double hist_bounds[HIST_PER_OCTAVE] = {
        0.5, 0.5027149505564014, 0.5054446430258501, 0.5081891574554764,
        0.5109485743270583, 0.5137229745593818, 0.5165124395106142, 0.5193170509806894,
        0.5221368912137069, 0.5249720429003436, 0.5278225891802786, 0.5306886136446309,
        0.5335702003384117, 0.5364674337629877, 0.5393803988785598, 0.5423091811066546,
        0.5452538663326287, 0.5482145409081883, 0.5511912916539204, 0.5541842058618393,
        0.5571933712979462, 0.5602188762048033, 0.5632608093041209, 0.5663192597993596,
        0.5693943173783458, 0.5724860722159021, 0.5755946149764913, 0.5787200368168754,
        0.5818624293887887, 0.585021884841625, 0.5881984958251406, 0.5913923554921705,
        0.5946035575013605, 0.5978321960199137, 0.6010783657263515, 0.6043421618132907,
        0.6076236799902344, 0.6109230164863787, 0.6142402680534349, 0.6175755319684666,
        0.620928906036742, 0.6243004885946023, 0.6276903785123454, 0.6310986751971253,
        0.6345254785958666, 0.637970889198196, 0.6414350080393891, 0.6449179367033329,
        0.6484197773255048, 0.6519406325959679, 0.6554806057623821, 0.6590398006330319,
        0.6626183215798706, 0.6662162735415806, 0.6698337620266515, 0.6734708931164729,
        0.6771277734684463, 0.6808045103191124, 0.6845012114872953, 0.688217985377265,
        0.6919549409819159, 0.695712187885963, 0.6994898362691555, 0.7032879969095077,
        0.7071067811865475, 0.7109463010845827, 0.7148066691959849, 0.7186879987244911,
        0.7225904034885232, 0.7265139979245262, 0.7304588970903234, 0.7344252166684909,
        0.7384130729697496, 0.7424225829363762, 0.7464538641456324, 0.7505070348132127,
        0.7545822137967113, 0.7586795205991073, 0.7627990753722691, 0.766940998920478,
        0.7711054127039704, 0.7752924388424999, 0.7795022001189185, 0.7837348199827764,
        0.7879904225539431, 0.7922691326262468, 0.7965710756711334, 0.8008963778413466,
        0.8052451659746271, 0.8096175675974319, 0.8140137109286738, 0.8184337248834822,
        0.8228777390769824, 0.8273458838280972, 0.8318382901633682, 0.8363550898207982,
        0.8408964152537145, 0.8454623996346525, 0.8500531768592616, 0.8546688815502314,
        0.8593096490612389, 0.8639756154809187, 0.8686669176368531, 0.8733836930995844,
        0.8781260801866497, 0.8828942179666364, 0.8876882462632606, 0.8925083056594675,
        0.8973545375015536, 0.9022270839033119, 0.9071260877501993, 0.9120516927035266,
        0.9170040432046712, 0.9219832844793129, 0.9269895625416927, 0.9320230241988945,
        0.9370838170551499, 0.9421720895161672, 0.9472879907934828, 0.9524316709088371,
        0.9576032806985736, 0.9628029718180624, 0.9680308967461472, 0.9732872087896166,
        0.9785720620877001, 0.9838856116165878, 0.9892280131939755, 0.9945994234836332,
};
/* clang-format on */

/* 2 / (2^(1/128) + 1), times 1000 for milliseconds */
static const double hist_rep_factor_ms = 0.9972924004425239 * 1000.0;

/* index(HIST_MIN_VALUE_MS) and index(HIST_MAX_VALUE_MS): 128 log2(1e-9) =
 * -3826.86, 128 log2(1e6) = 2551.24, far from integers. */
#define HIST_INDEX_MIN (-3826)
#define HIST_INDEX_MAX 2552
#define HIST_INDEX_SPAN ((uint32_t)(HIST_INDEX_MAX - HIST_INDEX_MIN + 1))

#define HIST_INITIAL_BUCKETS 64u

static inline int32_t hist_index(double v_ms) {
        /* HIST_MIN_VALUE_MS <= v_ms <= HIST_MAX_VALUE_MS: a normal double */
        /* frexp() by hand: f in [0.5, 1), v_ms / 1000 = f 2^e */
        double s = v_ms / 1000.0, f;
        uint64_t bits;
        memcpy(&bits, &s, sizeof bits);
        int e = (int)((bits >> 52) & 0x7ff) - 1022;
        bits = (bits & ~(0x7ffull << 52)) | (1022ull << 52);
        memcpy(&f, &bits, sizeof f);
        /* a cubic for log2(2f) (off by 0.0013, a sixth of a bucket) guesses
         * j, the table decides: the first j with f <= hist_bounds[j],
         * hist_bounds[128] being 1 */
        double m = 2.0 * f - 1.0;
        double l2 = m * (1.4234951832369709 + m * (-0.5877732323896097 + m * 0.16559337082288136));
        int j = (int)ceil(l2 * HIST_PER_OCTAVE);
        if (j > HIST_PER_OCTAVE)
                j = HIST_PER_OCTAVE;
        if (j < 0)
                j = 0;
        while (j > 0 && f <= hist_bounds[j - 1])
                j--;
        while (j < HIST_PER_OCTAVE && f > hist_bounds[j])
                j++;
        return (int32_t)((e - 1) * HIST_PER_OCTAVE + j);
}

double hist_bucket_upper_s(int32_t k) {
        int32_t j = k & (HIST_PER_OCTAVE - 1);
        int32_t octave = (k - j) / HIST_PER_OCTAVE; /* floor(k / 128) */
        return ldexp(hist_bounds[j], octave + 1);
}

static inline double hist_bucket_value(int64_t k) {
        return hist_bucket_upper_s((int32_t)k) * hist_rep_factor_ms;
}

void hist_init(struct hist *h) {
        *h = (struct hist){};
}

void hist_done(struct hist *h) {
        free(h->counts);
        hist_init(h);
}

void hist_reset(struct hist *h) {
        if (h->n)
                memset(h->counts, 0, h->n * sizeof h->counts[0]);
        h->count = h->zero_count = 0;
        h->sum = h->sum_sq = h->min = h->max = 0;
}

/* Makes the window cover [first, last] (both within the index range). */
static int hist_grow(struct hist *h, int32_t first, int32_t last) {
        int64_t new_lo, new_hi; /* inclusive */

        if (h->n == 0) {
                uint32_t want = (uint32_t)(last - first) + 1;
                uint32_t slack = want < HIST_INITIAL_BUCKETS ? (HIST_INITIAL_BUCKETS - want) / 2 : want / 4;
                new_lo = (int64_t)first - slack;
                new_hi = (int64_t)last + slack;
        } else {
                int64_t lo = h->lo, hi = (int64_t)h->lo + h->n - 1;
                if (first >= lo && last <= hi)
                        return 0;
                new_lo = first < lo ? first : lo;
                new_hi = last > hi ? last : hi;
                /* geometric (x1.25 at least, so amortised O(1) per add; the whole
                 * range is only 6379 buckets anyway), the slack on the growing
                 * side(s): latencies spread out from where they started */
                int64_t extra = (new_hi - new_lo + 1) / 4;
                if (extra < HIST_INITIAL_BUCKETS / 2)
                        extra = HIST_INITIAL_BUCKETS / 2;
                if (new_lo < lo && new_hi > hi) {
                        new_lo -= extra / 2;
                        new_hi += extra - extra / 2;
                } else if (new_lo < lo)
                        new_lo -= extra;
                else
                        new_hi += extra;
        }
        if (new_lo < HIST_INDEX_MIN)
                new_lo = HIST_INDEX_MIN;
        if (new_hi > HIST_INDEX_MAX)
                new_hi = HIST_INDEX_MAX;

        uint32_t new_n = (uint32_t)(new_hi - new_lo + 1);
        uint64_t *c = realloc(h->counts, (size_t)new_n * sizeof c[0]);
        if (!c)
                return -ENOMEM;
        if (h->n == 0)
                memset(c, 0, (size_t)new_n * sizeof c[0]);
        else {
                uint32_t below = (uint32_t)(h->lo - new_lo);
                uint32_t above = new_n - below - h->n;
                if (below) {
                        memmove(c + below, c, (size_t)h->n * sizeof c[0]);
                        memset(c, 0, (size_t)below * sizeof c[0]);
                }
                if (above)
                        memset(c + below + h->n, 0, (size_t)above * sizeof c[0]);
        }
        h->counts = c;
        h->lo = (int32_t)new_lo;
        h->n = new_n;
        return 0;
}

int hist_add(struct hist *h, double v, uint64_t weight) {
        int32_t i;
        bool zero = false;

        if (v >= HIST_MIN_VALUE_MS) {
                if (v <= HIST_MAX_VALUE_MS)
                        i = hist_index(v);
                else if (isinf(v))
                        return -EINVAL;
                else
                        i = HIST_INDEX_MAX;
        } else if (v >= 0) {
                zero = true;
                i = 0;
                v = 0.0 + v; /* -0.0 -> +0.0 */
        } else
                return -EINVAL; /* NaN, -inf, negative */

        if (weight == 0)
                return 0;

        uint64_t count;
        if (__builtin_add_overflow(h->count, weight, &count))
                return -ERANGE;
        double w = (double)weight;
        double sum = h->sum + v * w, sum_sq = h->sum_sq + v * v * w;
        if (!isfinite(sum) || !isfinite(sum_sq))
                return -ERANGE;

        if (zero)
                h->zero_count += weight;
        else {
                uint32_t off = (uint32_t)(i - h->lo);
                if (off >= h->n) { /* also i < lo, wrapped */
                        int r = hist_grow(h, i, i);
                        if (r < 0)
                                return r;
                        off = (uint32_t)(i - h->lo);
                }
                h->counts[off] += weight;
        }

        if (h->count == 0)
                h->min = h->max = v;
        else if (v < h->min)
                h->min = v;
        else if (v > h->max)
                h->max = v;
        h->count = count;
        h->sum = sum;
        h->sum_sq = sum_sq;
        return 0;
}

/* First and last non-empty bucket as offsets into the window; false if none. */
static bool hist_span(const struct hist *h, uint32_t *first, uint32_t *last) {
        uint32_t f = 0, l = h->n;
        while (f < h->n && h->counts[f] == 0)
                f++;
        if (f == h->n)
                return false;
        while (h->counts[l - 1] == 0)
                l--;
        *first = f;
        *last = l - 1;
        return true;
}

int hist_merge(struct hist *dst, const struct hist *src) {
        if (src->count == 0)
                return 0;

        uint64_t count;
        if (__builtin_add_overflow(dst->count, src->count, &count))
                return -ERANGE;
        double sum = dst->sum + src->sum, sum_sq = dst->sum_sq + src->sum_sq;
        if (!isfinite(sum) || !isfinite(sum_sq))
                return -ERANGE;

        if (dst == src) {
                for (uint32_t k = 0; k < dst->n; k++)
                        dst->counts[k] *= 2; /* cannot overflow: count did not */
        } else {
                uint32_t f, l;
                if (hist_span(src, &f, &l)) {
                        int32_t first = src->lo + (int32_t)f, last = src->lo + (int32_t)l;
                        int r = hist_grow(dst, first, last);
                        if (r < 0)
                                return r;
                        uint64_t *d = dst->counts + (first - dst->lo);
                        const uint64_t *s = src->counts + f;
                        for (uint32_t k = 0, m = l - f + 1; k < m; k++)
                                d[k] += s[k];
                }
                if (dst->count == 0) {
                        dst->min = src->min;
                        dst->max = src->max;
                } else {
                        if (src->min < dst->min)
                                dst->min = src->min;
                        if (src->max > dst->max)
                                dst->max = src->max;
                }
        }
        dst->zero_count += src->zero_count;
        dst->count = count;
        dst->sum = sum;
        dst->sum_sq = sum_sq;
        return 0;
}

static double clamp_range(const struct hist *h, double v) {
        if (v < h->min)
                return h->min;
        if (v > h->max)
                return h->max;
        return v;
}

double hist_bucket_rep_ms(const struct hist *h, uint32_t i) {
        return clamp_range(h, hist_bucket_value((int64_t)h->lo + i));
}

double hist_quantile(const struct hist *h, double q) {
        if (h->count == 0 || !(q >= 0 && q <= 1))
                return NAN;

        double r = q * (double)(h->count - 1);
        uint64_t rank = r >= 18446744073709551615.0 ? h->count - 1 : (uint64_t)r;
        if (rank >= h->count - 1)
                return h->max; /* the extremes are known exactly */
        if (rank == 0)
                return h->min;

        if (rank < h->zero_count)
                return clamp_range(h, 0);
        uint64_t seen = h->zero_count;
        for (uint32_t k = 0; k < h->n; k++) {
                seen += h->counts[k];
                if (rank < seen)
                        return clamp_range(h, hist_bucket_value((int64_t)h->lo + k));
        }
        return h->max; /* only if the counts disagree with count */
}

uint64_t hist_count_above(const struct hist *h, double v) {
        if (h->count == 0 || h->max <= v)
                return 0;
        if (h->min > v)
                return h->count;
        /* a bucket is above v when its representative value is: the side
         * hist_quantile() puts it on. The exact extremes hold one value each
         * on their side. */
        uint64_t above = clamp_range(h, 0) > v ? h->zero_count : 0;
        for (uint32_t k = 0; k < h->n; k++)
                if (clamp_range(h, hist_bucket_value((int64_t)h->lo + k)) > v)
                        above += h->counts[k];
        if (above == 0)
                return 1;
        return above < h->count ? above : h->count - 1;
}

double hist_mean(const struct hist *h) {
        if (h->count == 0)
                return NAN;
        return h->sum / (double)h->count;
}

double hist_stddev(const struct hist *h) {
        if (h->count == 0)
                return NAN;
        double n = (double)h->count, mean = h->sum / n;
        double var = (h->sum_sq - h->sum * mean) / n;
        return var > 0 ? sqrt(var) : 0;
}

/* ---- encoding ----------------------------------------------------------- */

#define VARINT_MAX 10u

static size_t put_varint(uint8_t *p, uint64_t v) {
        size_t k = 0;
        while (v >= 0x80) {
                p[k++] = (uint8_t)(v | 0x80);
                v >>= 7;
        }
        p[k++] = (uint8_t)v;
        return k;
}

static size_t put_double(uint8_t *p, double d) {
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        for (unsigned k = 0; k < 8; k++)
                p[k] = (uint8_t)(u >> (8 * k));
        return 8;
}

static uint64_t zigzag(int64_t v) {
        return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t u) {
        return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

int hist_encode(const struct hist *h, uint8_t **ret, size_t *ret_len) {
        uint32_t f = 0, l = 0, nb = 0;
        bool any = hist_span(h, &f, &l);

        if (any)
                for (uint32_t k = f; k <= l; k++)
                        nb += h->counts[k] != 0;

        size_t max = 1 + 4 * VARINT_MAX + (size_t)nb * 2 * VARINT_MAX + 4 * 8;
        uint8_t *buf = malloc(max), *p = buf;
        if (!buf)
                return -ENOMEM;

        *p++ = HIST_ENCODING_VERSION;
        p += put_varint(p, h->count);
        p += put_varint(p, h->zero_count);
        int64_t lo = any ? (int64_t)h->lo + f : 0;
        p += put_varint(p, zigzag(lo));
        p += put_varint(p, nb);
        if (any) {
                uint32_t prev = f;
                for (uint32_t k = f; k <= l; k++) {
                        if (h->counts[k] == 0)
                                continue;
                        p += put_varint(p, k - prev);
                        p += put_varint(p, h->counts[k]);
                        prev = k;
                }
        }
        p += put_double(p, h->sum);
        p += put_double(p, h->sum_sq);
        p += put_double(p, h->min);
        p += put_double(p, h->max);

        size_t len = (size_t)(p - buf);
        uint8_t *shrunk = realloc(buf, len);
        *ret = shrunk ? shrunk : buf;
        *ret_len = len;
        return 0;
}

/* Minimal LEB128 only (no padding groups), at most 64 bits. */
static inline int get_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *ret) {
        if (*pos < len && buf[*pos] < 0x80) { /* one byte: most deltas and counts */
                *ret = buf[(*pos)++];
                return 0;
        }
        uint64_t v = 0;
        for (unsigned k = 0; k < VARINT_MAX; k++) {
                if (*pos >= len)
                        return -EINVAL;
                uint8_t b = buf[(*pos)++];
                if (k == VARINT_MAX - 1 && b > 1)
                        return -EINVAL;
                v |= (uint64_t)(b & 0x7f) << (7 * k);
                if (!(b & 0x80)) {
                        if (b == 0 && k > 0)
                                return -EINVAL;
                        *ret = v;
                        return 0;
                }
        }
        return -EINVAL; /* not reached: the tenth byte has no continuation bit */
}

static int get_double(const uint8_t *buf, size_t len, size_t *pos, double *ret) {
        if (len - *pos < 8)
                return -EINVAL;
        uint64_t u = 0;
        for (unsigned k = 0; k < 8; k++)
                u |= (uint64_t)buf[*pos + k] << (8 * k);
        *pos += 8;
        double d;
        memcpy(&d, &u, sizeof d);
        if (!isfinite(d) || signbit(d))
                return -EINVAL;
        *ret = d;
        return 0;
}

/* Version 1: bucket i held (gamma^(i-1), gamma^i] ms, gamma = 1.005 / 0.995,
 * i in [-1381, 2073], with the representative value 0.995 gamma^i. */
#define HIST_V1_INDEX_MIN (-1381)
#define HIST_V1_INDEX_MAX 2073
static const double hist_v1_log_gamma = 0.010000083334583179;
static const double hist_v1_rep_factor = 0.995;

struct hist_header {
        uint8_t version;
        int64_t index_min, index_max; /* the version's range */
        uint64_t count, zero_count, nb;
        int64_t lo, last;
        size_t pos; /* where the buckets start */
        double sum, sum_sq, min, max;
};

static int hist_parse_header(const uint8_t *buf, size_t len, struct hist_header *hh) {
        size_t pos = 0;
        uint64_t u;

        if (!buf || len < 1)
                return -EINVAL;
        hh->version = buf[pos++];
        if (hh->version == HIST_ENCODING_VERSION) {
                hh->index_min = HIST_INDEX_MIN;
                hh->index_max = HIST_INDEX_MAX;
        } else if (hh->version == 1) {
                hh->index_min = HIST_V1_INDEX_MIN;
                hh->index_max = HIST_V1_INDEX_MAX;
        } else
                return -EINVAL;
        if (get_varint(buf, len, &pos, &hh->count) < 0 || get_varint(buf, len, &pos, &hh->zero_count) < 0 ||
            get_varint(buf, len, &pos, &u) < 0)
                return -EINVAL;
        hh->lo = unzigzag(u);
        if (get_varint(buf, len, &pos, &hh->nb) < 0)
                return -EINVAL;
        if (hh->zero_count > hh->count || hh->nb > (uint64_t)(hh->index_max - hh->index_min + 1) ||
            hh->nb > (len - pos) / 2)
                return -EINVAL;
        if (hh->nb == 0 ? hh->lo != 0 : hh->lo < hh->index_min || hh->lo > hh->index_max)
                return -EINVAL;
        hh->pos = pos;
        return 0;
}

/* Where hist_parse_body() puts the buckets: each count added to
 * counts[index - base], or the k-th bucket's index and count in index[k]
 * and count[k]; with neither, they are only checked (and hh->last found). */
struct bucket_sink {
        uint64_t *counts;
        int64_t base;
        int32_t *index;
        uint64_t *count;
};

/* The buckets (after the header) into out as the sink's kind says, each
 * kind a loop of its own once inlined: merging a week of minute slices
 * spends most of its time here. *pos, *ret_total and *ret_last: where the
 * buckets end, their count, the last one's index. */
enum sink_kind { SINK_CHECK, SINK_ADD, SINK_LIST };
static inline __attribute__((always_inline)) int parse_buckets(const uint8_t *buf, size_t len,
                                                               const struct hist_header *hh,
                                                               const struct bucket_sink *out, enum sink_kind kind,
                                                               size_t *pos, uint64_t *ret_total, int64_t *ret_last) {
        size_t at = *pos;
        uint64_t total = 0, nb = hh->nb;
        int64_t idx = hh->lo, top = hh->index_max;
        /* in locals: the compiler cannot tell that the stores below leave them be */
        uint64_t *counts = out->counts, *count = out->count;
        int32_t *index = out->index;
        int64_t base = out->base;

        for (uint64_t k = 0; k < nb; k++) {
                uint64_t delta, c;
                if (len - at >= 2 && ((buf[at] | buf[at + 1]) & 0x80) == 0) {
                        /* both one byte: most buckets of a slice */
                        delta = buf[at];
                        c = buf[at + 1];
                        at += 2;
                } else if (get_varint(buf, len, &at, &delta) < 0 || get_varint(buf, len, &at, &c) < 0)
                        return -EINVAL;
                if (k == 0 ? delta != 0 : delta == 0 || delta > (uint64_t)(top - idx))
                        return -EINVAL;
                idx += (int64_t)delta;
                if (c == 0 || __builtin_add_overflow(total, c, &total))
                        return -EINVAL;
                if (kind == SINK_ADD)
                        counts[idx - base] += c;
                else if (kind == SINK_LIST) {
                        index[k] = (int32_t)idx;
                        count[k] = c;
                }
        }
        *pos = at;
        *ret_total = total;
        *ret_last = idx;
        return 0;
}

/* The buckets and the rest. */
static int hist_parse_body(const uint8_t *buf, size_t len, struct hist_header *hh, const struct bucket_sink *out) {
        size_t pos = hh->pos;
        uint64_t total;
        int64_t idx;
        int r = out->counts  ? parse_buckets(buf, len, hh, out, SINK_ADD, &pos, &total, &idx)
                : out->index ? parse_buckets(buf, len, hh, out, SINK_LIST, &pos, &total, &idx)
                             : parse_buckets(buf, len, hh, out, SINK_CHECK, &pos, &total, &idx);
        if (r < 0)
                return r;
        if (total != hh->count - hh->zero_count)
                return -EINVAL;
        hh->last = idx;

        if (get_double(buf, len, &pos, &hh->sum) < 0 || get_double(buf, len, &pos, &hh->sum_sq) < 0 ||
            get_double(buf, len, &pos, &hh->min) < 0 || get_double(buf, len, &pos, &hh->max) < 0)
                return -EINVAL;
        if (pos != len)
                return -EINVAL;
        if (hh->count == 0 ? hh->sum != 0 || hh->sum_sq != 0 || hh->min != 0 || hh->max != 0 : hh->min > hh->max)
                return -EINVAL;
        return 0;
}

/* Where version 1's bucket i goes: the bucket of the value quantiles gave
 * for it (clamped into [min, max] as they did), kept off the zero bucket:
 * the values it held were not below HIST_MIN_VALUE_MS. Monotonic in i. */
static int32_t hist_v1_target(const struct hist_header *hh, int64_t i) {
        double v = exp((double)i * hist_v1_log_gamma) * hist_v1_rep_factor;
        if (v < hh->min)
                v = hh->min;
        if (v > hh->max)
                v = hh->max;
        if (v < HIST_MIN_VALUE_MS)
                v = HIST_MIN_VALUE_MS;
        if (v > HIST_MAX_VALUE_MS)
                v = HIST_MAX_VALUE_MS;
        return hist_index(v);
}

/* Re-buckets version 1's counts (old[i - lo] for i in [lo, last]) into a new
 * window; *ret_lo and *ret_n describe it. */
static int hist_convert_v1(const struct hist_header *hh, const uint64_t *old, uint64_t **ret, int32_t *ret_lo,
                           uint32_t *ret_n) {
        int32_t first = hist_v1_target(hh, hh->lo), last = hist_v1_target(hh, hh->last);
        uint32_t n = (uint32_t)(last - first + 1);
        uint64_t *counts = calloc(n, sizeof counts[0]);
        if (!counts)
                return -ENOMEM;
        for (int64_t i = hh->lo; i <= hh->last; i++)
                if (old[i - hh->lo])
                        counts[hist_v1_target(hh, i) - first] += old[i - hh->lo];
        *ret = counts;
        *ret_lo = first;
        *ret_n = n;
        return 0;
}

int hist_decode(struct hist *h, const uint8_t *buf, size_t len) {
        struct hist_header hh = {};
        uint64_t *counts = NULL;
        int r;

        r = hist_parse_header(buf, len, &hh);
        if (r < 0)
                goto fail;
        /* a first pass finds the last bucket, so that the window is
         * allocated to size: room up to the top of the range would be
         * 27 KiB zeroed for the few buckets of a 1-second slice */
        r = hist_parse_body(buf, len, &hh, &(struct bucket_sink){});
        if (r < 0)
                goto fail;
        if (hh.nb > 0) {
                counts = calloc((size_t)(hh.last - hh.lo + 1), sizeof counts[0]);
                if (!counts) {
                        r = -ENOMEM;
                        goto fail;
                }
                r = hist_parse_body(buf, len, &hh, &(struct bucket_sink){ .counts = counts, .base = hh.lo });
                if (r < 0)
                        goto fail;
        }

        int32_t lo = 0;
        uint32_t n = 0;
        if (hh.nb > 0 && hh.version == 1) {
                uint64_t *converted;
                r = hist_convert_v1(&hh, counts, &converted, &lo, &n);
                if (r < 0)
                        goto fail;
                free(counts);
                counts = converted;
        } else if (hh.nb > 0) {
                lo = (int32_t)hh.lo;
                n = (uint32_t)(hh.last - hh.lo + 1);
        }

        free(h->counts);
        *h = (struct hist){
                .count = hh.count,
                .zero_count = hh.zero_count,
                .sum = hh.sum,
                .sum_sq = hh.sum_sq,
                .min = hh.min,
                .max = hh.max,
                .lo = lo,
                .n = n,
                .counts = counts,
        };
        return 0;

fail:
        free(counts);
        hist_reset(h);
        return r;
}

/* Buckets hist_merge_encoded() lists on the stack as it checks them (a
 * minute's slice has tens): one pass over the bytes, not two. */
#define MERGE_LISTED_BUCKETS 256

int hist_merge_encoded(struct hist *dst, const uint8_t *buf, size_t len) {
        struct hist_header hh = {};
        int32_t index[MERGE_LISTED_BUCKETS];
        uint64_t counts[MERGE_LISTED_BUCKETS];
        bool listed = false;
        int r = hist_parse_header(buf, len, &hh);
        if (r == 0) {
                /* all of it checked before dst changes */
                listed = hh.version == HIST_ENCODING_VERSION && hh.nb <= MERGE_LISTED_BUCKETS;
                r = hist_parse_body(buf, len, &hh,
                                    listed ? &(struct bucket_sink){ .index = index, .count = counts }
                                           : &(struct bucket_sink){});
        }
        if (r < 0)
                return r;
        if (hh.version == 1 && hh.nb > 0) { /* re-bucketed on the way */
                struct hist h;
                hist_init(&h);
                r = hist_decode(&h, buf, len);
                if (r == 0)
                        r = hist_merge(dst, &h);
                hist_done(&h);
                return r;
        }
        if (hh.count == 0)
                return 0;
        uint64_t count;
        if (__builtin_add_overflow(dst->count, hh.count, &count))
                return -ERANGE;
        double sum = dst->sum + hh.sum, sum_sq = dst->sum_sq + hh.sum_sq;
        if (!isfinite(sum) || !isfinite(sum_sq))
                return -ERANGE;
        if (hh.nb > 0) {
                r = hist_grow(dst, (int32_t)hh.lo, (int32_t)hh.last);
                if (r < 0)
                        return r;
                if (listed)
                        for (uint64_t k = 0; k < hh.nb; k++)
                                dst->counts[index[k] - dst->lo] += counts[k];
                else
                        (void)hist_parse_body(buf, len, &hh,
                                              &(struct bucket_sink){ .counts = dst->counts, .base = dst->lo });
        }
        if (dst->count == 0) {
                dst->min = hh.min;
                dst->max = hh.max;
        } else {
                if (hh.min < dst->min)
                        dst->min = hh.min;
                if (hh.max > dst->max)
                        dst->max = hh.max;
        }
        dst->zero_count += hh.zero_count;
        dst->count = count;
        dst->sum = sum;
        dst->sum_sq = sum_sq;
        return 0;
}

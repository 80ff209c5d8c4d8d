/* SPDX-License-Identifier: MIT */
/* The layout of a block, version 3 (all integers LEB128 varints; "zz" is
 * the zigzag mapping of a signed value to an unsigned one):
 *
 *   version (1), n
 *   one column per entry of int_cols[] below, each:
 *     mode 0, x0                  every value is x0
 *     mode 1, x0, d               every delta is d (zz)
 *     mode 2, x0, g, n-1 deltas   deltas divided by their common divisor g (zz)
 *     mode 3, x0, d1, n-2 values  deltas of deltas (zz)
 *     mode 4, x0, g, w, bits      as mode 2, the n-1 values in w bits each
 *     mode 5, x0, d1, w, bits     as mode 3, the n-2 values in w bits each
 *                                 (bits: little-endian, the first value in the
 *                                 lowest bits, the last byte padded with 0)
 *     mode 6, x0, g, k, k times (gap, delta)
 *                                 as mode 2 with only the k deltas that are
 *                                 not 0, each after the samples since the
 *                                 previous one (a peak, a checkpoint's
 *                                 writes: a byte a sample for zeros else)
 *   (version 2 had modes 0 to 3 only: a counter that moves by random amounts,
 *   a CPU clock's nanoseconds, took a whole varint byte per 7 bits of each
 *   value where its largest value needs, say, 29)
 *   the two floating-point columns (gpu_util_pct, energy_j), each:
 *     mode 0, 8 bytes             every value is those bits
 *     mode 1, n values            bits XOR the previous value's (0 before the
 *                                 first): a 0 byte for the same bits, else a
 *                                 byte (leading zero bytes << 4 | length)
 *                                 and that many bytes of the XOR
 *     mode 2                      every value is 0 (no GPU, no energy
 *                                 counter: 8 bytes less, twice a block)
 *   the rates kept as they were: k, then k times (index, field, 8 bytes)
 *
 * Counters wrap modulo 2^64 in the deltas, so any value round-trips. */
#include "store/block.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define BLOCK_VERSION 3
/* Version 1 had the integer columns up to gpu_mem_bytes: no PSS. */
#define V1_INT_COLS 18

/* The flags of a sample, packed into one of the integer columns. */
#define FLAG(f) offsetof(struct sample, f)
static const size_t flag_fields[] = {
        FLAG(has_cpu_pct),  FLAG(has_rss),    FLAG(has_peak_rss), FLAG(has_io),
        FLAG(has_io_rate),  FLAG(has_net),    FLAG(has_net_rate), FLAG(has_gpu_mem),
        FLAG(has_gpu_util), FLAG(has_energy), FLAG(has_pss),      FLAG(has_pss_anon),
};
#undef FLAG

enum col_type { COL_U64, COL_U32, COL_I64, COL_FLAGS };
static const struct int_col {
        size_t off;
        enum col_type type;
} int_cols[] = {
        { offsetof(struct sample, ts_ms), COL_I64 },          { 0, COL_FLAGS },
        { offsetof(struct sample, interval_us), COL_U64 },    { offsetof(struct sample, cpu_time_ns), COL_U64 },
        { offsetof(struct sample, user_time_ns), COL_U64 },   { offsetof(struct sample, system_time_ns), COL_U64 },
        { offsetof(struct sample, rss_bytes), COL_U64 },      { offsetof(struct sample, rss_anon_bytes), COL_U64 },
        { offsetof(struct sample, peak_rss_bytes), COL_U64 }, { offsetof(struct sample, threads), COL_U32 },
        { offsetof(struct sample, processes), COL_U32 },      { offsetof(struct sample, read_bytes), COL_U64 },
        { offsetof(struct sample, write_bytes), COL_U64 },    { offsetof(struct sample, rchar_bytes), COL_U64 },
        { offsetof(struct sample, wchar_bytes), COL_U64 },    { offsetof(struct sample, netns_rx_bytes), COL_U64 },
        { offsetof(struct sample, netns_tx_bytes), COL_U64 }, { offsetof(struct sample, gpu_mem_bytes), COL_U64 },
        { offsetof(struct sample, pss_bytes), COL_U64 },      { offsetof(struct sample, uss_bytes), COL_U64 },
        { offsetof(struct sample, pss_anon_bytes), COL_U64 },
};
static const size_t double_cols[] = { offsetof(struct sample, gpu_util_pct), offsetof(struct sample, energy_j) };

/* The rates a block leaves out, by the field number an exception names. */
enum rate { R_CPU, R_READ, R_WRITE, R_RX, R_TX, _R_MAX };
static const size_t rate_fields[_R_MAX] = {
        [R_CPU] = offsetof(struct sample, cpu_pct),
        [R_READ] = offsetof(struct sample, read_bytes_per_s),
        [R_WRITE] = offsetof(struct sample, write_bytes_per_s),
        [R_RX] = offsetof(struct sample, netns_rx_bytes_per_s),
        [R_TX] = offsetof(struct sample, netns_tx_bytes_per_s),
};

static uint64_t get_int(const struct sample *s, const struct int_col *c) {
        const char *b = (const char *)s;
        switch (c->type) {
        case COL_U32:
                return *(const uint32_t *)(b + c->off);
        case COL_FLAGS: {
                uint64_t x = 0;
                for (size_t i = 0; i < ELEMENTSOF(flag_fields); i++)
                        x |= (uint64_t)(*(const bool *)(b + flag_fields[i])) << i;
                return x;
        }
        default:
                return *(const uint64_t *)(b + c->off);
        }
}

static void set_int(struct sample *s, const struct int_col *c, uint64_t x) {
        char *b = (char *)s;
        switch (c->type) {
        case COL_U32:
                *(uint32_t *)(b + c->off) = (uint32_t)x;
                break;
        case COL_FLAGS:
                for (size_t i = 0; i < ELEMENTSOF(flag_fields); i++)
                        *(bool *)(b + flag_fields[i]) = (x >> i) & 1;
                break;
        default:
                *(uint64_t *)(b + c->off) = x;
        }
}

static double get_double(const struct sample *s, size_t off) {
        return *(const double *)((const char *)s + off);
}

static uint64_t bits_of(double d) {
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        return u;
}

static double double_of(uint64_t u) {
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
}

static uint64_t zz(uint64_t v) { /* v read as int64 */
        return (v << 1) ^ (uint64_t)((int64_t)v >> 63);
}

static uint64_t unzz(uint64_t u) {
        return (u >> 1) ^ (uint64_t)(-(int64_t)(u & 1));
}

/* ---- the output buffer ----------------------------------------------------- */

struct out {
        uint8_t *p;
        size_t len;
        bool oom;
};

static void put_byte(struct out *o, uint8_t b) {
        if (o->oom || !GREEDY_REALLOC(o->p, o->len + 1)) {
                o->oom = true;
                return;
        }
        o->p[o->len++] = b;
}

static void put_varint(struct out *o, uint64_t v) {
        while (v >= 0x80) {
                put_byte(o, (uint8_t)(v | 0x80));
                v >>= 7;
        }
        put_byte(o, (uint8_t)v);
}

static size_t varint_len(uint64_t v) {
        size_t n = 1;
        while (v >= 0x80) {
                v >>= 7;
                n++;
        }
        return n;
}

static void put_u64le(struct out *o, uint64_t v) {
        for (int i = 0; i < 8; i++)
                put_byte(o, (uint8_t)(v >> (8 * i)));
}

/* ---- encoding ----------------------------------------------------------------- */

static uint64_t gcd(uint64_t a, uint64_t b) {
        while (b) {
                uint64_t t = a % b;
                a = b;
                b = t;
        }
        return a;
}

static uint64_t magnitude(uint64_t v) { /* |v| of v read as int64; 2^63 stays */
        return (int64_t)v < 0 ? (uint64_t)0 - v : v;
}

/* How many bits v needs (0 for 0). */
static unsigned bit_width(uint64_t v) {
        return v ? 64u - (unsigned)__builtin_clzll(v) : 0;
}

/* The values of a mode 2 (dod false) or mode 3 (dod true) column, as
 * stored: zz(delta / g), or zz(delta of deltas) from the third sample on. */
static uint64_t col_value(const struct sample *v, size_t i, const struct int_col *c, bool dod, uint64_t g) {
        uint64_t d = get_int(&v[i], c) - get_int(&v[i - 1], c);
        if (!dod)
                return zz((uint64_t)((int64_t)d / (int64_t)g));
        return zz(d - (get_int(&v[i - 1], c) - get_int(&v[i - 2], c)));
}

/* values first..n-1 of a column in w bits each (mode 4 or 5's bits). */
static void put_bits(struct out *o, const struct sample *v, size_t first, size_t n, const struct int_col *c, bool dod,
                     uint64_t g, unsigned w) {
        uint64_t acc = 0;
        unsigned have = 0;
        for (size_t i = first; i < n; i++) {
                uint64_t x = col_value(v, i, c, dod, g);
                for (unsigned left = w; left > 0;) {
                        unsigned take = left < 64 - have ? left : 64 - have;
                        acc |= (take == 64 ? x : x & ((UINT64_C(1) << take) - 1)) << have;
                        x = take == 64 ? 0 : x >> take;
                        have += take;
                        left -= take;
                        while (have >= 8) {
                                put_byte(o, (uint8_t)acc);
                                acc >>= 8;
                                have -= 8;
                        }
                }
        }
        if (have > 0)
                put_byte(o, (uint8_t)acc);
}

static void put_int_col(struct out *o, const struct sample *v, size_t n, const struct int_col *c) {
        uint64_t x0 = get_int(&v[0], c), g = 0;
        bool same = true, same_delta = true;
        size_t delta_len = 0, dod_len = 0, nonzero = 0;
        for (size_t i = 1; i < n; i++) {
                uint64_t d = get_int(&v[i], c) - get_int(&v[i - 1], c);
                same = same && d == 0;
                nonzero += d != 0;
                g = gcd(g, magnitude(d));
                if (i >= 2) {
                        uint64_t d0 = get_int(&v[i - 1], c) - get_int(&v[i - 2], c);
                        same_delta = same_delta && d == d0;
                        dod_len += varint_len(zz(d - d0));
                }
        }
        if (same) {
                put_byte(o, 0);
                put_varint(o, x0);
                return;
        }
        uint64_t d1 = get_int(&v[1], c) - x0;
        if (same_delta) {
                put_byte(o, 1);
                put_varint(o, x0);
                put_varint(o, zz(d1));
                return;
        }
        if (g > (UINT64_C(1) << 62))
                g = 1; /* a divisor of 2^63: keep the deltas whole */
        unsigned delta_w = 0, dod_w = 0;
        size_t sparse_len = varint_len(g) + varint_len(nonzero);
        for (size_t i = 1, last = 0; i < n; i++) {
                uint64_t x = col_value(v, i, c, false, g);
                delta_len += varint_len(x);
                if (x != 0) {
                        sparse_len += varint_len(i - last) + varint_len(x);
                        last = i;
                }
                delta_w = bit_width(x) > delta_w ? bit_width(x) : delta_w;
                if (i >= 2) {
                        x = col_value(v, i, c, true, 1);
                        dod_w = bit_width(x) > dod_w ? bit_width(x) : dod_w;
                }
        }
        /* the shortest of the four: varints or w bits each, of deltas or of
         * deltas of deltas */
        size_t delta_bits = ((n - 1) * delta_w + 7) / 8 + 1, dod_bits = ((n - 2) * dod_w + 7) / 8 + 1;
        size_t len2 = delta_len + varint_len(g), len3 = dod_len + varint_len(zz(d1));
        size_t len4 = delta_bits + varint_len(g), len5 = dod_bits + varint_len(zz(d1));
        size_t best = len2 < len3 ? len2 : len3;
        best = len4 < best ? len4 : best;
        best = len5 < best ? len5 : best;
        if (sparse_len < best) {
                put_byte(o, 6);
                put_varint(o, x0);
                put_varint(o, g);
                put_varint(o, nonzero);
                for (size_t i = 1, last = 0; i < n; i++) {
                        uint64_t x = col_value(v, i, c, false, g);
                        if (x == 0)
                                continue;
                        put_varint(o, i - last);
                        put_varint(o, x);
                        last = i;
                }
                return;
        }
        if (best == len4 || best == len5) {
                bool dod = best != len4;
                put_byte(o, dod ? 5 : 4);
                put_varint(o, x0);
                put_varint(o, dod ? zz(d1) : g);
                put_byte(o, (uint8_t)(dod ? dod_w : delta_w));
                put_bits(o, v, dod ? 2 : 1, n, c, dod, g, dod ? dod_w : delta_w);
                return;
        }
        if (len2 <= len3) {
                put_byte(o, 2);
                put_varint(o, x0);
                put_varint(o, g);
                for (size_t i = 1; i < n; i++) {
                        uint64_t d = get_int(&v[i], c) - get_int(&v[i - 1], c);
                        put_varint(o, zz((uint64_t)((int64_t)d / (int64_t)g)));
                }
                return;
        }
        put_byte(o, 3);
        put_varint(o, x0);
        put_varint(o, zz(d1));
        for (size_t i = 2; i < n; i++) {
                uint64_t d = get_int(&v[i], c) - get_int(&v[i - 1], c);
                uint64_t d0 = get_int(&v[i - 1], c) - get_int(&v[i - 2], c);
                put_varint(o, zz(d - d0));
        }
}

static void put_double_col(struct out *o, const struct sample *v, size_t n, size_t off) {
        uint64_t first = bits_of(get_double(&v[0], off)), prev = 0;
        bool same = true;
        for (size_t i = 1; i < n && same; i++)
                same = bits_of(get_double(&v[i], off)) == first;
        if (same && first == 0) {
                put_byte(o, 2);
                return;
        }
        if (same) {
                put_byte(o, 0);
                put_u64le(o, first);
                return;
        }
        put_byte(o, 1);
        for (size_t i = 0; i < n; i++) {
                uint64_t b = bits_of(get_double(&v[i], off)), x = b ^ prev;
                prev = b;
                if (x == 0) {
                        put_byte(o, 0);
                        continue;
                }
                unsigned lz = (unsigned)__builtin_clzll(x) / 8, tz = (unsigned)__builtin_ctzll(x) / 8;
                unsigned len = 8 - lz - tz;
                put_byte(o, (uint8_t)(lz << 4 | len));
                for (unsigned k = 0; k < len; k++)
                        put_byte(o, (uint8_t)(x >> (8 * (tz + k))));
        }
}

/* Sample i's rate r as a reader recomputes it from sample i - 1: false when
 * it cannot (no rate there, or nothing before it). */
static bool recompute(const struct sample *v, size_t i, enum rate r, double *ret) {
        if (i == 0 || v[i].interval_us == 0)
                return false;
        const struct sample *a = &v[i - 1], *z = &v[i];
        double dt_s = (double)z->interval_us / 1e6;
        switch (r) {
        case R_CPU:
                if (!z->has_cpu_pct)
                        return false;
                *ret = (double)(z->cpu_time_ns - a->cpu_time_ns) / 1e9 / dt_s * 100.0;
                return true;
        case R_READ:
        case R_WRITE:
                if (!z->has_io_rate || !a->has_io)
                        return false;
                *ret = (double)(r == R_READ ? z->read_bytes - a->read_bytes : z->write_bytes - a->write_bytes) / dt_s;
                return true;
        case R_RX:
        case R_TX:
                if (!z->has_net_rate || !a->has_net)
                        return false;
                *ret = (double)(r == R_RX ? z->netns_rx_bytes - a->netns_rx_bytes
                                          : z->netns_tx_bytes - a->netns_tx_bytes) /
                       dt_s;
                return true;
        default:
                return false;
        }
}

/* Whether sample i has rate r at all (its flag). */
static bool has_rate(const struct sample *s, enum rate r) {
        return r == R_CPU ? s->has_cpu_pct : r <= R_WRITE ? s->has_io_rate : s->has_net_rate;
}

static void put_exceptions(struct out *o, const struct sample *v, size_t n) {
        size_t k = 0;
        for (int pass = 0; pass < 2; pass++) {
                if (pass == 1)
                        put_varint(o, k);
                for (size_t i = 0; i < n; i++)
                        for (enum rate r = 0; r < _R_MAX; r++) {
                                double x = get_double(&v[i], rate_fields[r]), y;
                                if (!has_rate(&v[i], r) || (recompute(v, i, r, &y) && bits_of(x) == bits_of(y)))
                                        continue;
                                if (pass == 0) {
                                        k++;
                                        continue;
                                }
                                put_varint(o, i);
                                put_byte(o, (uint8_t)r);
                                put_u64le(o, bits_of(x));
                        }
        }
}

int block_encode(const struct sample *v, size_t n, uint8_t **ret, size_t *ret_len) {
        if (n == 0 || n > BLOCK_MAX_SAMPLES)
                return -EINVAL;
        struct out o = {};
        put_byte(&o, BLOCK_VERSION);
        put_varint(&o, n);
        for (size_t c = 0; c < ELEMENTSOF(int_cols); c++)
                put_int_col(&o, v, n, &int_cols[c]);
        for (size_t c = 0; c < ELEMENTSOF(double_cols); c++)
                put_double_col(&o, v, n, double_cols[c]);
        put_exceptions(&o, v, n);
        if (o.oom) {
                free(o.p);
                return -ENOMEM;
        }
        *ret = o.p;
        *ret_len = o.len;
        return 0;
}

/* ---- decoding ----------------------------------------------------------------- */

struct in {
        const uint8_t *p;
        size_t len, at;
        bool bad;
};

static uint8_t get_byte(struct in *in) {
        if (in->at >= in->len) {
                in->bad = true;
                return 0;
        }
        return in->p[in->at++];
}

static uint64_t get_varint(struct in *in) {
        uint64_t v = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
                uint8_t b = get_byte(in);
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80))
                        return v;
        }
        in->bad = true; /* more than 10 bytes */
        return 0;
}

static uint64_t get_u64le(struct in *in) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v |= (uint64_t)get_byte(in) << (8 * i);
        return v;
}

/* The bits of modes 4 and 5: w bits at a time, little-endian. */
struct bits {
        uint64_t acc;
        unsigned have, w;
};

static uint64_t get_bits(struct in *in, struct bits *b) {
        uint64_t x = 0;
        for (unsigned got = 0; got < b->w;) {
                if (b->have == 0) {
                        b->acc = get_byte(in);
                        b->have = 8;
                }
                unsigned take = b->w - got < b->have ? b->w - got : b->have;
                x |= (b->acc & ((UINT64_C(1) << take) - 1)) << got;
                b->acc >>= take;
                b->have -= take;
                got += take;
        }
        return x;
}

/* Mode 6's deltas after x0: 0 but where one is listed. */
static void get_sparse_col(struct in *in, struct sample *v, size_t n, const struct int_col *c, uint64_t x, uint64_t g) {
        uint64_t k = get_varint(in);
        size_t next = 0;
        uint64_t d = 0;
        if (k >= n)
                in->bad = true;
        for (size_t i = 1; i < n && !in->bad; i++) {
                if (k > 0 && next < i) {
                        uint64_t gap = get_varint(in);
                        d = unzz(get_varint(in)) * g;
                        k--;
                        if (gap == 0 || gap > n - next || d == 0) /* each listed once, in order, not 0 */
                                in->bad = true;
                        next += gap;
                }
                x += next == i ? d : 0;
                set_int(&v[i], c, x);
        }
        if (k > 0 || next >= n)
                in->bad = true;
}

static void get_int_col(struct in *in, struct sample *v, size_t n, const struct int_col *c, uint8_t version) {
        uint8_t mode = get_byte(in);
        uint64_t x = get_varint(in), d = 0, g = 1;
        struct bits b = {};
        set_int(&v[0], c, x);
        if (mode > (version >= 3 ? 6 : 3)) {
                in->bad = true;
                return;
        }
        if (mode == 1 || mode == 3 || mode == 5)
                d = unzz(get_varint(in));
        if (mode == 2 || mode == 4 || mode == 6)
                g = get_varint(in);
        if (mode == 6) {
                get_sparse_col(in, v, n, c, x, g);
                return;
        }
        if (mode >= 4 && (b.w = get_byte(in)) > 64)
                in->bad = true;
        for (size_t i = 1; i < n && !in->bad; i++) {
                if (mode == 2 || mode == 4)
                        /* modulo 2^64, as the encoder divided */
                        d = unzz(mode == 2 ? get_varint(in) : get_bits(in, &b)) * g;
                else if ((mode == 3 || mode == 5) && i >= 2)
                        d += unzz(mode == 3 ? get_varint(in) : get_bits(in, &b));
                x += mode == 0 ? 0 : d;
                set_int(&v[i], c, x);
        }
        if (b.have > 0 && b.acc != 0) /* the padding is 0: one way to write a block */
                in->bad = true;
}

static void get_double_col(struct in *in, struct sample *v, size_t n, size_t off, uint8_t version) {
        uint8_t mode = get_byte(in);
        uint64_t prev = 0;
        if (mode == 0 || (mode == 2 && version >= 3)) {
                double d = mode == 0 ? double_of(get_u64le(in)) : 0;
                for (size_t i = 0; i < n; i++)
                        *(double *)((char *)&v[i] + off) = d;
                return;
        }
        if (mode != 1) {
                in->bad = true;
                return;
        }
        for (size_t i = 0; i < n && !in->bad; i++) {
                uint8_t h = get_byte(in);
                uint64_t x = 0;
                if (h != 0) {
                        unsigned lz = h >> 4, len = h & 0x0f;
                        if (len == 0 || lz + len > 8) {
                                in->bad = true;
                                return;
                        }
                        unsigned tz = 8 - lz - len;
                        for (unsigned k = 0; k < len; k++)
                                x |= (uint64_t)get_byte(in) << (8 * (tz + k));
                }
                prev ^= x;
                *(double *)((char *)&v[i] + off) = double_of(prev);
        }
}

int block_decode(const uint8_t *p, size_t len, struct sample **ret, size_t *ret_n) {
        struct in in = { .p = p, .len = len };
        uint8_t version = get_byte(&in);
        if (version < 1 || version > BLOCK_VERSION)
                return -EBADMSG;
        size_t n_int_cols = version == 1 ? V1_INT_COLS : ELEMENTSOF(int_cols);
        uint64_t n = get_varint(&in);
        if (in.bad || n == 0 || n > BLOCK_MAX_SAMPLES)
                return -EBADMSG;
        struct sample *v = calloc(n, sizeof *v);
        if (!v)
                return -ENOMEM;
        for (size_t c = 0; c < n_int_cols && !in.bad; c++)
                get_int_col(&in, v, n, &int_cols[c], version);
        for (size_t c = 0; c < ELEMENTSOF(double_cols) && !in.bad; c++)
                get_double_col(&in, v, n, double_cols[c], version);
        /* the rates: recomputed, then the exceptions over them */
        for (size_t i = 0; i < n && !in.bad; i++)
                for (enum rate r = 0; r < _R_MAX; r++) {
                        double y = 0;
                        if (has_rate(&v[i], r) && recompute(v, i, r, &y))
                                *(double *)((char *)&v[i] + rate_fields[r]) = y;
                }
        uint64_t k = get_varint(&in);
        for (uint64_t j = 0; j < k && !in.bad; j++) {
                uint64_t i = get_varint(&in);
                uint8_t r = get_byte(&in);
                uint64_t bits = get_u64le(&in);
                if (i >= n || r >= _R_MAX || !has_rate(&v[i], (enum rate)r)) {
                        in.bad = true;
                        break;
                }
                *(double *)((char *)&v[i] + rate_fields[r]) = double_of(bits);
        }
        if (in.bad || in.at != in.len) {
                free(v);
                return -EBADMSG;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* StatsD line parsing. One pass over each field, no allocation, no locale:
 * the byte classes below decide what a name, a number and a category may
 * hold, plain decimals are converted without strtod(), and strtod() only
 * ever sees a NUL-terminated stack copy of at most STATSD_NUMBER_MAX bytes
 * from [0-9.eE+-].
 *
 * Choices where statsd.h is silent (tests/ingest/test-statsd.c pins each one):
 *  - numbers (value and @rate) are decimal only: an optional sign, digits,
 *    an optional '.', an optional exponent ("1e-05", as Python prints small
 *    floats). Hex ("0x10"), "inf", "nan", blanks, a ',' decimal separator
 *    and anything longer than STATSD_NUMBER_MAX bytes are malformed. A result
 *    that overflows (1e999) is malformed; one that underflows (1e-999)
 *    becomes 0 or a subnormal and is kept. A finite value or rate outside
 *    the bounds in statsd.h is malformed too (bounds included: 2^53|c and
 *    1e9|ms and @1e-6 are fine).
 *  - a timing written with a '-' is malformed, "-0" included; a '+' is
 *    accepted on every type; only on "g" does a sign mean a delta.
 *  - names and categories: besides C0 controls and DEL, the space (so the
 *    header's " a:1|c" is malformed wherever the blank is), the C1
 *    controls U+0080..U+009F (a raw CSI in a log line) and the
 *    bidirectional formatting characters (utf8_is_plain_text()) are
 *    refused.
 *  - after the type, each section starts with '@' (rate) or '#' (tags) and
 *    comes at most once; an empty section ("a:1|c|") or any other kind
 *    (DogStatsD's "|c:container" and "|T123") is malformed.
 *  - tags: split on ',', then on the first ':'. Empty tags (an empty "|#"
 *    section too) and bare tags (no ':') are ignored, and so is a key
 *    other than run/pid/category (keys are case-sensitive: "Run:5" is just
 *    an unknown tag). run and pid
 *    take plain decimal digits (no sign, no blank, leading zeros fine); a
 *    known key that comes twice in one line is malformed, whatever the
 *    values, rather than one silently winning.
 *  - a NUL byte anywhere in the line is malformed; a single trailing '\r'
 *    is dropped before parsing.
 *  - events, DogStatsD's "_e{TITLE_LEN,TEXT_LEN}:title|text": the lengths
 *    are plain decimals in bytes (at most 5 digits: a datagram holds 16
 *    KiB), and must fit the line exactly: the title is followed by '|',
 *    the text by the line's end or '|'. The title is a mark's label as the
 *    HTTP API takes it (1 to STATSD_TITLE_MAX bytes of valid UTF-8 without
 *    control or bidirectional formatting characters; a space, ':' or '|'
 *    are fine, the length says where it ends). The text may be empty and is not read, but for NUL
 *    bytes. After it, DogStatsD's sections d:, h:, k:, p:, s:, t: (each at
 *    most once, contents ignored) and "#tags" (as for metrics); any other
 *    section is malformed. Any line starting with "_e{" is an event, so
 *    "_e{1,1}:5|c" is an event titled "5", not a counter.
 *  - on -EINVAL, *ret is left untouched; statsd_parse_datagram() sets
 *    *ret_malformed (it does not add to it), and takes a NULL fn or
 *    ret_malformed. */
#include "ingest/statsd.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"

/* "-1.7976931348623157e+308" is 24 bytes; 64 leaves room for digits that
 * only add precision, and bounds the stack copy. */
#define STATSD_NUMBER_MAX 64

/* ---- byte classes ------------------------------------------------------- */

enum {
        TC_OK = 0, /* printable ASCII that may appear in a name/category */
        TC_BAD,    /* control, DEL, space, or a delimiter */
        TC_HIGH,   /* >= 0x80: part of a UTF-8 sequence, checked apart */
        TC_COLON,  /* ':' ends a name; in a category it is TC_BAD */
};

/* Name bytes. ',' is allowed in a name (it only separates tags). */
static const unsigned char name_class[256] = {
        [0x00 ... 0x20] = TC_BAD, /* C0 controls and the space */
        [':'] = TC_COLON,         ['|'] = TC_BAD,  ['@'] = TC_BAD,
        ['#'] = TC_BAD,           [0x7f] = TC_BAD, [0x80 ... 0xff] = TC_HIGH,
};

/* Category bytes: the name's rules, and neither ':' nor ','. */
static const unsigned char category_class[256] = {
        [0x00 ... 0x20] = TC_BAD, [':'] = TC_BAD, [','] = TC_BAD,  ['|'] = TC_BAD,
        ['@'] = TC_BAD,           ['#'] = TC_BAD, [0x7f] = TC_BAD, [0x80 ... 0xff] = TC_HIGH,
};

static bool is_number_char(unsigned char c) {
        return (c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-' || c == 'e' || c == 'E';
}

bool statsd_category_valid(const char *s, size_t len) {
        if (len == 0 || len > STATSD_CATEGORY_MAX)
                return false;
        bool high = false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = category_class[(unsigned char)s[i]];
                if (c == TC_BAD)
                        return false;
                high |= c == TC_HIGH;
        }
        return !high || utf8_is_plain_text(s, len);
}

/* ---- numbers ------------------------------------------------------------ */

/* Exactly representable powers of ten for the fast path. */
static const double pow10_exact[] = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
};

/* A finite decimal number filling all of s[0..n). */
static int parse_number(const char *s, size_t n, double *ret) {
        if (n == 0 || n > STATSD_NUMBER_MAX)
                return -EINVAL;

        /* Fast path: [+-]digits[.digits] with at most 15 digits. The digits
         * form an integer below 2^53 and 10^frac is exact, so one IEEE
         * division gives the correctly rounded value, the same as strtod(). */
        size_t i = 0;
        bool neg = false;
        if (s[0] == '+' || s[0] == '-') {
                neg = s[0] == '-';
                i = 1;
        }
        uint64_t mant = 0;
        unsigned ndigits = 0, nfrac = 0;
        bool dot = false;
        for (; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c >= '0' && c <= '9') {
                        if (++ndigits > 15)
                                break;
                        mant = mant * 10 + (c - '0');
                        nfrac += dot;
                } else if (c == '.' && !dot)
                        dot = true;
                else
                        break;
        }
        if (i == n) {
                if (ndigits == 0)
                        return -EINVAL; /* "", "+", ".", "-." */
                double d = (double)mant / pow10_exact[nfrac];
                *ret = neg ? -d : d;
                return 0;
        }

        /* Slow path: exponents and long digit strings. Only bytes strtod()
         * reads as a decimal get through, so no hex, inf, nan or blanks. */
        for (i = 0; i < n; i++)
                if (!is_number_char((unsigned char)s[i]))
                        return -EINVAL;
        char buf[STATSD_NUMBER_MAX + 1];
        memcpy(buf, s, n);
        buf[n] = 0;
        char *end;
        double d = strtod(buf, &end);
        if (end != buf + n || !isfinite(d))
                return -EINVAL;
        *ret = d;
        return 0;
}

/* Plain decimal digits, value in 1..max. */
static int parse_positive(const char *s, size_t n, int64_t max, int64_t *ret) {
        if (n == 0)
                return -EINVAL;
        int64_t v = 0;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c < '0' || c > '9')
                        return -EINVAL;
                if (v > (max - (c - '0')) / 10)
                        return -EINVAL;
                v = v * 10 + (c - '0');
        }
        if (v <= 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* ---- tags --------------------------------------------------------------- */

static int parse_tag(const char *t, size_t n, struct statsd_metric *m) {
        const char *colon = memchr(t, ':', n);
        if (!colon)
                return 0; /* bare tag (or empty): ignored */
        size_t klen = (size_t)(colon - t);
        const char *v = colon + 1;
        size_t vlen = n - klen - 1;
        int64_t x;

        if (klen == 3 && memcmp(t, "run", 3) == 0) {
                if (m->has_run || parse_positive(v, vlen, INT64_MAX, &x) < 0)
                        return -EINVAL;
                m->has_run = true;
                m->run = x;
        } else if (klen == 3 && memcmp(t, "pid", 3) == 0) {
                if (m->has_pid || parse_positive(v, vlen, INT32_MAX, &x) < 0)
                        return -EINVAL;
                m->has_pid = true;
                m->pid = (int32_t)x;
        } else if (klen == 8 && memcmp(t, "category", 8) == 0) {
                if (m->category || !statsd_category_valid(v, vlen))
                        return -EINVAL;
                m->category = v;
                m->category_len = vlen;
        }
        return 0;
}

static int parse_tags(const char *s, size_t n, struct statsd_metric *m) {
        /* The only field whose bytes are not all classified otherwise. */
        if (memchr(s, 0, n))
                return -EINVAL;
        const char *p = s, *end = s + n;
        for (;;) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                const char *te = comma ? comma : end;
                if (parse_tag(p, (size_t)(te - p), m) < 0)
                        return -EINVAL;
                if (!comma)
                        return 0;
                p = comma + 1;
        }
}

/* ---- sections ----------------------------------------------------------- */

/* The section after the '|' at p: its bytes up to the next '|' or end;
 * returns where the one after it starts (a '|', or end). */
static const char *next_section(const char *p, const char *end, const char **ret_s, size_t *ret_len) {
        const char *s = p + 1;
        const char *se = memchr(s, '|', (size_t)(end - s));
        if (!se)
                se = end;
        *ret_s = s;
        *ret_len = (size_t)(se - s);
        return se;
}

/* ---- events ------------------------------------------------------------- */

#define EVENT_PREFIX "_e{"
#define EVENT_LENGTH_DIGITS 5

/* The label rules of the HTTP API's marks. */
static bool title_valid(const char *s, size_t len) {
        return len > 0 && len <= STATSD_TITLE_MAX && utf8_is_plain_text(s, len);
}

/* A length at *p, ended by stop; *p moves past stop. */
static int parse_length(const char **p, const char *end, char stop, size_t *ret) {
        const char *s = *p;
        size_t v = 0, n = 0;
        for (; s < end && *s >= '0' && *s <= '9'; s++) {
                if (++n > EVENT_LENGTH_DIGITS)
                        return -EINVAL;
                v = v * 10 + (size_t)(*s - '0');
        }
        if (n == 0 || s == end || *s != stop)
                return -EINVAL;
        *p = s + 1;
        *ret = v;
        return 0;
}

/* The sections after an event's text: "|d:..", "|h:..", "|k:..", "|p:..",
 * "|s:..", "|t:.." and "|#tags", each at most once. */
static int parse_event_sections(const char *p, const char *end, struct statsd_metric *m) {
        unsigned seen = 0;
        while (p < end) {
                const char *s;
                size_t slen;
                const char *next = next_section(p, end, &s, &slen);
                unsigned bit;
                switch (slen >= 2 && s[1] == ':' ? s[0] : slen > 0 && s[0] == '#' ? '#' : 0) {
                case 'd':
                case 'h':
                case 'k':
                case 'p':
                case 's':
                case 't':
                        bit = 1u << (s[0] - 'a');
                        if (memchr(s, 0, slen))
                                return -EINVAL;
                        break;
                case '#':
                        bit = 1u << 31;
                        if (!(seen & bit) && parse_tags(s + 1, slen - 1, m) < 0)
                                return -EINVAL;
                        break;
                default:
                        return -EINVAL;
                }
                if (seen & bit)
                        return -EINVAL;
                seen |= bit;
                p = next;
        }
        return 0;
}

/* "_e{TITLE_LEN,TEXT_LEN}:title|text[|sections]", len bytes from line. */
static int parse_event(const char *line, size_t len, struct statsd_metric *ret) {
        const char *end = line + len, *p = line + strlen(EVENT_PREFIX);
        size_t title_len, text_len;

        if (parse_length(&p, end, ',', &title_len) < 0 || parse_length(&p, end, '}', &text_len) < 0)
                return -EINVAL;
        if (p == end || *p != ':')
                return -EINVAL;
        p++;
        if (title_len > (size_t)(end - p) || !title_valid(p, title_len))
                return -EINVAL;
        struct statsd_metric m = {
                .name = p,
                .name_len = title_len,
                .type = STATSD_EVENT,
                .sample_rate = 1.0,
        };
        p += title_len;
        if (p == end || *p != '|' || text_len > (size_t)(end - p - 1))
                return -EINVAL;
        p++;
        if (memchr(p, 0, text_len))
                return -EINVAL;
        p += text_len;
        if ((p < end && *p != '|') || parse_event_sections(p, end, &m) < 0)
                return -EINVAL;
        *ret = m;
        return 0;
}

/* ---- lines -------------------------------------------------------------- */

int statsd_parse_line(const char *line, size_t len, struct statsd_metric *ret) {
        if (!line || len == 0)
                return -EINVAL;
        if (line[len - 1] == '\r')
                len--;
        if (len >= strlen(EVENT_PREFIX) && memcmp(line, EVENT_PREFIX, strlen(EVENT_PREFIX)) == 0)
                return parse_event(line, len, ret);

        struct statsd_metric m = {
                .sample_rate = 1.0,
        };

        /* name, up to the first ':' */
        size_t i;
        bool high = false;
        for (i = 0; i < len && i <= STATSD_NAME_MAX; i++) {
                unsigned char c = name_class[(unsigned char)line[i]];
                if (c == TC_COLON)
                        break;
                if (c == TC_BAD)
                        return -EINVAL;
                high |= c == TC_HIGH;
        }
        if (i == 0 || i > STATSD_NAME_MAX || i == len)
                return -EINVAL;
        if (high && !utf8_is_plain_text(line, i))
                return -EINVAL;
        m.name = line;
        m.name_len = i;

        /* value, up to the first '|' */
        const char *end = line + len;
        const char *v = line + i + 1;
        const char *bar = memchr(v, '|', (size_t)(end - v));
        if (!bar)
                return -EINVAL;
        size_t vlen = (size_t)(bar - v);
        if (parse_number(v, vlen, &m.value) < 0)
                return -EINVAL;

        /* type, up to the next '|' or the end */
        const char *t = bar + 1;
        const char *p = memchr(t, '|', (size_t)(end - t));
        if (!p)
                p = end;
        size_t tlen = (size_t)(p - t);
        if (tlen == 2 && t[0] == 'm' && t[1] == 's')
                m.type = STATSD_TIMING;
        else if (tlen == 1 && t[0] == 'h')
                m.type = STATSD_TIMING;
        else if (tlen == 1 && t[0] == 'c')
                m.type = STATSD_COUNTER;
        else if (tlen == 1 && t[0] == 'g')
                m.type = STATSD_GAUGE;
        else
                return -EINVAL;

        if (m.type == STATSD_TIMING && v[0] == '-')
                return -EINVAL; /* "-0" too: a duration has no sign */
        if (!(fabs(m.value) <= (m.type == STATSD_TIMING ? STATSD_TIMING_MAX_MS : STATSD_VALUE_MAX)))
                return -EINVAL;
        if (m.type == STATSD_GAUGE)
                m.gauge_delta = v[0] == '+' || v[0] == '-';

        /* sections: "|@rate" and "|#tags", each at most once, any order */
        bool seen_rate = false, seen_tags = false;
        while (p < end) {
                const char *s;
                size_t slen;
                const char *next = next_section(p, end, &s, &slen);
                if (slen == 0)
                        return -EINVAL;
                if (s[0] == '@') {
                        if (seen_rate)
                                return -EINVAL;
                        seen_rate = true;
                        double r;
                        if (parse_number(s + 1, slen - 1, &r) < 0 || !(r >= STATSD_RATE_MIN && r <= 1.0))
                                return -EINVAL;
                        m.sample_rate = r;
                } else if (s[0] == '#') {
                        if (seen_tags)
                                return -EINVAL;
                        seen_tags = true;
                        if (parse_tags(s + 1, slen - 1, &m) < 0)
                                return -EINVAL;
                } else
                        return -EINVAL;
                p = next;
        }

        *ret = m;
        return 0;
}

size_t statsd_parse_datagram(const char *buf, size_t len, statsd_metric_fn fn, void *userdata,
                             uint64_t *ret_malformed) {
        size_t good = 0;
        uint64_t bad = 0;
        const char *p = buf, *end = buf ? buf + len : NULL;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *le = nl ? nl : end;
                size_t n = (size_t)(le - p);
                if (n > 0 && !(n == 1 && p[0] == '\r')) {
                        struct statsd_metric m;
                        if (statsd_parse_line(p, n, &m) < 0)
                                bad++;
                        else {
                                good++;
                                if (fn)
                                        fn(&m, userdata);
                        }
                }
                if (!nl)
                        break;
                p = nl + 1;
        }

        if (ret_malformed)
                *ret_malformed = bad;
        return good;
}

/* SPDX-License-Identifier: MIT */
/* libFuzzer target: a datagram of arbitrary bytes through
 * statsd_parse_datagram(), from an exact-size heap copy (no NUL after it) so
 * ASan catches any read past len. Every metric it hands out must keep the
 * promises of statsd.h (an event's title those of a mark's label); each
 * line is also parsed alone and must agree.
 *
 *   tools/fuzz.sh 60 statsd */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "ingest/statsd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_ctx {
        const char *buf;
        size_t len;
        size_t seen;
};

static bool inside(const struct fuzz_ctx *c, const char *p, size_t n) {
        return p >= c->buf && n <= c->len && (size_t)(p - c->buf) <= c->len - n;
}

static bool label_ok(const char *s, size_t n, bool comma_ok) {
        if (!utf8_is_valid(s, n))
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char b = (unsigned char)s[i];
                if (b <= 0x20 || b == 0x7f || b == ':' || b == '|' || b == '@' || b == '#' || (!comma_ok && b == ','))
                        return false;
        }
        return true;
}

/* field by field: the struct has padding */
static bool same_metric(const struct statsd_metric *a, const struct statsd_metric *b) {
        return a->name == b->name && a->name_len == b->name_len && a->type == b->type &&
               memcmp(&a->value, &b->value, sizeof a->value) == 0 && a->sample_rate == b->sample_rate &&
               a->gauge_delta == b->gauge_delta && a->has_run == b->has_run && a->run == b->run &&
               a->has_pid == b->has_pid && a->pid == b->pid && a->category == b->category &&
               a->category_len == b->category_len;
}

/* A mark's label, as the HTTP API takes it. */
static bool title_ok(const char *s, size_t n) {
        if (n < 1 || n > STATSD_TITLE_MAX || !utf8_is_valid(s, n))
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

static void check_metric(const struct statsd_metric *m, void *userdata) {
        struct fuzz_ctx *c = userdata;
        c->seen++;
        if (m->name_len < 1 || m->name_len > STATSD_NAME_MAX || !inside(c, m->name, m->name_len))
                abort();
        if (m->type == STATSD_EVENT) {
                if (!title_ok(m->name, m->name_len) || m->value != 0 || m->sample_rate != 1 || m->gauge_delta)
                        abort();
        } else if (!label_ok(m->name, m->name_len, true) || memchr(m->name, '\n', m->name_len))
                abort();
        if (m->type != STATSD_TIMING && m->type != STATSD_COUNTER && m->type != STATSD_GAUGE && m->type != STATSD_EVENT)
                abort();
        if (!isfinite(m->value) || (m->type == STATSD_TIMING && m->value < 0))
                abort();
        if (fabs(m->value) > (m->type == STATSD_TIMING ? STATSD_TIMING_MAX_MS : STATSD_VALUE_MAX))
                abort();
        if (m->gauge_delta && m->type != STATSD_GAUGE)
                abort();
        if (!(m->sample_rate >= STATSD_RATE_MIN && m->sample_rate <= 1))
                abort();
        if (m->has_run && m->run <= 0)
                abort();
        if (m->has_pid && m->pid <= 0)
                abort();
        if (m->category) {
                if (m->category_len < 1 || m->category_len > STATSD_CATEGORY_MAX ||
                    !inside(c, m->category, m->category_len) || !label_ok(m->category, m->category_len, false))
                        abort();
        }
        /* the line the metric came from, parsed on its own, gives the same
         * (an event's title is inside its line, and may hold no '\n') */
        const char *ls = m->name;
        while (ls > c->buf && ls[-1] != '\n')
                ls--;
        const char *nl = memchr(ls, '\n', c->len - (size_t)(ls - c->buf));
        size_t ll = nl ? (size_t)(nl - ls) : c->len - (size_t)(ls - c->buf);
        struct statsd_metric again;
        if (statsd_parse_line(ls, ll, &again) < 0 || !same_metric(&again, m))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size == 0) {
                uint64_t bad = UINT64_MAX;
                if (statsd_parse_datagram(NULL, 0, NULL, NULL, &bad) != 0 || bad != 0)
                        abort();
                return 0;
        }
        char *buf = malloc(size);
        if (!buf)
                return 0;
        memcpy(buf, data, size);

        struct fuzz_ctx c = { .buf = buf, .len = size };
        uint64_t malformed = UINT64_MAX;
        size_t good = statsd_parse_datagram(buf, size, check_metric, &c, &malformed);
        if (good != c.seen)
                abort();
        /* no more lines than '\n's + 1, and each one counted once */
        size_t lines = 1;
        for (size_t i = 0; i < size; i++)
                lines += buf[i] == '\n';
        if (malformed == UINT64_MAX || good + malformed > lines)
                abort();

        /* the whole input as one line */
        struct statsd_metric m;
        if (statsd_parse_line(buf, size, &m) == 0 && memchr(buf, '\n', size) == NULL) {
                c.seen = 0;
                check_metric(&m, &c);
        }
        free(buf);
        return 0;
}

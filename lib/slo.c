/* SPDX-License-Identifier: MIT */
#include "slo.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* "50ms", "0.2s", "750us": only these units, as a latency target in
 * minutes or days is a typo, not an objective. */
static int parse_target_ms(const char *s, double *ret) {
        static const struct {
                const char *unit;
                double ms;
        } units[] = { { "us", 1e-3 }, { "ms", 1.0 }, { "s", 1e3 } };
        /* plain decimals only (strtod would also take 1e3 or 0x10); a
         * second '.' makes strtod stop early, which safe_atod refuses */
        size_t len = strspn(s, "0123456789.");
        char num[32];
        double v;
        if (len == 0 || len >= sizeof num || s[0] == '.')
                return -EINVAL;
        memcpy(num, s, len);
        num[len] = 0;
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (streq(s + len, units[i].unit)) {
                        if (safe_atod(num, &v) < 0 || !(v > 0))
                                return -EINVAL;
                        *ret = v * units[i].ms;
                        return 0;
                }
        return -EINVAL;
}

int slo_parse(const char *text, char sep, struct slo *ret, char *err, size_t errlen) {
        const char *at = strrchr(text, '@');
        const char *s = NULL;
        for (const char *p = text; at && p < at; p++)
                if (*p == sep)
                        s = p;
        if (!at || !s || s == text) {
                snprintf(err, errlen, "expected OP%cTARGET@PERCENTILE, such as inference%c50ms@95", sep, sep);
                return -EINVAL;
        }
        if (memchr(text, ',', (size_t)(s - text))) {
                snprintf(err, errlen, "the op name has a ',' (objectives are separated by commas)");
                return -EINVAL;
        }
        if ((size_t)(s - text) > SLO_OP_MAX) {
                snprintf(err, errlen, "the op name is longer than %d bytes", SLO_OP_MAX);
                return -EINVAL;
        }
        char target[32] = "";
        size_t tlen = (size_t)(at - s - 1);
        double target_ms, pct;
        if (tlen < sizeof target)
                memcpy(target, s + 1, tlen);
        /* 1e9 ms: the longest timing the daemon keeps */
        if (tlen >= sizeof target || parse_target_ms(target, &target_ms) < 0 || target_ms > 1e9) {
                snprintf(err, errlen, "the target is not a positive duration in us, ms or s (such as 50ms)");
                return -EINVAL;
        }
        const char *p = at[1] == 'p' ? at + 2 : at + 1;
        bool plain = *p && strlen(p) <= 16 && strspn(p, "0123456789.") == strlen(p) && p[0] != '.';
        if (!plain || safe_atod(p, &pct) < 0 || !(pct > 0 && pct < 100)) {
                snprintf(err, errlen, "the percentile is not a number in (0, 100) (such as 95 or 99.9)");
                return -EINVAL;
        }
        memcpy(ret->op, text, (size_t)(s - text));
        ret->op[s - text] = 0;
        ret->target_ms = target_ms;
        ret->percentile = pct;
        return 0;
}

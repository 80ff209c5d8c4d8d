/* SPDX-License-Identifier: MIT */
#include "format.h"

#include <math.h>
#include <stdio.h>

#include "util.h"

const char *format_bytes(char *buf, size_t size, double v, const char *suffix, int plus) {
        static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
        const char *sign = v < 0 ? "-" : plus ? "+" : "";
        double a = fabs(v);
        if (a < 1024) {
                snprintf(buf, size, "%s%.0f B%s", sign, a, suffix);
                return buf;
        }
        size_t i = 0;
        a /= 1024;
        while (a >= 1024 && i + 1 < ELEMENTSOF(units)) {
                a /= 1024;
                i++;
        }
        /* 1023.96 KiB would print as "1024.0 KiB": go one unit up */
        if (a >= 1023.95 && i + 1 < ELEMENTSOF(units)) {
                a /= 1024;
                i++;
        }
        snprintf(buf, size, "%s%.1f %s%s", sign, a, units[i], suffix);
        return buf;
}

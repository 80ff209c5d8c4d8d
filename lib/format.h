/* SPDX-License-Identifier: MIT */
/* Byte counts for people: the one formatter of the daemon's sentences and
 * mlmonctl's tables. */
#pragma once

#include <stddef.h>

/* v bytes as "512 B", "1.5 KiB", "20.0 MiB", "1.2 GiB" (binary units, one
 * decimal, never "1024.0 KiB"), then suffix ("/s"); plus: a "+" before a
 * value that is not negative. Returns buf. */
const char *format_bytes(char *buf, size_t size, double v, const char *suffix, int plus);

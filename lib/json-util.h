/* SPDX-License-Identifier: MIT */
/* json-c helpers that keep every document valid RFC 8259 JSON:
 *  - json-c 0.16 copies invalid UTF-8 through, so strings from the kernel
 *    (comm, cmdline) are repaired to valid UTF-8 (U+FFFD) first;
 *  - NaN and infinities become null, never "NaN";
 *  - counters use uint64 so values above 2^63 are not printed negative. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline void json_object_putp(json_object **j) {
        if (*j)
                json_object_put(*j);
}
#define _cleanup_json_ __attribute__((cleanup(json_object_putp)))

/* Copy of s[0..len) with invalid UTF-8 sequences replaced by U+FFFD and NUL
 * bytes by spaces (cmdline separators). Never NULL unless out of memory. */
char *utf8_sanitize(const char *s, size_t len);
bool utf8_is_valid(const char *s, size_t len);
/* Valid UTF-8 that reads as itself wherever it is shown: no NUL or other
 * control character (C0, DEL, C1) and no bidirectional formatting character
 * (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069). The one rule for
 * the names and labels users give: run names and tags, op names,
 * categories and mark labels, over HTTP, StatsD and mlmonctl. */
bool utf8_is_plain_text(const char *s, size_t len);

json_object *json_string_sanitized(const char *s, size_t len);
json_object *json_double_or_null(double v);             /* NULL (= JSON null) unless finite */
json_object *json_double_round(double v, int decimals); /* finite, rounded for humans */

/* Add a key only with a known value; otherwise add JSON null. */
void json_add_u64(json_object *o, const char *key, bool known, uint64_t v);
void json_add_i64(json_object *o, const char *key, bool known, int64_t v);
void json_add_double(json_object *o, const char *key, bool known, double v);
void json_add_string(json_object *o, const char *key, const char *s); /* NULL -> null */

/* {"error":{"code":code,"message":message}}: the one shape of every error
 * answer, as an object and as a malloc'ed string. */
json_object *json_error_new(const char *code, const char *message);
char *json_error_body(const char *code, const char *message);

/* Serialises without escaping '/', compact. The string belongs to o. */
const char *json_to_string(json_object *o);

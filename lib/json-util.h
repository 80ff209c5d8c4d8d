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
 * answer. */
json_object *json_error_new(const char *code, const char *message);

/* Serialises without escaping '/', compact. The string belongs to o. */
const char *json_to_string(json_object *o);

/* How every answer writes a double (json-c's serializer, set in main()). */
#define JSON_DOUBLE_FORMAT "%.10g"

/* JSON text written straight into a growing buffer, byte for byte what
 * json_to_string() writes for the same values, without a json-c object (a
 * malloc and a hash table) per value: for answers of thousands of points.
 * Keys and values are written in order; the commas come by themselves. */
struct json_text {
        char *p;
        size_t len;
        bool oom; /* out of memory: json_text_take() returns NULL */
        bool comma, after_key;
};
void json_text_open(struct json_text *t, char c); /* '{' or '[' */
void json_text_close(struct json_text *t, char c);
void json_text_key(struct json_text *t, const char *key);
void json_text_null(struct json_text *t);
void json_text_bool(struct json_text *t, bool v);
void json_text_u64(struct json_text *t, uint64_t v);
void json_text_i64(struct json_text *t, int64_t v);
void json_text_double(struct json_text *t, double v); /* null unless finite */
void json_text_string(struct json_text *t, const char *s);
/* o serialized (NULL: null), taken over. */
void json_text_json(struct json_text *t, json_object *o);
/* The text with a newline after it (malloc'ed, *ret_len bytes), or NULL out
 * of memory; t is left empty. */
char *json_text_take(struct json_text *t, size_t *ret_len);
void json_text_done(struct json_text *t);

/* Where a renderer writes an object's fields: into a json-c object (obj),
 * or as text (text, between the json_text_open() and json_text_close() of
 * the object): one renderer, for both. */
struct json_fields {
        json_object *obj;
        struct json_text *text;
};
/* As json_add_*(): a known value, else null. */
void json_field_u64(const struct json_fields *f, const char *key, bool known, uint64_t v);
void json_field_i64(const struct json_fields *f, const char *key, bool known, int64_t v);
void json_field_double(const struct json_fields *f, const char *key, bool known, double v);  /* 3 decimals */
void json_field_precise(const struct json_fields *f, const char *key, bool known, double v); /* as it is */
void json_field_string(const struct json_fields *f, const char *key, const char *s);
/* v (NULL: null), taken over. */
void json_field_json(const struct json_fields *f, const char *key, json_object *v);

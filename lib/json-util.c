/* SPDX-License-Identifier: MIT */
#include "json-util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. Follows
 * RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF. */
static size_t utf8_seq_len(const unsigned char *s, size_t left) {
        unsigned char c = s[0];
        if (c < 0x80)
                return 1;
        size_t n;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
                n = 2;
                cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
                n = 3;
                cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
                n = 4;
                cp = c & 0x07;
        } else
                return 0;
        if (n > left)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
                return 0;
        return n;
}

bool utf8_is_valid(const char *s, size_t len) {
        const unsigned char *u = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_seq_len(u + i, len - i);
                if (n == 0 || u[i] == 0)
                        return false;
                i += n;
        }
        return true;
}

char *utf8_sanitize(const char *s, size_t len) {
        const unsigned char *u = (const unsigned char *)s;
        char *out = malloc(len * 3 + 1), *o = out;
        if (!out)
                return NULL;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_seq_len(u + i, len - i);
                if (n == 0) {
                        memcpy(o, "\xEF\xBF\xBD", 3);
                        o += 3;
                        i++;
                } else if (u[i] == 0) {
                        *o++ = ' ';
                        i++;
                } else {
                        memcpy(o, u + i, n);
                        o += n;
                        i += n;
                }
        }
        *o = 0;
        return out;
}

json_object *json_string_sanitized(const char *s, size_t len) {
        if (!s)
                return NULL;
        if (utf8_is_valid(s, len))
                return json_object_new_string_len(s, (int)len);
        char *c = utf8_sanitize(s, len);
        if (!c)
                return NULL;
        json_object *j = json_object_new_string(c);
        free(c);
        return j;
}

json_object *json_double_or_null(double v) {
        if (!isfinite(v))
                return NULL;
        return json_object_new_double(v);
}

json_object *json_double_round(double v, int decimals) {
        if (!isfinite(v))
                return NULL;
        double p = pow(10, decimals);
        double r = round(v * p) / p;
        if (r == 0)
                r = 0; /* no "-0.0" */
        return json_object_new_double(r);
}

void json_add_u64(json_object *o, const char *key, bool known, uint64_t v) {
        json_object_object_add(o, key, known ? json_object_new_uint64(v) : NULL);
}

void json_add_i64(json_object *o, const char *key, bool known, int64_t v) {
        json_object_object_add(o, key, known ? json_object_new_int64(v) : NULL);
}

void json_add_double(json_object *o, const char *key, bool known, double v) {
        json_object_object_add(o, key, known ? json_double_round(v, 3) : NULL);
}

void json_add_string(json_object *o, const char *key, const char *s) {
        json_object_object_add(o, key, s ? json_string_sanitized(s, strlen(s)) : NULL);
}

json_object *json_error_new(const char *code, const char *message) {
        json_object *root = json_object_new_object(), *err = json_object_new_object();
        json_add_string(err, "code", code);
        json_add_string(err, "message", message);
        json_object_object_add(root, "error", err);
        return root;
}

char *json_error_body(const char *code, const char *message) {
        _cleanup_json_ json_object *root = json_error_new(code, message);
        return strdup(json_to_string(root));
}

const char *json_to_string(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* SPDX-License-Identifier: MIT */
#include "json-util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid, and its
 * code point. Follows RFC 3629: no overlongs, no surrogates, nothing above
 * U+10FFFF. */
static size_t utf8_decode(const unsigned char *s, size_t left, uint32_t *ret_cp) {
        unsigned char c = s[0];
        if (c < 0x80) {
                *ret_cp = c;
                return 1;
        }
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
        *ret_cp = cp;
        return n;
}

static size_t utf8_seq_len(const unsigned char *s, size_t left) {
        uint32_t cp;
        return utf8_decode(s, left, &cp);
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

/* A character that is not shown as itself: a control (C0, DEL, C1: a raw
 * CSI moves a terminal's cursor), or a bidirectional formatting character
 * (the Arabic letter mark U+061C, the marks U+200E and U+200F, the
 * embeddings and overrides U+202A..U+202E, the isolates U+2066..U+2069),
 * which makes the text around it read in another order: "U+202E gpj.exe"
 * shows as "exe.jpg". */
static bool codepoint_hidden(uint32_t cp) {
        return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
               (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

bool utf8_is_plain_text(const char *s, size_t len) {
        const unsigned char *u = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                size_t n = utf8_decode(u + i, len - i, &cp);
                if (n == 0 || codepoint_hidden(cp))
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

/* SPDX-License-Identifier: MIT */
#include "json-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

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

/* v rounded to decimals, for humans (no "-0.0"). */
static double round_to(double v, int decimals) {
        double p = decimals == 3 ? 1000.0 : pow(10, decimals);
        double r = round(v * p) / p;
        return r == 0 ? 0 : r;
}

json_object *json_double_round(double v, int decimals) {
        if (!isfinite(v))
                return NULL;
        return json_object_new_double(round_to(v, decimals));
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

const char *json_to_string(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* ---- JSON text ------------------------------------------------------------------ */

static void put(struct json_text *t, const char *s, size_t n) {
        if (t->oom || !GREEDY_REALLOC(t->p, t->len + n + 1)) {
                t->oom = true;
                return;
        }
        memcpy(t->p + t->len, s, n);
        t->len += n;
}

/* Before a value: its comma, unless it follows its key. */
static void value_start(struct json_text *t) {
        if (t->after_key)
                t->after_key = false;
        else if (t->comma)
                put(t, ",", 1);
        t->comma = true;
}

void json_text_open(struct json_text *t, char c) {
        value_start(t);
        put(t, &c, 1);
        t->comma = false;
}

void json_text_close(struct json_text *t, char c) {
        put(t, &c, 1);
        t->comma = true;
}

/* s escaped as json-c escapes it (with JSON_C_TO_STRING_NOSLASHESCAPE). */
static void put_escaped(struct json_text *t, const char *s) {
        static const char special[] = "\b\n\r\t\f\"\\", letter[] = "bnrtf\"\\";
        put(t, "\"", 1);
        const char *run = s;
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c >= ' ' && c != '"' && c != '\\')
                        continue;
                const char *e = strchr(special, c);
                char esc[7];
                if (e)
                        snprintf(esc, sizeof esc, "\\%c", letter[e - special]);
                else
                        snprintf(esc, sizeof esc, "\\u00%c%c", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
                put(t, run, (size_t)(s - run));
                put(t, esc, strlen(esc));
                run = s + 1;
        }
        put(t, run, (size_t)(s - run));
        put(t, "\"", 1);
}

void json_text_key(struct json_text *t, const char *key) {
        if (t->comma)
                put(t, ",", 1);
        put_escaped(t, key);
        put(t, ":", 1);
        t->comma = true;
        t->after_key = true;
}

void json_text_null(struct json_text *t) {
        value_start(t);
        put(t, "null", 4);
}

void json_text_bool(struct json_text *t, bool v) {
        value_start(t);
        put(t, v ? "true" : "false", v ? 4 : 5);
}

/* The digits of v, ending at end; returns where they start. */
static char *digits(uint64_t v, char *end) {
        do
                *--end = (char)('0' + v % 10);
        while ((v /= 10) > 0);
        return end;
}

void json_text_u64(struct json_text *t, uint64_t v) {
        char b[24], *q = digits(v, b + sizeof b);
        value_start(t);
        put(t, q, (size_t)(b + sizeof b - q));
}

void json_text_i64(struct json_text *t, int64_t v) {
        char b[24], *q = digits(v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, b + sizeof b);
        if (v < 0)
                *--q = '-';
        value_start(t);
        put(t, q, (size_t)(b + sizeof b - q));
}

/* As json-c writes a double with JSON_DOUBLE_FORMAT: ".0" after a number
 * that has no point and no exponent. */
void json_text_double(struct json_text *t, double v) {
        if (!isfinite(v)) {
                json_text_null(t);
                return;
        }
        char b[64];
        int n = snprintf(b, sizeof b - 2, JSON_DOUBLE_FORMAT, v);
        if (n < 0 || n >= (int)sizeof b - 2)
                n = 0;
        if (!strpbrk(b, ".e") && (b[0] == '-' ? b[1] : b[0]) >= '0' && (b[0] == '-' ? b[1] : b[0]) <= '9') {
                memcpy(b + n, ".0", 3);
                n += 2;
        }
        value_start(t);
        put(t, b, (size_t)n);
}

/* json_double_round(v, 3) as json-c writes it. Most values have at most 10
 * significant digits once rounded (below 10^7), which the format prints as
 * they are: written here from the integer of thousandths, without printf. */
static void json_text_double3(struct json_text *t, double v) {
        double k = round(v * 1000.0);
        if (!isfinite(v) || fabs(k) >= 1e10) {
                json_text_double(t, isfinite(v) ? round_to(v, 3) : v);
                return;
        }
        uint64_t i = (uint64_t)fabs(k);
        char b[40], *q = b + 24, *start = digits(i / 1000, q);
        if (k < 0)
                *--start = '-';
        unsigned frac = (unsigned)(i % 1000);
        *q++ = '.';
        if (frac == 0)
                *q++ = '0';
        for (unsigned d = 100; frac > 0; d /= 10) {
                *q++ = (char)('0' + frac / d);
                frac %= d;
        }
        value_start(t);
        put(t, start, (size_t)(q - start));
}

void json_text_string(struct json_text *t, const char *s) {
        if (!s) {
                json_text_null(t);
                return;
        }
        value_start(t);
        if (utf8_is_valid(s, strlen(s))) {
                put_escaped(t, s);
                return;
        }
        char *c = utf8_sanitize(s, strlen(s));
        if (!c)
                t->oom = true;
        else
                put_escaped(t, c);
        free(c);
}

void json_text_json(struct json_text *t, json_object *o) {
        value_start(t);
        const char *s = o ? json_to_string(o) : "null";
        put(t, s, strlen(s));
        if (o)
                json_object_put(o);
}

char *json_text_take(struct json_text *t, size_t *ret_len) {
        put(t, "\n", 1);
        char *p = t->oom ? NULL : TAKE_PTR(t->p);
        if (p) {
                p[t->len] = 0;
                *ret_len = t->len;
        }
        json_text_done(t);
        return p;
}

void json_text_done(struct json_text *t) {
        free(t->p);
        *t = (struct json_text){};
}

/* For text: the key, and null when the value is not known; whether the
 * value is still to be written. */
static bool field_key(const struct json_fields *f, const char *key, bool known) {
        json_text_key(f->text, key);
        if (!known)
                json_text_null(f->text);
        return known;
}

void json_field_u64(const struct json_fields *f, const char *key, bool known, uint64_t v) {
        if (f->obj)
                json_add_u64(f->obj, key, known, v);
        else if (field_key(f, key, known))
                json_text_u64(f->text, v);
}

void json_field_i64(const struct json_fields *f, const char *key, bool known, int64_t v) {
        if (f->obj)
                json_add_i64(f->obj, key, known, v);
        else if (field_key(f, key, known))
                json_text_i64(f->text, v);
}

void json_field_double(const struct json_fields *f, const char *key, bool known, double v) {
        if (f->obj)
                json_add_double(f->obj, key, known, v);
        else if (field_key(f, key, known))
                json_text_double3(f->text, v);
}

void json_field_precise(const struct json_fields *f, const char *key, bool known, double v) {
        if (f->obj)
                json_object_object_add(f->obj, key, known ? json_double_or_null(v) : NULL);
        else if (field_key(f, key, known))
                json_text_double(f->text, v);
}

void json_field_string(const struct json_fields *f, const char *key, const char *s) {
        if (f->obj) {
                json_add_string(f->obj, key, s);
                return;
        }
        json_text_key(f->text, key);
        json_text_string(f->text, s);
}

void json_field_json(const struct json_fields *f, const char *key, json_object *v) {
        if (f->obj) {
                json_object_object_add(f->obj, key, v);
                return;
        }
        json_text_key(f->text, key);
        json_text_json(f->text, v);
}

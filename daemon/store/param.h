/* SPDX-License-Identifier: MIT */
/* A statement's parameters as one list: bind_params(st, PARAMS(p_int(id), p_text(name))). */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A value for one of a statement's parameters (NULL where it is not known). Text and blobs are
 * not copied: they must outlive the step. */
struct param {
        enum { PARAM_END, PARAM_NULL, PARAM_INT, PARAM_DOUBLE, PARAM_TEXT, PARAM_BLOB } type;
        int64_t i;
        double d;
        const void *p;
        size_t len;
};
/* The parameters 1, 2, ... of a statement: PARAMS(p_int(id), p_text(name)). */
#define PARAMS(...) ((const struct param[]){ __VA_ARGS__, { .type = PARAM_END } })

static inline struct param p_null(void) {
        return (struct param){ .type = PARAM_NULL };
}

static inline struct param p_int(int64_t v) {
        return (struct param){ .type = PARAM_INT, .i = v };
}

/* Values above INT64_MAX do not occur for our counters in practice
 * (2^63 ns = 292 years); clamp rather than wrap. */
static inline struct param p_u64(bool known, uint64_t v) {
        return known ? p_int(v > INT64_MAX ? INT64_MAX : (int64_t)v) : p_null();
}

static inline struct param p_double(bool known, double v) {
        return known && v == v ? (struct param){ .type = PARAM_DOUBLE, .d = v } : p_null();
}

static inline struct param p_text(const char *t) {
        return t ? (struct param){ .type = PARAM_TEXT, .p = t } : p_null();
}

static inline struct param p_blob(const void *b, size_t len) {
        return b ? (struct param){ .type = PARAM_BLOB, .p = b, .len = len } : p_null();
}

static inline void bind_params(sqlite3_stmt *st, const struct param *v) {
        for (int i = 0; v[i].type != PARAM_END; i++)
                switch (v[i].type) {
                case PARAM_END:
                case PARAM_NULL:
                        sqlite3_bind_null(st, i + 1);
                        break;
                case PARAM_INT:
                        sqlite3_bind_int64(st, i + 1, v[i].i);
                        break;
                case PARAM_DOUBLE:
                        sqlite3_bind_double(st, i + 1, v[i].d);
                        break;
                case PARAM_TEXT:
                        sqlite3_bind_text(st, i + 1, v[i].p, -1, SQLITE_STATIC);
                        break;
                case PARAM_BLOB:
                        sqlite3_bind_blob(st, i + 1, v[i].p, (int)v[i].len, SQLITE_STATIC);
                        break;
                }
}

/* A column as a counter: false when NULL (unknown); a negative value reads 0. */
static inline bool col_u64(sqlite3_stmt *st, int i, uint64_t *v) {
        if (sqlite3_column_type(st, i) == SQLITE_NULL)
                return false;
        int64_t x = sqlite3_column_int64(st, i);
        *v = x < 0 ? 0 : (uint64_t)x;
        return true;
}

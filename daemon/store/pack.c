/* SPDX-License-Identifier: MIT */
#include "store/pack.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
        while (v >= 0x80) {
                *p++ = (uint8_t)(v | 0x80);
                v >>= 7;
        }
        *p++ = (uint8_t)v;
        return p;
}

static const uint8_t *get_varint(const uint8_t *p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;
        for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
                uint8_t b = *p++;
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return p;
                }
        }
        return NULL;
}

static uint64_t field_u64(const void *obj, const struct pack_field *f) {
        const char *p = (const char *)obj + f->off;
        if (f->type == PACK_U32)
                return *(const uint32_t *)p;
        uint64_t u;
        memcpy(&u, p, sizeof u); /* a double's bits */
        return u;
}

size_t pack_struct(const struct pack_layout *l, const void *obj, uint8_t *buf) {
        uint64_t flags = 0, present = 0;
        for (size_t i = 0; i < l->n_flags; i++)
                flags |= (uint64_t) * (const bool *)((const char *)obj + l->flags[i]) << i;
        for (size_t i = 0; i < l->n_fields; i++)
                present |= (uint64_t)(field_u64(obj, &l->fields[i]) != 0) << i;
        uint8_t *p = buf;
        *p++ = l->version;
        p = put_varint(p, flags);
        p = put_varint(p, present);
        for (size_t i = 0; i < l->n_fields; i++) {
                uint64_t v = field_u64(obj, &l->fields[i]);
                if (v == 0)
                        continue;
                if (l->fields[i].type != PACK_DOUBLE)
                        p = put_varint(p, v);
                else
                        for (int k = 0; k < 8; k++)
                                *p++ = (uint8_t)(v >> (8 * k));
        }
        return (size_t)(p - buf);
}

int unpack_struct(const struct pack_layout *l, const void *data, size_t len, void *obj) {
        const uint8_t *p = data, *end = p + len;
        uint64_t flags, present;
        if (!p || len < 1 || *p++ != l->version || !(p = get_varint(p, end, &flags)) ||
            !(p = get_varint(p, end, &present)) || (l->n_flags < 64 && flags >> l->n_flags) ||
            (l->n_fields < 64 && present >> l->n_fields))
                return -EBADMSG;
        for (size_t i = 0; i < l->n_flags; i++)
                *(bool *)((char *)obj + l->flags[i]) = (flags >> i) & 1;
        for (size_t i = 0; i < l->n_fields; i++) {
                char *f = (char *)obj + l->fields[i].off;
                uint64_t v = 0;
                if (!((present >> i) & 1))
                        ;
                else if (l->fields[i].type == PACK_DOUBLE) {
                        if (end - p < 8)
                                return -EBADMSG;
                        for (int k = 0; k < 8; k++)
                                v |= (uint64_t)*p++ << (8 * k);
                } else if (!(p = get_varint(p, end, &v)) || (l->fields[i].type == PACK_U32 && v > UINT32_MAX))
                        return -EBADMSG;
                if (l->fields[i].type == PACK_U32)
                        *(uint32_t *)f = (uint32_t)v;
                else
                        memcpy(f, &v, sizeof v);
        }
        return p == end ? 0 : -EBADMSG;
}

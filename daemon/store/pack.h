/* SPDX-License-Identifier: MIT */
/* A struct's figures packed into one blob, for a row that SQLite reads as
 * one column where it would step through dozens (a tier row, a head row):
 *
 *   version (1 byte), flags, present (varints), then each figure that is
 *   not 0, in the layout's order: an integer as a varint, a double as the
 *   8 bytes of its bits, little-endian
 *
 * flags: bit i is the layout's i-th bool; present: bit i says the i-th
 * figure is not 0. Pure functions: no I/O. */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum pack_type { PACK_U64, PACK_U32, PACK_DOUBLE };

struct pack_field {
        size_t off;
        enum pack_type type;
};

struct pack_layout {
        uint8_t version;
        const struct pack_field *fields; /* at most 64 */
        size_t n_fields;
        const size_t *flags; /* offsets of bools, at most 64 */
        size_t n_flags;
};

/* The most bytes pack_struct() writes for a layout of n figures. */
#define PACK_MAX(n) (1 + 2 * 10 + (n)*10)

/* obj's figures into buf (PACK_MAX(l->n_fields) bytes at least): their length. */
size_t pack_struct(const struct pack_layout *l, const void *obj, uint8_t *buf);
/* The figures and flags of the layout from data into obj (the rest of obj
 * as it was): 0, or -EBADMSG for anything pack_struct() did not write, and
 * obj's figures then undefined. */
int unpack_struct(const struct pack_layout *l, const void *data, size_t len, void *obj);

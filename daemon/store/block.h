/* SPDX-License-Identifier: MIT */
/* A block: a run's samples of one span (a minute) packed column by column,
 * the way time-series stores keep them (Gorilla, Prometheus's chunks): each
 * counter as its first value and the deltas after it (divided by their
 * common divisor, or as deltas of deltas, whichever is shorter; nothing at
 * all for a column that does not change), the two measured floating-point
 * figures as the XOR with the previous value, and the rates not at all: a
 * rate is its counter's delta over the sample's interval, recomputed when
 * read. The encoder checks every rate it leaves out: one that does not come
 * back bit for bit (the first sample's, or one after a sample that was not
 * stored) is kept as it is. Pure functions of plain arrays: no I/O. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "collect/sample.h"

/* Samples in one block at most (a minute at the shortest interval, 100 ms,
 * is 600). */
#define BLOCK_MAX_SAMPLES 4096

/* Packs v[0..n) (1 <= n <= BLOCK_MAX_SAMPLES, ts ascending) into *ret
 * (malloc'ed, *ret_len bytes). -EINVAL, -ENOMEM. */
int block_encode(const struct sample *v, size_t n, uint8_t **ret, size_t *ret_len);

/* Unpacks a block: *ret (malloc'ed) holds *ret_n samples exactly as they
 * were encoded, but for a rate whose flag is off (unknown), which reads 0. -EBADMSG for anything that is not a whole, well-formed
 * block (a fuzzer feeds it arbitrary bytes), -ENOMEM. */
int block_decode(const uint8_t *p, size_t len, struct sample **ret, size_t *ret_n);

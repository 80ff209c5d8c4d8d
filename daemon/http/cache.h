/* SPDX-License-Identifier: MIT */
/* GET answers cached per URL until the data changes (the manager's data
 * generation moves with every sample, observation, registration, mark) or
 * for at most CACHE_MAX_AGE_USEC, whichever comes first: a dashboard or a
 * load test asking the same question 10 000 times a second gets one
 * computation per change. The age cap bounds how far a window "ending now"
 * can lag the clock when nothing new arrives. (cache.c; server.c keeps
 * one.) */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define CACHE_ENTRIES 64
#define CACHE_MAX_AGE_USEC (250 * USEC_PER_MSEC)
#define CACHE_MAX_BODY (1024 * 1024)

struct cache_entry {
        char *key; /* request_cache_key(): the decoded segments and arguments */
        char *body;
        size_t body_len;
        const char *content_type; /* NULL: JSON (sent with a newline added) */
        uint64_t generation;
        usec_t stored;
};

struct answer_cache {
        struct cache_entry v[CACHE_ENTRIES];
        unsigned next;
};

/* key's answer if it is of the data generation now and young enough. */
const struct cache_entry *cache_lookup(const struct answer_cache *c, const char *key, uint64_t generation_now);
/* Keeps body (copied) under key (taken over); generation: the data's when
 * the answer began (a tick may run while it is built: then it is stale at
 * once). Answers over CACHE_MAX_BODY are not kept. */
void cache_store(struct answer_cache *c, char *key, const char *body, size_t len, const char *content_type,
                 uint64_t generation);
void cache_done(struct answer_cache *c);

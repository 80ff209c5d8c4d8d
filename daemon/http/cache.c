/* SPDX-License-Identifier: MIT */
#include "http/cache.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

const struct cache_entry *cache_lookup(const struct answer_cache *c, const char *key, uint64_t generation_now) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        for (size_t i = 0; i < CACHE_ENTRIES; i++) {
                const struct cache_entry *e = &c->v[i];
                if (e->key && e->generation == generation_now && now - e->stored < CACHE_MAX_AGE_USEC &&
                    streq(e->key, key))
                        return e;
        }
        return NULL;
}

static void cache_entry_done(struct cache_entry *e) {
        free(e->key);
        free(e->body);
        *e = (struct cache_entry){};
}

void cache_store(struct answer_cache *c, char *key, const char *body, size_t len, const char *content_type,
                 uint64_t generation) {
        if (len > CACHE_MAX_BODY) {
                free(key);
                return;
        }
        /* the same key again, else round robin */
        struct cache_entry *e = NULL;
        for (size_t i = 0; i < CACHE_ENTRIES && !e; i++)
                if (c->v[i].key && streq(c->v[i].key, key))
                        e = &c->v[i];
        if (!e)
                e = &c->v[c->next++ % CACHE_ENTRIES];
        cache_entry_done(e);
        e->body = malloc(len + 1);
        if (!e->body) {
                free(key);
                return;
        }
        memcpy(e->body, body, len);
        e->body[len] = 0;
        e->key = key;
        e->body_len = len;
        e->content_type = content_type;
        e->generation = generation;
        e->stored = now_usec(CLOCK_MONOTONIC);
}

void cache_done(struct answer_cache *c) {
        for (size_t i = 0; i < CACHE_ENTRIES; i++)
                cache_entry_done(&c->v[i]);
}

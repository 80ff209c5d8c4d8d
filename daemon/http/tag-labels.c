/* SPDX-License-Identifier: MIT */
#include "http/tag-labels.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static int key_cmp(const void *a, const void *b) {
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void label_name(const char *key, char name[static sizeof "tag_" + TAG_KEY_MAX]) {
        size_t n = strlen("tag_");
        memcpy(name, "tag_", n);
        for (const char *k = key; *k; k++) {
                char c = *k;
                bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
                name[n++] = ok ? c : '_';
        }
        name[n] = 0;
}

size_t tag_labels(json_object *tags, struct tag_label out[static TAGS_MAX]) {
        if (!tags || !json_object_is_type(tags, json_type_object))
                return 0;
        /* registration allows TAGS_MAX; a stored run may hold more */
        size_t nkeys = 0, cap = (size_t)json_object_object_length(tags);
        _cleanup_free_ const char **keys = cap ? malloc(cap * sizeof *keys) : NULL;
        if (!keys)
                return 0;
        json_object_object_foreach(tags, k, v) {
                size_t len = strlen(k);
                if (len > 0 && len <= TAG_KEY_MAX && json_object_is_type(v, json_type_string))
                        keys[nkeys++] = k;
        }
        sort_array(keys, nkeys, sizeof *keys, key_cmp);
        size_t n = 0;
        for (size_t i = 0; i < nkeys && n < TAGS_MAX; i++) {
                label_name(keys[i], out[n].name);
                bool taken = false;
                for (size_t j = 0; j < n && !taken; j++)
                        taken = streq(out[j].name, out[n].name);
                if (taken)
                        continue;
                out[n++].value = json_object_get_string(json_object_object_get(tags, keys[i]));
        }
        return n;
}

/* SPDX-License-Identifier: MIT */
/* A run's tags as the labels of its /metrics series, for every exposition
 * format: each tag KEY becomes the label tag_KEY, every byte of KEY outside
 * [a-zA-Z0-9_] turned into '_'. Keys are taken in sorted order (strcmp), so
 * when two keys come out as the same label name ("job.id" and "job-id"),
 * the first in that order keeps it and the other is left out. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>

#include "manager-ops.h"

struct tag_label {
        char name[sizeof "tag_" + TAG_KEY_MAX]; /* tag_KEY, sanitised */
        const char *value;                      /* points into the tags object */
};

/* The labels of tags (a JSON object of strings; anything else, or NULL,
 * has none) into out: at most TAGS_MAX, keys longer than TAG_KEY_MAX and
 * values that are not strings left out. Returns how many. */
size_t tag_labels(json_object *tags, struct tag_label out[static TAGS_MAX]);

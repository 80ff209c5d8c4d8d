/* SPDX-License-Identifier: MIT */
/* The web page's own files (web/), embedded at build time by
 * tools/embed-web.py. */
#pragma once

#include <stddef.h>

struct web_asset {
        const char *name;         /* "run.js" */
        const char *content_type; /* "text/javascript; charset=utf-8" */
        const unsigned char *data;
        size_t len;
        const char *etag; /* a quoted hash of data */
};

extern const struct web_asset web_assets[];
extern const size_t web_n_assets;

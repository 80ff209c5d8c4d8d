/* SPDX-License-Identifier: MIT */
/* A minimal HTTP/1.1 client over a unix stream socket, for mlmonctl talking
 * to mlmond's --socket. One request per connection ("Connection: close"),
 * bodies are JSON. */
#pragma once

#include <stddef.h>

struct http_response {
        int status; /* 200, 404, ... */
        char *body; /* NUL-terminated, malloc'ed, may be empty */
        size_t body_len;
};

void http_response_done(struct http_response *r);

/* method "GET"/"POST"/"DELETE", path with query ("/v1/runs?state=all"),
 * body may be NULL. timeout_ms bounds connect+send+receive as a whole.
 * Returns 0 with *ret filled, or -errno (-ECONNREFUSED/-ENOENT: daemon not
 * running, -ETIMEDOUT, -EPROTO: not an HTTP answer). Responses are capped
 * at 64 MiB. */
int http_request_unix(const char *socket_path, const char *method, const char *path, const char *body, int timeout_ms,
                      struct http_response *ret);

/* SPDX-License-Identifier: MIT */
/* A minimal HTTP/1.1 client over a unix stream socket, for mlmonctl talking
 * to mlmond's --socket. One request per connection ("Connection: close"),
 * bodies are JSON. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct http_response {
        int status; /* 200, 404, ... */
        char *body; /* NUL-terminated, malloc'ed, may be empty */
        size_t body_len;
};

void http_response_done(struct http_response *r);

/* The response parser, free of any I/O: the socket path feeds it what each
 * read brings. Set head_request before the first feed (a HEAD answer has no
 * body); the other fields are the parser's. */
struct http_parser {
        bool head_request;

        char *buf; /* everything received so far (malloc_usable_size: its room) */
        size_t len;
        bool headers_done;
        size_t body_start; /* offset of the body in buf */
        int status;
        bool no_body; /* HEAD, 1xx, 204, 304 */
        bool chunked;
        bool have_length;
        size_t content_length;
        size_t decoded, chunk_pos; /* chunked: body bytes decoded, next chunk header */
        bool in_trailers;
        bool complete;
};

/* Appends data and parses what it can. Returns 1 once the whole message is
 * in (what follows it is ignored), 0 when it wants more, or -errno: -EPROTO
 * not HTTP or malformed, -EFBIG too large, -ENOMEM. */
int http_parser_feed(struct http_parser *p, const void *data, size_t size);
/* At the end of the input (the peer closed, or feed returned 1): the answer
 * in *ret, or -ECONNRESET (nothing came), -EPROTO (cut short). */
int http_parser_finish(struct http_parser *p, struct http_response *ret);
void http_parser_done(struct http_parser *p);

/* A whole response text (as if the peer closed after it) to status and
 * body: feed, then finish. */
int http_response_parse(const char *text, size_t size, bool head_request, struct http_response *ret);

/* method "GET"/"POST"/"DELETE", path with query ("/v1/runs?state=all"),
 * body may be NULL. timeout_ms bounds connect+send+receive as a whole.
 * Returns 0 with *ret filled, or -errno (-ECONNREFUSED/-ENOENT: daemon not
 * running, -ETIMEDOUT, -EPROTO: not an HTTP answer). Responses are capped
 * at 64 MiB. */
int http_request_unix(const char *socket_path, const char *method, const char *path, const char *body, int timeout_ms,
                      struct http_response *ret);

/* SPDX-License-Identifier: MIT */
/* A minimal HTTP/1.1 client, for mlmonctl talking to mlmond: over its unix
 * socket, TCP or TLS (the transports of http-transport.h). One request per
 * connection ("Connection: close"), bodies are JSON. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "http-transport.h"

/* mlmond's TCP port where a URL names none */
#define HTTP_DEFAULT_PORT 9477u
/* the longest bearer token we send */
#define HTTP_TOKEN_MAX 4096

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
 * body may be NULL; to ep, with its token if it has one. timeout_ms bounds
 * connect+send+receive as a whole (name resolution aside). Returns 0 with
 * *ret filled, or -errno (-ECONNREFUSED/-ENOENT: daemon not running,
 * -ETIMEDOUT, -EPROTO: not an HTTP answer, the transport's errors: see
 * http-transport.h; ep->detail may say more). Responses are capped at
 * 64 MiB. */
int http_request(struct http_endpoint *ep, const char *method, const char *path, const char *body, int timeout_ms,
                 struct http_response *ret);

/* A bearer token we can send: 1 to HTTP_TOKEN_MAX visible ASCII characters. */
bool http_token_valid(const char *token);

/* "http://HOST[:PORT][/]" or "https://...": HOST a name, an IPv4 address or
 * "[IPv6]"; PORT 1-65535, else HTTP_DEFAULT_PORT. No user, path or query.
 * Returns 0, -EINVAL or -ENOMEM. */
struct http_url {
        bool tls;
        char *host; /* without the brackets */
        char port[6];
};
int http_url_parse(const char *url, struct http_url *ret);
void http_url_done(struct http_url *u);
/* "localhost", 127.0.0.0/8 or ::1 */
bool http_host_is_loopback(const char *host);

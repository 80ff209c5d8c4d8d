/* SPDX-License-Identifier: MIT */
/* A minimal HTTP/1.1 client (see http-client.h): the request writer, the
 * response parser and the URL parser, over any transport of
 * http-transport.h.
 *
 * One request per connection: we send "Connection: close" and read until the
 * message is complete (Content-Length reached, last chunk seen) or the server
 * closes. Every wait of the transport is bounded by what is left of one
 * overall deadline, so a stuck daemon cannot hang the caller. */
#include "http-client.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util.h"

/* The API's largest answers (sample series) are capped well below this by
 * the daemon; 64 MiB is the limit the header promises. */
#define RESPONSE_BODY_MAX ((size_t)64 << 20)
/* Our daemon sends a handful of short headers; 64 KiB is generous and stops
 * a peer that never ends its header block. */
#define RESPONSE_HEADER_MAX ((size_t)64 << 10)
/* A chunk-size line is hex digits plus optional extensions. */
#define CHUNK_LINE_MAX 4096
#define READ_SIZE ((size_t)64 << 10)

void http_response_done(struct http_response *r) {
        if (!r)
                return;
        free(r->body);
        r->body = NULL;
        r->body_len = 0;
        r->status = 0;
}

/* ---- response parsing ----------------------------------------------------- */

/* chunked decoding happens in place: decoded bytes are compacted to
 * buf[body_start .. body_start + decoded), the next chunk header is at
 * buf[chunk_pos] (chunk_pos >= body_start + decoded). */

/* Finds the next line in buf[pos..len): returns its length without the line
 * end and stores where the following line starts, or -1 if no line end is
 * there yet. Accepts CRLF and bare LF. */
static ssize_t next_line(const char *buf, size_t pos, size_t len, size_t *ret_next) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl)
                return -1;
        size_t end = (size_t)(nl - buf);
        *ret_next = end + 1;
        if (end > pos && buf[end - 1] == '\r')
                end--;
        return (ssize_t)(end - pos);
}

static bool token_eq(const char *s, size_t n, const char *lit) {
        return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

/* "HTTP/1.1 200 OK" */
static int parse_status_line(const char *s, size_t n, int *ret) {
        if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9' || s[8] != ' ')
                return -EPROTO;
        for (size_t i = 9; i < 12; i++)
                if (s[i] < '0' || s[i] > '9')
                        return -EPROTO;
        if (n > 12 && s[12] != ' ')
                return -EPROTO;
        *ret = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
        if (*ret < 100)
                return -EPROTO;
        return 0;
}

static int parse_content_length(const char *v, size_t n, size_t *ret) {
        uint64_t x = 0;
        if (n == 0)
                return -EPROTO;
        for (size_t i = 0; i < n; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return -EPROTO;
                x = x * 10 + (uint64_t)(v[i] - '0');
                if (x > RESPONSE_BODY_MAX)
                        return -EFBIG;
        }
        *ret = (size_t)x;
        return 0;
}

/* Parses one header block starting at buf[0]. Returns 1 when parsed, 0 when
 * more data is needed, or -errno. Interim 1xx answers are dropped and the
 * next block parsed. */
static int parse_headers(struct http_parser *p) {
        size_t start = 0;

        for (;;) {
                size_t pos = start, next;
                ssize_t n = next_line(p->buf, pos, p->len, &next);
                if (n < 0)
                        return p->len - start > RESPONSE_HEADER_MAX ? -EPROTO : 0;
                int status;
                int r = parse_status_line(p->buf + pos, (size_t)n, &status);
                if (r < 0)
                        return r;

                bool have_length = false, chunked = false;
                size_t length = 0;
                for (pos = next;;) {
                        n = next_line(p->buf, pos, p->len, &next);
                        if (n < 0)
                                return p->len - start > RESPONSE_HEADER_MAX ? -EPROTO : 0;
                        if (next - start > RESPONSE_HEADER_MAX)
                                return -EPROTO;
                        const char *line = p->buf + pos;
                        pos = next;
                        if (n == 0)
                                break; /* end of the header block */
                        if (line[0] == ' ' || line[0] == '\t')
                                continue; /* obsolete line folding: nothing we need */
                        const char *colon = memchr(line, ':', (size_t)n);
                        if (!colon || colon == line)
                                return -EPROTO;
                        size_t nlen = (size_t)(colon - line);
                        const char *v = colon + 1, *vend = line + n;
                        while (v < vend && (*v == ' ' || *v == '\t'))
                                v++;
                        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
                                vend--;
                        size_t vlen = (size_t)(vend - v);

                        if (token_eq(line, nlen, "Content-Length")) {
                                size_t l;
                                r = parse_content_length(v, vlen, &l);
                                if (r < 0)
                                        return r;
                                if (have_length && l != length)
                                        return -EPROTO; /* conflicting lengths */
                                have_length = true;
                                length = l;
                        } else if (token_eq(line, nlen, "Transfer-Encoding")) {
                                /* We only ever get "chunked" alone; any other
                                 * coding we could not decode. */
                                if (!token_eq(v, vlen, "chunked"))
                                        return -EPROTO;
                                chunked = true;
                        }
                }

                if (status >= 100 && status < 200) {
                        if (status == 101)
                                return -EPROTO; /* no protocol switch asked for */
                        start = pos;            /* 100 Continue and friends: skip */
                        continue;
                }

                p->status = status;
                p->body_start = pos;
                p->no_body = p->head_request || status == 204 || status == 304;
                p->chunked = chunked;
                /* HTTP/1.1: Transfer-Encoding wins over Content-Length */
                p->have_length = have_length && !chunked;
                p->content_length = length;
                p->chunk_pos = pos;
                p->decoded = 0;
                p->headers_done = true;
                return 1;
        }
}

/* Parses a chunk-size line "1a2b[;ext]". */
static int parse_chunk_size(const char *s, size_t n, size_t *ret) {
        size_t i = 0;
        uint64_t x = 0;
        for (; i < n; i++) {
                int d;
                char c = s[i];
                if (c >= '0' && c <= '9')
                        d = c - '0';
                else if (c >= 'a' && c <= 'f')
                        d = c - 'a' + 10;
                else if (c >= 'A' && c <= 'F')
                        d = c - 'A' + 10;
                else
                        break;
                x = x * 16 + (uint64_t)d;
                if (x > RESPONSE_BODY_MAX)
                        return -EFBIG;
        }
        if (i == 0)
                return -EPROTO;
        for (; i < n && (s[i] == ' ' || s[i] == '\t'); i++)
                ;
        if (i < n && s[i] != ';')
                return -EPROTO;
        *ret = (size_t)x;
        return 0;
}

/* Decodes as many complete chunks as buf holds, compacting the data in
 * place. Sets p->complete after the last chunk and its trailers. */
static int decode_chunks(struct http_parser *p) {
        while (!p->complete) {
                size_t next;
                ssize_t n = next_line(p->buf, p->chunk_pos, p->len, &next);
                if (n < 0)
                        return p->len - p->chunk_pos > CHUNK_LINE_MAX ? -EPROTO : 0;
                if ((size_t)n > CHUNK_LINE_MAX)
                        return -EPROTO;

                if (p->in_trailers) {
                        /* trailer fields until an empty line; ignored */
                        p->chunk_pos = next;
                        if (n == 0)
                                p->complete = true;
                        continue;
                }

                size_t size;
                int r = parse_chunk_size(p->buf + p->chunk_pos, (size_t)n, &size);
                if (r < 0)
                        return r;
                if (size == 0) {
                        p->in_trailers = true;
                        p->chunk_pos = next;
                        continue;
                }
                if (p->decoded + size > RESPONSE_BODY_MAX)
                        return -EFBIG;
                /* data, then CRLF (or LF) */
                if (p->len - next < size + 1)
                        return 0;
                size_t end = next + size;
                size_t after;
                if (p->buf[end] == '\n')
                        after = end + 1;
                else if (p->buf[end] == '\r') {
                        if (p->len - end < 2)
                                return 0;
                        if (p->buf[end + 1] != '\n')
                                return -EPROTO;
                        after = end + 2;
                } else
                        return -EPROTO;
                memmove(p->buf + p->body_start + p->decoded, p->buf + next, size);
                p->decoded += size;
                p->chunk_pos = after;
        }
        return 0;
}

/* Drops the chunk framing already consumed, so that many small chunks do not
 * count against the size limit. Only once the gap is large: moving the
 * partial chunk on every read would be quadratic. */
static void compact_chunks(struct http_parser *p) {
        size_t dst = p->body_start + p->decoded;
        if (p->chunk_pos - dst < READ_SIZE)
                return;
        memmove(p->buf + dst, p->buf + p->chunk_pos, p->len - p->chunk_pos);
        p->len -= p->chunk_pos - dst;
        p->chunk_pos = dst;
}

/* Parses what it can of what arrived and sets p->complete when the whole
 * message is in. */
static int parse_step(struct http_parser *p) {
        if (!p->headers_done) {
                int r = parse_headers(p);
                if (r <= 0)
                        return r;
        }
        if (p->no_body) {
                p->complete = true;
                return 0;
        }
        if (p->chunked) {
                int r = decode_chunks(p);
                if (r >= 0 && !p->complete)
                        compact_chunks(p);
                return r;
        }
        if (p->have_length) {
                if (p->len - p->body_start >= p->content_length)
                        p->complete = true;
                return 0;
        }
        /* delimited by the end of the connection */
        if (p->len - p->body_start > RESPONSE_BODY_MAX)
                return -EFBIG;
        return 0;
}

int http_parser_feed(struct http_parser *p, const void *data, size_t size) {
        const char *d = data;

        /* a read's worth at a time, as from the socket */
        while (size > 0 && !p->complete) {
                size_t n = size < READ_SIZE ? size : READ_SIZE;
                /* slack for chunk framing not yet compacted away */
                size_t limit = (p->headers_done ? p->body_start + RESPONSE_BODY_MAX : RESPONSE_HEADER_MAX) + READ_SIZE +
                               CHUNK_LINE_MAX;
                if (p->len + n > limit)
                        return p->headers_done ? -EFBIG : -EPROTO;
                if (!GREEDY_REALLOC(p->buf, p->len + n + 1))
                        return -ENOMEM;
                memcpy(p->buf + p->len, d, n);
                p->len += n;
                d += n;
                size -= n;
                int r = parse_step(p);
                if (r < 0)
                        return r;
        }
        return p->complete;
}

int http_parser_finish(struct http_parser *p, struct http_response *ret) {
        size_t blen;

        if (p->len == 0)
                return -ECONNRESET; /* closed without a word */
        if (!p->headers_done)
                return -EPROTO; /* closed before (or in the middle of) the headers */
        if (p->no_body)
                blen = 0;
        else if (p->chunked) {
                if (!p->complete)
                        return -EPROTO; /* truncated */
                blen = p->decoded;
        } else if (p->have_length) {
                if (!p->complete)
                        return -EPROTO; /* truncated */
                blen = p->content_length;
        } else
                blen = p->len - p->body_start;

        /* Move the body to the front and hand the buffer over. */
        memmove(p->buf, p->buf + p->body_start, blen);
        p->buf[blen] = 0;
        char *shrunk = realloc(p->buf, blen + 1);
        if (shrunk)
                p->buf = shrunk;
        *ret = (struct http_response){
                .status = p->status,
                .body = TAKE_PTR(p->buf),
                .body_len = blen,
        };
        return 0;
}

void http_parser_done(struct http_parser *p) {
        free(p->buf);
        p->buf = NULL;
        p->len = 0;
}

int http_response_parse(const char *text, size_t size, bool head_request, struct http_response *ret) {
        _cleanup_(http_parser_done) struct http_parser p = { .head_request = head_request };
        int r = http_parser_feed(&p, text, size);
        if (r < 0)
                return r;
        return http_parser_finish(&p, ret);
}

static int receive_response(struct http_conn *c, bool head_request, usec_t deadline, struct http_response *ret) {
        _cleanup_(http_parser_done) struct http_parser p = { .head_request = head_request };
        _cleanup_free_ char *buf = malloc(READ_SIZE);
        int r;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = c->transport->read_some(c, buf, READ_SIZE, deadline);
                if (k < 0)
                        return (int)k;
                if (k == 0)
                        break; /* EOF */
                r = http_parser_feed(&p, buf, (size_t)k);
                if (r < 0)
                        return r;
                if (r > 0)
                        break;
        }
        return http_parser_finish(&p, ret);
}

/* ---- request ------------------------------------------------------------ */

static bool valid_method(const char *m) {
        if (!m || !*m)
                return false;
        for (; *m; m++)
                if (*m < 'A' || *m > 'Z')
                        return false;
        return true;
}

static bool valid_target(const char *path) {
        if (!path || path[0] != '/')
                return false;
        for (const unsigned char *s = (const unsigned char *)path; *s; s++)
                if (*s <= ' ' || *s == 0x7f)
                        return false; /* would break the request line */
        return true;
}

bool http_token_valid(const char *token) {
        if (!token || !*token || strlen(token) > HTTP_TOKEN_MAX)
                return false;
        for (const unsigned char *s = (const unsigned char *)token; *s; s++)
                if (*s <= ' ' || *s >= 0x7f)
                        return false; /* would break the header, or is not a token */
        return true;
}

/* Wipes the head before freeing it: it may hold the token. */
static void erase_freep(char **p) {
        if (*p) {
                explicit_bzero(*p, strlen(*p));
                free(*p);
        }
}

/* The request head: request line, Host (the address the endpoint names),
 * the token, and the body's type and length. */
static char *request_head(const struct http_endpoint *ep, const char *method, const char *path, size_t body_len,
                          bool has_body) {
        _cleanup_free_ char *host = NULL, *auth = NULL, *content = NULL;
        char *head;

        if (ep->host) {
                bool v6 = strchr(ep->host, ':');
                if (asprintf(&host, "%s%s%s:%s", v6 ? "[" : "", ep->host, v6 ? "]" : "", ep->port) < 0)
                        return NULL;
        } else if (!(host = strdup("localhost")))
                return NULL;
        if (asprintf(&auth, ep->token ? "Authorization: Bearer %s\r\n" : "", ep->token) < 0)
                return NULL;
        if (asprintf(&content, has_body ? "Content-Type: application/json\r\nContent-Length: %zu\r\n" : "", body_len) <
            0)
                return NULL;
        int r = asprintf(&head,
                         "%s %s HTTP/1.1\r\n"
                         "Host: %s\r\n"
                         "Connection: close\r\n"
                         "Accept: application/json\r\n"
                         "%s%s"
                         "\r\n",
                         method, path, host, auth, content);
        if (auth)
                explicit_bzero(auth, strlen(auth));
        return r < 0 ? NULL : head;
}

int http_request(struct http_endpoint *ep, const char *method, const char *path, const char *body, int timeout_ms,
                 struct http_response *ret) {
        /* timeout_ms <= 0 means no deadline */
        usec_t deadline = timeout_ms > 0 ? now_usec(CLOCK_MONOTONIC) + (usec_t)timeout_ms * USEC_PER_MSEC
                                         : USEC_INFINITY;
        _cleanup_(http_conn_close) struct http_conn c = { .fd = -1 };
        _cleanup_(erase_freep) char *head = NULL;
        size_t body_len = body ? strlen(body) : 0;
        int r;

        if (!ep || !ep->transport || !ret || !valid_method(method) || !valid_target(path))
                return -EINVAL;
        if (ep->token && !http_token_valid(ep->token))
                return -EINVAL;
        if (ep->host && (!ep->port || strpbrk(ep->host, "\r\n /")))
                return -EINVAL;
        ep->detail[0] = 0;

        head = request_head(ep, method, path, body_len, body);
        if (!head)
                return -ENOMEM;

        r = ep->transport->connect(&c, ep, deadline);
        if (r < 0)
                return r;
        c.transport = ep->transport;

        r = c.transport->write_all(&c, head, strlen(head), deadline);
        if (r >= 0 && body_len > 0)
                r = c.transport->write_all(&c, body, body_len, deadline);
        int send_error = 0;
        if (r < 0) {
                /* The server may have answered early (413, 400) and closed:
                 * its answer says more than EPIPE, so try to read it. */
                if (r != -EPIPE && r != -ECONNRESET)
                        return r;
                send_error = r;
        }

        struct http_response resp = {};
        r = receive_response(&c, streq(method, "HEAD"), deadline, &resp);
        if (r == -ECONNRESET && send_error)
                return send_error;
        if (r < 0)
                return r;
        *ret = resp;
        return 0;
}

/* ---- URLs ------------------------------------------------------------------- */

void http_url_done(struct http_url *u) {
        free(u->host);
        u->host = NULL;
}

static bool valid_host_name(const char *s, size_t n) {
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '-' || s[i] == '.' || s[i] == '_'))
                        return false;
        return true;
}

static int parse_port(const char *s, size_t n, char ret[static 6]) {
        unsigned v = 0;
        if (n == 0 || n > 5)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        snprintf(ret, 6, "%u", v);
        return 0;
}

int http_url_parse(const char *url, struct http_url *ret) {
        const char *s, *end, *host, *host_end;
        char port[6];
        bool tls;

        if (!url)
                return -EINVAL;
        if (strncasecmp(url, "http://", 7) == 0)
                tls = false, s = url + 7;
        else if (strncasecmp(url, "https://", 8) == 0)
                tls = true, s = url + 8;
        else
                return -EINVAL;
        /* nothing after the authority but one "/" */
        end = s + strcspn(s, "/?#");
        if (*end && !streq(end, "/"))
                return -EINVAL;

        if (*s == '[') {
                host = s + 1;
                host_end = memchr(host, ']', (size_t)(end - host));
                if (!host_end)
                        return -EINVAL;
                s = host_end + 1;
        } else {
                host = s;
                host_end = memchr(host, ':', (size_t)(end - host));
                if (!host_end)
                        host_end = end;
                s = host_end;
        }
        if (s == end)
                snprintf(port, sizeof port, "%u", HTTP_DEFAULT_PORT);
        else if (*s != ':' || parse_port(s + 1, (size_t)(end - s - 1), port) < 0)
                return -EINVAL;

        _cleanup_free_ char *h = strndup(host, (size_t)(host_end - host));
        if (!h)
                return -ENOMEM;
        if (host[-1] == '[') {
                struct in6_addr a;
                if (inet_pton(AF_INET6, h, &a) != 1)
                        return -EINVAL;
        } else if (!valid_host_name(h, strlen(h)))
                return -EINVAL;

        *ret = (struct http_url){ .tls = tls, .host = TAKE_PTR(h) };
        memcpy(ret->port, port, sizeof port);
        return 0;
}

bool http_host_is_loopback(const char *host) {
        struct in_addr a4;
        struct in6_addr a6;
        if (strcasecmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

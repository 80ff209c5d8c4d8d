/* SPDX-License-Identifier: MIT */
#include "http/server.h"
#include "http/cache.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "json-util.h"

/* Every connection, as libmicrohttpd reports them (on_connection()), so
 * that a request head can be given a deadline of its own and a slot can be
 * taken back from a connection that is only waiting. */
enum conn_state {
        CONN_WAITING, /* for a request head: since the accept, or since the last answer */
        CONN_BUSY,    /* a request is being read or answered */
        CONN_KILLED,  /* shut down; libmicrohttpd has yet to close it */
};

struct conn {
        struct listener *listener;
        struct conn *prev, *next;
        int fd;
        enum conn_state state;
        bool served;  /* answered a request before: waiting, it is an idle keep-alive one */
        usec_t since; /* when the state began */
        /* the peer: its uid (unix socket) or its address (TCP) */
        uint8_t peer[16];
        size_t peer_len;
};

struct listener {
        struct server *server;
        struct MHD_Daemon *mhd;
        sd_event_source *io_source, *timer_source;
        bool unix_socket; /* read-write, SO_PEERCRED */
        char *unlink_path;
        struct conn *conns;
        unsigned n_conns;     /* not counting the killed ones */
        usec_t waiting_since; /* connections seen waiting unaccepted since (0: none) */
};

struct server {
        sd_event *event;
        const struct config *config;
        int tcp_fd;
        const struct route *routes;
        size_t n_routes;
        void *userdata;
        uint64_t (*generation)(void *userdata);
        void (*yield)(void *userdata);
        struct listener tcp, unx;
        /* the PEMs the TCP listener serves HTTPS with (copies of the
         * config's, which a reload replaces); NULL: plain HTTP */
        char *tls_cert, *tls_key;
        struct answer_cache cache;
};

/* One more header of an answer: Allow (405), WWW-Authenticate (401). */
struct header {
        const char *name, *value;
};

#define ALLOW(v) ((v) ? &(const struct header){ MHD_HTTP_HEADER_ALLOW, (v) } : NULL)

/* Every answer may be shown by a browser: the web page's scripts, styles
 * and data come from this origin only (no inline script or style, no
 * framing), and no answer is ever sniffed into another type. */
#define CONTENT_SECURITY_POLICY                                                                         \
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " \
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static void add_security_headers(struct MHD_Response *resp) {
        MHD_add_response_header(resp, "Content-Security-Policy", CONTENT_SECURITY_POLICY);
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
}

/* Vary: Origin on every answer the allow-list applies to, so a cache
 * never hands one origin's answer to another; the read itself only to an
 * origin on the list, never with credentials. */
static void add_cors_headers(struct MHD_Response *resp, const struct request *rq) {
        if (rq->vary_origin)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
        if (rq->allow_origin) {
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, rq->allow_origin);
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCESS_CONTROL_EXPOSE_HEADERS, MHD_HTTP_HEADER_ETAG);
        }
}

static bool is_json(const char *content_type) {
        return content_type && streq(content_type, "application/json");
}

/* Queues body (malloc'ed, len bytes; taken over in every case). A GET's
 * answer that can be revalidated (a file of the web page with its ETag, a
 * JSON answer with 200, tagged by a hash of its bytes) is sent with
 * "Cache-Control: no-cache" and its ETag; an If-None-Match that names the
 * tag gets 304, which libmicrohttpd sends without the body (and with the
 * Content-Length the 200 would have, as HTTP asks). Any other answer is
 * not to be stored. */
static enum MHD_Result send_owned(struct request *rq, unsigned status, const char *content_type, char *body, size_t len,
                                  const struct header *h) {
        struct MHD_Connection *c = rq->conn;
        char etag[REQUEST_ETAG_MAX] = "";
        if (status == 200 && rq->safe && rq->etag[0])
                memcpy(etag, rq->etag, sizeof etag);
        else if (status == 200 && rq->safe && is_json(content_type))
                request_etag(body, len, etag);
        bool same = etag[0] &&
                    request_etag_matches(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH),
                                         etag);
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        if (!same)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, etag[0] ? "no-cache" : "no-store");
        if (etag[0])
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
        add_security_headers(resp);
        add_cors_headers(resp, rq);
        if (h)
                MHD_add_response_header(resp, h->name, h->value);
        enum MHD_Result r = MHD_queue_response(c, same ? MHD_HTTP_NOT_MODIFIED : status, resp);
        MHD_destroy_response(resp);
        return r;
}

static enum MHD_Result send_text(struct request *rq, unsigned status, const char *text, size_t len,
                                 const struct header *h) {
        char *copy = malloc(len + 2);
        if (!copy)
                return MHD_NO;
        memcpy(copy, text, len);
        copy[len] = '\n';
        copy[len + 1] = 0;
        return send_owned(rq, status, "application/json", copy, len + 1, h);
}

static enum MHD_Result send_response(struct request *rq, unsigned status, json_object *j, const struct header *h) {
        const char *text = j ? json_to_string(j) : "{}";
        return send_text(rq, status, text, strlen(text), h);
}

static enum MHD_Result send_error_now(struct request *rq, unsigned status, const char *code, const char *msg,
                                      const struct header *h) {
        _cleanup_json_ json_object *root = json_error_new(code, msg);
        return send_response(rq, status, root, h);
}

/* A body written as it is read (rq->stream_read): what a response reads
 * through libmicrohttpd's callback. A tick that came due runs first, so a
 * long answer delays the sampler by one piece at most. */
struct stream {
        const struct server *server;
        ssize_t (*read)(void *ctx, char *buf, size_t max);
        void (*free)(void *ctx);
        void *ctx;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        struct stream *x = cls;
        if (x->server->yield)
                x->server->yield(x->server->userdata);
        ssize_t n = x->read(x->ctx, buf, max);
        return n > 0    ? n
               : n == 0 ? (ssize_t)MHD_CONTENT_READER_END_OF_STREAM
                        : (ssize_t)MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls) {
        struct stream *x = cls;
        x->free(x->ctx);
        free(x);
}

/* Pieces of this size: a socket's send buffer takes about as much. */
#define STREAM_BLOCK_BYTES (64 * 1024)

static enum MHD_Result send_stream(struct MHD_Connection *c, const struct server *s, struct request *rq) {
        struct stream *x = malloc(sizeof *x);
        if (!x)
                return MHD_NO;
        *x = (struct stream){ s, rq->stream_read, rq->stream_free, rq->stream_ctx };
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK_BYTES, stream_read,
                                                                      x, stream_free);
        if (!resp) {
                free(x);
                return MHD_NO;
        }
        rq->stream_ctx = NULL; /* the response owns it */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rq->content_type);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        add_security_headers(resp);
        add_cors_headers(resp, rq);
        enum MHD_Result r = MHD_queue_response(c, rq->status ? rq->status : 200, resp);
        MHD_destroy_response(resp);
        return r;
}

static void dispatch(const struct server *s, struct request *rq) {
        /* HEAD is GET without the body (libmicrohttpd drops it) */
        const char *method = streq(rq->method, "HEAD") ? "GET" : rq->method;
        char allow[64];
        const struct route *r = route_find(s->routes, s->n_routes, method, rq->parts, rq->nparts, allow, sizeof allow);
        if (r) {
                r->fn(rq, rq->parts, rq->nparts);
                return;
        }
        if (*allow) {
                static char allow_kept[64]; /* lives until the response is queued, same thread */
                snprintf(allow_kept, sizeof allow_kept, "%s", allow);
                respond_method_not_allowed(rq, allow_kept);
                return;
        }
        respond_error(rq, 404, "not_found", "no such endpoint");
}

/* ---- connections: head deadlines and fair slots ------------------------- */

static void conn_kill(struct conn *c) {
        if (c->state == CONN_KILLED)
                return;
        /* libmicrohttpd sees the end of the stream and closes it in its
         * next run, which the socket's readiness brings */
        (void)shutdown(c->fd, SHUT_RDWR);
        c->state = CONN_KILLED;
        c->listener->n_conns--;
}

static bool conn_same_peer(const struct conn *a, const struct conn *b) {
        return a->peer_len == b->peer_len && memcmp(a->peer, b->peer, a->peer_len) == 0;
}

/* The connection to give up for a new one (of the same peer when peer is
 * set): the idle keep-alive one waiting longest, else the one waiting
 * longest for its first request head; never one with a request in hand. */
static struct conn *conn_victim(struct listener *l, const struct conn *new, const struct conn *peer) {
        struct conn *best = NULL;
        for (struct conn *c = l->conns; c; c = c->next) {
                if (c == new || c->state != CONN_WAITING || (peer && !conn_same_peer(c, peer)))
                        continue;
                if (!best || (c->served && !best->served) || (c->served == best->served && c->since < best->since))
                        best = c;
        }
        return best;
}

static void conn_identify(struct conn *c, bool unix_socket) {
        if (unix_socket) {
                struct ucred cred;
                socklen_t len = sizeof cred;
                if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
                        memcpy(c->peer, &cred.uid, sizeof cred.uid);
                        c->peer_len = sizeof cred.uid;
                }
                return;
        }
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        if (getpeername(c->fd, (struct sockaddr *)&sa, &len) < 0)
                return;
        if (sa.ss_family == AF_INET) {
                memcpy(c->peer, &((struct sockaddr_in *)&sa)->sin_addr, 4);
                c->peer_len = 4;
        } else if (sa.ss_family == AF_INET6) {
                memcpy(c->peer, &((struct sockaddr_in6 *)&sa)->sin6_addr, 16);
                c->peer_len = 16;
        }
}

/* A new connection takes a slot. When its peer (a uid on the unix socket,
 * an address over TCP) or the listener is at its limit, a waiting
 * connection of that peer (or of anyone) gives its slot up; with none to
 * give, the new one is refused. So one client holding slow or idle
 * connections cannot keep another out. */
static void conn_admit(struct listener *l, struct conn *c) {
        const struct config *cfg = l->server->config;
        unsigned limit = cfg->http_connection_limit;
        unsigned peer_limit = l->unix_socket ? cfg->http_max_connections_per_uid : cfg->http_per_ip_connection_limit;
        if (peer_limit > limit)
                peer_limit = limit;
        unsigned same = 0;
        for (struct conn *o = l->conns; o; o = o->next)
                if (o->state != CONN_KILLED && conn_same_peer(o, c))
                        same++;

        c->listener = l;
        c->state = CONN_WAITING;
        c->since = now_usec(CLOCK_MONOTONIC);
        c->next = l->conns;
        if (l->conns)
                l->conns->prev = c;
        l->conns = c;
        l->n_conns++;

        struct conn *victim = NULL;
        if (same >= peer_limit)
                victim = conn_victim(l, c, c);
        else if (l->n_conns > limit)
                victim = conn_victim(l, c, NULL);
        else
                return;
        if (!victim)
                log_debug("http: connection refused: %s at its limit",
                          same >= peer_limit ? (l->unix_socket ? "the user is" : "the address is") : "the listener is");
        conn_kill(victim ?: c);
}

static void conn_free(struct conn *c) {
        if (!c)
                return;
        struct listener *l = c->listener;
        if (c->state != CONN_KILLED)
                l->n_conns--;
        if (c->prev)
                c->prev->next = c->next;
        else
                l->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        free(c);
}

static struct conn *conn_of(struct MHD_Connection *mc) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

static void conn_head_received(struct MHD_Connection *mc) {
        struct conn *c = conn_of(mc);
        if (c && c->state == CONN_WAITING) {
                c->state = CONN_BUSY;
                c->since = now_usec(CLOCK_MONOTONIC);
        }
}

static void conn_request_done(struct MHD_Connection *mc) {
        struct conn *c = conn_of(mc);
        if (c && c->state == CONN_BUSY) {
                c->state = CONN_WAITING;
                c->served = true;
                c->since = now_usec(CLOCK_MONOTONIC);
        }
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        struct listener *l = cls;
        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                conn_free(*socket_context);
                *socket_context = NULL;
                return;
        }
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct conn *c = ci ? calloc(1, sizeof *c) : NULL;
        if (!c)
                return; /* untracked: only libmicrohttpd's own timeout applies */
        c->fd = ci->connect_fd;
        conn_identify(c, l->unix_socket);
        conn_admit(l, c);
        *socket_context = c;
}

/* Whether bytes wait in the connection's socket: libmicrohttpd reads
 * whatever is there when it runs, so after a run these came during it. */
static bool conn_unread(const struct conn *c) {
        int n = 0;
        return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

/* Shuts down the connections whose request head is late (header_timeout
 * after the accept or the last answer); returns the next such deadline.
 * Called right after a run: a connection with bytes unread is spared, as
 * they came while the daemon was busy with others (a long answer being
 * built), not because the client was slow; the next run reads them, and
 * their arrival brings it. */
static usec_t conn_sweep(struct listener *l) {
        usec_t timeout = l->server->config->http_header_timeout_usec, now = now_usec(CLOCK_MONOTONIC);
        usec_t next = USEC_INFINITY;
        for (struct conn *c = l->conns; c; c = c->next) {
                if (c->state != CONN_WAITING)
                        continue;
                if (now - c->since >= timeout) {
                        if (!conn_unread(c))
                                conn_kill(c);
                } else if (c->since + timeout < next)
                        next = c->since + timeout;
        }
        return next;
}

/* Called with the request target as received, before libmicrohttpd
 * decodes anything: the request starts here, with a copy of the target
 * (request_parse_target() decodes it). What is returned becomes *con_cls. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
        struct request *rq = calloc(1, sizeof *rq);
        if (rq) {
                rq->target = strdup(uri);
                if (!rq->target) {
                        free(rq);
                        rq = NULL;
                }
        }
        /* libmicrohttpd would next parse the query into records of its own,
         * from the connection's memory pool; a few hundred parameters use
         * the pool up and the request then hangs without an answer until
         * the connection times out (libmicrohttpd 0.9.75). The query is
         * decoded from the copy instead, so end it in libmicrohttpd's
         * buffer right after the '?': it then parses nothing. */
        char *q = strchr(uri, '?');
        if (q && q[1])
                q[1] = 0;
        return rq;
}

/* Who asks (rq->caller_*), and whether it may use method: over the unix
 * socket anyone may (the handlers decide from SO_PEERCRED); over TCP, GET and
 * HEAD are open and the rest needs the configured token, which makes the
 * caller root. False: refused, with the answer queued in *ret. */
static bool authorize(const struct listener *l, struct MHD_Connection *conn, struct request *rq, bool safe,
                      enum MHD_Result *ret) {
        const struct config *c = l->server->config;
        if (l->unix_socket) {
                const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                struct ucred cred;
                socklen_t len = sizeof cred;
                if (ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
                        rq->caller_known = true;
                        rq->caller_root = cred.uid == 0;
                        rq->caller_uid = cred.uid;
                        rq->caller_pid = cred.pid;
                }
                return true;
        }
        if (!c->http_token) {
                if (!safe)
                        *ret = send_error_now(rq, 405, "method_not_allowed",
                                              "the TCP API is read-only: use the unix socket to change anything",
                                              ALLOW("GET, HEAD"));
                return safe;
        }
        const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        switch (request_check_bearer(auth, c->http_token, c->http_token_len)) {
        case AUTH_OK:
                rq->caller_known = rq->caller_root = true;
                return true;
        case AUTH_MISSING:
                if (!safe)
                        *ret = send_error_now(
                                rq, 401, "unauthorized", "over TCP this needs the token: Authorization: Bearer TOKEN",
                                &(const struct header){ MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"mlmond\"" });
                return safe;
        case AUTH_WRONG:
                break;
        }
        log_debug("http: a request over TCP with a wrong token refused");
        *ret = send_error_now(rq, 403, "forbidden", "wrong token", NULL);
        return false;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
        struct listener *l = cls;
        struct request *rq = *con_cls;
        const struct config *c = l->server->config;

        if (!rq)
                return MHD_NO; /* out of memory in on_uri() */
        if (!rq->conn) {
                /* First call: headers only. Decide early what we will refuse
                 * so a refused body is never read. */
                conn_head_received(conn);
                rq->conn = conn;
                bool safe = rq->safe = streq(method, "GET") || streq(method, "HEAD");
                if (safe && !l->unix_socket && !address_off(c->http_cors_origins)) {
                        const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ORIGIN);
                        rq->vary_origin = true;
                        if (origin && request_origin_allowed(c->http_cors_origins, origin))
                                rq->allow_origin = origin;
                }
                enum MHD_Result refused;
                if (!authorize(l, conn, rq, safe, &refused))
                        return refused;
                const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
                const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
                uint64_t len = 0;
                if (cl && (safe_atou64(cl, &len) < 0 || len > c->http_max_body_bytes))
                        return send_error_now(rq, 413, "payload_too_large", "the request body is too large", NULL);
                if (safe && (len > 0 || te))
                        return send_error_now(rq, 413, "payload_too_large", "GET takes no request body", NULL);
                rq->userdata = l->server->userdata;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;
                if (!rq->too_large && rq->body_len + n > c->http_max_body_bytes) {
                        rq->too_large = true;
                        free(rq->body);
                        rq->body = NULL;
                        rq->body_len = 0;
                }
                if (!rq->too_large) {
                        if (!GREEDY_REALLOC(rq->body, rq->body_len + n + 1))
                                return MHD_NO;
                        memcpy(rq->body + rq->body_len, upload_data, n);
                        rq->body_len += n;
                        rq->body[rq->body_len] = 0;
                }
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (rq->started)
                return MHD_YES;
        rq->started = true;
        if (rq->too_large)
                return send_error_now(rq, 413, "payload_too_large", "the request body is too large", NULL);

        /* a tick that came due while other requests were answered runs
         * first, so that the answer has its samples too */
        if (l->server->yield)
                l->server->yield(l->server->userdata);
        uint64_t generation = l->server->generation(l->server->userdata);
        rq->method = method;
        rq->accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
        if (request_parse_target(rq, rq->target) < 0)
                return send_response(rq, rq->status, rq->json, NULL);
        _cleanup_free_ char *key = NULL;
        if (rq->safe) {
                key = request_cache_key(rq);
                const struct cache_entry *e = key ? cache_lookup(&l->server->cache, key,
                                                                 l->server->generation(l->server->userdata))
                                                  : NULL;
                if (e && e->content_type) {
                        char *copy = malloc(e->body_len + 1);
                        if (!copy)
                                return MHD_NO;
                        memcpy(copy, e->body, e->body_len);
                        return send_owned(rq, 200, e->content_type, copy, e->body_len, NULL);
                }
                if (e)
                        return send_text(rq, 200, e->body, e->body_len, NULL);
        }
        dispatch(l->server, rq);
        unsigned status = rq->status ? rq->status : 500;
        if (rq->stream_ctx && !rq->json)
                return send_stream(conn, l->server, rq);
        if (rq->text && !rq->json) {
                /* a file of the web page is revalidated by its own ETag */
                if (key && status == 200 && !rq->etag[0])
                        cache_store(&l->server->cache, TAKE_PTR(key), rq->text, rq->text_len, rq->content_type,
                                    generation);
                return send_owned(rq, status, rq->content_type, TAKE_PTR(rq->text), rq->text_len, NULL);
        }
        if (key && status == 200 && rq->json) {
                const char *text = json_to_string(rq->json);
                cache_store(&l->server->cache, TAKE_PTR(key), text, strlen(text), NULL, generation);
        }
        return send_response(rq, status, rq->json, ALLOW(rq->allow));
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
        struct request *rq = *con_cls;
        conn_request_done(conn);
        if (!rq)
                return;
        request_done(rq);
        free(rq);
        *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
        char msg[512];
        vsnprintf(msg, sizeof msg, fmt, ap);
        size_t l = strlen(msg);
        while (l > 0 && msg[l - 1] == '\n')
                msg[--l] = 0;
        log_debug("http: %s", msg);
}

static unsigned listener_connections(const struct listener *l) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        return di ? di->num_connections : 0;
}

#define PUMP_MAX_RUNS 32
/* A connection with a long answer being streamed keeps libmicrohttpd's
 * timeout at 0 (a piece is ready to write each run), and each run renders
 * a piece for each such connection: a few ms. Past this time the other
 * listener and the rest of the loop get their turn first: with four lists
 * of 26 MB streamed over TCP, a 32-run pump kept the unix socket waiting
 * for up to 0.35 s. */
#define PUMP_MAX_USEC (5 * USEC_PER_MSEC)

static void listener_pump(struct listener *l) {
        /* Runs again (a bounded number of times and for a bounded time, so
         * the other event sources get their turn; then through the timer)
         * in two cases.
         *
         * At its connection limit libmicrohttpd takes the listening socket
         * out of its epoll set, and puts it back only at the start of a
         * later run, once connections have closed. When the last ones close
         * in a run (timed out, say), nothing would wake it again: the
         * listener would be dead for good. So when connections closed, run
         * once more.
         *
         * libmicrohttpd answers one request per connection per run: the
         * next pipelined request, already read into its buffer, waits for a
         * later run while the socket stays quiet. It says so with a timeout
         * of 0. */
        MHD_UNSIGNED_LONG_LONG ms;
        bool again = true;
        usec_t start = now_usec(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < PUMP_MAX_RUNS && again && now_usec(CLOCK_MONOTONIC) - start < PUMP_MAX_USEC; i++) {
                unsigned before = listener_connections(l);
                if (l->server->yield) /* sending to many connections takes time too */
                        l->server->yield(l->server->userdata);
                MHD_run(l->mhd);
                again = listener_connections(l) < before || (MHD_get_timeout(l->mhd, &ms) == MHD_YES && ms == 0);
        }
        usec_t next = conn_sweep(l);
        if (again)
                next = now_usec(CLOCK_MONOTONIC);
        else if (MHD_get_timeout(l->mhd, &ms) == MHD_YES) {
                usec_t t = now_usec(CLOCK_MONOTONIC) + (usec_t)ms * USEC_PER_MSEC;
                if (t < next)
                        next = t;
        }
        if (next != USEC_INFINITY) {
                sd_event_source_set_time(l->timer_source, next);
                sd_event_source_set_enabled(l->timer_source, SD_EVENT_ONESHOT);
        } else
                sd_event_source_set_enabled(l->timer_source, SD_EVENT_OFF);
}

static int on_mhd_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        listener_pump(userdata);
        return 0;
}

static int on_mhd_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        listener_pump(userdata);
        return 0;
}

static int listener_attach(struct server *a, struct listener *l, char *err, size_t errlen) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        if (!di) {
                snprintf(err, errlen, "http: cannot get libmicrohttpd's epoll fd");
                return -EIO;
        }
        l->server = a;
        int q = sd_event_add_io(a->event, &l->io_source, di->epoll_fd, EPOLLIN, on_mhd_io, l);
        if (q >= 0)
                /* exact: a timeout of 0 (pipelined requests waiting) must
                 * not wait for a coalesced wake-up */
                q = sd_event_add_time_relative(a->event, &l->timer_source, CLOCK_MONOTONIC, USEC_PER_SEC, 1,
                                               on_mhd_timer, l);
        if (q < 0)
                return errorf(err, errlen, q, "http: cannot watch sockets: %m");
        listener_pump(l);
        return 0;
}

static struct MHD_Daemon *start_mhd(struct server *a, struct listener *l, int listen_fd, const struct sockaddr *sa,
                                    unsigned flags) {
        const struct config *c = a->config;
        bool tls = !l->unix_socket && a->tls_cert;
        l->server = a;
        struct MHD_OptionItem opts[] = {
                /* one more than ours: conn_admit() sees the new connection
                 * before refusing it or freeing a slot for it; the limits per
                 * address and per uid are conn_admit()'s too */
                { MHD_OPTION_CONNECTION_LIMIT, c->http_connection_limit + 1, NULL },
                { MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, l },
                { MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, NULL },
                { MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)(c->http_connection_timeout_usec / USEC_PER_SEC), NULL },
                { MHD_OPTION_CONNECTION_MEMORY_LIMIT, c->http_connection_memory_limit, NULL },
                { MHD_OPTION_LISTEN_BACKLOG_SIZE, 128, NULL },
                { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL },
                { MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL },
                { listen_fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR, listen_fd >= 0 ? listen_fd : 0,
                  (void *)sa },
                /* the TCP listener with a certificate: HTTPS (the list ends
                 * here otherwise) */
                { tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, a->tls_cert },
                { MHD_OPTION_HTTPS_MEM_KEY, 0, a->tls_key },
                { MHD_OPTION_END, 0, NULL },
        };
        return MHD_start_daemon(flags | MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0), 0, NULL, NULL,
                                on_access, l, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

static bool sockaddr_loopback(const struct sockaddr *sa) {
        if (sa->sa_family == AF_INET)
                return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
        return sa->sa_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* HTTPS when the config has a certificate: the server's own copies of the
 * PEMs, for the life of the listener. */
static int tls_setup(struct server *a, char *err, size_t errlen) {
        const struct config *c = a->config;
        if (!c->http_tls_cert_pem)
                return 0;
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
                snprintf(err, errlen, "tls_cert: this libmicrohttpd was built without TLS");
                return -EOPNOTSUPP;
        }
        a->tls_cert = strdup(c->http_tls_cert_pem);
        a->tls_key = strdup(c->http_tls_key_pem);
        return a->tls_cert && a->tls_key ? 0 : -ENOMEM;
}

/* A non-loopback TCP listener: said, and refused for a token without TLS
 * (config_validate() checks `listen`; this is the socket systemd passed). */
static int check_exposure(const struct server *a, const struct sockaddr *sa, char *err, size_t errlen) {
        const char *listen = a->config->listen;
        if (sockaddr_loopback(sa))
                return 0;
        if (a->config->http_token && !a->tls_cert) {
                snprintf(err, errlen,
                         "token_file: the TCP socket (%s) is not a loopback address and there is no TLS: the token "
                         "would travel in clear text (set tls_cert and tls_key)",
                         listen);
                return -EINVAL;
        }
        if (a->config->http_token)
                log_info("listen: %s is not a loopback address: GETs are open to the network, the rest needs the "
                         "token",
                         listen);
        else
                log_warning("listen: %s is not a loopback address: the read-only API is reachable from the network",
                            listen);
        return 0;
}

static int start_tcp(struct server *a, char *err, size_t errlen) {
        const char *listen = a->config->listen;
        if (address_off(listen))
                return 0;
        int q = tls_setup(a, err, errlen);
        if (q < 0)
                return q;
        const char *what = a->tls_cert ? "HTTPS" : "HTTP";
        a->tcp.unix_socket = false;
        /* Under systemd the socket comes from mlmond-http.socket (so the
         * service needs no AF_INET); `listen` then only switches it off. */
        int sfd = TAKE_FD(a->tcp_fd);
        if (sfd >= 0) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof ss;
                if (getsockname(sfd, (struct sockaddr *)&ss, &len) < 0)
                        q = errorf(err, errlen, errno, "listen: the socket systemd passed: %m");
                else
                        q = check_exposure(a, (struct sockaddr *)&ss, err, errlen);
                a->tcp.mhd = q < 0 ? NULL : start_mhd(a, &a->tcp, sfd, NULL, 0);
                if (!a->tcp.mhd) {
                        safe_close(sfd);
                        if (q >= 0)
                                snprintf(err, errlen, "listen: cannot serve %s on the socket systemd passed", what);
                        return q < 0 ? q : -EIO;
                }
                return listener_attach(a, &a->tcp, err, errlen);
        }
        struct addrinfo *res = NULL;
        char why[300];
        if (resolve_listen_address(listen, SOCK_STREAM, &res, why, sizeof why) < 0) {
                snprintf(err, errlen, "listen: %s", why);
                return -EINVAL;
        }
        q = check_exposure(a, res->ai_addr, err, errlen);
        unsigned flags = res->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0;
        a->tcp.mhd = q < 0 ? NULL : start_mhd(a, &a->tcp, -1, res->ai_addr, flags);
        freeaddrinfo(res);
        if (q < 0)
                return q;
        if (!a->tcp.mhd) {
                snprintf(err, errlen, "listen: cannot serve %s on %s (address in use%s?)", what, listen,
                         a->tls_cert ? ", or tls_cert and tls_key not a certificate and its key" : "");
                return -EADDRINUSE;
        }
        return listener_attach(a, &a->tcp, err, errlen);
}

static int start_unix(struct server *a, char *err, size_t errlen) {
        const char *path = a->config->socket_path;
        if (address_off(path))
                return 0;
        /* Anyone may connect: each request is authorized from SO_PEERCRED. */
        _cleanup_close_ int fd = unix_socket_bind(path, SOCK_STREAM, false, "socket", err, errlen);
        if (fd < 0)
                return fd;
        if (listen(fd, 128) < 0) {
                int r = errorf(err, errlen, errno, "socket: cannot listen on %s: %m", path);
                unlink(path);
                return r;
        }
        a->unx.unix_socket = true;
        a->unx.mhd = start_mhd(a, &a->unx, fd, NULL, 0);
        if (!a->unx.mhd) {
                snprintf(err, errlen, "socket: cannot serve HTTP on %s", path);
                unlink(path);
                return -EIO;
        }
        TAKE_FD(fd); /* libmicrohttpd owns it now */
        a->unx.unlink_path = strdup(path);
        return listener_attach(a, &a->unx, err, errlen);
}

int server_new(const struct server_options *o, struct server **ret, char *err, size_t errlen) {
        struct server *a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        *a = (struct server){ .event = o->event,
                              .config = o->config,
                              .tcp_fd = o->tcp_fd,
                              .routes = o->routes,
                              .n_routes = o->n_routes,
                              .userdata = o->userdata,
                              .generation = o->generation,
                              .yield = o->yield };
        int q = start_tcp(a, err, errlen);
        if (q >= 0)
                q = start_unix(a, err, errlen);
        if (q < 0) {
                server_free(a);
                return q;
        }
        *ret = a;
        return 0;
}

static void listener_stop(struct listener *l) {
        l->io_source = sd_event_source_disable_unref(l->io_source);
        l->timer_source = sd_event_source_disable_unref(l->timer_source);
        if (l->mhd)
                MHD_stop_daemon(l->mhd);
        l->mhd = NULL;
        unlink_and_free(&l->unlink_path);
}

void server_free(struct server *a) {
        if (!a)
                return;
        cache_done(&a->cache);
        listener_stop(&a->tcp);
        listener_stop(&a->unx);
        safe_close(a->tcp_fd); /* not handed to libmicrohttpd (listen = none) */
        if (a->tls_key)
                explicit_bzero(a->tls_key, strlen(a->tls_key));
        free(a->tls_key);
        free(a->tls_cert);
        free(a);
}

/* ---- whether the listeners take their connections -------------------------
 * A listening socket that stays readable (connections wait in its backlog)
 * for longer than LISTENER_STUCK_USEC is not being served: libmicrohttpd
 * has stopped accepting on it. Polled without waiting. */
#define LISTENER_STUCK_USEC (2 * USEC_PER_SEC)

bool server_accepting(struct server *s, char *why, size_t len) {
        struct listener *ls[2] = { &s->tcp, &s->unx };
        usec_t now = now_usec(CLOCK_MONOTONIC);
        bool ok = true;

        for (size_t i = 0; i < ELEMENTSOF(ls); i++) {
                usec_t *since = &ls[i]->waiting_since;
                const union MHD_DaemonInfo *di = ls[i]->mhd ? MHD_get_daemon_info(ls[i]->mhd, MHD_DAEMON_INFO_LISTEN_FD)
                                                            : NULL;
                struct pollfd p = { .fd = di ? di->listen_fd : -1, .events = POLLIN };
                if (p.fd < 0 || poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) {
                        *since = 0;
                        continue;
                }
                if (*since == 0)
                        *since = now;
                if (now - *since >= LISTENER_STUCK_USEC) {
                        if (ok)
                                snprintf(why, len, "%s listener: connections have waited %.1f s unaccepted",
                                         ls[i]->unix_socket ? "unix socket" : "TCP", (double)(now - *since) / 1e6);
                        ok = false;
                }
        }
        return ok;
}

/* SPDX-License-Identifier: MIT */
#include "http/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "json-util.h"

struct listener {
        struct server *server;
        struct MHD_Daemon *mhd;
        sd_event_source *io_source, *timer_source;
        bool unix_socket; /* read-write, SO_PEERCRED */
        char *unlink_path;
};

/* GET answers cached per URL until the data changes (the manager's data
 * generation moves with every sample, observation, registration, mark) or
 * for at most CACHE_MAX_AGE_USEC, whichever comes first: a dashboard or a
 * load test asking the same question 10 000 times a second gets one
 * computation per change. The age cap bounds how far a window "ending now"
 * can lag the clock when nothing new arrives. */
#define CACHE_ENTRIES 64

#define CACHE_MAX_AGE_USEC (250 * USEC_PER_MSEC)

#define CACHE_MAX_BODY (1024 * 1024)

struct cache_entry {
        char *key; /* "path?query" as received */
        char *body;
        size_t body_len;
        const char *content_type; /* NULL: JSON (sent with a newline added) */
        uint64_t generation;
        usec_t stored;
};

struct server {
        sd_event *event;
        const struct config *config;
        int tcp_fd;
        const struct route *routes;
        size_t n_routes;
        void *userdata;
        uint64_t (*generation)(void *userdata);
        struct listener tcp, unx;
        struct cache_entry cache[CACHE_ENTRIES];
        unsigned cache_next;
};

/* Queues body (malloc'ed, len bytes; taken over in every case). */
static enum MHD_Result send_owned(struct MHD_Connection *c, unsigned status, const char *content_type, char *body,
                                  size_t len, const char *allow) {
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (allow)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
        enum MHD_Result r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *text, size_t len,
                                 const char *allow) {
        char *copy = malloc(len + 2);
        if (!copy)
                return MHD_NO;
        memcpy(copy, text, len);
        copy[len] = '\n';
        copy[len + 1] = 0;
        return send_owned(c, status, "application/json", copy, len + 1, allow);
}

static enum MHD_Result send_response(struct MHD_Connection *c, unsigned status, json_object *j, const char *allow) {
        const char *text = j ? json_to_string(j) : "{}";
        return send_text(c, status, text, strlen(text), allow);
}

static enum MHD_Result send_error_now(struct MHD_Connection *c, unsigned status, const char *code, const char *msg,
                                      const char *allow) {
        _cleanup_json_ json_object *root = json_error_new(code, msg);
        return send_response(c, status, root, allow);
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        struct request *rq = cls;
        for (size_t i = 0; i < rq->n_args; i++)
                if (streq(rq->args[i].key, key))
                        rq->args_duplicate = true;
        if (rq->n_args == MAX_QUERY_ARGS) {
                rq->args_overflow = true;
                return MHD_NO;
        }
        rq->args[rq->n_args].key = key;
        rq->args[rq->n_args].value = value ? value : "";
        rq->n_args++;
        return MHD_YES;
}

bool request_peer_cred(struct request *rq, struct ucred *ret) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        socklen_t len = sizeof *ret;
        return ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, ret, &len) == 0;
}

static size_t pattern_len(const struct route *r) {
        size_t n = 0;
        while (n < ELEMENTSOF(r->pattern) && r->pattern[n])
                n++;
        return n;
}

static bool pattern_match(const struct route *r, const char *const *parts, size_t nparts) {
        if (pattern_len(r) != nparts)
                return false;
        for (size_t i = 0; i < nparts; i++)
                if (!streq(r->pattern[i], "*") && !streq(r->pattern[i], parts[i]))
                        return false;
        return true;
}

static void dispatch(const struct server *s, struct request *rq, const char *url) {
        char path[512];
        const char *parts[8];
        size_t nparts = 0;

        int q = split_into(url, "/", path, sizeof path, parts, ELEMENTSOF(parts), &nparts);
        if (q == -E2BIG) {
                respond_error(rq, 414, "uri_too_long", "the path is too long");
                return;
        }
        if (q < 0) {
                respond_error(rq, 404, "not_found", "no such endpoint");
                return;
        }
        /* HEAD is GET without the body (libmicrohttpd drops it) */
        const char *method = streq(rq->method, "HEAD") ? "GET" : rq->method;
        char allow[64] = "";
        for (size_t i = 0; i < s->n_routes; i++) {
                if (!pattern_match(&s->routes[i], parts, nparts))
                        continue;
                if (streq(s->routes[i].method, method)) {
                        s->routes[i].fn(rq, parts, nparts);
                        return;
                }
                if (strlen(allow) + strlen(s->routes[i].method) + 3 < sizeof allow) {
                        if (*allow)
                                strcat(allow, ", ");
                        strcat(allow, s->routes[i].method);
                }
        }
        if (*allow) {
                static char allow_kept[64]; /* lives until the response is queued, same thread */
                snprintf(allow_kept, sizeof allow_kept, "%s", allow);
                respond_method_not_allowed(rq, allow_kept);
                return;
        }
        respond_error(rq, 404, "not_found", "no such endpoint");
}

static char *cache_key(const struct request *rq, const char *url) {
        size_t len = strlen(url) + 2;
        for (size_t i = 0; i < rq->n_args; i++)
                len += strlen(rq->args[i].key) + strlen(rq->args[i].value) + 2;
        if (rq->args_overflow || rq->args_duplicate || len > 4096)
                return NULL;
        char *k = malloc(len), *p = k;
        if (!k)
                return NULL;
        p = stpcpy(p, url);
        for (size_t i = 0; i < rq->n_args; i++) {
                *p++ = i ? '&' : '?';
                p = stpcpy(p, rq->args[i].key);
                *p++ = '=';
                p = stpcpy(p, rq->args[i].value);
        }
        *p = 0;
        return k;
}

static const struct cache_entry *cache_lookup(struct server *a, const char *key) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        for (size_t i = 0; i < CACHE_ENTRIES; i++) {
                const struct cache_entry *e = &a->cache[i];
                if (e->key && e->generation == a->generation(a->userdata) && now - e->stored < CACHE_MAX_AGE_USEC &&
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

static void cache_store(struct server *a, char *key, const char *body, size_t len, const char *content_type) {
        if (len > CACHE_MAX_BODY) {
                free(key);
                return;
        }
        /* the same key again, else round robin */
        struct cache_entry *e = NULL;
        for (size_t i = 0; i < CACHE_ENTRIES && !e; i++)
                if (a->cache[i].key && streq(a->cache[i].key, key))
                        e = &a->cache[i];
        if (!e)
                e = &a->cache[a->cache_next++ % CACHE_ENTRIES];
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
        e->generation = a->generation(a->userdata);
        e->stored = now_usec(CLOCK_MONOTONIC);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
        struct listener *l = cls;
        struct request *rq = *con_cls;
        const struct config *c = l->server->config;

        if (!rq) {
                /* First call: headers only. Decide early what we will refuse
                 * so a refused body is never read. */
                bool read_only = !l->unix_socket;
                bool safe = streq(method, "GET") || streq(method, "HEAD");
                if (read_only && !safe)
                        return send_error_now(conn, 405, "method_not_allowed",
                                              "the TCP API is read-only: use the unix socket to change anything",
                                              "GET, HEAD");
                const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
                const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
                uint64_t len = 0;
                if (cl && (safe_atou64(cl, &len) < 0 || len > c->http_max_body_bytes))
                        return send_error_now(conn, 413, "payload_too_large", "the request body is too large", NULL);
                if (safe && (len > 0 || te))
                        return send_error_now(conn, 413, "payload_too_large", "GET takes no request body", NULL);
                rq = calloc(1, sizeof *rq);
                if (!rq)
                        return MHD_NO;
                rq->userdata = l->server->userdata;
                rq->unix_socket = l->unix_socket;
                rq->conn = conn;
                *con_cls = rq;
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
                return send_error_now(conn, 413, "payload_too_large", "the request body is too large", NULL);

        rq->method = method;
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_arg, rq);
        _cleanup_free_ char *key = NULL;
        if (streq(method, "GET") || streq(method, "HEAD")) {
                key = cache_key(rq, url);
                const struct cache_entry *e = key ? cache_lookup(l->server, key) : NULL;
                if (e && e->content_type) {
                        char *copy = malloc(e->body_len + 1);
                        if (!copy)
                                return MHD_NO;
                        memcpy(copy, e->body, e->body_len);
                        return send_owned(conn, 200, e->content_type, copy, e->body_len, NULL);
                }
                if (e)
                        return send_text(conn, 200, e->body, e->body_len, NULL);
        }
        dispatch(l->server, rq, url);
        unsigned status = rq->status ? rq->status : 500;
        if (rq->text && !rq->json) {
                if (key && status == 200)
                        cache_store(l->server, TAKE_PTR(key), rq->text, rq->text_len, rq->content_type);
                return send_owned(conn, status, rq->content_type, TAKE_PTR(rq->text), rq->text_len, NULL);
        }
        if (key && status == 200 && rq->json) {
                const char *text = json_to_string(rq->json);
                cache_store(l->server, TAKE_PTR(key), text, strlen(text), NULL);
        }
        return send_response(conn, status, rq->json, rq->allow);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
        struct request *rq = *con_cls;
        if (!rq)
                return;
        if (rq->json)
                json_object_put(rq->json);
        free(rq->text);
        free(rq->body);
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

static void listener_pump(struct listener *l) {
        unsigned before = listener_connections(l);
        MHD_run(l->mhd);
        /* At its connection limit libmicrohttpd takes the listening socket
         * out of its epoll set, and puts it back only at the start of a
         * later run, once connections have closed. When the last ones close
         * in this run (timed out, say), nothing would wake it again: the
         * listener would be dead for good. So when connections closed, run
         * once more. */
        if (listener_connections(l) < before)
                MHD_run(l->mhd);
        MHD_UNSIGNED_LONG_LONG ms;
        if (MHD_get_timeout(l->mhd, &ms) == MHD_YES) {
                sd_event_source_set_time_relative(l->timer_source, (usec_t)ms * USEC_PER_MSEC);
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
                q = sd_event_add_time_relative(a->event, &l->timer_source, CLOCK_MONOTONIC, USEC_PER_SEC,
                                               10 * USEC_PER_MSEC, on_mhd_timer, l);
        if (q < 0)
                return errorf(err, errlen, q, "http: cannot watch sockets: %m");
        listener_pump(l);
        return 0;
}

static struct MHD_Daemon *start_mhd(struct server *a, struct listener *l, int listen_fd, const struct sockaddr *sa,
                                    unsigned flags) {
        const struct config *c = a->config;
        l->server = a;
        struct MHD_OptionItem opts[] = {
                { MHD_OPTION_CONNECTION_LIMIT, c->http_connection_limit, NULL },
                { MHD_OPTION_PER_IP_CONNECTION_LIMIT, l->unix_socket ? 0 : c->http_per_ip_connection_limit, NULL },
                { MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)(c->http_connection_timeout_usec / USEC_PER_SEC), NULL },
                { MHD_OPTION_CONNECTION_MEMORY_LIMIT, c->http_connection_memory_limit, NULL },
                { MHD_OPTION_LISTEN_BACKLOG_SIZE, 128, NULL },
                { MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL },
                { MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL },
                { listen_fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR, listen_fd >= 0 ? listen_fd : 0,
                  (void *)sa },
                { MHD_OPTION_END, 0, NULL },
        };
        return MHD_start_daemon(flags | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_access, l,
                                MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

static int start_tcp(struct server *a, char *err, size_t errlen) {
        const char *listen = a->config->listen;
        if (address_off(listen))
                return 0;
        /* Under systemd the socket comes from mlmond-http.socket (so the
         * service needs no AF_INET); `listen` then only switches it off. */
        int sfd = TAKE_FD(a->tcp_fd);
        if (sfd >= 0) {
                a->tcp.unix_socket = false;
                a->tcp.mhd = start_mhd(a, &a->tcp, sfd, NULL, 0);
                if (!a->tcp.mhd) {
                        safe_close(sfd);
                        snprintf(err, errlen, "listen: cannot serve HTTP on the socket systemd passed");
                        return -EIO;
                }
                return listener_attach(a, &a->tcp, err, errlen);
        }
        struct addrinfo *res = NULL;
        char why[300];
        if (resolve_listen_address(listen, SOCK_STREAM, &res, why, sizeof why) < 0) {
                snprintf(err, errlen, "listen: %s", why);
                return -EINVAL;
        }
        unsigned flags = res->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0;
        a->tcp.unix_socket = false;
        a->tcp.mhd = start_mhd(a, &a->tcp, -1, res->ai_addr, flags);
        bool loopback = (res->ai_family == AF_INET &&
                         (ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr) >> 24) == 127) ||
                        (res->ai_family == AF_INET6 &&
                         IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr));
        freeaddrinfo(res);
        if (!a->tcp.mhd) {
                snprintf(err, errlen, "listen: cannot serve HTTP on %s (address in use?)", listen);
                return -EADDRINUSE;
        }
        if (!loopback)
                log_warning("listen: %s is not a loopback address: the read-only API is reachable from the network",
                            listen);
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
                              .generation = o->generation };
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
        for (size_t i = 0; i < CACHE_ENTRIES; i++)
                cache_entry_done(&a->cache[i]);
        listener_stop(&a->tcp);
        listener_stop(&a->unx);
        safe_close(a->tcp_fd); /* not handed to libmicrohttpd (listen = none) */
        free(a);
}

/* ---- whether the listeners take their connections -------------------------
 * A listening socket that stays readable (connections wait in its backlog)
 * for longer than LISTENER_STUCK_USEC is not being served: libmicrohttpd
 * has stopped accepting on it. Polled without waiting; `since` remembers
 * when each one was first seen with connections waiting. */
#include <poll.h>

#define LISTENER_STUCK_USEC (2 * USEC_PER_SEC)

bool server_accepting(struct server *s, char *why, size_t len) {
        static const struct server *seen;
        static usec_t since[2];
        struct listener *ls[2] = { &s->tcp, &s->unx };
        usec_t now = now_usec(CLOCK_MONOTONIC);
        bool ok = true;

        if (seen != s) {
                seen = s;
                since[0] = since[1] = 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(ls); i++) {
                const union MHD_DaemonInfo *di = ls[i]->mhd ? MHD_get_daemon_info(ls[i]->mhd, MHD_DAEMON_INFO_LISTEN_FD)
                                                            : NULL;
                struct pollfd p = { .fd = di ? di->listen_fd : -1, .events = POLLIN };
                if (p.fd < 0 || poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) {
                        since[i] = 0;
                        continue;
                }
                if (since[i] == 0)
                        since[i] = now;
                if (now - since[i] >= LISTENER_STUCK_USEC) {
                        if (ok)
                                snprintf(why, len, "%s listener: connections have waited %.1f s unaccepted",
                                         ls[i]->unix_socket ? "unix socket" : "TCP", (double)(now - since[i]) / 1e6);
                        ok = false;
                }
        }
        return ok;
}

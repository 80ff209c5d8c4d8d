/* SPDX-License-Identifier: MIT */
/* How the HTTP client reaches a server: one small interface (connect, write
 * all, read some, close) with three implementations, so that the request
 * writer and the response parser (http-client.c) are shared:
 *
 *   http_transport_unix  a unix stream socket (mlmond's --socket)
 *   http_transport_tcp   TCP to a host name, IPv4 or IPv6 address
 *   http_transport_tls   TLS over TCP (http-tls.c, its own library: only
 *                        mlmonctl links GnuTLS)
 *
 * Every wait is a poll() bounded by one overall deadline (CLOCK_MONOTONIC,
 * USEC_INFINITY: none), so a stuck peer cannot hang the caller. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util.h"

struct http_transport;

/* Where requests go. The transport reads what it needs; detail is written
 * by the transport where -errno alone says too little ("cannot resolve host
 * name ...", "the certificate is not trusted"), else left empty. */
struct http_endpoint {
        const struct http_transport *transport;
        const char *socket_path; /* unix */
        const char *host;        /* tcp, tls: a name, an IPv4 or an IPv6 address (no brackets) */
        const char *port;        /* tcp, tls: decimal */
        const char *ca_file;     /* tls: trusted certificates (PEM); NULL: the system's trust store */
        const char *token;       /* sent as "Authorization: Bearer TOKEN"; NULL: none */
        char detail[256];
};

/* One open connection. */
struct http_conn {
        const struct http_transport *transport;
        int fd;
        void *tls; /* the TLS transport's session */
};

struct http_transport {
        const char *name;
        /* Fills *c (fd >= 0) or returns -errno: -ECONNREFUSED, -ENOENT (no
         * socket), -ETIMEDOUT, -EADDRNOTAVAIL (name not resolved),
         * -EKEYREJECTED (peer certificate refused), -ECONNABORTED (TLS
         * handshake failed), ... */
        int (*connect)(struct http_conn *c, struct http_endpoint *ep, usec_t deadline);
        /* All of buf, or -errno (-EPIPE, -ECONNRESET: the peer closed). */
        int (*write_all)(struct http_conn *c, const void *buf, size_t len, usec_t deadline);
        /* Bytes read (> 0), 0 at the end of the stream, or -errno. */
        ssize_t (*read_some)(struct http_conn *c, void *buf, size_t size, usec_t deadline);
        /* Releases everything; c->fd is -1 after. Safe on a closed conn. */
        void (*close)(struct http_conn *c);
};

extern const struct http_transport http_transport_unix;
extern const struct http_transport http_transport_tcp;

static inline void http_conn_close(struct http_conn *c) {
        if (c->transport)
                c->transport->close(c);
}

/* Milliseconds left until deadline for poll(): -1 = no deadline, 0 = passed. */
int http_remaining_ms(usec_t deadline);
/* Waits until fd is ready for events, or -ETIMEDOUT at the deadline. */
int http_wait_fd(int fd, short events, usec_t deadline);
/* The plain socket I/O the unix and tcp transports share (and TLS beneath
 * its records). */
int http_fd_write_all(int fd, const void *buf, size_t len, usec_t deadline);
ssize_t http_fd_read_some(int fd, void *buf, size_t size, usec_t deadline);
/* host is an IPv4 or IPv6 address literal, not a name */
bool http_host_is_address(const char *host);

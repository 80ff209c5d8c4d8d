/* SPDX-License-Identifier: MIT */
/* The unix and tcp transports of the HTTP client (see http-transport.h).
 * Sockets are non-blocking; every wait is a poll() with what is left of the
 * request's deadline. */
#include "http-transport.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

/* ---- deadline ----------------------------------------------------------- */

/* Rounded up so that poll() never returns just before the deadline. */
int http_remaining_ms(usec_t deadline) {
        if (deadline == USEC_INFINITY)
                return -1;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        if (now >= deadline)
                return 0;
        usec_t left = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        return left > INT_MAX ? INT_MAX : (int)left;
}

int http_wait_fd(int fd, short events, usec_t deadline) {
        for (;;) {
                int t = http_remaining_ms(deadline);
                if (t == 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = fd, .events = events };
                int r = poll(&p, 1, t);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (r > 0)
                        return 0; /* readiness or POLLERR/POLLHUP: the next call says which */
        }
}

/* ---- plain socket I/O ------------------------------------------------------ */

int http_fd_write_all(int fd, const void *buf, size_t len, usec_t deadline) {
        const char *p = buf;
        while (len > 0) {
                ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                int r = http_wait_fd(fd, POLLOUT, deadline);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        return -errno;
                }
                p += k;
                len -= (size_t)k;
        }
        return 0;
}

ssize_t http_fd_read_some(int fd, void *buf, size_t size, usec_t deadline) {
        for (;;) {
                ssize_t k = recv(fd, buf, size, 0);
                if (k >= 0)
                        return k;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return -errno;
                int r = http_wait_fd(fd, POLLIN, deadline);
                if (r < 0)
                        return r;
        }
}

/* Ends a non-blocking connect() that said EINPROGRESS: waits for the
 * socket to be writable, then asks how it went. */
static int finish_connect(int fd, usec_t deadline) {
        int r = http_wait_fd(fd, POLLOUT, deadline);
        if (r < 0)
                return r;
        int err = 0;
        socklen_t elen = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
                return -errno;
        return -err;
}

static int fd_write_all(struct http_conn *c, const void *buf, size_t len, usec_t deadline) {
        return http_fd_write_all(c->fd, buf, len, deadline);
}

static ssize_t fd_read_some(struct http_conn *c, void *buf, size_t size, usec_t deadline) {
        return http_fd_read_some(c->fd, buf, size, deadline);
}

static void fd_close(struct http_conn *c) {
        c->fd = safe_close(c->fd);
}

/* ---- unix ------------------------------------------------------------------- */

static int unix_connect(struct http_conn *c, struct http_endpoint *ep, usec_t deadline) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *path = ep->socket_path;
        size_t len = path ? strlen(path) : 0;
        socklen_t salen;

        if (len == 0)
                return -EINVAL;
        if (len >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, len);
        if (path[0] == '@') {
                /* abstract namespace, written "@name" as systemd does */
                sa.sun_path[0] = 0;
                salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
        } else
                salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;

        for (;;) {
                if (connect(fd, (const struct sockaddr *)&sa, salen) == 0)
                        break;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN) {
                        /* A non-blocking AF_UNIX connect fails with EAGAIN
                         * while the listen backlog is full: the daemon is
                         * busy, not gone. Retry until the deadline. */
                        if (http_remaining_ms(deadline) == 0)
                                return -ETIMEDOUT;
                        nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
                        continue;
                }
                if (errno == EINPROGRESS) {
                        int r = finish_connect(fd, deadline);
                        if (r < 0)
                                return r;
                        break;
                }
                return -errno;
        }
        c->fd = TAKE_FD(fd);
        return 0;
}

const struct http_transport http_transport_unix = {
        .name = "unix",
        .connect = unix_connect,
        .write_all = fd_write_all,
        .read_some = fd_read_some,
        .close = fd_close,
};

/* ---- tcp -------------------------------------------------------------------- */

bool http_host_is_address(const char *host) {
        struct in6_addr a;
        return inet_pton(AF_INET, host, &a) == 1 || inet_pton(AF_INET6, host, &a) == 1;
}

static int connect_one(const struct addrinfo *ai, usec_t deadline, int *ret_fd) {
        _cleanup_close_ int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0)
                return -errno;
        /* a request is one write: no reason to wait for more */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                if (errno != EINPROGRESS && errno != EINTR)
                        return -errno;
                int r = finish_connect(fd, deadline);
                if (r < 0)
                        return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int resolve(struct http_endpoint *ep, struct addrinfo **ret) {
        const struct addrinfo hints = {
                .ai_family = AF_UNSPEC,
                .ai_socktype = SOCK_STREAM,
                .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG,
        };
        int r = getaddrinfo(ep->host, ep->port, &hints, ret);
        if (r == 0)
                return 0;
        if (r == EAI_SYSTEM)
                return errno > 0 ? -errno : -EIO;
        if (r == EAI_MEMORY)
                return -ENOMEM;
        snprintf(ep->detail, sizeof ep->detail, "cannot resolve host name '%s' (%s)", ep->host, gai_strerror(r));
        return r == EAI_AGAIN ? -EAGAIN : -EADDRNOTAVAIL;
}

/* Name resolution is the resolver's own (bounded by its own timeouts); the
 * connects share the deadline, tried in the order getaddrinfo() gives. */
static int tcp_connect(struct http_conn *c, struct http_endpoint *ep, usec_t deadline) {
        struct addrinfo *list = NULL;
        int r;

        if (!ep->host || !*ep->host || !ep->port)
                return -EINVAL;
        r = resolve(ep, &list);
        if (r < 0)
                return r;
        r = -EADDRNOTAVAIL;
        for (const struct addrinfo *ai = list; ai; ai = ai->ai_next) {
                int fd = -1;
                r = connect_one(ai, deadline, &fd);
                if (r == 0) {
                        c->fd = fd;
                        break;
                }
                if (r == -ETIMEDOUT)
                        break;
        }
        freeaddrinfo(list);
        return r;
}

const struct http_transport http_transport_tcp = {
        .name = "tcp",
        .connect = tcp_connect,
        .write_all = fd_write_all,
        .read_some = fd_read_some,
        .close = fd_close,
};

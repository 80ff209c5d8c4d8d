/* SPDX-License-Identifier: MIT */
/* The one file that knows libmicrohttpd: the TCP and unix-socket listeners
 * in external-epoll mode on the daemon's sd-event loop, request bodies,
 * routing through a table, a small cache of GET answers, and sending what
 * a handler built. The unix socket takes every method and identifies its
 * caller with SO_PEERCRED. TCP (HTTPS with [http] tls_cert and tls_key) is
 * read-only (405 for anything else) unless [http] token_file is set: then
 * "Authorization: Bearer TOKEN" allows every method, as root (401 without
 * it, 403 for a wrong one). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "http/request.h"

struct server;

struct server_options {
        sd_event *event;
        const struct config *config; /* [http] keys, listen, socket; read per request */
        int tcp_fd;                  /* the socket systemd passed for `listen`, or -1 */
        const struct route *routes;
        size_t n_routes;
        void *userdata; /* given to the handlers as rq->userdata */
        /* Moves whenever the data changes: a cached answer is used only
         * while it stays the same. */
        uint64_t (*generation)(void *userdata);
        /* Called before each request is answered, with userdata: work that
         * must not wait behind the requests queued on many connections (the
         * sampler's tick) runs there. NULL: none. */
        void (*yield)(void *userdata);
};

int server_new(const struct server_options *o, struct server **ret, char *err, size_t errlen);
void server_free(struct server *s);

/* Whether every listener takes its connections: false, with the reason in
 * why, when a listening socket has had connections waiting unaccepted for
 * more than 2 s (libmicrohttpd no longer serves it). Cheap: a poll() with
 * no wait per listener; call it every second or so. */
bool server_accepting(struct server *s, char *why, size_t len);

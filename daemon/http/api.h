/* SPDX-License-Identifier: MIT */
/* The HTTP API: libmicrohttpd in external-epoll mode driven by the manager's
 * sd-event loop (one thread), routed through one table with one error
 * responder. TCP (--listen) is read-only; the unix socket (--socket) takes
 * every method and identifies the caller with SO_PEERCRED. */
#pragma once

#include <stddef.h>

struct manager;
struct api;

int api_new(struct manager *m, struct api **ret, char *errbuf, size_t errlen);
void api_free(struct api *a);

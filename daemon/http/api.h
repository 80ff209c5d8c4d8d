/* SPDX-License-Identifier: MIT */
/* The HTTP API: the routes and their handlers over the manager's operations
 * and the store's queries (served by server.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "http/request.h"
#include "manager-ops.h"

struct store;
struct api;

struct api_options {
        sd_event *event;
        const struct config *config;
        struct store *store; /* read-only queries */
        int tcp_fd;          /* the socket systemd passed for `listen`, or -1 */
        struct manager_link manager;
};

/* The routes of the API (what the fuzz target routes through too). */
extern const struct route api_routes[];
extern const size_t api_n_routes;

int api_new(const struct api_options *o, struct api **ret, char *err, size_t errlen);
void api_free(struct api *a);

/* Whether the HTTP listeners take their connections (see
 * server_accepting()); why says which one does not. */
bool api_accepting(struct api *a, char *why, size_t len);

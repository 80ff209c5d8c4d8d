/* SPDX-License-Identifier: MIT */
/* One HTTP request as the handlers see it: its method, query arguments and
 * body, and the answer being built (a JSON document or a text body). The
 * handlers never see libmicrohttpd; server.c fills this and sends it. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util.h"

#define MAX_QUERY_ARGS 16
/* Windows and ranges longer than ten years cannot be answered from raw
 * samples anyway; cap what a client can ask for. */
#define MAX_WINDOW_USEC (3650 * USEC_PER_DAY)

struct request {
        void *userdata;   /* the server's, for the handlers */
        void *conn;       /* the libmicrohttpd connection (server.c's) */
        bool unix_socket; /* over the unix socket: read-write, SO_PEERCRED */
        const char *method;
        char *body;
        size_t body_len;
        bool too_large;
        bool started;
        struct {
                const char *key, *value;
        } args[MAX_QUERY_ARGS];
        size_t n_args;
        bool args_overflow, args_duplicate;
        /* the response being built */
        unsigned status;
        json_object *json;
        const char *allow;
        char *text; /* instead of json: a body of content_type (GET /metrics) */
        size_t text_len;
        const char *content_type;
};

/* parts: the path's segments. */
typedef void handler_fn(struct request *rq, const char *const *parts, size_t nparts);

struct route {
        const char *pattern[5]; /* path segments; "*" matches one segment */
        const char *method;
        handler_fn *fn;
};

/* ---- the answer ---------------------------------------------------------- */

/* Takes j over. */
void respond_json(struct request *rq, unsigned status, json_object *j);
/* {"error":{"code":code,"message":...}} with the given status. */
void respond_error(struct request *rq, unsigned status, const char *code, const char *fmt, ...) _printf_(4, 5);
void respond_method_not_allowed(struct request *rq, const char *allow);
/* The answer to a failed operation of the manager (manager-ops.h) with its
 * message: -ESRCH/-ENOENT 404, -EPERM 403, -EEXIST/-EALREADY 409,
 * -EUSERS 429, -EINVAL 400, anything else 500. */
void respond_errno(struct request *rq, int r, const char *message);

/* ---- what was asked ------------------------------------------------------ */

const char *arg(struct request *rq, const char *key);
/* Rejects unknown and repeated parameters (a typo must not silently give a
 * different answer); allowed is NULL-terminated. False: answered 400. */
bool check_args(struct request *rq, const char *const *allowed);
/* A timestamp (Unix ms) or a duration meaning "that long ago"; *ret is
 * left alone when the argument is absent. False: answered 400. */
bool parse_time_arg(struct request *rq, const char *key, int64_t now_ms, int64_t *ret);
/* A positive run id. False: answered 400. */
bool parse_id(struct request *rq, const char *s, int64_t *ret);
/* The body as a JSON object (parse_body) or any JSON value; NULL: answered. */
json_object *parse_body_any(struct request *rq);
json_object *parse_body(struct request *rq);
/* Refuses keys of o not in allowed (NULL-terminated). False: answered 400. */
bool check_unknown_keys(struct request *rq, json_object *o, const char *const *allowed);
/* Key of the body object o, if present and not null: 1 and *ret when it
 * is of type t, 0 when absent, -1 (answered 400 "key: must be <what>")
 * when of another type. */
int optional_field(struct request *rq, json_object *o, const char *key, json_type t, const char *what,
                   json_object **ret);
/* 1..max bytes of printable ASCII without spaces: op names, mark labels. */
bool valid_label(const char *s, size_t max);

/* Splits text at sep into at most max non-empty parts (pointers into buf,
 * a copy of text of bufsize bytes). -E2BIG: text does not fit buf;
 * -ENOSPC: more than max parts. */
int split_into(const char *text, const char *sep, char *buf, size_t bufsize, const char **parts, size_t max,
               size_t *ret_n);

/* The unix-socket caller's SO_PEERCRED (server.c). */
bool request_peer_cred(struct request *rq, struct ucred *ret);

/* SPDX-License-Identifier: MIT */
/* One HTTP request as the handlers see it: its method, query arguments and
 * body, and the answer being built (a JSON document or a text body). The
 * handlers never see libmicrohttpd; server.c fills this and sends it. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

#define MAX_QUERY_ARGS 16
/* The longest path (before the '?') and the most segments a path may have. */
#define MAX_PATH_BYTES 512
#define MAX_PATH_PARTS 8
/* Windows and ranges longer than ten years cannot be answered from raw
 * samples anyway; cap what a client can ask for. */
#define MAX_WINDOW_USEC (3650 * USEC_PER_DAY)
/* An ETag with its quotes and the NUL. */
#define REQUEST_ETAG_MAX 48

struct request {
        void *userdata; /* the server's, for the handlers */
        void *conn;     /* the libmicrohttpd connection (server.c's) */
        /* Who asks, as server.c found out before the handler runs: over the
         * unix socket its SO_PEERCRED; over TCP with the configured bearer
         * token root (no pid); else unknown (a GET over TCP). */
        bool caller_known;
        bool caller_root;
        uid_t caller_uid;
        pid_t caller_pid; /* 0: no process to name (TCP) */
        const char *method;
        char *body;
        size_t body_len;
        bool too_large;
        bool started;
        /* the request target as received (server.c's copy), and what
         * request_parse_target() decoded from it into decoded */
        char *target;
        char *decoded;
        const char *parts[MAX_PATH_PARTS];
        size_t nparts;
        struct {
                const char *key, *value;
        } args[MAX_QUERY_ARGS];
        size_t n_args;
        bool args_overflow, args_duplicate;
        const char *accept; /* the Accept header (NULL: none): GET /metrics's format */
        bool safe;          /* GET or HEAD */
        /* A GET or HEAD over TCP while [http] cors_origins is set: the answer
         * varies with the Origin header (Vary: Origin), and allow_origin is
         * that header (libmicrohttpd's copy, which lives as long as the
         * request) when the list holds it. */
        bool vary_origin;
        const char *allow_origin;
        /* the response being built */
        unsigned status;
        json_object *json;
        const char *allow;
        char *text; /* instead of json: a body of content_type (a file of the web page) */
        size_t text_len;
        const char *content_type;
        /* instead of json or text: a body of content_type written as it is
         * read (GET /metrics). stream_read gives its next at most max bytes
         * (0 at its end, < 0 on an error that cuts the answer short);
         * stream_free frees stream_ctx, which the response owns once it is
         * queued (request_done() frees one that was not). */
        ssize_t (*stream_read)(void *ctx, char *buf, size_t max);
        void (*stream_free)(void *ctx);
        void *stream_ctx;
        /* a file of the web page: its quoted ETag; it is sent with
         * "Cache-Control: no-cache", answered 304 for a matching
         * If-None-Match, and kept out of the answer cache */
        char etag[REQUEST_ETAG_MAX];
};

/* parts: the path's segments. */
typedef void handler_fn(struct request *rq, const char *const *parts, size_t nparts);

struct route {
        const char *pattern[5]; /* path segments; "*" matches one segment */
        const char *method;
        handler_fn *fn;
};

/* ---- the request target and routing ------------------------------------ */

/* Decodes the request target as received ("/v1/runs/1?state=all"): the path
 * split at '/' into its percent-decoded, non-empty segments (rq->parts), and
 * the query split at '&' into percent-decoded arguments ('+' is a space;
 * past MAX_QUERY_ARGS only counted, as args_overflow). 0, or the answer is
 * set and: -EBADMSG (400: a control byte in a decoded segment or argument),
 * -E2BIG (414: the path is too long), -ENOSPC (404: too many segments),
 * -ENOMEM (503). */
int request_parse_target(struct request *rq, const char *target);
/* The route of routes[] for method and the path's segments, or NULL; then
 * allow (allowlen bytes) lists the methods the path takes ("" for none). */
const struct route *route_find(const struct route *routes, size_t n_routes, const char *method,
                               const char *const *parts, size_t nparts, char *allow, size_t allowlen);
/* An unambiguous key for a GET answer, from the decoded segments and
 * arguments, each prefixed by its length (so "a%26b=c" and "a&b=c" differ).
 * NULL: not to be cached (too long, repeated or too many arguments) or out of
 * memory. */
char *request_cache_key(const struct request *rq);
/* The ETag of an answer: a hash of its bytes, quoted, so an answer that
 * did not change keeps its tag whatever moved meanwhile. */
void request_etag(const char *body, size_t len, char ret[static REQUEST_ETAG_MAX]);
/* Whether an If-None-Match header (NULL: none) names etag: "*", or a
 * list of tags compared weakly (a "W/" prefix ignored). */
bool request_etag_matches(const char *if_none_match, const char *etag);
/* Whether origin (an Origin header: "https://dash.example:3000") is in
 * list ([http] cors_origins: origins separated by spaces or commas), byte
 * for byte. */
bool request_origin_allowed(const char *list, const char *origin);
/* 0 when each origin of list is one as browsers write it in the Origin
 * header (http or https, a lowercase host, maybe a port, nothing after:
 * no path, not even a slash), which is the only way it can ever match;
 * else -EINVAL and why in errbuf. */
int request_origins_check(const char *list, char *errbuf, size_t errlen);
/* Appends "&key=value" (no '&' when *q is empty) to the malloc'ed query
 * *q, value percent-encoded: every byte but the unreserved ones of RFC 3986
 * (letters, digits, "-._~") as %XX, so that request_parse_target() gives
 * value back. -ENOMEM, leaving *q as it was. */
int request_query_append(char **q, const char *key, const char *value);
/* Frees what the request holds (not rq itself). */
void request_done(struct request *rq);

/* ---- the answer ---------------------------------------------------------- */

/* Takes j over. */
void respond_json(struct request *rq, unsigned status, json_object *j);
/* The same as JSON text already written (malloc'ed, len bytes, ending in a
 * newline), taken over: for an answer built in pieces. */
void respond_json_text(struct request *rq, unsigned status, char *text, size_t len);
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
/* Whether the caller is known (rq->caller_*). False: answered 403. */
bool caller_known(struct request *rq);
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
/* How a process ended, in the body of POST /v1/runs/{id}/exit: at most one
 * of "exit_code" (0..255) and "exit_signal" (1..64), into the wait(2)
 * status that says it. 1 with one, 0 with neither, -1 answered 400. */
int parse_exit_fields(struct request *rq, json_object *o, int *ret_wait_status);
/* Does op match one of the fnmatch(3) patterns of list (separated by
 * spaces or commas)? */
bool op_matches_list(const char *list, const char *op);
/* 1..max bytes of printable ASCII without spaces: op names, mark labels. */
bool valid_label(const char *s, size_t max);

/* Splits text at sep into at most max non-empty parts (pointers into buf,
 * a copy of text of bufsize bytes). -E2BIG: text does not fit buf;
 * -ENOSPC: more than max parts. */
int split_into(const char *text, const char *sep, char *buf, size_t bufsize, const char **parts, size_t max,
               size_t *ret_n);

/* The Authorization header (NULL: none) against the configured token:
 * AUTH_OK for "Bearer <token>" (the scheme in any case; compared in constant
 * time), AUTH_MISSING without the header, AUTH_WRONG for anything else. */
enum auth_result { AUTH_MISSING, AUTH_WRONG, AUTH_OK };
enum auth_result request_check_bearer(const char *authorization, const char *token, size_t token_len);

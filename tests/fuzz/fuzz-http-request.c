/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the HTTP request side without libmicrohttpd. The first
 * byte picks the method, the text up to the first '\n' is the request
 * target, the rest the body. The target goes through request_parse_target()
 * (no control byte survives decoding, every segment and argument lies in
 * the buffer), the cache key must be the one of the target encoded again
 * from what was decoded (so two targets share a key only when they decode
 * alike), routing through the API's route table, the argument
 * checks, and the body through parse_body() and the field helpers, and as
 * the value of an If-None-Match header and of [http] cors_origins.
 *
 *   tools/fuzz.sh 60 http-request */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-assert.h"
#include "http/request.h"
#include "http/api.h"
#include "json-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool no_control(const char *s) {
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

static bool inside(const struct request *rq, const char *p, size_t bufsize) {
        return p >= rq->decoded && p + strlen(p) < rq->decoded + bufsize;
}

/* Every byte as %HH: decodes back to s whatever it holds. */
static char *encode(char *out, const char *s) {
        for (; *s; s++)
                out += sprintf(out, "%%%02X", (unsigned char)*s);
        return out;
}

static void check_target(struct request *rq, const char *target) {
        size_t bufsize = strlen(target) + 2;
        int r = request_parse_target(rq, target);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -E2BIG || r == -ENOSPC || r == -ENOMEM);
                fuzz_assert(rq->json &&
                            (rq->status == 400 || rq->status == 404 || rq->status == 414 || rq->status == 503));
                return;
        }
        fuzz_assert(rq->nparts <= MAX_PATH_PARTS && rq->n_args <= MAX_QUERY_ARGS);
        fuzz_assert(!rq->args_overflow || rq->n_args == MAX_QUERY_ARGS);
        for (size_t i = 0; i < rq->nparts; i++) {
                fuzz_assert(inside(rq, rq->parts[i], bufsize));
                fuzz_assert(*rq->parts[i] && no_control(rq->parts[i]));
        }
        for (size_t i = 0; i < rq->n_args; i++) {
                fuzz_assert(inside(rq, rq->args[i].key, bufsize) && no_control(rq->args[i].key));
                fuzz_assert(no_control(rq->args[i].value));
                fuzz_assert(!*rq->args[i].value || inside(rq, rq->args[i].value, bufsize));
        }

        /* encoded again, it decodes alike and gives the same key */
        char *key = request_cache_key(rq);
        /* the key's overhead: at most 6 bytes a segment, 12 an argument */
        fuzz_assert(key || rq->args_overflow || rq->args_duplicate || strlen(target) > 3800);
        if (!key)
                return;
        char *again = malloc(4 * strlen(target) + 64), *p = again;
        fuzz_assert(again);
        for (size_t i = 0; i < rq->nparts; i++) {
                *p++ = '/';
                p = encode(p, rq->parts[i]);
        }
        for (size_t i = 0; i < rq->n_args; i++) {
                *p++ = i ? '&' : '?';
                p = encode(p, rq->args[i].key);
                *p++ = '=';
                p = encode(p, rq->args[i].value);
        }
        *p = 0;
        struct request rq2 = {};
        if (strcspn(again, "?") < MAX_PATH_BYTES) {
                fuzz_assert(request_parse_target(&rq2, again) == 0);
                fuzz_assert(rq2.nparts == rq->nparts && rq2.n_args == rq->n_args);
                char *key2 = request_cache_key(&rq2);
                fuzz_assert(!key2 || streq(key, key2));
                free(key2);
        }
        request_done(&rq2);
        free(again);
        free(key);
}

static void check_route(struct request *rq, const char *method) {
        char allow[64];
        const struct route *r = route_find(api_routes, api_n_routes, method, rq->parts, rq->nparts, allow,
                                           sizeof allow);
        if (r) {
                fuzz_assert(streq(r->method, method));
                for (size_t i = 0; i < rq->nparts; i++)
                        fuzz_assert(r->pattern[i] && (streq(r->pattern[i], "*") || streq(r->pattern[i], rq->parts[i])));
                fuzz_assert(rq->nparts == ELEMENTSOF(r->pattern) || !r->pattern[rq->nparts]);
        } else
                fuzz_assert(strlen(allow) < sizeof allow);
}

static void check_args_and_body(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "from", "until", "op", "q", "since_mark", "state", NULL };
        if (check_args(rq, allowed)) {
                fuzz_assert(!rq->args_overflow && !rq->args_duplicate);
                int64_t t = -1;
                if (parse_time_arg(rq, "from", 1700000000000, &t))
                        fuzz_assert(!arg(rq, "from") || t != -1);
                else
                        fuzz_assert(rq->status == 400);
        } else
                fuzz_assert(rq->status == 400 && rq->json);
        if (nparts >= 3) {
                int64_t id;
                if (parse_id(rq, parts[2], &id))
                        fuzz_assert(id > 0);
        }

        json_object *o = parse_body(rq);
        if (!o) {
                fuzz_assert(rq->status == 400 || rq->status == 503);
                return;
        }
        fuzz_assert(json_object_is_type(o, json_type_object));
        static const char *const fields[] = { "pid", "name", "interval", "children", "tags", NULL };
        (void)check_unknown_keys(rq, o, fields);
        json_object *v = NULL;
        int f = optional_field(rq, o, "name", json_type_string, "a string", &v);
        fuzz_assert(f >= -1 && f <= 1);
        if (f == 1)
                (void)valid_label(json_object_get_string(v), 64);
        int status = -1;
        if (parse_exit_fields(rq, o, &status) == 1)
                fuzz_assert(((status & 0xff) == 0 && status >> 8 <= 255) || (status >= 1 && status <= 64));
        (void)op_matches_list(rq->body, "backward");
        json_object_put(o);
}

/* The body as a header's value: the answer's own tag is always named by an
 * If-None-Match that holds it; an allow-list that passes the check holds
 * each of its origins; neither reads past the text. */
static void check_headers(const char *text, size_t len) {
        char etag[REQUEST_ETAG_MAX], list[REQUEST_ETAG_MAX + 64];
        request_etag(text, len, etag);
        fuzz_assert(strlen(etag) == 18 && etag[0] == '"' && etag[17] == '"');
        snprintf(list, sizeof list, "%.40s, W/%s", text, etag);
        fuzz_assert(request_etag_matches(list, etag));
        (void)request_etag_matches(text, etag);
        char err[256];
        if (request_origins_check(text, err, sizeof err) == 0) {
                size_t n = strcspn(text, " \t,");
                char *first = strndup(text, n);
                fuzz_assert(first);
                fuzz_assert(n == 0 || request_origin_allowed(text, first));
                free(first);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const methods[] = { "GET", "HEAD", "POST", "DELETE" };
        if (size == 0)
                return 0;
        const char *method = methods[data[0] % ELEMENTSOF(methods)];
        data++, size--;
        const uint8_t *nl = memchr(data, '\n', size);
        size_t tlen = nl ? (size_t)(nl - data) : size;

        struct request rq = { .method = method };
        /* a request line holds no NUL: the target ends at the first one */
        rq.target = strndup((const char *)data, tlen);
        if (!rq.target)
                return 0;
        if (nl) {
                rq.body_len = size - tlen - 1;
                rq.body = malloc(rq.body_len + 1); /* NUL-terminated, as server.c keeps it */
                if (!rq.body) {
                        request_done(&rq);
                        return 0;
                }
                memcpy(rq.body, nl + 1, rq.body_len);
                rq.body[rq.body_len] = 0;
        }

        if (rq.body)
                check_headers(rq.body, strlen(rq.body));
        check_target(&rq, rq.target);
        if (!rq.json) {
                check_route(&rq, streq(method, "HEAD") ? "GET" : method);
                check_args_and_body(&rq, rq.parts, rq.nparts);
        }
        request_done(&rq);
        return 0;
}

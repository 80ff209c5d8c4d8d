/* SPDX-License-Identifier: MIT */
/* Building an answer and reading what was asked: the parts of request
 * handling that need no libmicrohttpd. */
#include "http/request.h"

#include <stdarg.h>
#include <fnmatch.h>
#include <string.h>
#include <strings.h>

#include "json-util.h"

void respond_json(struct request *rq, unsigned status, json_object *j) {
        if (rq->json)
                json_object_put(rq->json);
        rq->status = status;
        rq->json = j;
}

void respond_json_text(struct request *rq, unsigned status, char *text, size_t len) {
        if (rq->json)
                json_object_put(rq->json);
        rq->json = NULL;
        free(rq->text);
        rq->status = status;
        rq->text = text;
        rq->text_len = len;
        rq->content_type = "application/json";
}

void respond_error(struct request *rq, unsigned status, const char *code, const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        respond_json(rq, status, json_error_new(code, msg));
}

void respond_errno(struct request *rq, int r, const char *message) {
        char fallback[128];
        if (!message || !*message) {
                errorf(fallback, sizeof fallback, r, "%m");
                message = fallback;
        }
        static const struct {
                int r;
                unsigned status;
                const char *code;
        } map[] = {
                { -ESRCH, 404, "not_found" },    { -ENOENT, 404, "not_found" },  { -EPERM, 403, "forbidden" },
                { -EEXIST, 409, "conflict" },    { -EALREADY, 409, "conflict" }, { -EUSERS, 429, "too_many_runs" },
                { -EINVAL, 400, "bad_request" }, { -EBUSY, 409, "conflict" },
        };
        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (map[i].r == r) {
                        respond_error(rq, map[i].status, map[i].code, "%s", message);
                        return;
                }
        respond_error(rq, 500, "internal", "%s", message);
}

void respond_method_not_allowed(struct request *rq, const char *allow) {
        rq->allow = allow;
        respond_error(rq, 405, "method_not_allowed", "%s is not allowed here (allowed: %s)", rq->method, allow);
}

const char *arg(struct request *rq, const char *key) {
        for (size_t i = 0; i < rq->n_args; i++)
                if (streq(rq->args[i].key, key))
                        return rq->args[i].value;
        return NULL;
}

/* Rejects unknown and repeated parameters: a typo must not silently give a
 * different answer. allowed is NULL-terminated. */
bool check_args(struct request *rq, const char *const *allowed) {
        if (rq->args_overflow) {
                respond_error(rq, 400, "bad_request", "too many query parameters (at most %d)", MAX_QUERY_ARGS);
                return false;
        }
        if (rq->args_duplicate) {
                respond_error(rq, 400, "bad_request", "a query parameter is repeated");
                return false;
        }
        for (size_t i = 0; i < rq->n_args; i++) {
                bool ok = false;
                for (const char *const *a = allowed; a && *a; a++)
                        if (streq(*a, rq->args[i].key))
                                ok = true;
                if (!ok) {
                        char shown[64];
                        snprintf(shown, sizeof shown, "%s", rq->args[i].key);
                        _cleanup_free_ char *clean = utf8_sanitize(shown, strlen(shown));
                        respond_error(rq, 400, "bad_request", "unknown query parameter '%s'", clean ? clean : "?");
                        return false;
                }
        }
        return true;
}

/* A timestamp (Unix ms) or a duration meaning "that long ago". */
bool parse_time_arg(struct request *rq, const char *key, int64_t now_ms, int64_t *ret) {
        const char *v = arg(rq, key);
        if (!v)
                return true;
        int64_t t;
        usec_t ago;
        if (safe_atoi64(v, &t) == 0 && t >= 0) {
                *ret = t;
                return true;
        }
        if (parse_duration(v, &ago) == 0 && ago <= MAX_WINDOW_USEC) {
                *ret = now_ms - (int64_t)(ago / USEC_PER_MSEC);
                return true;
        }
        _cleanup_free_ char *clean = utf8_sanitize(v, strnlen(v, 64));
        respond_error(rq, 400, "bad_request", "%s: '%s' is neither a Unix time in ms nor a duration", key,
                      clean ? clean : "?");
        return false;
}

bool caller_known(struct request *rq) {
        if (!rq->caller_known)
                respond_error(rq, 403, "forbidden", "cannot identify the caller");
        return rq->caller_known;
}

bool parse_id(struct request *rq, const char *s, int64_t *ret) {
        int64_t id;
        if (safe_atoi64(s, &id) < 0 || id <= 0) {
                _cleanup_free_ char *clean = utf8_sanitize(s, strnlen(s, 64));
                respond_error(rq, 400, "bad_request", "run id: '%s' is not a positive integer", clean ? clean : "?");
                return false;
        }
        *ret = id;
        return true;
}

bool check_unknown_keys(struct request *rq, json_object *o, const char *const *allowed) {
        json_object_object_foreach(o, k, v) {
                (void)v;
                bool ok = false;
                for (const char *const *a = allowed; *a; a++)
                        if (streq(*a, k))
                                ok = true;
                if (!ok) {
                        _cleanup_free_ char *clean = utf8_sanitize(k, strnlen(k, 64));
                        respond_error(rq, 400, "bad_request", "unknown field '%s'", clean ? clean : "?");
                        return false;
                }
        }
        return true;
}

json_object *parse_body_any(struct request *rq) {
        if (!rq->body || rq->body_len == 0) {
                respond_error(rq, 400, "bad_request", "a JSON body is required");
                return NULL;
        }
        json_tokener *tok = json_tokener_new_ex(32);
        if (!tok) {
                respond_error(rq, 503, "unavailable", "out of memory");
                return NULL;
        }
        json_object *o = json_tokener_parse_ex(tok, rq->body, (int)rq->body_len);
        enum json_tokener_error e = json_tokener_get_error(tok);
        size_t used = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (!o || e != json_tokener_success || used != rq->body_len) {
                /* trailing whitespace is fine */
                bool only_ws = o && e == json_tokener_success;
                for (size_t i = used; only_ws && i < rq->body_len; i++)
                        if (!strchr(" \t\r\n", rq->body[i]))
                                only_ws = false;
                if (!only_ws) {
                        json_object_put(o);
                        respond_error(rq, 400, "bad_request", "body: not valid JSON (%s)",
                                      e != json_tokener_success ? json_tokener_error_desc(e) : "trailing data");
                        return NULL;
                }
        }
        return o;
}

json_object *parse_body(struct request *rq) {
        json_object *o = parse_body_any(rq);
        if (o && !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                respond_error(rq, 400, "bad_request", "body: must be a JSON object");
                return NULL;
        }
        return o;
}

bool valid_label(const char *s, size_t max) {
        size_t l = strlen(s);
        return l > 0 && l <= max && utf8_is_plain_text(s, l);
}

int split_into(const char *text, const char *sep, char *buf, size_t bufsize, const char **parts, size_t max,
               size_t *ret_n) {
        size_t n = 0;
        if (strlen(text) >= bufsize)
                return -E2BIG;
        snprintf(buf, bufsize, "%s", text);
        char *save = NULL;
        for (char *p = strtok_r(buf, sep, &save); p; p = strtok_r(NULL, sep, &save)) {
                if (n == max)
                        return -ENOSPC;
                parts[n++] = p;
        }
        *ret_n = n;
        return 0;
}

int optional_field(struct request *rq, json_object *o, const char *key, json_type t, const char *what,
                   json_object **ret) {
        json_object *v = NULL;
        if (!json_object_object_get_ex(o, key, &v) || !v)
                return 0;
        if (!json_object_is_type(v, t)) {
                respond_error(rq, 400, "bad_request", "%s: must be %s", key, what);
                return -1;
        }
        *ret = v;
        return 1;
}

int parse_exit_fields(struct request *rq, json_object *o, int *ret_wait_status) {
        json_object *code = NULL, *sig = NULL;
        int c = optional_field(rq, o, "exit_code", json_type_int, "a whole number", &code);
        int g = c < 0 ? -1 : optional_field(rq, o, "exit_signal", json_type_int, "a whole number", &sig);
        if (c < 0 || g < 0)
                return -1;
        if (c + g == 0)
                return 0;
        if (c + g != 1) {
                respond_error(rq, 400, "bad_request", "exit_code and exit_signal cannot both be given");
                return -1;
        }
        int64_t v = json_object_get_int64(code ? code : sig);
        if (code ? v < 0 || v > 255 : v < 1 || v > 64) {
                respond_error(rq, 400, "bad_request",
                              code ? "exit_code: must be 0 to 255" : "exit_signal: must be 1 to 64");
                return -1;
        }
        /* the status wait(2) gives: the code in the second byte, or the signal */
        *ret_wait_status = code ? (int)v << 8 : (int)v;
        return 1;
}

bool op_matches_list(const char *list, const char *op) {
        char pattern[256]; /* a longer pattern matches no op name (200 bytes at most) */
        for (const char *p = list; p && *p;) {
                size_t skip = strspn(p, " \t,"), len = strcspn(p + skip, " \t,");
                p += skip;
                if (len > 0 && len < sizeof pattern) {
                        memcpy(pattern, p, len);
                        pattern[len] = 0;
                        if (fnmatch(pattern, op, 0) == 0)
                                return true;
                }
                p += len;
        }
        return false;
}

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Percent-decodes s[0..len) into out (NUL-terminated, at most len + 1
 * bytes); a '%' without two hex digits stays as it is. -EBADMSG: a control
 * byte, as sent or decoded. */
static int decode(const char *s, size_t len, bool plus_is_space, char *out) {
        for (size_t i = 0; i < len; i++) {
                int hi, lo;
                unsigned char b = (unsigned char)s[i];
                if (b == '%' && i + 2 < len && (hi = unhex(s[i + 1])) >= 0 && (lo = unhex(s[i + 2])) >= 0) {
                        b = (unsigned char)(hi << 4 | lo);
                        i += 2;
                } else if (b == '+' && plus_is_space)
                        b = ' ';
                if (b < 0x20 || b == 0x7f)
                        return -EBADMSG;
                *out++ = (char)b;
        }
        *out = 0;
        return 0;
}

static int parse_query(struct request *rq, const char *q, char *out) {
        while (*q) {
                size_t len = strcspn(q, "&");
                const char *eq = memchr(q, '=', len);
                size_t klen = eq ? (size_t)(eq - q) : len;
                if (len > 0) {
                        char *key = out;
                        if (decode(q, klen, true, key) < 0)
                                return -EBADMSG;
                        out += strlen(key) + 1;
                        const char *value = "";
                        if (eq) {
                                if (decode(eq + 1, len - klen - 1, true, out) < 0)
                                        return -EBADMSG;
                                value = out;
                                out += strlen(out) + 1;
                        }
                        for (size_t i = 0; i < rq->n_args; i++)
                                if (streq(rq->args[i].key, key))
                                        rq->args_duplicate = true;
                        if (rq->n_args < MAX_QUERY_ARGS) {
                                rq->args[rq->n_args].key = key;
                                rq->args[rq->n_args].value = value;
                                rq->n_args++;
                        } else
                                rq->args_overflow = true;
                }
                q += len;
                if (*q == '&')
                        q++;
        }
        return 0;
}

int request_parse_target(struct request *rq, const char *target) {
        size_t plen = strcspn(target, "?");
        if (plen >= MAX_PATH_BYTES) {
                respond_error(rq, 414, "uri_too_long", "the path is too long");
                return -E2BIG;
        }
        /* every segment and argument decoded, NUL-terminated: a '/', '&' or
         * '=' of the target for each NUL, plus one for a key without '=' */
        size_t total = strlen(target);
        free(rq->decoded);
        rq->decoded = malloc(total + 2);
        if (!rq->decoded) {
                respond_error(rq, 503, "unavailable", "out of memory");
                return -ENOMEM;
        }
        rq->nparts = rq->n_args = 0;
        rq->args_overflow = rq->args_duplicate = false;

        char *out = rq->decoded;
        for (size_t i = 0; i < plen;) {
                size_t len = strcspn(target + i, "/?");
                if (len > 0) {
                        if (rq->nparts == MAX_PATH_PARTS) {
                                respond_error(rq, 404, "not_found", "no such endpoint");
                                return -ENOSPC;
                        }
                        if (decode(target + i, len, false, out) < 0) {
                                respond_error(rq, 400, "bad_request", "the path holds a control character");
                                return -EBADMSG;
                        }
                        rq->parts[rq->nparts++] = out;
                        out += strlen(out) + 1;
                }
                i += len + (target[i + len] == '/');
        }
        if (target[plen] == '?' && parse_query(rq, target + plen + 1, out) < 0) {
                respond_error(rq, 400, "bad_request", "a query parameter holds a control character");
                return -EBADMSG;
        }
        return 0;
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

const struct route *route_find(const struct route *routes, size_t n_routes, const char *method,
                               const char *const *parts, size_t nparts, char *allow, size_t allowlen) {
        size_t used = 0;
        if (allowlen > 0)
                allow[0] = 0;
        for (size_t i = 0; i < n_routes; i++) {
                if (!pattern_match(&routes[i], parts, nparts))
                        continue;
                if (streq(routes[i].method, method))
                        return &routes[i];
                size_t l = strlen(routes[i].method);
                if (used + l + 3 <= allowlen) {
                        used += (size_t)snprintf(allow + used, allowlen - used, "%s%s", used ? ", " : "",
                                                 routes[i].method);
                }
        }
        return NULL;
}

#define CACHE_KEY_MAX 4096

char *request_cache_key(const struct request *rq) {
        if (rq->args_overflow || rq->args_duplicate)
                return NULL;
        char buf[CACHE_KEY_MAX];
        size_t used = 0;
        int n;
        for (size_t i = 0; i < rq->nparts; i++) {
                n = snprintf(buf + used, sizeof buf - used, "/%zu:%s", strlen(rq->parts[i]), rq->parts[i]);
                if (n < 0 || (size_t)n >= sizeof buf - used)
                        return NULL;
                used += (size_t)n;
        }
        for (size_t i = 0; i < rq->n_args; i++) {
                n = snprintf(buf + used, sizeof buf - used, "?%zu:%s=%zu:%s", strlen(rq->args[i].key), rq->args[i].key,
                             strlen(rq->args[i].value), rq->args[i].value);
                if (n < 0 || (size_t)n >= sizeof buf - used)
                        return NULL;
                used += (size_t)n;
        }
        /* an answer may depend on Accept (GET /metrics's two formats) */
        if (rq->accept) {
                n = snprintf(buf + used, sizeof buf - used, "#%s", rq->accept);
                if (n < 0 || (size_t)n >= sizeof buf - used)
                        return NULL;
                used += (size_t)n;
        }
        return strndup(buf, used);
}

void request_etag(const char *body, size_t len, char ret[static REQUEST_ETAG_MAX]) {
        /* FNV-1a over 8-byte words: FNV's offset basis, and the 64-bit
         * golden ratio as the multiplier, which carries each word's bits
         * upwards; the fold brings the high bits down again. Each step is
         * a bijection of the state, so two answers of the same length that
         * differ in one word never share a tag. Megabytes take well under
         * a millisecond. */
        uint64_t h = UINT64_C(0xcbf29ce484222325) ^ len, w;
        size_t i = 0;
        for (; i + 8 <= len; i += 8) {
                memcpy(&w, body + i, 8);
                h = (h ^ w) * UINT64_C(0x9e3779b97f4a7c15);
                h ^= h >> 32;
        }
        if (i < len) {
                w = 0;
                memcpy(&w, body + i, len - i);
                h = (h ^ w) * UINT64_C(0x9e3779b97f4a7c15);
                h ^= h >> 32;
        }
        snprintf(ret, REQUEST_ETAG_MAX, "\"%016llx\"", (unsigned long long)h);
}

bool request_etag_matches(const char *if_none_match, const char *etag) {
        size_t len = strlen(etag);
        for (const char *p = if_none_match; p && *p;) {
                p += strspn(p, " \t,");
                if (*p == '*')
                        return true;
                if (strncmp(p, "W/", 2) == 0)
                        p += 2;
                size_t l = strcspn(p, " \t,");
                if (l == len && memcmp(p, etag, l) == 0)
                        return true;
                p += l;
        }
        return false;
}

/* The next origin of a cors_origins list (separated by spaces or commas):
 * its start, and its length in *ret_len; NULL at the end. */
static const char *next_origin(const char **p, size_t *ret_len) {
        const char *s = *p + strspn(*p, " \t,");
        size_t l = strcspn(s, " \t,");
        *p = s + l;
        *ret_len = l;
        return l > 0 ? s : NULL;
}

bool request_origin_allowed(const char *list, const char *origin) {
        size_t len = strlen(origin), l;
        for (const char *p = list, *o; p && (o = next_origin(&p, &l));)
                if (l == len && memcmp(o, origin, l) == 0)
                        return true;
        return false;
}

int request_origins_check(const char *list, char *errbuf, size_t errlen) {
        size_t l;
        for (const char *p = list, *o; p && (o = next_origin(&p, &l));) {
                size_t scheme = strncmp(o, "https://", 8) == 0 ? 8 : strncmp(o, "http://", 7) == 0 ? 7 : 0;
                bool ok = scheme > 0 && l > scheme && l <= 256;
                for (size_t i = scheme; ok && i < l; i++)
                        ok = o[i] > ' ' && o[i] < 0x7f && o[i] != '/' && !(o[i] >= 'A' && o[i] <= 'Z');
                if (!ok) {
                        snprintf(errbuf, errlen,
                                 "cors_origins: '%.*s' is not an origin as browsers send it: "
                                 "http[s]://host[:port], lowercase, no path",
                                 (int)(l > 80 ? 80 : l), o);
                        return -EINVAL;
                }
        }
        return 0;
}

int request_query_append(char **q, const char *key, const char *value) {
        size_t have = *q ? strlen(*q) : 0, klen = strlen(key), vlen = strlen(value);
        char *n = realloc(*q, have + 1 + klen + 1 + 3 * vlen + 1);
        if (!n)
                return -ENOMEM;
        char *p = n + have;
        if (have > 0)
                *p++ = '&';
        p = mempcpy(p, key, klen);
        *p++ = '=';
        for (const unsigned char *v = (const unsigned char *)value; *v; v++)
                if ((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z') || (*v >= '0' && *v <= '9') ||
                    strchr("-._~", *v))
                        *p++ = (char)*v;
                else
                        p += sprintf(p, "%%%02X", *v);
        *p = 0;
        *q = n;
        return 0;
}

void request_done(struct request *rq) {
        if (rq->json)
                json_object_put(rq->json);
        rq->json = NULL;
        free(rq->text);
        free(rq->body);
        free(rq->target);
        free(rq->decoded);
        rq->text = rq->body = rq->target = rq->decoded = NULL;
        if (rq->stream_ctx && rq->stream_free)
                rq->stream_free(rq->stream_ctx);
        rq->stream_ctx = NULL;
}

enum auth_result request_check_bearer(const char *authorization, const char *token, size_t token_len) {
        if (!authorization)
                return AUTH_MISSING;
        if (strncasecmp(authorization, "Bearer ", 7) != 0)
                return AUTH_WRONG;
        const char *given = authorization + 7;
        given += strspn(given, " ");
        /* the blanks around a field value are not part of it (RFC 9110
         * 5.5: OWS is spaces and tabs); libmicrohttpd drops those before
         * it, not those after it */
        size_t len = strlen(given);
        while (len > 0 && (given[len - 1] == ' ' || given[len - 1] == '\t'))
                len--;
        return ct_equal(given, len, token, token_len) ? AUTH_OK : AUTH_WRONG;
}

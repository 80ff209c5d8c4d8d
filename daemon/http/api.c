/* SPDX-License-Identifier: MIT */
#include "http/api.h"

#include <arpa/inet.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "json-util.h"
#include "analyze/leakwatch.h"
#include "manager.h"
#include "http/metrics.h"
#include "store/query.h"
#include "http/render.h"

#define MAX_QUERY_ARGS 16
#define MAX_WINDOWS 16
#define MAX_TAGS 32
/* Windows and ranges longer than the raw retention cannot be answered from
 * raw samples anyway; cap what a client can ask for. */
#define MAX_WINDOW_USEC (3650 * USEC_PER_DAY)
#define DEFAULT_SAMPLES_LIMIT 1000

struct listener {
        struct api *api;
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

struct api {
        struct manager *m;
        struct listener tcp, unx;
        struct cache_entry cache[CACHE_ENTRIES];
        unsigned cache_next;
        struct metrics *metrics; /* GET /metrics: op totals kept between scrapes */
};

/* Per-request state, from the first access-handler call to completion. */
struct request {
        struct listener *l;
        struct MHD_Connection *conn;
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

typedef void (*handler_fn)(struct request *rq, const char *const *parts, size_t nparts);

/* ---- responses ---------------------------------------------------------- */

static void respond_json(struct request *rq, unsigned status, json_object *j) {
        if (rq->json)
                json_object_put(rq->json);
        rq->status = status;
        rq->json = j;
}

static void respond_error(struct request *rq, unsigned status, const char *code, const char *fmt, ...) _printf_(4, 5);
static void respond_error(struct request *rq, unsigned status, const char *code, const char *fmt, ...) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        json_object *root = json_object_new_object(), *err = json_object_new_object();
        json_add_string(err, "code", code);
        json_add_string(err, "message", msg);
        json_object_object_add(root, "error", err);
        respond_json(rq, status, root);
}

static void respond_method_not_allowed(struct request *rq, const char *allow) {
        rq->allow = allow;
        respond_error(rq, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed", "%s is not allowed here (allowed: %s)",
                      rq->method, allow);
}

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
        _cleanup_json_ json_object *root = json_object_new_object();
        json_object *err = json_object_new_object();
        json_add_string(err, "code", code);
        json_add_string(err, "message", msg);
        json_object_object_add(root, "error", err);
        return send_response(c, status, root, allow);
}

/* ---- query arguments ---------------------------------------------------- */

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

static const char *arg(struct request *rq, const char *key) {
        for (size_t i = 0; i < rq->n_args; i++)
                if (streq(rq->args[i].key, key))
                        return rq->args[i].value;
        return NULL;
}

/* Rejects unknown and repeated parameters: a typo must not silently give a
 * different answer. allowed is NULL-terminated. */
static bool check_args(struct request *rq, const char *const *allowed) {
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
static bool parse_time_arg(struct request *rq, const char *key, int64_t now_ms, int64_t *ret) {
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

static bool parse_id(struct request *rq, const char *s, int64_t *ret) {
        int64_t id;
        if (safe_atoi64(s, &id) < 0 || id <= 0) {
                _cleanup_free_ char *clean = utf8_sanitize(s, strnlen(s, 64));
                respond_error(rq, 400, "bad_request", "run id: '%s' is not a positive integer", clean ? clean : "?");
                return false;
        }
        *ret = id;
        return true;
}

static struct query_limits limits(struct request *rq) {
        const struct config *c = &rq->l->api->m->config;
        return (struct query_limits){ .timeout_usec = c->http_query_timeout_usec, .max_rows = c->http_max_rows };
}

static void respond_query_error(struct request *rq, int r) {
        if (r == -ETIMEDOUT)
                respond_error(rq, 503, "unavailable", "the query took longer than query_timeout; ask for less");
        else if (r == -ENOMEM)
                respond_error(rq, 503, "unavailable", "out of memory");
        else
                respond_error(rq, 500, "internal", "database error");
}

/* ---- caller identity ---------------------------------------------------- */

static bool peer_cred(struct request *rq, struct ucred *ret) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        socklen_t len = sizeof *ret;
        return ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, ret, &len) == 0;
}

/* ---- handlers ----------------------------------------------------------- */

static int collect_ops(struct request *rq, int64_t id, int64_t from, int64_t until, const char *op, struct op_aggs *ret,
                       int64_t *ret_span_from);

static void h_health(struct request *rq, const char *const *parts, size_t nparts) {
        if (!check_args(rq, NULL))
                return;
        respond_json(rq, 200, render_health(rq->l->api->m));
}

static void h_system(struct request *rq, const char *const *parts, size_t nparts) {
        if (!check_args(rq, NULL))
                return;
        respond_json(rq, 200, render_system(rq->l->api->m));
}

/* Latest sample: from memory for a running run, else the stored last one;
 * *ret_gpu: its per-device use (a JSON array, or NULL for none). */
static bool latest_sample(struct request *rq, const struct run_info *ri, struct sample *ret, json_object **ret_gpu) {
        struct run *r = manager_find_run(rq->l->api->m, ri->id);
        *ret_gpu = NULL;
        if (r && r->has_last) {
                *ret = r->last;
                if (r->accel.n_uses)
                        *ret_gpu = render_gpu_uses(r->accel.uses, r->accel.n_uses);
                return true;
        }
        struct query_limits lim = limits(rq);
        _cleanup_free_ char *gpu = NULL;
        if (!ri->totals.last_ts_ms ||
            query_sample_at(rq->l->api->m->store, &lim, ri->id, ri->totals.last_ts_ms, ret, &gpu) < 0)
                return false;
        *ret_gpu = gpu ? json_tokener_parse(gpu) : NULL;
        return true;
}

/* A running run's totals are kept in memory and written to its row only
 * every few ticks: the live ones are the truth. */
static void overlay_live(struct request *rq, struct run_info *ri) {
        struct run *r = manager_find_run(rq->l->api->m, ri->id);
        if (r && ri->state == RUN_RUNNING) {
                ri->totals = r->info.totals;
                ri->leak_detected = ri->leak_detected || r->info.leak_detected;
        }
}

static json_object *run_with_latest(struct request *rq, const struct run_info *ri) {
        struct sample s;
        json_object *gpu = NULL;
        bool has = latest_sample(rq, ri, &s, &gpu);
        return render_run(ri, has ? &s : NULL, has && !gpu ? json_object_new_array() : gpu);
}

static void h_runs_list(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "state", "name", "pid", NULL };
        if (!check_args(rq, allowed))
                return;
        struct runs_filter f = { .state = RUN_RUNNING };
        const char *state = arg(rq, "state"), *pid = arg(rq, "pid");
        if (state) {
                if (streq(state, "all"))
                        f.state = -1;
                else if ((f.state = run_state_from_string(state)) < 0) {
                        respond_error(rq, 400, "bad_request", "state: must be running, exited, unregistered or all");
                        return;
                }
        }
        f.name = arg(rq, "name");
        if (pid) {
                unsigned p;
                if (safe_atou(pid, &p) < 0 || p == 0 || p > INT32_MAX) {
                        respond_error(rq, 400, "bad_request", "pid: must be a positive integer");
                        return;
                }
                f.pid = (int)p;
        }
        struct query_limits lim = limits(rq);
        struct run_info *v = NULL;
        size_t n = 0;
        bool truncated;
        int r = query_runs(rq->l->api->m->store, &lim, &f, &v, &n, &truncated);
        if (r < 0) {
                respond_query_error(rq, r);
                return;
        }
        json_object *root = json_object_new_object(), *arr = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                overlay_live(rq, &v[i]);
                json_object_array_add(arr, run_with_latest(rq, &v[i]));
        }
        json_object_object_add(root, "runs", arr);
        json_object_object_add(root, "truncated", json_object_new_boolean(truncated));
        run_infos_free(v, n);
        respond_json(rq, 200, root);
}

/* Looks the run up; on failure the response is already set. */
static bool load_run(struct request *rq, const char *idtext, struct run_info *ri) {
        int64_t id;
        if (!parse_id(rq, idtext, &id))
                return false;
        struct query_limits lim = limits(rq);
        int r = query_run(rq->l->api->m->store, &lim, id, ri);
        if (r == -ENOENT) {
                respond_error(rq, 404, "not_found", "no run %lld", (long long)id);
                return false;
        }
        if (r < 0) {
                respond_query_error(rq, r);
                return false;
        }
        overlay_live(rq, ri);
        return true;
}

/* The verdict: live for a running run, as stored for a finished one; with
 * the history of its changes. */
static json_object *run_leak(struct request *rq, const struct run_info *ri, bool with_history) {
        struct run *r = manager_find_run(rq->l->api->m, ri->id);
        json_object *leak = r && r->leak.pts ? render_run_leak(&r->leak, &r->leak_gpu, ri->registered_ts_ms)
                            : ri->leak_json  ? json_tokener_parse(ri->leak_json)
                                             : NULL;
        if (!leak || !with_history)
                return leak;
        struct query_limits lim = limits(rq);
        struct leak_event *ev = NULL;
        size_t n = 0;
        json_object *hist = json_object_new_array();
        if (query_leak_events(rq->l->api->m->store, &lim, ri->id, &ev, &n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        json_object *e = json_object_new_object();
                        json_add_i64(e, "ts", true, ev[i].ts_ms);
                        json_add_string(e, "verdict", ev[i].suspected ? "suspected" : "cleared");
                        json_add_string(e, "metric", ev[i].metric);
                        json_add_string(e, "reason", ev[i].reason);
                        json_object_array_add(hist, e);
                }
                leak_events_free(ev, n);
        }
        json_object_object_add(leak, "history", hist);
        return leak;
}

static json_object *run_full(struct request *rq, const struct run_info *ri) {
        json_object *o = run_with_latest(rq, ri);
        json_object_object_add(o, "summary",
                               render_summary(ri, now_realtime_ms(), rq->l->api->m->config.grid_g_per_kwh));
        json_object_object_add(o, "leak", run_leak(rq, ri, true));
        return o;
}

static void h_leaks(struct request *rq, const char *const *parts, size_t nparts) {
        if (!check_args(rq, NULL))
                return;
        struct manager *m = rq->l->api->m;
        json_object *root = json_object_new_object(), *arr = json_object_new_array();
        for (size_t i = 0; i < m->n_runs; i++) {
                if (!m->runs[i]->leak.suspected && !m->runs[i]->leak_gpu.suspected)
                        continue;
                struct run_info ri;
                struct query_limits lim = limits(rq);
                if (query_run(m->store, &lim, m->runs[i]->info.id, &ri) < 0)
                        continue;
                overlay_live(rq, &ri);
                json_object *o = run_with_latest(rq, &ri);
                json_object_object_add(o, "leak", run_leak(rq, &ri, false));
                json_object_array_add(arr, o);
                run_info_done(&ri);
        }
        json_object_object_add(root, "runs", arr);
        respond_json(rq, 200, root);
}

static void h_run_get(struct request *rq, const char *const *parts, size_t nparts) {
        struct run_info ri;
        if (!check_args(rq, NULL) || !load_run(rq, parts[2], &ri))
                return;
        respond_json(rq, 200, run_full(rq, &ri));
        run_info_done(&ri);
}

static bool json_tags_valid(json_object *tags, struct request *rq) {
        if (!json_object_is_type(tags, json_type_object)) {
                respond_error(rq, 400, "bad_request", "tags: must be an object of strings");
                return false;
        }
        if (json_object_object_length(tags) > MAX_TAGS) {
                respond_error(rq, 400, "bad_request", "tags: at most %d", MAX_TAGS);
                return false;
        }
        json_object_object_foreach(tags, k, v) {
                if (!json_object_is_type(v, json_type_string) || strlen(k) == 0 || strlen(k) > 64 ||
                    json_object_get_string_len(v) > 256) {
                        respond_error(rq, 400, "bad_request",
                                      "tags: keys of 1-64 bytes, string values of at most 256 bytes");
                        return false;
                }
        }
        return true;
}

static bool check_unknown_keys(struct request *rq, json_object *o, const char *const *allowed) {
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

static json_object *parse_body_any(struct request *rq) {
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

static json_object *parse_body(struct request *rq) {
        json_object *o = parse_body_any(rq);
        if (o && !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                respond_error(rq, 400, "bad_request", "body: must be a JSON object");
                return NULL;
        }
        return o;
}

static void h_runs_post(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const fields[] = { "pid", "name", "interval", "children", "tags", NULL };
        if (!check_args(rq, NULL))
                return;
        _cleanup_json_ json_object *body = parse_body(rq);
        if (!body || !check_unknown_keys(rq, body, fields))
                return;
        struct register_request req = { 0 };
        json_object *v;
        if (!json_object_object_get_ex(body, "pid", &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) <= 0 || json_object_get_int64(v) > INT32_MAX) {
                respond_error(rq, 400, "bad_request", "pid: a positive integer is required");
                return;
        }
        req.pid = (int)json_object_get_int64(v);
        if (json_object_object_get_ex(body, "name", &v) && v) {
                if (!json_object_is_type(v, json_type_string)) {
                        respond_error(rq, 400, "bad_request", "name: must be a string");
                        return;
                }
                req.name = json_object_get_string(v);
        }
        if (json_object_object_get_ex(body, "interval", &v) && v) {
                if (!json_object_is_type(v, json_type_string) ||
                    parse_duration(json_object_get_string(v), &req.interval_usec) < 0) {
                        respond_error(rq, 400, "bad_request", "interval: must be a duration such as \"500ms\"");
                        return;
                }
                if (req.interval_usec == 0) {
                        respond_error(rq, 400, "bad_request", "interval: must be between 100ms and 1h");
                        return;
                }
        }
        if (json_object_object_get_ex(body, "children", &v) && v) {
                if (!json_object_is_type(v, json_type_boolean)) {
                        respond_error(rq, 400, "bad_request", "children: must be true or false");
                        return;
                }
                req.children = json_object_get_boolean(v);
        }
        if (json_object_object_get_ex(body, "tags", &v) && v) {
                if (!json_tags_valid(v, rq))
                        return;
                req.tags_json = json_to_string(v);
        }

        struct ucred cred = { .uid = 0 };
        bool root = true;
        if (rq->l->unix_socket) {
                if (!peer_cred(rq, &cred)) {
                        respond_error(rq, 403, "forbidden", "cannot identify the caller");
                        return;
                }
                root = cred.uid == 0;
        }
        char err[256];
        int64_t id = 0;
        int r = manager_register(rq->l->api->m, &req, root, cred.uid, &id, err, sizeof err);
        switch (r) {
        case 0:
                break;
        case -ESRCH:
                respond_error(rq, 404, "not_found", "%s", err);
                return;
        case -EPERM:
                respond_error(rq, 403, "forbidden", "%s", err);
                return;
        case -EEXIST:
                respond_error(rq, 409, "conflict", "%s", err);
                return;
        case -EUSERS:
                respond_error(rq, 429, "too_many_runs", "%s", err);
                return;
        case -EINVAL:
                respond_error(rq, 400, "bad_request", "%s", err);
                return;
        default:
                respond_error(rq, 500, "internal", "%s", err);
                return;
        }
        struct run_info ri;
        struct query_limits lim = limits(rq);
        if (query_run(rq->l->api->m->store, &lim, id, &ri) < 0) {
                respond_error(rq, 500, "internal", "run %lld registered but cannot be read back", (long long)id);
                return;
        }
        overlay_live(rq, &ri);
        respond_json(rq, 201, run_with_latest(rq, &ri));
        run_info_done(&ri);
}

static void h_run_delete(struct request *rq, const char *const *parts, size_t nparts) {
        struct run_info ri;
        if (!check_args(rq, NULL) || !load_run(rq, parts[2], &ri))
                return;
        struct ucred cred = { .uid = 0 };
        if (!peer_cred(rq, &cred)) {
                run_info_done(&ri);
                respond_error(rq, 403, "forbidden", "cannot identify the caller");
                return;
        }
        char err[256];
        int r = manager_unregister(rq->l->api->m, ri.id, cred.uid == 0, cred.uid, err, sizeof err);
        int64_t id = ri.id;
        run_info_done(&ri);
        if (r == -EALREADY) {
                respond_error(rq, 409, "conflict", "%s", err);
                return;
        }
        if (r == -EPERM) {
                respond_error(rq, 403, "forbidden", "%s", err);
                return;
        }
        if (r < 0) {
                respond_error(rq, 500, "internal", "%s", err);
                return;
        }
        struct query_limits lim = limits(rq);
        if (query_run(rq->l->api->m->store, &lim, id, &ri) < 0) {
                respond_error(rq, 500, "internal", "run %lld unregistered but cannot be read back", (long long)id);
                return;
        }
        respond_json(rq, 200, run_with_latest(rq, &ri));
        run_info_done(&ri);
}

static void h_run_samples(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "from", "until", "limit", "step", NULL };
        struct run_info ri;
        if (!check_args(rq, allowed) || !load_run(rq, parts[2], &ri))
                return;
        int64_t now_ms = now_realtime_ms(), from = ri.registered_ts_ms, until = now_ms;
        unsigned limit = DEFAULT_SAMPLES_LIMIT;
        usec_t step = 0;
        int64_t id = ri.id;
        run_info_done(&ri);
        if (!parse_time_arg(rq, "from", now_ms, &from) || !parse_time_arg(rq, "until", now_ms, &until))
                return;
        if (from > until) {
                respond_error(rq, 400, "bad_request", "from must not be after until");
                return;
        }
        const char *v = arg(rq, "limit");
        if (v && (safe_atou(v, &limit) < 0 || limit == 0)) {
                respond_error(rq, 400, "bad_request", "limit: must be a positive integer");
                return;
        }
        v = arg(rq, "step");
        if (v && (parse_duration(v, &step) < 0 || step < USEC_PER_MSEC || step > MAX_WINDOW_USEC)) {
                respond_error(rq, 400, "bad_request", "step: must be a duration of at least 1ms, such as 10s");
                return;
        }
        struct query_limits lim = limits(rq);
        _cleanup_free_ struct sample *s = NULL;
        size_t n = 0;
        bool truncated = false;
        char **gpu = NULL;
        int r = query_samples(rq->l->api->m->store, &lim, id, from, until, limit, (int64_t)(step / USEC_PER_MSEC), &s,
                              &n, &truncated, &gpu);
        if (r < 0) {
                respond_query_error(rq, r);
                return;
        }
        json_object *root = json_object_new_object(), *arr = json_object_new_array_ext((int)n);
        for (size_t i = 0; i < n; i++) {
                json_object *g = gpu && gpu[i] ? json_tokener_parse(gpu[i]) : NULL;
                /* a merged step has no breakdown (null); a raw sample without GPU use, [] */
                json_object_array_add(arr, render_sample(&s[i], g ? g : step > 0 ? NULL : json_object_new_array()));
        }
        strv_free_n(gpu, n);
        json_object_object_add(root, "samples", arr);
        struct gauge_point *g = NULL;
        size_t ng = 0;
        bool gtrunc = false;
        r = query_gauges(rq->l->api->m->store, &lim, id, from, until, limit, &g, &ng, &gtrunc);
        if (r < 0) {
                json_object_put(root);
                respond_query_error(rq, r);
                return;
        }
        json_object *garr = json_object_new_array();
        for (size_t i = 0; i < ng; i++) {
                json_object *j = json_object_new_object();
                json_add_i64(j, "ts", true, g[i].ts_ms);
                json_add_string(j, "name", g[i].name);
                json_object_object_add(j, "value", json_double_or_null(g[i].value));
                json_object_array_add(garr, j);
        }
        gauge_points_free(g, ng);
        json_object_object_add(root, "gauges", garr);
        json_object_object_add(root, "truncated", json_object_new_boolean(truncated || gtrunc));
        respond_json(rq, 200, root);
}

static void h_run_throughput(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "until", NULL };
        struct run_info ri;
        if (!check_args(rq, allowed) || !load_run(rq, parts[2], &ri))
                return;
        int64_t now_ms = now_realtime_ms();
        /* a finished run's windows end where its data ends */
        int64_t until = ri.state == RUN_RUNNING || !ri.totals.last_ts_ms ? now_ms : ri.totals.last_ts_ms;
        int64_t id = ri.id;
        run_info_done(&ri);
        if (!parse_time_arg(rq, "until", now_ms, &until))
                return;
        const char *spec = arg(rq, "window");
        if (!spec)
                spec = "10s,1m,5m";
        usec_t windows[MAX_WINDOWS];
        size_t nw = 0;
        char buf[512];
        if (strlen(spec) >= sizeof buf) {
                respond_error(rq, 400, "bad_request", "window: too long");
                return;
        }
        snprintf(buf, sizeof buf, "%s", spec);
        char *save = NULL;
        for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                if (nw == MAX_WINDOWS) {
                        respond_error(rq, 400, "bad_request", "window: at most %d windows", MAX_WINDOWS);
                        return;
                }
                if (parse_duration(w, &windows[nw]) < 0 || windows[nw] < USEC_PER_MSEC ||
                    windows[nw] > MAX_WINDOW_USEC) {
                        _cleanup_free_ char *clean = utf8_sanitize(w, strnlen(w, 64));
                        respond_error(rq, 400, "bad_request", "window: '%s' is not a duration", clean ? clean : "?");
                        return;
                }
                nw++;
        }
        if (nw == 0) {
                respond_error(rq, 400, "bad_request", "window: at least one duration is required");
                return;
        }
        struct query_limits lim = limits(rq);
        json_object *root = json_object_new_object(), *arr = json_object_new_array();
        json_object_object_add(root, "windows", arr);
        for (size_t i = 0; i < nw; i++) {
                struct window_rates w;
                struct op_aggs ops = {};
                int64_t from = until - (int64_t)(windows[i] / USEC_PER_MSEC), span_from;
                int r = query_window(rq->l->api->m->store, &lim, id, from, until, &w);
                if (r == 0)
                        r = collect_ops(rq, id, from, until, NULL, &ops, &span_from);
                if (r < 0) {
                        op_aggs_done(&ops);
                        json_object_put(root);
                        respond_query_error(rq, r);
                        return;
                }
                json_object_array_add(
                        arr, render_window(&w, (double)windows[i] / 1e6, &ops, (double)(until - span_from) / 1000.0));
                op_aggs_done(&ops);
        }
        respond_json(rq, 200, root);
}

/* ---- operations: latency, throughput ops, observations, marks ------------ */

/* The op data of run id over the slices overlapping [from, until]: stored
 * slices, plus the ones still in memory for a running run. Slices are 1 s,
 * so the span really starts at the slice holding `from` (*ret_span_from):
 * rates divide by until - *ret_span_from and are exact for steady rates. */
static int collect_ops(struct request *rq, int64_t id, int64_t from, int64_t until, const char *op, struct op_aggs *ret,
                       int64_t *ret_span_from) {
        struct manager *m = rq->l->api->m;
        struct query_limits lim = limits(rq);
        int64_t span_from = ops_slice_of(from < 0 ? 0 : from);
        int64_t rollup_before = now_realtime_ms() - (int64_t)(m->config.retention_raw_usec / USEC_PER_MSEC);
        int r = query_ops(m->store, &lim, id, span_from, until + 1, rollup_before, op, ret);
        struct run *live = manager_find_run(m, id);
        if (r == 0 && live)
                r = op_aggs_add_live(ret, &live->ops, span_from, until + 1, op);
        *ret_span_from = span_from;
        return r;
}

/* "50,90,99.9" -> percentiles in (0, 100], at most 3 decimals. */
#define MAX_QUANTILES 10
static bool parse_quantiles(struct request *rq, const char *spec, double *qs, size_t *ret_n) {
        char buf[256];
        size_t n = 0;
        if (strlen(spec) >= sizeof buf) {
                respond_error(rq, 400, "bad_request", "q: too long");
                return false;
        }
        snprintf(buf, sizeof buf, "%s", spec);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                double q;
                const char *dot = strchr(t, '.');
                /* plain decimals only: strtod would also take 1e-4 or 0x10 */
                bool plain = strspn(t, "0123456789.") == strlen(t) && (!dot || !strchr(dot + 1, '.')) && t[0] != '.';
                if (n == MAX_QUANTILES || !plain || safe_atod(t, &q) < 0 || !(q > 0 && q <= 100) ||
                    (dot && strlen(dot + 1) > 3)) {
                        _cleanup_free_ char *clean = utf8_sanitize(t, strnlen(t, 64));
                        respond_error(rq, 400, "bad_request",
                                      "q: '%s' is not a percentile in (0, 100] (at most %d, e.g. q=50,90,99.9)",
                                      clean ? clean : "?", MAX_QUANTILES);
                        return false;
                }
                qs[n++] = q;
        }
        if (n == 0) {
                respond_error(rq, 400, "bad_request", "q: at least one percentile is required");
                return false;
        }
        *ret_n = n;
        return true;
}

static bool valid_label(const char *s, size_t max) {
        size_t l = strlen(s);
        if (l == 0 || l > max || !utf8_is_valid(s, l))
                return false;
        for (size_t i = 0; i < l; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

/* The span [from, until] a latency or report question is about: window
 * (ending at until), or from/until, or since_mark. */
static bool parse_span(struct request *rq, const struct run_info *ri, int64_t *ret_from, int64_t *ret_until,
                       double *ret_window_s, json_object **ret_mark) {
        int64_t now_ms = now_realtime_ms();
        int64_t until = ri->state == RUN_RUNNING || !ri->ended_ts_ms ? now_ms : ri->ended_ts_ms;
        if (!parse_time_arg(rq, "until", now_ms, &until))
                return false;
        const char *w = arg(rq, "window"), *f = arg(rq, "from"), *mark = arg(rq, "since_mark");
        if (w && f) {
                respond_error(rq, 400, "bad_request", "window and from cannot both be given");
                return false;
        }
        usec_t window = USEC_PER_MINUTE;
        int64_t from;
        if (f) {
                if (!parse_time_arg(rq, "from", now_ms, &from))
                        return false;
        } else {
                if (w && (parse_duration(w, &window) < 0 || window < USEC_PER_MSEC || window > MAX_WINDOW_USEC)) {
                        _cleanup_free_ char *clean = utf8_sanitize(w, strnlen(w, 64));
                        respond_error(rq, 400, "bad_request", "window: '%s' is not a duration", clean ? clean : "?");
                        return false;
                }
                from = until - (int64_t)(window / USEC_PER_MSEC);
        }
        *ret_mark = NULL;
        if (mark) {
                int64_t ts;
                struct query_limits lim = limits(rq);
                int r = query_mark_ts(rq->l->api->m->store, &lim, ri->id, mark, &ts);
                if (r == -ENOENT) {
                        _cleanup_free_ char *clean = utf8_sanitize(mark, strnlen(mark, 64));
                        respond_error(rq, 404, "not_found", "run %lld has no mark '%s'", (long long)ri->id,
                                      clean ? clean : "?");
                        return false;
                }
                if (r < 0) {
                        respond_query_error(rq, r);
                        return false;
                }
                from = ts;
                json_object *jm = json_object_new_object();
                json_add_string(jm, "label", mark);
                json_add_i64(jm, "ts", true, ts);
                *ret_mark = jm;
        }
        if (from > until) {
                json_object_put(*ret_mark);
                *ret_mark = NULL;
                respond_error(rq, 400, "bad_request", "the span starts after it ends");
                return false;
        }
        *ret_from = from;
        *ret_until = until;
        *ret_window_s = (double)(until - from) / 1000.0;
        return true;
}

static void h_run_latency(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const allowed[] = { "window", "from", "until", "op", "q", "since_mark", NULL };
        struct run_info ri;
        if (!check_args(rq, allowed) || !load_run(rq, parts[2], &ri))
                return;
        int64_t from, until, span_from;
        double window_s, qs[MAX_QUANTILES];
        size_t nq = 0;
        json_object *mark = NULL;
        const char *qspec = arg(rq, "q"), *op = arg(rq, "op");
        bool ok = parse_span(rq, &ri, &from, &until, &window_s, &mark) &&
                  parse_quantiles(rq, qspec ? qspec : "50,90,99", qs, &nq);
        int64_t id = ri.id;
        run_info_done(&ri);
        if (!ok) {
                json_object_put(mark);
                return;
        }
        struct op_aggs ops = {};
        int r = collect_ops(rq, id, from, until, op, &ops, &span_from);
        if (r < 0) {
                op_aggs_done(&ops);
                json_object_put(mark);
                respond_query_error(rq, r);
                return;
        }
        json_object *root = json_object_new_object(), *jops = json_object_new_object();
        json_add_double(root, "window_s", true, window_s);
        json_add_i64(root, "from", true, span_from);
        json_add_i64(root, "until", true, until);
        json_object_object_add(root, "since_mark", mark);
        for (size_t i = 0; i < ops.n; i++)
                if (ops.v[i].h.count > 0)
                        json_object_object_add(jops, ops.v[i].op, render_latency_op(&ops.v[i], qs, nq));
        json_object_object_add(root, "ops", jops);
        op_aggs_done(&ops);
        respond_json(rq, 200, root);
}

/* The caller may feed a run: root, or the run's owner. */
static bool may_feed(struct request *rq, const struct run *r) {
        struct ucred cred;
        if (!peer_cred(rq, &cred)) {
                respond_error(rq, 403, "forbidden", "cannot identify the caller");
                return false;
        }
        if (cred.uid != 0 && (!r->info.has_uid || r->info.uid != cred.uid)) {
                respond_error(rq, 403, "forbidden", "run %lld is not yours", (long long)r->info.id);
                return false;
        }
        return true;
}

#define MAX_OBSERVATIONS 10000

struct observation {
        enum op_kind kind;
        const char *op, *category;
        double value;
};

/* Validates the whole body first: a bad item means nothing is taken. */
static bool parse_observations(struct request *rq, json_object *body, struct observation **ret, size_t *ret_n) {
        if (!json_object_is_type(body, json_type_array)) {
                respond_error(rq, 400, "bad_request", "body: must be a JSON array of observations");
                return false;
        }
        size_t n = json_object_array_length(body);
        if (n == 0 || n > MAX_OBSERVATIONS) {
                respond_error(rq, 400, "bad_request", "body: 1 to %d observations", MAX_OBSERVATIONS);
                return false;
        }
        struct observation *v = calloc(n, sizeof *v);
        if (!v) {
                respond_error(rq, 503, "unavailable", "out of memory");
                return false;
        }
        static const char *const fields[] = { "op", "ms", "count", "gauge", "category", NULL };
        for (size_t i = 0; i < n; i++) {
                json_object *o = json_object_array_get_idx(body, i), *x;
                if (!json_object_is_type(o, json_type_object) || !check_unknown_keys(rq, o, fields))
                        goto bad_item;
                if (!json_object_object_get_ex(o, "op", &x) || !json_object_is_type(x, json_type_string) ||
                    !valid_label(json_object_get_string(x), OPS_NAME_MAX))
                        goto bad_item;
                v[i].op = json_object_get_string(x);
                int kinds = 0;
                static const struct {
                        const char *key;
                        enum op_kind kind;
                } k[] = { { "ms", OP_TIMING }, { "count", OP_COUNTER }, { "gauge", OP_GAUGE } };
                for (size_t j = 0; j < ELEMENTSOF(k); j++)
                        if (json_object_object_get_ex(o, k[j].key, &x)) {
                                if (!(json_object_is_type(x, json_type_double) ||
                                      json_object_is_type(x, json_type_int)))
                                        goto bad_item;
                                v[i].kind = k[j].kind;
                                v[i].value = json_object_get_double(x);
                                kinds++;
                        }
                if (kinds != 1 || !isfinite(v[i].value) || (v[i].kind == OP_TIMING && v[i].value < 0))
                        goto bad_item;
                if (json_object_object_get_ex(o, "category", &x) && x) {
                        if (!json_object_is_type(x, json_type_string) || v[i].kind == OP_GAUGE ||
                            !valid_label(json_object_get_string(x), 64))
                                goto bad_item;
                        v[i].category = json_object_get_string(x);
                }
                continue;
bad_item:
                if (rq->status == 0)
                        respond_error(rq, 400, "bad_request",
                                      "observation %zu: needs \"op\" (1-200 bytes) and exactly one of \"ms\" (>= 0), "
                                      "\"count\" or \"gauge\" (finite numbers), optionally \"category\" (1-64 bytes)",
                                      i);
                free(v);
                return false;
        }
        *ret = v;
        *ret_n = n;
        return true;
}

static void take_observations(struct request *rq, struct run *r, bool say_run) {
        _cleanup_json_ json_object *body = parse_body_any(rq);
        struct observation *v = NULL;
        size_t n = 0;
        if (!body || !parse_observations(rq, body, &v, &n))
                return;
        size_t accepted = 0;
        for (size_t i = 0; i < n; i++)
                if (manager_observe(rq->l->api->m, r, v[i].kind, v[i].op, strlen(v[i].op), v[i].category,
                                    v[i].category ? strlen(v[i].category) : 0, v[i].value, 1.0) == 0)
                        accepted++;
        free(v);
        json_object *root = json_object_new_object();
        json_add_u64(root, "accepted", true, accepted);
        if (say_run)
                json_add_i64(root, "run", true, r->info.id);
        respond_json(rq, 202, root);
}

static struct run *running_run(struct request *rq, const char *idtext) {
        int64_t id;
        if (!parse_id(rq, idtext, &id))
                return NULL;
        struct run *r = manager_find_run(rq->l->api->m, id);
        if (!r) {
                struct run_info ri;
                if (load_run(rq, idtext, &ri)) { /* exists, but ended */
                        respond_error(rq, 409, "conflict", "run %lld is %s", (long long)id,
                                      run_state_to_string(ri.state));
                        run_info_done(&ri);
                }
                return NULL;
        }
        return r;
}

static void h_run_observations(struct request *rq, const char *const *parts, size_t nparts) {
        if (!check_args(rq, NULL))
                return;
        struct run *r = running_run(rq, parts[2]);
        if (r && may_feed(rq, r))
                take_observations(rq, r, false);
}

/* No id: the caller's own run, or its nearest registered ancestor's. */
static void h_observations(struct request *rq, const char *const *parts, size_t nparts) {
        struct ucred cred;
        if (!check_args(rq, NULL))
                return;
        if (!peer_cred(rq, &cred) || cred.pid <= 0) {
                respond_error(rq, 403, "forbidden", "cannot identify the caller");
                return;
        }
        struct run *r = manager_run_for_pid(rq->l->api->m, cred.pid);
        if (!r) {
                respond_error(rq, 404, "not_found", "no registered run for process %d or its ancestors", (int)cred.pid);
                return;
        }
        if (may_feed(rq, r))
                take_observations(rq, r, true);
}

static void h_run_marks_post(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const fields[] = { "label", NULL };
        if (!check_args(rq, NULL))
                return;
        struct run *r = running_run(rq, parts[2]);
        if (!r || !may_feed(rq, r))
                return;
        _cleanup_json_ json_object *body = parse_body(rq);
        json_object *x;
        if (!body || !check_unknown_keys(rq, body, fields))
                return;
        if (!json_object_object_get_ex(body, "label", &x) || !json_object_is_type(x, json_type_string) ||
            !valid_label(json_object_get_string(x), 64)) {
                respond_error(rq, 400, "bad_request", "label: 1-64 bytes of UTF-8 without control characters");
                return;
        }
        const char *label = json_object_get_string(x);
        int64_t ts;
        int q = manager_mark(rq->l->api->m, r->info.id, label, &ts);
        if (q < 0) {
                respond_error(rq, 500, "internal", "database error");
                return;
        }
        json_object *root = json_object_new_object();
        json_add_i64(root, "run", true, r->info.id);
        json_add_string(root, "label", label);
        json_add_i64(root, "ts", true, ts);
        respond_json(rq, 201, root);
}

static void h_run_marks_get(struct request *rq, const char *const *parts, size_t nparts) {
        struct run_info ri;
        if (!check_args(rq, NULL) || !load_run(rq, parts[2], &ri))
                return;
        struct query_limits lim = limits(rq);
        struct mark *v = NULL;
        size_t n = 0;
        int r = query_marks(rq->l->api->m->store, &lim, ri.id, &v, &n);
        run_info_done(&ri);
        if (r < 0) {
                respond_query_error(rq, r);
                return;
        }
        json_object *root = json_object_new_object(), *arr = json_object_new_array();
        for (size_t i = 0; i < n; i++) {
                json_object *j = json_object_new_object();
                json_add_string(j, "label", v[i].label);
                json_add_i64(j, "ts", true, v[i].ts_ms);
                json_object_array_add(arr, j);
        }
        marks_free(v, n);
        json_object_object_add(root, "marks", arr);
        respond_json(rq, 200, root);
}

/* ---- Prometheus ------------------------------------------------------------ */

static void h_metrics(struct request *rq, const char *const *parts, size_t nparts) {
        struct api *a = rq->l->api;
        if (!check_args(rq, NULL))
                return;
        if (metrics_render(a->metrics, a->m, &rq->text, &rq->text_len) < 0) {
                respond_error(rq, 503, "unavailable", "out of memory");
                return;
        }
        rq->content_type = METRICS_CONTENT_TYPE;
        rq->status = 200;
}

/* ---- routing ------------------------------------------------------------ */

struct route {
        const char *pattern[5]; /* path segments; "*" matches one segment */
        const char *method;
        handler_fn fn;
};

static const struct route routes[] = {
        { { "v1", "health" }, "GET", h_health },
        { { "v1", "system" }, "GET", h_system },
        { { "v1", "runs" }, "GET", h_runs_list },
        { { "v1", "runs" }, "POST", h_runs_post },
        { { "v1", "runs", "*" }, "GET", h_run_get },
        { { "v1", "runs", "*" }, "DELETE", h_run_delete },
        { { "v1", "runs", "*", "samples" }, "GET", h_run_samples },
        { { "v1", "runs", "*", "throughput" }, "GET", h_run_throughput },
        { { "v1", "runs", "*", "latency" }, "GET", h_run_latency },
        { { "v1", "runs", "*", "observations" }, "POST", h_run_observations },
        { { "v1", "runs", "*", "marks" }, "POST", h_run_marks_post },
        { { "v1", "runs", "*", "marks" }, "GET", h_run_marks_get },
        { { "v1", "observations" }, "POST", h_observations },
        { { "v1", "leaks" }, "GET", h_leaks },
        { { "metrics" }, "GET", h_metrics },
};

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

static void dispatch(struct request *rq, const char *url) {
        char path[512];
        const char *parts[8];
        size_t nparts = 0;

        if (strlen(url) >= sizeof path) {
                respond_error(rq, 414, "uri_too_long", "the path is too long");
                return;
        }
        snprintf(path, sizeof path, "%s", url);
        char *save = NULL;
        for (char *p = strtok_r(path, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
                if (nparts == ELEMENTSOF(parts)) {
                        respond_error(rq, 404, "not_found", "no such endpoint");
                        return;
                }
                parts[nparts++] = p;
        }
        /* HEAD is GET without the body (libmicrohttpd drops it) */
        const char *method = streq(rq->method, "HEAD") ? "GET" : rq->method;
        char allow[64] = "";
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                if (!pattern_match(&routes[i], parts, nparts))
                        continue;
                if (streq(routes[i].method, method)) {
                        routes[i].fn(rq, parts, nparts);
                        return;
                }
                if (strlen(allow) + strlen(routes[i].method) + 3 < sizeof allow) {
                        if (*allow)
                                strcat(allow, ", ");
                        strcat(allow, routes[i].method);
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

/* ---- libmicrohttpd glue ------------------------------------------------- */

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

static const struct cache_entry *cache_lookup(struct api *a, const char *key) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        for (size_t i = 0; i < CACHE_ENTRIES; i++) {
                const struct cache_entry *e = &a->cache[i];
                if (e->key && e->generation == a->m->data_generation && now - e->stored < CACHE_MAX_AGE_USEC &&
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

static void cache_store(struct api *a, char *key, const char *body, size_t len, const char *content_type) {
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
        e->generation = a->m->data_generation;
        e->stored = now_usec(CLOCK_MONOTONIC);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **con_cls) {
        struct listener *l = cls;
        struct request *rq = *con_cls;
        const struct config *c = &l->api->m->config;

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
                rq->l = l;
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
                        char *nb = realloc(rq->body, rq->body_len + n + 1);
                        if (!nb)
                                return MHD_NO;
                        memcpy(nb + rq->body_len, upload_data, n);
                        rq->body = nb;
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
                const struct cache_entry *e = key ? cache_lookup(l->api, key) : NULL;
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
        dispatch(rq, url);
        unsigned status = rq->status ? rq->status : 500;
        if (rq->text && !rq->json) {
                if (key && status == 200)
                        cache_store(l->api, TAKE_PTR(key), rq->text, rq->text_len, rq->content_type);
                return send_owned(conn, status, rq->content_type, TAKE_PTR(rq->text), rq->text_len, NULL);
        }
        if (key && status == 200 && rq->json) {
                const char *text = json_to_string(rq->json);
                cache_store(l->api, TAKE_PTR(key), text, strlen(text), NULL);
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

static void listener_pump(struct listener *l) {
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

static int listener_attach(struct api *a, struct listener *l, char *err, size_t errlen) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        if (!di) {
                snprintf(err, errlen, "http: cannot get libmicrohttpd's epoll fd");
                return -EIO;
        }
        l->api = a;
        int q = sd_event_add_io(a->m->event, &l->io_source, di->epoll_fd, EPOLLIN, on_mhd_io, l);
        if (q >= 0)
                q = sd_event_add_time_relative(a->m->event, &l->timer_source, CLOCK_MONOTONIC, USEC_PER_SEC,
                                               10 * USEC_PER_MSEC, on_mhd_timer, l);
        if (q < 0) {
                snprintf(err, errlen, "http: cannot watch sockets: %s", strerror(-q));
                return q;
        }
        listener_pump(l);
        return 0;
}

static struct MHD_Daemon *start_mhd(struct api *a, struct listener *l, int listen_fd, const struct sockaddr *sa,
                                    unsigned flags) {
        const struct config *c = &a->m->config;
        l->api = a;
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

static int start_tcp(struct api *a, char *err, size_t errlen) {
        const char *listen = a->m->config.listen;
        char host[256];
        uint16_t port;
        if (!listen || !*listen || streq(listen, "none"))
                return 0;
        /* Under systemd the socket comes from mlmond-http.socket (so the
         * service needs no AF_INET); `listen` then only switches it off. */
        int sfd = manager_listen_fd("http", SOCK_STREAM, "listen", listen);
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
        if (parse_host_port(listen, host, sizeof host, &port) < 0) {
                snprintf(err, errlen, "listen: '%s' is not HOST:PORT", listen);
                return -EINVAL;
        }
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res = NULL;
        char portstr[8];
        snprintf(portstr, sizeof portstr, "%u", port);
        int g = getaddrinfo(host, portstr, &hints, &res);
        if (g != 0) {
                snprintf(err, errlen, "listen: cannot resolve '%s': %s", host, gai_strerror(g));
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

static int start_unix(struct api *a, char *err, size_t errlen) {
        const char *path = a->m->config.socket_path;
        if (!path || !*path || streq(path, "none"))
                return 0;
        /* Anyone may connect: each request is authorized from SO_PEERCRED. */
        _cleanup_close_ int fd = unix_socket_bind(path, SOCK_STREAM, false, "socket", err, errlen);
        if (fd < 0)
                return fd;
        if (listen(fd, 128) < 0) {
                int e = errno;
                snprintf(err, errlen, "socket: cannot listen on %s: %s", path, strerror(e));
                unlink(path);
                return -e;
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

int api_new(struct manager *m, struct api **ret, char *err, size_t errlen) {
        struct api *a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        a->m = m;
        int q = metrics_new(&a->metrics);
        if (q < 0) {
                free(a);
                return q;
        }
        q = start_tcp(a, err, errlen);
        if (q >= 0)
                q = start_unix(a, err, errlen);
        if (q < 0) {
                api_free(a);
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
        if (l->unlink_path)
                unlink(l->unlink_path);
        free(l->unlink_path);
        l->unlink_path = NULL;
}

void api_free(struct api *a) {
        if (!a)
                return;
        for (size_t i = 0; i < CACHE_ENTRIES; i++)
                cache_entry_done(&a->cache[i]);
        listener_stop(&a->tcp);
        listener_stop(&a->unx);
        metrics_free(a->metrics);
        free(a);
}

/* SPDX-License-Identifier: MIT */
/* /v1/runs: list, register, one run, unregister; /v1/leaks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http/cache.h"
#include "http/handlers.h"
#include "http/render.h"
#include "http/tag-labels.h"
#include "json-util.h"

/* GET /v1/runs is read, rendered and written in pieces of this many runs,
 * and a tick that comes due runs between pieces: 4 000 runs are 1.7 MB of
 * JSON and a query of 5 to 20 ms, which would make a tick that late. */
#define RUNS_PER_PIECE 32
/* A page of the lists that grow without a bound of their own (ended runs:
 * max_runs bounds the running ones), unless limit= says otherwise: a few
 * hundred KB to 2 MB of JSON. */
#define RUNS_PAGE_DEFAULT 500
/* An answer up to this size is built whole: it gets a Content-Length, an
 * ETag and a place in the GET cache. A longer one is sent as it is written,
 * a piece at a time, between the other connections' answers: no request
 * waits for it, and memory does not grow with it. */
#define RUNS_BUFFERED_BYTES CACHE_MAX_BODY
/* A streamed answer goes out in pieces of this many runs and reads of at
 * most this many bytes: libmicrohttpd asks each connection with something
 * to send for one read per run, and every other connection, a pipelined
 * request included, waits for that run. 4 runs of the largest kind (16
 * tags of the largest size) are 17 KB and about 0.5 ms to render: with four
 * such answers streamed, a request waits a few ms, not the 10 to 20 ms of
 * 64 KB reads. */
#define RUNS_PER_STREAMED_PIECE 4
#define RUNS_STREAM_READ_BYTES (16 * 1024)

/* A list being written: where it stands, and what the next piece starts
 * from. It outlives the handler when the answer is streamed, so it holds
 * copies of what it needs; the helpers it calls take a request, and only
 * read its userdata (the api), which the stand-in rq holds. */
struct runs_list {
        struct request rq;
        struct runs_filter f;
        char *name;  /* f.name */
        char *query; /* the arguments given but after=, for the next page's URL */
        unsigned limit, written;
        bool more;    /* the store may hold more after f.after_id */
        bool started; /* the opening is written */
        bool done;    /* ... and the closing */
        /* streamed: the piece rendered and not read yet */
        char *piece;
        size_t piece_len, piece_pos;
};

static void runs_list_free(struct runs_list *l) {
        if (!l)
                return;
        free(l->name);
        free(l->query);
        free(l->piece);
        free(l);
}
static void runs_list_freep(struct runs_list **l) {
        runs_list_free(*l);
}

/* "truncated" and "next": more runs match than this answer holds, and
 * the URL of the page after it (its arguments, after= the last run
 * written), or null. */
static void runs_list_close(struct runs_list *l, FILE *out) {
        bool more = l->more && l->written > 0;
        fprintf(out, "],\"truncated\":%s,\"next\":", more ? "true" : "false");
        if (more)
                fprintf(out, "\"/v1/runs?%s%safter=%lld\"", l->query ? l->query : "", l->query ? "&" : "",
                        (long long)l->f.after_id);
        else
                fputs("null", out);
        fputs("}\n", out);
        l->done = true;
}

/* Writes the next piece to out: the opening, up to per_piece runs
 * read from the store after the last one written (a run registered
 * meanwhile is listed, one that ended shows as it was stored when its
 * piece was read), each rendered and freed, and the closing once the page
 * is full or the store has no more. A failed query ends the page early,
 * with "next" where it stopped, once something was written; before that
 * it is returned. */
static int runs_list_piece(struct runs_list *l, FILE *out, unsigned per_piece) {
        if (!l->started) {
                fputs("{\"runs\":[", out);
                l->started = true;
        }
        struct query_limits lim = limits(&l->rq);
        lim.max_rows = l->limit - l->written < per_piece ? l->limit - l->written : per_piece;
        struct run_info *v = NULL;
        size_t n = 0;
        int r = lim.max_rows > 0 && l->more ? query_runs(api_of(&l->rq)->store, &lim, &l->f, &v, &n, &l->more) : 0;
        if (r < 0 && l->written == 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                overlay_live(&l->rq, &v[i]);
                _cleanup_json_ json_object *o = run_with_latest(&l->rq, &v[i]);
                /* the verdict, without its history (GET /v1/runs/ID has it) */
                json_object_object_add(o, "leak", run_leak(&l->rq, &v[i], false));
                run_add_verdicts(&l->rq, &v[i], o);
                if (l->written++ > 0)
                        fputc(',', out);
                fputs(json_to_string(o), out);
                l->f.after_id = v[i].id;
        }
        run_infos_free(v, n);
        if (r < 0)
                l->more = true; /* the next page starts where this one stopped */
        else if (n == 0)
                l->more = false;
        if (r < 0 || !l->more || l->written >= l->limit)
                runs_list_close(l, out);
        return 0;
}

static ssize_t runs_list_read(void *ctx, char *buf, size_t max) {
        struct runs_list *l = ctx;
        if (l->piece_pos == l->piece_len) {
                if (l->done)
                        return 0;
                free(l->piece);
                l->piece = NULL;
                l->piece_len = l->piece_pos = 0;
                FILE *out = open_memstream(&l->piece, &l->piece_len);
                if (!out)
                        return -ENOMEM;
                (void)runs_list_piece(l, out, RUNS_PER_STREAMED_PIECE); /* past the first piece it cannot fail */
                if (fclose(out) < 0 || !l->piece)
                        return -ENOMEM;
        }
        if (max > RUNS_STREAM_READ_BYTES)
                max = RUNS_STREAM_READ_BYTES;
        size_t n = l->piece_len - l->piece_pos < max ? l->piece_len - l->piece_pos : max;
        memcpy(buf, l->piece + l->piece_pos, n);
        l->piece_pos += n;
        return (ssize_t)n;
}

static void runs_list_stream_free(void *ctx) {
        runs_list_free(ctx);
}

/* state= and the other arguments into l; false: answered 400. */
static bool runs_list_parse(struct request *rq, struct runs_list *l) {
        static const char *const allowed[] = { "state", "name", "pid", "limit", "after", "order", NULL };
        if (!check_args(rq, allowed))
                return false;
        const char *state = arg(rq, "state"), *pid = arg(rq, "pid"), *limit = arg(rq, "limit"),
                   *after = arg(rq, "after"), *order = arg(rq, "order");
        unsigned max_rows = api_of(rq)->config->http_max_rows;
        l->f.state = RUN_RUNNING;
        l->limit = max_rows; /* max_runs bounds the running runs */
        if (state) {
                l->f.state = -1;
                l->f.ended = streq(state, "ended");
                if (!l->f.ended && !streq(state, "all") && (l->f.state = run_state_from_string(state)) < 0) {
                        respond_error(rq, 400, "bad_request",
                                      "state: must be running, exited, unregistered, ended or all");
                        return false;
                }
                if (l->f.state != RUN_RUNNING && max_rows > RUNS_PAGE_DEFAULT)
                        l->limit = RUNS_PAGE_DEFAULT;
        }
        if (pid) {
                unsigned p;
                if (safe_atou(pid, &p) < 0 || p == 0 || p > INT32_MAX) {
                        respond_error(rq, 400, "bad_request", "pid: must be a positive integer");
                        return false;
                }
                l->f.pid = (int)p;
        }
        if (limit && (safe_atou(limit, &l->limit) < 0 || l->limit == 0 || l->limit > max_rows)) {
                respond_error(rq, 400, "bad_request", "limit: must be 1 to %u (max_rows)", max_rows);
                return false;
        }
        if (after && !parse_id(rq, after, &l->f.after_id))
                return false;
        if (order && !streq(order, "id") && !(l->f.newest_first = streq(order, "newest"))) {
                respond_error(rq, 400, "bad_request", "order: must be id or newest");
                return false;
        }
        const char *name = arg(rq, "name");
        bool oom = name && !(l->name = strdup(name));
        l->f.name = l->name;
        static const char *const kept[] = { "state", "name", "pid", "limit", "order" };
        for (size_t i = 0; i < ELEMENTSOF(kept) && !oom; i++)
                oom = arg(rq, kept[i]) && request_query_append(&l->query, kept[i], arg(rq, kept[i])) < 0;
        if (oom)
                respond_errno(rq, -ENOMEM, "out of memory");
        return !oom;
}

void h_runs_list(struct request *rq, const char *const *parts, size_t nparts) {
        _cleanup_(runs_list_freep) struct runs_list *l = calloc(1, sizeof *l);
        if (!l) {
                respond_errno(rq, -ENOMEM, "out of memory");
                return;
        }
        l->rq.userdata = rq->userdata;
        l->more = true;
        if (!runs_list_parse(rq, l))
                return;
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        if (!out) {
                respond_errno(rq, -ENOMEM, "out of memory");
                return;
        }
        int r = 0;
        while (r >= 0 && !l->done && len <= RUNS_BUFFERED_BYTES) {
                if (l->started)
                        api_yield(api_of(rq));
                r = runs_list_piece(l, out, RUNS_PER_PIECE);
                fflush(out);
        }
        if (fclose(out) < 0 || !text)
                r = r < 0 ? r : -ENOMEM;
        if (r < 0) {
                free(text);
                respond_query_error(rq, r); /* 503 for -ENOMEM */
                return;
        }
        if (l->done) {
                respond_json_text(rq, 200, text, len);
                return;
        }
        /* the rest as it is read: what is written so far first */
        l->piece = text;
        l->piece_len = len;
        rq->status = 200;
        rq->content_type = "application/json";
        rq->stream_read = runs_list_read;
        rq->stream_free = runs_list_stream_free;
        rq->stream_ctx = TAKE_PTR(l);
}

/* A running run whose verdict is suspected, as GET /v1/leaks lists it. */
static void add_leaking(struct request *rq, int64_t id, json_object *arr) {
        struct run_info ri;
        struct query_limits lim = limits(rq);
        if (query_run(api_of(rq)->store, &lim, id, &ri) < 0)
                return;
        overlay_live(rq, &ri);
        json_object *o = run_with_latest(rq, &ri);
        json_object_object_add(o, "leak", run_leak(rq, &ri, false));
        run_add_verdicts(rq, &ri, o);
        json_object_array_add(arr, o);
        run_info_done(&ri);
}

struct leaking {
        struct request *rq;
        json_object *arr;
};

static int add_if_leaking(struct run_live *live, void *userdata) {
        struct leaking *x = userdata;
        if (live->has_leak && (live->leak.rss.suspected || (live->leak.has_gpu && live->leak.gpu.suspected)))
                add_leaking(x->rq, live->info.id, x->arr);
        return 0;
}

void h_leaks(struct request *rq, const char *const *parts, size_t nparts) {
        if (!check_args(rq, NULL))
                return;
        json_object *root = json_object_new_object();
        struct leaking x = { rq, json_object_new_array() };
        (void)api_each_running(api_of(rq), RUN_LIVE_LEAK, add_if_leaking, &x);
        json_object_object_add(root, "runs", x.arr);
        respond_json(rq, 200, root);
}

void h_run_get(struct request *rq, const char *const *parts, size_t nparts) {
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
        if (json_object_object_length(tags) > TAGS_MAX) {
                respond_error(rq, 400, "bad_request", "tags: at most %d", TAGS_MAX);
                return false;
        }
        json_object_object_foreach(tags, k, v) {
                if (!json_object_is_type(v, json_type_string) || strlen(k) == 0 || strlen(k) > TAG_KEY_MAX ||
                    json_object_get_string_len(v) > TAG_VALUE_MAX) {
                        respond_error(rq, 400, "bad_request",
                                      "tags: keys of 1-%d bytes, string values of at most %d bytes", TAG_KEY_MAX,
                                      TAG_VALUE_MAX);
                        return false;
                }
                /* shown on the web page, in mlmonctl's tables and as labels:
                 * nothing in them may change how the text around reads */
                if (!utf8_is_plain_text(k, strlen(k)) ||
                    !utf8_is_plain_text(json_object_get_string(v), (size_t)json_object_get_string_len(v))) {
                        respond_error(rq, 400, "bad_request",
                                      "tags: keys and values must not hold control or bidirectional formatting "
                                      "characters");
                        return false;
                }
        }
        return true;
}

void h_runs_post(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const fields[] = {
                "pid", "name", "interval", "children", "tags", "discover", "step_op", NULL
        };
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
        int f = optional_field(rq, body, "name", json_type_string, "a string", &v);
        if (f < 0)
                return;
        if (f > 0)
                req.name = json_object_get_string(v);
        const char *duration = "a duration such as \"500ms\"";
        f = optional_field(rq, body, "interval", json_type_string, duration, &v);
        if (f < 0)
                return;
        if (f > 0 && parse_duration(json_object_get_string(v), &req.interval_usec) < 0) {
                respond_error(rq, 400, "bad_request", "interval: must be %s", duration);
                return;
        }
        if (f > 0 && req.interval_usec == 0) {
                respond_error(rq, 400, "bad_request", "interval: must be between 100ms and 1h");
                return;
        }
        f = optional_field(rq, body, "children", json_type_boolean, "true or false", &v);
        if (f < 0)
                return;
        if (f > 0)
                req.children = json_object_get_boolean(v);
        f = optional_field(rq, body, "discover", json_type_boolean, "true or false", &v);
        if (f < 0)
                return;
        if (f > 0)
                req.no_discover = !json_object_get_boolean(v);
        f = optional_field(rq, body, "step_op", json_type_string, "an op name", &v);
        if (f < 0)
                return;
        if (f > 0) {
                req.step_op = json_object_get_string(v);
                size_t l = strlen(req.step_op);
                if (l == 0 || l > OPS_NAME_MAX || !utf8_is_valid(req.step_op, l)) {
                        respond_error(rq, 400, "bad_request", "step_op: must be 1 to %d bytes of UTF-8", OPS_NAME_MAX);
                        return;
                }
        }
        if (json_object_object_get_ex(body, "tags", &v) && v) {
                if (!json_tags_valid(v, rq))
                        return;
                req.tags_json = json_to_string(v);
        }

        if (!caller_known(rq))
                return;
        char err[256] = "";
        int64_t id = 0;
        int r = api_of(rq)->manager.ops->register_run(
                api_of(rq)->manager.userdata, &req,
                &(struct caller){ .is_root = rq->caller_root, .uid = rq->caller_uid }, &id, err, sizeof err);
        if (r < 0) {
                respond_errno(rq, r, err);
                return;
        }
        struct run_info ri;
        struct query_limits lim = limits(rq);
        if (query_run(api_of(rq)->store, &lim, id, &ri) < 0) {
                respond_error(rq, 500, "internal", "run %lld registered but cannot be read back", (long long)id);
                return;
        }
        overlay_live(rq, &ri);
        json_object *o = run_with_gauges(rq, &ri);
        run_add_verdicts(rq, &ri, o);
        respond_json(rq, 201, o);
        run_info_done(&ri);
}

void h_run_delete(struct request *rq, const char *const *parts, size_t nparts) {
        struct run_info ri;
        if (!check_args(rq, NULL) || !load_run(rq, parts[2], &ri))
                return;
        if (!caller_known(rq)) {
                run_info_done(&ri);
                return;
        }
        char err[256] = "";
        int r = api_of(rq)->manager.ops->unregister_run(
                api_of(rq)->manager.userdata, ri.id,
                &(struct caller){ .is_root = rq->caller_root, .uid = rq->caller_uid }, err, sizeof err);
        int64_t id = ri.id;
        run_info_done(&ri);
        if (r < 0) {
                respond_errno(rq, r, err);
                return;
        }
        struct query_limits lim = limits(rq);
        if (query_run(api_of(rq)->store, &lim, id, &ri) < 0) {
                respond_error(rq, 500, "internal", "run %lld unregistered but cannot be read back", (long long)id);
                return;
        }
        respond_json(rq, 200, run_with_gauges(rq, &ri));
        run_info_done(&ri);
}

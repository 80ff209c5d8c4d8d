/* SPDX-License-Identifier: MIT */
/* /v1/runs: list, register, one run, unregister; /v1/leaks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http/handlers.h"
#include "http/render.h"
#include "http/tag-labels.h"
#include "json-util.h"

/* GET /v1/runs is read, rendered and written in pieces of this many runs,
 * and a tick that comes due runs between pieces: 4 000 runs are 1.7 MB of
 * JSON and a query of 5 to 20 ms, which would make a tick that late. */
#define RUNS_PER_PIECE 32

/* The runs of f in id order, a page of the store at a time (each a query
 * from the last id written: a run registered meanwhile is listed, one that
 * ended shows as it was stored when its page was read), each run rendered,
 * written to out and freed, at most lim.max_rows of them. */
static int write_runs(struct request *rq, struct runs_filter *f, FILE *out, bool *ret_truncated) {
        const struct query_limits all = limits(rq);
        unsigned written = 0;
        bool more = true;
        while (more && written < all.max_rows) {
                struct query_limits lim = all;
                lim.max_rows = all.max_rows - written < RUNS_PER_PIECE ? all.max_rows - written : RUNS_PER_PIECE;
                struct run_info *v = NULL;
                size_t n = 0;
                if (written > 0)
                        api_yield(api_of(rq));
                int r = query_runs(api_of(rq)->store, &lim, f, &v, &n, &more);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++) {
                        overlay_live(rq, &v[i]);
                        _cleanup_json_ json_object *o = run_with_latest(rq, &v[i]);
                        /* the verdict, without its history (GET /v1/runs/ID has it) */
                        json_object_object_add(o, "leak", run_leak(rq, &v[i], false));
                        if (written++ > 0)
                                fputc(',', out);
                        fputs(json_to_string(o), out);
                }
                if (n > 0)
                        f->after_id = v[n - 1].id;
                run_infos_free(v, n);
                more = more && n > 0;
        }
        *ret_truncated = more;
        return 0;
}

void h_runs_list(struct request *rq, const char *const *parts, size_t nparts) {
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
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        if (!out) {
                respond_errno(rq, -ENOMEM, "out of memory");
                return;
        }
        bool truncated = false;
        fputs("{\"runs\":[", out);
        int r = write_runs(rq, &f, out, &truncated);
        fprintf(out, "],\"truncated\":%s}\n", truncated ? "true" : "false");
        if (fclose(out) < 0 || !text)
                r = r < 0 ? r : -ENOMEM;
        if (r < 0) {
                free(text);
                respond_query_error(rq, r); /* 503 for -ENOMEM */
                return;
        }
        respond_json_text(rq, 200, text, len);
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
        }
        return true;
}

void h_runs_post(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const fields[] = { "pid", "name", "interval", "children", "tags", "discover", NULL };
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
        respond_json(rq, 201, run_with_latest(rq, &ri));
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
        respond_json(rq, 200, run_with_latest(rq, &ri));
        run_info_done(&ri);
}

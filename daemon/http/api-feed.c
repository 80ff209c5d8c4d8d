/* SPDX-License-Identifier: MIT */
/* What clients push over HTTP: observations and marks. */
#include <math.h>
#include <string.h>

#include "http/handlers.h"
#include "json-util.h"

/* The caller may feed a run: root, or the run's owner. */
static bool may_feed(struct request *rq, const struct run_ref *r) {
        if (!caller_known(rq))
                return false;
        if (!rq->caller_root && (!r->has_uid || r->uid != rq->caller_uid)) {
                respond_error(rq, 403, "forbidden", "run %lld is not yours", (long long)r->id);
                return false;
        }
        return true;
}

#define MAX_OBSERVATIONS 10000

struct observation {
        enum op_kind kind;
        const char *op, *category;
        double value;
        char known_category[65];
        /* categories are 1-64 bytes */ /* the run's category of op, where category points to it */
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
                if (kinds != 1 || !ops_value_valid(v[i].kind, v[i].value, 1.0))
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

/* By op, then in the body's order. */
static int by_op(const void *a, const void *b) {
        const struct observation *const *x = a, *const *y = b;
        int c = strcmp((*x)->op, (*y)->op);
        return c != 0 ? c : *x < *y ? -1 : *x > *y;
}

/* An op keeps the category of its first observation (see ops_observe()):
 * an item naming another, against the run or an earlier item, is a 409 and
 * nothing is taken. Gauges have no category. */
static bool check_categories(struct request *rq, const struct run_ref *r, struct observation *v, size_t n) {
        const struct manager_link *m = &api_of(rq)->manager;
        _cleanup_free_ struct observation **order = calloc(n, sizeof *order);
        size_t k = 0;
        if (!order) {
                respond_error(rq, 503, "unavailable", "out of memory");
                return false;
        }
        for (size_t i = 0; i < n; i++)
                if (v[i].kind != OP_GAUGE)
                        order[k++] = &v[i];
        sort_array(order, k, sizeof *order, by_op);
        for (size_t i = 0; i < k; i++) {
                const char *have = NULL;
                bool known = i > 0 && streq(order[i - 1]->op, order[i]->op);
                if (known)
                        have = order[i - 1]->category; /* the group's, passed on below */
                else {
                        int q = m->ops->op_category(m->userdata, r->id, order[i]->op, order[i]->known_category,
                                                    sizeof order[i]->known_category);
                        known = q >= 0;
                        have = q > 0 ? order[i]->known_category : NULL;
                }
                if (!known || !order[i]->category)
                        order[i]->category = known ? have : order[i]->category;
                else if (!have || !streq(have, order[i]->category)) {
                        respond_error(rq, 409, "conflict",
                                      "observation %zu: op '%s' of run %lld is in %s%s%s, not '%s': an op keeps the "
                                      "category of its first observation (name another op for another category)",
                                      (size_t)(order[i] - v), order[i]->op, (long long)r->id,
                                      have ? "category '" : "no category", have ? have : "", have ? "'" : "",
                                      order[i]->category);
                        return false;
                }
        }
        return true;
}

static void take_observations(struct request *rq, const struct run_ref *r, bool say_run) {
        _cleanup_json_ json_object *body = parse_body_any(rq);
        struct observation *v = NULL;
        size_t n = 0;
        if (!body || !parse_observations(rq, body, &v, &n))
                return;
        if (!check_categories(rq, r, v, n)) {
                free(v);
                return;
        }
        size_t accepted = 0;
        for (size_t i = 0; i < n; i++)
                if (api_of(rq)->manager.ops->observe(api_of(rq)->manager.userdata, r->id, v[i].kind, v[i].op,
                                                     strlen(v[i].op), v[i].category,
                                                     v[i].category ? strlen(v[i].category) : 0, v[i].value, 1.0) == 0)
                        accepted++;
        free(v);
        json_object *root = json_object_new_object();
        json_add_u64(root, "accepted", true, accepted);
        if (say_run)
                json_add_i64(root, "run", true, r->id);
        respond_json(rq, 202, root);
}

/* The running run of idtext; false: answered (400, 404, or 409 for a run
 * that ended). */
static bool running_run(struct request *rq, const char *idtext, struct run_ref *ret) {
        int64_t id;
        if (!parse_id(rq, idtext, &id))
                return false;
        if (api_of(rq)->manager.ops->find_run(api_of(rq)->manager.userdata, id, ret) < 0) {
                struct run_info ri;
                if (load_run(rq, idtext, &ri)) { /* exists, but ended */
                        respond_error(rq, 409, "conflict", "run %lld is %s", (long long)id,
                                      run_state_to_string(ri.state));
                        run_info_done(&ri);
                }
                return false;
        }
        return true;
}

void h_run_observations(struct request *rq, const char *const *parts, size_t nparts) {
        struct run_ref r;
        if (check_args(rq, NULL) && running_run(rq, parts[2], &r) && may_feed(rq, &r))
                take_observations(rq, &r, false);
}

/* No id: the caller's own run, or its nearest registered ancestor's. */
void h_observations(struct request *rq, const char *const *parts, size_t nparts) {
        if (!check_args(rq, NULL) || !caller_known(rq))
                return;
        if (rq->caller_pid <= 0) {
                respond_error(rq, 400, "bad_request",
                              "no calling process to find the run of: post to /v1/runs/ID/observations");
                return;
        }
        struct run_ref r;
        if (api_of(rq)->manager.ops->run_for_pid(api_of(rq)->manager.userdata, rq->caller_pid, &r) < 0) {
                respond_error(rq, 404, "not_found", "no registered run for process %d or its ancestors",
                              (int)rq->caller_pid);
                return;
        }
        if (may_feed(rq, &r))
                take_observations(rq, &r, true);
}

void h_run_marks_post(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const fields[] = { "label", NULL };
        struct run_ref r;
        if (!check_args(rq, NULL) || !running_run(rq, parts[2], &r) || !may_feed(rq, &r))
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
        int q = api_of(rq)->manager.ops->mark(api_of(rq)->manager.userdata, r.id, label, &ts);
        if (q < 0) {
                respond_error(rq, 500, "internal", "database error");
                return;
        }
        json_object *root = json_object_new_object();
        json_add_i64(root, "run", true, r.id);
        json_add_string(root, "label", label);
        json_add_i64(root, "ts", true, ts);
        respond_json(rq, 201, root);
}

/* POST /v1/runs/ID/samples: a sample now (mlmonctl run asks for one as
 * soon as its job has exec'ed: a job shorter than the interval is then
 * sampled as itself, not only as the stub that waited to exec). */
void h_run_sample_post(struct request *rq, const char *const *parts, size_t nparts) {
        struct run_ref r;
        if (!check_args(rq, NULL) || !running_run(rq, parts[2], &r) || !caller_known(rq))
                return;
        const struct caller who = { .is_root = rq->caller_root, .uid = rq->caller_uid };
        int64_t ts;
        int q = api_of(rq)->manager.ops->sample_now(api_of(rq)->manager.userdata, r.id, &who, &ts);
        if (q == -EPERM) {
                respond_error(rq, 403, "forbidden", "run %lld is not yours", (long long)r.id);
                return;
        }
        if (q == -EALREADY) {
                respond_error(rq, 409, "conflict", "run %lld is not running", (long long)r.id);
                return;
        }
        if (q < 0) {
                respond_error(rq, 500, "internal", "database error");
                return;
        }
        json_object *root = json_object_new_object();
        json_add_i64(root, "run", true, r.id);
        json_add_i64(root, "ts", true, ts);
        respond_json(rq, 201, root);
}

/* A non-negative finite number field of o, or false (answered). */
static bool number_field(struct request *rq, json_object *o, const char *key, double max, double *ret) {
        json_object *x;
        if (!json_object_object_get_ex(o, key, &x) ||
            !(json_object_is_type(x, json_type_double) || json_object_is_type(x, json_type_int)) ||
            !(json_object_get_double(x) >= 0 && json_object_get_double(x) <= max)) {
                respond_error(rq, 400, "bad_request", "%s: a number from 0 to %g is required", key, max);
                return false;
        }
        *ret = json_object_get_double(x);
        return true;
}

/* POST /v1/runs/ID/exit {"rusage":{"max_rss_bytes","user_time_s","system_time_s"},
 * "exit_code"|"exit_signal"}: what the parent of the run's process saw when
 * it reaped it (mlmonctl run's wait4()). */
void h_run_exit_post(struct request *rq, const char *const *parts, size_t nparts) {
        static const char *const fields[] = { "rusage", "exit_code", "exit_signal", NULL };
        static const char *const rusage_fields[] = { "max_rss_bytes", "user_time_s", "system_time_s", NULL };
        int64_t id;
        if (!check_args(rq, NULL) || !parse_id(rq, parts[2], &id) || !caller_known(rq))
                return;
        _cleanup_json_ json_object *body = parse_body(rq);
        if (!body || !check_unknown_keys(rq, body, fields))
                return;
        struct exit_report e = {};
        json_object *ru;
        int x = parse_exit_fields(rq, body, &e.wait_status);
        if (x < 0)
                return;
        e.has_exit = x == 1;
        if (json_object_object_get_ex(body, "rusage", &ru) && ru) {
                double rss;
                if (!json_object_is_type(ru, json_type_object) || !check_unknown_keys(rq, ru, rusage_fields)) {
                        if (rq->status == 0)
                                respond_error(rq, 400, "bad_request", "rusage: must be an object");
                        return;
                }
                /* a pebibyte of memory, a year of CPU: past that it is no rusage */
                if (!number_field(rq, ru, "max_rss_bytes", 0x1p50, &rss) ||
                    !number_field(rq, ru, "user_time_s", 3.2e7, &e.user_time_s) ||
                    !number_field(rq, ru, "system_time_s", 3.2e7, &e.system_time_s))
                        return;
                e.has_rusage = true;
                e.max_rss_bytes = (uint64_t)rss;
        }
        const struct caller who = { .is_root = rq->caller_root, .uid = rq->caller_uid };
        int q = api_of(rq)->manager.ops->exited(api_of(rq)->manager.userdata, id, &who, &e);
        if (q == -ENOENT)
                respond_error(rq, 404, "not_found", "no run %lld", (long long)id);
        else if (q == -EPERM)
                respond_error(rq, 403, "forbidden", "run %lld is not yours", (long long)id);
        else if (q == -EBUSY)
                respond_error(rq, 409, "conflict", "the process of run %lld has not been reaped", (long long)id);
        else if (q < 0)
                respond_query_error(rq, q);
        else {
                json_object *root = json_object_new_object();
                json_add_i64(root, "run", true, id);
                respond_json(rq, 200, root);
        }
}

/* SPDX-License-Identifier: MIT */
/* The in-memory op tables: slices, rotation, merge, gauges, limits. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "analyze/ops.h"
#include "tap.h"

static const struct op_agg *find(const struct op_aggs *a, const char *op) {
        for (size_t i = 0; i < a->n; i++)
                if (strcmp(a->v[i].op, op) == 0)
                        return &a->v[i];
        return NULL;
}

static void test_slices(void) {
        struct op_table t = {};
        const int64_t t0 = 1700000000000; /* a slice boundary */
        /* 3 timings in slice 0, 2 in slice 1, a counter in both */
        CHECK_EQ_INT(ops_observe(&t, "infer", 5, "model", 5, OP_TIMING, 10, 1, t0 + 10), 0);
        CHECK_EQ_INT(ops_observe(&t, "infer", 5, NULL, 0, OP_TIMING, 20, 1, t0 + 500), 0);
        CHECK_EQ_INT(ops_observe(&t, "infer", 5, NULL, 0, OP_TIMING, 30, 1, t0 + 999), 0);
        /* an op keeps its first category: another is refused, nothing counted */
        CHECK_EQ_INT(ops_observe(&t, "infer", 5, "other", 5, OP_TIMING, 99, 1, t0 + 999), -EEXIST);
        CHECK_EQ_INT(ops_observe(&t, "req", 3, NULL, 0, OP_COUNTER, 0, 1, t0 + 99), 0);
        CHECK_EQ_INT(ops_observe(&t, "req", 3, "net", 3, OP_COUNTER, 1, 1, t0 + 99), -EEXIST);
        CHECK_EQ_INT(ops_observe(&t, "req", 3, NULL, 0, OP_COUNTER, 3, 0.5, t0 + 100), 0);
        CHECK_EQ_INT(t.n_done, 0);
        CHECK_EQ_INT(ops_observe(&t, "infer", 5, NULL, 0, OP_TIMING, 40, 1, t0 + 1000), 0);
        /* the first slice of infer closed when its op saw the next slice */
        CHECK_EQ_INT(t.n_done, 1);
        CHECK_EQ_INT(t.done[0].h.count, 3);
        CHECK(t.done[0].category && strcmp(t.done[0].category, "model") == 0);
        CHECK_EQ_INT(ops_observe(&t, "infer", 5, NULL, 0, OP_TIMING, 50, 0.25, t0 + 1500), 0); /* weight 4 */
        CHECK_EQ_INT(ops_rotate(&t, t0 + 1999), 0);
        CHECK_EQ_INT(t.n_done, 2); /* req's slice 0 closed too; infer's slice 1 still open */
        CHECK_EQ_INT(ops_rotate(&t, t0 + 2000), 0);
        CHECK_EQ_INT(t.n_done, 3);

        /* the aggregate over both slices, and over the first only */
        struct op_aggs a = {};
        CHECK_EQ_INT(op_aggs_add_live(&a, &t, t0, t0 + 2000, NULL), 0);
        const struct op_agg *infer = find(&a, "infer"), *req = find(&a, "req");
        CHECK(infer && req);
        if (infer && req) {
                CHECK_EQ_INT(infer->h.count, 3 + 1 + 4);
                CHECK(infer->count == 8);
                CHECK(fabs(infer->h.sum - (10 + 20 + 30 + 40 + 4 * 50)) < 1e-9);
                CHECK(infer->h.min == 10 && infer->h.max == 50);
                CHECK(req->count == 6); /* 3 at rate 0.5 */
                CHECK_EQ_INT(req->h.count, 0);
                CHECK(infer->category && strcmp(infer->category, "model") == 0);
        }
        op_aggs_done(&a);
        CHECK_EQ_INT(op_aggs_add_live(&a, &t, t0, t0 + 1000, "infer"), 0);
        CHECK_EQ_INT(a.n, 1);
        if (a.n == 1)
                CHECK_EQ_INT(a.v[0].h.count, 3);
        op_aggs_done(&a);

        /* each op's latest timing or count, through the slices that closed;
         * a refused observation is none */
        CHECK(ops_last_ms(&t, "infer") == t0 + 1500);
        CHECK(ops_last_ms(&t, "req") == t0 + 100);
        CHECK(ops_last_ms(&t, NULL) == t0 + 1500);
        CHECK(ops_last_ms(&t, "nope") == 0);

        ops_clear_done(&t);
        CHECK_EQ_INT(t.n_done, 0);
        ops_table_done(&t);
}

/* A mark cuts the slices where it is made: a span from it holds exactly
 * the timings after it, the second it fell in included. */
static void test_cut_at_mark(void) {
        struct op_table t = {};
        const int64_t t0 = 1700000000000, mark = t0 + 500;
        for (int i = 0; i < 10; i++) /* 5 before the mark, 5 after it */
                CHECK_EQ_INT(ops_observe(&t, "step", 4, NULL, 0, OP_TIMING, 1 + i, 1, t0 + 100 * i + 50), 0);
        CHECK_EQ_INT(t.n_done, 0);
        /* the same again, with the mark between the fifth and the sixth */
        struct op_table u = {};
        for (int i = 0; i < 10; i++) {
                if (i == 5)
                        CHECK_EQ_INT(ops_cut(&u, mark), 0);
                CHECK_EQ_INT(ops_observe(&u, "step", 4, NULL, 0, OP_TIMING, 1 + i, 1, t0 + 100 * i + 50), 0);
        }
        CHECK_EQ_INT(u.n_done, 1); /* the part before the mark */
        CHECK(u.done[0].ts == t0 && u.done[0].h.count == 5);
        CHECK(u.open[0].ts == mark && u.open[0].h.count == 5);
        struct op_aggs a = {};
        CHECK_EQ_INT(op_aggs_add_live(&a, &u, mark, t0 + 1000, NULL), 0);
        CHECK(a.n == 1 && a.v[0].h.count == 5 && a.v[0].h.min == 6);
        op_aggs_done(&a);
        /* the next second closes the cut slice and starts an aligned one */
        CHECK_EQ_INT(ops_observe(&u, "step", 4, NULL, 0, OP_TIMING, 11, 1, t0 + 1200), 0);
        CHECK(u.n_done == 2 && u.done[1].ts == mark && u.done[1].h.count == 5);
        CHECK(u.open[0].ts == t0 + 1000);
        /* an op first seen after the mark, in its second, starts there too */
        CHECK_EQ_INT(ops_cut(&t, mark), 0);
        CHECK_EQ_INT(t.n_done, 1); /* t's open slice, cut */
        CHECK_EQ_INT(ops_observe(&t, "new", 3, NULL, 0, OP_TIMING, 7, 1, mark + 100), 0);
        CHECK(t.n_open == 2 && t.open[1].ts == mark);
        /* a cut at an open slice's own start changes nothing */
        CHECK_EQ_INT(ops_cut(&u, t0 + 1000), 0);
        CHECK_EQ_INT(u.n_done, 2);
        CHECK_EQ_INT(ops_rotate(&u, t0 + 2000), 0);
        CHECK(u.n_done == 3 && u.done[2].ts == t0 + 1000);
        ops_table_done(&t);
        ops_table_done(&u);
}

static void test_bad_and_limits(void) {
        struct op_table t = {};
        CHECK_EQ_INT(ops_observe(&t, "a", 1, NULL, 0, OP_TIMING, -1, 1, 0), -EINVAL);
        CHECK_EQ_INT(ops_observe(&t, "a", 1, NULL, 0, OP_TIMING, NAN, 1, 0), -EINVAL);
        CHECK_EQ_INT(ops_observe(&t, "a", 1, NULL, 0, OP_COUNTER, 1, 0, 0), -EINVAL);
        CHECK_EQ_INT(ops_observe(&t, "a", 1, NULL, 0, OP_COUNTER, 1, 1.5, 0), -EINVAL);
        CHECK_EQ_INT(ops_observe(&t, "", 0, NULL, 0, OP_COUNTER, 1, 1, 0), -EINVAL);
        char name[16];
        for (int i = 0; i < OPS_MAX_PER_RUN; i++) {
                snprintf(name, sizeof name, "op%d", i);
                CHECK_EQ_INT(ops_observe(&t, name, strlen(name), NULL, 0, OP_COUNTER, 1, 1, 0), 0);
        }
        CHECK_EQ_INT(ops_observe(&t, "one-too-many", 12, NULL, 0, OP_COUNTER, 1, 1, 0), -ENOSPC);
        CHECK_EQ_INT(t.dropped, 1);
        /* a known op still works */
        CHECK_EQ_INT(ops_observe(&t, "op7", 3, NULL, 0, OP_COUNTER, 1, 1, 0), 0);
        ops_table_done(&t);
}

static void test_gauges(void) {
        struct op_table t = {};
        CHECK_EQ_INT(ops_observe(&t, "q", 1, NULL, 0, OP_GAUGE, 5, 1, 1000), 0);
        CHECK_EQ_INT(ops_observe(&t, "q", 1, NULL, 0, OP_GAUGE_DELTA, 2, 1, 2000), 0);
        CHECK_EQ_INT(ops_observe(&t, "q", 1, NULL, 0, OP_GAUGE_DELTA, -10, 1, 3000), 0);
        CHECK_EQ_INT(ops_observe(&t, "fresh", 5, NULL, 0, OP_GAUGE_DELTA, 4, 1, 3000), 0);
        CHECK_EQ_INT(t.n_gauges, 4);
        if (t.n_gauges == 4) {
                CHECK(t.gauges[0].value == 5 && t.gauges[1].value == 7 && t.gauges[2].value == -3);
                CHECK(t.gauges[3].value == 4); /* a delta on a new gauge starts from 0 */
                CHECK_EQ_INT(t.gauges[1].ts, 2000);
        }
        ops_clear_done(&t);
        /* the last values survive storing, for the next delta */
        CHECK_EQ_INT(ops_observe(&t, "q", 1, NULL, 0, OP_GAUGE_DELTA, 1, 1, 4000), 0);
        CHECK(t.n_gauges == 1 && t.gauges[0].value == -2);
        ops_table_done(&t);

        /* values read back after a restart: the latest, not stored again */
        CHECK_EQ_INT(ops_gauge_restore(&t, "q", 12, 5000), 0);
        CHECK_EQ_INT(ops_gauge_restore(&t, "q", 99, 4000), 0); /* older: ignored */
        CHECK(t.n_gauges == 0 && t.n_gauge_last == 1 && t.gauge_last[0].value == 12 && t.gauge_last[0].ts == 5000);
        CHECK_EQ_INT(ops_observe(&t, "q", 1, NULL, 0, OP_GAUGE_DELTA, 5, 1, 6000), 0);
        CHECK(t.n_gauges == 1 && t.gauges[0].value == 17);
        ops_table_done(&t);
}

/* The op that cost the most time: by total time among the timed ops, not by
 * count (many short waits against fewer long steps); counters only when no
 * op was timed; ties by name. */
static void test_top(void) {
        struct op_table t = {};
        const int64_t t0 = 1700000000000;
        struct op_aggs a = {};
        CHECK(op_aggs_top(&a) == NULL);
        CHECK_EQ_INT(ops_observe(&t, "req", 3, NULL, 0, OP_COUNTER, 500, 1, t0), 0);
        CHECK_EQ_INT(op_aggs_add_live(&a, &t, t0, t0 + 1000, NULL), 0);
        CHECK(op_aggs_top(&a) && strcmp(op_aggs_top(&a)->op, "req") == 0);
        op_aggs_done(&a);
        for (int i = 0; i < 100; i++)
                CHECK_EQ_INT(ops_observe(&t, "data_wait", 9, NULL, 0, OP_TIMING, 1, 1, t0 + i), 0);
        for (int i = 0; i < 10; i++)
                CHECK_EQ_INT(ops_observe(&t, "step", 4, NULL, 0, OP_TIMING, 90, 1, t0 + i), 0);
        CHECK_EQ_INT(op_aggs_add_live(&a, &t, t0, t0 + 1000, NULL), 0);
        CHECK(op_aggs_top(&a) && strcmp(op_aggs_top(&a)->op, "step") == 0);
        op_aggs_done(&a);
        /* as long as step in all: the first name */
        CHECK_EQ_INT(ops_observe(&t, "backward", 8, NULL, 0, OP_TIMING, 900, 1, t0 + 5), 0);
        CHECK_EQ_INT(op_aggs_add_live(&a, &t, t0, t0 + 1000, NULL), 0);
        CHECK(op_aggs_top(&a) && strcmp(op_aggs_top(&a)->op, "backward") == 0);
        op_aggs_done(&a);
        ops_table_done(&t);
}

int main(void) {
        test_slices();
        test_top();
        test_cut_at_mark();
        test_bad_and_limits();
        test_gauges();
        TEST_DONE();
}

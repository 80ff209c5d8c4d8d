/* SPDX-License-Identifier: MIT */
/* The goodput ledger: the split of a span on loops whose answer is known,
 * its parts adding up to the span whatever goes in, the ideal step, and
 * what ops and marks are for. */
#include <math.h>

#include "analyze/goodput.h"
#include "util.h"
#include "tap.h"
#include "xorshift.h"

static const struct goodput_params defaults = { .idle_k = 3, .parts_in_step = false };

static double total(const struct goodput_stream *s) {
        double t = 0;
        for (int k = 0; k < _GOODPUT_KIND_MAX; k++)
                t += s->total_ms[k];
        return t;
}

/* A loop of n steps of step_ms, each after a data wait of data_ms, from
 * t0 on: what it reports per slice (a timing belongs to the slice it ends
 * in). Adds to slices v[0..nslices) starting at slice_ts. */
static void loop(struct goodput_slice *v, size_t nslices, int64_t slice_ts, double t0, size_t n, double data_ms,
                 double step_ms) {
        double t = t0;
        for (size_t i = 0; i < n; i++) {
                t += data_ms;
                size_t k = (size_t)((int64_t)t - slice_ts) / GOODPUT_SLICE_MS;
                if (data_ms > 0 && k < nslices)
                        v[k].data_ms += data_ms;
                t += step_ms;
                k = (size_t)((int64_t)t - slice_ts) / GOODPUT_SLICE_MS;
                if (k < nslices) {
                        v[k].step_ms += step_ms;
                        v[k].steps += 1;
                }
        }
}

static void feed(struct goodput_stream *s, struct goodput_slice *v, size_t n, int64_t slice_ts) {
        for (size_t i = 0; i < n; i++) {
                v[i].ts_ms = slice_ts + (int64_t)i * GOODPUT_SLICE_MS;
                goodput_stream_add(s, &v[i]);
        }
        goodput_stream_finish(s);
}

/* 10 s: the first step ends at 1.1 s (100 ms), then 20 ms data + 100 ms
 * steps back to back until 10 s. */
static void test_side_by_side(void) {
        struct goodput_slice v[10] = { 0 };
        v[1].step_ms = 100;
        v[1].steps = 1;
        loop(v, 10, 0, 1100, 74, 20, 100); /* 74 x 120 ms = 8.88 s: ends at 9.98 s */
        struct goodput_stream s;
        goodput_stream_init(&s, &defaults, 0, 10000, 1100, 100, INT64_MAX);
        goodput_stream_set_typical(&s, 100);
        feed(&s, v, 10, 0);
        CHECK_NEAR(total(&s), 10000);
        CHECK_NEAR(s.total_ms[GOODPUT_STARTUP], 1100);
        CHECK_NEAR(s.total_ms[GOODPUT_STEP], 7400);
        CHECK_NEAR(s.total_ms[GOODPUT_DATA], 1480);
        CHECK_NEAR(s.total_ms[GOODPUT_IDLE], 0);
        CHECK_NEAR(s.total_ms[GOODPUT_OTHER], 20);
        CHECK_NEAR(s.steps, 74);
        CHECK_NEAR(s.unplaced_ms, 0);
}

/* The same loop with the data wait timed inside the step op (each step
 * 120 ms, 20 of them data): with parts_in_step the step is what is left. */
static void test_nested(void) {
        struct goodput_slice v[10] = { 0 };
        loop(v, 10, 0, 0, 80, 0, 120); /* 9.6 s of steps */
        for (size_t i = 0; i < 10; i++)
                v[i].data_ms = v[i].steps * 20;
        struct goodput_params p = defaults;
        p.parts_in_step = true;
        struct goodput_stream s;
        goodput_stream_init(&s, &p, 0, 10000, INT64_MIN, 0, INT64_MAX);
        goodput_stream_set_typical(&s, 120);
        feed(&s, v, 10, 0);
        CHECK_NEAR(total(&s), 10000);
        CHECK_NEAR(s.total_ms[GOODPUT_STEP], 8000);
        CHECK_NEAR(s.total_ms[GOODPUT_DATA], 1600);
        CHECK_NEAR(s.total_ms[GOODPUT_IDLE], 0);
        CHECK_NEAR(s.total_ms[GOODPUT_OTHER], 400);
        /* without it, steps back to back still add up: the data wait takes
         * its part and the step what the slice has left */
        goodput_stream_init(&s, &defaults, 0, 10000, INT64_MIN, 0, INT64_MAX);
        for (size_t i = 0; i < 10; i++)
                v[i].ts_ms = 0;
        feed(&s, v, 10, 0);
        CHECK_NEAR(total(&s), 10000);
        CHECK_NEAR(s.total_ms[GOODPUT_DATA], 1600);
        CHECK(s.total_ms[GOODPUT_STEP] > 7990 && s.total_ms[GOODPUT_STEP] < 8410);
}

/* 100 ms steps until 4 s (the last one ends in slice 4), nothing for 4 s,
 * steps again from 9 s: slices 5 to 8 are idle; with 2 s steps (k = 3: gaps
 * of 6 s) they are not. */
static void test_idle(void) {
        struct goodput_slice v[12] = { 0 };
        loop(v, 12, 0, 0, 40, 0, 100);
        loop(v, 12, 0, 9000, 30, 0, 100);
        struct goodput_stream s;
        goodput_stream_init(&s, &defaults, 0, 12000, INT64_MIN, 0, INT64_MAX);
        goodput_stream_set_typical(&s, 100);
        feed(&s, v, 12, 0);
        CHECK_NEAR(total(&s), 12000);
        CHECK_NEAR(s.total_ms[GOODPUT_IDLE], 4000);
        CHECK_NEAR(s.total_ms[GOODPUT_STEP], 6900); /* the step ending at 12 s is the next slice's */
        goodput_stream_init(&s, &defaults, 0, 12000, INT64_MIN, 0, INT64_MAX);
        goodput_stream_set_typical(&s, 2000);
        for (size_t i = 0; i < 12; i++)
                v[i].ts_ms = 0;
        feed(&s, v, 12, 0);
        CHECK_NEAR(s.total_ms[GOODPUT_IDLE], 0);
        CHECK_NEAR(s.total_ms[GOODPUT_OTHER], 5100);
}

/* A 30 s checkpoint timed as one op claims the 30 slices before its end
 * (11 to 40), which are then not idle; a mark phase is an exact interval. */
static void test_checkpoint(void) {
        struct goodput_slice v[60] = { 0 };
        loop(v, 60, 0, 0, 100, 0, 100);     /* 0 .. 10 s */
        v[40].checkpoint_ms = 30000;        /* ends in slice 40: 11 .. 41 s */
        loop(v, 60, 0, 41000, 190, 0, 100); /* 41 .. 60 s */
        struct goodput_stream s;
        goodput_stream_init(&s, &defaults, 0, 60000, INT64_MIN, 0, INT64_MAX);
        goodput_stream_set_typical(&s, 100);
        feed(&s, v, 60, 0);
        CHECK_NEAR(total(&s), 60000);
        CHECK_NEAR(s.total_ms[GOODPUT_CHECKPOINT], 30000);
        CHECK_NEAR(s.total_ms[GOODPUT_IDLE], 0);
        CHECK_NEAR(s.total_ms[GOODPUT_STEP], 28900); /* the step ending at 60 s is past the span */

        struct goodput_slice w[20] = { 0 };
        loop(w, 20, 0, 0, 50, 0, 100);
        loop(w, 20, 0, 8000, 120, 0, 100);
        goodput_stream_init(&s, &defaults, 0, 20000, INT64_MIN, 0, INT64_MAX);
        goodput_stream_set_typical(&s, 100);
        goodput_stream_phase(&s, 5300, GOODPUT_PHASE_CHECKPOINT);
        goodput_stream_phase(&s, 7800, GOODPUT_PHASE_NONE);
        feed(&s, w, 20, 0);
        CHECK_NEAR(total(&s), 20000);
        CHECK_NEAR(s.total_ms[GOODPUT_CHECKPOINT], 2500);
        CHECK_NEAR(s.total_ms[GOODPUT_IDLE], 0);
        CHECK_NEAR(s.total_ms[GOODPUT_OTHER], 600); /* 5.1 .. 5.3 beside the step ending at 5 s, 7.8 .. 8.0 */
}

/* A span that starts and ends inside slices; startup before it; an
 * attempt lost after 6.5 s. */
static void test_edges(void) {
        struct goodput_slice v[10] = { 0 };
        loop(v, 10, 0, 0, 100, 0, 100);
        struct goodput_stream s;
        goodput_stream_init(&s, &defaults, 1250, 8600, 400, 100, 6500);
        goodput_stream_set_typical(&s, 100);
        feed(&s, v, 10, 0);
        CHECK_NEAR(total(&s), 8600 - 1250);
        CHECK_NEAR(s.total_ms[GOODPUT_STARTUP], 0);
        CHECK_NEAR(s.total_ms[GOODPUT_LOST], 2100);
        CHECK_NEAR(s.steps, 50); /* slices 1 .. 5 */
        CHECK_NEAR(s.total_ms[GOODPUT_STEP], 750 + 4500);

        /* a running run's stream: open, no first step yet */
        goodput_stream_init(&s, &defaults, 500, INT64_MAX, INT64_MAX, 0, INT64_MAX);
        goodput_stream_advance(&s, 3000);
        goodput_stream_first_step(&s, 3400, 900);
        struct goodput_slice x = { .ts_ms = 3000, .step_ms = 1000, .steps = 2 };
        goodput_stream_add(&s, &x);
        goodput_stream_finish(&s);
        CHECK_NEAR(s.total_ms[GOODPUT_STARTUP], 2900);
        CHECK_NEAR(s.total_ms[GOODPUT_STEP], 100);
        CHECK_NEAR(s.steps, 1);
        CHECK_NEAR(total(&s), 3500);
}

/* Whatever goes in (parallel timings, far too much, marks anywhere), the
 * parts add up to the span and none is negative. */
static void test_adds_up(void) {
        uint64_t seed = 42;
        for (int round = 0; round < 200; round++) {
                struct goodput_params p = { .idle_k = 1 + (double)(xorshift64s(&seed) % 5),
                                            .parts_in_step = xorshift64s(&seed) & 1 };
                int64_t from = (int64_t)(xorshift64s(&seed) % 5000),
                        until = from + 1 + (int64_t)(xorshift64s(&seed) % 400000);
                int64_t su = from + (int64_t)(xorshift64s(&seed) % 20000) - 10000;
                int64_t lost = xorshift64s(&seed) & 1 ? INT64_MAX : from + (int64_t)(xorshift64s(&seed) % 500000);
                struct goodput_stream s;
                goodput_stream_init(&s, &p, from, until, su, (double)(xorshift64s(&seed) % 3000), lost);
                goodput_stream_set_typical(&s, (double)(xorshift64s(&seed) % 5000));
                for (int64_t ts = 0; ts < until; ts += 1000 * (1 + (int64_t)(xorshift64s(&seed) % 3))) {
                        if (xorshift64s(&seed) % 7 == 0)
                                goodput_stream_phase(&s, ts + (int64_t)(xorshift64s(&seed) % 1000),
                                                     (enum goodput_phase)(xorshift64s(&seed) % 3));
                        struct goodput_slice in = {
                                .ts_ms = ts,
                                .step_ms = (double)(xorshift64s(&seed) % 3000),
                                .steps = (double)(xorshift64s(&seed) % 30),
                                .data_ms = (double)(xorshift64s(&seed) % 2000),
                                .checkpoint_ms = xorshift64s(&seed) % 50 == 0 ? 90000 : 0,
                                .eval_ms = (double)(xorshift64s(&seed) % 100),
                                .other_ms = (double)(xorshift64s(&seed) % 1500),
                        };
                        goodput_stream_add(&s, &in);
                }
                goodput_stream_finish(&s);
                CHECK_NEAR(total(&s), (double)(until - from));
                for (int k = 0; k < _GOODPUT_KIND_MAX; k++)
                        CHECK(s.total_ms[k] >= 0);
        }
}

static void test_ideal(void) {
        struct hist h;
        hist_init(&h);
        uint64_t n;
        CHECK(isnan(goodput_ideal_step_ms(&h, &n)));
        for (int i = 0; i < 100; i++)
                CHECK_EQ_INT(hist_add(&h, 95 + i % 11, 1), 0); /* 95 .. 105 ms */
        double all = h.sum / (double)h.count;
        CHECK_NEAR(goodput_ideal_step_ms(&h, &n), all); /* none beyond median + 3 MAD: exact */
        CHECK_U64(n, 100);
        CHECK_EQ_INT(hist_add(&h, 2000, 3), 0); /* stalls */
        double ideal = goodput_ideal_step_ms(&h, &n);
        CHECK(fabs(ideal - all) <= all * 0.003);
        CHECK_U64(n, 100);
        hist_done(&h);
}

static void test_rules(void) {
        const struct goodput_rules r = {
                .step_op = "train_step",
                .data_categories = "data, input*",
                .data_ops = "data_wait,dataloader",
                .checkpoint_categories = "checkpoint",
                .eval_categories = "eval",
                .checkpoint_marks = "checkpoint*,save*",
                .eval_marks = "eval*",
        };
        CHECK_EQ_INT(goodput_classify(&r, "train_step", "data"), GOODPUT_STEP);
        CHECK_EQ_INT(goodput_classify(&r, "step", NULL), GOODPUT_OTHER);
        CHECK_EQ_INT(goodput_classify(&r, "next_batch", "input_pipeline"), GOODPUT_DATA);
        CHECK_EQ_INT(goodput_classify(&r, "dataloader", NULL), GOODPUT_DATA);
        CHECK_EQ_INT(goodput_classify(&r, "save", "checkpoint"), GOODPUT_CHECKPOINT);
        CHECK_EQ_INT(goodput_classify(&r, "val", "eval"), GOODPUT_EVAL);
        CHECK_EQ_INT(goodput_mark_phase(&r, "checkpoint-start"), GOODPUT_PHASE_CHECKPOINT);
        CHECK_EQ_INT(goodput_mark_phase(&r, "checkpoint-end"), GOODPUT_PHASE_NONE);
        CHECK_EQ_INT(goodput_mark_phase(&r, "save model"), GOODPUT_PHASE_CHECKPOINT);
        CHECK_EQ_INT(goodput_mark_phase(&r, "eval done"), GOODPUT_PHASE_NONE);
        CHECK_EQ_INT(goodput_mark_phase(&r, "eval"), GOODPUT_PHASE_EVAL);
        CHECK_EQ_INT(goodput_mark_phase(&r, "warmup-done"), GOODPUT_PHASE_NONE);
        CHECK(!goodput_match_list("", "x"));
        CHECK(!goodput_match_list(" , ", "x"));
        CHECK(goodput_match_list("a, x ,b", "x"));
        CHECK(goodput_kind_name(GOODPUT_DATA) && streq(goodput_kind_name(GOODPUT_DATA), "data_wait"));
}

int main(void) {
        test_side_by_side();
        test_nested();
        test_idle();
        test_checkpoint();
        test_edges();
        test_adds_up();
        test_ideal();
        test_rules();
        return tap_failures ? 1 : 0;
}

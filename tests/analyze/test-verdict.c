/* SPDX-License-Identifier: MIT */
/* The verdicts beside the leak: input-bound, GPU held but idle, time to
 * OOM, each on inputs whose answer is known, and the sentence that says
 * why (or why it could not be reached). */
#include <string.h>

#include "analyze/leak.h"
#include "analyze/verdict.h"
#include "tap.h"
#include "util.h"

#define MIB 1048576.0
#define CHECK_HAS(text, part)                                               \
        do {                                                                \
                if (!strstr((text), (part)))                                \
                        TAP_FAIL("'%s' does not say '%s'", (text), (part)); \
        } while (0)

static void test_input_bound(void) {
        struct input_bound_params p;
        input_bound_params_default(&p);
        struct input_bound_verdict v;
        struct input_bound_in in = { .covered_s = 60,
                                     .data_ms = 15000,
                                     .step_ms = 30000,
                                     .steps = 300,
                                     .step_op = "step",
                                     .tree = true,
                                     .workers = 2,
                                     .has_workers_cpu = true,
                                     .workers_cpu_pct = 97,
                                     .has_gpu = true,
                                     .gpu_util_pct = 12 };
        input_bound_evaluate(&p, &in, &v);
        CHECK(v.evaluated && v.flagged);
        CHECK(v.share_pct > 33.3 && v.share_pct < 33.4);
        CHECK_HAS(v.reason, "input-bound: waiting for data took 33% of the step time over the last 1 min");
        CHECK_HAS(v.reason, "2 loader workers used 97% of a core each: saturated, add workers");
        CHECK_HAS(v.reason, "the GPU was 12% busy");

        in.workers_cpu_pct = 4;
        input_bound_evaluate(&p, &in, &v);
        CHECK_HAS(v.reason, "they wait too, for I/O or a slow source");
        in.workers = 0;
        in.has_workers_cpu = false;
        in.has_gpu = false;
        input_bound_evaluate(&p, &in, &v);
        CHECK_HAS(v.reason, "no loader workers");
        in.tree = false;
        input_bound_evaluate(&p, &in, &v);
        CHECK_HAS(v.reason, "--children");

        /* at the threshold it is; just below it is not */
        in.data_ms = 2000;
        in.step_ms = 8000;
        input_bound_evaluate(&p, &in, &v);
        CHECK(v.evaluated && v.flagged);
        in.data_ms = 1999.9;
        input_bound_evaluate(&p, &in, &v);
        CHECK(v.evaluated && !v.flagged);
        CHECK_HAS(v.reason, "not input-bound");
        /* the first seconds of a run: not yet */
        in.data_ms = 2000;
        in.covered_s = 29;
        input_bound_evaluate(&p, &in, &v);
        CHECK(!v.evaluated && !v.flagged);
        CHECK_HAS(v.reason, "not judged yet: 29 s of the 1 min window so far");
        in.covered_s = 60;

        /* one stall: over the window, but in one of its six parts only */
        double d[60] = { 0 }, s[60], n[60];
        for (int i = 0; i < 60; i++) {
                s[i] = 900;
                n[i] = 9;
                d[i] = 50;
        }
        d[30] = 25000; /* a 25 s wait once */
        struct input_bound_in w = { .covered_s = 60, .tree = true };
        input_bound_sum(&p, d, s, n, 60, false, &w);
        CHECK_EQ_INT(w.parts, 6);
        CHECK_EQ_INT(w.parts_over, 1);
        input_bound_evaluate(&p, &w, &v);
        CHECK(v.evaluated && !v.flagged && v.share_pct > 20);
        CHECK_HAS(v.reason, "but 5 of its 6 parts with steps were below 20%: a stall, not a steady wait");
        for (int i = 0; i < 60; i++)
                d[i] = 300; /* a steady 25 % */
        input_bound_sum(&p, d, s, n, 60, false, &w);
        input_bound_evaluate(&p, &w, &v);
        CHECK(v.flagged && w.parts_over == 6);
        input_bound_sum(&p, d, s, n, 60, true, &w); /* timed inside the steps: 300 of 900 */
        CHECK(w.step_ms == 60 * 600.0);

        /* not judged, and why */
        struct input_bound_in none = { .covered_s = 60, .data_ms = 100, .step_op = "train_step" };
        input_bound_evaluate(&p, &none, &v);
        CHECK(!v.evaluated && !v.flagged);
        CHECK_HAS(v.reason, "no timings of the step op 'train_step'");
        struct input_bound_in nodata = { .covered_s = 60, .step_ms = 50000, .steps = 500 };
        input_bound_evaluate(&p, &nodata, &v);
        CHECK(!v.evaluated);
        CHECK_HAS(v.reason, "no data wait timed");
        struct input_bound_in few = { .covered_s = 60, .data_ms = 5000, .step_ms = 5000, .steps = 3 };
        input_bound_evaluate(&p, &few, &v);
        CHECK(!v.evaluated);
        CHECK_HAS(v.reason, "3 steps");
        struct input_bound_in sleepy = { .covered_s = 60, .data_ms = 2000, .step_ms = 2000, .steps = 40 };
        input_bound_evaluate(&p, &sleepy, &v);
        CHECK(!v.evaluated);
        CHECK_HAS(v.reason, "less than 10%");
}

static void test_gpu_idle(void) {
        struct gpu_idle_params p;
        gpu_idle_params_default(&p);
        p.for_s = 60;
        struct gpu_idle_watch w = { 0 };
        struct gpu_idle_verdict v;
        struct gpu_idle_use u[2] = {
                { "0000:03:00.0", true, (uint64_t)(38.2 * 1024 * MIB), true, 0.3 },
                { "0000:04:00.0", true, (uint64_t)(200 * MIB), true, 0 }, /* too little to count */
        };
        int64_t t0 = 1000000;
        bool changed = false;
        for (int i = 0; i <= 60; i++)
                changed = gpu_idle_step(&w, &p, t0 + i * 1000, true, u, 2, &v) || changed;
        CHECK(changed && v.flagged && v.evaluated);
        CHECK(streq(v.device, "0000:03:00.0"));
        CHECK(v.since_ms == t0);
        CHECK_HAS(v.reason, "GPU held but idle: holds 38.2 GiB on GPU 0000:03:00.0, 0.3% busy for 1 min");
        /* one busy sample starts the clock again */
        u[0].util_pct = 60;
        CHECK(gpu_idle_step(&w, &p, t0 + 61000, true, u, 2, &v));
        CHECK(!v.flagged && v.evaluated);
        CHECK_HAS(v.reason, "60.0% busy");
        u[0].util_pct = 1;
        for (int i = 62; i < 100; i++)
                gpu_idle_step(&w, &p, t0 + i * 1000, true, u, 2, &v);
        CHECK(!v.flagged);
        CHECK_HAS(v.reason, "(idle once that lasts 1 min)");
        /* an unknown utilisation cannot be judged, and says so */
        u[0].has_util = false;
        gpu_idle_step(&w, &p, t0 + 200000, true, u, 1, &v);
        CHECK(!v.evaluated && !v.flagged);
        CHECK_HAS(v.reason, "utilisation is not known");
        gpu_idle_step(&w, &p, t0 + 201000, false, NULL, 0, &v);
        CHECK(!v.evaluated);
        CHECK_HAS(v.reason, "not known (no GPU, or NVML off)");
        gpu_idle_step(&w, &p, t0 + 202000, true, u + 1, 1, &v);
        CHECK(v.evaluated && !v.flagged);
        CHECK_HAS(v.reason, "less than 1.0 GiB");

        gpu_idle_lingering(&v, 100, 101, 'D', "0000:03:00.0", (uint64_t)(4 * 1024 * MIB));
        CHECK(v.flagged && v.lingering && v.lingering_pid == 101);
        CHECK_HAS(v.reason, "the main process (pid 100) exited, but pid 101 (disk-sleep) of its tree still holds "
                            "4.0 GiB on GPU 0000:03:00.0");
        gpu_idle_lingering(&v, 100, 100, 'Z', "card1", (uint64_t)(4 * 1024 * MIB));
        CHECK_HAS(v.reason, "is a zombie and still holds");
}

static void test_oom(void) {
        struct oom_forecast f;
        struct oom_limit l = { .source = OOM_MEMORY_MAX,
                               .limit_bytes = (uint64_t)(300 * MIB),
                               .has_usage = true,
                               .usage_bytes = (uint64_t)(90 * MIB) };
        snprintf(l.where, sizeof l.where, "/test/leak");
        oom_forecast_make(&l, 2.1 * MIB, NULL, &f);
        CHECK(f.known);
        CHECK(f.eta_s > 99.9 && f.eta_s < 100.1);
        CHECK_HAS(f.reason, "at 2.1 MiB/s (at least) it reaches memory.max = 300.0 MiB of cgroup /test/leak");
        CHECK_HAS(f.reason, "in ~1 min 40 s");
        l.has_high = true;
        l.high_bytes = (uint64_t)(195 * MIB);
        oom_forecast_make(&l, 2.1 * MIB, NULL, &f);
        CHECK(f.has_high_eta && f.high_eta_s > 49.9 && f.high_eta_s < 50.1);
        CHECK_HAS(f.reason, "memory.high = 195.0 MiB throttles it");
        /* over the limit already: 0, not negative */
        l.usage_bytes = (uint64_t)(400 * MIB);
        oom_forecast_make(&l, MIB, NULL, &f);
        CHECK(f.known && f.eta_s == 0);
        struct oom_limit host = { .source = OOM_MEM_AVAILABLE, .limit_bytes = (uint64_t)(3600 * MIB) };
        oom_forecast_make(&host, MIB, NULL, &f);
        CHECK(f.known && f.eta_s == 3600);
        CHECK_HAS(f.reason, "the host's available memory");
        oom_forecast_make(&host, 0, "no steady growth: flat", &f);
        CHECK(!f.known);
        CHECK_HAS(f.reason, "no forecast: no steady growth (no steady growth: flat)");
        struct oom_limit none = { .source = OOM_NONE };
        oom_forecast_make(&none, MIB, NULL, &f);
        CHECK(!f.known);
        CHECK_HAS(f.reason, "no limit could be read");
        CHECK(streq(oom_source_name(OOM_LIMIT_IN_BYTES), "memory.limit_in_bytes"));
}

/* What a forecast divides by: the leak verdict's lower bound of the slope,
 * for a steady leak (at most its slope), none for a flat series. */
static void test_slope_lo(void) {
        static struct leak_point s[481];
        struct leak_verdict v;
        for (int i = 0; i <= 480; i++) /* 2 min at 250 ms: 2 MiB/s on 300 MiB, 2 MB of noise */
                s[i] = (struct leak_point){ i * 0.25, 300 * MIB + 2 * MIB * i * 0.25 + (i * 7919 % 101) * 20000.0 };
        CHECK_EQ_INT(leak_evaluate(s, 481, -INFINITY, NULL, &v), 0);
        CHECK(v.suspected && v.slope_lo_bytes_per_s > 1.9 * MIB && v.slope_lo_bytes_per_s < v.slope_bytes_per_s);
        for (int i = 0; i <= 480; i++)
                s[i].bytes = 300 * MIB + (i % 7) * 65536.0;
        CHECK_EQ_INT(leak_evaluate(s, 481, -INFINITY, NULL, &v), 0);
        CHECK(v.evaluated && !v.suspected && v.slope_lo_bytes_per_s == 0);
}

static void test_fmt(void) {
        char b[32];
        verdict_fmt_duration(b, sizeof b, 100);
        CHECK(streq(b, "1 min 40 s"));
        verdict_fmt_duration(b, sizeof b, 7500);
        CHECK(streq(b, "2 h 5 min"));
        verdict_fmt_duration(b, sizeof b, 720);
        CHECK(streq(b, "12 min"));
        verdict_fmt_bytes(b, sizeof b, 300 * MIB);
        CHECK(streq(b, "300.0 MiB"));
}

int main(void) {
        test_input_bound();
        test_gpu_idle();
        test_oom();
        test_slope_lo();
        test_fmt();
        return tap_failures ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/* The stall verdict of a job, on ranks given as plain data: when a job is
 * stalled, and which ranks it names, in order of evidence. */
#include <math.h>
#include <string.h>

#include "analyze/stall.h"
#include "tap.h"
#include "util.h"

#define NOW 1000000
#define RANKS_MAX 4

struct scenario {
        const char *name;
        size_t n;
        struct stall_rank ranks[RANKS_MAX];
        double p99_ms;
        bool judged, stalled;
        const char *causes; /* per rank: - none, T stopped, D disk-sleep, X exited, B behind */
};

static char cause_letter(enum stall_cause c) {
        switch (c) {
        case STALL_NONE:
                return '-';
        case STALL_STOPPED:
                return 'T';
        case STALL_DISK_SLEEP:
                return 'D';
        case STALL_EXITED:
                return 'X';
        case STALL_BEHIND:
                return 'B';
        }
        return '?';
}

/* a running rank whose last step and last timing were at those times */
#define RUN(state, step, op) \
        { .running = true, .proc_state = (state), .last_step_ms = (step), .last_op_ms = (op) }
#define ENDED(step, at) \
        { .running = false, .proc_state = 0, .last_step_ms = (step), .last_op_ms = (step), .ended_ms = (at) }

static void test_scenarios(void) {
        /* factor 10, floor 1 s */
        static const struct scenario rows[] = {
                /* a step of 20 ms at p99: 300 ms without one is no stall yet (floor 1 s) */
                { "healthy",
                  3,
                  { RUN('S', NOW - 300, NOW - 10), RUN('R', NOW - 300, NOW - 5), RUN('S', NOW - 300, NOW) },
                  20,
                  true,
                  false,
                  "---" },
                { "stopped rank",
                  3,
                  { RUN('S', NOW - 5000, NOW - 4990), RUN('T', NOW - 5000, NOW - 5000),
                    RUN('S', NOW - 5000, NOW - 4990) },
                  20,
                  true,
                  true,
                  "-T-" },
                { "disk-sleep",
                  2,
                  { RUN('D', NOW - 5000, NOW - 5000), RUN('S', NOW - 5000, NOW - 4000) },
                  20,
                  true,
                  true,
                  "D-" },
                /* a stopped rank is named before one that went less far */
                { "stopped and behind",
                  3,
                  { RUN('S', NOW - 5000, NOW - 5000), RUN('T', NOW - 5000, NOW - 4000),
                    RUN('S', NOW - 5000, NOW - 4000) },
                  20,
                  true,
                  true,
                  "-T-" },
                { "exited rank",
                  3,
                  { RUN('S', NOW - 9000, NOW - 8990), ENDED(NOW - 9000, NOW - 8995), RUN('S', NOW - 9000, NOW - 8990) },
                  20,
                  true,
                  true,
                  "-X-" },
                /* rank 1 hangs in its own work: the others timed their next ops and wait */
                { "wavefront",
                  4,
                  { RUN('S', NOW - 5000, NOW - 4500), RUN('R', NOW - 5000, NOW - 5000),
                    RUN('S', NOW - 5000, NOW - 4400), RUN('S', NOW - 5000, NOW - 4450) },
                  20,
                  true,
                  true,
                  "-B--" },
                /* all stopped at the same point: none is behind */
                { "no wavefront",
                  3,
                  { RUN('S', NOW - 5000, NOW - 5000), RUN('S', NOW - 5000, NOW - 4900),
                    RUN('S', NOW - 5000, NOW - 4950) },
                  20,
                  true,
                  true,
                  "---" },
                /* long steps: 10 x 2 s p99 is 20 s, 15 s without one is fine */
                { "long steps",
                  2,
                  { RUN('T', NOW - 15000, NOW - 15000), RUN('S', NOW - 15000, NOW - 14000) },
                  2000,
                  true,
                  false,
                  "--" },
                /* no p99: the floor alone */
                { "no p99",
                  2,
                  { RUN('S', NOW - 1500, NOW - 1500), RUN('S', NOW - 1500, NOW - 1500) },
                  NAN,
                  true,
                  true,
                  "--" },
                /* one rank's step is enough to say the job goes on */
                { "one rank steps",
                  2,
                  { RUN('S', NOW - 9000, NOW - 9000), RUN('S', NOW - 100, NOW - 100) },
                  20,
                  true,
                  false,
                  "--" },
                { "no step yet", 2, { RUN('S', 0, NOW - 100), RUN('S', 0, 0) }, NAN, false, false, "--" },
                { "all ended",
                  2,
                  { ENDED(NOW - 9000, NOW - 8000), ENDED(NOW - 9000, NOW - 8000) },
                  20,
                  false,
                  false,
                  "--" },
        };
        for (size_t s = 0; s < ELEMENTSOF(rows); s++) {
                const struct scenario *sc = &rows[s];
                enum stall_cause causes[RANKS_MAX];
                struct stall_verdict v;
                char got[RANKS_MAX + 1] = "";
                stall_judge(sc->ranks, sc->n, sc->p99_ms, 10, 1000, NOW, causes, &v);
                for (size_t i = 0; i < sc->n; i++)
                        got[i] = cause_letter(causes[i]);
                CHECK_CASE(sc->name, v.judged == sc->judged);
                CHECK_CASE(sc->name, v.stalled == sc->stalled);
                if (strcmp(got, sc->causes) != 0)
                        TAP_FAIL("[%s] causes '%s', expected '%s'", sc->name, got, sc->causes);
                if (v.judged) {
                        int64_t latest = 0;
                        for (size_t i = 0; i < sc->n; i++)
                                latest = sc->ranks[i].last_step_ms > latest ? sc->ranks[i].last_step_ms : latest;
                        CHECK_CASE(sc->name, v.last_step_ms == latest && v.idle_ms == NOW - latest);
                        CHECK_CASE(sc->name, v.threshold_ms == (isnan(sc->p99_ms) || 10 * sc->p99_ms < 1000
                                                                        ? 1000
                                                                        : (int64_t)ceil(10 * sc->p99_ms)));
                }
        }
}

int main(void) {
        test_scenarios();
        TEST_DONE();
}

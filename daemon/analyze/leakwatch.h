/* SPDX-License-Identifier: MIT */
/* Per run, the memory series the leak detector needs and the verdict's
 * state over time (suspected since when, cleared when). Keeps one floor (the
 * minimum) per LEAKWATCH_RES_S of anonymous RSS for the longest window: the
 * detector takes bucket minima anyway, and this bounds memory to a few KiB
 * per run whatever the sampling interval. The floors are kept compact: one
 * slot of 4 bytes per bucket of the longest window, indexed by the bucket's
 * number (its time), holding the floor in KiB (the kernel counts memory in
 * pages), or LEAKWATCH_NO_FLOOR for a bucket without samples. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "analyze/leak.h"

#define LEAKWATCH_NO_FLOOR UINT32_MAX

struct leakwatch {
        uint32_t *pts; /* floors in KiB: bucket i's in pts[i mod cap]; NULL before init */
        size_t cap;
        int64_t last; /* bucket of the newest floor kept */
        bool has_last;
        double res_s;   /* floor resolution: shortest window / LEAK_BUCKETS */
        int64_t cur_i;  /* bucket of the floor being built */
        double cur_min; /* in bytes */
        bool cur_valid;
        double grace_from_t; /* registration, or the last mark */
        bool same_floor;     /* the newest floor equals the one of the bucket before it */
        unsigned unjudged;   /* such floors since the last evaluation */
        /* the verdict */
        struct leak_verdict v;
        bool suspected;
        int64_t suspected_since_ms; /* when it became suspected */
        int64_t last_pass_ms;       /* last evaluation that found growth */
        int64_t evaluated_ms;       /* last evaluation */
        bool ever_suspected;
        bool ever_suspected_before; /* before the last suspicion (a veto takes it back) */
        bool ended;                 /* the run ended: the verdict is final */
};

/* What changed at this step, for the caller to store. */
enum leakwatch_change { LEAKWATCH_NONE, LEAKWATCH_SUSPECTED, LEAKWATCH_CLEARED };

int leakwatch_init(struct leakwatch *w, const struct leak_params *p);
void leakwatch_done(struct leakwatch *w);
/* A sample at t_s (seconds since registration) and ts_ms (realtime); the
 * detector runs whenever a floor completes, but for a floor equal to the one
 * before it while nothing is suspected: one floor more at the same level
 * hardly moves the verdict, which is judged again at every
 * LEAKWATCH_REJUDGE-th such floor (a run whose memory is flat, most of a
 * fleet, pays a fourth of the detector's cost). clear_after_ms: a suspected
 * verdict clears only after that long without any window finding growth. */
#define LEAKWATCH_REJUDGE 4
enum leakwatch_change leakwatch_add(struct leakwatch *w, const struct leak_params *p, double t_s, int64_t ts_ms,
                                    double bytes, int64_t clear_after_ms);
/* The two steps of leakwatch_add(), for tests and benchmarks that judge
 * every floor: a sample into the floor being built (true when it completed
 * one, the moment the detector runs), and the detector's verdict on the
 * floors kept, without the verdict's state over time. */
bool leakwatch_feed(struct leakwatch *w, double t_s, double bytes);
int leakwatch_evaluate(struct leakwatch *w, const struct leak_params *p, struct leak_verdict *ret);
/* The caller found that the growth just suspected is no leak: the verdict
 * goes back to not suspected, with reason as its reason, and stays so until
 * a later evaluation finds growth again (and the caller agrees). */
void leakwatch_veto(struct leakwatch *w, const char *reason);
/* A mark restarts the warm-up grace. */
void leakwatch_mark(struct leakwatch *w, double t_s);
/* The run ended at t_end_s (seconds since registration): a verdict still
 * missing never comes, and the reason says so instead of when it would
 * have been judged. */
void leakwatch_end(struct leakwatch *w, const struct leak_params *p, double t_end_s);

/* A watch's verdict as plain data, for whoever shows or keeps it. */
struct leak_state {
        bool suspected;
        bool evaluated; /* judged with figures: slope, growth, window and confidence mean something */
        bool ended;     /* the run ended: the verdict is final */
        double slope_bytes_per_s, growth_bytes, window_s, confidence;
        double slope_lo_bytes_per_s; /* see struct leak_verdict; 0: no trend to forecast from */
        int64_t since_ms;            /* start of the reported window (realtime ms); 0 unless evaluated */
        int64_t suspected_at_ms;     /* when it became suspected; 0 unless suspected */
        int64_t evaluated_ts_ms;     /* the last evaluation; 0 before the first */
        char reason[256];            /* one sentence, as struct leak_verdict's (or why it was not judged yet) */
};

/* A run's verdicts: on anonymous RSS always, on GPU memory once the run had
 * some. */
struct leak_report {
        struct leak_state rss;
        bool pss; /* rss judges a tree's Pss_Anon sum (pss_anon_bytes), not RssAnon */
        bool has_gpu;
        struct leak_state gpu;
};

/* w's verdict now; registered_ts_ms turns the series' time into realtime. */
void leakwatch_state(const struct leakwatch *w, int64_t registered_ts_ms, struct leak_state *ret);

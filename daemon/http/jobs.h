/* SPDX-License-Identifier: MIT */
/* What api-jobs.c (the documents of /v1/jobs) and job-verdicts.c (the
 * verdicts in them) share: a job's runs, as members. */
#pragma once

#include "analyze/stall.h"
#include "http/handlers.h"

/* One run of a job. */
struct job_member {
        struct run_info *ri;
        json_object *tags;   /* owns rank */
        const char *rank;    /* the rank tag; NULL: none */
        unsigned attempt;    /* the attempt tag (the launcher's restart count); 0 without one */
        unsigned world_size; /* the world_size tag; 0: none */
        bool launcher;       /* tagged role=launcher: it started the ranks and is none of them */
        bool in_attempt;     /* of the attempt the document is about, and a rank (not the launcher) */
        bool in_span;        /* false: since_mark was asked and the run has no such mark */
        int64_t mark_ts;
        int64_t span_from; /* where its op data starts (a slice start) */
        struct op_aggs ops;
        /* a running run's, from the manager */
        char proc_state;      /* its process's state letter; 0: unknown */
        int64_t last_step_ms; /* its latest timing of [jobs] step_op; 0: none */
        int64_t last_op_ms;   /* of any op; 0: none */
};

/* The question: the span [from, until] (each member's own start with
 * since_mark), the percentiles. */
struct job_span {
        int64_t from, until;
        const char *mark;
        double qs[MAX_QUANTILES];
        size_t nq;
};

/* The runs tagged job_id, live totals overlaid, in rank order. -ENOENT:
 * none. */
int job_load_members(struct request *rq, const char *job_id, struct run_info **ret_runs, size_t *ret_nruns,
                     struct job_member **ret);
void job_members_free(struct job_member *m, size_t n);
/* Default: from the attempt's first registration to now, or to its last end
 * when none of its runs is running; window=DUR ends at until; q= the
 * percentiles. False: answered. */
bool job_parse_span(struct request *rq, const struct job_member *m, size_t n, struct job_span *ret);

/* The document of a job over its span, about attempt (its members marked
 * in_attempt); -ENOENT: no run has the span's mark; -ECANCELED: answered
 * already. */
typedef int (*job_answer_fn)(struct request *rq, const char *job_id, unsigned attempt, struct job_member *m, size_t n,
                             struct job_span *sp, json_object **ret);
/* Checks the job id, loads the job's runs, picks the attempt (by_attempt:
 * attempt=, else the latest; else every attempt), parses the span, and
 * answers with what answer makes: a 400 for a bad job id, a 404 for an
 * unknown job, attempt or a mark no run has. */
void job_answer(struct request *rq, const char *job_id, bool by_attempt, job_answer_fn answer);

/* "rank 2 (run 3)", or "run 3" for a run without a rank. */
void job_member_name(const struct job_member *m, char *buf, size_t size);

/* The comparison of the attempt's ranks over the span: into root, per op
 * of the merged ops (merged[]) the "ranks" entries with their scores, the
 * "stragglers" and the "undecided". collective: the patterns of the ops
 * that hold a collective; view: "2 of 4 ranks on this host" when the host
 * sees part of the job (the verdicts then say they are local), else NULL.
 * until: the span's end. */
int job_compare(struct request *rq, const struct job_member *m, size_t n, const struct op_aggs *merged,
                const char *collective, const char *view, int64_t until, json_object *root);

/* The stall verdict of the attempt's ranks now. causes: one per member
 * (STALL_NONE for those not in the attempt); p99_ms: the job's p99 step
 * over the last STALL_P99_WINDOW_MS (NaN: none). */
#define STALL_P99_WINDOW_MS (5 * 60 * 1000)
struct job_stall {
        struct stall_verdict v;
        enum stall_cause *causes;
        double p99_ms;
};
int job_stall_judge(struct request *rq, struct job_member *m, size_t n, int64_t now_ms, struct job_stall *ret);
void job_stall_done(struct job_stall *s);
/* "state", "stalled_since", "stalled_ranks" and "stall" into root. */
void job_stall_render(const struct job_stall *s, const struct job_member *m, size_t n, const char *step_op,
                      int64_t now_ms, json_object *root);

/* How the attempt's ranks ended, in order ("rank 1 (run 5) was killed by
 * SIGKILL first; ranks 0, 2 were killed by SIGTERM 0.4 s later"); NULL
 * when none has ended. free() it. */
char *job_end_reason(const struct job_member *m, size_t n, unsigned attempt);

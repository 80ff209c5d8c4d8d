/* SPDX-License-Identifier: MIT */
/* A job's runs as the answers about jobs read them (api-jobs.c): loaded,
 * in rank order, and the span a question is about. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/handlers.h"

/* One run of the job. */
struct job_member {
        struct run_info *ri;
        json_object *tags; /* owns rank */
        const char *rank;  /* the rank tag; NULL: none */
        bool in_span;      /* false: since_mark was asked and the run has no such mark */
        int64_t mark_ts;
        int64_t span_from; /* where its op data starts (a slice start) */
        struct op_aggs ops;
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
/* Default: from the first registration to now, or to the last end when no
 * run is running; window=DUR ends at until; q= the percentiles. False:
 * answered. */
bool job_parse_span(struct request *rq, const struct job_member *m, size_t n, struct job_span *ret);

/* The document of a job over its span (-ENOENT: no run has the span's
 * mark; -ECANCELED: answered already). */
typedef int (*job_answer_fn)(struct request *rq, const char *job_id, struct job_member *m, size_t n,
                             struct job_span *sp, json_object **ret);
/* Loads the job's runs, parses the span, and answers with what answer
 * makes: a 404 for an unknown job or a mark no run has. */
void job_answer(struct request *rq, const char *job_id, job_answer_fn answer);

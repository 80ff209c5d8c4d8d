/* SPDX-License-Identifier: MIT */
#include "jobenv.h"

#include <stdbool.h>
#include <string.h>

#include "util.h"

static const char *const keys[_JOBENV_MAX] = {
        [JOBENV_JOB_ID] = "job_id",         [JOBENV_RANK] = "rank",       [JOBENV_LOCAL_RANK] = "local_rank",
        [JOBENV_WORLD_SIZE] = "world_size", [JOBENV_ATTEMPT] = "attempt",
};

const char *jobenv_key(enum jobenv_tag t) {
        return t < _JOBENV_MAX ? keys[t] : NULL;
}

/* The variables, by tag in order of precedence: torchrun's first (under
 * Slurm it runs one launcher per node; its RANK is the training process's
 * rank where SLURM_PROCID is the launcher's), then the batch systems and
 * the MPI/PMI launchers. */
static const struct env_var {
        const char *name;
        enum jobenv_tag tag;
        const char *not_an_id; /* a job id value that means none */
} env_vars[] = {
        { "TORCHELASTIC_RUN_ID", JOBENV_JOB_ID, "none" }, /* torchrun --rdzv-id, "none" by default */
        { "SLURM_JOB_ID", JOBENV_JOB_ID, NULL },          /* Slurm */
        { "PBS_JOBID", JOBENV_JOB_ID, NULL },             /* PBS Pro, OpenPBS, Torque */
        { "LSB_JOBID", JOBENV_JOB_ID, NULL },             /* IBM Spectrum LSF */
        { "FLUX_JOB_ID", JOBENV_JOB_ID, NULL },           /* Flux */
        { "RANK", JOBENV_RANK, NULL },                    /* torchrun */
        { "SLURM_PROCID", JOBENV_RANK, NULL },            /* srun */
        { "OMPI_COMM_WORLD_RANK", JOBENV_RANK, NULL },    /* Open MPI's mpirun */
        { "PMI_RANK", JOBENV_RANK, NULL },                /* MPICH (Hydra), Intel MPI */
        { "PMIX_RANK", JOBENV_RANK, NULL },               /* PMIx launchers (prterun, srun --mpi=pmix) */
        { "LOCAL_RANK", JOBENV_LOCAL_RANK, NULL },        /* torchrun */
        { "SLURM_LOCALID", JOBENV_LOCAL_RANK, NULL },     /* srun */
        { "OMPI_COMM_WORLD_LOCAL_RANK", JOBENV_LOCAL_RANK, NULL },
        { "MPI_LOCALRANKID", JOBENV_LOCAL_RANK, NULL }, /* MPICH (Hydra), Intel MPI */
        { "WORLD_SIZE", JOBENV_WORLD_SIZE, NULL },      /* torchrun */
        { "SLURM_NTASKS", JOBENV_WORLD_SIZE, NULL },    /* srun */
        { "OMPI_COMM_WORLD_SIZE", JOBENV_WORLD_SIZE, NULL },
        { "PMI_SIZE", JOBENV_WORLD_SIZE, NULL }, /* MPICH (Hydra), Intel MPI */
        /* how many times the job's workers were started again: torchrun
         * restarts every worker of the job after one fails (0 the first
         * time); Slurm sets its count on a requeued job (unset the first
         * time, which counts as 0) */
        { "TORCHELASTIC_RESTART_COUNT", JOBENV_ATTEMPT, NULL },
        { "SLURM_RESTART_COUNT", JOBENV_ATTEMPT, NULL },
};

static bool value_ok(const struct env_var *v, const char *s, size_t n) {
        if (n == 0 || n > JOBENV_VALUE_MAX)
                return false;
        if (v->tag != JOBENV_JOB_ID) {
                if (n > 9) /* below 10^9: an int */
                        return false;
                for (size_t i = 0; i < n; i++)
                        if (s[i] < '0' || s[i] > '9')
                                return false;
                return true;
        }
        for (size_t i = 0; i < n; i++)
                if (s[i] <= ' ' || s[i] > '~')
                        return false;
        return !(v->not_an_id && strlen(v->not_an_id) == n && memcmp(s, v->not_an_id, n) == 0);
}

void jobenv_parse(const char *buf, size_t len, struct jobenv *ret) {
        /* per variable, its first valid value (a block may set one twice;
         * getenv() takes the first) */
        const char *val[ELEMENTSOF(env_vars)] = {};
        size_t vlen[ELEMENTSOF(env_vars)] = {};

        *ret = (struct jobenv){};
        for (const char *p = buf, *end = buf + len; p < end;) {
                const char *nul = memchr(p, 0, (size_t)(end - p));
                if (!nul)
                        break; /* cut short */
                const char *eq = memchr(p, '=', (size_t)(nul - p));
                for (size_t i = 0; eq && i < ELEMENTSOF(env_vars); i++) {
                        size_t n = strlen(env_vars[i].name);
                        if (!val[i] && (size_t)(eq - p) == n && memcmp(p, env_vars[i].name, n) == 0 &&
                            value_ok(&env_vars[i], eq + 1, (size_t)(nul - eq - 1))) {
                                val[i] = eq + 1;
                                vlen[i] = (size_t)(nul - eq - 1);
                        }
                }
                p = nul + 1;
        }
        for (size_t i = 0; i < ELEMENTSOF(env_vars); i++) {
                enum jobenv_tag t = env_vars[i].tag;
                if (!val[i] || ret->var[t])
                        continue;
                memcpy(ret->value[t], val[i], vlen[i]);
                ret->value[t][vlen[i]] = 0;
                ret->var[t] = env_vars[i].name;
        }
}

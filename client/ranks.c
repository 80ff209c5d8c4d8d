/* SPDX-License-Identifier: MIT */
/* `mlmonctl run --ranks`: while the launcher runs, every process of its tree
 * that a rank variable (RANK, SLURM_PROCID, ...) tells apart from the
 * launcher is registered as a run of its own, with its children, as soon as
 * a poll of /proc sees it. The daemon discovers its job_id, rank, ... tags.
 *
 * This lives in mlmonctl, not in mlmond: the ranks are registered with the
 * caller's own credentials and quota, exactly as `mlmonctl register` would,
 * and the watch lasts as long as the launcher that mlmonctl waits for
 * anyway; the daemon keeps no per-tree poller. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "jobenv.h"
#include "mlmonctl.h"

#define RANKS_POLL_USEC (200 * USEC_PER_MSEC)
/* A bound on the tree walked: a launcher's tree is a few dozen processes. */
#define RANKS_MAX_PIDS 4096
#define RANKS_MAX_DEPTH 16

static int read_environ(pid_t pid, struct jobenv *ret) {
        char path[64];
        _cleanup_free_ char *buf = NULL;
        size_t len;
        snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        int r = read_file_at(AT_FDCWD, path, 1024 * 1024, &buf, &len);
        if (r < 0)
                return r;
        jobenv_parse(buf, len, ret);
        return 0;
}

/* The direct children of every thread of pid, appended to *pids. */
static void children_of(pid_t pid, pid_t **pids, size_t *n) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
        _cleanup_closedir_ DIR *d = opendir(path);
        if (!d)
                return;
        for (struct dirent *de; (de = readdir(d));) {
                _cleanup_free_ char *text = NULL;
                char file[300];
                size_t len;
                if (de->d_name[0] == '.')
                        continue;
                snprintf(file, sizeof file, "/proc/%d/task/%s/children", (int)pid, de->d_name);
                if (read_file_at(AT_FDCWD, file, 64 * 1024, &text, &len) < 0)
                        continue;
                for (char *p = text, *tok; (tok = strsep(&p, " \n"));) {
                        unsigned c;
                        if (*tok && safe_atou(tok, &c) == 0 && c > 0 && c <= INT32_MAX && *n < RANKS_MAX_PIDS &&
                            GREEDY_REALLOC(*pids, *n + 1))
                                (*pids)[(*n)++] = (pid_t)c;
                }
        }
}

static struct rank_run *find_rank(struct rank_runs *ranks, pid_t pid) {
        for (size_t i = 0; i < ranks->n; i++)
                if (ranks->v[i].pid == pid)
                        return &ranks->v[i];
        return NULL;
}

/* A process with a rank of its own: one the launcher does not share (a
 * child between its fork and its exec still has the launcher's). */
static bool is_rank(const struct jobenv *e, const struct jobenv *launcher) {
        return e->var[JOBENV_RANK] && (!streq(e->var[JOBENV_RANK], launcher->var[JOBENV_RANK]) ||
                                       !streq(e->value[JOBENV_RANK], launcher->value[JOBENV_RANK]));
}

/* A rank's run is named for what it is: "rank 2 of JOB", its job's id (or
 * the launcher's name), and its attempt once the job was restarted. */
static void rank_name(const struct args *a, const struct jobenv *e, char *buf, size_t size) {
        const char *job = e->var[JOBENV_JOB_ID] ? e->value[JOBENV_JOB_ID] : a->name;
        unsigned attempt = 0;
        int n = snprintf(buf, size, "rank %s", e->value[JOBENV_RANK]);
        if (job && n > 0 && (size_t)n < size)
                n += snprintf(buf + n, size - (size_t)n, " of %.100s", job); /* a name is at most 128 bytes */
        if (e->var[JOBENV_ATTEMPT] && safe_atou(e->value[JOBENV_ATTEMPT], &attempt) == 0 && attempt > 0 && n > 0 &&
            (size_t)n < size)
                snprintf(buf + n, size - (size_t)n, " (attempt %u)", attempt);
}

static void register_rank(const struct args *a, struct rank_runs *ranks, pid_t pid, const struct jobenv *e) {
        char name[256];
        if (!GREEDY_REALLOC(ranks->v, ranks->n + 1))
                return;
        const char *rank = e->value[JOBENV_RANK];
        struct rank_run *rr = &ranks->v[ranks->n++];
        *rr = (struct rank_run){ .pid = pid };
        snprintf(rr->rank, sizeof rr->rank, "%s", rank);
        rank_name(a, e, name, sizeof name);
        struct args ra = *a;
        ra.name = name;
        ra.children = true; /* its data loader workers count to the rank */
        _cleanup_free_ char *err = NULL;
        int unreachable;
        if (register_pid_quiet(&ra, pid, &rr->id, &err, &unreachable) < 0) {
                rr->id = 0;
                error_line("rank %s (pid %d) was not registered: %s", rank, (int)pid, err ? err : "out of memory");
        }
}

/* One look at the tree under launcher: ranks not seen yet are registered;
 * the subtree of a rank is the rank's. */
static void scan(const struct args *a, pid_t launcher, struct rank_runs *ranks) {
        struct jobenv le;
        if (read_environ(launcher, &le) < 0)
                return;
        _cleanup_free_ pid_t *pids = NULL;
        size_t n = 0, depth_end = 0, start = 0;
        children_of(launcher, &pids, &n);
        for (unsigned depth = 0; depth < RANKS_MAX_DEPTH && start < n; depth++) {
                depth_end = n;
                for (size_t i = start; i < depth_end; i++) {
                        struct jobenv e;
                        if (find_rank(ranks, pids[i]))
                                continue;
                        if (read_environ(pids[i], &e) == 0 && is_rank(&e, &le)) {
                                register_rank(a, ranks, pids[i], &e);
                                continue;
                        }
                        children_of(pids[i], &pids, &n);
                }
                start = depth_end;
        }
}

int ranks_watch(const struct args *a, pid_t launcher, struct rank_runs *ranks) {
        for (;;) {
                siginfo_t si = {};
                if (waitid(P_PID, (id_t)launcher, &si, WEXITED | WNOWAIT | WNOHANG) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (si.si_pid == launcher)
                        return 0;
                scan(a, launcher, ranks);
                nanosleep(&(struct timespec){ .tv_nsec = RANKS_POLL_USEC * 1000 }, NULL);
        }
}

void ranks_print(FILE *f, const struct rank_runs *ranks) {
        bool first = true;
        for (size_t i = 0; i < ranks->n; i++) {
                if (ranks->v[i].id <= 0)
                        continue;
                fprintf(f, "%s run %" PRId64 " (rank %s)", first ? "mlmonctl: ranks:" : ",", ranks->v[i].id,
                        ranks->v[i].rank);
                first = false;
        }
        if (!first)
                fputc('\n', f);
}

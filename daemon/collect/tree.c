/* SPDX-License-Identifier: MIT */
/* A run's process tree: its members found breadth first through the
 * children lists, with the /proc files each is read through. */
#include "collect/probe.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

/* A process tree bigger than this is cut (and logged once by the caller):
 * it bounds one run's cost per tick. */
#define MAX_TREE 4096

void member_fds_close(struct member_fds *f) {
        f->dir = safe_close(f->dir);
        f->statm = safe_close(f->statm);
        f->children = safe_close(f->children);
}

static int keep_one(int below, int *fd) {
        int kept = *fd;
        if (kept >= below)
                kept = safe_close(kept);
        *fd = -1;
        return kept;
}

void member_fds_keep(struct collect_ctx *ctx, struct member_fds *dst, struct member_fds *src) {
        if (ctx->keep_fds_below == 0)
                ctx->keep_fds_below = fds_kept_below(1, 2);
        int below = ctx->real_proc ? ctx->keep_fds_below : 0;
        dst->dir = keep_one(below, &src->dir);
        dst->statm = keep_one(below, &src->statm);
        dst->children = keep_one(below, &src->children);
}

/* A single thread's children list, through *kept (opened there when it is
 * not yet): its seq file is generated anew by each pread at 0. A long
 * list is read again by name. */
static int thread_children(const struct collect_ctx *ctx, int dirfd, int pid, int *kept, int **kids, size_t *nk) {
        char buf[1024];
        if (*kept < 0 && ctx->real_proc) {
                snprintf(buf, sizeof buf, "task/%d/children", pid);
                *kept = openat(dirfd, buf, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (*kept < 0)
                        return -errno;
        }
        ssize_t k = *kept >= 0 ? pread_text(*kept, buf, sizeof buf) : (ssize_t)sizeof buf;
        if (k < 0)
                return (int)k;
        if ((size_t)k >= sizeof buf - 1)
                return proc_read_thread_children(dirfd, pid, kids, nk);
        return proc_parse_pid_list(buf, kids, nk);
}

/* The direct children of member pid. Only the thread that forked a child
 * lists it, so every thread's list is read (opening task/ and listing it),
 * except for a member that had a single thread at the previous sample (p):
 * its own list is all there is. One that started a thread since and forked
 * from it shows that child a sample later (its stat is read again, since it
 * ran), which then counts all it used. A dir kept from p that is gone may
 * be a recycled pid's: opened again once. */
static int member_children(const struct collect_ctx *ctx, struct probe *r, int pid, bool main, const struct member *p,
                           struct member_fds *f, int **kids, size_t *nk) {
        bool retry = !main && f->dir >= 0;
        for (;;) {
                if (!main && f->dir < 0)
                        f->dir = proc_open_pid_dir(ctx->proc_root, pid);
                int dirfd = main ? r->dirfd : f->dir;
                if (dirfd < 0)
                        return dirfd;
                int q = -ENOENT;
                if (p && p->has_st && p->st.num_threads == 1)
                        q = thread_children(ctx, dirfd, pid, &f->children, kids, nk);
                else
                        f->children = safe_close(f->children);
                if (q == -ENOENT) /* the full walk tells a process gone from a kernel without the files */
                        q = proc_read_children(dirfd, kids, nk);
                if (q >= 0 || !retry || !proc_errno_is_gone(q))
                        return q;
                member_fds_close(f);
                retry = false;
        }
}

/* Whether descendant pid of a run whose process is not root's may count in
 * it. The run's figures are anyone's to read over the TCP API, so a child
 * that is another user's (su, sudo, a setuid helper: its real, effective,
 * saved or filesystem uid differs) or that is not dumpable shows nothing:
 * its io would time its user's keystrokes. The files in /proc/PID belong
 * to the effective uid, or to root for a process that is not dumpable (the
 * directory itself keeps the effective uid), and a stat of one costs next
 * to nothing: checked every sample. A process not seen before also has its
 * four uids read once (status). Under a fixture root the files belong to
 * whoever made them: nothing is left out there. */
static bool member_allowed(const struct collect_ctx *ctx, const struct probe *r, int pid, const struct member *p,
                           struct member_fds *f) {
        if (!ctx->real_proc || !r->has_uid || r->uid == 0)
                return true;
        if (f->dir < 0)
                f->dir = proc_open_pid_dir(ctx->proc_root, pid);
        struct stat st;
        if (f->dir < 0 || fstatat(f->dir, "statm", &st, 0) < 0)
                return true; /* gone: its reading will say so */
        if (st.st_uid != r->uid)
                return false;
        if (p)
                return true;
        struct proc_status s;
        if (proc_read_status(f->dir, &s) < 0 || !s.has_uids)
                return true;
        return s.uid_real == r->uid && s.uid_effective == r->uid && s.uid_saved == r->uid && s.uid_fs == r->uid;
}

static struct member *member_by_pid(struct probe *r, int pid) {
        for (size_t i = 0; i < r->n_members; i++)
                if (r->members[i].pid == pid)
                        return &r->members[i];
        return NULL;
}

int tree_collect(const struct collect_ctx *ctx, struct probe *r, int **ret_pids, struct member_fds **ret_fds,
                 size_t *ret_n) {
        size_t n = 1;
        _cleanup_free_ int *pids = NULL;
        _cleanup_free_ struct member_fds *fds = NULL;
        if (!GREEDY_REALLOC(pids, 16) || !GREEDY_REALLOC(fds, 16))
                return -ENOMEM;
        pids[0] = r->pid;
        fds[0] = MEMBER_FDS_NONE;
        r->left_out = 0;
        for (size_t i = 0; i < n && n < MAX_TREE; i++) {
                _cleanup_free_ int *kids = NULL;
                size_t nk = 0;
                struct member *p = member_by_pid(r, pids[i]);
                if (p) {
                        fds[i] = p->fds;
                        p->fds = MEMBER_FDS_NONE;
                }
                if (i > 0 && !member_allowed(ctx, r, pids[i], p, &fds[i])) {
                        /* it and what it started: the walk does not go through it */
                        member_fds_close(&fds[i]);
                        pids[i] = 0;
                        r->left_out++;
                        continue;
                }
                if (member_children(ctx, r, pids[i], i == 0, p, &fds[i], &kids, &nk) < 0)
                        continue;
                for (size_t j = 0; j < nk && n < MAX_TREE; j++) {
                        if (!GREEDY_REALLOC(pids, n + 1) || !GREEDY_REALLOC(fds, n + 1)) {
                                for (size_t k = 0; k <= i; k++)
                                        member_fds_close(&fds[k]);
                                return -ENOMEM;
                        }
                        fds[n] = MEMBER_FDS_NONE;
                        pids[n++] = kids[j];
                }
        }
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
                if (pids[i] != 0) {
                        pids[kept] = pids[i];
                        fds[kept++] = fds[i];
                }
        *ret_pids = TAKE_PTR(pids);
        *ret_fds = TAKE_PTR(fds);
        *ret_n = kept;
        return 0;
}

/* No member ran, nor gained or lost a page, since the last reading, and
 * none came or went: none wrote to a page it shares (copy-on-write needs a
 * write), so the PSS is the last one but for what processes outside the
 * tree did to the pages they share with it (a library's), which a reading
 * every PSS_REUSE_MAX + 1 intervals catches up with. */
#define PSS_REUSE_MAX 11
static bool tree_unchanged(const struct probe *r, const struct reading *rd, const struct member *nm, size_t nrd) {
        if (!r->has_pss || r->pss_reused >= PSS_REUSE_MAX || nrd != r->n_members)
                return false;
        for (size_t i = 0; i < nrd; i++)
                if (rd[i].zombie || !nm[i].has_smaps || !rd[i].has_cpu || rd[i].cpu_ns != nm[i].smaps_cpu_ns ||
                    !rd[i].has_statm || rd[i].statm.resident_pages != nm[i].smaps_resident_pages)
                        return false;
        return true;
}

/* A tree's memory with each shared page counted once, every
 * pss_interval: smaps_rollup walks the page tables, so it costs about as
 * much as all the other files of a sample together, per process of a big
 * mapping (a tree that has not run keeps its last reading for a while,
 * tree_unchanged()). A member that left meanwhile, or whose file cannot be
 * read (another user's), leaves the sums unknown rather than short. */
void tree_pss(const struct collect_ctx *ctx, struct probe *r, const struct reading *rd, struct member *nm, size_t nrd,
              usec_t now_mono_usec, bool final, struct sample *s) {
        usec_t every = ctx->pss_interval_usec;
        if (!r->children || final || every == 0 || rd[0].zombie ||
            (r->pss_read_usec != 0 && now_mono_usec - r->pss_read_usec + every / 10 < every))
                return;
        r->pss_read_usec = now_mono_usec;
        if (tree_unchanged(r, rd, nm, nrd)) {
                r->pss_reused++;
                s->has_pss = true;
                s->pss_bytes = r->pss_bytes;
                s->uss_bytes = r->uss_bytes;
                s->has_pss_anon = r->has_pss_anon;
                s->pss_anon_bytes = r->pss_anon_bytes;
                return;
        }
        r->has_pss = false;
        r->has_main_anon = false;
        struct sample x = { .has_pss = true, .has_pss_anon = true };
        for (size_t i = 0; i < nrd; i++) {
                struct proc_smaps sm;
                if (rd[i].zombie)
                        continue; /* its memory is gone */
                if (proc_read_smaps_rollup(rd[i].dirfd, &sm) < 0)
                        return;
                x.pss_bytes += sm.pss_bytes;
                x.uss_bytes += sm.private_clean_bytes + sm.private_dirty_bytes;
                x.pss_anon_bytes += sm.pss_anon_bytes;
                x.has_pss_anon = x.has_pss_anon && sm.has_pss_anon;
                if (i == 0) {
                        r->has_main_anon = true;
                        r->main_anon_bytes = sm.anonymous_bytes;
                }
                nm[i].has_smaps = rd[i].has_cpu && rd[i].has_statm;
                nm[i].smaps_cpu_ns = rd[i].cpu_ns;
                nm[i].smaps_resident_pages = rd[i].statm.resident_pages;
        }
        s->has_pss = r->has_pss = true;
        s->pss_bytes = r->pss_bytes = x.pss_bytes;
        s->uss_bytes = r->uss_bytes = x.uss_bytes;
        s->has_pss_anon = r->has_pss_anon = x.has_pss_anon;
        s->pss_anon_bytes = r->pss_anon_bytes = x.has_pss_anon ? x.pss_anon_bytes : 0;
        r->pss_reused = 0;
}

/* SPDX-License-Identifier: MIT */
#include "collect/probe.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <time.h>

/* VmHWM lives in /proc/PID/status, the most expensive file to read (2.4 us
 * vs 0.4 us for statm): refresh it every few
 * ticks; the summary's peak is also the maximum of the sampled RSS. */
#define PEAK_REFRESH_TICKS 10
/* A process changes its network namespace only by setns()/unshare(), which
 * is rare; the readlink of ns/net costs about 3.5 us per pid (a path walk and
 * a ptrace check), a sixth of a sample: look again every few ticks. */
#define NETNS_RECHECK_TICKS 10
/* A process whose CPU clock did not move since the previous sample has not
 * run: its stat and io are as they were. Reading and parsing stat and io is
 * about 40% of a sample's cost (tests/bench/cost.py -p); they are read
 * anyway every few samples. */
#define STAT_REUSE_MAX 15
/* Nor has it touched its memory: its resident pages can only have been
 * taken away meanwhile (reclaim, swapping). statm is then read every few
 * samples, not at each: it was a fifth of the cost of sampling 1 000 idle
 * processes, and such a drop shows at most that many samples late. */
#define STATM_REUSE_MAX 3

static int open_kept(int dirfd, const char *name) {
        int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        return fd < 0 ? -errno : fd;
}

int fds_kept_below(unsigned num, unsigned den) {
        struct rlimit rl;
        rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
        if (n > 1 << 20)
                n = 1 << 20;
        return (int)(n / den * num);
}

void probe_close_fds(struct probe *r) {
        r->pidfd = safe_close(r->pidfd);
        r->dirfd = safe_close(r->dirfd);
        r->fd_stat = safe_close(r->fd_stat);
        r->fd_statm = safe_close(r->fd_statm);
        r->fd_io = safe_close(r->fd_io);
}

void probe_free(struct probe *r) {
        if (!r)
                return;
        probe_close_fds(r);
        free(r->comm);
        free(r->cmdline);
        accel_run_done(&r->accel);
        for (size_t i = 0; i < r->n_members; i++) {
                accel_member_done(&r->members[i].acc);
                member_fds_close(&r->members[i].fds);
        }
        free(r->members);
        free(r->netns);
        free(r);
}

int probe_attach(const struct collect_ctx *ctx, int pid, uint64_t expect_start_ticks, bool children, struct probe **ret,
                 struct proc_identity *ret_id) {
        _cleanup_close_ int pidfd = -1, dirfd = -1;
        struct proc_stat st;
        struct proc_status status;
        int r;

        if (pid <= 0)
                return -ESRCH;
        /* pidfd first, then the dir, then check the pidfd still refers to a
         * live process: only then is the dir this one's (opening the dir
         * first could pin a recycled pid's process). */
        if (ctx->real_proc) {
                pidfd = pidfd_open(pid, 0);
                /* ENOSYS: a kernel before 5.3 (or valgrind): go on without;
                 * the kept fds still pin the task and see its exit (ESRCH)
                 * at the next tick instead of at once. */
                if (pidfd < 0 && errno != ENOSYS) {
                        /* pidfd_open refuses a thread that is not its
                         * group's leader (EINVAL; ENOENT on 6.9+ kernels):
                         * say which process it belongs to */
                        int e = errno;
                        _cleanup_close_ int d = proc_open_pid_dir(ctx->proc_root, pid);
                        struct proc_status tst;
                        if (d >= 0 && proc_read_status(d, &tst) == 0 && tst.has_tgid && tst.tgid != pid) {
                                if (ret_id)
                                        *ret_id = (struct proc_identity){ .pid = pid, .tgid = tst.tgid };
                                return -EINVAL;
                        }
                        return e == EINVAL || e == ENOENT || e == ESRCH ? -ESRCH : -e;
                }
        }
        dirfd = proc_open_pid_dir(ctx->proc_root, pid);
        if (dirfd < 0)
                return dirfd == -ENOENT ? -ESRCH : dirfd;
        r = proc_read_stat(dirfd, &st);
        if (r < 0)
                return proc_errno_is_gone(r) ? -ESRCH : r;
        r = proc_read_status(dirfd, &status);
        if (r < 0)
                return proc_errno_is_gone(r) ? -ESRCH : r;
        if (pidfd >= 0 && pidfd_send_signal(pidfd, 0, NULL, 0) < 0 && errno == ESRCH)
                return -ESRCH;
        if (st.state == 'Z' || st.state == 'X')
                return -ESRCH;
        if (expect_start_ticks && st.starttime_ticks != expect_start_ticks)
                return -ESRCH;

        struct proc_identity id = {
                .pid = pid,
                .start_ticks = st.starttime_ticks,
                .tgid = status.has_tgid ? status.tgid : pid,
        };
        memcpy(id.comm, st.comm, sizeof id.comm);
        if (status.has_uids) {
                id.uid_real = status.uid_real;
                id.uid_effective = status.uid_effective;
                id.uid_saved = status.uid_saved;
                id.uid_fs = status.uid_fs;
        }
        /* A non-dumpable process's /proc files belong to root (proc(5),
         * "PR_SET_DUMPABLE"): that is how we see it without ptrace. */
        struct stat io_st;
        id.dumpable = fstatat(dirfd, "io", &io_st, 0) == 0 && io_st.st_uid == id.uid_real;
        if (id.uid_real == 0)
                id.dumpable = true;

        struct probe *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->fd_stat = p->fd_statm = p->fd_io = -1;
        p->pidfd = TAKE_FD(pidfd);
        p->dirfd = TAKE_FD(dirfd);
        if (ctx->real_proc) {
                p->fd_stat = open_kept(p->dirfd, "stat");
                p->fd_statm = open_kept(p->dirfd, "statm");
                p->fd_io = open_kept(p->dirfd, "io"); /* may be -EACCES: I/O unknown */
                p->io_readable = p->fd_io >= 0;
                /* near the open-files limit io is opened by name each time
                 * (it is read only when the process ran): a run takes 4 fds */
                if (p->fd_io >= fds_kept_below(3, 4))
                        p->fd_io = safe_close(p->fd_io);
                if (p->fd_stat < 0 || p->fd_statm < 0) {
                        r = p->fd_stat < 0 ? p->fd_stat : p->fd_statm;
                        p->fd_stat = p->fd_statm = -1;
                        probe_free(p);
                        return proc_errno_is_gone(r) ? -ESRCH : r;
                }
        }
        struct stat dir_st;
        p->has_dir_uid = fstat(p->dirfd, &dir_st) == 0;
        p->dir_uid = dir_st.st_uid;
        p->pid = pid;
        p->start_ticks = st.starttime_ticks;
        p->has_uid = status.has_uids;
        p->uid = id.uid_real;
        p->children = children;
        if (status.has_vmhwm) {
                p->has_peak = true;
                p->peak_rss_bytes = status.vmhwm_bytes;
        }
        *ret = p;
        if (ret_id)
                *ret_id = id;
        return 0;
}

/* Reads a file through a kept fd (real /proc) or by name under the dir. */
static ssize_t read_member_file(int kept_fd, int dirfd, const char *name, char *buf, size_t size) {
        if (kept_fd >= 0)
                return pread_text(kept_fd, buf, size);
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return pread_text(fd, buf, size);
}

/* The member pid was in the previous sample, if it has not run since:
 * the same CPU clock (a recycled pid's clock is another's) and a stat
 * read not too long ago. */
static struct member *idle_member(struct probe *r, int pid, const struct reading *x) {
        if (!x->has_cpu)
                return NULL;
        for (size_t i = 0; i < r->n_members; i++) {
                struct member *p = &r->members[i];
                if (p->pid == pid)
                        return p->has_st && p->now.cpu_ns == x->cpu_ns && p->st_reused < STAT_REUSE_MAX ? p : NULL;
        }
        return NULL;
}

/* fds: the member's files (/proc/PID and others), which it takes over;
 * those it opens are added. */
static int read_member(const struct collect_ctx *ctx, struct probe *r, int pid, const struct member_fds *fds, bool main,
                       bool allow_zombie, struct reading *out) {
        char buf[4096];
        ssize_t k;
        memset(out, 0, sizeof *out);
        out->fds = fds ? *fds : MEMBER_FDS_NONE;
        if (!main && out->fds.dir < 0)
                out->fds.dir = proc_open_pid_dir(ctx->proc_root, pid);
        int dirfd = main ? r->dirfd : out->fds.dir;
        if (dirfd < 0) {
                member_fds_close(&out->fds);
                return dirfd;
        }
        out->pid = pid;
        out->dirfd = dirfd;

        /* The clock is read by pid, so read it while the dir fd pins the
         * task and before stat: if stat then still reads through that fd,
         * the task was alive all along and the clock was its own. */
        if (ctx->real_proc)
                out->has_cpu = proc_read_cpu_clock(pid, &out->cpu_ns) == 0;
        const struct member *idle = idle_member(r, pid, out);
        if (idle) {
                out->st = idle->st;
                out->zombie = out->st.state == 'Z';
                out->has_io = idle->now.has_io;
                out->io = (struct proc_io){ .read_bytes = idle->now.read_bytes,
                                            .write_bytes = idle->now.write_bytes,
                                            .rchar = idle->now.rchar_bytes,
                                            .wchar = idle->now.wchar_bytes };
                out->reused_st = true;
                if (!out->zombie && idle->has_statm && idle->statm_reused < STATM_REUSE_MAX) {
                        out->has_statm = out->reused_statm = true;
                        out->statm = idle->statm;
                        return 0;
                }
                goto statm;
        }
        k = read_member_file(main ? r->fd_stat : -1, dirfd, "stat", buf, sizeof buf);
        if (k < 0 || proc_parse_stat(buf, &out->st) < 0)
                goto gone;
        if (out->st.state == 'X' || (out->st.state == 'Z' && !allow_zombie))
                goto gone;
        out->zombie = out->st.state == 'Z';
        if (!out->has_cpu) {
                /* fixture trees (and a clock that could not be read): schedstat; then stat ticks */
                struct proc_schedstat ss;
                k = read_member_file(-1, dirfd, "schedstat", buf, sizeof buf);
                if (k >= 0 && proc_parse_schedstat(buf, &ss) == 0) {
                        out->has_cpu = true;
                        out->cpu_ns = ss.run_ns;
                }
        }
statm:
        /* a zombie has no memory left: its statm reads 0, which is not its RSS */
        if (!main && !out->zombie && out->fds.statm < 0 && ctx->real_proc)
                out->fds.statm = open_kept(dirfd, "statm");
        k = out->zombie ? -1 : read_member_file(main ? r->fd_statm : out->fds.statm, dirfd, "statm", buf, sizeof buf);
        if (k >= 0 && proc_parse_statm(buf, &out->statm) == 0)
                out->has_statm = true;
        if (!out->reused_st && (!main || r->io_readable || !ctx->real_proc)) {
                k = read_member_file(main ? r->fd_io : -1, dirfd, "io", buf, sizeof buf);
                if (k >= 0 && proc_parse_io(buf, &out->io) == 0)
                        out->has_io = true;
        }
        return 0;
gone:
        member_fds_close(&out->fds);
        return -ESRCH;
}

static void reading_done(struct reading *rd) {
        member_fds_close(&rd->fds);
        rd->dirfd = -1;
}

static void close_all(struct member_fds *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                member_fds_close(&fds[i]);
}

static const struct proc_netdev *netdev_cached(struct collect_ctx *ctx, uint64_t inode, int dirfd) {
        for (size_t i = 0; i < ctx->n_nscache; i++)
                if (ctx->nscache[i].inode == inode)
                        return ctx->nscache[i].r == 0 ? &ctx->nscache[i].nd : NULL;
        if (!GREEDY_REALLOC(ctx->nscache, ctx->n_nscache + 1))
                return NULL;
        struct netns_cache *nc = &ctx->nscache[ctx->n_nscache++];
        nc->inode = inode;
        nc->r = proc_read_netdev(dirfd, &nc->nd);
        return nc->r == 0 ? &nc->nd : NULL;
}

void collect_ctx_new_tick(struct collect_ctx *ctx) {
        ctx->n_nscache = 0;
        ctx->tick_id++;
}

void collect_ctx_done(struct collect_ctx *ctx) {
        free(ctx->nscache);
        ctx->nscache = NULL;
        ctx->n_nscache = 0;
}

static struct member *find_member(struct probe *r, int pid, uint64_t start) {
        for (size_t i = 0; i < r->n_members; i++)
                if (r->members[i].pid == pid && r->members[i].start_ticks == start)
                        return &r->members[i];
        return NULL;
}

static uint64_t ticks_to_ns(const struct collect_ctx *ctx, uint64_t t) {
        return t * (1000000000ULL / (uint64_t)ctx->clk_tck);
}

static void collect_accel(struct collect_ctx *ctx, struct probe *r, const struct reading *rd, struct member *nm,
                          size_t n, struct sample *s) {
        _cleanup_free_ int *dirfds = malloc(n * sizeof *dirfds);
        _cleanup_free_ struct accel_member *acc = malloc(n * sizeof *acc);
        if (!dirfds || !acc)
                return;
        for (size_t i = 0; i < n; i++) {
                dirfds[i] = rd[i].dirfd;
                acc[i] = nm[i].acc;
        }
        accel_collect_run(ctx->accel, &r->accel, dirfds, acc, n, s);
        for (size_t i = 0; i < n; i++)
                nm[i].acc = acc[i];
}

/* Network: the counters of each distinct namespace the tree lives in,
 * loopback excluded (Linux has no per-process byte counters). A namespace
 * first seen is a baseline; one that no member is in any more is
 * forgotten, so members hopping namespaces do not grow the table. Returns
 * whether any namespace was read. */
static bool net_deltas(struct collect_ctx *ctx, struct probe *r, const struct reading *rd, size_t nrd, uint64_t *ret_rx,
                       uint64_t *ret_tx) {
        uint64_t d_rx = 0, d_tx = 0;
        bool known = false;

        for (size_t i = 0; i < nrd; i++) {
                if (!rd[i].has_netns)
                        continue;
                bool dup = false;
                for (size_t j = 0; j < i; j++)
                        if (rd[j].has_netns && rd[j].netns == rd[i].netns)
                                dup = true;
                if (dup)
                        continue;
                const struct proc_netdev *nd = netdev_cached(ctx, rd[i].netns, rd[i].dirfd);
                if (!nd)
                        continue;
                known = true;
                struct netns_counter *c = NULL;
                for (size_t j = 0; j < r->n_netns; j++)
                        if (r->netns[j].inode == rd[i].netns)
                                c = &r->netns[j];
                if (!c) {
                        if (!GREEDY_REALLOC(r->netns, r->n_netns + 1))
                                continue;
                        c = &r->netns[r->n_netns++];
                        *c = (struct netns_counter){ .inode = rd[i].netns,
                                                     .rx_bytes = nd->rx_bytes,
                                                     .tx_bytes = nd->tx_bytes,
                                                     .base_rx_bytes = nd->rx_bytes,
                                                     .base_tx_bytes = nd->tx_bytes };
                        r->netns_changed = true;
                }
                d_rx += sat_sub_u64(nd->rx_bytes, c->rx_bytes);
                d_tx += sat_sub_u64(nd->tx_bytes, c->tx_bytes);
                c->rx_bytes = nd->rx_bytes;
                c->tx_bytes = nd->tx_bytes;
        }

        size_t kept = 0;
        for (size_t j = 0; j < r->n_netns; j++) {
                bool in_use = false;
                for (size_t i = 0; i < nrd && !in_use; i++)
                        in_use = rd[i].has_netns && rd[i].netns == r->netns[j].inode;
                if (in_use) {
                        r->netns[kept++] = r->netns[j];
                        continue;
                }
                r->left_rx_bytes += sat_sub_u64(r->netns[j].rx_bytes, r->netns[j].base_rx_bytes);
                r->left_tx_bytes += sat_sub_u64(r->netns[j].tx_bytes, r->netns[j].base_tx_bytes);
                r->netns_changed = true;
        }
        r->n_netns = kept;

        *ret_rx = d_rx;
        *ret_tx = d_tx;
        return known;
}

/* The run's processes now: the main one first, then (for a tree) its
 * descendants. A child that left meanwhile is skipped; -ESRCH when the main
 * process is gone. */
static int read_members(struct collect_ctx *ctx, struct probe *r, bool final, struct reading **ret, size_t *ret_n) {
        _cleanup_free_ int *pids = NULL;
        _cleanup_free_ struct member_fds *fds = NULL;
        size_t npids = 1;
        int q;

        if (r->children) {
                q = tree_collect(ctx, r, &pids, &fds, &npids);
                if (q < 0)
                        return q;
        }

        _cleanup_free_ struct reading *rd = calloc(npids, sizeof *rd);
        if (!rd) {
                if (fds)
                        close_all(fds, npids);
                return -ENOMEM;
        }
        size_t nrd = 0;
        for (size_t i = 0; i < npids; i++) {
                int pid = pids ? pids[i] : r->pid;
                q = read_member(ctx, r, pid, fds ? &fds[i] : NULL, i == 0, final, &rd[nrd]);
                if (q < 0) {
                        if (i == 0) {
                                if (fds)
                                        close_all(fds + 1, npids - 1);
                                return -ESRCH; /* the main process is gone */
                        }
                        continue; /* a child that left: normal */
                }
                nrd++;
        }
        /* Under a fixture root identity comes from the tree: a different
         * start time in the same pid directory is a different process. */
        if (rd[0].st.starttime_ticks != r->start_ticks) {
                for (size_t i = 0; i < nrd; i++)
                        reading_done(&rd[i]);
                return -ESRCH;
        }
        *ret = TAKE_PTR(rd);
        *ret_n = nrd;
        return 0;
}

/* What the run's processes used since the previous sample. */
struct deltas {
        uint64_t cpu_ns, user_ticks, sys_ticks;
        bool io_known;
        uint64_t read, write, rchar, wchar;
        bool net_known;
        uint64_t rx, tx;
};

/* One member's state now, its GPU fd cache moved over from its previous
 * self, and its namespace (re-read every few ticks). */
static void member_update(struct collect_ctx *ctx, struct probe *r, struct reading *x, struct member *m,
                          struct member *p) {
        m->pid = x->pid;
        m->start_ticks = x->st.starttime_ticks;
        m->now = (struct proc_counters){
                /* schedstat is exact (ns); stat ticks are the fallback */
                .cpu_ns = x->has_cpu ? x->cpu_ns : ticks_to_ns(ctx, x->st.utime_ticks + x->st.stime_ticks),
                .utime_ticks = x->st.utime_ticks,
                .stime_ticks = x->st.stime_ticks,
                .has_io = x->has_io,
                .read_bytes = x->io.read_bytes,
                .write_bytes = x->io.write_bytes,
                .rchar_bytes = x->io.rchar,
                .wchar_bytes = x->io.wchar,
        };
        m->has_st = true;
        m->st = x->st;
        m->st_reused = x->reused_st && p ? p->st_reused + 1 : 0;
        m->has_statm = x->has_statm;
        m->statm = x->statm;
        m->statm_reused = x->reused_statm && p ? p->statm_reused + 1 : 0;
        if (p) {
                m->has_smaps = p->has_smaps;
                m->smaps_cpu_ns = p->smaps_cpu_ns;
                m->smaps_resident_pages = p->smaps_resident_pages;
        }
        if (p) { /* the GPU fd cache moves to the new member */
                m->acc = p->acc;
                p->acc = (struct accel_member){ 0 };
        } else
                m->acc = (struct accel_member){ .pid = m->pid, .start_ticks = m->start_ticks };
        if (x->zombie)
                return;
        /* a process that has not run has not moved either */
        if (p && p->has_netns && (x->reused_st || r->ticks - p->netns_tick < NETNS_RECHECK_TICKS)) {
                m->has_netns = true;
                m->netns = p->netns;
                m->netns_tick = p->netns_tick;
        } else {
                m->has_netns = proc_read_netns_inode(x->dirfd, &m->netns) == 0;
                m->netns_tick = r->ticks;
        }
        x->has_netns = m->has_netns;
        x->netns = m->netns;
}

/* The members' new state into nm[], their growth into *d, the gauges
 * (memory, threads, processes) into *s. */
static void members_deltas(struct collect_ctx *ctx, struct probe *r, struct reading *rd, size_t nrd, struct member *nm,
                           struct deltas *d, struct sample *s) {
        bool first = r->ticks == 0 && !r->resume;

        d->io_known = true;
        for (size_t i = 0; i < nrd; i++) {
                struct reading *x = &rd[i];
                struct member *m = &nm[i];
                /* A member seen before contributes its growth; one that
                 * appeared after the baseline was born during the run and
                 * contributes all it has used; at the baseline nothing counts. */
                struct member *p = find_member(r, x->pid, x->st.starttime_ticks);
                member_update(ctx, r, x, m, p);
                struct member zero = { .now.has_io = true };
                if (p) {
                        p->seen = true;
                        m->base = p->base;
                } else if (first)
                        m->base = m->now;
                else
                        m->base = zero.now;
                /* a member born since has reaped nothing before; at the
                 * baseline and after a restart (no stat kept) nothing counts */
                bool prev_st = p && p->has_st;
                m->prev_cutime_ticks = prev_st ? p->st.cutime_ticks : p || first ? m->st.cutime_ticks : 0;
                m->prev_cstime_ticks = prev_st ? p->st.cstime_ticks : p || first ? m->st.cstime_ticks : 0;
                if (!p)
                        p = first ? m : &zero;
                d->cpu_ns += sat_sub_u64(m->now.cpu_ns, p->now.cpu_ns);
                d->user_ticks += sat_sub_u64(m->now.utime_ticks, p->now.utime_ticks);
                d->sys_ticks += sat_sub_u64(m->now.stime_ticks, p->now.stime_ticks);
                if (x->has_io && p->now.has_io) {
                        d->read += sat_sub_u64(m->now.read_bytes, p->now.read_bytes);
                        d->write += sat_sub_u64(m->now.write_bytes, p->now.write_bytes);
                        d->rchar += sat_sub_u64(m->now.rchar_bytes, p->now.rchar_bytes);
                        d->wchar += sat_sub_u64(m->now.wchar_bytes, p->now.wchar_bytes);
                } else if (!x->has_io)
                        d->io_known = false;
                if (x->has_statm) {
                        s->has_rss = true;
                        s->rss_bytes += x->statm.resident_pages * (uint64_t)ctx->page_size;
                        s->rss_anon_bytes += sat_sub_u64(x->statm.resident_pages, x->statm.shared_pages) *
                                             (uint64_t)ctx->page_size;
                }
                s->threads += x->st.num_threads > 0 ? (uint32_t)x->st.num_threads : 0;
        }
        s->processes = (uint32_t)nrd;
}

/* A process that lives and dies between two samples is never read, and
 * one that was read ran on after it: the kernel adds what each used to its
 * parent's cutime and cstime (stat fields 16 and 17) when the parent reaps
 * it, its own reaped children's included. So for each member, the growth of
 * its children's time since the previous sample, less what the members it
 * reaped meanwhile had used as that sample read them (their own time and
 * their children's, from which their tails were counted), is CPU nobody
 * counted yet: it joins the run's, and r->left (a restart goes on from it).
 * In clock ticks: the kernel keeps the sum exact and rounds it once. */
static void reaped_deltas(const struct collect_ctx *ctx, struct probe *r, const struct member *nm, size_t n,
                          struct deltas *d) {
        if (!r->children)
                return;
        for (size_t i = 0; i < n; i++) {
                const struct member *m = &nm[i];
                uint64_t du = sat_sub_u64(m->st.cutime_ticks, m->prev_cutime_ticks);
                uint64_t ds = sat_sub_u64(m->st.cstime_ticks, m->prev_cstime_ticks);
                if (du + ds == 0)
                        continue;
                for (size_t j = 0; j < r->n_members; j++) {
                        const struct member *x = &r->members[j];
                        if (x->seen || !x->has_st || x->st.ppid != m->pid)
                                continue;
                        du = sat_sub_u64(du, x->st.utime_ticks + x->st.cutime_ticks);
                        ds = sat_sub_u64(ds, x->st.stime_ticks + x->st.cstime_ticks);
                }
                d->user_ticks += du;
                d->sys_ticks += ds;
                d->cpu_ns += ticks_to_ns(ctx, du + ds);
                r->left.cpu_ns += ticks_to_ns(ctx, du + ds);
                r->left.utime_ticks += du;
                r->left.stime_ticks += ds;
                r->left_changed = true;
        }
}

/* Members of the previous sample that are gone now: what they used since
 * registration is kept in r->left, which a resumed run starts from. */
static void members_left(struct probe *r) {
        for (size_t i = 0; i < r->n_members; i++) {
                const struct member *p = &r->members[i];
                if (p->seen)
                        continue;
                r->left.cpu_ns += sat_sub_u64(p->now.cpu_ns, p->base.cpu_ns);
                r->left.utime_ticks += sat_sub_u64(p->now.utime_ticks, p->base.utime_ticks);
                r->left.stime_ticks += sat_sub_u64(p->now.stime_ticks, p->base.stime_ticks);
                if (p->now.has_io && p->base.has_io) {
                        r->left.has_io = true;
                        r->left.read_bytes += sat_sub_u64(p->now.read_bytes, p->base.read_bytes);
                        r->left.write_bytes += sat_sub_u64(p->now.write_bytes, p->base.write_bytes);
                        r->left.rchar_bytes += sat_sub_u64(p->now.rchar_bytes, p->base.rchar_bytes);
                        r->left.wchar_bytes += sat_sub_u64(p->now.wchar_bytes, p->base.wchar_bytes);
                }
                r->left_changed = true;
        }
}

/* The first sample of a resumed run: members_deltas() measured the members
 * from their baseline, so with r->left that is what the run used since
 * registration; less the last stored sample, it is what it used while
 * mlmond was down. A member that left during the outage is lost; the
 * saturating subtraction keeps the counters from going back. */
static void resume_deltas(const struct collect_ctx *ctx, const struct probe *r, struct deltas *d) {
        const struct sample *last = &r->last;
        uint64_t tick_ns = ticks_to_ns(ctx, 1);
        d->cpu_ns = sat_sub_u64(r->left.cpu_ns + d->cpu_ns, last->cpu_time_ns);
        d->user_ticks = sat_sub_u64(r->left.utime_ticks + d->user_ticks, last->user_time_ns / tick_ns);
        d->sys_ticks = sat_sub_u64(r->left.stime_ticks + d->sys_ticks, last->system_time_ns / tick_ns);
        if (!d->io_known || !last->has_io)
                return;
        d->read = sat_sub_u64(r->left.read_bytes + d->read, last->read_bytes);
        d->write = sat_sub_u64(r->left.write_bytes + d->write, last->write_bytes);
        d->rchar = sat_sub_u64(r->left.rchar_bytes + d->rchar, last->rchar_bytes);
        d->wchar = sat_sub_u64(r->left.wchar_bytes + d->wchar, last->wchar_bytes);
}

/* The same for the namespaces, once net_deltas() has measured them from
 * their baseline. */
static void resume_net_deltas(const struct probe *r, struct deltas *d) {
        if (!d->net_known || !r->last.has_net)
                return;
        d->rx = sat_sub_u64(r->left_rx_bytes + d->rx, r->last.netns_rx_bytes);
        d->tx = sat_sub_u64(r->left_tx_bytes + d->tx, r->last.netns_tx_bytes);
}

/* The run's peak RSS: the highest tree sum sampled, or the main process's
 * VmHWM when that is higher (its own peak, which the tree's sum at that
 * moment was at least), so never below the current RSS. */
static void peak_update(struct probe *r, const struct reading *main, const struct sample *s) {
        /* VmHWM rises only by the process's own page faults: a process
         * whose CPU clock has not moved since it was read kept its peak (a
         * clock that cannot be read counts as moved; so does an exec, whose
         * first ticks read it anyway) */
        bool ran = !main->has_cpu || !r->has_peak_cpu || main->cpu_ns != r->peak_cpu_ns;
        if ((r->ticks % PEAK_REFRESH_TICKS == 0 && ran) || r->ticks < 3) {
                r->has_peak_cpu = main->has_cpu;
                r->peak_cpu_ns = main->cpu_ns;
                struct proc_status status;
                if (proc_read_status(r->dirfd, &status) == 0 && status.has_vmhwm &&
                    (!r->has_peak || status.vmhwm_bytes > r->peak_rss_bytes)) {
                        r->has_peak = true;
                        r->peak_rss_bytes = status.vmhwm_bytes;
                }
        }
        if (s->has_rss && (!r->has_peak || s->rss_bytes > r->peak_rss_bytes)) {
                r->has_peak = true;
                r->peak_rss_bytes = s->rss_bytes;
        }
}

/* A process registered before it execs (mlmonctl run) changes its comm and
 * cmdline: follow them for the first ticks and on any comm change. */
static void identity_refresh(struct probe *r, const struct reading *main) {
        if (main->zombie || (r->comm && strcmp(main->st.comm, r->comm) == 0 && r->ticks >= 3))
                return;
        _cleanup_free_ char *cmd = NULL;
        if (proc_read_cmdline(r->dirfd, 4096, &cmd) < 0)
                return;
        bool changed = !r->comm || strcmp(main->st.comm, r->comm) != 0 || !r->cmdline || strcmp(cmd, r->cmdline) != 0;
        char *comm = changed ? strdup(main->st.comm) : NULL;
        if (!comm)
                return;
        free(r->comm);
        free(r->cmdline);
        r->comm = comm;
        r->cmdline = TAKE_PTR(cmd);
        r->identity_changed = true;
}

/* A counter so far: the base's (none: 0) plus the delta. */
static uint64_t total(bool has_base, uint64_t base, uint64_t delta) {
        return (has_base ? base : 0) + delta;
}

/* The rates over dt_s of a pair of counters (read and write, rx and tx), if
 * they can be had (a previous sample with the pair, dt_s > 0); returns that,
 * the pair's has_*_rate. */
static bool pair_rates(bool known, uint64_t da, uint64_t db, double dt_s, double *ret_a, double *ret_b) {
        if (!known)
                return false;
        *ret_a = (double)da / dt_s;
        *ret_b = (double)db / dt_s;
        return true;
}

/* The cumulative counters and rates from the deltas. base: the counters so
 * far (zero for a new run, the stored totals for one resumed after a daemon
 * restart); prev: the previous reading, for rates (none at a baseline). */
static void sample_counters(const struct collect_ctx *ctx, const struct probe *r, const struct deltas *d, double dt_s,
                            bool final, struct sample *s) {
        const struct sample *base = &r->last;
        const struct sample *prev = r->has_last ? &r->last : NULL;
        bool rates = prev && dt_s > 0;
        /* without the namespaces' baseline, their counters at the outage's start are unknown */
        bool net_rates = rates && (!r->resume || r->resume_net);

        s->cpu_time_ns = base->cpu_time_ns + d->cpu_ns;
        s->user_time_ns = base->user_time_ns + ticks_to_ns(ctx, d->user_ticks);
        s->system_time_ns = base->system_time_ns + ticks_to_ns(ctx, d->sys_ticks);
        if (rates) {
                s->has_cpu_pct = true;
                s->cpu_pct = (double)d->cpu_ns / 1e9 / dt_s * 100.0;
        }
        if (d->io_known) {
                s->has_io = true;
                s->read_bytes = total(base->has_io, base->read_bytes, d->read);
                s->write_bytes = total(base->has_io, base->write_bytes, d->write);
                s->rchar_bytes = total(base->has_io, base->rchar_bytes, d->rchar);
                s->wchar_bytes = total(base->has_io, base->wchar_bytes, d->wchar);
                s->has_io_rate = pair_rates(rates && prev->has_io, d->read, d->write, dt_s, &s->read_bytes_per_s,
                                            &s->write_bytes_per_s);
        }
        if (d->net_known) {
                s->has_net = true;
                s->netns_rx_bytes = total(base->has_net, base->netns_rx_bytes, d->rx);
                s->netns_tx_bytes = total(base->has_net, base->netns_tx_bytes, d->tx);
                s->has_net_rate = pair_rates(net_rates && prev->has_net, d->rx, d->tx, dt_s, &s->netns_rx_bytes_per_s,
                                             &s->netns_tx_bytes_per_s);
        }
        if (!d->net_known && (final || r->resume) && base->has_net) {
                /* an exited process has no namespace left to read */
                s->has_net = true;
                s->netns_rx_bytes = base->netns_rx_bytes;
                s->netns_tx_bytes = base->netns_tx_bytes;
        }
        if (!s->has_rss && final && r->has_last && r->last.has_rss) {
                /* the exited process's memory is gone: its last RSS stands */
                s->has_rss = true;
                s->rss_bytes = r->last.rss_bytes;
                s->rss_anon_bytes = r->last.rss_anon_bytes;
        }
}

/* The owner of /proc/PID is the process's effective uid, or root once it
 * is not dumpable (proc(5)), read fresh by fstat() on the kept dirfd: a
 * cheap sign that its credentials changed since it was registered. */
static bool credentials_changed(const struct probe *r) {
        struct stat st;
        if (!r->has_dir_uid || !r->has_uid || r->uid == 0)
                return false;
        return fstat(r->dirfd, &st) == 0 && st.st_uid != r->dir_uid;
}

/* The tree's state: its worst member's. A stat reused because its member
 * has not run since (see STAT_REUSE_MAX) still tells its state: a process
 * stops, sleeps, wakes from a stop or exits only by running, which moves its
 * CPU clock, and then its stat is read again. */
static char tree_state(const struct reading *rd, size_t n) {
        char worst = 0;
        for (size_t i = 0; i < n; i++)
                if (proc_state_badness(rd[i].st.state) > proc_state_badness(worst))
                        worst = rd[i].st.state;
        return worst;
}

int probe_exit_status(const struct probe *r, int *ret_status) {
        char buf[4096], state;
        int status;
        ssize_t k = read_member_file(r->fd_stat, r->dirfd, "stat", buf, sizeof buf);
        if (k < 0)
                return proc_errno_is_gone((int)k) ? -ESRCH : (int)k;
        int q = proc_parse_stat_exit(buf, &state, &status);
        if (q < 0)
                return q;
        if (state != 'Z' && state != 'X')
                return -EBUSY;
        *ret_status = status;
        return 0;
}

int probe_sample(struct collect_ctx *ctx, struct probe *r, usec_t now_mono_usec, int64_t now_ms, bool final,
                 struct sample *ret) {
        _cleanup_free_ struct reading *rd = NULL;
        size_t nrd = 0;
        int q;

        q = read_members(ctx, r, final, &rd, &nrd);
        if (q < 0)
                return q;
        if (credentials_changed(r)) {
                for (size_t i = 0; i < nrd; i++)
                        reading_done(&rd[i]);
                return -EPERM;
        }

        struct sample s = { .ts_ms = now_ms };
        struct deltas d = {};
        struct member *nm = calloc(nrd, sizeof *nm);
        if (!nm) {
                for (size_t i = 0; i < nrd; i++)
                        reading_done(&rd[i]);
                return -ENOMEM;
        }
        members_deltas(ctx, r, rd, nrd, nm, &d, &s);
        if (r->resume)
                resume_deltas(ctx, r, &d);
        else {
                members_left(r);
                reaped_deltas(ctx, r, nm, nrd, &d);
        }
        d.net_known = net_deltas(ctx, r, rd, nrd, &d.rx, &d.tx);
        if (r->resume_net)
                resume_net_deltas(r, &d);
        identity_refresh(r, &rd[0]);
        peak_update(r, &rd[0], &s);
        s.proc_state = tree_state(rd, nrd);
        /* Accelerators: the tree's DRM/accel clients and NVML processes.
         * A zombie has closed its fds: its last use stands as it was. */
        if (accel_per_process(ctx->accel) && !rd[0].zombie)
                collect_accel(ctx, r, rd, nm, nrd, &s);
        tree_pss(ctx, r, rd, nm, nrd, now_mono_usec, final, &s);
        for (size_t i = 0; i < nrd; i++) {
                member_fds_keep(ctx, &nm[i].fds, &rd[i].fds);
                reading_done(&rd[i]);
        }

        s.interval_us = r->has_last ? now_mono_usec - r->last_sample_usec : 0;
        double dt_s = (double)s.interval_us / 1e6;
        sample_counters(ctx, r, &d, dt_s, final, &s);
        if (r->has_peak) {
                s.has_peak_rss = true;
                s.peak_rss_bytes = r->peak_rss_bytes;
        }
        if (r->accel.has_energy) {
                s.has_energy = true;
                s.energy_j = r->accel.energy_j;
        }

        for (size_t i = 0; i < r->n_members; i++) { /* members that left */
                accel_member_done(&r->members[i].acc);
                member_fds_close(&r->members[i].fds);
        }
        free(r->members);
        r->members = nm;
        r->n_members = nrd;
        r->last = s;
        r->has_last = true;
        r->last_sample_usec = now_mono_usec;
        r->ticks++;
        if (r->resume) /* the CPU used during the outage is no share of the package's energy since */
                r->accel.has_cpu_mark = false;
        r->resume = r->resume_net = false;
        *ret = s;
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include "ingest/ingest.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "collect/procfs-host.h"
#include "collect/procfs.h"
#include "manager-ops.h"
#include "ingest/statsd.h"

/* Datagrams per recvmmsg and their buffers: StatsD clients keep datagrams
 * under a path MTU (512-8932 bytes); a larger one arrives truncated
 * (MSG_TRUNC) and is counted as malformed rather than half-parsed. */
#define BATCH 16
#define DGRAM_MAX 16384
/* Per wake-up, at most this many batches, so a flood cannot starve the
 * sampler; the socket stays readable and the loop comes back. */
#define BATCHES_PER_WAKEUP 64
#define RCVBUF_BYTES (8 * 1024 * 1024)
/* The UDP index (source port -> socket -> owner uid and run), rebuilt from
 * /proc/net/udp{,6} and the runs' fd tables only when a datagram needs it:
 *  - for a port that is not in it (a new socket), or one without a run
 *    after ingest_forget_ports() (a run came or went): at most once per
 *    INDEX_FAST_GAP, or twenty times the last rebuild's cost if that is
 *    more (reading /proc/net/udp takes milliseconds, however few sockets
 *    there are: rebuilds take at most a twentieth of the time); those
 *    datagrams wait for it (up to DEFER_MAX of them, then they count as
 *    from nobody);
 *  - for a port in it without a run (a run's new child, or a stranger),
 *    at most once per INDEX_SLOW_GAP; for one with a run after
 *    INDEX_MAX_AGE.
 * In between a datagram costs one binary search, hit or miss, however many
 * ports send. */
#define INDEX_MAX_AGE (10 * USEC_PER_SEC)
#define INDEX_SLOW_GAP USEC_PER_SEC
#define INDEX_FAST_GAP (100 * USEC_PER_MSEC)
#define DEFER_MAX 128
/* Sockets looked at per process when the index is built. */
#define INDEX_FDS_PER_PID 65536
/* A mark (a StatsD event) is a database transaction where a timing is an
 * addition in memory, and one datagram may hold hundreds: marks are held to
 * MARKS_PER_SEC, in bursts of as many, across all senders, so that the
 * sampler stays on time; beyond that a mark is dropped and counted as
 * unmatched. A job marks a phase, an epoch or a profiled block: far fewer. */
#define MARKS_PER_SEC 1000

struct listener {
        struct ingest *g;
        int fd;
        bool is_unix;
        sd_event_source *source;
        char *unlink_path;
};

struct udp_entry {
        uint16_t port;
        bool v6;
        uint32_t uid; /* the socket's owner */
        uint64_t inode;
        int64_t run_id; /* the run holding the socket, 0: none */
};

struct deferred {
        uint16_t port;
        bool v6;
        size_t len;
        char data[];
};

struct ingest {
        struct manager_link m;
        sd_event *event;
        char *proc_root;
        int udp_fd; /* the socket systemd passed, until start_udp takes it */
        struct ingest_counters counters;
        struct listener unx, udp;
        uint8_t *bufs;           /* BATCH * DGRAM_MAX, shared: one thread */
        struct udp_entry *index; /* by port, v4 first */
        size_t n_index;
        usec_t index_built; /* 0: never */
        usec_t index_tried;
        usec_t index_cost; /* the last rebuild's */
        bool index_forgotten;
        struct deferred **deferred; /* from unknown ports, until the next rebuild */
        size_t n_deferred;
        sd_event_source *retry;
        double mark_tokens; /* marks allowed now, up to MARKS_PER_SEC */
        usec_t mark_refilled;
};

/* Who sent one datagram: the run its untagged lines go to, and the uid
 * that decides where its tags may reach. */
struct dgram_ctx {
        struct ingest *g;
        bool is_unix;
        int sender_pid;       /* unix: from SCM_CREDENTIALS, 0 if unknown */
        uint16_t sender_port; /* udp */
        bool sender_v6;       /* udp: came over IPv6 */
        bool resolved;
        bool has_uid; /* unix: SCM_CREDENTIALS; udp: the source socket's owner */
        uid_t uid;
        bool has_run; /* run: the run its untagged lines go to */
        struct run_ref run;
};

static int entry_by_inode(const void *a, const void *b) {
        uint64_t x = ((const struct udp_entry *)a)->inode, y = ((const struct udp_entry *)b)->inode;
        return (x > y) - (x < y);
}

static int entry_by_port(const void *a, const void *b) {
        const struct udp_entry *x = a, *y = b;
        if (x->port != y->port)
                return x->port < y->port ? -1 : 1;
        return (x->v6 > y->v6) - (x->v6 < y->v6);
}

/* Marks the index's sockets that pid holds as run's (first run wins). */
static void index_claim(struct ingest *g, int pid, int64_t run_id, uint64_t **inodes, size_t *n_inodes) {
        _cleanup_close_ int piddir = proc_open_pid_dir(g->proc_root, pid);
        *n_inodes = 0;
        if (piddir < 0 || proc_read_socket_inodes(piddir, INDEX_FDS_PER_PID, inodes, n_inodes) < 0)
                return;
        for (size_t i = 0; i < *n_inodes; i++) {
                struct udp_entry key = { .inode = (*inodes)[i] };
                struct udp_entry *e = bsearch(&key, g->index, g->n_index, sizeof *g->index, entry_by_inode);
                /* an inode is one socket: neighbours with the same inode are none */
                if (e && e->run_id == 0)
                        e->run_id = run_id;
        }
}

/* /proc/net/udp{,6} into the index, then the running runs' fd tables
 * (the process, and the members of a registered tree) name the owners. */
static int index_rebuild(struct ingest *g, usec_t now) {
        const struct manager_link *m = &g->m;
        _cleanup_free_ struct proc_udp_socket *socks = NULL;
        _cleanup_free_ uint64_t *inodes = NULL;
        size_t n_socks = 0, n_inodes = 0;

        g->index_tried = now;
        g->index_forgotten = false;
        int r = proc_read_udp_sockets(g->proc_root, &socks, &n_socks);
        if (r < 0) {
                g->n_index = 0;
                return log_debug_errno(r, "statsd: cannot read the UDP socket tables: %m");
        }
        if (!GREEDY_REALLOC(g->index, n_socks)) {
                g->n_index = 0;
                return -ENOMEM;
        }
        for (size_t i = 0; i < n_socks; i++)
                g->index[i] = (struct udp_entry){
                        .port = socks[i].local_port, .v6 = socks[i].v6, .uid = socks[i].uid, .inode = socks[i].inode
                };
        g->n_index = n_socks;
        sort_array(g->index, g->n_index, sizeof *g->index, entry_by_inode);

        _cleanup_free_ struct run_pid *pids = NULL;
        size_t n_pids = 0;
        if (m->ops->run_pids(m->userdata, &pids, &n_pids) < 0)
                n_pids = 0;
        for (size_t i = 0; i < n_pids; i++)
                index_claim(g, pids[i].pid, pids[i].run_id, &inodes, &n_inodes);
        sort_array(g->index, g->n_index, sizeof *g->index, entry_by_port);
        g->index_built = now;
        g->index_cost = now_usec(CLOCK_MONOTONIC) - now;
        return 0;
}

/* The first entry on port, or NULL. */
static const struct udp_entry *index_find(const struct ingest *g, uint16_t port) {
        size_t lo = 0, hi = g->n_index;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (g->index[mid].port < port)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < g->n_index && g->index[lo].port == port ? &g->index[lo] : NULL;
}

enum port_state { PORT_UNKNOWN, PORT_NO_RUN, PORT_RUN };

/* Reads the entries on the sender's port into c. */
static enum port_state udp_sender_read(struct dgram_ctx *c) {
        const struct ingest *g = c->g;
        const struct manager_link *m = &g->m;
        const struct udp_entry *e = index_find(g, c->sender_port);
        int64_t run_id = 0;
        bool found = false;
        c->has_uid = false;
        c->has_run = false;
        for (; e && e < g->index + g->n_index && e->port == c->sender_port; e++) {
                if (c->sender_v6 && !e->v6)
                        continue;
                if (found && e->uid != c->uid)
                        return PORT_NO_RUN; /* ambiguous: neither a uid nor a run */
                found = true;
                c->uid = e->uid;
                if (!run_id)
                        run_id = e->run_id;
        }
        c->has_uid = found;
        if (run_id)
                c->has_run = m->ops->find_run(m->userdata, run_id, &c->run) == 0;
        return !found ? PORT_UNKNOWN : run_id ? PORT_RUN : PORT_NO_RUN;
}

static usec_t index_gap(const struct ingest *g, enum port_state st) {
        if (st != PORT_UNKNOWN)
                return INDEX_SLOW_GAP;
        return 20 * g->index_cost > INDEX_FAST_GAP ? 20 * g->index_cost : INDEX_FAST_GAP;
}

static bool index_due(const struct ingest *g, usec_t now, enum port_state st) {
        if (g->index_forgotten || g->index_built == 0)
                return now - g->index_tried >= index_gap(g, PORT_UNKNOWN);
        if (st == PORT_RUN && now - g->index_built < INDEX_MAX_AGE)
                return false;
        return now - g->index_tried >= index_gap(g, st);
}

/* The sender of a UDP datagram: the socket bound to its source port (an
 * IPv4 datagram may come from an IPv6 socket too). Sockets of different
 * owners on one port (bound to different addresses) make it unknown: a
 * neighbour could bind 127.0.0.2:P to pass for the owner of 127.0.0.1:P.
 * -EAGAIN when the port is new and the index cannot be rebuilt yet, if
 * may_wait. */
static int udp_sender(struct dgram_ctx *c, bool may_wait) {
        struct ingest *g = c->g;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        enum port_state st = udp_sender_read(c);
        c->resolved = true;
        if (index_due(g, now, st)) {
                if (index_rebuild(g, now) >= 0)
                        (void)udp_sender_read(c);
        } else if (may_wait && (st == PORT_UNKNOWN || (st == PORT_NO_RUN && g->index_forgotten)))
                return -EAGAIN;
        return 0;
}

static void resolve_sender(struct dgram_ctx *c) {
        const struct manager_link *m = &c->g->m;
        if (c->resolved)
                return;
        c->resolved = true;
        if (c->is_unix)
                c->has_run = m->ops->run_for_pid(m->userdata, c->sender_pid, &c->run) == 0;
}

/* A tag may reach a run only where the sender could write to it over
 * HTTP: root, or the run's owner. */
static bool sender_may_write(const struct dgram_ctx *c, const struct run_ref *r) {
        return c->has_uid && (c->uid == 0 || (r->has_uid && r->uid == c->uid));
}

static bool mark_allowed(struct ingest *g) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        double t = g->mark_tokens + (double)(now - g->mark_refilled) * MARKS_PER_SEC / USEC_PER_SEC;
        g->mark_refilled = now;
        g->mark_tokens = t > MARKS_PER_SEC ? MARKS_PER_SEC : t;
        if (g->mark_tokens < 1)
                return false;
        g->mark_tokens -= 1;
        return true;
}

/* An event is a mark on the run, labelled with its title, at the moment it
 * is read: after the lines before it in the datagram, and after the
 * datagrams before it on the socket. */
static void take_mark(struct ingest *g, const struct run_ref *r, const struct statsd_metric *x) {
        char label[STATSD_TITLE_MAX + 1];
        int64_t ts;
        memcpy(label, x->name, x->name_len);
        label[x->name_len] = 0;
        if (!mark_allowed(g) || g->m.ops->mark(g->m.userdata, r->id, label, &ts) < 0)
                g->counters.unmatched++;
}

static void on_metric(const struct statsd_metric *x, void *userdata) {
        struct dgram_ctx *c = userdata;
        const struct manager_link *m = &c->g->m;
        struct ingest_counters *n = &c->g->counters;
        struct run_ref r;
        bool found;

        n->received++;
        if (x->has_run || x->has_pid) {
                found = (x->has_run ? m->ops->find_run(m->userdata, x->run, &r)
                                    : m->ops->run_for_pid(m->userdata, x->pid, &r)) == 0;
                if (found && !sender_may_write(c, &r)) {
                        n->refused++;
                        return;
                }
        } else {
                resolve_sender(c);
                found = c->has_run;
                r = c->run;
        }
        if (!found) {
                n->unmatched++;
                return;
        }
        if (x->type == STATSD_EVENT) {
                take_mark(c->g, &r, x);
                return;
        }
        enum op_kind kind = x->type == STATSD_TIMING    ? OP_TIMING
                            : x->type == STATSD_COUNTER ? OP_COUNTER
                            : x->gauge_delta            ? OP_GAUGE_DELTA
                                                        : OP_GAUGE;
        int q = m->ops->observe(m->userdata, r.id, kind, x->name, x->name_len, x->category, x->category_len, x->value,
                                x->sample_rate);
        if (q == -EINVAL)
                n->malformed++;
        else if (q < 0)
                n->unmatched++; /* dropped: too many ops, or out of memory */
}

static void parse_lines(struct dgram_ctx *c, const char *buf, size_t len) {
        uint64_t malformed = 0;
        statsd_parse_datagram(buf, len, on_metric, c, &malformed);
        c->g->counters.malformed += malformed;
        /* an empty datagram is garbage too */
        if (len == 0)
                c->g->counters.malformed++;
}

static void free_deferred(struct ingest *g) {
        for (size_t i = 0; i < g->n_deferred; i++)
                free(g->deferred[i]);
        g->n_deferred = 0;
}

/* The next rebuild is allowed: the datagrams from new ports get it. */
static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        struct ingest *g = userdata;
        (void)index_rebuild(g, now_usec(CLOCK_MONOTONIC));
        for (size_t i = 0; i < g->n_deferred; i++) {
                struct deferred *d = g->deferred[i];
                struct dgram_ctx c = { .g = g, .sender_port = d->port, .sender_v6 = d->v6 };
                (void)udp_sender(&c, false);
                parse_lines(&c, d->data, d->len);
        }
        free_deferred(g);
        return 0;
}

/* Keeps a datagram from a port the index does not know until it may be
 * rebuilt. -ENOSPC when DEFER_MAX are waiting already. */
static int defer_datagram(struct ingest *g, const struct dgram_ctx *c, const char *buf, size_t len) {
        if (g->n_deferred >= DEFER_MAX)
                return -ENOSPC;
        usec_t when = g->index_tried + index_gap(g, PORT_UNKNOWN);
        int r = g->retry ? sd_event_source_set_time(g->retry, when)
                         : sd_event_add_time(g->event, &g->retry, CLOCK_MONOTONIC, when, 0, on_retry, g);
        if (r >= 0)
                r = sd_event_source_set_enabled(g->retry, SD_EVENT_ONESHOT);
        if (r < 0)
                return r;
        struct deferred *d = malloc(sizeof *d + len);
        if (!d || !GREEDY_REALLOC(g->deferred, g->n_deferred + 1)) {
                free(d);
                return -ENOMEM;
        }
        *d = (struct deferred){ .port = c->sender_port, .v6 = c->sender_v6, .len = len };
        memcpy(d->data, buf, len);
        g->deferred[g->n_deferred++] = d;
        return 0;
}

static void handle_datagram(struct ingest *g, const struct mmsghdr *mm, bool is_unix) {
        const struct msghdr *h = &mm->msg_hdr;
        const char *buf = h->msg_iov->iov_base;
        if (h->msg_flags & MSG_TRUNC) {
                g->counters.malformed++;
                return;
        }
        struct dgram_ctx c = { .g = g, .is_unix = is_unix };
        if (is_unix) {
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR((struct msghdr *)h, cm))
                        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
                            cm->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
                                struct ucred cred;
                                memcpy(&cred, CMSG_DATA(cm), sizeof cred);
                                c.sender_pid = cred.pid;
                                c.uid = cred.uid;
                                c.has_uid = true;
                        }
        } else {
                const struct sockaddr_storage *ss = h->msg_name;
                if (ss->ss_family == AF_INET)
                        c.sender_port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
                else if (ss->ss_family == AF_INET6) {
                        c.sender_port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
                        c.sender_v6 = true;
                }
                /* from a new port: wait for the next rebuild if there is room */
                if (udp_sender(&c, g->n_deferred < DEFER_MAX) == -EAGAIN &&
                    defer_datagram(g, &c, buf, mm->msg_len) >= 0)
                        return;
        }
        parse_lines(&c, buf, mm->msg_len);
}

/* Reads what is queued on a listener, up to BATCHES_PER_WAKEUP batches. */
static void read_listener(struct listener *l) {
        struct ingest *g = l->g;
        int fd = l->fd;
        struct mmsghdr mm[BATCH];
        struct iovec iov[BATCH];
        struct sockaddr_storage addr[BATCH];
        union {
                struct cmsghdr align;
                uint8_t buf[CMSG_SPACE(sizeof(struct ucred))];
        } ctl[BATCH];

        for (int b = 0; b < BATCHES_PER_WAKEUP; b++) {
                memset(mm, 0, sizeof mm);
                for (int i = 0; i < BATCH; i++) {
                        iov[i] = (struct iovec){ .iov_base = g->bufs + (size_t)i * DGRAM_MAX, .iov_len = DGRAM_MAX };
                        mm[i].msg_hdr.msg_iov = &iov[i];
                        mm[i].msg_hdr.msg_iovlen = 1;
                        if (l->is_unix) {
                                mm[i].msg_hdr.msg_control = ctl[i].buf;
                                mm[i].msg_hdr.msg_controllen = sizeof ctl[i].buf;
                        } else {
                                mm[i].msg_hdr.msg_name = &addr[i];
                                mm[i].msg_hdr.msg_namelen = sizeof addr[i];
                        }
                }
                int n = recvmmsg(fd, mm, BATCH, MSG_DONTWAIT, NULL);
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                log_debug_errno(errno, "statsd: recvmmsg: %m");
                        return;
                }
                for (int i = 0; i < n; i++)
                        handle_datagram(g, &mm[i], l->is_unix);
                if (n < BATCH)
                        return;
        }
}

static int on_readable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        read_listener(userdata);
        return 0;
}

static void set_rcvbuf(int fd) {
        int sz = RCVBUF_BYTES, cur = 0;
        socklen_t cl = sizeof cur;
        /* never lower a larger buffer (ReceiveBuffer= of a socket unit; the
         * kernel reports twice the size asked for) */
        if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cur, &cl) == 0 && cur >= 2 * sz)
                return;
        /* FORCE needs CAP_NET_ADMIN; the plain one is capped by rmem_max */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) < 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
}

static int listener_watch(struct ingest *g, struct listener *l) {
        l->g = g;
        set_rcvbuf(l->fd);
        return sd_event_add_io(g->event, &l->source, l->fd, EPOLLIN, on_readable, l);
}

static int start_unix(struct ingest *g, const char *path, char *err, size_t errlen) {
        /* anyone may send: lines are attributed by the sender's pid */
        _cleanup_close_ int fd = unix_socket_bind(path, SOCK_DGRAM, true, "statsd_socket", err, errlen);
        if (fd < 0)
                return fd;
        g->unx.fd = TAKE_FD(fd);
        g->unx.is_unix = true;
        g->unx.unlink_path = strdup(path);
        int q = listener_watch(g, &g->unx);
        if (q < 0)
                return errorf(err, errlen, q, "statsd_socket: cannot watch: %m");
        return 0;
}

/* Failure to bind UDP is a warning, not fatal (the port may be taken by a
 * real StatsD server on this host). */
static int bind_udp(const char *spec) {
        struct addrinfo *res = NULL;
        char why[300];
        if (resolve_listen_address(spec, SOCK_DGRAM, &res, why, sizeof why) < 0) {
                log_warning("statsd_udp: %s; UDP StatsD is off", why);
                return -EINVAL;
        }
        _cleanup_close_ int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0) {
                log_warning_errno(errno, "statsd_udp: cannot bind %s: %m; UDP StatsD is off", spec);
                freeaddrinfo(res);
                return -EADDRNOTAVAIL;
        }
        freeaddrinfo(res);
        return TAKE_FD(fd);
}

static void start_udp(struct ingest *g, const char *spec) {
        /* Under systemd the socket comes from mlmond-statsd.socket (so the
         * service needs no AF_INET). */
        int fd = TAKE_FD(g->udp_fd);
        if (fd < 0)
                fd = bind_udp(spec);
        if (fd < 0)
                return;
        g->udp.fd = fd;
        g->udp.is_unix = false;
        if (listener_watch(g, &g->udp) < 0) {
                log_warning("statsd_udp: cannot watch the socket; UDP StatsD is off");
                g->udp.fd = safe_close(g->udp.fd);
        }
}

int ingest_new(const struct ingest_options *o, struct ingest **ret, char *err, size_t errlen) {
        struct ingest *g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->m = o->manager;
        g->event = o->event;
        g->udp_fd = o->udp_fd;
        g->unx.fd = g->udp.fd = -1;
        g->mark_tokens = MARKS_PER_SEC;
        g->mark_refilled = now_usec(CLOCK_MONOTONIC);
        g->bufs = malloc((size_t)BATCH * DGRAM_MAX);
        g->proc_root = strdup(o->proc_root);
        if (!g->bufs || !g->proc_root) {
                ingest_free(g);
                return -ENOMEM;
        }
        if (!address_off(o->unix_path)) {
                int q = start_unix(g, o->unix_path, err, errlen);
                if (q < 0) {
                        ingest_free(g);
                        return q;
                }
        }
        if (!address_off(o->udp))
                start_udp(g, o->udp);
        *ret = g;
        return 0;
}

static void listener_done(struct listener *l) {
        l->source = sd_event_source_disable_unref(l->source);
        l->fd = safe_close(l->fd);
        unlink_and_free(&l->unlink_path);
}

void ingest_free(struct ingest *g) {
        if (!g)
                return;
        listener_done(&g->unx);
        listener_done(&g->udp);
        safe_close(g->udp_fd);
        free(g->bufs);
        free(g->proc_root);
        free(g->index);
        free_deferred(g);
        free(g->deferred);
        sd_event_source_disable_unref(g->retry);
        free(g);
}

const struct ingest_counters *ingest_counters(const struct ingest *g) {
        static const struct ingest_counters none;
        return g ? &g->counters : &none;
}

void ingest_drain(struct ingest *g) {
        if (!g)
                return;
        if (g->unx.fd >= 0)
                read_listener(&g->unx);
        if (g->udp.fd >= 0)
                read_listener(&g->udp);
}

void ingest_forget_ports(struct ingest *g) {
        if (g)
                g->index_forgotten = true;
}

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
#define PORT_CACHE_USEC (10 * USEC_PER_SEC)
#define PORT_CACHE_MISS_USEC (2 * USEC_PER_SEC)
#define PORT_CACHE_MAX 1024

struct listener {
        struct ingest *g;
        int fd;
        bool is_unix;
        sd_event_source *source;
        char *unlink_path;
};

struct port_owner {
        uint16_t port;
        int64_t run_id; /* 0: no registered owner */
        usec_t expires;
};

struct ingest {
        struct manager_link m;
        sd_event *event;
        char *proc_root;
        int udp_fd; /* the socket systemd passed, until start_udp takes it */
        struct ingest_counters counters;
        struct listener unx, udp;
        uint8_t *bufs; /* BATCH * DGRAM_MAX, shared: one thread */
        struct port_owner *ports;
        size_t n_ports;
};

/* What one datagram's lines resolve to when they carry no run/pid tag. */
struct dgram_ctx {
        struct ingest *g;
        bool is_unix;
        int sender_pid;       /* unix: from SCM_CREDENTIALS, 0 if unknown */
        uint16_t sender_port; /* udp */
        bool resolved;
        struct run *run;
};

static bool pid_has_socket(const char *proc_root, int pid, uint64_t inode) {
        _cleanup_close_ int piddir = proc_open_pid_dir(proc_root, pid);
        return piddir >= 0 && proc_has_socket(piddir, inode) > 0;
}

/* The registered process (or member of a registered tree) holding the UDP
 * socket bound to port: /proc/net/udp{,6} gives the socket's inode, the
 * processes' fd tables say who has it. Cached per port. */
static struct run *udp_port_owner(struct ingest *g, uint16_t port) {
        const struct manager_link *m = &g->m;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        for (size_t i = 0; i < g->n_ports; i++)
                if (g->ports[i].port == port && g->ports[i].expires > now)
                        return g->ports[i].run_id ? m->ops->find_run(m->userdata, g->ports[i].run_id) : NULL;

        struct run *owner = NULL;
        uint64_t inode = 0;
        bool have_inode = proc_read_udp_port_inode(g->proc_root, port, &inode) == 0;
        size_t n_runs = 0;
        struct run *const *runs = m->ops->running(m->userdata, &n_runs);
        for (size_t i = 0; have_inode && i < n_runs && !owner; i++) {
                struct run *r = runs[i];
                if (pid_has_socket(g->proc_root, r->info.pid, inode))
                        owner = r;
                for (size_t j = 0; !owner && r->info.children && j < r->n_members; j++)
                        if (r->members[j].pid != r->info.pid && pid_has_socket(g->proc_root, r->members[j].pid, inode))
                                owner = r;
        }

        size_t slot = g->n_ports;
        for (size_t i = 0; i < g->n_ports; i++)
                if (g->ports[i].port == port || g->ports[i].expires <= now) {
                        slot = i;
                        break;
                }
        if (slot == g->n_ports) {
                if (g->n_ports < PORT_CACHE_MAX) {
                        if (!GREEDY_REALLOC(g->ports, g->n_ports + 1))
                                return owner;
                        g->n_ports++;
                } else
                        slot = port % PORT_CACHE_MAX;
        }
        g->ports[slot] = (struct port_owner){ .port = port,
                                              .run_id = owner ? owner->info.id : 0,
                                              .expires = now + (owner ? PORT_CACHE_USEC : PORT_CACHE_MISS_USEC) };
        return owner;
}

static void on_metric(const struct statsd_metric *x, void *userdata) {
        struct dgram_ctx *c = userdata;
        const struct manager_link *m = &c->g->m;
        struct ingest_counters *n = &c->g->counters;
        struct run *r;

        n->received++;
        if (x->has_run)
                r = m->ops->find_run(m->userdata, x->run);
        else if (x->has_pid)
                r = m->ops->run_for_pid(m->userdata, x->pid);
        else {
                if (!c->resolved) {
                        c->run = c->is_unix ? m->ops->run_for_pid(m->userdata, c->sender_pid)
                                            : udp_port_owner(c->g, c->sender_port);
                        c->resolved = true;
                }
                r = c->run;
        }
        if (!r) {
                n->unmatched++;
                return;
        }
        enum op_kind kind = x->type == STATSD_TIMING    ? OP_TIMING
                            : x->type == STATSD_COUNTER ? OP_COUNTER
                            : x->gauge_delta            ? OP_GAUGE_DELTA
                                                        : OP_GAUGE;
        int q = m->ops->observe(m->userdata, r, kind, x->name, x->name_len, x->category, x->category_len, x->value,
                                x->sample_rate);
        if (q == -EINVAL)
                n->malformed++;
        else if (q < 0)
                n->unmatched++; /* dropped: too many ops, or out of memory */
}

static void handle_datagram(struct ingest *g, const struct mmsghdr *mm, bool is_unix) {
        const struct msghdr *h = &mm->msg_hdr;
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
                        }
        } else {
                const struct sockaddr_storage *ss = h->msg_name;
                if (ss->ss_family == AF_INET)
                        c.sender_port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
                else if (ss->ss_family == AF_INET6)
                        c.sender_port = ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
        }
        uint64_t malformed = 0;
        statsd_parse_datagram((const char *)h->msg_iov->iov_base, mm->msg_len, on_metric, &c, &malformed);
        g->counters.malformed += malformed;
        /* an empty datagram is garbage too */
        if (mm->msg_len == 0)
                g->counters.malformed++;
}

static int on_readable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct listener *l = userdata;
        struct ingest *g = l->g;
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
                        return 0;
                }
                for (int i = 0; i < n; i++)
                        handle_datagram(g, &mm[i], l->is_unix);
                if (n < BATCH)
                        return 0;
        }
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
        free(g->ports);
        free(g);
}

const struct ingest_counters *ingest_counters(const struct ingest *g) {
        static const struct ingest_counters none;
        return g ? &g->counters : &none;
}

void ingest_forget_ports(struct ingest *g) {
        if (g)
                g->n_ports = 0;
}

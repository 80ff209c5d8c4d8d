/* SPDX-License-Identifier: MIT */
/* Per-process files: /proc/PID/{stat,statm,schedstat,io,status,net/dev},
 * the children lists, the namespace and socket links. */
#include "collect/procfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "collect/procfs-text.h"

/* ---- parsers ------------------------------------------------------------ */

/* /proc/PID/stat, one line, 52 fields on current kernels:
 *
 *   3861 (cat) R 3852 3852 2595 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 30576 3133440 412 18446744073709551615 ...
 *   2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 24 0 0 18446744073709551615 ...
 *
 * comm is printed raw, and for kernel threads and workqueue workers it is the
 * full name ("kworker/u8:0-kvfree_rcu_reclaim", up to 63 bytes), so it may be
 * longer than TASK_COMM_LEN and contain spaces, ')' and newlines; everything
 * after the LAST ')' is numeric. Fields we do not use only have to exist. */
int proc_parse_stat(const char *text, struct proc_stat *ret) {
        struct proc_stat st = {};
        const char *open, *close, *end, *p, *word[25];
        size_t n, len[25];
        int r;

        open = strchr(text, '(');
        close = strrchr(text, ')');
        if (!open || !close || close < open || open == text || open[-1] != ' ')
                return -EINVAL;

        r = word_to_pid(text, (size_t)(open - 1 - text), &st.pid);
        if (r < 0)
                return r;

        n = (size_t)(close - open - 1);
        if (n >= sizeof st.comm)
                n = sizeof st.comm - 1;
        memcpy(st.comm, open + 1, n);
        st.comm[n] = 0;

        end = close + strlen(close);
        p = close + 1;
        if (p >= end || *p != ' ')
                return -EINVAL;

        /* fields 3..24 by their proc(5) number; later ones are ignored */
        for (unsigned f = 3; f < ELEMENTSOF(word); f++) {
                len[f] = next_word(&p, end, &word[f]);
                if (len[f] == 0)
                        return -EINVAL;
        }

        if (len[3] != 1)
                return -EINVAL;
        st.state = *word[3];

        /* num_threads (20) and rss (24) are printed signed ("%ld") by older
         * kernels */
        const struct {
                unsigned field;
                enum word_kind kind;
                void *out;
        } fields[] = {
                { 4, WORD_PID, &st.ppid },
                { 9, WORD_UINT, &st.flags },
                { 10, WORD_U64, &st.minflt },
                { 12, WORD_U64, &st.majflt },
                { 14, WORD_U64, &st.utime_ticks },
                { 15, WORD_U64, &st.stime_ticks },
                { 16, WORD_U64, &st.cutime_ticks },
                { 17, WORD_U64, &st.cstime_ticks },
                { 22, WORD_U64, &st.starttime_ticks },
                { 23, WORD_U64, &st.vsize_bytes },
                { 20, WORD_I64, &st.num_threads },
                { 24, WORD_I64, &st.rss_pages },
        };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                unsigned f = fields[i].field;
                r = word_to(fields[i].kind, word[f], len[f], fields[i].out);
                if (r < 0)
                        return r;
        }

        *ret = st;
        return 0;
}

/* Field 52 of /proc/PID/stat (Linux 3.5 and later): the exit status as
 * wait(2) would report it ((code << 8) | signal, 0x80 for a core dump). The
 * kernel prints the task's exit_code, which is set once it has exited: a
 * zombie's is how it ended, a live process's is 0 (or the stop signal of a
 * traced one), and so is the field of a process the reader may not trace.
 * Only the state letter and this field are read; the rest must just be
 * there.
 *
 *   4242 (python3) Z 4240 4242 ... 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 9 */
int proc_parse_stat_exit(const char *text, char *ret_state, int *ret_status) {
        const char *close = strrchr(text, ')'), *end, *p, *w = NULL;
        size_t n = 0;
        int64_t v;
        char state = 0;
        if (!close)
                return -EINVAL;
        end = close + strlen(close);
        p = close + 1;
        for (unsigned f = 3; f <= 52; f++) {
                const char *x;
                size_t k = next_word(&p, end, &x);
                if (k == 0)
                        return f == 3 ? -EINVAL : -ENODATA; /* a kernel before 3.5 */
                if (f == 3 && k != 1)
                        return -EINVAL;
                if (f == 3)
                        state = *x;
                w = x;
                n = k;
        }
        int r = word_to_i64(w, n, &v);
        if (r < 0 || v < 0 || v > 0xffff)
                return r < 0 ? r : -ERANGE;
        *ret_state = state;
        *ret_status = (int)v;
        return 0;
}

/* The names by which the API shows a state letter (stat field 3, as ps
 * prints it): R running, S sleeping (I: an idle kernel thread), D
 * uninterruptible sleep, T stopped by a signal, t stopped by a tracer, Z
 * zombie (X dead: never seen but in passing). */
const char *proc_state_name(char state) {
        switch (state) {
        case 'R':
                return "running";
        case 'S':
        case 'I':
                return "sleeping";
        case 'D':
                return "disk-sleep";
        case 'T':
        case 't':
                return "stopped";
        case 'Z':
        case 'X':
                return "zombie";
        }
        return NULL;
}

/* How much a state says that something is wrong, for a tree's worst
 * member: a stopped process stalls everything that waits for it, one in
 * uninterruptible sleep may be stuck in a driver, a zombie was not reaped;
 * running and sleeping are what healthy processes do. */
int proc_state_badness(char state) {
        switch (state) {
        case 'T':
        case 't':
                return 5;
        case 'D':
                return 4;
        case 'Z':
        case 'X':
                return 3;
        case 'R':
                return 2;
        case 'S':
        case 'I':
                return 1;
        }
        return 0;
}

/* The first n (3 to 8) numbers of a one-line file, the first three stored
 * (and nothing on failure): statm and schedstat. */
static int parse_first_three(const char *text, size_t n, uint64_t *ret_a, uint64_t *ret_b, uint64_t *ret_c) {
        uint64_t v[8];
        if (n < 3 || n > ELEMENTSOF(v))
                return -EINVAL;
        int r = parse_u64_fields(text, v, n);
        if (r < 0)
                return r;
        *ret_a = v[0];
        *ret_b = v[1];
        *ret_c = v[2];
        return 0;
}

/* /proc/PID/statm, pages: "size resident shared text lib data dt"
 *
 *   1251 993 758 193 0 270 0
 *
 * Kernel threads have no mm and show "0 0 0 0 0 0 0". */
int proc_parse_statm(const char *text, struct proc_statm *ret) {
        /* text lib data dt are not kept, but must be there */
        return parse_first_three(text, 7, &ret->size_pages, &ret->resident_pages, &ret->shared_pages);
}

/* /proc/PID/schedstat: time on cpu (ns), time waiting on a runqueue (ns),
 * number of timeslices run. All zero without CONFIG_SCHEDSTATS/SCHED_INFO.
 *
 *   17551182 2041199 53
 */
int proc_parse_schedstat(const char *text, struct proc_schedstat *ret) {
        return parse_first_three(text, 3, &ret->run_ns, &ret->wait_ns, &ret->timeslices);
}

/* /proc/PID/io:
 *
 *   rchar: 1168749
 *   wchar: 60240
 *   syscr: 9529
 *   syscw: 357
 *   read_bytes: 3280896
 *   write_bytes: 225280
 *   cancelled_write_bytes: 94208
 *
 * Every key is required, once. */
int proc_parse_io(const char *text, struct proc_io *ret) {
        struct proc_io io = {};
        const struct proc_key keys[] = {
                { "rchar", value_u64, &io.rchar },
                { "wchar", value_u64, &io.wchar },
                { "syscr", value_u64, &io.syscr },
                { "syscw", value_u64, &io.syscw },
                { "read_bytes", value_u64, &io.read_bytes },
                { "write_bytes", value_u64, &io.write_bytes },
                { "cancelled_write_bytes", value_u64, &io.cancelled_write_bytes },
        };
        unsigned seen;
        int r = parse_key_values(text, keys, ELEMENTSOF(keys), &seen);
        if (r < 0)
                return r;
        if (seen != (1u << ELEMENTSOF(keys)) - 1)
                return -EINVAL;

        *ret = io;
        return 0;
}

/* "Uid:" real, effective, saved and fs uids (ret: the struct proc_status). */
static int status_uids(const char *value, const char *end, void *ret) {
        struct proc_status *s = ret;
        unsigned u[4];
        const char *w;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(u); i++) {
                size_t n = next_word(&value, end, &w);
                r = word_to_uint(w, n, &u[i]);
                if (r < 0)
                        return r;
        }
        if (next_word(&value, end, &w) > 0)
                return -EINVAL;

        s->uid_real = u[0];
        s->uid_effective = u[1];
        s->uid_saved = u[2];
        s->uid_fs = u[3];
        return 0;
}

static int value_pid(const char *s, const char *end, void *ret) {
        return value_word(s, end, WORD_PID, ret);
}

static int value_i64(const char *s, const char *end, void *ret) {
        return value_word(s, end, WORD_I64, ret);
}

/* /proc/PID/status, the keys we use (tab separated; kernel threads have no
 * Vm and Rss lines, RssAnon exists since 4.5):
 *
 *   Tgid:   2595
 *   PPid:   2594
 *   Uid:    0       0       0       0
 *   VmHWM:      3972 kB
 *   VmRSS:      3972 kB
 *   RssAnon:     940 kB
 *   Threads:        1
 */
int proc_parse_status(const char *text, struct proc_status *ret) {
        struct proc_status s = {};
        const struct proc_key keys[] = {
                { "Tgid", value_pid, &s.tgid },
                { "PPid", value_pid, &s.ppid },
                { "Uid", status_uids, &s },
                { "VmHWM", value_kb, &s.vmhwm_bytes },
                { "VmRSS", value_kb, &s.vmrss_bytes },
                { "RssAnon", value_kb, &s.rssanon_bytes },
                { "Threads", value_i64, &s.threads },
        };
        /* which has_ flag each key sets; PPid has none */
        bool *has[ELEMENTSOF(keys)] = {
                &s.has_tgid, NULL, &s.has_uids, &s.has_vmhwm, &s.has_vmrss, &s.has_rssanon, &s.has_threads,
        };
        unsigned seen;
        int r = parse_key_values(text, keys, ELEMENTSOF(keys), &seen);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (has[i])
                        *has[i] = seen & (1u << i);

        *ret = s;
        return 0;
}

/* /proc/PID/smaps_rollup: a first line naming the rolled-up range, then
 * "Key:   N kB" lines:
 *
 *   55c872459000-7ffd55517000 ---p 00000000 00:00 0      [rollup]
 *   Rss:                1628 kB
 *   Pss:                 192 kB
 *   Pss_Anon:            112 kB
 *   Private_Clean:        40 kB
 *   Private_Dirty:       112 kB
 *
 * Rss, Pss and the Private_ pair are required; Pss_Anon is newer. */
int proc_parse_smaps_rollup(const char *text, struct proc_smaps *ret) {
        struct proc_smaps s = {};
        const struct proc_key keys[] = {
                { "Rss", value_kb, &s.rss_bytes },
                { "Pss", value_kb, &s.pss_bytes },
                { "Private_Clean", value_kb, &s.private_clean_bytes },
                { "Private_Dirty", value_kb, &s.private_dirty_bytes },
                { "Pss_Anon", value_kb, &s.pss_anon_bytes },
                { "Anonymous", value_kb, &s.anonymous_bytes },
        };
        unsigned seen;
        int r = parse_key_values(text, keys, ELEMENTSOF(keys), &seen);
        if (r < 0)
                return r;
        if ((seen & 0xfu) != 0xfu)
                return -EINVAL;
        s.has_pss_anon = seen & 0x10u;
        *ret = s;
        return 0;
}

/* /proc/PID/net/dev, the counters of PID's network namespace:
 *
 *   Inter-|   Receive                                                |  Transmit
 *    face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
 *       lo:    3267      29    0    0    0     0          0         0     3267      29    0    0    0     0       0          0
 *     eth0: 8273645    6021    0    0    0     0          0         0   912345    4012    0    0    0     0       0          0
 *
 * Old kernels printed "%6s:%8lu", so a large rx byte count runs straight into
 * the colon ("  eth0:1234567890 ..."): split on the colon, not on blanks.
 * Interface names cannot contain ':' (dev_valid_name()). */
int proc_parse_netdev(const char *text, struct proc_netdev *ret) {
        struct proc_netdev nd = {};
        const char *p = text, *line, *end;

        /* two header lines */
        for (unsigned i = 0; i < 2; i++)
                if (!next_line(&p, &end))
                        return -EINVAL;

        while ((line = next_line(&p, &end))) {
                const char *value, *name, *w, *q;
                size_t keylen, n;
                uint64_t v[16];
                int r;

                q = line;
                if (next_word(&q, end, &w) == 0)
                        continue; /* blank line */

                if (!split_key(line, end, &keylen, &value))
                        return -EINVAL;
                q = line;
                n = next_word(&q, line + keylen, &name);
                if (n == 0 || next_word(&q, line + keylen, &w) > 0)
                        return -EINVAL;

                for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                        r = next_u64(&value, end, &v[i]);
                        if (r < 0)
                                return r;
                }

                if (word_is(name, n, "lo"))
                        continue;

                /* rx: bytes packets errs drop fifo frame compressed multicast,
                 * tx: bytes packets ... */
                if (__builtin_add_overflow(nd.rx_bytes, v[0], &nd.rx_bytes) ||
                    __builtin_add_overflow(nd.rx_packets, v[1], &nd.rx_packets) ||
                    __builtin_add_overflow(nd.tx_bytes, v[8], &nd.tx_bytes) ||
                    __builtin_add_overflow(nd.tx_packets, v[9], &nd.tx_packets))
                        return -ERANGE;
                nd.interfaces++;
        }

        *ret = nd;
        return 0;
}

/* /proc/PID/task/TID/children: "%d " per child, no newline; empty when
 * there are none.
 *
 *   "101 102 "
 *
 * Validates everything before growing the array, so a bad text leaves
 * *pids and *n as they were. */
int proc_parse_pid_list(const char *text, int **pids, size_t *n) {
        const char *p, *end = text + strlen(text), *w;
        size_t count = 0, len;
        int pid, r;

        for (p = text; (len = next_word(&p, end, &w)) > 0; count++) {
                r = word_to_pid(w, len, &pid);
                if (r < 0)
                        return r;
                if (pid == 0)
                        return -EINVAL;
        }
        if (count == 0)
                return 0;

        if (*n + count < *n || !GREEDY_REALLOC(*pids, *n + count))
                return -ENOMEM;

        for (p = text; (len = next_word(&p, end, &w)) > 0;)
                (void)word_to_pid(w, len, &(*pids)[(*n)++]);
        return 0;
}

int proc_open_pid_dir(const char *proc_root, int pid) {
        char path[PATH_MAX];
        int fd;

        if (pid <= 0)
                return -EINVAL;
        if ((size_t)snprintf(path, sizeof path, "%s/%d", proc_root, pid) >= sizeof path)
                return -ENAMETOOLONG;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return fd;
}

/* proc_read_NAME(): /proc/PID/NAME read into a stack buffer of size bytes,
 * then proc_parse_NAME(). */
#define DEFINE_PROC_READ_SMALL(name, size)                             \
        int proc_read_##name(int piddir, struct proc_##name *ret) {    \
                char buf[size];                                        \
                int r = read_small_at(piddir, #name, buf, sizeof buf); \
                return r < 0 ? r : proc_parse_##name(buf, ret);        \
        }

DEFINE_PROC_READ_SMALL(stat, 4096) /* 52 fields of at most 20 digits plus a 64-byte comm */
DEFINE_PROC_READ_SMALL(statm, 256)
DEFINE_PROC_READ_SMALL(io, 1024)
DEFINE_PROC_READ_SMALL(schedstat, 256)

int proc_read_status(int piddir, struct proc_status *ret) {
        _cleanup_free_ char *buf = NULL;
        int r = read_big_at(piddir, "status", PROC_BIG_MAX, &buf);
        return r < 0 ? r : proc_parse_status(buf, ret);
}

int proc_read_smaps_rollup(int piddir, struct proc_smaps *ret) {
        char buf[4096]; /* about 800 bytes today */
        int r = read_small_at(piddir, "smaps_rollup", buf, sizeof buf);
        return r < 0 ? r : proc_parse_smaps_rollup(buf, ret);
}

int proc_read_netdev(int piddir, struct proc_netdev *ret) {
        _cleanup_free_ char *buf = NULL;
        int r = read_big_at(piddir, "net/dev", PROC_BIG_MAX, &buf);
        return r < 0 ? r : proc_parse_netdev(buf, ret);
}

int proc_read_cmdline(int piddir, size_t max, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        r = read_file_at(piddir, "cmdline", max, &buf, &len);
        if (r < 0)
                return r;

        /* argv is NUL-separated and NUL-terminated; empty for kernel threads
         * and zombies */
        for (size_t i = 0; i < len; i++)
                if (buf[i] == 0)
                        buf[i] = ' ';
        while (len > 0 && buf[len - 1] == ' ')
                len--;
        buf[len] = 0;

        *ret = TAKE_PTR(buf);
        return 0;
}

static int cmp_int(const void *a, const void *b) {
        int x = *(const int *)a, y = *(const int *)b;
        return (x > y) - (x < y);
}

/* PREFIX/TID/children under dir appended to *pids: a stack buffer first,
 * the heap for a long list (it may hold thousands of pids). */
static int read_thread_children(int taskdir, const char *prefix, int tid, int **pids, size_t *n) {
        char path[64], small[1024];
        snprintf(path, sizeof path, "%s%d/children", prefix, tid);
        int r = read_small_at(taskdir, path, small, sizeof small);
        if (r == -EFBIG) {
                _cleanup_free_ char *buf = NULL;
                r = read_big_at(taskdir, path, PROC_BIG_MAX, &buf);
                return r < 0 ? r : proc_parse_pid_list(buf, pids, n);
        }
        return r < 0 ? r : proc_parse_pid_list(small, pids, n);
}

/* Sorted and deduplicated: a child forked by one thread is listed once,
 * but a pid may show up twice when one child exits and the pid is reused
 * while we read. */
static void children_done(int *pids, size_t n, int **ret_pids, size_t *ret_n) {
        size_t m = 0;
        if (n > 1)
                sort_array(pids, n, sizeof(int), cmp_int);
        for (size_t i = 0; i < n; i++)
                if (m == 0 || pids[m - 1] != pids[i])
                        pids[m++] = pids[i];
        if (m == 0) {
                free(pids);
                pids = NULL;
        }
        *ret_pids = pids;
        *ret_n = m;
}

int proc_read_children(int piddir, int **ret_pids, size_t *ret_n) {
        _cleanup_closedir_ DIR *d = NULL;
        int *pids = NULL;
        size_t n = 0;
        int r;

        r = opendir_at(piddir, "task", &d);
        if (r < 0)
                return r;

        for (;;) {
                struct dirent *de;
                struct stat st;
                int tid;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                r = -errno;
                        break;
                }
                if (word_to_pid(de->d_name, strlen(de->d_name), &tid) < 0 || tid == 0)
                        continue; /* ".", ".." */

                r = read_thread_children(dirfd(d), "", tid, &pids, &n);
                if (r == -ENOENT) {
                        /* Either the thread exited since readdir(), or the
                         * kernel has no children files at all
                         * (CONFIG_PROC_CHILDREN=n) — the thread's directory
                         * tells which. */
                        if (fstatat(dirfd(d), de->d_name, &st, 0) >= 0) {
                                r = -EOPNOTSUPP;
                                break;
                        }
                } else if (r < 0 && r != -ESRCH)
                        break;
                r = 0;
        }
        if (r < 0) {
                free(pids);
                return r;
        }
        children_done(pids, n, ret_pids, ret_n);
        return 0;
}

int proc_read_thread_children(int piddir, int tid, int **ret_pids, size_t *ret_n) {
        int *pids = NULL;
        size_t n = 0;
        int r = read_thread_children(piddir, "task/", tid, &pids, &n);
        if (r < 0) {
                free(pids);
                return r;
        }
        children_done(pids, n, ret_pids, ret_n);
        return 0;
}

int proc_read_netns_inode(int piddir, uint64_t *ret) {
        char buf[64];
        ssize_t k;
        size_t len;
        int r;

        k = readlinkat(piddir, "ns/net", buf, sizeof buf);
        if (k >= 0) {
                if ((size_t)k >= sizeof buf)
                        return -EINVAL;
                return parse_link_inode(buf, (size_t)k, "net", ret);
        }
        if (errno != EINVAL)
                return -errno;

        /* not a symlink: a fixture tree holding the link text in a file */
        r = read_small_at(piddir, "ns/net", buf, sizeof buf);
        if (r < 0)
                return r == -EFBIG ? -EINVAL : r;
        len = strlen(buf);
        if (len > 0 && buf[len - 1] == '\n')
                len--;
        return parse_link_inode(buf, len, "net", ret);
}

int proc_read_socket_inodes(int piddir, size_t max, uint64_t **inodes, size_t *n) {
        _cleanup_closedir_ DIR *d = NULL;
        int r = opendir_at(piddir, "fd", &d);
        if (r < 0)
                return r;

        for (size_t seen = 0; seen < max;) {
                char link[64];
                uint64_t v;
                ssize_t k;

                errno = 0;
                struct dirent *de = readdir(d);
                if (!de)
                        return errno != 0 ? -errno : 0;
                if (de->d_name[0] == '.')
                        continue;
                k = readlinkat(dirfd(d), de->d_name, link, sizeof link);
                if (k <= 0 || (size_t)k >= sizeof link || parse_link_inode(link, (size_t)k, "socket", &v) < 0)
                        continue; /* closed since readdir(), or not a socket */
                if (!GREEDY_REALLOC(*inodes, *n + 1))
                        return -ENOMEM;
                (*inodes)[(*n)++] = v;
                seen++;
        }
        return 0;
}

int proc_read_cpu_clock(int pid, uint64_t *ret) {
        clockid_t cid;
        struct timespec ts;
        int r = clock_getcpuclockid(pid, &cid);
        if (r != 0)
                return -r;
        if (clock_gettime(cid, &ts) < 0)
                return -errno;
        *ret = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        return 0;
}

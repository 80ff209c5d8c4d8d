/* SPDX-License-Identifier: MIT */
#include "collect/procfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

/* Files whose size is bounded by a few hundred bytes go through a stack
 * buffer; status (Groups: can list 65536 gids), net/dev (one line per
 * interface), meminfo and /proc/stat (one line per CPU plus the intr line)
 * are read whole, up to this cap. */
#define PROC_BIG_MAX (1024u * 1024u)

/* ---- tokenizing --------------------------------------------------------- */

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\n';
}

/* Next run of non-blank bytes in [*p, end): stores its start in *ret and
 * returns its length, 0 when only blanks are left. */
static size_t next_word(const char **p, const char *end, const char **ret) {
        const char *s = *p;
        while (s < end && is_blank(*s))
                s++;
        const char *w = s;
        while (s < end && !is_blank(*s))
                s++;
        *p = s;
        *ret = w;
        return (size_t)(s - w);
}

/* Next line of a NUL-terminated text: returns its start and stores its end
 * (the '\n' or the NUL) in *ret_end; NULL when the text is exhausted. */
static const char *next_line(const char **p, const char **ret_end) {
        const char *s = *p;
        if (!*s)
                return NULL;
        const char *nl = strchrnul(s, '\n');
        *ret_end = nl;
        *p = *nl ? nl + 1 : nl;
        return s;
}

static bool all_digits(const char *w, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (w[i] < '0' || w[i] > '9')
                        return false;
        return true;
}

static bool word_is(const char *w, size_t n, const char *lit) {
        return strlen(lit) == n && memcmp(w, lit, n) == 0;
}

/* The words are not NUL-terminated; copy so safe_ato*() can check them. */
static int word_to_u64(const char *w, size_t n, uint64_t *ret) {
        char buf[32];
        if (n == 0)
                return -EINVAL;
        if (n >= sizeof buf)
                /* UINT64_MAX has 20 digits and the kernel never zero-pads */
                return all_digits(w, n) ? -ERANGE : -EINVAL;
        memcpy(buf, w, n);
        buf[n] = 0;
        return safe_atou64(buf, ret);
}

static int word_to_i64(const char *w, size_t n, int64_t *ret) {
        char buf[32];
        if (n == 0)
                return -EINVAL;
        if (n >= sizeof buf)
                return all_digits(w + (*w == '-'), n - (*w == '-')) ? -ERANGE : -EINVAL;
        memcpy(buf, w, n);
        buf[n] = 0;
        return safe_atoi64(buf, ret);
}

static int word_to_uint(const char *w, size_t n, unsigned *ret) {
        uint64_t v;
        int r = word_to_u64(w, n, &v);
        if (r < 0)
                return r;
        if (v > UINT_MAX)
                return -ERANGE;
        *ret = (unsigned)v;
        return 0;
}

/* pids, tgids, ppids: 0..INT_MAX */
static int word_to_pid(const char *w, size_t n, int *ret) {
        uint64_t v;
        int r = word_to_u64(w, n, &v);
        if (r < 0)
                return r;
        if (v > INT_MAX)
                return -ERANGE;
        *ret = (int)v;
        return 0;
}

/* Next word of [*p, end) as a number; -EINVAL when there is none. */
static int next_u64(const char **p, const char *end, uint64_t *ret) {
        const char *w;
        size_t n = next_word(p, end, &w);
        return word_to_u64(w, n, ret);
}

/* The whole of [s, end) is one unsigned number. */
static int value_u64(const char *s, const char *end, uint64_t *ret) {
        const char *w, *extra;
        uint64_t v;
        size_t n = next_word(&s, end, &w);
        int r = word_to_u64(w, n, &v);
        if (r < 0)
                return r;
        if (next_word(&s, end, &extra) > 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* The whole of [s, end) is "N kB"; returns N * 1024. */
static int value_kb(const char *s, const char *end, uint64_t *ret) {
        const char *w, *unit, *extra;
        uint64_t v;
        size_t n = next_word(&s, end, &w);
        int r = word_to_u64(w, n, &v);
        if (r < 0)
                return r;
        n = next_word(&s, end, &unit);
        if (!word_is(unit, n, "kB") || next_word(&s, end, &extra) > 0)
                return -EINVAL;
        if (__builtin_mul_overflow(v, 1024u, &v))
                return -ERANGE;
        *ret = v;
        return 0;
}

/* Splits "Key: value" into the key [line, colon) and the value after the
 * colon. Returns false for a line without a colon. */
static bool split_key(const char *line, const char *end, size_t *ret_keylen, const char **ret_value) {
        const char *colon = memchr(line, ':', (size_t)(end - line));
        if (!colon)
                return false;
        *ret_keylen = (size_t)(colon - line);
        *ret_value = colon + 1;
        return true;
}

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

        r = word_to_pid(word[4], len[4], &st.ppid);
        if (r < 0)
                return r;
        r = word_to_uint(word[9], len[9], &st.flags);
        if (r < 0)
                return r;

        const struct {
                unsigned field;
                uint64_t *out;
        } u64s[] = {
                { 10, &st.minflt },      { 12, &st.majflt },          { 14, &st.utime_ticks },
                { 15, &st.stime_ticks }, { 22, &st.starttime_ticks }, { 23, &st.vsize_bytes },
        };
        for (size_t i = 0; i < ELEMENTSOF(u64s); i++) {
                r = word_to_u64(word[u64s[i].field], len[u64s[i].field], u64s[i].out);
                if (r < 0)
                        return r;
        }

        /* printed signed ("%ld") by older kernels */
        r = word_to_i64(word[20], len[20], &st.num_threads);
        if (r < 0)
                return r;
        r = word_to_i64(word[24], len[24], &st.rss_pages);
        if (r < 0)
                return r;

        *ret = st;
        return 0;
}

/* /proc/PID/statm, pages: "size resident shared text lib data dt"
 *
 *   1251 993 758 193 0 270 0
 *
 * Kernel threads have no mm and show "0 0 0 0 0 0 0". */
/* The first n whitespace-separated numbers of text. */
static int parse_u64_fields(const char *text, uint64_t *v, size_t n) {
        const char *p = text, *end = text + strlen(text);
        for (size_t i = 0; i < n; i++) {
                int r = next_u64(&p, end, &v[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int proc_parse_statm(const char *text, struct proc_statm *ret) {
        uint64_t v[7];
        int r = parse_u64_fields(text, v, ELEMENTSOF(v));
        if (r < 0)
                return r;

        *ret = (struct proc_statm){ .size_pages = v[0], .resident_pages = v[1], .shared_pages = v[2] };
        return 0;
}

/* /proc/PID/schedstat: time on cpu (ns), time waiting on a runqueue (ns),
 * number of timeslices run. All zero without CONFIG_SCHEDSTATS/SCHED_INFO.
 *
 *   17551182 2041199 53
 */
int proc_parse_schedstat(const char *text, struct proc_schedstat *ret) {
        uint64_t v[3];
        int r = parse_u64_fields(text, v, ELEMENTSOF(v));
        if (r < 0)
                return r;

        *ret = (struct proc_schedstat){ .run_ns = v[0], .wait_ns = v[1], .timeslices = v[2] };
        return 0;
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
 * Unknown keys are ignored (a later kernel may add some); each known key
 * must appear exactly once. */
int proc_parse_io(const char *text, struct proc_io *ret) {
        struct proc_io io = {};
        const struct {
                const char *key;
                uint64_t *value;
        } keys[] = {
                { "rchar", &io.rchar },
                { "wchar", &io.wchar },
                { "syscr", &io.syscr },
                { "syscw", &io.syscw },
                { "read_bytes", &io.read_bytes },
                { "write_bytes", &io.write_bytes },
                { "cancelled_write_bytes", &io.cancelled_write_bytes },
        };
        unsigned seen = 0;
        const char *p = text, *line, *end;

        while ((line = next_line(&p, &end))) {
                const char *value;
                size_t keylen;

                if (!split_key(line, end, &keylen, &value))
                        continue;
                for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                        if (!word_is(line, keylen, keys[i].key))
                                continue;
                        if (seen & (1u << i))
                                return -EINVAL;
                        int r = value_u64(value, end, keys[i].value);
                        if (r < 0)
                                return r;
                        seen |= 1u << i;
                        break;
                }
        }
        if (seen != (1u << ELEMENTSOF(keys)) - 1)
                return -EINVAL;

        *ret = io;
        return 0;
}

/* Per-key helpers for the "Key:\tvalue" files: each known key may appear once. */
static int status_pid(const char *value, const char *end, bool *seen, int *out) {
        uint64_t v;
        int r;

        if (*seen)
                return -EINVAL;
        r = value_u64(value, end, &v);
        if (r < 0)
                return r;
        if (v > INT_MAX)
                return -ERANGE;
        *out = (int)v;
        *seen = true;
        return 0;
}

static int status_kb(const char *value, const char *end, bool *seen, uint64_t *out) {
        int r;

        if (*seen)
                return -EINVAL;
        r = value_kb(value, end, out);
        if (r < 0)
                return r;
        *seen = true;
        return 0;
}

static int status_uids(const char *value, const char *end, struct proc_status *s) {
        unsigned u[4];
        const char *w;
        int r;

        if (s->has_uids)
                return -EINVAL;
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
        s->has_uids = true;
        return 0;
}

static int status_i64(const char *value, const char *end, bool *seen, int64_t *out) {
        const char *w, *extra;
        size_t n = next_word(&value, end, &w);
        int r;

        if (*seen)
                return -EINVAL;
        r = word_to_i64(w, n, out);
        if (r < 0)
                return r;
        if (next_word(&value, end, &extra) > 0)
                return -EINVAL;
        *seen = true;
        return 0;
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
        bool has_ppid = false;
        const char *p = text, *line, *end;

        while ((line = next_line(&p, &end))) {
                const char *value;
                size_t keylen;
                int r = 0;

                if (!split_key(line, end, &keylen, &value))
                        continue;

                if (word_is(line, keylen, "Tgid"))
                        r = status_pid(value, end, &s.has_tgid, &s.tgid);
                else if (word_is(line, keylen, "PPid"))
                        r = status_pid(value, end, &has_ppid, &s.ppid);
                else if (word_is(line, keylen, "Uid"))
                        r = status_uids(value, end, &s);
                else if (word_is(line, keylen, "VmHWM"))
                        r = status_kb(value, end, &s.has_vmhwm, &s.vmhwm_bytes);
                else if (word_is(line, keylen, "VmRSS"))
                        r = status_kb(value, end, &s.has_vmrss, &s.vmrss_bytes);
                else if (word_is(line, keylen, "RssAnon"))
                        r = status_kb(value, end, &s.has_rssanon, &s.rssanon_bytes);
                else if (word_is(line, keylen, "Threads"))
                        r = status_i64(value, end, &s.has_threads, &s.threads);
                if (r < 0)
                        return r;
        }

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

/* /proc/stat, the aggregate line first, then one line per online CPU:
 *
 *   cpu  1337 0 1302 58130 353 0 24 9 0 0
 *   cpu0 426 0 466 29674 14 0 4 3 0 0
 *   cpu1 910 0 836 28456 338 0 19 6 0 0
 *   intr 1234567 ...
 *
 * user nice system idle iowait irq softirq steal guest guest_nice, in clock
 * ticks. guest and guest_nice are already counted in user and nice, so they
 * are not kept. */
int proc_parse_cpu_total(const char *text, struct proc_cpu_total *ret) {
        struct proc_cpu_total c = {};
        const char *p = text, *line, *end, *q;
        uint64_t v[8];
        int r;

        line = next_line(&p, &end);
        if (!line || !startswith(line, "cpu") || (line[3] != ' ' && line[3] != '\t'))
                return -EINVAL;
        q = line + 3;
        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                r = next_u64(&q, end, &v[i]);
                if (r < 0)
                        return r;
        }

        while ((line = next_line(&p, &end)))
                if (startswith(line, "cpu") && line[3] >= '0' && line[3] <= '9')
                        c.ncpus++;
        /* there is always at least one online CPU; a zero here is a broken
         * text and would end up as a divisor */
        if (c.ncpus == 0)
                return -EINVAL;

        c.user = v[0];
        c.nice = v[1];
        c.system = v[2];
        c.idle = v[3];
        c.iowait = v[4];
        c.irq = v[5];
        c.softirq = v[6];
        c.steal = v[7];
        *ret = c;
        return 0;
}

/* /proc/meminfo, the keys we use (MemAvailable exists since 3.14):
 *
 *   MemTotal:        8123456 kB
 *   MemFree:         1234567 kB
 *   MemAvailable:    5678901 kB
 *   Buffers:          123456 kB
 *   Cached:          2345678 kB
 *   SwapCached:            0 kB
 *   ...
 *   SwapTotal:       2097148 kB
 *   SwapFree:        2097148 kB
 */
int proc_parse_meminfo(const char *text, struct proc_meminfo *ret) {
        struct proc_meminfo m = {};
        const struct {
                const char *key;
                uint64_t *value;
        } keys[] = {
                { "MemTotal", &m.total_bytes },         { "MemFree", &m.free_bytes },
                { "Buffers", &m.buffers_bytes },        { "Cached", &m.cached_bytes },
                { "SwapTotal", &m.swap_total_bytes },   { "SwapFree", &m.swap_free_bytes },
                { "MemAvailable", &m.available_bytes }, /* last: optional */
        };
        const unsigned required = (1u << (ELEMENTSOF(keys) - 1)) - 1;
        unsigned seen = 0;
        const char *p = text, *line, *end;

        while ((line = next_line(&p, &end))) {
                const char *value;
                size_t keylen;

                if (!split_key(line, end, &keylen, &value))
                        continue;
                for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                        if (!word_is(line, keylen, keys[i].key))
                                continue;
                        if (seen & (1u << i))
                                return -EINVAL;
                        int r = value_kb(value, end, keys[i].value);
                        if (r < 0)
                                return r;
                        seen |= 1u << i;
                        break;
                }
        }
        if ((seen & required) != required)
                return -EINVAL;

        m.has_available = seen & (1u << (ELEMENTSOF(keys) - 1));
        *ret = m;
        return 0;
}

/* "%lu.%02lu" as the kernel prints loads, parsed by hand so the result does
 * not depend on LC_NUMERIC. */
static int word_to_load(const char *w, size_t n, double *ret) {
        const char *dot = memchr(w, '.', n);
        size_t ni = dot ? (size_t)(dot - w) : n;
        uint64_t ip;
        double v, scale = 0.1;
        int r;

        r = word_to_u64(w, ni, &ip);
        if (r < 0)
                return r;
        v = (double)ip;
        if (dot) {
                if (ni + 1 == n)
                        return -EINVAL;
                for (size_t i = ni + 1; i < n; i++, scale /= 10) {
                        if (w[i] < '0' || w[i] > '9')
                                return -EINVAL;
                        v += (w[i] - '0') * scale;
                }
        }
        *ret = v;
        return 0;
}

/* /proc/loadavg: three load averages, runnable/total scheduling entities,
 * last pid allocated.
 *
 *   0.52 0.58 0.59 2/345 12345
 */
int proc_parse_loadavg(const char *text, struct proc_loadavg *ret) {
        struct proc_loadavg l = {};
        const char *p = text, *end = text + strlen(text), *w, *slash;
        double load[3];
        uint64_t last_pid;
        size_t n;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(load); i++) {
                n = next_word(&p, end, &w);
                r = word_to_load(w, n, &load[i]);
                if (r < 0)
                        return r;
        }

        n = next_word(&p, end, &w);
        slash = memchr(w, '/', n);
        if (!slash)
                return -EINVAL;
        r = word_to_uint(w, (size_t)(slash - w), &l.running);
        if (r < 0)
                return r;
        r = word_to_uint(slash + 1, n - (size_t)(slash - w) - 1, &l.total);
        if (r < 0)
                return r;

        r = next_u64(&p, end, &last_pid);
        if (r < 0)
                return r;

        l.load1 = load[0];
        l.load5 = load[1];
        l.load15 = load[2];
        *ret = l;
        return 0;
}

/* /proc/PID/task/TID/children: "%d " per child, no newline; empty when
 * there are none.
 *
 *   "101 102 "
 *
 * Validates everything before growing the array, so a bad text leaves
 * *pids, *n and *cap as they were. */
int proc_parse_pid_list(const char *text, int **pids, size_t *n, size_t *cap) {
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

        if (*n + count > *cap) {
                size_t ncap = *cap * 2;
                if (ncap < *n + count)
                        ncap = *n + count;
                if (ncap < 16)
                        ncap = 16;
                int *a = reallocarray(*pids, ncap, sizeof(int));
                if (!a)
                        return -ENOMEM;
                *pids = a;
                *cap = ncap;
        }

        for (p = text; (len = next_word(&p, end, &w)) > 0;)
                (void)word_to_pid(w, len, &(*pids)[(*n)++]);
        return 0;
}

/* ---- readers ------------------------------------------------------------ */

/* One pread() of a small file into buf. A full buffer may mean the text was
 * cut short, which would parse as different numbers: refuse it. */
static int read_small_at(int dirfd, const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        ssize_t k;

        if (fd < 0)
                return -errno;
        k = pread_text(fd, buf, size);
        if (k < 0)
                return (int)k;
        if ((size_t)k >= size - 1)
                return -EFBIG;
        return 0;
}

/* read_file_at() with the same refusal of a possibly truncated text. */
static int read_big_at(int dirfd, const char *path, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        r = read_file_at(dirfd, path, PROC_BIG_MAX, &buf, &len);
        if (r < 0)
                return r;
        if (len >= PROC_BIG_MAX)
                return -EFBIG;
        *ret = TAKE_PTR(buf);
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

int proc_read_stat(int piddir, struct proc_stat *ret) {
        char buf[4096]; /* 52 fields of at most 20 digits plus a 64-byte comm */
        int r = read_small_at(piddir, "stat", buf, sizeof buf);
        return r < 0 ? r : proc_parse_stat(buf, ret);
}

int proc_read_status(int piddir, struct proc_status *ret) {
        _cleanup_free_ char *buf = NULL;
        int r = read_big_at(piddir, "status", &buf);
        return r < 0 ? r : proc_parse_status(buf, ret);
}

int proc_read_statm(int piddir, struct proc_statm *ret) {
        char buf[256];
        int r = read_small_at(piddir, "statm", buf, sizeof buf);
        return r < 0 ? r : proc_parse_statm(buf, ret);
}

int proc_read_io(int piddir, struct proc_io *ret) {
        char buf[1024];
        int r = read_small_at(piddir, "io", buf, sizeof buf);
        return r < 0 ? r : proc_parse_io(buf, ret);
}

int proc_read_schedstat(int piddir, struct proc_schedstat *ret) {
        char buf[256];
        int r = read_small_at(piddir, "schedstat", buf, sizeof buf);
        return r < 0 ? r : proc_parse_schedstat(buf, ret);
}

int proc_read_netdev(int piddir, struct proc_netdev *ret) {
        _cleanup_free_ char *buf = NULL;
        int r = read_big_at(piddir, "net/dev", &buf);
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

int proc_read_children(int piddir, int **ret_pids, size_t *ret_n) {
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_free_ int *pids = NULL;
        size_t n = 0, cap = 0, m;
        int fd, r;

        fd = openat(piddir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                safe_close(fd);
                return r;
        }

        for (;;) {
                _cleanup_free_ char *buf = NULL;
                char path[64];
                struct dirent *de;
                struct stat st;
                int tid;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                return -errno;
                        break;
                }
                if (word_to_pid(de->d_name, strlen(de->d_name), &tid) < 0 || tid == 0)
                        continue; /* ".", ".." */

                snprintf(path, sizeof path, "%d/children", tid);
                /* may hold thousands of pids, so not a stack buffer */
                r = read_big_at(dirfd(d), path, &buf);
                if (r == -ENOENT) {
                        /* Either the thread exited since readdir(), or the
                         * kernel has no children files at all
                         * (CONFIG_PROC_CHILDREN=n) — the thread's directory
                         * tells which. */
                        if (fstatat(dirfd(d), de->d_name, &st, 0) >= 0)
                                return -EOPNOTSUPP;
                        continue;
                }
                if (r == -ESRCH)
                        continue;
                if (r < 0)
                        return r;

                r = proc_parse_pid_list(buf, &pids, &n, &cap);
                if (r < 0)
                        return r;
        }

        /* a child forked by one thread is listed once, but a pid may show up
         * twice when one child exits and the pid is reused while we read */
        if (n > 1)
                qsort(pids, n, sizeof(int), cmp_int);
        m = 0;
        for (size_t i = 0; i < n; i++)
                if (m == 0 || pids[m - 1] != pids[i])
                        pids[m++] = pids[i];

        *ret_pids = m > 0 ? TAKE_PTR(pids) : NULL;
        *ret_n = m;
        return 0;
}

/* "net:[4026531840]", the target of the ns/net magic link. */
static int parse_netns(const char *s, size_t len, uint64_t *ret) {
        if (len < 6 || memcmp(s, "net:[", 5) != 0 || s[len - 1] != ']')
                return -EINVAL;
        return word_to_u64(s + 5, len - 6, ret);
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
                return parse_netns(buf, (size_t)k, ret);
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
        return parse_netns(buf, len, ret);
}

/* Opens a file below the proc root, "<proc_root>/<path>". */
static int proc_root_path(const char *proc_root, const char *path, char buf[static PATH_MAX]) {
        if ((size_t)snprintf(buf, PATH_MAX, "%s/%s", proc_root, path) >= PATH_MAX)
                return -ENAMETOOLONG;
        return 0;
}

/* sys/kernel/random/boot_id: "1b4e28ba-2fa1-11d2-883f-0016d3cca427\n" */
int proc_read_boot_id(const char *proc_root, char ret[64]) {
        char path[PATH_MAX], buf[64];
        size_t len;
        int r;

        r = proc_root_path(proc_root, "sys/kernel/random/boot_id", path);
        if (r < 0)
                return r;
        r = read_small_at(AT_FDCWD, path, buf, sizeof buf);
        if (r < 0)
                return r == -EFBIG ? -EINVAL : r;
        len = strlen(buf);
        if (len > 0 && buf[len - 1] == '\n')
                buf[--len] = 0;
        if (len == 0)
                return -EINVAL;

        memcpy(ret, buf, len + 1);
        return 0;
}

int proc_read_host_cpu(const char *proc_root, struct proc_cpu_total *ret) {
        _cleanup_free_ char *buf = NULL;
        char path[PATH_MAX];
        size_t len;
        int r;

        r = proc_root_path(proc_root, "stat", path);
        if (r < 0)
                return r;
        /* The cpu lines come first; a huge intr line may hit the cap, which
         * is harmless as long as the cpu block was read whole, so not
         * read_big_at(). */
        r = read_file_at(AT_FDCWD, path, PROC_BIG_MAX, &buf, &len);
        if (r < 0)
                return r;
        if (len >= PROC_BIG_MAX) {
                const char *p = buf, *line, *end;
                bool cut = false;

                while (!cut && (line = next_line(&p, &end))) {
                        if (!startswith(line, "cpu")) {
                                buf[line - buf] = 0;
                                cut = true;
                        } else if (*end != '\n')
                                break; /* a cpu line was cut short */
                }
                if (!cut)
                        return -EFBIG;
        }
        return proc_parse_cpu_total(buf, ret);
}

int proc_read_meminfo(const char *proc_root, struct proc_meminfo *ret) {
        _cleanup_free_ char *buf = NULL;
        char path[PATH_MAX];
        int r;

        r = proc_root_path(proc_root, "meminfo", path);
        if (r < 0)
                return r;
        r = read_big_at(AT_FDCWD, path, &buf);
        return r < 0 ? r : proc_parse_meminfo(buf, ret);
}

int proc_read_loadavg(const char *proc_root, struct proc_loadavg *ret) {
        char path[PATH_MAX], buf[256];
        int r;

        r = proc_root_path(proc_root, "loadavg", path);
        if (r < 0)
                return r;
        r = read_small_at(AT_FDCWD, path, buf, sizeof buf);
        return r < 0 ? r : proc_parse_loadavg(buf, ret);
}

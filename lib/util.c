/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <math.h>
#include <string.h>
#include <time.h>

static const char *log_ident = "mlmon";
static int log_max_level = LOG_INFO;
static bool log_prefix_prio;

void log_setup(const char *ident) {
        log_ident = ident;
        /* systemd sets JOURNAL_STREAM when stderr is connected to the journal;
         * then "<N>" at the start of a line sets its priority. */
        log_prefix_prio = getenv("JOURNAL_STREAM") != NULL;
        const char *lvl = getenv("MLMON_LOG_LEVEL");
        if (lvl && streq(lvl, "debug"))
                log_max_level = LOG_DEBUG;
}

void log_set_max_level(int prio) {
        log_max_level = prio;
}

/* Warnings and errors are rate-limited per format string (in practice per
 * call site): a failing disk must not fill the journal with one line per
 * tick. At most log_burst lines of one format per log_interval; the first
 * line of the next interval says how many were suppressed. */
#define LOG_RATELIMIT_SLOTS 32

static usec_t log_interval = 10 * USEC_PER_SEC;
static unsigned log_burst = 5;

static struct log_ratelimit {
        const char *fmt;
        usec_t begin;
        unsigned count, suppressed;
} log_limits[LOG_RATELIMIT_SLOTS];

void log_set_ratelimit(usec_t interval_usec, unsigned burst) {
        log_interval = interval_usec;
        log_burst = burst;
        memset(log_limits, 0, sizeof log_limits);
}

/* Whether a line of fmt may be written now; *ret_suppressed: the lines of
 * fmt dropped in the interval that has just ended. */
static bool log_ratelimit_pass(const char *fmt, unsigned *ret_suppressed) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        struct log_ratelimit *l = NULL, *oldest = &log_limits[0];
        for (size_t i = 0; i < LOG_RATELIMIT_SLOTS && !l; i++) {
                if (log_limits[i].fmt == fmt)
                        l = &log_limits[i];
                else if (log_limits[i].begin < oldest->begin)
                        oldest = &log_limits[i];
        }
        if (!l) {
                l = oldest;
                *l = (struct log_ratelimit){ .fmt = fmt, .begin = now };
        }
        *ret_suppressed = 0;
        if (now - l->begin >= log_interval) {
                *ret_suppressed = l->suppressed;
                *l = (struct log_ratelimit){ .fmt = fmt, .begin = now };
        }
        if (l->count < log_burst) {
                l->count++;
                return true;
        }
        l->suppressed++;
        return false;
}

int log_internal(int prio, int error, const char *fmt, ...) {
        int e = error < 0 ? -error : error;
        unsigned suppressed = 0;

        if (prio <= log_max_level && (prio > LOG_WARNING || log_ratelimit_pass(fmt, &suppressed))) {
                char msg[1024], more[64] = "";
                int saved = errno;
                va_list ap;
                errno = e; /* what %m prints */
                va_start(ap, fmt);
                vsnprintf(msg, sizeof msg, fmt, ap);
                va_end(ap);
                errno = saved;
                if (suppressed > 0)
                        snprintf(more, sizeof more, " (\u2026 %u more suppressed)", suppressed);
                if (log_prefix_prio)
                        fprintf(stderr, "<%d>%s%s\n", prio, msg, more);
                else
                        fprintf(stderr, "%s: %s%s\n", log_ident, msg, more);
        }
        return e ? -e : -EIO;
}

int resolve_listen_address(const char *spec, int socktype, struct addrinfo **ret, char *err, size_t errlen) {
        char host[256], portstr[8];
        uint16_t port;
        if (parse_host_port(spec, host, sizeof host, &port) < 0) {
                snprintf(err, errlen, "'%s' is not HOST:PORT", spec);
                return -EINVAL;
        }
        struct addrinfo hints = { .ai_socktype = socktype, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        snprintf(portstr, sizeof portstr, "%u", port);
        int g = getaddrinfo(host, portstr, &hints, ret);
        if (g != 0) {
                snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(g));
                return -EINVAL;
        }
        return 0;
}

void unlink_and_free(char **path) {
        if (!*path)
                return;
        unlink(*path);
        free(*path);
        *path = NULL;
}

int errorf(char *buf, size_t size, int error, const char *fmt, ...) {
        int e = error < 0 ? -error : error, saved = errno;
        va_list ap;
        errno = e;
        va_start(ap, fmt);
        vsnprintf(buf, size, fmt, ap);
        va_end(ap);
        errno = saved;
        return e ? -e : -EIO;
}

void *greedy_realloc(void **p, size_t need, size_t size) {
        if (size == 0 || need > SIZE_MAX / size)
                return NULL;
        if (*p && need * size <= malloc_usable_size(*p))
                return *p;
        /* Double what is needed (at least 4 elements), so n appends cost
         * O(log n) reallocations; fall back to the exact need near overflow. */
        size_t n = need < 4 ? 4 : need;
        if (n <= SIZE_MAX / 2 / size)
                n *= 2;
        void *q = realloc(*p, n * size);
        if (!q)
                return NULL;
        *p = q;
        return q;
}

int parse_host_port(const char *s, char *host, size_t hostlen, uint16_t *port) {
        const char *colon;
        const char *h = s;
        size_t hl;
        if (*s == '[') {
                const char *close = strchr(s, ']');
                if (!close || close[1] != ':')
                        return -EINVAL;
                h = s + 1;
                hl = (size_t)(close - h);
                colon = close + 1;
        } else {
                colon = strrchr(s, ':');
                if (!colon)
                        return -EINVAL;
                hl = (size_t)(colon - s);
        }
        if (hl == 0 || hl >= hostlen)
                return -EINVAL;
        unsigned p;
        if (safe_atou(colon + 1, &p) < 0 || p == 0 || p > 65535)
                return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = 0;
        *port = (uint16_t)p;
        return 0;
}

usec_t now_usec(int clock_id) {
        struct timespec ts;
        clock_gettime(clock_id, &ts);
        return (usec_t)ts.tv_sec * USEC_PER_SEC + (usec_t)ts.tv_nsec / 1000;
}

int64_t now_realtime_ms(void) {
        return (int64_t)(now_usec(CLOCK_REALTIME) / USEC_PER_MSEC);
}

int parse_duration(const char *s, usec_t *ret) {
        static const struct {
                const char *suffix;
                usec_t mult;
        } units[] = {
                { "us", 1 },
                { "ms", USEC_PER_MSEC },
                { "s", USEC_PER_SEC },
                { "m", USEC_PER_MINUTE },
                { "h", USEC_PER_HOUR },
                { "d", USEC_PER_DAY },
        };
        if (!s || !*s)
                return -EINVAL;
        /* digits, optionally one '.', then a unit; nothing else */
        const char *p = s;
        size_t ndigits = 0;
        bool dot = false;
        for (; *p; p++) {
                if (*p >= '0' && *p <= '9')
                        ndigits++;
                else if (*p == '.' && !dot)
                        dot = true;
                else
                        break;
        }
        if (ndigits == 0 || p - s > 20)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                if (!streq(p, units[i].suffix))
                        continue;
                char num[24];
                memcpy(num, s, (size_t)(p - s));
                num[p - s] = 0;
                char *end;
                errno = 0;
                double v = strtod(num, &end);
                if (errno || *end || !isfinite(v) || v < 0)
                        return -EINVAL;
                double u = v * (double)units[i].mult;
                /* cap at 100 years: nothing we accept needs more */
                if (u > (double)(36500 * USEC_PER_DAY))
                        return -ERANGE;
                *ret = (usec_t)llround(u);
                return 0;
        }
        return -EINVAL;
}

void format_duration(usec_t u, char *buf, size_t size) {
        static const struct {
                const char *suffix;
                usec_t mult;
        } units[] = {
                { "d", USEC_PER_DAY }, { "h", USEC_PER_HOUR },  { "m", USEC_PER_MINUTE },
                { "s", USEC_PER_SEC }, { "ms", USEC_PER_MSEC },
        };
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (u >= units[i].mult && u % units[i].mult == 0) {
                        snprintf(buf, size, "%llu%s", (unsigned long long)(u / units[i].mult), units[i].suffix);
                        return;
                }
        snprintf(buf, size, "%lluus", (unsigned long long)u);
}

/* After strtoull()/strtoll() with errno cleared: the whole string taken? */
static int strtoint_result(const char *end) {
        if (errno == ERANGE)
                return -ERANGE;
        return errno || *end ? -EINVAL : 0;
}

int safe_atou64(const char *s, uint64_t *ret) {
        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        int r = strtoint_result(end);
        if (r == 0)
                *ret = v;
        return r;
}

int safe_atoi64(const char *s, int64_t *ret) {
        if (!s || !((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')))
                return -EINVAL;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        int r = strtoint_result(end);
        if (r == 0)
                *ret = v;
        return r;
}

int safe_atou(const char *s, unsigned *ret) {
        uint64_t v;
        int r = safe_atou64(s, &v);
        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return -ERANGE;
        *ret = (unsigned)v;
        return 0;
}

int safe_atod(const char *s, double *ret) {
        if (!s || !*s)
                return -EINVAL;
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || *end || !isfinite(v))
                return -EINVAL;
        *ret = v;
        return 0;
}

bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

void str_printable(const char *s, char *buf, size_t size) {
        size_t i = 0;
        if (size == 0)
                return;
        for (; s && s[i] && i + 1 < size; i++)
                buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
        buf[i] = 0;
}

/* At most max bytes from fd into a NUL-terminated malloc'ed buffer. */
static int read_fd_max(int fd, size_t max, char **ret, size_t *ret_len) {
        if (max > (size_t)1 << 30) /* nothing we read is larger; keeps max + 1 from wrapping */
                max = (size_t)1 << 30;
        size_t cap = max < 4096 ? max + 1 : 4096, len = 0;
        _cleanup_free_ char *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (len + 1 >= cap) {
                        if (cap > max)
                                break;
                        size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
                        char *n = realloc(buf, ncap);
                        if (!n)
                                return -ENOMEM;
                        buf = n;
                        cap = ncap;
                        if (len + 1 >= cap)
                                break;
                }
                ssize_t k = read(fd, buf + len, cap - 1 - len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                len += (size_t)k;
        }
        buf[len] = 0;
        /* give back the unused capacity: callers keep some of these (a
         * run's cmdline) for as long as the run lives */
        if (len + 1 < cap) {
                char *shrunk = realloc(buf, len + 1);
                if (shrunk)
                        buf = shrunk;
        }
        if (ret_len)
                *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
}

int read_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return read_fd_max(fd, max, ret, ret_len);
}

int open_regular(const char *path, struct stat *ret_st) {
        /* O_NONBLOCK: a FIFO put there must not hang the open */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 || fstat(fd, ret_st) < 0)
                return -errno;
        if (!S_ISREG(ret_st->st_mode))
                return -EBADFD;
        return TAKE_FD(fd);
}

int read_secret(int fd, size_t max, char **ret, size_t *ret_len) {
        char *buf = NULL;
        size_t len = 0;
        /* room for one newline, and one byte more to see that it is too long */
        int r = read_fd_max(fd, max + 2, &buf, &len);
        if (r < 0)
                return r;
        if (len > 0 && buf[len - 1] == '\n')
                buf[--len] = 0;
        r = len > max ? -EFBIG : memchr(buf, 0, len) ? -EBADMSG : 0;
        if (r < 0) {
                explicit_bzero(buf, len);
                free(buf);
                return r;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

bool ct_equal(const void *a, size_t alen, const void *b, size_t blen) {
        const unsigned char *x = a, *y = b;
        size_t n = alen > blen ? alen : blen;
        unsigned char diff = alen != blen;
        /* every byte up to the longer length, whatever differs: the time
         * says nothing about where the first difference is */
        for (size_t i = 0; i < n; i++)
                diff |= (unsigned char)((i < alen ? x[i] : 0) ^ (i < blen ? y[i] : 0));
        return diff == 0;
}

ssize_t pread_text(int fd, char *buf, size_t size) {
        ssize_t k;
        do
                k = pread(fd, buf, size - 1, 0);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        buf[k] = 0;
        return k;
}

int unix_socket_bind(const char *path, int type, bool passcred, const char *what, char *err, size_t errlen) {
        struct sockaddr_un sun = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof sun.sun_path) {
                snprintf(err, errlen, "%s: path too long", what);
                return -EINVAL;
        }
        strcpy(sun.sun_path, path);
        _cleanup_close_ int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                return errorf(err, errlen, errno, "%s: %m", what);
        }
        int one = 1;
        if (passcred && setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0) {
                return errorf(err, errlen, errno, "%s: SO_PASSCRED: %m", what);
        }
        /* A socket left by an instance that is gone refuses connections:
         * replace it. One that answers belongs to a live process: leave it. */
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
                _cleanup_close_ int probe = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (probe < 0)
                        return errorf(err, errlen, errno, "%s: %m", what);
                if (connect(probe, (struct sockaddr *)&sun, sizeof sun) == 0 || errno == EAGAIN) {
                        snprintf(err, errlen, "%s: %s is in use by a running process (another mlmond?)", what, path);
                        return -EADDRINUSE;
                }
                if (errno == ECONNREFUSED)
                        unlink(path);
        }
        if (bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
                return errorf(err, errlen, errno, "%s: cannot bind %s: %m", what, path);
        }
        if (chmod(path, 0666) < 0)
                log_warning_errno(errno, "%s: cannot chmod %s: %m", what, path);
        return TAKE_FD(fd);
}

size_t lower_bound(size_t n, bool (*below)(size_t i, const void *ctx), const void *ctx) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (below(mid, ctx))
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

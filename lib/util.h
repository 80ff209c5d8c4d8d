/* SPDX-License-Identifier: MIT */
/* Small helpers shared by mlmond and mlmonctl: cleanup attributes, logging,
 * time, strict number and duration parsing. */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>
#include <unistd.h>

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

/* ---- ownership ---------------------------------------------------------- */

static inline void freep(void *p) {
        free(*(void **)p);
}
static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

/* ---- growing arrays ------------------------------------------------------ */

/* Makes *p hold at least `need` elements of `size` bytes, growing it
 * geometrically; the capacity is the allocation's usable size, so callers
 * keep only their element count. Returns *p, or NULL (with *p untouched)
 * when out of memory or need * size overflows. */
void *greedy_realloc(void **p, size_t need, size_t size);
#define GREEDY_REALLOC(array, need) greedy_realloc((void **)&(array), (need), sizeof((array)[0]))

/* Hand ownership on: returns the value and leaves NULL (or -1) behind. */
#define TAKE_PTR(p)                        \
        ({                                 \
                __typeof__(p) _tmp_ = (p); \
                (p) = NULL;                \
                _tmp_;                     \
        })
#define TAKE_FD(fd)               \
        ({                        \
                int _tmp_ = (fd); \
                (fd) = -1;        \
                _tmp_;            \
        })

static inline int safe_close(int fd) {
        if (fd >= 0)
                closep(&fd);
        return -1;
}

/* ---- logging ------------------------------------------------------------ */

/* Writes one line to stderr. Under systemd (JOURNAL_STREAM set) each line
 * carries a "<N>" syslog priority prefix so the journal keeps the level. */
void log_setup(const char *ident);
void log_set_max_level(int prio);
int log_internal(int prio, int error, const char *fmt, ...) _printf_(3, 4);

/* All return -abs(error) (or -EIO for error==0 on the _errno forms) so a
 * caller can `return log_error_errno(r, "...")`. "%m" in the format prints
 * the error passed in (errno is set from it while formatting, then restored). */
#define log_error(...) log_internal(LOG_ERR, 0, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_WARNING, 0, __VA_ARGS__)
#define log_notice(...) log_internal(LOG_NOTICE, 0, __VA_ARGS__)
#define log_info(...) log_internal(LOG_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_internal(LOG_DEBUG, 0, __VA_ARGS__)
/* Warnings and errors are rate-limited per format string: at most `burst`
 * lines of one format per `interval` (5 per 10 s by default); the next one
 * written says "(… N more suppressed)". */
void log_set_ratelimit(uint64_t interval_usec, unsigned burst);

#define log_error_errno(e, ...) log_internal(LOG_ERR, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_internal(LOG_WARNING, (e), __VA_ARGS__)
#define log_debug_errno(e, ...) log_internal(LOG_DEBUG, (e), __VA_ARGS__)

/* Writes a message for the caller into buf (size bytes), "%m" printing
 * error; returns -abs(error) (-EIO for 0) so a caller can
 * `return errorf(err, errlen, r, "cannot ...: %m")`. */
int errorf(char *buf, size_t size, int error, const char *fmt, ...) _printf_(4, 5);

/* ---- time --------------------------------------------------------------- */

/* One time type: microseconds. Monotonic time crosses module boundaries
 * as usec_t; realtime is used only for stored timestamps, which are Unix
 * milliseconds (int64_t, `_ms`). */
typedef uint64_t usec_t;
#define USEC_INFINITY ((usec_t)UINT64_MAX)
#define USEC_PER_MSEC ((usec_t)1000)
#define USEC_PER_SEC ((usec_t)1000000)
#define USEC_PER_MINUTE (60 * USEC_PER_SEC)
#define USEC_PER_HOUR (60 * USEC_PER_MINUTE)
#define USEC_PER_DAY (24 * USEC_PER_HOUR)

usec_t now_usec(int clock_id);
int64_t now_realtime_ms(void);

/* "500ms", "10s", "1.5m", "2h", "7d", "250us". A unit is required: a bare
 * number is ambiguous and rejected. Returns 0 or -EINVAL / -ERANGE. */
int parse_duration(const char *s, usec_t *ret);
/* Writes the shortest exact form ("500ms", "10s", "90s" -> "90s"). */
void format_duration(usec_t u, char *buf, size_t size);

/* Whole-string decimal parses; reject sign (for unsigned), junk, overflow. */
int safe_atou64(const char *s, uint64_t *ret);
int safe_atoi64(const char *s, int64_t *ret);
int safe_atou(const char *s, unsigned *ret);
/* Finite double, whole string. */
int safe_atod(const char *s, double *ret);

/* Saturating subtraction for kernel counters that may reset. */
static inline uint64_t sat_sub_u64(uint64_t a, uint64_t b) {
        return a > b ? a - b : 0;
}

/* qsort() that takes n = 0 with base NULL (an empty array never
 * allocated), which qsort() itself may not be given. */
static inline void sort_array(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
        if (n > 1)
                qsort(base, n, size, cmp);
}

/* The first i in [0, n) for which below(i, ctx) is false, below being true
 * on a prefix of [0, n) (a sorted array's elements less than a key): n if
 * none is. A binary search. */
size_t lower_bound(size_t n, bool (*below)(size_t i, const void *ctx), const void *ctx);

/* ---- strings ------------------------------------------------------------ */

static inline bool streq(const char *a, const char *b) {
        return a && b && __builtin_strcmp(a, b) == 0;
}
bool startswith(const char *s, const char *prefix);
/* Copies s for a log line: every byte outside printable ASCII becomes '?',
 * so a process name cannot forge lines or priorities in the journal. */
void str_printable(const char *s, char *buf, size_t size);
/* Reads at most max bytes of a file (relative to dirfd, or AT_FDCWD) into a
 * NUL-terminated malloc'ed buffer. -errno on failure. */
int read_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len);
/* path opened read-only, its stat in *ret_st: the fd, or -errno (-EBADFD:
 * not a regular file). */
struct stat;
int open_regular(const char *path, struct stat *ret_st);
/* A secret (a token, a private key) from fd: at most max bytes once one
 * trailing newline is stripped, NUL-terminated in a malloc'ed buffer (wipe
 * it with explicit_bzero() before freeing). -EFBIG: longer; -EBADMSG: it
 * holds a NUL byte; -errno from read(). */
int read_secret(int fd, size_t max, char **ret, size_t *ret_len);
/* Whether a (alen bytes) and b (blen bytes) are equal, in a time that
 * depends only on the longer length, not on where they differ. */
bool ct_equal(const void *a, size_t alen, const void *b, size_t blen);
/* pread(fd, 0) into buf (size includes the NUL). Returns length or -errno. */
ssize_t pread_text(int fd, char *buf, size_t size);

/* Removes the file at *path (a unix socket this process bound) and frees
 * and clears the path. NULL is fine. */
void unlink_and_free(char **path);

/* "HOST:PORT" -> parts; "[::1]:9477" accepted. -EINVAL. */
int parse_host_port(const char *s, char *host, size_t hostlen, uint16_t *port);
/* HOST:PORT resolved for a listening socket of socktype (AI_PASSIVE,
 * numeric port); free *ret with freeaddrinfo(). -EINVAL with the reason
 * in err ("'x' is not HOST:PORT", "cannot resolve 'h': ..."). */
struct addrinfo;
int resolve_listen_address(const char *spec, int socktype, struct addrinfo **ret, char *err, size_t errlen);
/* An address setting that switches its listener off: unset, "" or "none". */
static inline bool address_off(const char *s) {
        return !s || !*s || streq(s, "none");
}

/* A unix socket of `type` bound at path, mode 0666 (callers authorize each
 * peer themselves), a stale socket there (one that refuses connections)
 * replaced, a live one left alone (-EADDRINUSE); SO_PASSCRED set first if
 * passcred. Returns the fd (non-blocking, close-on-exec) or -errno with a
 * one-line reason in err, prefixed by what ("socket", "statsd_socket"). */
int unix_socket_bind(const char *path, int type, bool passcred, const char *what, char *err, size_t errlen);

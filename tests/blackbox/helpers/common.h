/* SPDX-License-Identifier: MIT */
/* Shared bits of the black-box test helpers: the start (usage check, dying
 * with the test runner), the protocol with the test (lines on stdout, stdin
 * EOF = "stop"), resident memory and a CPU burner with a wall-clock duty
 * cycle. Header-only: each helper is one small executable. */
#pragma once

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000LL

static inline long long now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static inline void sleep_until_ns(long long t) {
        struct timespec ts = { .tv_sec = (time_t)(t / NSEC_PER_SEC), .tv_nsec = (long)(t % NSEC_PER_SEC) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

/* The test runner going away must not leave burners behind. */
static inline void die_with_parent(void) {
        pid_t parent = getppid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
                _exit(1);
}

/* Every helper's start: exits 2 with "usage: USAGE" unless it was given
 * min_args to max_args arguments, then dies with the test runner. */
static inline void helper_start(int argc, int min_args, int max_args, const char *usage) {
        if (argc - 1 < min_args || argc - 1 > max_args) {
                fprintf(stderr, "usage: %s\n", usage);
                exit(2);
        }
        die_with_parent();
}

/* len bytes of anonymous memory with every page written, so resident;
 * false (errno set) when it cannot be mapped. */
static inline bool map_touched(size_t len) {
        if (len == 0)
                return true;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return false;
        long page = sysconf(_SC_PAGESIZE);
        for (size_t i = 0; i < len; i += (size_t)page)
                p[i] = (char)(i | 1);
        return true;
}

/* One line to the test, flushed at once (stdout is a pipe). */
static inline void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void say(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        fflush(stdout);
}

/* Blocks until the test closes our stdin (or writes a line, if line). */
static inline void wait_stdin(bool line) {
        char c;
        ssize_t k;
        for (;;) {
                k = read(STDIN_FILENO, &c, 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0 || (line && c == '\n'))
                        return;
        }
}

/* Busy for duty_pct % of every period_us, by the wall clock, for seconds
 * (forever if seconds <= 0). A short period keeps the rate steady over any
 * window longer than a few periods. */
static inline void burn(int duty_pct, long period_us, double seconds) {
        long long period = period_us * 1000LL, busy = period * duty_pct / 100;
        long long start = now_ns(), end = seconds > 0 ? start + (long long)(seconds * NSEC_PER_SEC) : 0;
        volatile unsigned long sink = 0;
        for (long long t0 = start; !end || t0 < end; t0 += period) {
                while (now_ns() < t0 + busy)
                        for (int i = 0; i < 1000; i++)
                                sink += (unsigned long)i;
                if (busy < period)
                        sleep_until_ns(t0 + period);
        }
}

static inline int parse_int(const char *s, const char *what) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < 0 || v > 1000000000L) {
                fprintf(stderr, "invalid %s '%s'\n", what, s);
                exit(2);
        }
        return (int)v;
}

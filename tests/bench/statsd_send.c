/* SPDX-License-Identifier: MIT */
/* statsd_send: a StatsD load generator for tests/bench/ingest.py.
 *
 *   statsd_send unix PATH | udp HOST:PORT [-r LINES_PER_S] [-d SECONDS] [-l LINES_PER_DGRAM]
 *               [-o OP] [-t TAGS] [-b] [-s SNDBUF] [-n TOTAL_LINES]
 *
 * Sends timing lines "OP:V|ms[|#TAGS]" (V from a fixed log-normal table), -l
 * lines per datagram, at -r lines/s (0: as fast as it can) for -d seconds.
 * Unix datagrams go out with MSG_DONTWAIT unless -b (blocking): a datagram
 * refused with EAGAIN is dropped and counted, as a non-blocking client
 * would. -s sets SO_SNDBUF (SO_SNDBUFFORCE when allowed). -n stops after
 * TOTAL_LINES lines (whole datagrams) even before -d is up.
 *
 * Protocol: prints "ready PID", waits for a line on stdin (so the caller can
 * register it first), sends, then prints one line of key=value figures:
 * sent_lines sent_dgrams dropped_lines dropped_dgrams errors seconds rate,
 * and exits when stdin closes. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define NDGRAMS 64 /* distinct datagrams, sent in turn */

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
        struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void usage(void) {
        fprintf(stderr, "usage: statsd_send unix PATH | udp HOST:PORT [-r LINES_PER_S] [-d SECONDS] "
                        "[-l LINES_PER_DGRAM] [-o OP] [-t TAGS] [-b] [-s SNDBUF] [-n TOTAL_LINES]\n");
        exit(2);
}

/* Box-Muller with a fixed LCG: the same table every run. */
static uint64_t lcg = 88172645463325252ULL;
static double uniform(void) {
        lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
        return ((double)(lcg >> 11) + 0.5) / 9007199254740992.0;
}
static double lognormal(double mu, double sigma) {
        double z = sqrt(-2.0 * log(uniform())) * cos(2.0 * M_PI * uniform());
        return exp(mu + sigma * z);
}

/* A datagram socket towards target ("unix" path or "udp" HOST:PORT), bound
 * at once for UDP so the source port exists (and has an owner) before the
 * first line. Exits on errors. */
static int open_target(const char *mode, const char *target, struct sockaddr_storage *ret_ss, socklen_t *ret_len) {
        struct sockaddr_storage ss = {};
        socklen_t sslen = 0;
        int fd = -1;
        if (strcmp(mode, "unix") == 0) {
                struct sockaddr_un *sun = (struct sockaddr_un *)&ss;
                sun->sun_family = AF_UNIX;
                if (strlen(target) >= sizeof sun->sun_path)
                        usage();
                strcpy(sun->sun_path, target);
                sslen = sizeof *sun;
                fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        } else if (strcmp(mode, "udp") == 0) {
                char host[256];
                const char *colon = strrchr(target, ':');
                if (!colon || (size_t)(colon - target) >= sizeof host)
                        usage();
                memcpy(host, target, (size_t)(colon - target));
                host[colon - target] = 0;
                struct addrinfo hints = { .ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV }, *res;
                if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
                        fprintf(stderr, "cannot resolve %s\n", target);
                        exit(2);
                }
                memcpy(&ss, res->ai_addr, res->ai_addrlen);
                sslen = res->ai_addrlen;
                fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                freeaddrinfo(res);
                if (fd >= 0) {
                        struct sockaddr_storage any = { .ss_family = ss.ss_family };
                        if (bind(fd, (struct sockaddr *)&any,
                                 ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6)) <
                            0) {
                                perror("bind");
                                exit(1);
                        }
                }
        } else
                usage();
        *ret_ss = ss;
        *ret_len = sslen;
        return fd;
}

static char *dg[NDGRAMS];
static size_t dglen[NDGRAMS];

/* NDGRAMS datagrams of `per` timing lines each, log-normal around 8 ms. */
static void build_datagrams(int per, const char *op, const char *tags) {
        for (int i = 0; i < NDGRAMS; i++) {
                size_t cap = (size_t)per * (strlen(op) + (tags ? strlen(tags) : 0) + 40);
                dg[i] = malloc(cap);
                size_t n = 0;
                for (int k = 0; k < per; k++)
                        n += (size_t)snprintf(dg[i] + n, cap - n, "%s%s:%.3f|ms%s%s", k ? "\n" : "", op,
                                              lognormal(log(8.0), 0.6), tags ? "|#" : "", tags ? tags : "");
                dglen[i] = n;
        }
}

int main(int argc, char **argv) {
        if (argc < 3)
                usage();
        const char *mode = argv[1], *target = argv[2];
        double rate = 0, seconds = 10;
        int per = 50, sndbuf = 0;
        unsigned long long total = 0;
        const char *op = "lat", *tags = NULL;
        bool blocking = false;
        int c;
        optind = 3;
        while ((c = getopt(argc, argv, "r:d:l:o:t:bs:n:")) >= 0) {
                switch (c) {
                case 'r':
                        rate = atof(optarg);
                        break;
                case 'd':
                        seconds = atof(optarg);
                        break;
                case 'l':
                        per = atoi(optarg);
                        break;
                case 'o':
                        op = optarg;
                        break;
                case 't':
                        tags = optarg;
                        break;
                case 'b':
                        blocking = true;
                        break;
                case 's':
                        sndbuf = atoi(optarg);
                        break;
                case 'n':
                        total = strtoull(optarg, NULL, 10);
                        break;
                default:
                        usage();
                }
        }
        if (per < 1 || per > 1000 || seconds <= 0 || rate < 0)
                usage();

        struct sockaddr_storage ss = {};
        socklen_t sslen;
        int fd = open_target(mode, target, &ss, &sslen);
        if (fd < 0) {
                perror("socket");
                return 1;
        }
        if (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);

        build_datagrams(per, op, tags);

        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        char line[64];
        if (!fgets(line, sizeof line, stdin))
                return 0;

        uint64_t sent = 0, dropped = 0, errors = 0, ndg = 0;
        double dgram_rate = rate / per; /* datagrams per second */
        double t0 = now_s(), end = t0 + seconds, t = t0;
        int flags = blocking ? 0 : MSG_DONTWAIT;
        uint64_t max_dgrams = total ? (total + (unsigned long long)per - 1) / (unsigned long long)per : UINT64_MAX;
        while (t < end && ndg < max_dgrams) {
                uint64_t due = rate > 0 ? (uint64_t)((t - t0) * dgram_rate) + 1 : UINT64_MAX;
                if (due > max_dgrams)
                        due = max_dgrams;
                while (ndg < due) {
                        ssize_t k = sendto(fd, dg[ndg % NDGRAMS], dglen[ndg % NDGRAMS], flags, (struct sockaddr *)&ss,
                                           sslen);
                        if (k >= 0)
                                sent++;
                        else if (errno == EAGAIN || errno == ENOBUFS)
                                dropped++;
                        else if (errno != EINTR) {
                                errors++;
                                if (errors == 1)
                                        fprintf(stderr, "sendto: %s\n", strerror(errno));
                        }
                        ndg++;
                        if (rate == 0 && (ndg & 63) == 0)
                                break; /* look at the clock now and then */
                }
                t = now_s();
                if (rate > 0) {
                        double next = t0 + (double)ndg / dgram_rate;
                        if (next > t + 200e-6)
                                sleep_s(next - t - 100e-6);
                        t = now_s();
                }
        }
        double el = now_s() - t0;
        printf("sent_lines=%llu sent_dgrams=%llu dropped_lines=%llu dropped_dgrams=%llu errors=%llu seconds=%.3f "
               "rate=%.0f\n",
               (unsigned long long)(sent * per), (unsigned long long)sent, (unsigned long long)(dropped * per),
               (unsigned long long)dropped, (unsigned long long)errors, el, (double)(sent * per) / el);
        fflush(stdout);
        /* stay (and stay registered) until the caller has seen every line
         * arrive: lines still queued when a sender exits may find its run
         * already ended */
        while (fgets(line, sizeof line, stdin))
                ;
        return 0;
}

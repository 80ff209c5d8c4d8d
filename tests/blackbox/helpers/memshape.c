/* SPDX-License-Identifier: MIT */
/* memshape SHAPE BASE_MIB [ARGS]: holds BASE_MIB of touched anonymous
 * memory and then changes it over time in one of these shapes, until stdin
 * closes:
 *   leak  BASE RATE_KIB_PER_S          grows forever
 *   flat  BASE                         stays
 *   ramp  BASE RATE_KIB_PER_S SECONDS  grows for SECONDS, then stays
 *   saw   BASE AMP_MIB PERIOD_S        grows by AMP over each period, then frees it (a GC)
 *   peaks BASE RATE_KIB_PER_S          for 0.3 s of every 0.7 s holds 16 MiB more, plus RATE
 *                                      for every second so far: its peaks rise, its floor
 *                                      stays (a 500 ms sampler sees both in any 2.5 s)
 * Memory is added in 64 KiB chunks with malloc-free mmap so a free really
 * returns it (RssAnon drops, like a collector unmapping a heap region). */
#include <sys/mman.h>

#include "common.h"

#define CHUNK (64 * 1024)

static char **chunks;
static size_t n_chunks, cap_chunks;

static void add_chunk(void) {
        if (n_chunks == cap_chunks) {
                cap_chunks = cap_chunks ? cap_chunks * 2 : 1024;
                chunks = realloc(chunks, cap_chunks * sizeof *chunks);
                if (!chunks)
                        exit(1);
        }
        char *p = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                exit(1);
        for (size_t i = 0; i < CHUNK; i += 4096)
                p[i] = 1;
        chunks[n_chunks++] = p;
}

static void set_chunks(size_t want) {
        while (n_chunks < want)
                add_chunk();
        while (n_chunks > want)
                munmap(chunks[--n_chunks], CHUNK);
}

static bool stdin_closed(void) {
        struct timespec ts = { 0, 0 };
        fd_set r;
        FD_ZERO(&r);
        FD_SET(STDIN_FILENO, &r);
        if (pselect(STDIN_FILENO + 1, &r, NULL, NULL, &ts, NULL) > 0) {
                char c;
                return read(STDIN_FILENO, &c, 1) <= 0;
        }
        return false;
}

int main(int argc, char **argv) {
        helper_start(argc, 2, INT_MAX, "memshape leak|flat|ramp|saw|peaks BASE_MIB [ARGS]");
        const char *shape = argv[1];
        double base = parse_int(argv[2], "BASE_MIB") * 1048576.0;
        double a = argc > 3 ? parse_int(argv[3], "arg") : 0, b = argc > 4 ? parse_int(argv[4], "arg") : 0;
        set_chunks((size_t)(base / CHUNK));
        say("ready\n");
        long long t0 = now_ns();
        for (;;) {
                double t = (double)(now_ns() - t0) / 1e9, want = base;
                if (strcmp(shape, "leak") == 0)
                        want = base + a * 1024.0 * t;
                else if (strcmp(shape, "ramp") == 0)
                        want = base + a * 1024.0 * (t < b ? t : b);
                else if (strcmp(shape, "saw") == 0) {
                        double period = b > 0 ? b : 10, phase = t - period * (long long)(t / period);
                        want = base + a * 1048576.0 * phase / period;
                } else if (strcmp(shape, "peaks") == 0) {
                        double phase = t - 0.7 * (long long)(t / 0.7);
                        if (phase < 0.3)
                                want = base + 16 * 1048576.0 + a * 1024.0 * t;
                } else if (strcmp(shape, "flat") != 0) {
                        fprintf(stderr, "unknown shape %s\n", shape);
                        return 2;
                }
                set_chunks((size_t)(want / CHUNK));
                if (stdin_closed())
                        return 0;
                sleep_until_ns(now_ns() + 50 * 1000000LL);
        }
}

/* SPDX-License-Identifier: MIT */
/* busy DUTY_PCT SECONDS [THREADS]: burns CPU at DUTY_PCT % of a 10 ms
 * period for SECONDS (a decimal; 0: until killed, or with THREADS until
 * stdin closes). With THREADS > 0 the burning
 * is done by that many threads and the main thread only waits, so the
 * process's CPU time is not its main thread's. Prints "ready" once burning. */
#include <pthread.h>

#include "common.h"

static int duty;
static double seconds;

static void *burner(void *arg) {
        (void)arg;
        burn(duty, 10000, seconds);
        return NULL;
}

int main(int argc, char **argv) {
        helper_start(argc, 2, 3, "busy DUTY_PCT SECONDS [THREADS]");
        duty = parse_int(argv[1], "duty");
        char *end;
        seconds = strtod(argv[2], &end);
        if (end == argv[2] || *end || seconds < 0) {
                fprintf(stderr, "invalid seconds '%s'\n", argv[2]);
                return 2;
        }
        int threads = argc == 4 ? parse_int(argv[3], "threads") : 0;
        if (duty > 100 || threads > 64) {
                fprintf(stderr, "duty at most 100, threads at most 64\n");
                return 2;
        }
        if (threads == 0) {
                say("ready\n");
                burn(duty, 10000, seconds > 0 ? seconds : 3600);
                return 0;
        }
        pthread_t t[64];
        for (int i = 0; i < threads; i++)
                if (pthread_create(&t[i], NULL, burner, NULL) != 0) {
                        fprintf(stderr, "pthread_create failed\n");
                        return 1;
                }
        say("ready\n");
        if (seconds <= 0) {
                wait_stdin(false);
                return 0;
        }
        for (int i = 0; i < threads; i++)
                pthread_join(t[i], NULL);
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* tree MIB DUTY_PCT: forks 2 children; each maps and touches MIB MiB, then
 * burns CPU at DUTY_PCT % (10 ms period) until killed. The parent prints
 * "ready PID1 PID2" once both children have touched their memory, waits for
 * stdin to close, then kills and reaps them. */
#include <sys/wait.h>

#include "common.h"

int main(int argc, char **argv) {
        helper_start(argc, 2, 2, "tree MIB DUTY_PCT");
        size_t len = (size_t)parse_int(argv[1], "MiB") << 20;
        int duty = parse_int(argv[2], "duty");
        if (duty > 100) {
                fprintf(stderr, "duty at most 100\n");
                return 2;
        }
        pid_t kids[2];
        int ready[2];
        if (pipe(ready) < 0) {
                perror("pipe");
                return 1;
        }
        for (int i = 0; i < 2; i++) {
                pid_t p = fork();
                if (p < 0) {
                        perror("fork");
                        return 1;
                }
                if (p == 0) {
                        prctl(PR_SET_PDEATHSIG, SIGKILL);
                        close(ready[0]);
                        if (!map_touched(len) || write(ready[1], "r", 1) != 1)
                                _exit(1);
                        close(ready[1]);
                        burn(duty, 10000, 0);
                        _exit(0);
                }
                kids[i] = p;
        }
        close(ready[1]);
        char c;
        for (int n = 0; n < 2;) {
                ssize_t k = read(ready[0], &c, 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k != 1) {
                        fprintf(stderr, "a child failed\n");
                        return 1;
                }
                n++;
        }
        say("ready %d %d\n", (int)kids[0], (int)kids[1]);
        wait_stdin(false);
        for (int i = 0; i < 2; i++) {
                kill(kids[i], SIGKILL);
                waitpid(kids[i], NULL, 0);
        }
        return 0;
}

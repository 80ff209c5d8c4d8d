/* SPDX-License-Identifier: MIT */
/* setname NAME [ARGS...]: sets its own comm to the bytes of NAME
 * (PR_SET_NAME: any bytes but NUL, cut at 15), prints "ready" and waits for
 * stdin to close. ARGS are ignored: they are there to be in its cmdline. */

#include "common.h"

int main(int argc, char **argv) {
        helper_start(argc, 1, INT_MAX, "setname NAME [ARGS...]");
        if (prctl(PR_SET_NAME, argv[1]) < 0) {
                perror("prctl");
                return 1;
        }
        say("ready\n");
        wait_stdin(false);
        return 0;
}

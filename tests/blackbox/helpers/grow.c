/* SPDX-License-Identifier: MIT */
/* grow MIB: maps MIB MiB of anonymous memory, writes to every page, prints
 * "ready" and waits for stdin to close. */
#include "common.h"

int main(int argc, char **argv) {
        helper_start(argc, 1, 1, "grow MIB");
        if (!map_touched((size_t)parse_int(argv[1], "MiB") << 20)) {
                perror("mmap");
                return 1;
        }
        say("ready\n");
        wait_stdin(false);
        return 0;
}

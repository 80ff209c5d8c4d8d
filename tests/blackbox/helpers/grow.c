/* SPDX-License-Identifier: MIT */
/* grow MIB: maps MIB MiB of anonymous memory, writes to every page, prints
 * "ready" and waits for stdin to close. */
#include <sys/mman.h>

#include "common.h"

int main(int argc, char **argv) {
        if (argc != 2) {
                fprintf(stderr, "usage: grow MIB\n");
                return 2;
        }
        die_with_parent();
        size_t len = (size_t)parse_int(argv[1], "MiB") << 20;
        if (len > 0) {
                char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED) {
                        perror("mmap");
                        return 1;
                }
                long page = sysconf(_SC_PAGESIZE);
                for (size_t i = 0; i < len; i += (size_t)page)
                        p[i] = (char)(i | 1);
        }
        say("ready\n");
        wait_stdin(false);
        return 0;
}

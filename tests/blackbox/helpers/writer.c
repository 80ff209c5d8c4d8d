/* SPDX-License-Identifier: MIT */
/* writer PATH BYTES: prints "ready", waits for a line on stdin, then writes
 * BYTES to PATH (created, truncated) in 1 MiB chunks, fsyncs it, prints
 * "done" and waits for stdin to close. */
#include <fcntl.h>

#include "common.h"

int main(int argc, char **argv) {
        helper_start(argc, 2, 2, "writer PATH BYTES");
        long long total = parse_int(argv[2], "bytes");
        static char chunk[1 << 20];
        memset(chunk, 0x5a, sizeof chunk);
        int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
                perror(argv[1]);
                return 1;
        }
        say("ready\n");
        wait_stdin(true);
        for (long long done = 0; done < total;) {
                size_t n = total - done < (long long)sizeof chunk ? (size_t)(total - done) : sizeof chunk;
                ssize_t k = write(fd, chunk, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        perror("write");
                        return 1;
                }
                done += k;
        }
        if (fsync(fd) < 0 || close(fd) < 0) {
                perror("fsync");
                return 1;
        }
        say("done\n");
        wait_stdin(false);
        return 0;
}

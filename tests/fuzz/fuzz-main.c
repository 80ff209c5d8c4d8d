/* SPDX-License-Identifier: MIT */
/* Replays inputs through LLVMFuzzerTestOneInput() without libFuzzer, so a
 * corpus or a crash reproducer can run under any compiler and sanitizer.
 * Every build makes one per target (tests/fuzz/meson.build):
 *
 *   build/tests/fuzz/fuzz-procfs-replay tests/fuzz/corpus/procfs [FILE...]
 *
 * Each argument is a file, or a directory whose regular files are all run.
 * Exits 1 when an input cannot be read, or when there was none to run: a
 * replay of nothing would pass and test nothing. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX (16u * 1024u * 1024u)

static int run_file(int dirfd, const char *path) {
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        r = read_file_at(dirfd, path, REPLAY_MAX, &buf, &len);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(-r));
                return r;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        return 0;
}

int main(int argc, char *argv[]) {
        unsigned ran = 0;
        int ret = 0;

        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        perror(argv[i]);
                        ret = 1;
                        continue;
                }
                if (!S_ISDIR(st.st_mode)) {
                        if (run_file(AT_FDCWD, argv[i]) < 0)
                                ret = 1;
                        else
                                ran++;
                        continue;
                }

                DIR *d = opendir(argv[i]);
                if (!d) {
                        perror(argv[i]);
                        ret = 1;
                        continue;
                }
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (fstatat(dirfd(d), de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
                                continue;
                        if (run_file(dirfd(d), de->d_name) < 0)
                                ret = 1;
                        else
                                ran++;
                }
                closedir(d);
        }

        printf("fuzz replay: %u inputs%s\n", ran, ret ? ", some unreadable" : "");
        if (ran == 0) {
                fprintf(stderr, "fuzz replay: no input to run\n");
                return 1;
        }
        return ret;
}

/* SPDX-License-Identifier: MIT */
#include "collect/accel/sysfs.h"

#include <string.h>

#include "collect/procfs-text.h"
#include "util.h"

int sysfs_root_set(char **root, const char *sys_root) {
        char *copy = strdup(sys_root && *sys_root ? sys_root : "/sys");
        if (!copy)
                return -ENOMEM;
        free(*root);
        *root = copy;
        return 0;
}

int sysfs_read_str_at(int dirfd, const char *path, char *buf, size_t size) {
        char text[256]; /* sysfs values we read are numbers and short names */
        int r;

        if (size < 2)
                return -EINVAL;
        if (size > sizeof text)
                size = sizeof text;
        r = read_line_at(dirfd, path, text, size);
        if (r < 0)
                return r;
        memcpy(buf, text, strlen(text) + 1);
        return 0;
}

int sysfs_read_u64_at(int dirfd, const char *path, uint64_t *ret) {
        char buf[32]; /* UINT64_MAX has 20 digits */
        int r = sysfs_read_str_at(dirfd, path, buf, sizeof buf);
        return r < 0 ? r : safe_atou64(buf, ret);
}

int sysfs_read_i64_at(int dirfd, const char *path, int64_t *ret) {
        char buf[32];
        int r = sysfs_read_str_at(dirfd, path, buf, sizeof buf);
        return r < 0 ? r : safe_atoi64(buf, ret);
}

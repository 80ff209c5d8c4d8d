/* SPDX-License-Identifier: MIT */
/* Reading sysfs attributes below an injectable root (the sys_root config
 * key; fixture trees in the tests), for gpudev.c and rapl.c. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* *root = a copy of sys_root, or of "/sys" for NULL or "". */
int sysfs_root_set(char **root, const char *sys_root);

/* One attribute holding one value and a newline ("58\n"): the text without
 * the newline into buf. -errno; -EFBIG when it may not fit (a cut number
 * would parse as another one); -EINVAL when empty. */
int sysfs_read_str_at(int dirfd, const char *path, char *buf, size_t size);
/* The same, parsed whole as decimal: -EINVAL for anything else. */
int sysfs_read_u64_at(int dirfd, const char *path, uint64_t *ret);
int sysfs_read_i64_at(int dirfd, const char *path, int64_t *ret);

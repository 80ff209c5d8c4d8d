/* SPDX-License-Identifier: MIT */
#include "collect/procfs-text.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\n';
}

size_t next_word(const char **p, const char *end, const char **ret) {
        const char *s = *p;
        while (s < end && is_blank(*s))
                s++;
        const char *w = s;
        while (s < end && !is_blank(*s))
                s++;
        *p = s;
        *ret = w;
        return (size_t)(s - w);
}

const char *next_line(const char **p, const char **ret_end) {
        const char *s = *p;
        if (!*s)
                return NULL;
        const char *nl = strchrnul(s, '\n');
        *ret_end = nl;
        *p = *nl ? nl + 1 : nl;
        return s;
}

static bool all_digits(const char *w, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (w[i] < '0' || w[i] > '9')
                        return false;
        return true;
}

bool word_is(const char *w, size_t n, const char *lit) {
        return strlen(lit) == n && memcmp(w, lit, n) == 0;
}

/* The words are not NUL-terminated; copy so safe_ato*() can check them.
 * UINT64_MAX has 20 digits and the kernel never zero-pads, so a longer
 * word of digits is out of range. */
int word_to_u64(const char *w, size_t n, uint64_t *ret) {
        char buf[32];
        if (n == 0)
                return -EINVAL;
        if (n >= sizeof buf)
                return all_digits(w, n) ? -ERANGE : -EINVAL;
        memcpy(buf, w, n);
        buf[n] = 0;
        return safe_atou64(buf, ret);
}

int word_to_i64(const char *w, size_t n, int64_t *ret) {
        char buf[32];
        if (n == 0)
                return -EINVAL;
        if (n >= sizeof buf)
                return all_digits(w + (*w == '-'), n - (*w == '-')) ? -ERANGE : -EINVAL;
        memcpy(buf, w, n);
        buf[n] = 0;
        return safe_atoi64(buf, ret);
}

/* A decimal word of at most max, which fits an unsigned. */
static int word_to_bounded(const char *w, size_t n, unsigned max, unsigned *ret) {
        uint64_t v;
        int r = word_to_u64(w, n, &v);
        if (r < 0)
                return r;
        if (v > max)
                return -ERANGE;
        *ret = (unsigned)v;
        return 0;
}

int word_to_uint(const char *w, size_t n, unsigned *ret) {
        return word_to_bounded(w, n, UINT_MAX, ret);
}

int word_to_pid(const char *w, size_t n, int *ret) {
        unsigned v;
        int r = word_to_bounded(w, n, INT_MAX, &v);
        if (r >= 0)
                *ret = (int)v;
        return r;
}

int word_to_hex(const char *w, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        if (n == 0 || n > 16)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                char c = w[i];
                unsigned d;
                if (c >= '0' && c <= '9')
                        d = (unsigned)(c - '0');
                else if (c >= 'A' && c <= 'F')
                        d = (unsigned)(c - 'A' + 10);
                else if (c >= 'a' && c <= 'f')
                        d = (unsigned)(c - 'a' + 10);
                else
                        return -EINVAL;
                v = v << 4 | d;
        }
        *ret = v;
        return 0;
}

int next_u64(const char **p, const char *end, uint64_t *ret) {
        const char *w;
        size_t n = next_word(p, end, &w);
        return word_to_u64(w, n, ret);
}

int parse_u64_fields(const char *text, uint64_t *v, size_t n) {
        const char *p = text, *end = text + strlen(text);
        for (size_t i = 0; i < n; i++) {
                int r = next_u64(&p, end, &v[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int word_to(enum word_kind kind, const char *w, size_t n, void *ret) {
        switch (kind) {
        case WORD_PID:
                return word_to_pid(w, n, ret);
        case WORD_UINT:
                return word_to_uint(w, n, ret);
        case WORD_U64:
                return word_to_u64(w, n, ret);
        case WORD_I64:
                return word_to_i64(w, n, ret);
        }
        return -EINVAL;
}

int value_word(const char *s, const char *end, enum word_kind kind, void *ret) {
        const char *w, *extra;
        size_t n = next_word(&s, end, &w);
        int r = word_to(kind, w, n, ret);
        if (r < 0)
                return r;
        return next_word(&s, end, &extra) > 0 ? -EINVAL : 0;
}

int value_u64(const char *s, const char *end, void *ret) {
        return value_word(s, end, WORD_U64, ret);
}

int value_kb(const char *s, const char *end, void *ret) {
        const char *w, *unit, *extra;
        uint64_t v;
        size_t n = next_word(&s, end, &w);
        int r = word_to_u64(w, n, &v);
        if (r < 0)
                return r;
        n = next_word(&s, end, &unit);
        if (!word_is(unit, n, "kB") || next_word(&s, end, &extra) > 0)
                return -EINVAL;
        if (__builtin_mul_overflow(v, 1024u, &v))
                return -ERANGE;
        *(uint64_t *)ret = v;
        return 0;
}

bool split_key(const char *line, const char *end, size_t *ret_keylen, const char **ret_value) {
        const char *colon = memchr(line, ':', (size_t)(end - line));
        if (!colon)
                return false;
        *ret_keylen = (size_t)(colon - line);
        *ret_value = colon + 1;
        return true;
}

int parse_key_values(const char *text, const struct proc_key *keys, size_t n_keys, unsigned *ret_seen) {
        unsigned seen = 0;
        const char *p = text, *line, *end;

        while ((line = next_line(&p, &end))) {
                const char *v;
                size_t keylen;

                if (!split_key(line, end, &keylen, &v))
                        continue;
                for (size_t i = 0; i < n_keys; i++) {
                        if (!word_is(line, keylen, keys[i].key))
                                continue;
                        if (seen & (1u << i))
                                return -EINVAL;
                        int r = keys[i].parse(v, end, keys[i].value);
                        if (r < 0)
                                return r;
                        seen |= 1u << i;
                        break;
                }
        }
        *ret_seen = seen;
        return 0;
}

int parse_link_inode(const char *s, size_t len, const char *prefix, uint64_t *ret) {
        size_t plen = strlen(prefix);
        if (len < plen + 3 || memcmp(s, prefix, plen) != 0 || s[plen] != ':' || s[plen + 1] != '[' || s[len - 1] != ']')
                return -EINVAL;
        return word_to_u64(s + plen + 2, len - plen - 3, ret);
}

int read_small_at(int dirfd, const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        ssize_t k;

        if (fd < 0)
                return -errno;
        k = pread_text(fd, buf, size);
        if (k < 0)
                return (int)k;
        if ((size_t)k >= size - 1)
                return -EFBIG;
        return 0;
}

int read_line_at(int dirfd, const char *path, char *buf, size_t size) {
        size_t len;
        int r = read_small_at(dirfd, path, buf, size);
        if (r < 0)
                return r;
        len = strlen(buf);
        if (len > 0 && buf[len - 1] == '\n')
                buf[--len] = 0;
        return len == 0 ? -EINVAL : 0;
}

int read_big_at(int dirfd, const char *path, size_t max, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        r = read_file_at(dirfd, path, max, &buf, &len);
        if (r < 0)
                return r;
        if (len >= max)
                return -EFBIG;
        *ret = TAKE_PTR(buf);
        return 0;
}

int opendir_at(int dirfd, const char *path, DIR **ret) {
        int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = fdopendir(fd);
        if (!*ret) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        return 0;
}

int proc_root_path(const char *proc_root, const char *path, char buf[static PATH_MAX]) {
        if ((size_t)snprintf(buf, PATH_MAX, "%s/%s", proc_root, path) >= PATH_MAX)
                return -ENAMETOOLONG;
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* Internal to collect/ (the procfs parsers, sysfs.c, nvml.c): tokenizing a
 * NUL-terminated kernel text and reading files whole without accepting a
 * truncated text. Words are [start, start + n) ranges, not NUL-terminated. */
#pragma once

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Files whose size is bounded by a few hundred bytes go through a stack
 * buffer; status (Groups: can list 65536 gids), net/dev (one line per
 * interface), meminfo and /proc/stat (one line per CPU plus the intr line)
 * are read whole, up to this cap. */
#define PROC_BIG_MAX (1024u * 1024u)

/* Next run of non-blank bytes in [*p, end): stores its start in *ret and
 * returns its length, 0 when only blanks are left. */
size_t next_word(const char **p, const char *end, const char **ret);
/* Next line of a NUL-terminated text: returns its start and stores its end
 * (the '\n' or the NUL) in *ret_end; NULL when the text is exhausted. */
const char *next_line(const char **p, const char **ret_end);
bool word_is(const char *w, size_t n, const char *lit);

/* Whole-word numbers: -EINVAL for junk or an empty word, -ERANGE on overflow. */
int word_to_u64(const char *w, size_t n, uint64_t *ret);
int word_to_i64(const char *w, size_t n, int64_t *ret);
int word_to_uint(const char *w, size_t n, unsigned *ret);
int word_to_pid(const char *w, size_t n, int *ret); /* 0..INT_MAX */
/* Hexadecimal digits only, at most 16 of them. */
int word_to_hex(const char *w, size_t n, uint64_t *ret);
/* One of the above by kind, ret pointing to an int, unsigned, uint64_t or
 * int64_t. */
enum word_kind { WORD_PID, WORD_UINT, WORD_U64, WORD_I64 };
int word_to(enum word_kind kind, const char *w, size_t n, void *ret);

/* Next word of [*p, end) as a number; -EINVAL when there is none. */
int next_u64(const char **p, const char *end, uint64_t *ret);
/* The first n whitespace-separated numbers of text. */
int parse_u64_fields(const char *text, uint64_t *v, size_t n);
/* Parsers of a "Key: value" value [s, end) into *ret: the keys' parse in
 * parse_key_values(). */
typedef int (*proc_value_fn)(const char *s, const char *end, void *ret);
/* The whole of [s, end) is one word, a number of the given kind. */
int value_word(const char *s, const char *end, enum word_kind kind, void *ret);
/* The whole of [s, end) is one unsigned number (uint64_t *ret). */
int value_u64(const char *s, const char *end, void *ret);
/* The whole of [s, end) is "N kB"; stores N * 1024 (uint64_t *ret). */
int value_kb(const char *s, const char *end, void *ret);
/* Splits "Key: value" into the key [line, colon) and the value after the
 * colon. Returns false for a line without a colon. */
bool split_key(const char *line, const char *end, size_t *ret_keylen, const char **ret_value);

/* "Key: value" files: io, meminfo, status. The value of each known key is
 * read by its parse into its value. Unknown keys are ignored (a later kernel
 * may add some); a known key seen twice is -EINVAL. Stores in *ret_seen bit i
 * for each keys[i] found (at most 32 keys). */
struct proc_key {
        const char *key;
        proc_value_fn parse;
        void *value;
};
int parse_key_values(const char *text, const struct proc_key *keys, size_t n_keys, unsigned *ret_seen);

/* "<prefix>:[N]", the target of a /proc magic link ("net:[4026531840]",
 * "socket:[123456]"). */
int parse_link_inode(const char *s, size_t len, const char *prefix, uint64_t *ret);

/* One pread() of a small file into buf. A full buffer may mean the text was
 * cut short, which would parse as different numbers: refused with -EFBIG. */
int read_small_at(int dirfd, const char *path, char *buf, size_t size);
/* read_small_at() of a one-line file: the trailing newline dropped, -EINVAL
 * when nothing is left. */
int read_line_at(int dirfd, const char *path, char *buf, size_t size);
/* read_file_at() of at most max bytes with the same refusal of a possibly
 * truncated text. */
int read_big_at(int dirfd, const char *path, size_t max, char **ret);
/* A directory below dirfd for readdir(), or -errno. */
int opendir_at(int dirfd, const char *path, DIR **ret);
/* "<proc_root>/<path>" into buf, or -ENAMETOOLONG. */
int proc_root_path(const char *proc_root, const char *path, char buf[static PATH_MAX]);

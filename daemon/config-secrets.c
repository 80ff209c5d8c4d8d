/* SPDX-License-Identifier: MIT */
/* The files the [http] keys token_file, tls_cert and tls_key name: read at
 * start and on reload, checked for who may read them. The token never
 * appears in a message. */
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "http-client.h"

#define TOKEN_MIN 16
#define TOKEN_MAX 4096
#define PEM_MAX (1024 * 1024)

static void wipe_free(char **p) {
        if (*p) {
                explicit_bzero(*p, strlen(*p));
                free(*p);
                *p = NULL;
        }
}

/* The content of the file key names; private: only root or our user may
 * own it, and neither group nor others read it. */
static int read_key_file(const char *key, const char *path, bool private, size_t max, char **ret, size_t *ret_len,
                         char *err, size_t errlen) {
        struct stat st;
        _cleanup_close_ int fd = open_regular(path, &st);
        if (fd == -EBADFD) {
                snprintf(err, errlen, "%s: %s is not a regular file", key, path);
                return -EINVAL;
        }
        if (fd < 0)
                return errorf(err, errlen, fd, "%s: %s: %m", key, path);
        if (private && ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 0077))) {
                snprintf(err, errlen,
                         "%s: %s must be owned by root or by the user mlmond runs as, and not readable by group or "
                         "others (chmod 600 %s)",
                         key, path, path);
                return -EPERM;
        }
        int r = read_secret(fd, max, ret, ret_len);
        if (r == -EFBIG || r == -EBADMSG) {
                snprintf(err, errlen, "%s: %s %s", key, path, r == -EFBIG ? "is too large" : "holds a NUL byte");
                return -EINVAL;
        }
        if (r < 0)
                return errorf(err, errlen, r, "%s: %s: %m", key, path);
        return 0;
}

static int read_pem(const char *key, const char *path, bool private, char **ret, char *err, size_t errlen) {
        size_t len;
        int r = read_key_file(key, path, private, PEM_MAX, ret, &len, err, errlen);
        if (r < 0)
                return r;
        if (!strstr(*ret, "-----BEGIN ")) {
                wipe_free(ret);
                snprintf(err, errlen, "%s: %s is not a PEM file", key, path);
                return -EINVAL;
        }
        return 0;
}

int config_load_secrets(struct config *c, char *err, size_t errlen) {
        int r;

        config_secrets_done(c);
        if (!address_off(c->http_token_file)) {
                r = read_key_file("token_file", c->http_token_file, true, TOKEN_MAX, &c->http_token, &c->http_token_len,
                                  err, errlen);
                if (r < 0)
                        return r;
                if (c->http_token_len < TOKEN_MIN || !http_token_valid(c->http_token)) {
                        config_secrets_done(c);
                        snprintf(err, errlen, "token_file: %s must hold %d to %d visible ASCII characters",
                                 c->http_token_file, TOKEN_MIN, TOKEN_MAX);
                        return -EINVAL;
                }
        }
        if (!address_off(c->http_tls_cert)) {
                r = read_pem("tls_cert", c->http_tls_cert, false, &c->http_tls_cert_pem, err, errlen);
                if (r >= 0)
                        r = read_pem("tls_key", c->http_tls_key, true, &c->http_tls_key_pem, err, errlen);
                if (r < 0) {
                        config_secrets_done(c);
                        return r;
                }
        }
        return 0;
}

void config_secrets_done(struct config *c) {
        wipe_free(&c->http_token);
        c->http_token_len = 0;
        wipe_free(&c->http_tls_cert_pem);
        wipe_free(&c->http_tls_key_pem);
}

int config_secrets_copy(struct config *dst, const struct config *src) {
        dst->http_token = dst->http_tls_cert_pem = dst->http_tls_key_pem = NULL;
        if ((src->http_token && !(dst->http_token = strdup(src->http_token))) ||
            (src->http_tls_cert_pem && !(dst->http_tls_cert_pem = strdup(src->http_tls_cert_pem))) ||
            (src->http_tls_key_pem && !(dst->http_tls_key_pem = strdup(src->http_tls_key_pem)))) {
                config_secrets_done(dst);
                return -ENOMEM;
        }
        return 0;
}

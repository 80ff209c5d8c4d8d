/* SPDX-License-Identifier: MIT */
/* The TLS transport (see http-tls.h): a tcp connection, then a GnuTLS
 * session on it, non-blocking, every wait bounded by the request's
 * deadline. The peer must show a certificate that the trusted ones vouch
 * for and that names the host the URL gave. */
#include "http-tls.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

struct tls_state {
        gnutls_certificate_credentials_t cred;
        gnutls_session_t session;
};

static void tls_state_free(struct tls_state *t) {
        if (!t)
                return;
        if (t->session)
                gnutls_deinit(t->session);
        if (t->cred)
                gnutls_certificate_free_credentials(t->cred);
        free(t);
}

static void tls_close(struct http_conn *c) {
        /* One request per connection ("Connection: close"): no close_notify
         * to wait for. */
        tls_state_free(c->tls);
        c->tls = NULL;
        c->fd = safe_close(c->fd);
}

/* Waits for what GnuTLS was doing when it said GNUTLS_E_AGAIN. */
static int tls_wait(struct http_conn *c, usec_t deadline) {
        struct tls_state *t = c->tls;
        return http_wait_fd(c->fd, gnutls_record_get_direction(t->session) ? POLLOUT : POLLIN, deadline);
}

/* The one line that says why the certificate was refused. */
static void verify_detail(struct http_endpoint *ep, unsigned status) {
        if (status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA))
                snprintf(ep->detail, sizeof ep->detail, "the certificate is not trusted (%s)",
                         ep->ca_file ? "not signed by the certificates of --ca-file" : "use --ca-file");
        else if (status & GNUTLS_CERT_UNEXPECTED_OWNER)
                snprintf(ep->detail, sizeof ep->detail, "the certificate is not for host '%s'", ep->host);
        else if (status & GNUTLS_CERT_EXPIRED)
                snprintf(ep->detail, sizeof ep->detail, "the certificate has expired");
        else if (status & GNUTLS_CERT_NOT_ACTIVATED)
                snprintf(ep->detail, sizeof ep->detail, "the certificate is not valid yet");
        else {
                gnutls_datum_t out = {};
                if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) >= 0) {
                        snprintf(ep->detail, sizeof ep->detail, "the certificate was refused: %s", out.data);
                        gnutls_free(out.data);
                } else
                        snprintf(ep->detail, sizeof ep->detail, "the certificate was refused");
        }
}

static int tls_setup(struct tls_state *t, struct http_endpoint *ep, int fd) {
        int r;

        if (gnutls_certificate_allocate_credentials(&t->cred) < 0)
                return -ENOMEM;
        if (ep->ca_file) {
                r = gnutls_certificate_set_x509_trust_file(t->cred, ep->ca_file, GNUTLS_X509_FMT_PEM);
                if (r <= 0) {
                        snprintf(ep->detail, sizeof ep->detail, "no certificate read from %s%s%s", ep->ca_file,
                                 r < 0 ? ": " : "", r < 0 ? gnutls_strerror(r) : "");
                        return -EINVAL;
                }
        } else if (gnutls_certificate_set_x509_system_trust(t->cred) < 0) {
                snprintf(ep->detail, sizeof ep->detail,
                         "cannot load the system's trusted certificates (use --ca-file)");
                return -EINVAL;
        }

        if (gnutls_init(&t->session, GNUTLS_CLIENT | GNUTLS_NONBLOCK) < 0)
                return -ENOMEM;
        if (gnutls_set_default_priority(t->session) < 0 ||
            gnutls_credentials_set(t->session, GNUTLS_CRD_CERTIFICATE, t->cred) < 0)
                return -ENOMEM;
        /* SNI takes names only, never an address */
        if (!http_host_is_address(ep->host) &&
            gnutls_server_name_set(t->session, GNUTLS_NAME_DNS, ep->host, strlen(ep->host)) < 0)
                return -ENOMEM;
        /* checked in the handshake: the chain and the host name (an address
         * is matched against the certificate's IP addresses) */
        gnutls_session_set_verify_cert(t->session, ep->host, 0);
        gnutls_transport_set_int(t->session, fd);
        return 0;
}

static int tls_handshake(struct http_conn *c, struct http_endpoint *ep, usec_t deadline) {
        struct tls_state *t = c->tls;
        for (;;) {
                int r = gnutls_handshake(t->session);
                if (r == GNUTLS_E_SUCCESS)
                        return 0;
                if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
                        int k = tls_wait(c, deadline);
                        if (k < 0)
                                return k;
                        continue;
                }
                if (!gnutls_error_is_fatal(r))
                        continue; /* a warning alert */
                if (r == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
                        verify_detail(ep, gnutls_session_get_verify_cert_status(t->session));
                        return -EKEYREJECTED;
                }
                snprintf(ep->detail, sizeof ep->detail, "TLS handshake failed: %s", gnutls_strerror(r));
                return -ECONNABORTED;
        }
}

static int tls_connect(struct http_conn *c, struct http_endpoint *ep, usec_t deadline) {
        int r;

        r = http_transport_tcp.connect(c, ep, deadline);
        if (r < 0)
                return r;
        struct tls_state *t = calloc(1, sizeof *t);
        if (!t)
                r = -ENOMEM;
        else {
                c->tls = t;
                r = tls_setup(t, ep, c->fd);
                if (r >= 0)
                        r = tls_handshake(c, ep, deadline);
        }
        if (r < 0)
                tls_close(c);
        return r;
}

static int tls_write_all(struct http_conn *c, const void *buf, size_t len, usec_t deadline) {
        struct tls_state *t = c->tls;
        const char *p = buf;
        while (len > 0) {
                ssize_t k = gnutls_record_send(t->session, p, len);
                if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) {
                        /* the same data again once the socket is ready */
                        int r = tls_wait(c, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (k < 0)
                        return k == GNUTLS_E_PUSH_ERROR ? -EPIPE : -ECONNRESET;
                p += k;
                len -= (size_t)k;
        }
        return 0;
}

static ssize_t tls_read_some(struct http_conn *c, void *buf, size_t size, usec_t deadline) {
        struct tls_state *t = c->tls;
        for (;;) {
                ssize_t k = gnutls_record_recv(t->session, buf, size);
                if (k >= 0)
                        return k;
                if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) {
                        int r = tls_wait(c, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                /* A server that closes without close_notify (many do, after
                 * "Connection: close") ends the stream; the parser tells a
                 * cut answer from a whole one. */
                if (k == GNUTLS_E_PREMATURE_TERMINATION)
                        return 0;
                if (!gnutls_error_is_fatal((int)k))
                        continue;
                return k == GNUTLS_E_PULL_ERROR ? -ECONNRESET : -EPROTO;
        }
}

const struct http_transport http_transport_tls = {
        .name = "tls",
        .connect = tls_connect,
        .write_all = tls_write_all,
        .read_some = tls_read_some,
        .close = tls_close,
};

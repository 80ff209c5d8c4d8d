/* SPDX-License-Identifier: MIT */
/* Where mlmonctl finds mlmond: the unix socket (--socket, $MLMON_SOCKET) or
 * a URL (--url, $MLMON_URL) over TCP or TLS, with a bearer token read from
 * a file (--token-file, $MLMON_TOKEN_FILE) and the certificates to trust
 * (--ca-file). Options on the command line win over the environment. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http-client.h"
#include "http-tls.h"
#include "mlmonctl.h"

const char *arg_url;
const char *arg_token_file;
const char *arg_ca_file;
bool arg_socket_given;

struct http_endpoint endpoint = { .transport = &http_transport_unix, .socket_path = DEFAULT_SOCKET };
static struct http_url url;
static char *token;

const char *daemon_address(void) {
        return arg_url ? arg_url : arg_socket;
}

/* The token file's content less one trailing newline, or EXIT_USAGE
 * (printed). The file must not be readable by others; the token never
 * appears in a message. */
static int read_token(const char *path, char **ret) {
        struct stat st;
        _cleanup_close_ int fd = open_regular(path, &st);
        if (fd == -EBADFD) {
                error_line("--token-file %s: not a regular file", path);
                return EXIT_USAGE;
        }
        if (fd < 0) {
                error_line_errno(fd, "--token-file %s: %m", path);
                return EXIT_USAGE;
        }
        if (st.st_mode & S_IROTH) {
                error_line("--token-file %s: readable by others, refusing to use it (chmod o-r %s)", path, path);
                return EXIT_USAGE;
        }
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = read_secret(fd, HTTP_TOKEN_MAX, &buf, &len);
        if (r == -EFBIG)
                error_line("--token-file %s: too large for a token (at most %d bytes)", path, HTTP_TOKEN_MAX);
        else if (r == -EBADMSG)
                error_line("--token-file %s: contains a NUL byte", path);
        else if (r < 0)
                error_line_errno(r, "--token-file %s: %m", path);
        if (r < 0)
                return EXIT_USAGE;
        if (len == 0) {
                error_line("--token-file %s: empty", path);
                return EXIT_USAGE;
        }
        if (!http_token_valid(buf)) {
                explicit_bzero(buf, len);
                error_line("--token-file %s: not a token (1 to %d printable ASCII characters, no spaces)", path,
                           HTTP_TOKEN_MAX);
                return EXIT_USAGE;
        }
        *ret = TAKE_PTR(buf);
        return CONTINUE;
}

static const char *env_or(const char *given, const char *name) {
        const char *e;
        if (given)
                return given;
        e = getenv(name);
        return e && *e ? e : NULL;
}

int endpoint_setup(void) {
        int r;

        if (arg_url && arg_socket_given)
                return usage_error("--url and --socket: give one of them");
        if (!arg_socket_given)
                arg_url = env_or(arg_url, "MLMON_URL");
        arg_token_file = env_or(arg_token_file, "MLMON_TOKEN_FILE");

        endpoint = (struct http_endpoint){ .transport = &http_transport_unix, .socket_path = arg_socket };
        if (arg_url) {
                r = http_url_parse(arg_url, &url);
                if (r == -ENOMEM)
                        return oom();
                if (r < 0)
                        return usage_error("invalid URL '%s': expected http://HOST[:PORT] or https://HOST[:PORT]",
                                           arg_url);
                endpoint.transport = url.tls ? &http_transport_tls : &http_transport_tcp;
                endpoint.host = url.host;
                endpoint.port = url.port;
        }
        if (arg_ca_file) {
                if (access(arg_ca_file, R_OK) < 0) {
                        error_line_errno(errno, "--ca-file %s: %m", arg_ca_file);
                        return EXIT_USAGE;
                }
                endpoint.ca_file = arg_ca_file;
        }
        if (arg_token_file) {
                r = read_token(arg_token_file, &token);
                if (r != CONTINUE)
                        return r;
                /* what the daemon refuses too: a token in clear text
                 * beyond this machine */
                if (arg_url && !url.tls && !http_host_is_loopback(url.host)) {
                        error_line("refusing to send the token unencrypted to %s: use https://", url.host);
                        return EXIT_USAGE;
                }
                endpoint.token = token;
        }
        return CONTINUE;
}

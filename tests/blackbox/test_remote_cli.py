# SPDX-License-Identifier: MIT
"""mlmonctl --url: the real mlmonctl over TCP and TLS, on loopback only.

Plain HTTP goes to the real daemon's TCP listener and must print what the
unix socket gives. The token and TLS are checked against small servers of
the test's own (Python's http.server, with ssl for HTTPS, answering a fixed
JSON for GET /v1/runs and recording the request headers), with a
self-signed certificate made by openssl for each test."""

import http.server
import json
import os
import socket
import ssl
import subprocess
import threading
import time

import pytest

from conftest import MLMONCTL, free_port, make_cert

RUNS = {"runs": [], "truncated": False}
TOKEN = "tok-3f9a1c7e.b2_d0~x+y/z="


def ctl(*args, env=None, timeout=30):
    """mlmonctl with an environment free of the MLMON_ variables, plus env."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("MLMON_")}
    e.update(env or {})
    return subprocess.run([MLMONCTL] + [str(a) for a in args], stdin=subprocess.DEVNULL, capture_output=True,
                          env=e, timeout=timeout)


def one_line(r):
    """stderr is one line; returns it."""
    text = r.stderr.decode()
    assert text.count("\n") == 1 and text.endswith("\n"), f"not one line: {text!r}"
    return text


def token_file(d, content=TOKEN + "\n", mode=0o600, name="token"):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(content)
    os.chmod(path, mode)
    return path


# ---- a recording HTTP(S) server ------------------------------------------------


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.server.requests.append((self.command, self.path, dict(self.headers.items())))
        if self.path.split("?")[0] == "/v1/runs":
            body, status = json.dumps(RUNS).encode(), 200
        else:
            body, status = b'{"error":{"code":"not_found","message":"no such thing"}}', 404
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server:
    """A threaded http.server on 127.0.0.1:PORT; with context, HTTPS."""

    def __init__(self, context=None):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        self.httpd.requests = []
        self.httpd.daemon_threads = True
        if context:
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def requests(self):
        return self.httpd.requests

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def servers():
    started = []

    def start(context=None):
        s = Server(context)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def tls_context(cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


# ---- plain HTTP to the real daemon ------------------------------------------------


def test_read_verbs_over_tcp_print_what_the_socket_prints(mlmond, helpers):
    h = helpers("busy", "5", "0")
    h.expect("ready")
    live = mlmond.register(h.pid, name="remote")
    e = helpers("busy", "5", "0")
    e.expect("ready")
    ended = mlmond.register(e.pid, name="ended")
    mlmond.wait_sample_after(ended["id"], ended["registered_ts"])
    st, _ = mlmond.delete(f"/v1/runs/{ended['id']}")
    assert st == 200
    url = f"http://127.0.0.1:{mlmond.port}"
    env = {"MLMON_URL": url}
    # an ended run's figures no longer move: each verb's output must be the same
    for args in (["show", ended["id"]], ["--json", "show", ended["id"]], ["report", ended["id"]]):
        over_socket = mlmond.ctl(*args)
        over_tcp = ctl("--url", url, *args)
        assert over_socket.returncode == 0, over_socket.stderr.decode()
        assert over_tcp.returncode == 0, over_tcp.stderr.decode()
        assert over_tcp.stdout == over_socket.stdout, args
        assert over_tcp.stderr == over_socket.stderr == b""
        assert ctl(*args, env=env).stdout == over_socket.stdout, args  # $MLMON_URL
    # the running one is in the list both ways (its CPU% moves between calls)
    for r in (ctl("--url", url, "list"), ctl("list", "--url", url, "--json"), ctl("list", env=env)):
        assert r.returncode == 0, r.stderr.decode()
        assert str(live["id"]) in r.stdout.decode() and "remote" in r.stdout.decode()
    names = [run["name"] for run in json.loads(ctl("--json", "list", "--all", "--url", url).stdout)["runs"]]
    assert sorted(names) == ["ended", "remote"]
    # a token rides along; reads go on working with it
    r = ctl("--url", url, "--token-file", token_file(mlmond.dir), "--json", "list")
    assert r.returncode == 0 and json.loads(r.stdout)["runs"][0]["id"] == live["id"], r.stderr.decode()


def test_socket_option_beats_the_url_in_the_environment(mlmond):
    missing = f"http://127.0.0.1:{free_port()}"
    r = ctl("--socket", mlmond.socket_path, "list", env={"MLMON_URL": missing})
    assert r.returncode == 0, r.stderr.decode()
    r = ctl("--url", f"http://127.0.0.1:{mlmond.port}", "list", env={"MLMON_SOCKET": "/nonexistent/sock"})
    assert r.returncode == 0, r.stderr.decode()
    r = ctl("--url", missing, "--socket", mlmond.socket_path, "list")
    assert r.returncode == 2 and b"--url" in r.stderr, r


def test_https_to_a_plain_listener_fails_in_one_line(mlmond):
    r = ctl("--url", f"https://127.0.0.1:{mlmond.port}", "list")
    assert r.returncode == 1 and "TLS handshake failed" in one_line(r), r


# ---- connection errors ------------------------------------------------------------------


def test_connection_errors_exit_1_in_one_line(tmpdir_0755):
    url = f"http://127.0.0.1:{free_port()}"
    r = ctl("--url", url, "list")
    assert r.returncode == 1 and f"cannot connect to {url}: Connection refused" in one_line(r), r
    r = ctl("--url", "https://no-such-host.invalid:9477", "list")
    assert r.returncode == 1 and "cannot resolve host name 'no-such-host.invalid'" in one_line(r), r


def test_a_silent_peer_times_out(tmpdir_0755):
    """A listener that accepts and never answers: the plain request and the
    TLS handshake both give up at the request's 10 s deadline."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        t0 = time.monotonic()
        procs = [subprocess.Popen([MLMONCTL, "--url", f"{scheme}://127.0.0.1:{port}", "list"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for scheme in ("http", "https")]
        for p in procs:
            out, err = p.communicate(timeout=30)
            assert p.returncode == 1 and b"did not answer within 10 s" in err, (p.args, err)
        assert 9.5 <= time.monotonic() - t0 < 20


def test_bad_urls_are_usage_errors():
    for url in ("ftp://host", "http://", "http://host:0", "http://host:65536", "http://user@host",
                "http://host/v1/runs", "127.0.0.1:9477", "http://[::1"):
        r = ctl("--url", url, "list")
        assert r.returncode == 2 and b"invalid URL" in r.stderr, (url, r)


# ---- the token ---------------------------------------------------------------------


def test_token_is_sent_as_bearer_on_every_request(servers, tmpdir_0755):
    s = servers()
    url = f"http://127.0.0.1:{s.port}"
    tok = token_file(tmpdir_0755)
    r = ctl("--url", url, "--token-file", tok, "--json", "list")
    assert r.returncode == 0 and json.loads(r.stdout) == RUNS, r.stderr.decode()
    r = ctl("list", env={"MLMON_URL": url, "MLMON_TOKEN_FILE": tok})
    assert r.returncode == 0, r.stderr.decode()
    r = ctl("--url", url, "list")  # no token: no header
    assert r.returncode == 0, r.stderr.decode()
    r = ctl("--url", url, "--token-file", tok, "show", "7")  # the daemon's message, exit 1
    assert r.returncode == 1 and one_line(r) == "mlmonctl: no such thing\n", r
    auth = [h.get("Authorization") for _, _, h in s.requests]
    assert auth == [f"Bearer {TOKEN}", f"Bearer {TOKEN}", None, f"Bearer {TOKEN}"], auth
    assert [p for _, p, _ in s.requests] == ["/v1/runs", "/v1/runs", "/v1/runs", "/v1/runs/7"]
    assert s.requests[0][2]["Host"] == f"127.0.0.1:{s.port}"


def test_only_one_trailing_newline_is_stripped(servers, tmpdir_0755):
    s = servers()
    url = f"http://127.0.0.1:{s.port}"
    assert ctl("--url", url, "--token-file", token_file(tmpdir_0755, TOKEN), "list").returncode == 0
    r = ctl("--url", url, "--token-file", token_file(tmpdir_0755, TOKEN + "\n\n"), "list")
    assert r.returncode == 2 and "not a token" in one_line(r), r
    assert [h.get("Authorization") for _, _, h in s.requests] == [f"Bearer {TOKEN}"]


def test_token_file_readable_by_others_or_empty_is_refused(servers, tmpdir_0755):
    s = servers()
    url = f"http://127.0.0.1:{s.port}"
    for mode in (0o644, 0o604):
        tok = token_file(tmpdir_0755, mode=mode)
        for r in (ctl("--url", url, "--token-file", tok, "list"),
                  ctl("list", env={"MLMON_URL": url, "MLMON_TOKEN_FILE": tok})):
            line = one_line(r)
            assert r.returncode == 2 and "readable by others" in line and tok in line, r
            assert TOKEN.encode() not in r.stdout + r.stderr
    for content in ("", "\n"):
        r = ctl("--url", url, "--token-file", token_file(tmpdir_0755, content), "list")
        assert r.returncode == 2 and "empty" in one_line(r), r
    r = ctl("--url", url, "--token-file", os.path.join(tmpdir_0755, "missing"), "list")
    assert r.returncode == 2 and "No such file" in one_line(r), r
    assert s.requests == []  # nothing was sent


def test_token_is_not_sent_in_clear_beyond_loopback(tmpdir_0755):
    r = ctl("--url", "http://192.0.2.1:9477", "--token-file", token_file(tmpdir_0755), "list", timeout=10)
    assert r.returncode == 2 and "use https://" in one_line(r), r


# ---- TLS -------------------------------------------------------------------------------


def test_tls_with_ca_file_works_and_sends_the_token(servers, tmpdir_0755, localhost_cert):
    cert, key = localhost_cert
    s = servers(tls_context(cert, key))
    tok = token_file(tmpdir_0755)
    for host in ("127.0.0.1", "localhost"):  # the certificate's IP address and its name
        r = ctl("--url", f"https://{host}:{s.port}", "--ca-file", cert, "--token-file", tok, "--json", "list")
        assert r.returncode == 0 and json.loads(r.stdout) == RUNS, (host, r.stderr.decode())
    assert [h.get("Authorization") for _, _, h in s.requests] == [f"Bearer {TOKEN}"] * 2
    r = ctl("--ca-file", cert, "list", env={"MLMON_URL": f"https://127.0.0.1:{s.port}", "MLMON_TOKEN_FILE": tok})
    assert r.returncode == 0, r.stderr.decode()
    assert len(s.requests) == 3 and s.requests[-1][2]["Authorization"] == f"Bearer {TOKEN}"


def test_tls_without_ca_file_refuses_the_self_signed_certificate(servers, tmpdir_0755, localhost_cert):
    s = servers(tls_context(*localhost_cert))
    url = f"https://127.0.0.1:{s.port}"
    r = ctl("--url", url, "--token-file", token_file(tmpdir_0755), "list")
    assert r.returncode == 1 and r.stdout == b"", r
    assert one_line(r) == f"mlmonctl: cannot talk to mlmond at {url}: the certificate is not trusted (use --ca-file)\n"
    assert s.requests == []  # the token never left


def test_tls_refuses_a_certificate_for_another_host(servers, tmpdir_0755):
    cert, key = make_cert(tmpdir_0755, "other", "DNS:other.example,IP:192.0.2.7")
    s = servers(tls_context(cert, key))
    for host in ("127.0.0.1", "localhost"):
        url = f"https://{host}:{s.port}"
        r = ctl("--url", url, "--ca-file", cert, "--token-file", token_file(tmpdir_0755), "list")
        assert r.returncode == 1, r
        assert one_line(r) == f"mlmonctl: cannot talk to mlmond at {url}: the certificate is not for host '{host}'\n"
    # trusted through another CA file: still not trusted
    other_ca, _ = make_cert(tmpdir_0755, "ca2", "DNS:localhost")
    r = ctl("--url", f"https://localhost:{s.port}", "--ca-file", other_ca, "list")
    assert r.returncode == 1 and "the certificate is not trusted" in one_line(r), r
    assert s.requests == []


def test_ca_file_errors(servers, tmpdir_0755, localhost_cert):
    s = servers(tls_context(*localhost_cert))
    url = f"https://127.0.0.1:{s.port}"
    r = ctl("--url", url, "--ca-file", os.path.join(tmpdir_0755, "missing.pem"), "list")
    assert r.returncode == 2 and "--ca-file" in one_line(r), r
    junk = os.path.join(tmpdir_0755, "junk.pem")
    with open(junk, "w") as f:
        f.write("not a certificate\n")
    r = ctl("--url", url, "--ca-file", junk, "list")
    assert r.returncode == 1 and "no certificate read from" in one_line(r), r


def test_plain_http_to_a_tls_listener_fails_in_one_line(servers, localhost_cert):
    s = servers(tls_context(*localhost_cert))
    r = ctl("--url", f"http://127.0.0.1:{s.port}", "list")
    assert r.returncode == 1 and r.stdout == b"", r
    one_line(r)

# SPDX-License-Identifier: MIT
"""The daemon's side of remote use: HTTPS on the TCP listener ([http]
tls_cert, tls_key) and a bearer token ([http] token_file) that allows over
TCP what the unix socket allows root. A real mlmond on loopback with a
self-signed certificate made by openssl, asked with curl and the real
mlmonctl; and the configurations it refuses to start with."""

import http.client
import json
import os
import signal
import ssl
import subprocess

import pytest

from conftest import MLMOND, MLMONCTL, Mlmond, free_port, wait_for

TOKEN = "mlmond-test-token-5c1e9d0a7b"
OTHER = "mlmond-test-token-ffffffffff"


def write_file(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


class TlsMlmond(Mlmond):
    """An mlmond whose TCP listener speaks HTTPS; the fixture's own requests
    (the health check at start) trust the test's certificate."""

    def __init__(self, tmpdir, cert, **kw):
        self.cert = cert
        super().__init__(tmpdir, **kw)

    def tcp_connection(self, timeout):
        ctx = ssl.create_default_context(cafile=self.cert)
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=ctx)

    def url(self, path=""):
        return f"https://127.0.0.1:{self.port}{path}"


@pytest.fixture
def remote(make_mlmond, tmpdir_0755, localhost_cert):
    """An mlmond with TLS and a token; .token_path, .cert."""
    cert, key = localhost_cert
    token_path = write_file(os.path.join(tmpdir_0755, "token"), TOKEN + "\n")
    d = make_mlmond(cls=TlsMlmond, cert=cert,
                    config_text=f"[http]\ntoken_file = {token_path}\ntls_cert = {cert}\ntls_key = {key}\n")
    d.token_path = token_path
    return d


def curl(d, method, path, token=None, body=None, scheme="https"):
    """curl against d's TCP listener; returns (curl's exit code, status,
    headers (lower-case names), body)."""
    hdr = os.path.join(d.dir, "curl.headers")
    argv = ["curl", "-sS", "--max-time", "10", "--cacert", d.cert, "-X", method, "-D", hdr,
            "-o", "-", f"{scheme}://127.0.0.1:{d.port}{path}"]
    if token is not None:
        argv += ["-H", f"Authorization: Bearer {token}"]
    if body is not None:
        argv += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    r = subprocess.run(argv, capture_output=True, timeout=20)
    if r.returncode != 0:
        return r.returncode, None, {}, r.stderr
    with open(hdr) as f:
        lines = f.read().splitlines()
    headers = dict((k.strip().lower(), v.strip()) for k, _, v in (x.partition(":") for x in lines[1:] if ":" in x))
    return 0, int(lines[0].split()[1]), headers, r.stdout


def ctl(d, *args, token_path=None):
    argv = [MLMONCTL, "--url", d.url(), "--ca-file", d.cert, "--token-file", token_path or d.token_path]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLMON_")}
    return subprocess.run(argv + [str(a) for a in args], stdin=subprocess.DEVNULL, capture_output=True, env=env,
                          timeout=30)


def test_get_is_open_and_mutations_need_the_token(remote, helpers):
    rc, st, _, body = curl(remote, "GET", "/v1/health")
    assert (rc, st) == (0, 200) and json.loads(body)["status"] == "ok", body
    rc, st, _, body = curl(remote, "GET", "/v1/runs", token=TOKEN)
    assert (rc, st) == (0, 200) and json.loads(body)["runs"] == [], body

    h = helpers("busy", "5", "0")
    h.expect("ready")
    rc, st, headers, body = curl(remote, "POST", "/v1/runs", body={"pid": h.pid})
    assert (rc, st) == (0, 401), body
    assert headers.get("www-authenticate") == 'Bearer realm="mlmond"', headers
    assert json.loads(body)["error"]["code"] == "unauthorized"
    rc, st, _, body = curl(remote, "POST", "/v1/runs", token=OTHER, body={"pid": h.pid})
    assert (rc, st) == (0, 403) and json.loads(body)["error"]["code"] == "forbidden", body
    rc, st, _, body = curl(remote, "GET", "/v1/runs", token=OTHER)  # a wrong token is wrong for a GET too
    assert (rc, st) == (0, 403), body
    st, runs = remote.uget("/v1/runs")
    assert st == 200 and runs["runs"] == [], "a refused POST registered something"

    rc, st, _, body = curl(remote, "POST", "/v1/runs", token=TOKEN, body={"pid": h.pid, "name": "remote"})
    assert (rc, st) == (0, 201), body
    run = json.loads(body)
    assert run["pid"] == h.pid and run["name"] == "remote" and run["state"] == "running"
    remote.wait_sample_after(run["id"], run["registered_ts"])  # really sampled
    rc, st, _, body = curl(remote, "DELETE", f"/v1/runs/{run['id']}")
    assert (rc, st) == (0, 401), body
    rc, st, _, body = curl(remote, "DELETE", f"/v1/runs/{run['id']}", token=TOKEN)
    assert (rc, st) == (0, 200) and json.loads(body)["state"] == "unregistered", body
    # marks too, as root; the pid-less observations endpoint has no process to go by
    rc, st, _, body = curl(remote, "POST", "/v1/observations", token=TOKEN, body=[])
    assert (rc, st) == (0, 400), body
    assert TOKEN not in remote.stderr()


def test_the_token_must_match_exactly(remote, helpers):
    """A token with a suffix, a prefix of it, an empty one, one with
    something after a blank or in another case: each is wrong, 403 on a GET
    as on a POST, and nothing is registered; the exact token works, and so
    does it with blanks after it (HTTP's optional whitespace around a header
    value is no part of the value)."""
    h = helpers("busy", "5", "0")
    h.expect("ready")
    for wrong in (TOKEN + "x", TOKEN + OTHER, TOKEN[:-1], TOKEN[:1], "", TOKEN + " x", " x" + TOKEN, TOKEN.upper()):
        auth = {"Authorization": "Bearer " + wrong}
        r = remote.request("GET", "/v1/runs", headers=auth)
        assert r.status == 403 and r.json["error"]["code"] == "forbidden", (wrong, r.status, r.body)
        r = remote.request("POST", "/v1/runs", body={"pid": h.pid}, headers=auth)
        assert r.status == 403 and r.json["error"]["code"] == "forbidden", (wrong, r.status, r.body)
    st, runs = remote.uget("/v1/runs")
    assert st == 200 and runs["runs"] == [], "a refused POST registered something"
    for blank in (" ", "\t", " \t "):
        r = remote.request("GET", "/v1/runs", headers={"Authorization": "Bearer " + TOKEN + blank})
        assert r.status == 200, (repr(blank), r.status, r.body)
    r = remote.request("POST", "/v1/runs", body={"pid": h.pid}, headers={"Authorization": "Bearer " + TOKEN + " "})
    assert r.status == 201, (r.status, r.body)


def test_mlmonctl_registers_and_unregisters_over_https(remote, helpers):
    h = helpers("busy", "5", "0")
    h.expect("ready")
    r = ctl(remote, "register", h.pid, "--name", "via-tls")
    assert r.returncode == 0, r.stderr.decode()
    run_id = int(r.stdout.decode())
    assert remote.run(run_id)["name"] == "via-tls"
    r = ctl(remote, "--json", "list")
    assert r.returncode == 0 and [x["id"] for x in json.loads(r.stdout)["runs"]] == [run_id], r.stderr.decode()
    r = ctl(remote, "unregister", run_id)
    assert r.returncode == 0, r.stderr.decode()
    assert remote.run(run_id)["state"] == "unregistered"
    wrong = write_file(os.path.join(remote.dir, "wrong-token"), OTHER + "\n")
    r = ctl(remote, "register", h.pid, token_path=wrong)
    assert r.returncode == 1 and b"wrong token" in r.stderr, r


def test_plain_http_to_the_tls_port_fails(remote):
    rc, st, _, _ = curl(remote, "GET", "/v1/health", scheme="http")
    assert rc != 0 or st != 200
    assert remote.get("/v1/health")[0] == 200  # and the listener goes on


def test_the_unix_socket_stays_plain_and_read_write(remote, helpers):
    h = helpers("busy", "5", "0")
    h.expect("ready")
    run = remote.register(h.pid)  # over the unix socket, no token
    st, _ = remote.delete(f"/v1/runs/{run['id']}")
    assert st == 200


def test_reload_reads_the_token_again(remote):
    after = remote.log_lines()
    write_file(remote.token_path, OTHER + "\n")
    remote.signal(signal.SIGHUP)
    remote.wait_log("configuration reloaded", after=after)
    assert curl(remote, "POST", "/v1/runs", token=TOKEN, body={"pid": 1})[1] == 403
    # a bad token file on reload: refused, the token read before is kept
    after = remote.log_lines()
    os.chmod(remote.token_path, 0o644)
    remote.allowed_errors.append("reload failed")
    remote.signal(signal.SIGHUP)
    remote.wait_log("reload failed.*not readable by group or others", after=after)
    assert curl(remote, "GET", "/v1/runs", token=OTHER)[1] == 200
    assert OTHER not in remote.stderr()


# ---- refusals at start --------------------------------------------------------


def start_refused(tmpdir, config_text, listen="127.0.0.1", check=False, one_line=True):
    """mlmond with config_text: must exit 1 at once, with one line (a
    configuration error) unless one_line is false; returns its stderr."""
    conf = write_file(os.path.join(tmpdir, "refused.conf"), config_text, 0o644)
    argv = [MLMOND, "-c", conf, "--db", os.path.join(tmpdir, "refused.db"), "--listen", f"{listen}:{free_port()}",
            "--socket", os.path.join(tmpdir, "refused.sock"), "--statsd-socket", os.path.join(tmpdir, "st.sock"),
            "--statsd-udp", "none"] + (["--check-config"] if check else [])
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    err = r.stderr.decode()
    assert r.returncode == 1, (r.returncode, err)
    assert not one_line or len(err.strip().splitlines()) == 1, f"not one line: {err!r}"
    return err


@pytest.mark.parametrize("check", [False, True], ids=["start", "check-config"])
def test_token_file_readable_by_others_is_refused(tmpdir_0755, check):
    tok = write_file(os.path.join(tmpdir_0755, "token"), TOKEN + "\n", 0o644)
    err = start_refused(tmpdir_0755, f"[http]\ntoken_file = {tok}\n", check=check)
    assert "token_file" in err and "not readable by group or others" in err, err
    assert TOKEN not in err
    write_file(tok, "short\n")
    err = start_refused(tmpdir_0755, f"[http]\ntoken_file = {tok}\n", check=check)
    assert "16 to 4096 visible ASCII characters" in err, err


def test_token_without_tls_beyond_loopback_is_refused(tmpdir_0755, localhost_cert):
    tok = write_file(os.path.join(tmpdir_0755, "token"), TOKEN + "\n")
    err = start_refused(tmpdir_0755, f"[http]\ntoken_file = {tok}\n", listen="0.0.0.0")
    assert "clear text" in err, err
    # the key of a certificate readable by others: refused like the token
    cert, key = localhost_cert
    os.chmod(key, 0o644)
    err = start_refused(tmpdir_0755, f"[http]\ntoken_file = {tok}\ntls_cert = {cert}\ntls_key = {key}\n",
                        listen="0.0.0.0")
    assert "tls_key" in err and "not readable by group or others" in err, err


def test_tls_cert_without_key_is_refused(tmpdir_0755, localhost_cert):
    cert, _ = localhost_cert
    err = start_refused(tmpdir_0755, f"[http]\ntls_cert = {cert}\n")
    assert "tls_cert and tls_key" in err, err
    # a private file that holds no key: libmicrohttpd cannot start HTTPS
    # (found only then, once the database is open: more lines)
    with open(cert) as f:
        not_a_key = write_file(os.path.join(tmpdir_0755, "not-a-key.pem"), f.read())
    err = start_refused(tmpdir_0755, f"[http]\ntls_cert = {cert}\ntls_key = {not_a_key}\n", one_line=False)
    assert "cannot serve HTTPS" in err.splitlines()[-1] and "tls_cert and tls_key" in err, err

# SPDX-License-Identifier: MIT
"""The HTTP API over mlmond's unix socket: HTTP/1.1, one connection per
request, JSON in and out. Where the sockets are: $MLMON_SOCKET and
$MLMON_STATSD_SOCKET (as `mlmonctl run` sets them for its job), else the
StatsD socket next to the API socket, else the one the daemon's config file
names, else the default layout."""

import http.client
import json
import os
import socket
import urllib.parse

DEFAULT_SOCKET = "/run/mlmond/mlmond.sock"
DEFAULT_STATSD_SOCKET = "/run/mlmond/statsd.sock"
# Where mlmond's config may be (a package's prefix, meson's default one).
CONFIG_FILES = ("/etc/mlmond/mlmond.conf", "/usr/local/etc/mlmond/mlmond.conf")
TIMEOUT_S = 5.0

_configured = {"socket": None, "statsd_socket": None}


class Error(Exception):
    """Base of every exception mlmon raises."""


class Unavailable(Error):
    """mlmond cannot be reached (not running, no socket, refused), or this
    process belongs to no run to ask about."""


class ApiError(Error):
    """mlmond answered with an error: .status (HTTP), .code, .message."""

    def __init__(self, status, code, message):
        super().__init__(f"mlmond: {message} (HTTP {status}, {code})")
        self.status = status
        self.code = code
        self.message = message


def api_socket():
    return _configured["socket"] or os.environ.get("MLMON_SOCKET") or DEFAULT_SOCKET


def statsd_socket():
    if _configured["statsd_socket"]:
        return _configured["statsd_socket"]
    e = os.environ.get("MLMON_STATSD_SOCKET")
    if e:
        return e
    api = _configured["socket"] or os.environ.get("MLMON_SOCKET")
    if api:
        return os.path.join(os.path.dirname(api), "statsd.sock")
    if "config" not in _configured:
        _configured["config"] = _config_statsd_socket()
    return _configured["config"] or DEFAULT_STATSD_SOCKET


def _config_statsd_socket():
    """[daemon] statsd_socket of the daemon's config file, where it is set
    and readable; None otherwise (under systemd the socket unit decides)."""
    import configparser
    for path in CONFIG_FILES:
        c = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), interpolation=None)
        try:
            if c.read(path):
                return c.get("daemon", "statsd_socket", fallback=None) or None
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
    return None


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def query_string(params):
    """?k=v&... of the params that are not None; '' when there is none."""
    kept = [(k, v) for k, v in params.items() if v is not None]
    return "?" + urllib.parse.urlencode(kept, safe=",:@") if kept else ""


def request(method, path, body=None, timeout=TIMEOUT_S):
    """One request; returns the parsed JSON answer. Raises Unavailable when
    the daemon cannot be reached, ApiError on a 4xx/5xx answer."""
    sock_path = api_socket()
    conn = _UnixHTTPConnection(sock_path, timeout)
    headers = {"Connection": "close"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        status = r.status
    except (OSError, http.client.HTTPException) as e:
        raise Unavailable(f"mlmond is not reachable on {sock_path}: {e}") from None
    finally:
        conn.close()
    try:
        answer = json.loads(raw.decode("utf-8")) if raw else None
    except ValueError:
        raise ApiError(status, "bad_answer", f"{method} {path}: the answer is not JSON") from None
    if status >= 400:
        err = answer.get("error", {}) if isinstance(answer, dict) else {}
        raise ApiError(status, err.get("code", "error"), err.get("message", f"{method} {path} failed"))
    return answer

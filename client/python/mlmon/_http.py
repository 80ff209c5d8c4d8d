# SPDX-License-Identifier: MIT
"""The HTTP API over mlmond's unix socket: HTTP/1.1, one connection per
request, JSON in and out. Where the sockets are: $MLMON_SOCKET and
$MLMON_STATSD_SOCKET (as `mlmonctl run` sets them for its job), else the
StatsD socket next to the API socket, else the one the daemon's config file
names, else the default layout.

A daemon that does not answer (stopped, hung, or a socket that accepts and
never answers) costs a job one timeout: after it, the circuit breaker stays
open for BREAKER_OPEN_S, and every request in that time raises Unavailable
at once instead of waiting again. The first time it opens it says so on the
"mlmon" logger, once per process."""

import http.client
import json
import logging
import os
import socket
import threading
import time
import urllib.parse

DEFAULT_SOCKET = "/run/mlmond/mlmond.sock"
DEFAULT_STATSD_SOCKET = "/run/mlmond/statsd.sock"
# Where mlmond's config may be (a package's prefix, meson's default one).
CONFIG_FILES = ("/etc/mlmond/mlmond.conf", "/usr/local/etc/mlmond/mlmond.conf")
# What the package asks for itself, maybe in the job's loop (finding the
# run, registering it, the profiler's and benchmark()'s reads): a daemon
# answers these in milliseconds, one that has not answered in a second is
# stopped or stuck.
TIMEOUT_S = 1.0
# Queries the job asks for (Run.latency(), report() over days): the daemon
# bounds its own work on one at query_timeout (2 s by default).
QUERY_TIMEOUT_S = 5.0
# After a timeout, no request is made for this long. Timings and marks do
# not need the daemon to answer: they go on over the datagram socket.
BREAKER_OPEN_S = 30.0

log = logging.getLogger("mlmon")

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


class _Breaker:
    """Open (no request made) for BREAKER_OPEN_S after a request timed out;
    then the next request tries again."""

    def __init__(self):
        self.lock = threading.Lock()
        self.open_until = 0.0
        self.warned = False

    def check(self, sock_path):
        left = self.open_until - time.monotonic()
        if left > 0:
            raise Unavailable(f"mlmond did not answer on {sock_path} in time: not asking it again for "
                              f"{left:.0f} s")

    def trip(self, sock_path, timeout):
        with self.lock:
            self.open_until = time.monotonic() + BREAKER_OPEN_S
            if not self.warned:
                self.warned = True
                log.warning("mlmon: mlmond did not answer on %s within %g s: no more requests to it for "
                            "%g s at a time (timings and marks go on over its datagram socket)", sock_path,
                            timeout, BREAKER_OPEN_S)


_breaker = _Breaker()


def check_breaker():
    """Raises Unavailable while the breaker is open."""
    _breaker.check(api_socket())


def trip_breaker(waited_s):
    """mlmond did not answer (some other way) within waited_s."""
    _breaker.trip(api_socket(), waited_s)


def request(method, path, body=None, timeout=TIMEOUT_S):
    """One request; returns the parsed JSON answer. Raises Unavailable when
    the daemon cannot be reached, did not answer within timeout, or did not
    answer a request in the last BREAKER_OPEN_S; ApiError on a 4xx/5xx
    answer."""
    sock_path = api_socket()
    _breaker.check(sock_path)
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
    except (socket.timeout, BlockingIOError) as e:
        # no answer in time, or (EAGAIN from connect()) a listener whose
        # queue of connections is full: nobody is accepting them
        _breaker.trip(sock_path, timeout)
        raise Unavailable(f"mlmond did not answer on {sock_path} within {timeout:g} s ({e})") from None
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

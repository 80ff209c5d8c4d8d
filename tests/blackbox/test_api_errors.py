# SPDX-License-Identifier: MIT
"""Malformed and hostile input: every refusal is a 4xx with a JSON error
body, and the daemon carries on; every answer is strict UTF-8 JSON even when
a process's name and command line are not text."""

import http.client
import json
import os
import socket

import pytest

from conftest import BadJSON, now_ms, stat_starttime, strict_json

ERROR_CODES = {"bad_request", "forbidden", "not_found", "method_not_allowed", "conflict", "payload_too_large",
               "unsupported_media_type", "unavailable", "internal"}
STATUS_CODE = {400: "bad_request", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 409: "conflict",
               413: "payload_too_large"}


def raw(mlmond, data, unix=False, method="GET"):
    """Sends data as is; returns (status, headers, body bytes)."""
    if unix:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(mlmond.socket_path)
    else:
        s = socket.create_connection(("127.0.0.1", mlmond.port))
    s.settimeout(10)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the body was read: the answer is waiting
        r = http.client.HTTPResponse(s, method=method)
        r.begin()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        s.close()


def http_req(method, path, body=b"", headers=()):
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    for h in headers:
        head += h + "\r\n"
    if body and not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


@pytest.fixture
def target(mlmond, helpers):
    """A daemon with one running run; returns (mlmond, run id, pid)."""
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid, interval="250ms")
    mlmond.wait_sample_after(run["id"], run["registered_ts"])
    return mlmond, run["id"], h.pid


def nonexistent_pid():
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    for pid in range(pid_max - 1, 1, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    pytest.fail("no free pid")


def cases(run_id, pid):
    """(description, unix?, raw request, expected status)."""
    T = f"/v1/runs/{run_id}/throughput"
    S = f"/v1/runs/{run_id}/samples"
    p = lambda body: http_req("POST", "/v1/runs", body if isinstance(body, bytes) else json.dumps(body).encode(),  # noqa: E731
                              ["Content-Type: application/json"])
    ok = {"pid": pid}
    return [
        # ids
        ("id not a number", False, http_req("GET", "/v1/runs/abc"), 400),
        ("id negative", False, http_req("GET", "/v1/runs/-1"), 400),
        ("id zero", False, http_req("GET", "/v1/runs/0"), 400),
        ("id overflows int64", False, http_req("GET", "/v1/runs/99999999999999999999"), 400),
        ("id with a sign", False, http_req("GET", f"/v1/runs/+{run_id}"), 400),
        ("id with trailing junk", False, http_req("GET", f"/v1/runs/{run_id}x"), 400),
        ("unknown id", False, http_req("GET", "/v1/runs/987654321"), 404),
        ("unknown id, samples", False, http_req("GET", "/v1/runs/987654321/samples"), 404),
        ("unknown id, delete", True, http_req("DELETE", "/v1/runs/987654321"), 404),
        ("bad id, delete", True, http_req("DELETE", "/v1/runs/x"), 400),
        # windows
        ("window 5x", False, http_req("GET", T + "?window=5x"), 400),
        ("window empty", False, http_req("GET", T + "?window="), 400),
        ("window only a comma", False, http_req("GET", T + "?window=,"), 400),
        ("window negative", False, http_req("GET", T + "?window=-1s"), 400),
        ("window zero", False, http_req("GET", T + "?window=0s"), 400),
        ("window without unit", False, http_req("GET", T + "?window=10"), 400),
        ("window huge", False, http_req("GET", T + "?window=99999999999d"), 400),
        ("17 windows", False, http_req("GET", T + "?window=" + ",".join(f"{i}s" for i in range(1, 18))), 400),
        ("window repeated", False, http_req("GET", T + "?window=1s&window=2s"), 400),
        ("throughput until bad", False, http_req("GET", T + "?until=soon"), 400),
        # samples ranges
        ("from not a time", False, http_req("GET", S + "?from=yesterday"), 400),
        ("from negative", False, http_req("GET", S + "?from=-5"), 400),
        ("until not a time", False, http_req("GET", S + "?until=1x"), 400),
        ("from after until", False, http_req("GET", S + "?from=2000&until=1000"), 400),
        ("from after until (ago)", False, http_req("GET", S + "?from=1s&until=1m"), 400),
        ("limit zero", False, http_req("GET", S + "?limit=0"), 400),
        ("limit negative", False, http_req("GET", S + "?limit=-1"), 400),
        ("limit not a number", False, http_req("GET", S + "?limit=ten"), 400),
        ("limit overflows", False, http_req("GET", S + "?limit=99999999999999"), 400),
        ("step zero", False, http_req("GET", S + "?step=0s"), 400),
        ("step not a duration", False, http_req("GET", S + "?step=often"), 400),
        # query parameters
        ("unknown parameter", False, http_req("GET", S + "?form=1"), 400),
        ("parameter on health", False, http_req("GET", "/v1/health?verbose=1"), 400),
        ("parameter on a run", False, http_req("GET", f"/v1/runs/{run_id}?x=1"), 400),
        ("duplicate parameter", False, http_req("GET", S + "?limit=1&limit=2"), 400),
        ("17 parameters", False, http_req("GET", S + "?" + "&".join(f"p{i}=1" for i in range(17))), 400),
        ("state unknown", False, http_req("GET", "/v1/runs?state=dead"), 400),
        ("pid filter not a number", False, http_req("GET", "/v1/runs?pid=me"), 400),
        ("pid filter zero", False, http_req("GET", "/v1/runs?pid=0"), 400),
        # POST bodies
        ("no body", True, http_req("POST", "/v1/runs", b"", ["Content-Length: 0"]), 400),
        ("not JSON", True, p(b"{pid: 1}"), 400),
        ("truncated JSON", True, p(b'{"pid": 1'), 400),
        ("trailing garbage", True, p(json.dumps(ok).encode() + b" x"), 400),
        ("two objects", True, p(json.dumps(ok).encode() * 2), 400),
        ("JSON array", True, p(b"[]"), 400),
        ("JSON string", True, p(b'"pid"'), 400),
        ("missing pid", True, p({}), 400),
        ("pid string", True, p({"pid": str(pid)}), 400),
        ("pid float", True, p({"pid": pid + 0.5}), 400),
        ("pid zero", True, p({"pid": 0}), 400),
        ("pid negative", True, p({"pid": -1}), 400),
        ("pid too large", True, p({"pid": 2 ** 31}), 400),
        ("pid null", True, p({"pid": None}), 400),
        ("pid NaN", True, p(b'{"pid": NaN}'), 400),
        ("pid of no process", True, p({"pid": nonexistent_pid()}), 404),
        ("unknown field", True, p({"pid": pid, "pdi": 1}), 400),
        ("interval 0s", True, p({"pid": pid, "interval": "0s"}), 400),
        ("interval 50ms", True, p({"pid": pid, "interval": "50ms"}), 400),
        ("interval 2h", True, p({"pid": pid, "interval": "2h"}), 400),
        ("interval a number", True, p({"pid": pid, "interval": 500}), 400),
        ("interval not a duration", True, p({"pid": pid, "interval": "fast"}), 400),
        ("children not bool", True, p({"pid": pid, "children": "yes"}), 400),
        ("children a number", True, p({"pid": pid, "children": 1}), 400),
        ("tags not an object", True, p({"pid": pid, "tags": ["a"]}), 400),
        ("tag value not a string", True, p({"pid": pid, "tags": {"a": 1}}), 400),
        ("tag key empty", True, p({"pid": pid, "tags": {"": "x"}}), 400),
        ("17 tags", True, p({"pid": pid, "tags": {f"k{i}": "v" for i in range(17)}}), 400),
        ("tag value of 129 bytes", True, p({"pid": pid, "tags": {"k": "v" * 129}}), 400),
        ("discover not bool", True, p({"pid": pid, "discover": "no"}), 400),
        ("name not a string", True, p({"pid": pid, "name": 5}), 400),
        ("name empty", True, p({"pid": pid, "name": ""}), 400),
        ("name too long", True, p({"pid": pid, "name": "n" * 129}), 400),
        ("name invalid UTF-8", True, p(b'{"pid": %d, "name": "\xff\xfe"}' % pid), 400),
        ("body over 64 KiB", True, p({"pid": pid, "name": "x" * 70000}), 413),
        ("chunked body over 64 KiB", True,
         http_req("POST", "/v1/runs", b"%x\r\n%s\r\n0\r\n\r\n" % (70000, b" " * 70000),
                  ["Transfer-Encoding: chunked", "Content-Type: application/json"]), 413),
        ("Content-Length over the limit", True, http_req("POST", "/v1/runs", b"", ["Content-Length: 1000000000000"]),
         413),
        # methods and paths
        ("POST on TCP", False, p(ok), 405),
        ("DELETE on TCP", False, http_req("DELETE", f"/v1/runs/{run_id}"), 405),
        ("PUT on TCP", False, http_req("PUT", "/v1/runs", json.dumps(ok).encode()), 405),
        ("PATCH on TCP", False, http_req("PATCH", f"/v1/runs/{run_id}", b"{}"), 405),
        ("PUT on the socket", True, http_req("PUT", "/v1/runs", json.dumps(ok).encode()), 405),
        ("POST to health", True, http_req("POST", "/v1/health", b"{}"), 405),
        ("DELETE the collection", True, http_req("DELETE", "/v1/runs"), 405),
        ("unknown path", False, http_req("GET", "/v1/nope"), 404),
        ("unknown version", False, http_req("GET", "/v2/health"), 404),
        ("unknown top-level path", False, http_req("GET", "/nope"), 404),
        ("unknown sub-resource", False, http_req("GET", f"/v1/runs/{run_id}/nope"), 404),
        ("deep path", False, http_req("GET", "/v1" + "/a" * 20), 404),
        ("GET with a body on TCP", False, http_req("GET", "/v1/health", b'{"x":1}'), 413),
        ("GET with a chunked body", False,
         http_req("GET", "/v1/health", b"2\r\n{}\r\n0\r\n\r\n", ["Transfer-Encoding: chunked"]), 413),
    ]


def check_error(desc, status, headers, body, expected):
    assert status == expected, f"{desc}: HTTP {status}, expected {expected}: {body[:300]!r}"
    assert headers.get("content-type", "").startswith("application/json"), (desc, headers)
    try:
        j = strict_json(body)
    except (UnicodeDecodeError, ValueError, BadJSON) as e:
        pytest.fail(f"{desc}: the error body is not strict JSON ({e}): {body[:300]!r}")
    assert isinstance(j, dict) and list(j) == ["error"], (desc, j)
    err = j["error"]
    assert isinstance(err, dict) and set(err) == {"code", "message"}, (desc, j)
    assert err["code"] in ERROR_CODES, (desc, j)
    assert err["code"] == STATUS_CODE[status], (desc, j)
    assert isinstance(err["message"], str) and err["message"].strip(), (desc, j)
    assert "\n" not in err["message"], (desc, j)


def test_malformed_requests(target):
    mlmond, run_id, pid = target
    daemon_pid = mlmond.proc.pid
    table = cases(run_id, pid)
    assert len(table) >= 20
    failures = []
    for desc, unix, req, expected in table:
        method = req.split(b" ", 1)[0].decode()
        try:
            check_error(desc, *raw(mlmond, req, unix=unix, method=method), expected)
        except (AssertionError, pytest.fail.Exception, OSError, http.client.HTTPException) as e:
            failures.append(f"{desc}: {e}")
    assert not failures, f"{len(failures)} of {len(table)} cases failed:\n" + "\n".join(failures)

    # A Content-Length that does not fit 64 bits is refused by libmicrohttpd
    # itself, before mlmond sees the request: its own (HTML) 413 is all we
    # can ask for.
    st, _, _ = raw(mlmond, http_req("POST", "/v1/runs", b"", ["Content-Length: 99999999999999999999"]), unix=True,
                   method="POST")
    assert st == 413

    # still the same daemon, healthy, and nothing was registered or ended
    assert mlmond.alive() and mlmond.proc.pid == daemon_pid
    st, health = mlmond.get("/v1/health")
    assert st == 200 and health["status"] == "ok", health
    st, runs = mlmond.get("/v1/runs?state=all")
    assert [(r["id"], r["state"]) for r in runs["runs"]] == [(run_id, "running")], runs
    mlmond.wait_sample_after(run_id, now_ms())


def test_valid_boundaries(target):
    """The other side of the table's limits is accepted, so the refusals
    above are about the limits, not about the request."""
    mlmond, run_id, pid = target
    T = f"/v1/runs/{run_id}/throughput"
    for path in (T + "?window=" + ",".join(f"{i}s" for i in range(1, 17)), T + "?window=1ms", T + "?window=500ms,1m",
                 f"/v1/runs/{run_id}/samples?from=1s&until=0s&limit=1&step=1ms",
                 f"/v1/runs/{run_id}/samples?from=0&until=99999999999999", f"/v1/runs?state=all&pid={pid}"):
        st, body = mlmond.get(path)
        assert st == 200, (path, body)
    st, tp = mlmond.get(T + "?window=" + ",".join(f"{i}s" for i in range(1, 17)))
    assert len(tp["windows"]) == 16
    st, s = mlmond.get(f"/v1/runs/{run_id}/samples?limit=1")
    assert len(s["samples"]) == 1 and s["truncated"] is True, s
    r = mlmond.request("HEAD", "/v1/health")
    assert r.status == 200 and r.body == b""
    # a body of exactly 64 KiB is read (and then judged on its content)
    body = json.dumps({"pid": pid, "name": "x"}).encode()
    body = body[:-1] + b" " * (65536 - len(body)) + b"}"
    st, _, resp = raw(mlmond, http_req("POST", "/v1/runs", body), unix=True, method="POST")
    assert st == 409, resp  # already registered: the body was accepted and parsed


def test_thread_id_is_refused(mlmond, helpers):
    h = helpers("busy", 5, 0, 2)
    h.expect("ready")
    tids = [int(t) for t in os.listdir(f"/proc/{h.pid}/task") if int(t) != h.pid]
    assert tids
    st, body = mlmond.post("/v1/runs", {"pid": tids[0]})
    assert st == 400 and body["error"]["code"] == "bad_request", body
    assert str(h.pid) in body["error"]["message"], body
    st, body = mlmond.get("/v1/runs?state=all")
    assert body["runs"] == []


def all_endpoints(run_id, pid):
    return ["/v1/health", "/v1/system", "/v1/runs", "/v1/runs?state=all", f"/v1/runs?pid={pid}",
            f"/v1/runs/{run_id}", f"/v1/runs/{run_id}/samples", f"/v1/runs/{run_id}/samples?step=1s",
            f"/v1/runs/{run_id}/throughput", f"/v1/runs/{run_id}/throughput?window=1s,1m", "/v1/leaks",
            # errors that echo what was asked for
            "/v1/runs/%FF%FE", f"/v1/runs/{run_id}/samples?%ff%fe=1", f"/v1/runs/{run_id}/throughput?window=%ff%C3",
            f"/v1/runs/{run_id}/samples?from=%ff"]


HOSTILE_COMM = b'\xff)\n" x'


def test_hostile_names_give_strict_json(mlmond, helpers):
    h = helpers("setname", HOSTILE_COMM, b"\xff\xfe", b"a\xc3(b", b"\x1b[31mred\x1b[0m", "tail")
    h.expect("ready")
    with open(f"/proc/{h.pid}/comm", "rb") as f:
        assert f.read() == HOSTILE_COMM + b"\n", "the helper could not set its comm"

    r = mlmond.request("POST", "/v1/runs", {"pid": h.pid, "interval": "250ms",
                                            "name": 'r\u00e9sum\u00e9 "q" \\ \u2603 \U0001F600',
                                            "tags": {"k\u00e9y": "v\u00e4l \" \\"}, "discover": False}, unix=True)
    assert r.status == 201, r.body
    run = r.json
    assert run["name"] == 'r\u00e9sum\u00e9 "q" \\ \u2603 \U0001F600'
    assert run["tags"] == {"k\u00e9y": "v\u00e4l \" \\"}
    # the ')' and the newline in comm did not derail the parsing of stat
    assert run["start_time_ticks"] == stat_starttime(h.pid)
    assert ")" in run["comm"] and run["comm"].endswith('" x'), run["comm"]
    assert "tail" in run["cmdline"] and "red" in run["cmdline"], run["cmdline"]
    mlmond.wait_sample_after(run["id"], now_ms())
    assert mlmond.run(run["id"])["latest"]["threads"] == 1

    for unix in (False, True):
        for path in all_endpoints(run["id"], h.pid):
            resp = mlmond.request("GET", path, unix=unix)
            try:
                strict_json(resp.body)
            except (UnicodeDecodeError, ValueError, BadJSON) as e:
                pytest.fail(f"GET {path}: not strict UTF-8 JSON ({e}): {resp.body[:400]!r}")
            assert resp.status < 500, (path, resp.status, resp.body)

    # errors that echo invalid UTF-8 from a body
    for body in (b'{"pid": %d, "\xff\xfe": 1}' % h.pid, b'{"pid": %d, "name": "\xff"}' % h.pid,
                 b'{"pid": %d, "tags": {"\xff": "x"}}' % h.pid):
        resp = mlmond.request("POST", "/v1/runs", body, unix=True)
        assert 400 <= resp.status < 500, (body, resp.status)
        strict_json(resp.body)

    # the CLI shows it on one line, as text
    for args in (("list",), ("show", run["id"]), ("list", "--all")):
        out = mlmond.ctl(*args)
        assert out.returncode == 0, out.stderr
        text = out.stdout.decode("utf-8")
        assert not any(ord(c) < 0x20 and c != "\n" for c in text), (args, text)
    lines = mlmond.ctl("list").stdout.decode().splitlines()
    assert len(lines) == 2, lines  # the header and the one run, whatever its name holds
    out = mlmond.ctl("--json", "show", run["id"])
    assert strict_json(out.stdout)["id"] == run["id"]

    st, body = mlmond.delete(f"/v1/runs/{run['id']}")
    assert st == 200 and body["state"] == "unregistered"


# Characters that do not show as themselves: C0 controls, DEL, C1 controls
# (NEL, CSI) and every bidirectional formatting character.
HIDDEN = ["\n", "\t", "\x1b", "\x7f", "\x85", "\x9b", "\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c",
          "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]


def test_control_and_bidi_characters_are_refused_at_registration(mlmond, helpers):
    """A name, a tag key or a tag value with a control or a bidirectional
    formatting character (a right-to-left override makes "team=vision" read
    as something else on a page) is a 400 with a JSON error, over HTTP and
    through mlmonctl, which says so on one line; nothing is registered, and
    the characters next to those ranges are still taken."""
    h = helpers("busy", "5", "0")
    h.expect("ready")
    failures = []
    for ch in HIDDEN:
        for extra in ({"name": f"in{ch}voice"}, {"tags": {f"te{ch}am": "v"}}, {"tags": {"team": f"vi{ch}sion"}}):
            desc = f"{extra!r}"
            r = mlmond.request("POST", "/v1/runs", {"pid": h.pid, "discover": False, **extra}, unix=True)
            try:
                check_error(desc, r.status, r.headers, r.body, 400)
            except (AssertionError, pytest.fail.Exception) as e:
                failures.append(str(e))
    assert not failures, f"{len(failures)} refusals wrong:\n" + "\n".join(failures)
    assert mlmond.get("/v1/runs?state=all")[1]["runs"] == []

    for args in (("--name", "in\u202evoice"), ("--tag", "team=vi\u2066sion"), ("--tag", "te\u200fam=v"),
                 ("--name", "a\x85b")):
        out = mlmond.ctl("register", h.pid, *args)
        err = out.stderr.decode()
        assert out.returncode == 1 and out.stdout == b"", (args, out)
        assert err.count("\n") == 1 and "control or bidirectional" in err, (args, err)
    assert mlmond.get("/v1/runs?state=all")[1]["runs"] == []

    # next to the ranges: U+00A0, U+200D (emoji sequences), U+2010, U+206A
    name = "a\u00a0b\u200dc\u2010d\u206a"
    out = mlmond.ctl("register", h.pid, "--name", name, "--tag", "team=\u05e2\u05d1\u05e8\u05d9\u05ea")
    assert out.returncode == 0, out.stderr
    run = mlmond.run(int(out.stdout))
    assert run["name"] == name and run["tags"]["team"] == "\u05e2\u05d1\u05e8\u05d9\u05ea", run


def test_hostile_comm_cannot_forge_log_lines(mlmond, helpers):
    """A process names itself "x\\n<2>forged": mlmond's log (stderr, which
    journald splits into records by line, reading "<N>" as the priority)
    must not gain a line that the process wrote."""
    h = helpers("setname", b"x\n<2>forged")
    h.expect("ready")
    run = mlmond.register(h.pid)
    mlmond.delete(f"/v1/runs/{run['id']}")
    forged = [line for line in mlmond.stderr().splitlines() if line.startswith(("<2>forged", "forged"))]
    # the fixture's teardown would flag the "<2>" line too; say what it is
    mlmond.allowed_errors.append(r"^<2>forged")
    assert not forged, f"a process's comm injected a log line: {forged!r}\n--- stderr ---\n{mlmond.stderr()}"

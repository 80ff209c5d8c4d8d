# SPDX-License-Identifier: MIT
"""Dashboards that poll the JSON API: conditional GETs (an ETag on every
JSON answer to a GET, If-None-Match answered 304 while the answer is the
same) and the [http] cors_origins allow-list (nothing sent without it; with
it, Vary: Origin and Access-Control-Allow-Origin for the origins listed,
GET and HEAD only, never credentials). Then in a real browser: headless
chromium loads a page from another loopback port whose script fetch()es
/v1/runs: refused by a daemon without the list, read from one that lists the
page's origin, and polled again with a 304 (chromium's own log of the
headers says so)."""

import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading

import pytest

from conftest import UnixHTTPConnection, needs
from test_config import check_config
from test_web import Dom

PAGE_ORIGIN_HOST = "127.0.0.1"


def get(d, path, headers=None, method="GET", unix=False):
    if unix:
        conn = UnixHTTPConnection(d.socket_path)
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        conn.close()
        return out
    r = d.request(method, path, headers=headers)
    return r.status, r.headers, r.body


def test_conditional_gets(mlmond, helpers):
    st, h, body = get(mlmond, "/v1/runs?state=all")
    assert st == 200 and h["cache-control"] == "no-cache", h
    tag = h["etag"]
    assert tag.startswith('"') and tag.endswith('"'), tag
    # without the list, no CORS header at all, whatever the Origin
    st, h2, _ = get(mlmond, "/v1/runs?state=all", {"Origin": "http://127.0.0.1:1"})
    assert "vary" not in h2 and not any(k.startswith("access-control-") for k in h2), h2
    assert h2["etag"] == tag

    for headers in ({"If-None-Match": tag}, {"If-None-Match": f'"x", W/{tag}'}, {"If-None-Match": "*"}):
        st, h, body = get(mlmond, "/v1/runs?state=all", headers)
        assert st == 304 and body == b"" and h["etag"] == tag and h["cache-control"] == "no-cache", (headers, st, h)
    st, h, body = get(mlmond, "/v1/runs?state=all", {"If-None-Match": tag}, method="HEAD")
    assert st == 304 and h["etag"] == tag
    # the unix socket too (mlmonctl, scripts)
    st, h, body = get(mlmond, "/v1/runs?state=all", {"If-None-Match": tag}, unix=True)
    assert st == 304 and body == b""

    # a change is a new answer under a new tag, never a 304 from the old one
    rid = mlmond.register(helpers("busy", "0", "0").pid)["id"]
    st, h, body = get(mlmond, "/v1/runs?state=all", {"If-None-Match": tag})
    assert st == 200 and h["etag"] != tag and json.loads(body)["runs"][0]["id"] == rid

    # what is not a JSON answer to a GET is not to be stored and has no tag
    for path, method in (("/v1/runs/999", "GET"), ("/metrics", "GET"), ("/v1/runs", "POST")):
        st, h, _ = get(mlmond, path, method=method)
        assert "etag" not in h and h["cache-control"] == "no-store", (path, method, st, h)


def test_allow_list_headers(make_mlmond):
    listed, other = "http://127.0.0.1:8000", "http://127.0.0.1:8001"
    d = make_mlmond(config_text=f"[http]\ncors_origins = https://dash.example, {listed}\n")

    st, h, body = get(d, "/v1/runs", {"Origin": listed})
    assert st == 200 and h["access-control-allow-origin"] == listed and h["vary"] == "Origin", h
    assert h["access-control-expose-headers"] == "ETag"
    assert "access-control-allow-credentials" not in h
    # the 304 carries them too: the browser checks the revalidated answer
    st, h, _ = get(d, "/v1/runs", {"Origin": listed, "If-None-Match": h["etag"]})
    assert st == 304 and h["access-control-allow-origin"] == listed and h["vary"] == "Origin", h
    # an error to a GET, HEAD, /metrics: read-only answers all
    for path, method in (("/v1/runs/999", "GET"), ("/v1/health", "HEAD"), ("/metrics", "GET")):
        st, h, _ = get(d, path, {"Origin": listed}, method=method)
        assert h.get("access-control-allow-origin") == listed and h["vary"] == "Origin", (path, st, h)
    # another origin, no origin: the answer still varies with it, but no read
    for headers in ({"Origin": other}, {"Origin": listed + "/"}, {"Origin": "null"}, {}):
        st, h, _ = get(d, "/v1/runs", headers)
        assert st == 200 and h["vary"] == "Origin" and "access-control-allow-origin" not in h, (headers, h)
    # never anything but GET and HEAD: a preflight and a POST are refused, without CORS headers
    for method, headers in (("OPTIONS", {"Origin": listed, "Access-Control-Request-Method": "POST"}),
                            ("POST", {"Origin": listed})):
        st, h, _ = get(d, "/v1/runs", headers, method=method)
        assert st == 405 and not any(k.startswith("access-control-") for k in h) and "vary" not in h, (method, h)
    # the unix socket is no browser's
    st, h, _ = get(d, "/v1/runs", {"Origin": listed}, unix=True)
    assert st == 200 and "vary" not in h and "access-control-allow-origin" not in h, h


@pytest.mark.parametrize("origins", ["http://a.example/", "HTTPS://A.EXAMPLE", "*", "a.example:80",
                                     "https://", "http://a.example/path"])
def test_bad_origins_refused(tmpdir_0755, origins):
    r = check_config(tmpdir_0755, f"[http]\ncors_origins = http://ok.example {origins}\n")
    err = r.stderr.decode()
    assert r.returncode == 1 and "cors_origins" in err and "no path" in err, err


def test_good_origins_accepted(tmpdir_0755):
    r = check_config(tmpdir_0755, "[http]\ncors_origins = http://127.0.0.1:3000,https://grafana.example.org\n")
    assert r.returncode == 0, r.stderr.decode()


# ---- in a real browser -------------------------------------------------------

# The dashboard: it polls each daemon's /v1/runs twice (the second time the
# browser revalidates its copy with If-None-Match) and writes what it read,
# or why it could not, into #out.
PAGE = """<!doctype html><html><body><pre id="out">pending</pre><script>
(async () => {
  const seen = {};
  for (const base of BASES) {
    try {
      const r1 = await fetch(base + '/v1/runs?state=all');
      const j1 = await r1.json();
      const r2 = await fetch(base + '/v1/runs?state=all');
      const j2 = await r2.json();
      seen[base] = {runs: j1.runs.map(r => r.name), again: j2.runs.map(r => r.name),
                    etag: r1.headers.get('ETag'), status: [r1.status, r2.status]};
    } catch (e) {
      seen[base] = {refused: String(e)};
    }
  }
  document.getElementById('out').textContent = JSON.stringify(seen);
})();
</script></body></html>
"""


class Pages:
    """A page server on a loopback port of its own: another origin. The
    page polls the daemons at .bases (set once they run: their allow-list
    needs this origin first)."""

    def __init__(self):
        self.bases = []
        pages = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = PAGE.replace("BASES", json.dumps(pages.bases)).encode()
                self.send_response(200 if self.path == "/poll.html" else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((PAGE_ORIGIN_HOST, 0), Handler)
        self.origin = f"http://{PAGE_ORIGIN_HOST}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def chromium(url, budget_ms, extra=()):
    """The DOM of url after budget_ms of virtual time, and the console
    messages chromium logged meanwhile: a chromium of its own, started with
    extra flags (its net log)."""
    exe = shutil.which("chromium")
    if not exe:
        needs("chromium", "it is not installed (Debian package chromium)")
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update", "--disable-sync",
                            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                            f"--virtual-time-budget={budget_ms}", *extra, "--dump-dom", url],
                           capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0 or not r.stdout.strip():
        needs("chromium", f"it cannot start: {err[-500:]}")
    console = [line for line in err.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    return Dom(r.stdout.decode()), console


def poll_in_chromium(pages):
    """What the page read, and chromium's log of every response's status
    line to a GET of /v1/runs (its net log: the headers as they crossed the
    wire, 304s included, which the page's script never sees)."""
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "net.json")
        dom, console = chromium(pages.origin + "/poll.html", budget_ms=5000, extra=[f"--log-net-log={log}"])
        with open(log) as f:
            net = json.load(f)
    out = dom.text_of(id="out")
    assert out != "pending", f"the page's script did not finish: {console}"
    kinds = {v: k for k, v in net["constants"]["logEventTypes"].items()}
    lines, requests = [], {}
    for e in net["events"]:
        kind, p = kinds.get(e["type"]), e.get("params", {})
        if kind == "HTTP_TRANSACTION_SEND_REQUEST_HEADERS":
            requests[e["source"]["id"]] = p.get("line", "")
        elif kind == "HTTP_TRANSACTION_READ_RESPONSE_HEADERS" and "/v1/runs" in requests.get(e["source"]["id"], ""):
            lines.append(p["headers"][0])
    return json.loads(out), lines


def test_browser_reads_across_origins(make_mlmond, helpers):
    pages = Pages()
    try:
        plain = make_mlmond()
        listed = make_mlmond(config_text=f"[http]\ncors_origins = {pages.origin}\n")
        for d in (plain, listed):
            d.register(helpers("busy", "0", "0").pid, name="job")
            d.register(helpers("busy", "0", "0").pid, name="other")
            # ended runs do not move: the answer stays the same from one poll to the next
            for r in d.get("/v1/runs")[1]["runs"]:
                assert d.delete(f"/v1/runs/{r['id']}")[0] == 200
        pages.bases = [f"http://127.0.0.1:{plain.port}", f"http://127.0.0.1:{listed.port}"]
        seen, statuses = poll_in_chromium(pages)
    finally:
        pages.close()
    print("the page read:", seen, "\nresponses to its GETs of /v1/runs:", statuses)
    assert "refused" in seen[pages.bases[0]], seen
    got = seen[pages.bases[1]]
    assert got.get("runs") == ["job", "other"] and got["again"] == got["runs"] and got["status"] == [200, 200], got
    assert got["etag"] and got["etag"].startswith('"'), got
    # the daemon without the list answered the browser's GET, which threw the
    # answer away; the listed one answered the second GET with a 304, whose
    # body the browser took from its own copy
    assert statuses == ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 304 Not Modified"], statuses

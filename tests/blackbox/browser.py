# SPDX-License-Identifier: MIT
"""Debian's chromium (headless), driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages, each ended by a NUL byte, written
to chromium's fd 3 and read from its fd 4), with nothing beyond Python's
standard library. A test opens a page, waits for what it waits for, asks
the page questions in JavaScript (computed styles, element boxes) and sees
the requests the page made and the messages it logged.

    with Browser() as b:
        page = b.open(url)                 # waits for body[data-ready="1"]
        page.eval("document.title")
        page.requests                      # the URLs requested, in order
        page.console                       # console messages, errors"""

import json
import os
import select
import shutil
import subprocess
import tempfile
import time



class BrowserError(RuntimeError):
    pass


def unavailable(why):
    """In the test suite a skip that names the capability; elsewhere (a
    benchmark) an error."""
    try:
        from conftest import needs
    except ImportError:
        raise BrowserError(f"chromium {why}") from None
    needs("chromium", why)


class Page:
    def __init__(self, browser, target, session):
        self.browser, self.target, self.session = browser, target, session
        self.requests, self.console = [], []

    def call(self, method, params=None, timeout=30):
        return self.browser.call(method, params, self.session, timeout)

    def eval(self, expr, timeout=30):
        """The value of the JavaScript expression expr (awaited if it is a
        promise), as JSON makes it; an exception in the page raises."""
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                      timeout)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expr[:80]!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, timeout=30, what=None):
        """Polls expr until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout} s waiting for {what or expr}")
            self.browser.pump(0.05)

    def close(self):
        self.browser.pages.pop(self.session, None)
        self.browser.call("Target.closeTarget", {"targetId": self.target})

    def api_requests(self):
        """The requests made of the JSON API (/v1/...), as paths with their
        query strings."""
        out = []
        for url in self.requests:
            path = "/" + url.split("://", 1)[-1].split("/", 1)[-1]
            if path.startswith("/v1/"):
                out.append(path)
        return out


class Browser:
    def __init__(self, width=1280, height=900):
        exe = shutil.which("chromium")
        if not exe:
            unavailable("is not installed (Debian package chromium)")
        self.profile = tempfile.mkdtemp(prefix="mlmon-chromium-")
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def fds():  # chromium reads fd 3 and writes fd 4
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", f"--window-size={width},{height}", f"--user-data-dir={self.profile}",
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf, self.next_id, self.replies, self.pages = b"", 0, {}, {}
        self.width, self.height = width, height
        try:
            self.call("Browser.getVersion", timeout=60)
        except BrowserError as e:
            self.close()
            unavailable(f"cannot start: {e}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for fd in (self.to_w, self.from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def pump(self, timeout):
        """Reads what chromium says, until a whole message came or timeout
        seconds passed: replies are kept for call(), events go to their
        page. (Reading on to the deadline made every call last it.)"""
        deadline = time.monotonic() + timeout
        while True:
            came = False
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                self.dispatch(json.loads(raw))
                came = True
            left = deadline - time.monotonic()
            if came:
                return
            if left <= 0 or not select.select([self.from_r], [], [], left)[0]:
                return
            data = os.read(self.from_r, 1 << 16)
            if not data:
                raise BrowserError("chromium closed its pipe")
            self.buf += data

    def dispatch(self, msg):
        if "id" in msg:
            self.replies[msg["id"]] = msg
            return
        page = self.pages.get(msg.get("sessionId"))
        if page is None:
            return
        p, m = msg.get("params", {}), msg.get("method")
        if m == "Network.requestWillBeSent":
            page.requests.append(p["request"]["url"])
        elif m == "Runtime.consoleAPICalled":
            page.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            page.console.append("Uncaught " + str(d.get("exception", {}).get("description", d.get("text"))))
        elif m == "Log.entryAdded":
            e = p.get("entry", {})
            page.console.append(f"{e.get('level')}: {e.get('text')} {e.get('url', '')}".strip())

    def call(self, method, params=None, session=None, timeout=30):
        i = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while i not in self.replies:
            if self.proc.poll() is not None:
                raise BrowserError(f"chromium exited ({self.proc.returncode})")
            if time.monotonic() > deadline:
                raise BrowserError(f"{method}: no answer within {timeout} s")
            self.pump(min(0.5, max(0.0, deadline - time.monotonic())))
        r = self.replies.pop(i)
        if "error" in r:
            raise BrowserError(f"{method}: {r['error']}")
        return r.get("result", {})

    def open(self, url, ready=True, timeout=60, alone=True):
        """A new tab on url; with ready, once the page has marked its body
        data-ready="1" (it has drawn what it loaded first); alone: the tabs
        opened before are closed (they would go on refreshing)."""
        if alone:
            for page in list(self.pages.values()):
                page.close()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        self.pages[session] = page
        for domain in ("Network", "Runtime", "Log", "Page"):
            page.call(domain + ".enable")
        page.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        page.call("Page.navigate", {"url": url})
        if ready:
            page.wait("document.body && document.body.dataset.ready === '1'", timeout, what=f"{url} to be drawn")
        return page

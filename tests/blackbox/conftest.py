# SPDX-License-Identifier: MIT
"""Fixtures of the black-box suite: a real mlmond on a temporary directory,
clients for its TCP and unix-socket APIs, the real mlmonctl, and helper
processes with known resource use (tests/blackbox/helpers, built by meson).

Binaries come from $MLMOND, $MLMONCTL and $HELPERS (set by meson), else from
build/ under the repository root."""

import contextlib
import http.client
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLMOND = os.environ.get("MLMOND") or os.path.join(ROOT, "build", "daemon", "mlmond")
MLMONCTL = os.environ.get("MLMONCTL") or os.path.join(ROOT, "build", "client", "mlmonctl")


def _asan_built(path):
    try:
        with open(path, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


# The daemon under test is an AddressSanitizer build: its allocator keeps freed
# blocks in a quarantine (256 MiB by default) and shadows every byte, so its
# RSS says nothing of what a release build would hold.
ASAN = _asan_built(MLMOND)
HELPERS = os.environ.get("HELPERS") or os.path.join(ROOT, "build", "tests")

# the tests' one unit of memory, as mlmond's sentences and mlmonctl's tables have it
MiB = 1 << 20

START_TIMEOUT = 5.0
STOP_TIMEOUT = 5.0
HTTP_TIMEOUT = 10.0

# What must never appear in the daemon's stderr: sanitizer reports, and (the
# fixture sets JOURNAL_STREAM, so every line carries its syslog priority as
# "<N>") anything logged at error level or worse.
BAD_STDERR = re.compile(
    r"ERROR|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
    r"^<[0-3]>", re.MULTILINE)


# ---- skips ---------------------------------------------------------------------------------------
#
# A test that cannot run on this machine skips with needs(CAPABILITY, why): its reason then starts
# with "needs CAPABILITY:", which names what was missing. .ci/capabilities lists the capabilities
# CI's machine must have: there a skip that names one of them fails CI. Every skip and expected
# failure of a test file goes to the file $MLMON_SKIP_LOG (meson sets it per test file), one line
# "NODE ID<TAB>skip|xfail<TAB>REASON" each, for tools/test.sh to report: a meson test that ran a
# pytest file passes whatever its tests skipped.

SKIP_LOG = os.environ.get("MLMON_SKIP_LOG")


def needs(capability, why):
    """Skips the test: this machine lacks capability (a word of .ci/capabilities)."""
    pytest.skip(f"needs {capability}: {why}")


def _skip_reason(report):
    lr = report.longrepr
    text = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return " ".join(text.removeprefix("Skipped: ").split())


def _log_skip(nodeid, kind, reason):
    if not SKIP_LOG:
        return
    os.makedirs(os.path.dirname(SKIP_LOG), exist_ok=True)
    with open(SKIP_LOG, "a", encoding="utf-8") as f:
        f.write(f"{nodeid}\t{kind}\t{reason}\n")


def pytest_sessionstart(session):
    if SKIP_LOG and os.path.exists(SKIP_LOG):
        os.unlink(SKIP_LOG)


def pytest_runtest_logreport(report):
    if hasattr(report, "wasxfail") and report.skipped:
        _log_skip(report.nodeid, "xfail", " ".join(report.wasxfail.split()) or "expected to fail")
    elif report.skipped:
        _log_skip(report.nodeid, "skip", _skip_reason(report))


def pytest_collectreport(report):
    if report.skipped:  # pytest.importorskip() or a skip at module level
        _log_skip(report.nodeid, "skip", _skip_reason(report))


def helper(name):
    path = os.path.join(HELPERS, "bb-" + name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"helper {path} is not built (set $HELPERS or build build/)")
    return path


class BadJSON(ValueError):
    pass


def _reject_constant(name):
    raise BadJSON(f"non-standard JSON constant {name}")


def strict_json(body):
    """Parses a response body as strict UTF-8 JSON: invalid UTF-8, NaN,
    Infinity or trailing garbage raise."""
    text = body.decode("utf-8")  # strict: raises on invalid UTF-8
    return json.loads(text, parse_constant=_reject_constant)


def now_ms():
    return time.time() * 1000.0


def wait_for(pred, timeout, interval=0.02, what="condition"):
    """Polls pred() until it returns something truthy; returns that value.
    Fails the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=HTTP_TIMEOUT):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self):
        return strict_json(self.body)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_proc(pid, name):
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read()


def schedstat_ns(pid):
    """CPU time of the whole process (every thread), in ns, from
    /proc/PID/task/*/schedstat. Threads that left in between are missed,
    which the helpers never do."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(read_proc(pid, f"task/{tid}/schedstat").split()[0])
        except FileNotFoundError:
            pass
    return total


def statm_rss_bytes(pid):
    return int(read_proc(pid, "statm").split()[1]) * os.sysconf("SC_PAGESIZE")


def proc_io(pid):
    out = {}
    for line in read_proc(pid, "io").decode().splitlines():
        k, v = line.split(":")
        out[k.strip()] = int(v)
    return out


def stat_starttime(pid):
    data = read_proc(pid, "stat")
    return int(data[data.rindex(b")") + 2:].split()[19])


def record_cpu(pids, seconds, step=0.01):
    """Reads the CPU time of pids (every thread of each) every step seconds
    for seconds; returns [(unix ms, total ns), ...]."""
    out = []
    end = time.monotonic() + seconds
    while True:
        t = now_ms()
        ns = sum(schedstat_ns(p) for p in pids)
        out.append((t, ns))
        if time.monotonic() >= end:
            return out
        time.sleep(step)


def cpu_ns_at(records, ts_ms):
    """CPU time at ts_ms, interpolated between the two readings around it."""
    assert records[0][0] <= ts_ms <= records[-1][0], f"{ts_ms} outside the recorded span"
    for (t0, n0), (t1, n1) in zip(records, records[1:]):
        if t0 <= ts_ms <= t1:
            return n0 if t1 == t0 else n0 + (n1 - n0) * (ts_ms - t0) / (t1 - t0)
    return records[-1][1]


def cpu_pct_between(records, a_ms, b_ms):
    """What the readings say the CPU % was between a_ms and b_ms."""
    return (cpu_ns_at(records, b_ms) - cpu_ns_at(records, a_ms)) / 1e6 / (b_ms - a_ms) * 100.0


class Helper:
    """A helper process speaking the line protocol: it prints "ready ..."
    once set up, and waits for lines (or EOF) on its stdin."""

    def __init__(self, argv, **kw):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, **kw)
        self.pid = self.proc.pid

    def readline(self, timeout=10.0):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        buf = b""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                pytest.fail(f"helper {self.proc.args!r} said nothing within {timeout} s")
            c = os.read(fd, 1)
            if not c:
                pytest.fail(f"helper {self.proc.args!r} exited early ({self.proc.wait()})")
            buf += c
        sel.close()
        return buf.decode().strip()

    def expect(self, word, timeout=10.0):
        line = self.readline(timeout)
        assert line.split()[0] == word, f"helper said {line!r}, expected {word!r}"
        return line.split()[1:]

    def send(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=5)

    def close(self):
        # the helpers keep nothing worth a clean exit; tree's children die
        # with their parent (PR_SET_PDEATHSIG)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (BrokenPipeError, OSError):
                pass


class Mlmond:
    """One mlmond on its own directory. .get/.uget (GET over TCP / the unix
    socket), .post and .delete (unix socket) return (status, parsed JSON);
    .request returns a Response for anything else."""

    def __init__(self, tmpdir, interval="250ms", config_text="", extra_args=()):
        self.dir = tmpdir
        self.config_path = os.path.join(tmpdir, "mlmond.conf")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        self.db_path = os.path.join(tmpdir, "mlmond.db")
        self.socket_path = os.path.join(tmpdir, "mlmond.sock")
        self.statsd_path = os.path.join(tmpdir, "statsd.sock")
        self.stderr_path = os.path.join(tmpdir, "mlmond.stderr")
        self.interval = interval
        self.extra_args = list(extra_args)
        self.port = None
        self.proc = None
        self.allowed_errors = []  # regexes of expected error-level lines
        self._stderr_files = []
        self.start()

    # ---- process -------------------------------------------------------------

    def argv(self):
        return [MLMOND, "-c", self.config_path, "--db", self.db_path,
                "--listen", f"127.0.0.1:{self.port}", "--socket", self.socket_path,
                "--statsd-socket", self.statsd_path, "--statsd-udp", "none"] + \
            (["--interval", self.interval] if self.interval else []) + self.extra_args

    def start(self):
        assert self.proc is None or self.proc.poll() is not None
        for attempt in range(3):
            if self.port is None or attempt > 0:
                self.port = free_port()
            n = len(self._stderr_files)
            path = self.stderr_path if n == 0 else f"{self.stderr_path}.{n}"
            err = open(path, "wb")
            self._stderr_files.append(path)
            env = dict(os.environ)
            env["JOURNAL_STREAM"] = "0:0"  # "<N>" priority prefixes on stderr
            env.pop("NOTIFY_SOCKET", None)
            env.pop("WATCHDOG_USEC", None)
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=err, env=env)
            err.close()
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    st, _ = self.get("/v1/health", timeout=1)
                    if st == 200 and os.path.exists(self.socket_path):
                        self.pid = self.proc.pid
                        return
                except OSError:
                    pass
                time.sleep(0.02)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"mlmond did not answer /v1/health within {START_TIMEOUT} s:\n{self.stderr()}")
            if "address in use" not in self.stderr_of(path):
                pytest.fail(f"mlmond exited with {self.proc.returncode} at start:\n{self.stderr_of(path)}")
            self._stderr_files.remove(path)  # a port taken meanwhile: try another
        pytest.fail("mlmond: no free port after 3 tries")

    def stderr_of(self, path):
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr(self):
        """Everything every instance of this daemon wrote to stderr."""
        return "".join(self.stderr_of(p) for p in self._stderr_files)

    def check_stderr(self):
        for line in self.stderr().splitlines():
            if BAD_STDERR.search(line) and not any(re.search(a, line) for a in self.allowed_errors):
                pytest.fail(f"mlmond logged an error or a sanitizer report: {line!r}\n--- stderr ---\n{self.stderr()}")

    def stop(self):
        """SIGTERM; must exit 0 within STOP_TIMEOUT."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"mlmond did not exit within {STOP_TIMEOUT} s of SIGTERM:\n{self.stderr()}")
        assert rc == 0, f"mlmond exited {rc} on SIGTERM:\n{self.stderr()}"
        return rc

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def restart(self):
        """SIGTERM (if running) and start again on the same files and port."""
        if self.proc.poll() is None:
            self.stop()
        self.start()

    def signal(self, sig):
        self.proc.send_signal(sig)

    def write_config(self, text):
        tmp = self.config_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.config_path)

    def wait_log(self, pattern, timeout=5.0, after=0):
        """Waits for a stderr line matching pattern, among the lines after
        the first `after` ones; returns the line."""
        def find():
            for line in self.stderr().splitlines()[after:]:
                if re.search(pattern, line):
                    return line
            return None
        return wait_for(find, timeout, what=f"mlmond to log {pattern!r}")

    def log_lines(self):
        return len(self.stderr().splitlines())

    def alive(self):
        return self.proc.poll() is None

    # ---- HTTP ----------------------------------------------------------------

    def tcp_connection(self, timeout):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, unix=False, headers=None, timeout=HTTP_TIMEOUT):
        conn = UnixHTTPConnection(self.socket_path, timeout=timeout) if unix else self.tcp_connection(timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            elif isinstance(body, str):
                body = body.encode()
            h = {"Connection": "close"}
            if body is not None:
                h["Content-Type"] = "application/json"
            h.update(headers or {})
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            conn.close()

    def _call(self, method, path, body=None, unix=False, timeout=HTTP_TIMEOUT):
        r = self.request(method, path, body, unix=unix, timeout=timeout)
        return r.status, r.json

    def get(self, path, timeout=HTTP_TIMEOUT):
        return self._call("GET", path, timeout=timeout)

    def uget(self, path):
        return self._call("GET", path, unix=True)

    def post(self, path, body):
        return self._call("POST", path, body, unix=True)

    def delete(self, path):
        return self._call("DELETE", path, unix=True)

    # ---- conveniences --------------------------------------------------------

    def register(self, pid, **fields):
        st, run = self.post("/v1/runs", dict(pid=pid, **fields))
        assert st == 201, f"POST /v1/runs pid {pid}: {st} {run}"
        return run

    def run(self, run_id):
        st, run = self.get(f"/v1/runs/{run_id}")
        assert st == 200, f"GET /v1/runs/{run_id}: {st} {run}"
        return run

    def samples(self, run_id, query=""):
        st, body = self.get(f"/v1/runs/{run_id}/samples{query}")
        assert st == 200, f"samples of run {run_id}: {st} {body}"
        return body["samples"]

    def wait_sample_after(self, run_id, ts_ms, timeout=3.0):
        """Waits for a sample of run_id taken after ts_ms; returns the run."""
        def newer():
            run = self.run(run_id)
            latest = run.get("latest")
            return run if latest and latest["ts"] > ts_ms else None
        return wait_for(newer, timeout, what=f"a sample of run {run_id} after {ts_ms:.0f}")

    def ctl(self, *args, user=None, env=None, timeout=30, stdin=subprocess.DEVNULL):
        """Runs mlmonctl --socket SOCKET ARGS; user=uid runs it as that uid
        (and gid) with no supplementary groups."""
        argv = [MLMONCTL, "--socket", self.socket_path] + [str(a) for a in args]
        if user is not None:
            argv = as_user(user) + argv
        e = dict(os.environ)
        e.pop("MLMON_SOCKET", None)
        e.pop("MLMON_RUN_ID", None)  # as set for a job of `mlmonctl run`
        e.update(env or {})
        return subprocess.run(argv, stdin=stdin, capture_output=True, env=e, timeout=timeout)


def as_user(uid):
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


@contextlib.contextmanager
def _dir_0755():
    """A temporary directory that other users can traverse (for the socket)."""
    d = tempfile.mkdtemp(prefix="mlmond-bb-", dir="/tmp")
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", d], check=False)


class Daemons:
    """The daemons started under one directory: make() starts one (of cls=,
    a subclass of Mlmond, if given), close() stops and checks every one."""

    def __init__(self, parent):
        self.parent = parent
        self.started = []

    def make(self, cls=Mlmond, **kw):
        sub = tempfile.mkdtemp(dir=self.parent)
        os.chmod(sub, 0o755)
        d = cls(sub, **kw)
        self.started.append(d)
        return d

    def close(self):
        failures = []
        for d in self.started:
            try:
                d.stop()
                d.check_stderr()
            except BaseException as e:  # pytest.fail raises a BaseException
                failures.append(str(e))
        if failures:
            pytest.fail("\n".join(failures))


@pytest.fixture
def tmpdir_0755():
    with _dir_0755() as d:
        yield d


@pytest.fixture
def make_mlmond(tmpdir_0755):
    """Factory: make_mlmond(interval=..., config_text=...) starts a daemon
    (of cls=, a subclass of Mlmond, if given); every one started is stopped
    (and checked) at teardown."""
    daemons = Daemons(tmpdir_0755)
    yield daemons.make
    daemons.close()


@pytest.fixture(scope="module")
def make_module_mlmond():
    """make_mlmond for the tests of a whole module: one scene set up once
    (and a mutant's test that needs one page of it runs alone, quickly)."""
    with _dir_0755() as d:
        daemons = Daemons(d)
        yield daemons.make
        daemons.close()


@pytest.fixture
def mlmond(make_mlmond):
    return make_mlmond()


@pytest.fixture
def helpers():
    """Factory for helper processes: helpers('busy', '50', '0') starts
    bb-busy; all are stopped at teardown."""
    started = []

    def start(name, *args, **kw):
        h = Helper([helper(name)] + [a if isinstance(a, bytes) else str(a) for a in args], **kw)
        started.append(h)
        return h

    yield start
    for h in started:
        h.close()


@pytest.fixture
def data_dir(tmpdir_0755):
    """A directory on a real (block-backed) filesystem, for I/O accounting."""
    out = subprocess.run(["df", "--output=fstype", tmpdir_0755], capture_output=True, text=True)
    fstype = out.stdout.split()[-1] if out.returncode == 0 else "?"
    if fstype in ("tmpfs", "ramfs", "?"):
        d = tempfile.mkdtemp(prefix="mlmond-bb-", dir="/var/tmp")
        yield d
        subprocess.run(["rm", "-rf", "--one-file-system", d], check=False)
    else:
        yield tmpdir_0755


def make_cert(d, name, san):
    """A self-signed certificate and its key, by openssl; returns (cert, key)."""
    if not shutil.which("openssl"):
        needs("openssl", "it is not installed (Debian package openssl)")
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "1", "-subj", "/CN=" + san.split(",")[0].split(":")[1],
                        "-addext", "subjectAltName=" + san, "-keyout", key, "-out", cert],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr.decode()
    return cert, key


@pytest.fixture
def localhost_cert(tmpdir_0755):
    return make_cert(tmpdir_0755, "localhost", "DNS:localhost,IP:127.0.0.1")

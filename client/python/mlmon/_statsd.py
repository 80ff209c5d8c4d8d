# SPDX-License-Identifier: MIT
"""Timings, counts and gauges as StatsD lines over mlmond's unix datagram
socket, where the kernel names the sender (so forked workers count for
their registered parent).

The caller's cost is a format and a list append under a lock: lines are
batched, several per datagram, and sent when the batch reaches
MAX_DATAGRAM_BYTES, FLUSH_AFTER_S after the first line of a batch (by a
daemon thread that sleeps otherwise), before a fork, at exit, and before
every query. A mark is a line too (DogStatsD's event), put after the lines
batched before it and sent at once. Sends never block (MSG_DONTWAIT): a
datagram the socket's queue refuses (EAGAIN) waits in a bounded backlog for
the next send; with no daemon, or past the backlog, lines are dropped,
counted (dropped()) and logged once, and once mlmond takes datagrams again
their number goes to the run as the gauge DROPPED_GAUGE. Nothing here raises
into the caller."""

import atexit
import logging
import math
import os
import re
import socket
import threading
import time

from . import _http

# mlmond takes a datagram of up to 16 KiB; half of it keeps a batch of
# lines well inside that and is one syscall per ~250 timings.
MAX_DATAGRAM_BYTES = 8192
# A batch's first line waits at most this long: short next to the
# daemon's 1-s slices, long enough to gather a busy loop's lines.
FLUSH_AFTER_S = 0.05
# Datagrams refused with EAGAIN wait here (the kernel's queue holds only
# net.unix.max_dgram_qlen datagrams); beyond this, lines are dropped.
MAX_BACKLOG_BYTES = 1 << 20
# At exit, and before a query, a full queue is waited for this long: a
# daemon that reads nothing for a second is stopped or gone.
WAIT_S = 1.0
# StatsD bounds mlmond enforces (a value outside is a malformed line).
MAX_TIMING_MS = 1e9
MAX_VALUE = float(2 ** 53)
NAME_MAX_BYTES = 200
CATEGORY_MAX_BYTES = 64
# The gauge that tells the run how many lines a process lost: "+N" moves
# it, so its value is the sum over the run's processes (and survives a
# restart of mlmond with the run).
DROPPED_GAUGE = "mlmon.dropped"

log = logging.getLogger("mlmon")

# Characters a StatsD name may not hold: controls, space, the delimiters,
# DEL, the C1 controls and the bidirectional formatting characters (mlmond
# counts such a line as malformed); a category may not hold ',' either.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_BAD_NAME = re.compile("[\x00-\x20:|@#\x7f\x80-\x9f" + _BIDI + "]")
_BAD_CATEGORY = re.compile("[\x00-\x20:,|@#\x7f\x80-\x9f" + _BIDI + "]")


def _clean(text, bad, max_bytes):
    text = bad.sub("_", str(text)) or "_"
    b = text.encode("utf-8", "replace")
    if len(b) > max_bytes:
        text = b[:max_bytes].decode("utf-8", "ignore")
    return text


def _datagrams(lines):
    """[(bytes, number of lines)]: one datagram, or several where non-ASCII
    names made the batch (counted in characters) too long in bytes."""
    data = "".join(lines).encode("utf-8", "replace")
    if len(data) <= MAX_DATAGRAM_BYTES:
        return [(data, len(lines))]
    out, chunk, size = [], [], 0
    for line in lines:
        b = line.encode("utf-8", "replace")
        if size + len(b) > MAX_DATAGRAM_BYTES and chunk:
            out.append((b"".join(chunk), len(chunk)))
            chunk, size = [], 0
        chunk.append(b)
        size += len(b)
    out.append((b"".join(chunk), len(chunk)))
    return out


class _Sender:
    def __init__(self):
        self.reset()
        self.run_tag = ""  # ",run:ID" once the run is known
        self.templates = {}  # (op, category, type) -> line template

    def reset(self):
        """A fresh state: at start, and in a forked child (whose copy of
        the parent's lock, buffer and socket belongs to the parent)."""
        # Reentrant: a signal handler that times something runs on the
        # main thread, maybe while that thread is inside add().
        self.lock = threading.RLock()
        self.buf = []
        self.size = 0
        self.backlog = []
        self.backlog_size = 0
        self.sock = None
        self.wake = threading.Event()
        self.thread = None
        self.dropped = 0
        self.reported = 0  # of dropped, how many the run was told of
        self.warned = False
        self.pid = os.getpid()

    # ---- lines -------------------------------------------------------------

    def template(self, op, category, kind):
        """"op:%.9g|ms|#category:C,run:ID\\n" for one op and kind, cached: the
        value goes in with one %-format (nine digits: a timing's relative
        rounding of 5e-9 is far below the histogram's 0.5%)."""
        key = (op, category, kind)
        t = self.templates.get(key)
        if t is None:
            tags = ""
            if category is not None:
                tags = "category:" + _clean(category, _BAD_CATEGORY, CATEGORY_MAX_BYTES)
            if self.run_tag:
                tags = (tags + self.run_tag) if tags else self.run_tag[1:]
            head = _clean(op, _BAD_NAME, NAME_MAX_BYTES) + ":"
            tail = "|" + kind + ("|#" + tags if tags else "") + "\n"
            t = head.replace("%", "%%") + ("%.9g" if kind == "ms" else "%s") + tail.replace("%", "%%")
            if len(self.templates) < 4096:
                self.templates[key] = t
        return t

    def set_run(self, run_id):
        self.run_tag = f",run:{run_id}" if run_id is not None else ""
        self.templates = {}

    def tags(self):
        """The tag section of a line that names no category."""
        return "|#" + self.run_tag[1:] if self.run_tag else ""

    def add_mark(self, label):
        """Puts a mark line after the lines batched so far and sends them
        now, without waiting. False when it was dropped (no daemon)."""
        line = "_e{%d,0}:%s|%s\n" % (len(label.encode("utf-8")), label, self.tags())
        with self.lock:
            before = self.dropped
            self.buf.append(line)
            self.size += len(line)
            self.flush_locked()
            return self.dropped == before

    def add(self, line):
        with self.lock:
            buf = self.buf
            buf.append(line)
            size = self.size + len(line)
            self.size = size
            if size >= MAX_DATAGRAM_BYTES - 512 or len(buf) == 1:
                self.batch_edge()

    def batch_edge(self):
        """A batch's first line wakes the flusher; a full batch goes now."""
        if self.size >= MAX_DATAGRAM_BYTES - 512:
            self.flush_locked()
        elif len(self.buf) == 1:
            self.wake.set()
            if self.thread is None:
                self.start_thread()

    # ---- sending -----------------------------------------------------------

    def start_thread(self):
        t = threading.Thread(target=self.flusher, name="mlmon-flush", daemon=True)
        self.thread = t
        t.start()

    def flusher(self):
        wake = self.wake
        while wake is self.wake:  # a new Event after a fork ends this loop
            wake.wait()
            time.sleep(FLUSH_AFTER_S)
            wake.clear()
            self.flush()

    def flush(self, wait_s=0.0):
        """Sends the batch and the backlog. With wait_s, a full queue is
        waited for, up to wait_s in all, outside the lock (the other
        threads' timings go on): at exit (nothing later would send what is
        left) and before a query (which waits for mlmond anyway). False
        when the queue stayed full for wait_s: mlmond reads nothing."""
        try:
            with self.lock:
                self.flush_locked()
            if wait_s > 0 and self.backlog:
                if not self.drain(time.monotonic() + wait_s):
                    return False
                with self.lock:
                    if not self.backlog and self.dropped > self.reported:
                        self.report_dropped()
        except Exception:  # never into the caller
            pass
        return True

    def flush_waiting(self):
        return self.flush(WAIT_S)

    def flush_at_exit(self):
        """At exit: what a full queue still refuses after WAIT_S goes with
        the process, counted and said."""
        if not self.flush(WAIT_S):
            with self.lock:
                while self.backlog:
                    data, n = self.backlog.pop(0)
                    self.backlog_size -= len(data)
                    self.drop(n, "its socket's queue stayed full at exit")

    def drain(self, deadline):
        """Sends the backlog, waiting for room until deadline. False when
        the queue stayed full that long: what is left stays in the backlog
        (at exit it goes with the process)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            while True:
                with self.lock:
                    if not self.backlog:
                        return True
                    data, n = self.backlog.pop(0)
                    self.backlog_size -= len(data)
                left = deadline - time.monotonic()
                try:
                    if left <= 0:
                        raise TimeoutError("timed out")
                    sock.settimeout(left)
                    sock.sendto(data, _http.statsd_socket())
                except (TimeoutError, socket.timeout):
                    with self.lock:
                        self.backlog.insert(0, (data, n))
                        self.backlog_size += len(data)
                    return False
                except OSError as e:
                    with self.lock:
                        self.drop(n, f"{_http.statsd_socket()}: {e.strerror or e}")

    def flush_locked(self):
        if self.buf:
            for data, n in _datagrams(self.buf):
                if self.backlog_size + len(data) > MAX_BACKLOG_BYTES:
                    self.drop(n, "its socket's queue stays full")
                else:
                    self.backlog.append((data, n))
                    self.backlog_size += len(data)
            self.buf = []
            self.size = 0
        while self.backlog:
            data, n = self.backlog[0]
            r = self.send(data)
            if r == "again":
                return
            self.backlog.pop(0)
            self.backlog_size -= len(data)
            if r is not None:
                self.drop(n, r)
        if self.dropped > self.reported:
            self.report_dropped()

    def report_dropped(self):
        """The lines lost so far, to the run's gauge, once a datagram goes
        through again (a report that does not is tried at the next flush,
        and lost with the process if none ever does)."""
        n = self.dropped - self.reported
        if self.send(f"{DROPPED_GAUGE}:+{n}|g{self.tags()}\n".encode()) is None:
            self.reported += n

    def send(self, data):
        """None when sent, "again" when the queue is full, else why not."""
        if self.sock is None:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            except OSError as e:
                return f"no socket ({e})"
        try:
            self.sock.sendto(data, socket.MSG_DONTWAIT, _http.statsd_socket())
            return None
        except BlockingIOError:
            return "again"
        except OSError as e:
            return f"{_http.statsd_socket()}: {e.strerror or e}"

    def drop(self, n, why):
        self.dropped += n
        if not self.warned:
            self.warned = True
            log.warning("mlmon: lines for mlmond are being dropped (%s); "
                        "mlmon.dropped() counts them", why)


_S = _Sender()


def _after_fork_in_child():
    _S.reset()


os.register_at_fork(before=_S.flush, after_in_child=_after_fork_in_child)
atexit.register(_S.flush_at_exit)


def _register_multiprocessing():
    """A multiprocessing worker ends with os._exit(), past atexit: its
    finalizers are what still runs, so the worker's last lines go out
    from one."""
    try:
        from multiprocessing import util
    except ImportError:
        return

    def in_worker(_sender):
        util.Finalize(None, _S.flush_at_exit, exitpriority=-100)

    util.register_after_fork(_S, in_worker)


_register_multiprocessing()


# ---- the public calls --------------------------------------------------------


def _warn_bad(what):
    _S.drop(1, what)


def observe(op, ms, category=None):
    """One timing of op, in milliseconds."""
    try:
        ms = float(ms)
        if not 0.0 <= ms <= MAX_TIMING_MS:
            _warn_bad(f"a timing of {ms!r} ms is outside 0..1e9")
            return
        _S.add(_S.template(op, category, "ms") % ms)
    except Exception:
        pass


def count(op, n=1):
    """n more of op (feeds its ops/s)."""
    try:
        if not -MAX_VALUE <= n <= MAX_VALUE:
            _warn_bad(f"a count of {n!r} is outside +-2^53")
            return
        _S.add(_S.template(op, None, "c") % (str(n) if isinstance(n, int) else repr(float(n))))
    except Exception:
        pass


def gauge(name, value):
    """Sets the gauge name to value (stored as a time series)."""
    try:
        v = float(value)
        if not -MAX_VALUE <= v <= MAX_VALUE or math.isnan(v):
            _warn_bad(f"a gauge of {value!r} is outside +-2^53")
            return
        t = _S.template(name, None, "g")
        line = t % (str(value) if isinstance(value, int) else repr(v))
        # A leading sign moves a StatsD gauge: a negative value is set as 0
        # and then moved down.
        _S.add(t % "0" + line if v < 0 else line)
    except Exception:
        pass


def flush(wait_s=0.0):
    """Sends what is batched now; without blocking, unless wait_s allows
    waiting for room in a full queue."""
    _S.flush(wait_s)


def dropped():
    """How many lines this process has lost (no daemon, a full queue)."""
    return _S.dropped

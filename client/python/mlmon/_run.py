# SPDX-License-Identifier: MIT
"""The run this process belongs to, and thin wrappers over the JSON API
about it. Answers are the API's JSON as dicts, in its units (ms, bytes,
seconds); an unknown value is None."""

import logging
import os
import re
import shutil
import subprocess
import threading
import time

from . import _http
from ._http import ApiError, Error, Unavailable
from ._statsd import _S
from ._statsd import WAIT_S as _S_WAIT_S

log = logging.getLogger("mlmon")

# The variables that give a process its rank, in mlmond's order of
# precedence (torchrun's first); a value is 1 to 9 decimal digits.
RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
# `mlmonctl run --ranks` registers each rank one look at the launcher's tree
# (every 200 ms) after it starts: a rank whose attach() comes first waits
# for its own run this long at most, once, asking every OWN_RUN_POLL_S.
OWN_RUN_WAIT_S = 2.0
OWN_RUN_POLL_S = 0.05
# A mark's label, as mlmond takes it: 1 to 64 bytes of UTF-8 without
# control characters.
MARK_LABEL_MAX_BYTES = 64
# what mlmond refuses in a label: controls (C0, DEL, C1) and bidirectional
# formatting characters
_BAD_LABEL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# How long `mlmonctl report` may take (it makes a few requests).
REPORT_TIMEOUT_S = 3 * _http.QUERY_TIMEOUT_S

_current = {"run": None}
_lock = threading.Lock()
_warned = set()


def _warn_once(key, msg, *args):
    if key not in _warned:
        _warned.add(key)
        log.warning(msg, *args)


def _flush_before_asking():
    """Sends this process's lines before a query, waiting for room in a full
    queue; a queue that stays full for that long belongs to a daemon that
    reads nothing (stopped): the breaker opens, as after a timeout."""
    if not _S.flush_waiting():
        _http.trip_breaker(_S_WAIT_S)
        raise Unavailable(f"mlmond has read nothing from {_http.statsd_socket()} for {_S_WAIT_S:g} s")


def _pct_key(q):
    """The API's spelling of a percentile: 50 -> "50", 99.9 -> "99.9"."""
    return ("%.3f" % float(q)).rstrip("0").rstrip(".")


def _num(x):
    return ("%.6f" % float(x)).rstrip("0").rstrip(".")


class Run:
    """One run of mlmond. .id is None for a detached run (no daemon when
    attach() was called): its queries look for the run again, and raise
    Unavailable while there is none."""

    def __init__(self, run_id, info=None, attach_args=None):
        self.id = run_id
        self.info = info or {}
        self._attach_args = attach_args or {}

    def __repr__(self):
        return f"Run(id={self.id!r}, name={self.info.get('name')!r})"

    @property
    def name(self):
        return self.info.get("name")

    @property
    def pid(self):
        return self.info.get("pid")

    def _id(self):
        if self.id is None:
            found = attach(**self._attach_args)
            if found.id is None:
                raise Unavailable(f"mlmond is not reachable on {_http.api_socket()}, or this process "
                                  "belongs to no run")
            if found is not self:
                self.id, self.info = found.id, found.info
        return self.id

    def _get(self, sub="", params=None, timeout=_http.QUERY_TIMEOUT_S):
        _http.check_breaker()  # no waiting for a full queue of a daemon that does not answer
        _flush_before_asking()  # what this process timed is asked about too
        return _http.request("GET", f"/v1/runs/{self._id()}{sub}" + _http.query_string(params or {}),
                             timeout=timeout)

    # ---- queries -----------------------------------------------------------

    def get(self):
        """The run object with its latest sample, summary and leak verdict."""
        return self._get()

    def summary(self):
        """wall_time_s, cpu_time_s, peak_rss_bytes, final_rss_bytes, ..."""
        return self._get()["summary"]

    def leak(self):
        """The leak verdict: suspected, reason, slope_bytes_per_s, ...,
        oom_eta_s (time to the memory limit, None without a forecast)."""
        return self._get()["leak"]

    def goodput(self, window=None, since_mark=None, from_ms=None, until_ms=None, step=None):
        """The goodput ledger of a span (default: the whole run): wall_s
        split into startup_s, step_s, data_wait_s, checkpoint_s, eval_s,
        idle_s, lost_s and other_s; steps, ideal_step_ms, goodput_pct, the
        energy per step; with step ("1m") also a "series" of the split."""
        params = {"window": window, "since_mark": since_mark, "from": from_ms, "until": until_ms, "step": step}
        return self._get("/goodput", params)

    def verdicts(self):
        """{"input_bound", "gpu_idle", "oom"}: the verdicts beside the leak,
        each with its reason (None where not evaluated)."""
        o = self._get()
        leak = o.get("leak") or {}
        return {"input_bound": o.get("input_bound"), "gpu_idle": o.get("gpu_idle"), "oom": leak.get("oom")}

    def latency(self, window=None, since_mark=None, q=(50, 90, 99), op=None, from_ms=None, until_ms=None):
        """{"window_s","from","until","since_mark","ops":{op:{count, mean_ms,
        p50_ms, ...}}}. window: "1m", "30s"... (default 1m, or from the
        mark / from_ms when given)."""
        qs = ",".join(_pct_key(x) for x in (q if isinstance(q, (list, tuple)) else (q,)))
        params = {"window": window, "since_mark": since_mark, "q": qs, "op": op, "from": from_ms, "until": until_ms}
        if window is None and (since_mark is not None or from_ms is not None):
            params["window"] = None
        return self._get("/latency", params)

    def wait_for(self, op, count, timeout=5.0, window="5m", since_mark=None):
        """op's latency figures once mlmond has at least count timings of
        it in the window (or since the mark): what was just sent is read
        by the daemon a moment after the send. Raises Error on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            o = self.latency(window=None if since_mark else window, since_mark=since_mark, op=op)["ops"].get(op)
            if o and o["count"] >= count:
                return o
            if time.monotonic() >= deadline:
                raise Error(f"mlmon: {op}: {o['count'] if o else 0} of {count} timings after {timeout} s")
            time.sleep(0.05)

    def throughput(self, window="10s,1m,5m", until_ms=None):
        """{"windows":[{"window_s","cpu_pct",...,"ops":{op:{count, per_s}}}]}"""
        return self._get("/throughput", {"window": window, "until": until_ms})

    def samples(self, from_ms=None, until_ms=None, limit=None, step=None):
        """{"samples":[...],"gauges":[...],"truncated":bool}, oldest first."""
        return self._get("/samples", {"from": from_ms, "until": until_ms, "limit": limit, "step": step})

    def marks(self):
        return self._get("/marks")["marks"]

    def mark(self, label):
        """Puts a phase marker on the run and waits for mlmond's answer;
        returns {"run","label","ts"}. Raises (unlike mlmon.mark)."""
        _http.check_breaker()
        _flush_before_asking()
        return _http.request("POST", f"/v1/runs/{self._id()}/marks", {"label": label},
                             timeout=_http.QUERY_TIMEOUT_S)

    def check_sla(self, op, target_latency_ms=100, percentile=95, window=None, since_mark=None):
        """True when op's percentile latency is within target_latency_ms
        over the window (default 1m), False when not, None when op had no
        timings there."""
        slo = f"{op}:{_num(target_latency_ms)}ms@{_pct_key(percentile)}"
        params = {"window": window, "since_mark": since_mark, "q": _pct_key(percentile), "op": op}
        if window is None and since_mark is not None:
            params["window"] = None
        try:
            answer = self._get("/latency", dict(params, slo=slo))
        except ApiError as e:
            if e.status != 400 or "slo" not in e.message:
                raise
            answer = self._get("/latency", params)  # a daemon without slo=
        for s in answer.get("slo") or ():
            if s.get("op") == op:
                return s.get("met")
        stats = answer.get("ops", {}).get(op)
        if not stats or not stats.get("count"):
            return None
        value = stats.get(f"p{_pct_key(percentile)}_ms")
        return None if value is None else value <= float(target_latency_ms)

    def report(self, window=None, since_mark=None):
        """The `mlmonctl report` text: from mlmonctl when it is on PATH
        (the same table, to the byte), else formatted here from the JSON."""
        run_id = self._id()
        _http.check_breaker()
        _flush_before_asking()
        ctl = shutil.which("mlmonctl")
        if ctl:
            argv = [ctl, "--socket", _http.api_socket(), "report", str(run_id)]
            if window:
                argv += ["--window", window]
            if since_mark:
                argv += ["--since-mark", since_mark]
            env = dict(os.environ)
            env.pop("MLMON_URL", None)
            try:
                r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=REPORT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _http.trip_breaker(REPORT_TIMEOUT_S)
                raise Unavailable(f"mlmonctl report {run_id}: no answer within {REPORT_TIMEOUT_S:g} s") from None
            if r.returncode == 0:
                return r.stdout
            msg = (r.stderr.strip().splitlines() or ["mlmonctl report failed"])[-1]
            if "not reachable" in msg or "connect" in msg:
                raise Unavailable(msg)
            raise ApiError(400 if r.returncode == 2 else 404, "report", msg)
        from ._report import format_report
        return format_report(self.get(), self.latency(window=window, since_mark=since_mark))


# ---- finding the run ---------------------------------------------------------


def _ppid(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rindex(b")") + 2:].split()[1])


def _start_ticks(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rindex(b")") + 2:].split()[19])


def _run_of_pid(pid):
    """The running run registered for this very process, or None."""
    runs = _http.request("GET", f"/v1/runs?pid={pid}")["runs"]
    try:
        ticks = _start_ticks(pid)
    except (OSError, ValueError, IndexError):
        return None
    for r in runs:
        if r.get("pid") == pid and r.get("start_time_ticks") in (None, ticks):
            return r
    return None


def _nearest_run(pid):
    """The run of pid itself, else of its nearest registered ancestor; None
    when none of them is registered."""
    while pid > 1:
        info = _run_of_pid(pid)
        if info:
            return info
        try:
            pid = _ppid(pid)
        except (OSError, ValueError, IndexError):
            break
    return None


def _rank_of(env):
    """(variable, value) of the first rank variable with a valid value, as
    mlmond and mlmonctl read them; None without one."""
    for name in RANK_VARS:
        v = env.get(name)
        if v and len(v) <= 9 and v.isascii() and v.isdigit():
            return name, v
    return None


def _environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        data = f.read()
    env = {}
    for entry in data.split(b"\0"):
        k, eq, v = entry.partition(b"=")
        if eq and k.decode("latin-1") not in env:  # the first one counts, as for getenv()
            env[k.decode("latin-1")] = v.decode("latin-1")
    return env


def _own_run_coming(found):
    """Whether this process, found in the launcher's run of `mlmonctl run
    --ranks` ($MLMON_LAUNCHER_RUN_ID), is a rank that mlmonctl registers on
    its own: it has a rank variable that the launcher does not have."""
    if str(found.get("id")) != os.environ.get("MLMON_LAUNCHER_RUN_ID"):
        return False
    mine = _rank_of(os.environ)
    if mine is None:
        return False
    try:
        return mine != _rank_of(_environ_of(found["pid"]))
    except (OSError, KeyError, TypeError):
        return True


def _find_existing():
    """(run, pin): the run of this process, else of its nearest registered
    ancestor, else the running run of $MLMON_RUN_ID; (None, False) when there
    is none. pin: whether lines name the run (#run:ID), which keeps them on
    it even when they arrive after the process exited. Not so for the
    launcher's run of `mlmonctl run --ranks` in a process other than the
    launcher (a rank whose own run did not come in time): untagged, its lines
    go to its nearest registered ancestor as it is when they arrive, so the
    rank's own run gets them once it exists."""
    me = os.getpid()
    info = _nearest_run(me)
    if info is not None and info.get("pid") != me and _own_run_coming(info):
        deadline = time.monotonic() + OWN_RUN_WAIT_S
        while True:
            time.sleep(OWN_RUN_POLL_S)
            nearer = _nearest_run(me)
            if nearer is not None and nearer.get("id") != info.get("id"):
                info = nearer
                break
            if time.monotonic() >= deadline:
                _warn_once("rank", "mlmon: no run of its own for this rank after %g s: using the launcher's "
                           "run %s (timings go to the rank's run once it has one)", OWN_RUN_WAIT_S, info.get("id"))
                break
    if info is not None:
        return info, info.get("pid") == me or str(info.get("id")) != os.environ.get("MLMON_LAUNCHER_RUN_ID")
    rid = os.environ.get("MLMON_RUN_ID")
    if rid and rid.isascii() and rid.isdigit():
        try:
            info = _http.request("GET", f"/v1/runs/{rid}")
            if info.get("state") == "running":
                return info, True
        except ApiError:
            pass
    return None, False


def _adopt(info, pin):
    run = _current["run"]
    if run is None:
        run = Run(info["id"], info)
    else:  # a detached Run the job holds comes to life
        run.id, run.info = info["id"], info
    _current["run"] = run
    _S.set_run(run.id if pin else None)
    # a program this process starts belongs to the run too
    os.environ["MLMON_RUN_ID"] = str(run.id)
    return run


def attach(name=None, tags=None, children=True, interval=None, step_op=None):
    """Registers the calling process with mlmond, or finds the run it
    already belongs to (its own registration, a registered ancestor's, or
    $MLMON_RUN_ID's); returns that Run. A rank of `mlmonctl run --ranks`
    waits for its own run, up to OWN_RUN_WAIT_S. name, tags, children,
    interval and step_op (the op whose timings are the run's steps, for the
    goodput ledger; default: mlmond's [goodput] step_op, "step") apply only
    to a new registration. Never raises for the
    daemon's sake: without one it logs a warning and returns a detached Run
    (id None)."""
    args = {"name": name, "tags": tags, "children": children, "interval": interval, "step_op": step_op}
    with _lock:
        cur = _current["run"]
        if cur is not None and cur.id is not None:
            return cur
        try:
            info, pin = _find_existing()
            if info is None:
                pin = True
                body = {"pid": os.getpid(), "children": bool(children)}
                if name is not None:
                    body["name"] = str(name)
                if tags:
                    body["tags"] = {str(k): str(v) for k, v in tags.items()}
                if interval is not None:
                    body["interval"] = interval if isinstance(interval, str) else f"{int(float(interval) * 1000)}ms"
                if step_op is not None:
                    body["step_op"] = str(step_op)
                try:
                    info = _http.request("POST", "/v1/runs", body)
                except ApiError as e:
                    if e.status != 409:
                        raise
                    info = _run_of_pid(os.getpid())  # registered meanwhile
                    if info is None:
                        raise
            return _adopt(info, pin)
        except (Unavailable, ApiError) as e:
            _warn_once("attach", "mlmon: not monitored: %s", e)
            if cur is None:
                cur = Run(None, attach_args=args)
                _current["run"] = cur
            return cur


def run():
    """The current Run: the one attach() returned, else the run this
    process already belongs to; None when there is none (or no daemon)."""
    cur = _current["run"]
    if cur is not None and cur.id is not None:
        return cur
    with _lock:
        try:
            info, pin = _find_existing()
        except (Unavailable, ApiError):
            return cur
        return _adopt(info, pin) if info else cur


def mark(label):
    """Puts a phase marker on this process's run, after the timings taken
    so far, over the datagram socket: never waits for mlmond, never raises.
    Returns {"run","label","ts"} (run: the attached run's id, or None when
    mlmond finds the run by this process's pid; ts: this process's clock,
    in ms), or None when the label is not one (logged once) or the line
    could not be sent (no daemon: counted in dropped())."""
    try:
        label = str(label)
        if not 1 <= len(label.encode("utf-8")) <= MARK_LABEL_MAX_BYTES or _BAD_LABEL.search(label):
            _warn_once("mark-label", "mlmon: mark %r: a label is 1 to %d bytes of UTF-8 without control "
                       "characters", label, MARK_LABEL_MAX_BYTES)
            return None
        ts = int(time.time() * 1000)
        if not _S.add_mark(label):
            return None
        cur = _current["run"]
        return {"run": cur.id if cur is not None else None, "label": label, "ts": ts}
    except Exception as e:
        _warn_once("mark-" + type(e).__name__, "mlmon: mark %r: %s", label, e)
        return None

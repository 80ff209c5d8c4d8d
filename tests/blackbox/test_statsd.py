# SPDX-License-Identifier: MIT
"""StatsD input, end to end: real processes (helpers/statsd_agent.py, driven
line by line) send StatsD lines to the real daemon over its unix datagram
socket (attributed by SCM_CREDENTIALS) and over UDP (attributed by tags or by
the owner of the source port); the answers of /latency, /throughput,
/samples and /v1/health must account for every line exactly.

The shared pieces (the agent, the UDP-enabled daemon, counters and polling)
live here; test_latency.py imports them."""

import json
import os
import socket
import time

import pytest

from conftest import Helper, wait_for

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "statsd_agent.py")
PYTHON = "/usr/bin/python3"  # Debian's: it has python3-statsd


# ---- the agent: a registered (or not) process that sends what it is told ----

class Agent(Helper):
    def __init__(self):
        super().__init__([PYTHON, AGENT])
        self.expect("ready")

    def call(self, cmd, timeout=30.0, **kw):
        self.send(json.dumps(dict(cmd=cmd, **kw)))
        line = self.readline(timeout)
        word, _, rest = line.partition(" ")
        if word != "ok":
            pytest.fail(f"agent {self.pid}: {cmd} failed: {line}")
        return json.loads(rest)

    def unix(self, path, datagrams):
        """Sends each payload (bytes or str) as one datagram over a unix
        datagram socket to path."""
        return self.call("unix", path=path, data=[as_latin1(d) for d in datagrams])

    def udp(self, port, datagrams):
        """Same over UDP from this agent's one socket; returns its port."""
        return self.call("udp", host="127.0.0.1", port=port, data=[as_latin1(d) for d in datagrams])["port"]


def as_latin1(d):
    return d.decode("latin-1") if isinstance(d, bytes) else d


def cmd(name, **kw):
    """A command for Agent.call("fork", then=...)."""
    return dict(cmd=name, **kw)


@pytest.fixture
def agents():
    """Factory: agents() starts a statsd_agent.py process; all are stopped at
    teardown."""
    started = []

    def start():
        a = Agent()
        started.append(a)
        return a

    yield start
    for a in started:
        a.close()


# ---- the daemon with UDP on ------------------------------------------------

def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def udp_port_taken(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def start_udp_mlmond(make_mlmond, **kw):
    """A daemon that also listens for StatsD on UDP 127.0.0.1:PORT (the
    fixture's "--statsd-udp none" comes first; the later flag wins). A port
    taken in between makes the daemon only warn: try another."""
    for _ in range(3):
        port = free_udp_port()
        d = make_mlmond(extra_args=["--statsd-udp", f"127.0.0.1:{port}"], **kw)
        if udp_port_taken(port) and "statsd_udp" not in d.stderr():
            d.udp_port = port
            return d
        d.stop()
    pytest.fail("no free UDP port for the daemon after 3 tries")


@pytest.fixture
def udp_mlmond(make_mlmond):
    return start_udp_mlmond(make_mlmond)


def udp_send(port, datagrams, src=None, keep=False):
    """Sends from the test process itself (never registered). keep: the
    socket is returned open, for the caller to close: tags count only from
    a socket mlmond can still find (and whose owner may write to the run)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if src:
        s.bind(src)
    for d in datagrams:
        s.sendto(d.encode() if isinstance(d, str) else d, ("127.0.0.1", port))
    if keep:
        return s
    s.close()


def unix_send(path, datagrams):
    """Sends from the test process itself over the unix datagram socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        for d in datagrams:
            s.sendto(d.encode() if isinstance(d, str) else d, path)


# ---- answers -----------------------------------------------------------------

def health(d):
    st, h = d.get("/v1/health")
    assert st == 200, h
    return h


def counters(d):
    h = health(d)
    return {k: h[k] for k in ("statsd_received", "statsd_malformed", "statsd_unmatched")}


def delta(now, before):
    return {k: now[k] - before[k] for k in now}


def latency(d, run_id, query="window=1m"):
    st, body = d.get(f"/v1/runs/{run_id}/latency?{query}")
    assert st == 200, f"latency of run {run_id} ({query}): {st} {body}"
    return body


def op_count(d, run_id, op, query="window=1m"):
    o = latency(d, run_id, query)["ops"].get(op)
    return o["count"] if o else 0


def throughput_ops(d, run_id, query="window=1m"):
    st, body = d.get(f"/v1/runs/{run_id}/throughput?{query}")
    assert st == 200, f"throughput of run {run_id}: {st} {body}"
    return body["windows"][0]["ops"]


def settle(read, expected, what, timeout=10.0, quiet=0.3):
    """Waits until read() == expected, then checks it stays so for quiet
    seconds (nothing more trickles in): exact counts, not at-least."""
    last = [None]

    def reached():
        last[0] = read()
        if isinstance(expected, (int, float)) and isinstance(last[0], (int, float)):
            assert last[0] <= expected, f"{what}: {last[0]} > expected {expected}"
        return last[0] == expected

    deadline = time.monotonic() + timeout
    while not reached():
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: {last[0]!r} after {timeout} s, expected {expected!r}")
        time.sleep(0.02)
    time.sleep(quiet)
    got = read()
    assert got == expected, f"{what}: {got!r} after settling, expected {expected!r}"


def settle_counters(d, before, expected, what="statsd counters"):
    settle(lambda: delta(counters(d), before), expected, what)


def registered(d, agent, **kw):
    return d.register(agent.pid, **kw)["id"]


def lines(line, n):
    return "\n".join([line] * n)


# ---- 1. unix socket: the sender's pid from SCM_CREDENTIALS --------------------

def test_unix_socket_lands_on_the_senders_run(mlmond, agents):
    a = agents()
    other = agents()
    rid = registered(mlmond, a)
    other_id = registered(mlmond, other)
    before = counters(mlmond)

    # 10 datagrams of 30 lines, plain sendto: no tag, no header, no credentials
    # passed by hand (the kernel attaches them: the daemon has SO_PASSCRED)
    a.unix(mlmond.statsd_path, [lines("op:5|ms", 30)] * 10)
    other.unix(mlmond.statsd_path, [lines("op:7|ms", 4)])

    settle(lambda: op_count(mlmond, rid, "op"), 300, "timings on the sender's run")
    o = latency(mlmond, rid)["ops"]["op"]
    assert o["min_ms"] == 5.0 and o["max_ms"] == 5.0 and o["p50_ms"] == 5.0 and o["total_ms"] == 1500.0
    assert o["category"] is None
    assert op_count(mlmond, other_id, "op") == 4
    assert latency(mlmond, other_id)["ops"]["op"]["max_ms"] == 7.0
    settle_counters(mlmond, before, {"statsd_received": 304, "statsd_malformed": 0, "statsd_unmatched": 0})

    # a category tag, a trailing newline, CRLF line ends
    a.unix(mlmond.statsd_path, ["inference:12.5|ms|#category:model_inference\r\ninference:7.5|h\n"])
    settle(lambda: op_count(mlmond, rid, "inference"), 2, "tagged timings")
    inf = latency(mlmond, rid)["ops"]["inference"]
    assert inf["category"] == "model_inference"
    assert (inf["min_ms"], inf["max_ms"], inf["total_ms"]) == (7.5, 12.5, 20.0)


# ---- 2. workers: nearest registered ancestor ----------------------------------

def test_unix_socket_worker_and_grandchild_land_on_the_ancestors_run(mlmond, agents):
    parent = agents()
    rid = registered(mlmond, parent)  # no "children": attribution is by ancestry
    before = counters(mlmond)

    def via(depth, op, n):
        # the worker sends, then stays until the daemon has taken its lines,
        # so that /proc still says who its parent is
        out = parent.call("fork", depth=depth, then=cmd("seq", steps=[
            cmd("unix", path=mlmond.statsd_path, data=[lines(f"{op}:3|ms", n)]),
            cmd("wait_count", socket=mlmond.socket_path, run=rid, op=op, count=n, timeout=10)]))
        return out["pids"]

    pids = via(1, "worker", 20)
    assert len(pids) == 1 and pids[0] != parent.pid
    pids2 = via(2, "grandchild", 15)
    assert len(pids2) == 2 and parent.pid not in pids2

    # neither worker was ever registered
    for p in pids + pids2:
        st, body = mlmond.get(f"/v1/runs?state=all&pid={p}")
        assert st == 200 and body["runs"] == [], body
    settle(lambda: op_count(mlmond, rid, "worker"), 20, "worker timings")
    settle(lambda: op_count(mlmond, rid, "grandchild"), 15, "grandchild timings")
    settle_counters(mlmond, before, {"statsd_received": 35, "statsd_malformed": 0, "statsd_unmatched": 0})


def test_unix_socket_registered_child_wins_over_its_registered_parent(mlmond, agents):
    """The nearest registered ancestor: a registered process's own lines go to
    its own run even when its parent is registered too."""
    parent = agents()
    pid_id = registered(mlmond, parent)
    child_pid = parent.call("child")["pid"]
    child_id = mlmond.register(child_pid)["id"]
    # the child itself cannot be told to send; #pid says "as if sent by"
    unix_send(mlmond.statsd_path, [f"a:1|ms|#pid:{child_pid}", f"a:2|ms|#pid:{parent.pid}"])
    settle(lambda: op_count(mlmond, child_id, "a"), 1, "child's line")
    settle(lambda: op_count(mlmond, pid_id, "a"), 1, "parent's line")
    assert latency(mlmond, child_id)["ops"]["a"]["max_ms"] == 1.0
    assert latency(mlmond, pid_id)["ops"]["a"]["max_ms"] == 2.0


# ---- 3. UDP with tags -------------------------------------------------------------

def test_udp_run_and_pid_tags(udp_mlmond, agents):
    d = udp_mlmond
    a1, a2 = agents(), agents()
    r1, r2 = registered(d, a1), registered(d, a2)
    c2 = a2.call("child")["pid"]  # an unregistered child of a2
    before = counters(d)

    # from the test process (root): never registered, so only the tags can
    # match; its socket stays open until the lines are in
    s = udp_send(d.udp_port, [
        f"t:1|ms|#run:{r1}\n"
        f"t:2|ms|#pid:{a2.pid}\n"
        f"t:3|ms|#pid:{c2}\n"
        f"t:4|ms|#env:prod,run:{r1}\n"                      # an unknown tag beside it
        f"c:10|ms|#run:{r2},category:model_inference\n"
        f"n:1|c|#pid:{c2}|@0.5\n",                           # sections in any order
    ], keep=True)
    # from a registered process: the tag wins over the source port's owner
    a1.udp(d.udp_port, [f"x:5|ms|#run:{r2}", f"y:6|ms|#pid:{a2.pid}"])

    settle(lambda: op_count(d, r1, "t"), 2, "run 1's t")
    settle(lambda: op_count(d, r2, "t"), 2, "run 2's t")
    t1, t2 = latency(d, r1)["ops"]["t"], latency(d, r2)["ops"]["t"]
    assert (t1["min_ms"], t1["max_ms"]) == (1.0, 4.0)
    assert (t2["min_ms"], t2["max_ms"]) == (2.0, 3.0)
    ops2 = latency(d, r2)["ops"]
    assert ops2["c"]["count"] == 1 and ops2["c"]["category"] == "model_inference"
    assert ops2["x"]["count"] == 1 and ops2["y"]["count"] == 1
    assert set(latency(d, r1)["ops"]) == {"t"}
    assert throughput_ops(d, r2)["n"]["count"] == 2.0
    settle_counters(d, before, {"statsd_received": 8, "statsd_malformed": 0, "statsd_unmatched": 0})
    s.close()


# ---- 4. UDP, a stock client, no tags: the source port's owner ---------------------

def test_udp_stock_client_without_tags(udp_mlmond, agents):
    d = udp_mlmond
    a, b = agents(), agents()
    ra, rb = registered(d, a), registered(d, b)
    before = counters(d)

    port = a.call("stock", host="127.0.0.1", port=d.udp_port, n=100, stat="op", ms=12.5)["port"]
    settle(lambda: op_count(d, ra, "op"), 100, "stock client timings")
    o = latency(d, ra)["ops"]["op"]
    assert o["min_ms"] == 12.5 and o["max_ms"] == 12.5 and o["total_ms"] == 1250.0

    # a second client (a new socket, a new port) in the other process
    port_b = b.call("stock", host="127.0.0.1", port=d.udp_port, n=7, stat="op", ms=1)["port"]
    assert port_b != port
    settle(lambda: op_count(d, rb, "op"), 7, "second process's timings")
    assert op_count(d, ra, "op") == 100
    # the same agent's own long-lived socket, untagged
    a.udp(d.udp_port, ["own:2|ms\nown:3|ms"])
    settle(lambda: op_count(d, ra, "own"), 2, "untagged lines from the agent's socket")
    settle_counters(d, before, {"statsd_received": 109, "statsd_malformed": 0, "statsd_unmatched": 0})


# ---- 5. unmatched lines -------------------------------------------------------------

def test_unmatched_lines_are_counted_and_dropped(udp_mlmond, agents):
    d = udp_mlmond
    reg, stranger = agents(), agents()
    rid = registered(d, reg)
    before = counters(d)

    stranger.unix(d.statsd_path, [lines("u:1|ms", 3)])                    # 3: unregistered sender
    stranger.udp(d.udp_port, ["u:1|ms\nu:1|c"])                            # 2: unowned port
    stranger.call("stock", host="127.0.0.1", port=d.udp_port, n=4, stat="u", ms=1)  # 4
    udp_send(d.udp_port, ["u:1|ms|#run:99999", f"u:1|ms|#pid:{stranger.pid}",
                          "u:1|ms|#pid:1"])                                # 3: tags that match nothing
    reg.unix(d.statsd_path, ["u:1|ms|#run:99999"])                         # 1: the tag wins, even for
    reg.udp(d.udp_port, ["u:1|g|#run:99999"])                              # 1: a registered sender
    settle_counters(d, before, {"statsd_received": 14, "statsd_malformed": 0, "statsd_unmatched": 14})

    assert latency(d, rid)["ops"] == {}
    assert throughput_ops(d, rid) == {}
    st, runs = d.get("/v1/runs?state=all")
    assert [r["id"] for r in runs["runs"]] == [rid]
    # the registered sender itself is still matched
    reg.unix(d.statsd_path, ["u:1|ms"])
    settle(lambda: op_count(d, rid, "u"), 1, "the registered sender's own line")


def test_lines_for_an_exited_run_are_unmatched(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    a.close()
    wait_for(lambda: mlmond.run(rid)["state"] == "exited", 5, what="the run to end")
    before = counters(mlmond)
    unix_send(mlmond.statsd_path, [f"late:1|ms|#run:{rid}"])
    settle_counters(mlmond, before, {"statsd_received": 1, "statsd_malformed": 0, "statsd_unmatched": 1})
    assert op_count(mlmond, rid, "late", "window=5m") == 0


def test_unix_lines_right_after_registration_land(mlmond, agents):
    a = agents()
    a.unix(mlmond.statsd_path, ["early:1|ms"])  # not registered yet: unmatched
    settle(lambda: counters(mlmond)["statsd_unmatched"], 1, "the early line, unmatched")
    rid = registered(mlmond, a)
    a.unix(mlmond.statsd_path, ["late:1|ms"])
    settle(lambda: op_count(mlmond, rid, "late"), 1, "a line sent once registered", timeout=0.5, quiet=0)


def test_udp_lines_right_after_registration_land(udp_mlmond, agents):
    d = udp_mlmond
    a = agents()
    a.udp(d.udp_port, ["early:1|ms"])
    settle(lambda: counters(d)["statsd_unmatched"], 1, "the early line, unmatched")
    rid = registered(d, a)
    a.udp(d.udp_port, ["late:1|ms"])
    settle(lambda: op_count(d, rid, "late"), 1, "a line sent once registered", timeout=0.5, quiet=0)


# ---- 6. garbage ---------------------------------------------------------------------

# (payload, malformed lines it is worth)
GARBAGE = [
    (b"", 1),                                   # an empty datagram
    (b":", 1),
    (b"a:1|x", 1),                              # unknown type
    (b"a:NaN|ms", 1),
    (b"a:1e999|ms", 1),                         # overflows
    (b"a:inf|ms", 1),
    (b"a:0x10|c", 1),
    (b"a:-1|ms", 1),                            # a negative timing
    (b"a:1|c|@0", 1),                           # rate outside (0, 1]
    (b"a:1|c|@1.5", 1),
    (b"a:1|ms|#run:abc", 1),
    (b"a:1|ms|#run:1,run:1", 1),
    (b"\xff\xfe:1|ms", 1),                      # invalid UTF-8 in the name
    (b"\xc3\x28op:1|ms", 1),
    (b"n\x01m:1|ms", 1),                        # control characters
    (b"n\x7f:1|c", 1),
    (b"n\x00m:1|ms", 1),
    (b"\xc2\x9bm:1|ms", 1),                     # a C1 control (CSI)
    (b" a:1|c", 1),
    (b"a" * 201 + b":1|ms", 1),                 # name over 200 bytes
    (b"x" * 60000 + b":1|ms", 1),               # 60 KB: truncated at 16 KiB
    (b"big:1|ms\n" * 7000, 1),                  # 63 KB of good lines: truncated, dropped whole
    (b"a:1|x\n:\nb:-1|ms", 3),                  # three bad lines in one datagram
    (b"\n\n\r\n", 0),                           # empty lines are skipped, not malformed
]


def check_garbage(d, rid, send, sentinel_send):
    before = counters(d)
    send([p for p, _ in GARBAGE])
    # datagrams are read in order: once the sentinel line is counted, every
    # piece of garbage before it has been handled
    sentinel_send(["sentinel:1|c"])
    want = sum(n for _, n in GARBAGE)
    settle_counters(d, before, {"statsd_received": 1, "statsd_malformed": want, "statsd_unmatched": 0})
    assert latency(d, rid, "window=5m")["ops"] == {}
    # the run is younger than the 1m window: per_s divides by its age
    registered_ts = d.run(rid)["registered_ts"]
    t0 = time.time() * 1000
    ops = throughput_ops(d, rid)
    t1 = time.time() * 1000
    assert set(ops) == {"sentinel"} and ops["sentinel"]["count"] == 1.0
    assert t1 - registered_ts < 60000
    age_s = [(t - registered_ts) / 1000 for t in (t0, t1)]
    assert 1 / age_s[1] * 0.95 <= ops["sentinel"]["per_s"] <= 1 / age_s[0] * 1.05, (ops, age_s)


def test_garbage_on_the_unix_socket(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    pid = mlmond.pid
    check_garbage(mlmond, rid, lambda ds: a.unix(mlmond.statsd_path, ds),
                  lambda ds: a.unix(mlmond.statsd_path, ds))
    assert mlmond.alive() and mlmond.pid == pid and health(mlmond)["status"] == "ok"
    a.unix(mlmond.statsd_path, ["after:2|ms"])
    settle(lambda: op_count(mlmond, rid, "after"), 1, "a good line after the garbage")


def test_garbage_over_udp(udp_mlmond, agents):
    d = udp_mlmond
    a = agents()
    rid = registered(d, a)
    pid = d.pid
    # from the registered agent's socket: if any garbage parsed, it would land
    check_garbage(d, rid, lambda ds: a.udp(d.udp_port, ds), lambda ds: a.udp(d.udp_port, ds))
    assert d.alive() and d.pid == pid and health(d)["status"] == "ok"
    a.udp(d.udp_port, ["after:2|ms"])
    settle(lambda: op_count(d, rid, "after"), 1, "a good line after the garbage")


# ---- 7. counters and gauges -------------------------------------------------------

def test_counters_and_gauges(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a, interval="250ms")
    t0 = time.time() * 1000
    a.unix(mlmond.statsd_path, ["req:1|c", "req:3|c|@0.5", "lat:2|ms|@0.25"])
    settle(lambda: throughput_ops(mlmond, rid).get("req", {}).get("count"), 7.0, "req count (1 + 3/0.5)")
    assert throughput_ops(mlmond, rid)["lat"]["count"] == 4.0  # a timing at @0.25 weighs 4
    assert op_count(mlmond, rid, "lat") == 4
    assert "req" not in latency(mlmond, rid)["ops"]  # counters make no latency

    for g in ["q:5|g", "q:+2|g", "q:-10|g", "other:1.5|g"]:
        a.unix(mlmond.statsd_path, [g])
        time.sleep(0.02)  # distinct timestamps: the order is the stored order

    def gauges():
        st, body = mlmond.get(f"/v1/runs/{rid}/samples?from={int(t0) - 1000}")
        assert st == 200, body
        return [(g["name"], g["value"]) for g in body["gauges"]]
    settle(gauges, [("q", 5.0), ("q", 7.0), ("q", -3.0), ("other", 1.5)], "stored gauges")
    st, body = mlmond.get(f"/v1/runs/{rid}/samples?from={int(t0) - 1000}")
    ts = [g["ts"] for g in body["gauges"]]
    assert ts == sorted(ts) and t0 - 1000 <= ts[0] <= time.time() * 1000
    assert "q" not in throughput_ops(mlmond, rid)  # gauges are not ops

# SPDX-License-Identifier: MIT
"""StatsD from hostile neighbours, end to
end: the real daemon, real sockets, and senders that run as other users
(uid 65534 and a user this module creates with useradd; skipped where the
machine does not allow that).

 - a #run:/#pid: tag reaches a run only when its sender could write to the
   run over HTTP (root or the run's owner); the others are counted in
   statsd_refused, on the unix socket (SCM_CREDENTIALS) and over UDP (the
   owner of the source port's socket);
 - untagged UDP from many source ports does not stall the daemon;
 - values and sample rates out of bounds are malformed, and /metrics never
   writes a counter as +Inf or NaN."""

import json
import os
import pwd
import re
import subprocess
import time

import pytest

from conftest import as_user, needs, wait_for
from test_statsd import agents, free_udp_port, latency, op_count, registered, udp_mlmond  # noqa: F401

NOBODY = 65534
USER = "mlmond-bb-h17"

# A sender as another user: reads one JSON command per line, answers "ok".
#   {"unix": PATH, "data": [...]}              a datagram each, one socket
#   {"udp": PORT, "data": [...], "fresh": B}   from this process's one UDP
#                                              socket (or a fresh one each)
SENDER = r'''
import json, socket, sys
bind = sys.argv[1] if len(sys.argv) > 1 else ""
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((bind, 0) if bind else ("127.0.0.1", 0))
print("ready", u.getsockname()[1], flush=True)
for line in sys.stdin:
    c = json.loads(line)
    if "unix" in c:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            for d in c["data"]:
                s.sendto(d.encode(), c["unix"])
    else:
        for d in c["data"]:
            if c.get("fresh"):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.sendto(d.encode(), ("127.0.0.1", c["udp"]))
            else:
                u.sendto(d.encode(), ("127.0.0.1", c["udp"]))
    print("ok", flush=True)
'''


class Sender:
    def __init__(self, uid, bind=""):
        argv = ["/usr/bin/python3", "-I", "-c", SENDER] + ([bind] if bind else [])
        self.p = subprocess.Popen(as_user(uid) + argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        word, port = self.p.stdout.readline().split()
        assert word == "ready"
        self.port = int(port)
        self.pid = self.p.pid  # setpriv execs: the pid is the sender's

    def send(self, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline().strip() == "ok"

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


@pytest.fixture(scope="module")
def other_uid():
    """An unprivileged user besides nobody, created for this module."""
    if os.geteuid() != 0:
        needs("root", "to act as other users")
    try:
        uid = pwd.getpwnam(USER).pw_uid
        created = False
    except KeyError:
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                           capture_output=True)
        if r.returncode != 0:
            needs("useradd", f"useradd {USER}: {r.stderr.decode().strip()}")
        uid = pwd.getpwnam(USER).pw_uid
        created = True
    yield uid
    if created:
        subprocess.run(["userdel", USER], capture_output=True)


@pytest.fixture
def senders():
    started = []

    def start(uid, bind=""):
        s = Sender(uid, bind)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def refused(d):
    st, h = d.get("/v1/health")
    assert st == 200
    return h.get("statsd_refused", 0)


def health_counts(d):
    st, h = d.get("/v1/health")
    assert st == 200
    # (before the fix there was no statsd_refused: 0, so the ops decide)
    return {k: h.get(k, 0) for k in ("statsd_received", "statsd_malformed", "statsd_unmatched", "statsd_refused")}


def settle_delta(d, before, expected, timeout=10.0):
    def now():
        h = health_counts(d)
        return {k: h[k] - before[k] for k in expected}

    wait_for(lambda: now() == expected, timeout, what=f"statsd counters {expected} (now {now()})")
    time.sleep(0.3)
    assert now() == expected


# ---- 2. tags and ownership -----------------------------------------------------

def test_unix_tags_reach_only_runs_the_sender_may_write(mlmond, senders, other_uid):
    victim = senders(other_uid)  # a process of the other user: its run is theirs
    rid = mlmond.register(victim.pid)["id"]
    st, run = mlmond.get(f"/v1/runs/{rid}")
    assert run["uid"] == other_uid
    evil = senders(NOBODY)
    before = health_counts(mlmond)
    evil.send(unix=mlmond.statsd_path, data=[f"evil:99999|ms|#run:{rid}", f"evil:99999|ms|#pid:{victim.pid}",
                                             f"evil:1|c|#run:{rid}"])
    settle_delta(mlmond, before, {"statsd_received": 3})
    assert "evil" not in latency(mlmond, rid)["ops"]
    settle_delta(mlmond, before, {"statsd_received": 3, "statsd_refused": 3, "statsd_unmatched": 0})

    # the owner may tag their own run, and root anyone's
    before = health_counts(mlmond)
    victim.send(unix=mlmond.statsd_path, data=[f"own:5|ms|#run:{rid}", f"own:5|ms|#pid:{victim.pid}"])
    settle_delta(mlmond, before, {"statsd_received": 2, "statsd_refused": 0})
    assert op_count(mlmond, rid, "own") == 2


def test_unix_tag_cannot_reach_roots_run(mlmond, helpers, senders):
    h = helpers("busy", "0", "0")
    rid = mlmond.register(h.pid)["id"]
    evil = senders(NOBODY)
    before = health_counts(mlmond)
    evil.send(unix=mlmond.statsd_path, data=[f"evil:99999|ms|#run:{rid}"])
    settle_delta(mlmond, before, {"statsd_received": 1})
    assert "evil" not in latency(mlmond, rid)["ops"]
    settle_delta(mlmond, before, {"statsd_received": 1, "statsd_refused": 1})


def test_udp_tags_reach_only_runs_the_socket_owner_may_write(udp_mlmond, senders, other_uid):
    d = udp_mlmond
    victim = senders(other_uid)
    rid = d.register(victim.pid)["id"]
    evil = senders(NOBODY)
    before = health_counts(d)
    evil.send(udp=d.udp_port, data=[f"evil:99999|ms|#run:{rid}", f"evil:99999|ms|#pid:{victim.pid}"])
    # a socket gone before mlmond reads the datagram has no owner: refused too
    evil.send(udp=d.udp_port, data=[f"evil:1|ms|#run:{rid}"] * 5, fresh=True)
    settle_delta(d, before, {"statsd_received": 7})
    assert "evil" not in latency(d, rid)["ops"]
    settle_delta(d, before, {"statsd_received": 7, "statsd_refused": 7, "statsd_unmatched": 0})

    before = health_counts(d)
    victim.send(udp=d.udp_port, data=[f"own:5|ms|#run:{rid}", "own:5|ms"])
    settle_delta(d, before, {"statsd_received": 2, "statsd_refused": 0, "statsd_unmatched": 0})
    assert op_count(d, rid, "own") == 2


def test_udp_port_shared_by_two_owners_attributes_nothing(udp_mlmond, senders, other_uid):
    """A neighbour binding 127.0.0.2:P next to the owner's 127.0.0.1:P does
    not pass for the owner, tagged or not."""
    d = udp_mlmond
    victim = senders(other_uid, bind="127.0.0.1")
    rid = d.register(victim.pid)["id"]
    r = subprocess.run(as_user(NOBODY) + ["/usr/bin/python3", "-I", "-c", f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.2", {victim.port}))
for line in ("evil:1|ms", "evil:1|ms|#run:{rid}"):
    s.sendto(line.encode(), ("127.0.0.1", {d.udp_port}))
import time; time.sleep(1.5)
"""], capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        pytest.skip(f"cannot bind 127.0.0.2:{victim.port}: {r.stderr.strip()}")
    wait_for(lambda: health_counts(d)["statsd_received"] >= 2, 5.0, what="the two lines")
    assert "evil" not in latency(d, rid)["ops"]
    h = health_counts(d)
    assert h["statsd_unmatched"] == 1 and h["statsd_refused"] == 1, h


def test_junk_names_cannot_fill_someone_elses_op_table(mlmond, senders, other_uid):
    victim = senders(other_uid)
    rid = mlmond.register(victim.pid)["id"]
    evil = senders(NOBODY)
    before = health_counts(mlmond)
    evil.send(unix=mlmond.statsd_path, data=[f"junk{i}:1|c|#run:{rid}" for i in range(260)])
    settle_delta(mlmond, before, {"statsd_received": 260})
    victim.send(unix=mlmond.statsd_path, data=["legit:3|ms"])
    wait_for(lambda: op_count(mlmond, rid, "legit") == 1, 5.0, what="the owner's op")
    assert not any(op.startswith("junk") for op in latency(mlmond, rid)["ops"])
    assert health_counts(mlmond)["statsd_refused"] - before["statsd_refused"] == 260


def test_refused_in_metrics(mlmond, senders, helpers):
    h = helpers("busy", "0", "0")
    rid = mlmond.register(h.pid)["id"]
    senders(NOBODY).send(unix=mlmond.statsd_path, data=[f"evil:1|ms|#run:{rid}"])
    wait_for(lambda: refused(mlmond) == 1, 5.0, what="statsd_refused 1")
    body = metrics_text(mlmond)
    assert re.search(r"^mlmond_statsd_refused_total 1$", body, re.M), body[-2000:]


# ---- 3. many source ports --------------------------------------------------------

def daemon_cpu_ns(pid):
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def test_many_udp_ports_do_not_stall_the_daemon(udp_mlmond, helpers):
    """1000 unregistered source ports, each sending once a second for 3 s:
    before the index, each datagram re-read /proc/net/udp (100 % CPU,
    seconds-long health answers)."""
    d = udp_mlmond
    h = helpers("busy", "0", "0")
    d.register(h.pid)
    _, h0 = d.get("/v1/health")
    c0, t0 = daemon_cpu_ns(d.pid), time.monotonic()
    sender = subprocess.Popen(["/usr/bin/python3", "-I", "-c", f"""
import resource, socket, time
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, max(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(1000)]
for s in socks:
    s.bind(("127.0.0.1", 0))
for rnd in range(3):
    t = time.monotonic()
    for i, s in enumerate(socks):
        s.sendto(b"ports:1|ms", ("127.0.0.1", {d.udp_port}))
        if i % 50 == 49:
            time.sleep(max(0, t + (i + 1) / 1000 - time.monotonic()))
print("done", flush=True)
time.sleep(1)
"""], stdout=subprocess.PIPE, text=True)
    worst = 0.0
    try:
        while sender.poll() is None:
            t = time.monotonic()
            st, _ = d.get("/v1/health", timeout=30)
            assert st == 200
            worst = max(worst, time.monotonic() - t)
            time.sleep(0.1)
    finally:
        sender.wait(timeout=60)
    cpu = (daemon_cpu_ns(d.pid) - c0) / ((time.monotonic() - t0) * 1e9) * 100
    wait_for(lambda: d.get("/v1/health")[1]["statsd_received"] - h0["statsd_received"] == 3000, 10.0,
             what="3000 lines received")
    _, h1 = d.get("/v1/health")
    assert h1["statsd_unmatched"] - h0["statsd_unmatched"] == 3000
    assert worst < 0.5, f"/v1/health took {worst * 1000:.0f} ms"
    assert cpu < 50, f"mlmond used {cpu:.0f} % CPU"
    assert h1["overruns"] == h0["overruns"]


def test_udp_sender_registered_after_a_miss_is_found_at_once(udp_mlmond, agents):
    d = udp_mlmond
    a = agents()
    port = a.udp(d.udp_port, ["early:1|ms"])  # unregistered: a miss
    wait_for(lambda: health_counts(d)["statsd_unmatched"] == 1, 5.0, what="the miss")
    rid = registered(d, a)
    assert a.udp(d.udp_port, ["late:1|ms"]) == port
    wait_for(lambda: op_count(d, rid, "late") == 1, 5.0, what="the line after registration")


# ---- 12. bounds ------------------------------------------------------------------

def test_out_of_range_values_and_rates_are_malformed(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    before = health_counts(mlmond)
    a.unix(mlmond.statsd_path, ["big:1.79e308|c\nbig:1.79e308|c\nslow:1|ms|@1e-300\nlong:2e9|ms\nok:1|c|@1e-6"])
    settle_delta(mlmond, before, {"statsd_received": 1, "statsd_malformed": 4})
    ops = latency(mlmond, rid)["ops"]
    assert "big" not in ops and "slow" not in ops and "long" not in ops
    body = metrics_text(mlmond)
    assert "Inf" not in body and "NaN" not in body


def test_observations_over_http_have_the_same_bounds(mlmond, agents):
    """A count past 2^53 or a timing past 1e9 ms over HTTP is a 400, as the
    same line over StatsD is malformed; nothing reaches /metrics as +Inf."""
    a = agents()
    rid = registered(mlmond, a)
    for item in ({"op": "huge", "count": 1.79e308}, {"op": "huge", "ms": 2e9}, {"op": "huge", "gauge": -1e16}):
        status, body = mlmond.post(f"/v1/runs/{rid}/observations", [item])
        assert status == 400, (item, status, body)
        assert body["error"]["code"] == "bad_request"
    mlmond.post(f"/v1/runs/{rid}/observations", [{"op": "fine", "count": 2}])
    wait_for(lambda: 'op="fine"' in metrics_text(mlmond), 5.0, what="the fine op in /metrics")
    body = metrics_text(mlmond)
    counters = [ln for ln in body.splitlines() if ln.startswith("mlmond_") and ("Inf" in ln or "NaN" in ln)]
    assert counters == [], counters
    assert 'op="huge"' not in body


def metrics_text(d):
    r = d.request("GET", "/metrics")
    assert r.status == 200
    return r.body.decode()

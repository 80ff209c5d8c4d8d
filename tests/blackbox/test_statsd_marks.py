# SPDX-License-Identifier: MIT
"""Marks over StatsD, end to end: DogStatsD's event line
`_e{TITLE_LEN,TEXT_LEN}:title|text` puts a mark titled `title` on the
sender's run (unix socket: SCM_CREDENTIALS; UDP: the source port's owner, or
a `#run:` tag with the rights of timings), after the lines sent before it.
And a query that follows a send sees what was sent: mlmond reads the StatsD
sockets before it answers."""

import json
import socket
import time

from conftest import wait_for
from test_hostile_statsd import NOBODY, health_counts, senders, settle_delta  # noqa: F401
from test_statsd import agents, op_count, registered, udp_mlmond, udp_send  # noqa: F401


def marks(d, run_id):
    st, body = d.get(f"/v1/runs/{run_id}/marks")
    assert st == 200, body
    return body["marks"]


def event(title, text="", tags=""):
    t, x = title.encode(), text.encode()
    return f"_e{{{len(t)},{len(x)}}}:{title}|{text}" + (f"|#{tags}" if tags else "")


def test_a_mark_line_marks_the_senders_run_after_its_timings(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    before = health_counts(mlmond)
    t0 = time.time() * 1000
    a.unix(mlmond.statsd_path, ["step:5|ms\nstep:6|ms\n" + event("warmup-done") + "\nstep:7|ms",
                                event("epoch 1: loss|0.5", "text that is ignored")])
    # asked right after the send, with no waiting: mlmond reads its StatsD
    # sockets before it answers
    got = marks(mlmond, rid)
    assert sorted(m["label"] for m in got) == ["epoch 1: loss|0.5", "warmup-done"]
    assert all(t0 - 1 <= m["ts"] <= time.time() * 1000 + 1 for m in got)
    assert op_count(mlmond, rid, "step") == 3
    settle_delta(mlmond, before, {"statsd_received": 5, "statsd_malformed": 0, "statsd_unmatched": 0,
                                  "statsd_refused": 0})


def test_a_query_sees_every_line_sent_before_it(mlmond, agents):
    a = agents()
    rid = registered(mlmond, a)
    for i in range(40):
        a.unix(mlmond.statsd_path, ["op:1|ms", event(f"m{i}")])
        assert op_count(mlmond, rid, "op") == i + 1
        assert f"m{i}" in [m["label"] for m in marks(mlmond, rid)]


def test_marks_that_reach_no_run_or_do_not_parse(mlmond, agents):
    loner = agents()
    before = health_counts(mlmond)
    loner.unix(mlmond.statsd_path, [event("nobody's"), "_e{5,0}:mark|", "_e{0,0}:|", event("x" * 65)])
    settle_delta(mlmond, before, {"statsd_received": 1, "statsd_unmatched": 1, "statsd_malformed": 3})


def test_a_tagged_mark_reaches_only_a_run_the_sender_may_write(mlmond, agents, senders):
    a = agents()
    rid = registered(mlmond, a)  # root's
    evil = senders(NOBODY)
    before = health_counts(mlmond)
    evil.send(unix=mlmond.statsd_path, data=[event("evil", tags=f"run:{rid}"), event("evil", tags=f"pid:{a.pid}")])
    settle_delta(mlmond, before, {"statsd_received": 2, "statsd_refused": 2, "statsd_unmatched": 0})
    assert marks(mlmond, rid) == []
    # root (this test) may tag any run
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(event("from-root", tags=f"run:{rid}").encode(), mlmond.statsd_path)
    assert [m["label"] for m in marks(mlmond, rid)] == ["from-root"]


def test_marks_over_udp(udp_mlmond, agents):
    d = udp_mlmond
    a = agents()
    rid = registered(d, a)
    a.udp(d.udp_port, [event("by-port")])  # the registered process owns the port
    wait_for(lambda: [m["label"] for m in marks(d, rid)] == ["by-port"], 5.0, what="the mark by port")
    # root, tagged, from a socket still open when mlmond reads the datagram
    s = udp_send(d.udp_port, [event("by-tag", tags=f"run:{rid}")], keep=True)
    try:
        wait_for(lambda: "by-tag" in [m["label"] for m in marks(d, rid)], 5.0, what="the tagged mark")
    finally:
        s.close()


def test_a_flood_of_marks_is_held_to_the_budget(mlmond, agents):
    """1 000 marks a second, in bursts of as many: a flood of 3 000 in a few
    datagrams keeps about that many and counts the rest as unmatched, and
    the sampler stays on time."""
    a = agents()
    rid = registered(mlmond, a)
    before = health_counts(mlmond)
    t0 = time.monotonic()
    a.unix(mlmond.statsd_path, ["\n".join(event(f"f{i}-{j}") for j in range(300)) for i in range(10)])
    elapsed = time.monotonic() - t0

    def done():
        h = health_counts(mlmond)
        return h["statsd_received"] - before["statsd_received"] == 3000
    wait_for(done, 10.0, what="3 000 marks read")
    kept = len(marks(mlmond, rid))
    unmatched = health_counts(mlmond)["statsd_unmatched"] - before["statsd_unmatched"]
    assert kept + unmatched == 3000
    assert 1000 <= kept <= 1000 + 1000 * (time.monotonic() - t0 + elapsed) + 1, kept
    st, h = mlmond.get("/v1/health")
    assert h["overruns"] == 0, h


def test_a_span_from_a_mark_holds_the_timings_after_it(mlmond, agents):
    """Timings at about 200/s and a mark in the middle of a second: the span
    from the mark counts exactly the timings sent after it (op slices are 1 s:
    the mark cuts its run's slices where it is made)."""
    a = agents()
    rid = registered(mlmond, a)
    sent_after = None
    t_end = time.monotonic() + 3
    marked = False
    while time.monotonic() < t_end:
        a.unix(mlmond.statsd_path, ["step:5|ms"])
        if sent_after is not None:
            sent_after += 1
        # the mark half-way through a second, after 1 s of timings
        if not marked and time.monotonic() > t_end - 2 and 0.45 < time.time() % 1 < 0.55:
            st, body = mlmond.post(f"/v1/runs/{rid}/marks", {"label": "warmup-done"})
            assert st == 201, body
            marked, sent_after = True, 0
        time.sleep(0.005)
    assert marked
    st, body = mlmond.get(f"/v1/runs/{rid}/latency?since_mark=warmup-done")
    assert st == 200, body
    got = body["ops"]["step"]["count"]
    print(f"since the mark: {got} timings counted, {sent_after} sent")
    assert got == sent_after, (got, sent_after)
    out = mlmond.ctl("report", rid, "--since-mark", "warmup-done", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["latency"]["ops"]["step"]["count"] == sent_after

# SPDX-License-Identifier: MIT
"""Large answers: a list of runs of tens of MB, fetched by four clients in a
loop over TCP and the unix socket (and /metrics beside them), is never cut
off and keeps no one waiting: /v1/health and `mlmonctl list` answer within
0.5 s at p95 meanwhile. The ended runs come a page at a time behind a
cursor, a list's runs carry no gauges, and a user's ended runs past
[storage] ended_runs_per_uid are deleted, oldest first, while the kept ones
stay whole. The figures (answer bytes, health and list latency) are
printed."""

import http.client
import json
import multiprocessing
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import MLMONCTL, UnixHTTPConnection, wait_for

# 6 000 ended runs with a 128-byte name and 16 tags of the largest size: a
# list of about 26 MB
N_RUNS = 6000
NAME = "n" * 128
TAGS = {f"k{i:02d}" + "x" * 61: "v" * 128 for i in range(16)}
BIG_LIST = "/v1/runs?state=all&limit=10000"
LOAD_S = 12.0
BOUND_S = 0.5


def register_ended(d, pid, n, out):
    """Registers and unregisters pid n times over one kept-alive connection
    to the unix socket; appends the run ids to out."""
    c = UnixHTTPConnection(d.socket_path, timeout=30)
    try:
        for _ in range(n):
            c.request("POST", "/v1/runs", json.dumps({"pid": pid, "name": NAME, "tags": TAGS, "discover": False}))
            r = c.getresponse()
            body = json.loads(r.read())
            assert r.status == 201, body
            c.request("DELETE", f"/v1/runs/{body['id']}")
            r = c.getresponse()
            r.read()
            assert r.status == 200
            out.append(body["id"])
    finally:
        c.close()


@pytest.fixture(scope="module")
def scene(make_module_mlmond):
    """A daemon with N_RUNS ended runs (two processes registered and
    unregistered in turn, in two threads) and one running run."""
    d = make_module_mlmond()
    procs = [subprocess.Popen(["sleep", "1000"]) for _ in range(3)]
    try:
        ids = [[], []]
        threads = [threading.Thread(target=register_ended, args=(d, procs[i].pid, N_RUNS // 2, ids[i]))
                   for i in range(2)]
        t = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        ended = sorted(ids[0] + ids[1])
        assert len(ended) == N_RUNS, "a registration thread failed"
        running = d.register(procs[2].pid, name="still-running")["id"]
        print(f"\n{N_RUNS} runs registered and ended in {time.monotonic() - t:.1f} s")
        yield d, ended, running
    finally:
        for p in procs:
            p.kill()
            p.wait()


def fetch(port, socket_path, path, unix):
    """GET path on a fresh connection: (ok, bytes, what was wrong). ok: the
    body is as long as Content-Length says (or its chunks ended properly)
    and is JSON (or, for /metrics, text ending in a newline)."""
    c = UnixHTTPConnection(socket_path, timeout=60) if unix else http.client.HTTPConnection("127.0.0.1", port,
                                                                                               timeout=60)
    try:
        c.request("GET", path)
        r = c.getresponse()
        length = r.getheader("Content-Length")
        body = r.read()  # http.client raises IncompleteRead for a cut-off body, chunked or not
        if r.status != 200:
            return False, len(body), f"HTTP {r.status}"
        if length is not None and int(length) != len(body):
            return False, len(body), f"Content-Length {length}, {len(body)} bytes read"
        if path.startswith("/metrics"):
            return body.endswith(b"\n"), len(body), "/metrics does not end with a newline"
        doc = json.loads(body)
        return True, len(body), len(doc["runs"])
    except (OSError, http.client.HTTPException, ValueError) as e:
        return False, 0, repr(e)[:200]
    finally:
        c.close()


def loader(i, port, socket_path, path, unix, stop, results):
    """Fetches path in a loop until stop is set (at the lowest priority:
    the clients must not take the machine from the daemon); puts (i, the
    answers) on results."""
    os.nice(19)
    out = []
    while not stop.is_set():
        out.append(fetch(port, socket_path, path, unix))
        if path.startswith("/metrics"):
            time.sleep(0.1)  # a scraper, not a flood
    results.put((i, out))


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))]


def test_a_list_of_tens_of_mb_keeps_no_one_waiting_and_is_never_cut_off(scene, capsys):
    d, ended, running = scene
    ok, size, runs = fetch(d.port, d.socket_path, BIG_LIST, False)
    assert ok and runs == N_RUNS + 1, (ok, size, runs)
    assert size > 20e6, f"the list is {size} bytes"

    mp = multiprocessing.get_context("fork")
    stop, results = mp.Event(), mp.Queue()
    jobs = [(BIG_LIST, False), (BIG_LIST, True), (BIG_LIST, False), (BIG_LIST, True), ("/metrics", False)]
    procs = [mp.Process(target=loader, args=(i, d.port, d.socket_path, path, unix, stop, results))
             for i, (path, unix) in enumerate(jobs)]
    for p in procs:
        p.start()
    health, listing = [], []
    try:
        time.sleep(1.0)  # every loader has asked
        end = time.monotonic() + LOAD_S
        while time.monotonic() < end:
            t = time.monotonic()
            st, body = d.get("/v1/health")
            health.append(time.monotonic() - t)
            assert st == 200, body
            t = time.monotonic()
            r = subprocess.run([MLMONCTL, "--socket", d.socket_path, "list"], capture_output=True, timeout=30)
            listing.append(time.monotonic() - t)
            assert r.returncode == 0 and b"still-running" in r.stdout, r
            time.sleep(0.05)
    finally:
        stop.set()
        answers = [got for _, got in sorted(results.get(timeout=120) for _ in procs)]
        for p in procs:
            p.join(timeout=30)
    lists = [a for (path, _), got in zip(jobs, answers) if path == BIG_LIST for a in got]
    metrics = [a for (path, _), got in zip(jobs, answers) if path == "/metrics" for a in got]
    with capsys.disabled():  # the figures, in the test log whatever the outcome
        print(f"\nGET {BIG_LIST}: {size} bytes, {len(lists)} answers in {LOAD_S:.0f} s by 4 clients "
              f"(2 TCP, 2 unix socket), /metrics {len(metrics)} answers beside them")
        print(f"/v1/health: {len(health)} requests, p50 {pct(health, 0.5) * 1000:.0f} ms, "
              f"p95 {pct(health, 0.95) * 1000:.0f} ms, max {max(health) * 1000:.0f} ms")
        print(f"mlmonctl list: {len(listing)} runs of it, p50 {pct(listing, 0.5) * 1000:.0f} ms, "
              f"p95 {pct(listing, 0.95) * 1000:.0f} ms, max {max(listing) * 1000:.0f} ms")
    bad = [a for a in lists + metrics if not a[0]] + [a for a in lists if a[0] and a[2] != N_RUNS + 1]
    assert not bad, f"{len(bad)} of {len(lists) + len(metrics)} answers incomplete: {bad[:5]}"
    assert len(lists) >= 4, f"only {len(lists)} lists were fetched"
    assert pct(health, 0.95) <= BOUND_S, f"/v1/health p95 {pct(health, 0.95):.3f} s"
    assert pct(listing, 0.95) <= BOUND_S, f"mlmonctl list p95 {pct(listing, 0.95):.3f} s"


def test_ended_runs_come_a_page_at_a_time(scene):
    """state=all by default: 500 runs and the URL of the next page; the
    pages, followed, hold every run once, in id order; limit= and
    order=newest page too, and mlmonctl list --all follows the cursor."""
    d, ended, running = scene
    want = sorted(ended + [running])
    got, path, pages = [], "/v1/runs?state=all", 0
    while path:
        st, body = d.get(path)
        assert st == 200, (path, body)
        assert len(body["runs"]) == (500 if body["next"] else len(want) % 500), (path, len(body["runs"]))
        assert body["truncated"] == (body["next"] is not None)
        got += [r["id"] for r in body["runs"]]
        path, pages = body["next"], pages + 1
    assert got == want and pages == len(want) // 500 + 1

    st, body = d.get("/v1/runs?state=ended&order=newest&limit=7&name=" + NAME)
    assert [r["id"] for r in body["runs"]] == sorted(ended, reverse=True)[:7], body["next"]
    st, more = d.get(body["next"])
    assert [r["id"] for r in more["runs"]] == sorted(ended, reverse=True)[7:14]
    st, body = d.get("/v1/runs")  # the running runs: no page of their own (max_runs bounds them)
    assert [r["id"] for r in body["runs"]] == [running] and body["next"] is None
    for bad in ("limit=0", "limit=10001", "limit=x", "after=-1", "order=up", "state=over"):
        st, body = d.get("/v1/runs?" + bad)
        assert st == 400 and body["error"]["code"] == "bad_request", (bad, body)

    r = d.ctl("--json", "list", "--all", timeout=60)
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and [x["id"] for x in doc["runs"]] == want, r.stderr
    assert doc["next"] is None and doc["truncated"] is False
    r = d.ctl("list", "--all", timeout=60)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == len(want) + 1


def test_a_list_holds_no_gauges_a_run_does(make_mlmond, helpers):
    d = make_mlmond()
    h = helpers("busy", "5", "0")
    h.expect("ready")
    rid = d.register(h.pid)["id"]
    st, body = d.post(f"/v1/runs/{rid}/observations", [{"op": "queue_depth", "gauge": 12}])
    assert st == 202, body
    wait_for(lambda: d.run(rid)["gauges"].get("queue_depth", {}).get("value") == 12, 5, what="the gauge")
    for path in ("/v1/runs", "/v1/runs?state=all", "/v1/leaks"):
        st, body = d.get(path)
        assert st == 200 and all("gauges" not in r for r in body["runs"]), (path, body)
    st, body = d.delete(f"/v1/runs/{rid}")
    assert st == 200 and body["gauges"]["queue_depth"]["value"] == 12, body


def test_a_users_oldest_ended_runs_go_past_the_bound(make_mlmond, helpers):
    """ended_runs_per_uid = 3: of 6 ended runs the 3 newest stay, with their
    samples and marks; the running run stays; the others are gone (404)."""
    d = make_mlmond(interval="100ms")
    h = helpers("busy", "5", "0")
    h.expect("ready")
    ended = []
    for i in range(6):
        rid = d.register(h.pid, name=f"r{i}")["id"]
        d.wait_sample_after(rid, d.run(rid)["registered_ts"])
        st, body = d.post(f"/v1/runs/{rid}/marks", {"label": "warm"})
        assert st == 201, body
        assert d.delete(f"/v1/runs/{rid}")[0] == 200
        ended.append(rid)
    keeper = helpers("busy", "5", "0")
    keeper.expect("ready")
    running = d.register(keeper.pid)["id"]
    before = {rid: d.samples(rid) for rid in ended[3:]}
    assert all(before.values())

    d.write_config("[storage]\nended_runs_per_uid = 3\n")
    d.restart()
    wait_for(lambda: d.get(f"/v1/runs/{ended[2]}")[0] == 404, 20, what="the oldest ended runs to be deleted")
    for rid in ended[:3]:
        assert d.get(f"/v1/runs/{rid}")[0] == 404
        assert d.get(f"/v1/runs/{rid}/samples")[0] == 404
    for rid in ended[3:]:
        assert d.run(rid)["state"] == "unregistered"
        assert d.samples(rid) == before[rid]
        assert [m["label"] for m in d.get(f"/v1/runs/{rid}/marks")[1]["marks"]] == ["warm"]
    assert d.run(running)["state"] == "running"
    st, body = d.get("/v1/runs?state=all")
    assert [r["id"] for r in body["runs"]] == ended[3:] + [running]
    d.wait_log("retention: deleted 3 ended runs past ended_runs_per_uid")

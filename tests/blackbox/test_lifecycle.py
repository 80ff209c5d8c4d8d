# SPDX-License-Identifier: MIT
"""A run's life: exit detection, unregistering, and surviving a daemon that
was killed with SIGKILL (registrations, samples, database integrity)."""

import os
import signal
import sqlite3
import stat
import subprocess
import time

from conftest import as_user, needs, now_ms, wait_for


def states(mlmond, state="all"):
    st, body = mlmond.get(f"/v1/runs?state={state}")
    assert st == 200, body
    return {r["id"]: r for r in body["runs"]}


def test_exit_seen_within_two_intervals(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid, interval="500ms")
    assert run["state"] == "running" and run["ended_ts"] is None
    # let it settle into its sampling rhythm first
    mlmond.wait_sample_after(run["id"], run["registered_ts"])
    st, health = mlmond.get("/v1/health")
    active = health["runs_active"]

    t_kill = now_ms()
    t_mono = time.monotonic()
    h.proc.send_signal(signal.SIGKILL)  # not reaped yet: a zombie has exited too
    ended = wait_for(lambda: (lambda r: r if r["state"] == "exited" else None)(mlmond.run(run["id"])), 3.0,
                     what="state exited")
    seen_after = time.monotonic() - t_mono
    h.proc.wait()
    assert seen_after <= 1.0, f"exit seen after {seen_after:.2f} s (interval 500ms)"
    assert ended["ended_ts"] is not None
    assert t_kill - 5 <= ended["ended_ts"] <= t_kill + 1000, (t_kill, ended["ended_ts"])
    assert ended["summary"]["wall_time_s"] <= (ended["ended_ts"] - ended["registered_ts"]) / 1000 + 0.001
    assert run["id"] not in states(mlmond, "running")
    assert run["id"] in states(mlmond, "exited")
    st, health = mlmond.get("/v1/health")
    assert health["runs_active"] == active - 1
    # no more samples once ended
    n = ended["summary"]["samples"]
    time.sleep(0.6)
    again = mlmond.run(run["id"])
    assert again["summary"]["samples"] == n and again["state"] == "exited"
    assert len(mlmond.samples(run["id"])) == n
    # an ended run's windows end where its data ends
    st, tp = mlmond.get(f"/v1/runs/{run['id']}/throughput?window=1m")
    w = tp["windows"][0]
    assert st == 200 and w["samples"] == n and w["cpu_pct"] is not None, tp


def test_unregister_keeps_data(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid, interval="250ms", name="u", tags={"k": "v"}, discover=False)
    mlmond.wait_sample_after(run["id"], run["registered_ts"])
    st, body = mlmond.delete(f"/v1/runs/{run['id']}")
    assert st == 200, body
    assert body["state"] == "unregistered" and body["ended_ts"] is not None
    n = len(mlmond.samples(run["id"]))
    assert n >= 2
    time.sleep(0.6)  # two intervals: nothing more is sampled
    after = mlmond.run(run["id"])
    assert after["state"] == "unregistered" and after["summary"]["samples"] == n
    assert (after["name"], after["tags"]) == ("u", {"k": "v"})
    st, body = mlmond.delete(f"/v1/runs/{run['id']}")
    assert st == 409 and body["error"]["code"] == "conflict", body
    # the process can be registered again, as a new run
    again = mlmond.register(h.pid)
    assert again["id"] != run["id"]
    # its exit ends the new run, and leaves the unregistered one as it was
    h.kill(signal.SIGKILL)
    wait_for(lambda: mlmond.run(again["id"])["state"] == "exited", 2.0, what="the new run to end")
    final = mlmond.run(run["id"])
    assert (final["state"], final["ended_ts"]) == ("unregistered", after["ended_ts"]), final


def test_register_twice_is_a_conflict(mlmond, helpers):
    h = helpers("grow", 0)
    h.expect("ready")
    run = mlmond.register(h.pid)
    st, body = mlmond.post("/v1/runs", {"pid": h.pid})
    assert st == 409, body
    assert body["error"]["code"] == "conflict" and str(run["id"]) in body["error"]["message"], body


def test_restart_after_sigkill(mlmond, helpers):
    procs = [helpers("busy", 20, 0)] + [helpers("grow", 0) for _ in range(2)]
    for p in procs:
        p.expect("ready")
    runs = [mlmond.register(p.pid, interval="250ms") for p in procs]
    for r in runs:
        wait_for(lambda: mlmond.run(r["id"])["summary"]["samples"] >= 3, 3.0, what="3 samples")
    before = {r["id"]: mlmond.run(r["id"])["summary"]["samples"] for r in runs}
    cpu_before = mlmond.run(runs[0]["id"])["summary"]["cpu_time_s"]
    assert cpu_before > 0

    mlmond.kill9()
    killed = procs[2]
    killed.kill(signal.SIGKILL)  # dies (and is reaped) while nobody watches
    mlmond.start()

    st, health = mlmond.get("/v1/health")
    assert st == 200 and health["runs_active"] == 2, health
    by_id = states(mlmond)
    for r in runs[:2]:
        assert by_id[r["id"]]["state"] == "running", by_id[r["id"]]
    gone = by_id[runs[2]["id"]]
    assert gone["state"] == "exited", gone
    assert gone["ended_ts"] is not None and gone["ended_ts"] <= now_ms()
    frozen = mlmond.run(gone["id"])["summary"]["samples"]
    assert frozen >= before[gone["id"]]

    # sampling goes on where it stopped: more samples, same runs
    for r in runs[:2]:
        wait_for(lambda: mlmond.run(r["id"])["summary"]["samples"] >= before[r["id"]] + 3, 3.0,
                 what=f"new samples of run {r['id']}")
        s = mlmond.samples(r["id"])
        ts = [x["ts"] for x in s]
        assert ts == sorted(set(ts)), "samples out of order or repeated after the restart"
        assert len(s) == mlmond.run(r["id"])["summary"]["samples"]
    assert mlmond.run(gone["id"])["summary"]["samples"] == frozen
    # cumulative counters go on from the stored totals, not from zero
    busy = mlmond.run(runs[0]["id"])
    assert busy["summary"]["cpu_time_s"] > cpu_before and busy["latest"]["cpu_time_s"] > cpu_before, busy
    s = mlmond.samples(runs[0]["id"])
    cpu = [x["cpu_time_s"] for x in s]
    assert cpu == sorted(cpu), "cpu_time_s went backwards across the restart"

    with sqlite3.connect(f"file:{mlmond.db_path}?mode=ro", uri=True, timeout=5) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]

    # the new instance still sees exits at once
    t = time.monotonic()
    procs[0].kill(signal.SIGKILL)
    wait_for(lambda: mlmond.run(runs[0]["id"])["state"] == "exited", 2.0, what="exit after the restart")
    assert time.monotonic() - t <= 1.0


NOBODY = 65534
SU = "/usr/bin/su"


def proc_uids(pid):
    """(comm, real uid, effective uid) of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            st = dict(line.split(":", 1) for line in f.read().splitlines())
    except FileNotFoundError:
        return None
    uids = st["Uid"].split()
    return st["Name"].strip(), int(uids[0]), int(uids[1])


def test_run_ends_when_its_process_changes_credentials(mlmond):
    """A user registers their own process, which then execs setuid su: its
    /proc files are root's now, so the run ends with
    what was measured before, a mark and a log line saying why."""
    if os.geteuid() != 0:
        needs("root", "to act as another user")
    try:
        st = os.stat(SU)
    except FileNotFoundError:
        needs("setuid", f"no {SU}")
    if st.st_uid != 0 or not st.st_mode & stat.S_ISUID:
        needs("setuid", f"{SU} is not setuid root here")
    # a shell of uid 65534 that, told to, becomes su (which then waits for a
    # password on its stdin, a pipe that never gives one)
    p = subprocess.Popen(as_user(NOBODY) + ["/bin/sh", "-c", f"read go; exec {SU} root -c true"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: proc_uids(p.pid) == ("sh", NOBODY, NOBODY), 5.0, what="the shell of uid 65534")
        r = mlmond.ctl("register", p.pid, "--name", "mine", user=NOBODY)
        assert r.returncode == 0, r.stderr.decode()
        run_id = int(r.stdout.decode().strip())
        run = mlmond.wait_sample_after(run_id, mlmond.run(run_id)["registered_ts"])
        assert run["state"] == "running" and run["uid"] == NOBODY, run

        p.stdin.write(b"go\n")
        p.stdin.flush()
        ids = wait_for(lambda: (lambda u: u if u and u[0] == "su" else None)(proc_uids(p.pid)), 5.0,
                       what="the shell to exec su")
        if ids[2] != 0:
            needs("setuid", "a setuid exec does not raise privileges here (nosuid, no_new_privs?)")
        ended = wait_for(lambda: (lambda x: x if x["state"] != "running" else None)(mlmond.run(run_id)), 3.0,
                         what="the run to end")
        assert ended["state"] == "unregistered", ended
        st, marks = mlmond.get(f"/v1/runs/{run_id}/marks")
        assert st == 200 and [m["label"] for m in marks["marks"]] == ["the process changed credentials"], marks
        mlmond.wait_log(rf"run {run_id} \(pid {p.pid}\): the process changed credentials")
        # what was measured before is kept, nothing after
        n = ended["summary"]["samples"]
        assert n >= 1 and len(mlmond.samples(run_id)) == n
        time.sleep(0.6)
        assert mlmond.run(run_id)["summary"]["samples"] == n
        assert proc_uids(p.pid)[0] == "su", "su left early: the test proves nothing"
    finally:
        p.kill()
        p.wait()
        p.stdin.close()


def test_run_list_read_in_pages(make_mlmond):
    """GET /v1/runs reads the store a page of 32 runs at a time: 70 runs are
    each listed once, in id order; max_rows cuts the list, with truncated
    true only when runs were left out."""
    d = make_mlmond(config_text="[http]\nmax_rows = 50\n")
    procs = [subprocess.Popen(["sleep", "1000"]) for _ in range(70)]
    try:
        ids = [d.register(p.pid)["id"] for p in procs]
        st, body = d.get("/v1/runs")
        assert st == 200, body
        assert [r["id"] for r in body["runs"]] == ids[:50] and body["truncated"] is True
        for run_id in ids[:20]:
            assert d.delete(f"/v1/runs/{run_id}")[0] == 200
        st, body = d.get("/v1/runs")
        assert [r["id"] for r in body["runs"]] == ids[20:] and body["truncated"] is False
        st, body = d.get("/v1/runs?state=unregistered")
        assert [r["id"] for r in body["runs"]] == ids[:20] and body["truncated"] is False
        st, body = d.get("/v1/runs?state=all")
        assert [r["id"] for r in body["runs"]] == ids[:50] and body["truncated"] is True
        assert [r["state"] for r in body["runs"]] == ["unregistered"] * 20 + ["running"] * 30
    finally:
        for p in procs:
            p.kill()
            p.wait()

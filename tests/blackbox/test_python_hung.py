# SPDX-License-Identifier: MIT
"""A hung mlmond does not stall the job: with the daemon stopped (SIGSTOP)
after attach(), or behind a socket that accepts and never answers, marks,
profile() blocks and timers never wait for it, and what does ask it (the
profiler's figures, a query, a benchmark) waits for one timeout, after
which the circuit breaker answers at once, with one warning. Nothing is
lost on the way: once the daemon goes on, everything sent reaches the run."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

from test_python import env_for

# What the job does while the daemon does not answer, timing each part.
JOB = textwrap.dedent("""
    import json, logging, sys, time, mlmon
    logging.basicConfig()
    run = mlmon.attach(name="hung")
    print(json.dumps({"run": run.id}), flush=True)
    sys.stdin.readline()  # the daemon does not answer from here on
    t0 = time.monotonic()
    marks = [mlmon.mark(f"epoch-{i}") for i in range(5)]
    prof = mlmon.PerformanceProfiler()
    for _ in range(3):
        with prof.profile("block"):
            time.sleep(0.01)
    for _ in range(1000):
        with mlmon.timer("op"):
            pass
    loop_s = time.monotonic() - t0
    t1 = time.monotonic()
    m = prof.get_metrics()
    metrics_s = time.monotonic() - t1
    errors = []
    t2 = time.monotonic()
    for q in (run.latency, run.summary, mlmon.run().marks):
        try:
            q()
        except mlmon.Unavailable as e:
            errors.append(str(e))
    bench = mlmon.benchmark(time.sleep, 0.001, iterations=5, warmup=0)
    rest_s = time.monotonic() - t2
    print(json.dumps({"loop_s": loop_s, "metrics_s": metrics_s, "rest_s": rest_s, "job_s": time.monotonic() - t0,
                      "marks": [m is not None for m in marks], "wall": m.timing.wall_time_s,
                      "peak": m.memory.peak_ram_mb, "errors": errors, "bench": sorted(bench),
                      "dropped": mlmon.dropped()}), flush=True)
    sys.stdin.readline()  # the daemon answers again: what waited goes out at exit
""")


def start(d, **env):
    return subprocess.Popen([sys.executable, "-c", JOB], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env_for(d, **env))


def step(p, line="go"):
    p.stdin.write(line + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def check_job(out, stderr):
    assert out["loop_s"] < 3.0, out  # 5 marks, 3 profile() blocks, 1 000 timers
    # what asks the daemon: one timeout (1 s), then the breaker at once
    assert out["metrics_s"] < 2.5 and out["rest_s"] < 1.0, out
    assert out["job_s"] < 4.0, out
    assert len(out["errors"]) == 3
    assert out["wall"] > 0.03 and out["peak"] is None  # the block's own figures, not mlmond's
    assert len(out["bench"]) == 8  # computed in the process
    assert stderr.count("no more requests to it") == 1, stderr  # the breaker's warning, once


def test_a_stopped_daemon_does_not_stall_the_job(mlmond):
    p = start(mlmond)
    try:
        run_id = json.loads(p.stdout.readline())["run"]
        assert run_id is not None
        mlmond.signal(signal.SIGSTOP)
        try:
            out = step(p)
        finally:
            mlmond.signal(signal.SIGCONT)
        assert out["marks"] == [True] * 5 and out["dropped"] == 0, out  # waiting in the backlog
        p.stdin.write("go\n")
        p.stdin.close()
        assert p.wait(timeout=30) == 0
        stderr = p.stderr.read()
        check_job(out, stderr)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # nothing was lost: every line the job sent reached the run once mlmond went on
    st, lat = mlmond.get(f"/v1/runs/{run_id}/latency?window=5m")
    assert {k: v["count"] for k, v in lat["ops"].items() if not k.startswith("benchmark.")} == \
        {"op": 1000, "block": 3}, lat
    st, marks = mlmond.get(f"/v1/runs/{run_id}/marks")
    labels = [m["label"] for m in marks["marks"]]
    assert [x for x in labels if x.startswith("epoch-")] == [f"epoch-{i}" for i in range(5)]
    # (marks of one label that mlmond reads in one millisecond are one)
    assert {"block:start", "block:end"} <= set(labels), labels


class SilentListener:
    """A unix socket that accepts connections and never answers, beside a
    datagram socket that is never read."""

    def __init__(self, d):
        self.path = os.path.join(d, "silent.sock")
        self.statsd = os.path.join(d, "silent-statsd.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(64)
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dgram.bind(self.statsd)
        self.held = []
        self.stop = False
        self.thread = threading.Thread(target=self.accept, daemon=True)
        self.thread.start()

    def accept(self):
        self.srv.settimeout(0.1)
        while not self.stop:
            try:
                self.held.append(self.srv.accept()[0])
            except socket.timeout:
                pass

    def close(self):
        self.stop = True
        self.thread.join()
        for s in self.held + [self.srv, self.dgram]:
            s.close()


def test_a_socket_that_never_answers(tmpdir_0755):
    silent = SilentListener(tmpdir_0755)
    try:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", JOB], input="go\ngo\n", capture_output=True, text=True,
                           timeout=60, env=env_for(None, MLMON_SOCKET=silent.path,
                                                   MLMON_STATSD_SOCKET=silent.statsd))
        job_s = time.monotonic() - t0
    finally:
        silent.close()
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert json.loads(lines[0]) == {"run": None}  # attach(): one timeout, a detached run
    out = json.loads(lines[1])
    check_job(out, r.stderr)
    # the whole job: attach's timeout, the loop, the breaker's answers, and
    # at exit up to 1 s for the unread datagram queue
    assert job_s < 8.0, job_s

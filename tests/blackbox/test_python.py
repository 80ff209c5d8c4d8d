# SPDX-License-Identifier: MIT
"""The mlmon Python package (client/python) against the real daemon: real
scripts time real sleeps, register themselves, fork workers, allocate
memory, and read their figures back through the package; the daemon's
answers are checked against what the scripts measured themselves. And with
the daemon gone, stopped or restarted, the job never notices."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import MLMONCTL, ROOT, wait_for

PYTHONPATH = os.path.join(ROOT, "client", "python")
QUANTILE_REL = 0.01
# What a benchmark's timing around a call may add to the call's own timing.
OVERHEAD_MS = 0.2


def env_for(d, **extra):
    e = dict(os.environ)
    for k in ("MLMON_RUN_ID", "MLMON_URL", "MLMON_SOCKET", "MLMON_STATSD_SOCKET"):
        e.pop(k, None)
    e["PYTHONPATH"] = PYTHONPATH
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    if d is not None:
        e["MLMON_SOCKET"] = d.socket_path
        e["MLMON_STATSD_SOCKET"] = d.statsd_path
    e.update(extra)
    return e


def run_script(d, code, timeout=60, **extra):
    """Runs code in a fresh python3; returns the JSON object of its last
    stdout line. The script must exit 0."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=env_for(d, **extra), timeout=timeout)
    assert r.returncode == 0, f"script failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def exact_quantile(values, pct):
    s = sorted(values)
    return s[int(math.floor(pct / 100.0 * (len(s) - 1)))]


def check_quantiles(o, values, pcts=(50, 90, 99)):
    for p in pcts:
        want = exact_quantile(values, p)
        assert o[f"p{p}_ms"] == pytest.approx(want, rel=QUANTILE_REL), f"p{p}: {o[f'p{p}_ms']} vs {want}"


def test_timer_percentiles_are_the_ones_the_script_measured(mlmond):
    out, _ = run_script(mlmond, """
        import json, time, mlmon
        run = mlmon.attach(name="timed", interval="250ms")
        measured = []
        for i in range(120):
            with mlmon.timer("inference", category="model_inference") as t:
                time.sleep((1 + (i * 7) % 13) / 1000.0)
            measured.append(t.ms)

        @mlmon.timed(category="preprocessing")
        def preprocess():
            time.sleep(0.001)

        for _ in range(5):
            preprocess()
        mlmon.observe("bad name:with|chars", 2.5)
        mlmon.count("requests", 5)
        mlmon.gauge("queue", 7)
        while True:  # the daemon aggregates per 1-s slice: poll until it has them all
            lat = run.latency(window="5m")
            if lat["ops"].get("inference", {}).get("count") == 120 and len(lat["ops"]) == 3:
                break
            time.sleep(0.1)
        print(json.dumps({"run": run.id, "measured": measured, "latency": lat,
                          "throughput": run.throughput(window="5m"), "dropped": mlmon.dropped()}))
    """)
    run_id, measured, lat = out["run"], out["measured"], out["latency"]
    assert out["dropped"] == 0
    o = lat["ops"]["inference"]
    assert o["category"] == "model_inference"
    assert o["count"] == 120
    assert o["min_ms"] == pytest.approx(min(measured), rel=1e-8)
    assert o["max_ms"] == pytest.approx(max(measured), rel=1e-8)
    assert o["mean_ms"] == pytest.approx(sum(measured) / 120, rel=1e-6)
    check_quantiles(o, measured)
    assert set(lat["ops"]) == {"inference", "preprocess", "bad_name_with_chars"}
    assert lat["ops"]["preprocess"]["category"] == "preprocessing"
    assert lat["ops"]["preprocess"]["count"] == 5
    assert out["throughput"]["windows"][0]["ops"]["requests"]["count"] == 5
    # the same figures straight from the API
    st, direct = mlmond.get(f"/v1/runs/{run_id}/latency?window=5m&op=inference")
    assert st == 200 and direct["ops"]["inference"]["count"] == 120
    st, series = mlmond.get(f"/v1/runs/{run_id}/samples")
    assert [g["value"] for g in series["gauges"] if g["name"] == "queue"][-1:] == [7]


def test_non_ascii_names_fit_the_datagrams(mlmond):
    """Batches are counted in characters; a batch of long UTF-8 names is
    more bytes than characters, and must still go in datagrams mlmond
    takes (16 KiB at most)."""
    out, _ = run_script(mlmond, """
        import json, mlmon
        run = mlmon.attach(name="utf8")
        op = "推理" * 30                  # 180 bytes of UTF-8, 60 characters
        for _ in range(300):
            mlmon.observe(op, 2.0, category="模型" * 10)
        o = run.wait_for(op, 300)
        print(json.dumps({"count": o["count"], "category": o["category"], "dropped": mlmon.dropped()}))
    """)
    assert out == {"count": 300, "category": "模型" * 10, "dropped": 0}
    st, h = mlmond.get("/v1/health")
    assert h["statsd_malformed"] == 0


def test_a_job_of_mlmonctl_run_uses_its_run(mlmond):
    code = textwrap.dedent("""
        import json, os, time, mlmon
        run = mlmon.attach(name="ignored: the run exists")
        with mlmon.timer("step"):
            time.sleep(0.01)
        mlmon.mark("done")
        print(json.dumps({"run": run.id, "env": os.environ["MLMON_RUN_ID"], "marks": run.marks(),
                          "step": run.wait_for("step", 1)["count"]}))
    """)
    r = mlmond.ctl("run", "--name", "job", "--", sys.executable, "-c", code,
                   env={"PYTHONPATH": PYTHONPATH})
    assert r.returncode == 0, r.stderr.decode()
    out = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert str(out["run"]) == out["env"] and out["step"] == 1
    assert [m["label"] for m in out["marks"]] == ["done"]
    st, runs = mlmond.get("/v1/runs?state=all")
    assert [(x["id"], x["name"]) for x in runs["runs"]] == [(out["run"], "job")]


def test_profiler_peak_ram_is_the_processs_high_water_mark(mlmond):
    out, _ = run_script(mlmond, """
        import json, time, mlmon
        mlmon.attach(name="alloc", interval="100ms")
        profiler = mlmon.PerformanceProfiler(memory_interval=0.1)
        with profiler.profile("load"):
            block = b"\\x01" * (200 << 20)   # 200 MiB, every page written
            time.sleep(0.6)
            del block
        time.sleep(0.3)
        m = profiler.get_metrics("load")
        with open("/proc/self/status") as f:
            hwm_kib = int(re.search(r"VmHWM:\\s+(\\d+) kB", f.read()).group(1))
        print(json.dumps({"peak": m.memory.peak_ram_mb, "final": m.memory.final_ram_mb,
                          "gpu": m.memory.peak_gpu_mb, "total_s": m.timing.total_s, "hwm_mib": hwm_kib / 1024,
                          "co2": m.carbon.co2_g, "breakdown": profiler.get_timing_stats(),
                          "current": profiler.get_current_memory()}))
    """.replace("import json, time, mlmon", "import json, re, time, mlmon"))
    assert out["peak"] == pytest.approx(out["hwm_mib"], rel=0.02)
    assert out["final"] < out["peak"] - 150
    assert out["gpu"] is None and out["co2"] is None  # no GPU here; carbon not asked for
    assert 0.6 <= out["total_s"] < 5
    b = out["breakdown"]["load"]
    assert b["count"] == 1 and b["total_s"] == pytest.approx(out["total_s"], rel=1e-6) and b["share_pct"] == pytest.approx(100.0)
    assert out["current"] < out["peak"] - 150


def test_profiler_refuses_what_it_cannot_do():
    out, _ = run_script(None, """
        import json, mlmon
        msgs = []
        for kw in ("enable_line_profiling",):
            try:
                mlmon.PerformanceProfiler(**{kw: True})
            except NotImplementedError as e:
                msgs.append(str(e))
        mlmon.PerformanceProfiler(detailed_memory=True, device="cuda:0", output_dir="/nonexistent")
        print(json.dumps(msgs))
    """)
    assert len(out) == 1 and all(m.startswith("mlmon: ") for m in out)


def test_benchmark_gives_the_figures_of_the_calls_it_made(mlmond):
    out, _ = run_script(mlmond, """
        import json, time, mlmon
        own = []
        sleeps = [0.001, 0.002, 0.003, 0.005, 0.008]

        def step(k):
            t0 = time.perf_counter()
            time.sleep(0.1 if len(own) < k else sleeps[len(own) % 5])  # the warm-up is slow
            own.append((time.perf_counter() - t0) * 1000.0)

        mlmon.attach(name="bench")
        first = mlmon.benchmark(step, 3, iterations=50, warmup=3)
        one = own[3:]
        own.clear()
        second = mlmon.benchmark(step, 2, iterations=40, warmup=2)
        print(json.dumps({"first": first, "one": one, "second": second, "two": own[2:]}))
    """)
    for res, calls in ((out["first"], out["one"]), (out["second"], out["two"])):
        assert set(res) == {"mean_ms", "std_ms", "min_ms", "max_ms", "p50_ms", "p90_ms", "p99_ms", "throughput_fps"}
        # the benchmark times the call around step(), which times itself
        # inside: they differ by a call's overhead, a few microseconds (more
        # where the machine is busy enough to preempt it in between)
        def near(got, want):
            return got == pytest.approx(want, rel=QUANTILE_REL) or want <= got <= want + OVERHEAD_MS

        assert near(res["mean_ms"], sum(calls) / len(calls))
        assert near(res["min_ms"], min(calls)) and near(res["max_ms"], max(calls))
        for p in (50, 90, 99):
            assert near(res[f"p{p}_ms"], exact_quantile(calls, p)), (p, res, sorted(calls))
        assert res["max_ms"] < 90, "the warm-up calls (100 ms) were counted"
        mean = sum(calls) / len(calls)
        std = math.sqrt(sum((c - mean) ** 2 for c in calls) / len(calls))
        assert res["std_ms"] == pytest.approx(std, rel=0.05, abs=OVERHEAD_MS)
        assert res["throughput_fps"] == pytest.approx(1000.0 / res["mean_ms"])


def test_forked_workers_count_for_the_parents_run(mlmond):
    out, _ = run_script(mlmond, """
        import json, multiprocessing, os, sys, time, mlmon
        run = mlmon.attach(name="loader")

        def worker(n):
            for _ in range(n):
                with mlmon.timer("load_batch", category="data_loading"):
                    time.sleep(0.001)
            # a multiprocessing worker leaves with os._exit(): no atexit

        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=worker, args=(n,)) for n in (20, 30)]
        for p in procs:
            p.start()
        pid = os.fork()
        if pid == 0:  # a bare fork that exits normally (atexit)
            worker(7)
            sys.exit(0)
        os.waitpid(pid, 0)
        for p in procs:
            p.join()
        with mlmon.timer("step"):
            pass
        while run.latency(op="load_batch")["ops"].get("load_batch", {}).get("count", 0) < 57:
            time.sleep(0.1)
        print(json.dumps({"run": run.id, "lat": run.latency(op="load_batch"),
                          "codes": [p.exitcode for p in procs]}))
    """)
    assert out["codes"] == [0, 0]
    assert out["lat"]["ops"]["load_batch"]["count"] == 57
    st, runs = mlmond.get("/v1/runs?state=all")
    assert [r["id"] for r in runs["runs"]] == [out["run"]], "a worker got a run of its own"


def test_no_daemon_breaks_nothing(tmpdir_0755):
    gone = os.path.join(tmpdir_0755, "nothing-here")
    out, err = run_script(None, """
        import json, logging, time, mlmon
        logging.basicConfig()
        run = mlmon.attach(name="orphan")
        t0 = time.monotonic()
        for i in range(20000):
            with mlmon.timer("inference"):
                pass
            mlmon.observe("x", 1.0)
            mlmon.count("n")
            mlmon.gauge("g", -i)
        mlmon.observe("x", -1)          # out of bounds: dropped, not raised
        mlmon.observe("x", "nonsense")
        marked = mlmon.mark("warmup-done")
        prof = mlmon.PerformanceProfiler()
        with prof.profile("step"):
            pass
        bench = mlmon.benchmark(time.sleep, 0.001, iterations=5, warmup=1)
        errors = []
        for q in (lambda: run.latency(), lambda: run.summary(),
                  lambda: run.check_sla("inference"), lambda: run.report()):
            try:
                q()
            except mlmon.Unavailable as e:
                errors.append(str(e))
        mlmon.flush()
        partial = prof.get_metrics("step")  # what the process measured itself, without mlmond's figures
        print(json.dumps({"id": run.id, "marked": marked, "dropped": mlmon.dropped(), "errors": errors,
                          "partial": [partial.timing.count, partial.memory.peak_ram_mb],
                          "bench_n": sorted(bench), "current": mlmon.run() is run}))
    """, MLMON_SOCKET=gone, MLMON_STATSD_SOCKET=gone + ".statsd")
    assert out["id"] is None and out["marked"] is None and out["current"]
    assert len(out["errors"]) == 4 and out["partial"] == [1, None]
    assert out["dropped"] >= 80000
    assert len(out["bench_n"]) == 8
    # one warning per kind of trouble, not one per line
    assert len(re.findall(r"being dropped", err)) == 1, err
    assert len(err.splitlines()) <= 5, err


def test_a_signal_handler_may_time_too(mlmond):
    """A handler runs on the main thread between two bytecodes, maybe in
    the middle of a timing call: it must not wait for itself."""
    out, _ = run_script(mlmond, """
        import json, signal, time, mlmon
        run = mlmon.attach(name="signals")
        handled = 0

        def handler(*_):
            global handled
            handled += 1
            with mlmon.timer("in_handler"):
                pass

        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < 1.0:
            mlmon.observe("main", 1.0)
            n += 1
        signal.setitimer(signal.ITIMER_REAL, 0)
        print(json.dumps({"handled": handled, "n": n}))
    """, timeout=30)
    assert out["handled"] > 100 and out["n"] > 1000


def test_a_stopped_then_restarted_daemon_is_not_the_jobs_problem(mlmond):
    """SIGSTOP: the socket's queue fills, sends would block: lines wait in
    the bounded backlog, then are dropped and counted; the job runs on. A
    restart: the run survives it and the next lines land on it."""
    code = textwrap.dedent("""
        import json, sys, time, mlmon
        run = mlmon.attach(name="survivor")
        def phase(n):
            worst = 0.0
            for _ in range(n):
                t0 = time.monotonic()
                mlmon.observe("step", 1.5)
                worst = max(worst, time.monotonic() - t0)
            mlmon.flush()
            return worst
        print(json.dumps({"run": run.id}), flush=True)
        sys.stdin.readline()
        worst = phase(300000)            # daemon stopped: 300 000 lines, ~10 MB
        print(json.dumps({"worst_s": worst, "dropped": mlmon.dropped()}), flush=True)
        sys.stdin.readline()
        mlmon.mark("after-restart")      # daemon restarted
        phase(20)
        while run.latency(since_mark="after-restart")["ops"].get("step", {}).get("count", 0) < 20:
            time.sleep(0.1)
        print(json.dumps({"count": run.latency(since_mark="after-restart")["ops"]["step"]["count"]}), flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env_for(mlmond))
    try:
        run_id = json.loads(p.stdout.readline())["run"]
        assert run_id is not None
        mlmond.signal(signal.SIGSTOP)
        try:
            p.stdin.write("go\n")
            p.stdin.flush()
            down = json.loads(p.stdout.readline())
        finally:
            mlmond.signal(signal.SIGCONT)
        assert down["dropped"] > 0
        assert down["worst_s"] < 0.5  # no call waited for the daemon
        mlmond.restart()
        p.stdin.write("go\n")
        p.stdin.flush()
        after = json.loads(p.stdout.readline())
        assert after["count"] >= 20
        assert p.wait(timeout=30) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_the_last_lines_wait_at_exit_for_a_daemon_that_was_busy(mlmond):
    """At exit, datagrams the full queue refused are sent once there is
    room (within a second), not lost."""
    code = textwrap.dedent("""
        import atexit, json, sys, mlmon
        atexit.register(lambda: print("exiting", flush=True))  # runs before mlmon's (last in, first out)
        run = mlmon.attach(name="exiting")
        print(json.dumps({"run": run.id}), flush=True)
        sys.stdin.readline()
        for _ in range(20000):          # some 80 datagrams: the queue holds 10
            mlmon.observe("last", 1.0)
        print(json.dumps({"dropped": mlmon.dropped()}), flush=True)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env_for(mlmond))
    try:
        run_id = json.loads(p.stdout.readline())["run"]
        mlmond.signal(signal.SIGSTOP)
        try:
            p.stdin.write("go\n")
            p.stdin.flush()
            assert json.loads(p.stdout.readline())["dropped"] == 0  # all in the backlog
            # its exit has begun: the job's own atexit handler, registered
            # after mlmon's, runs first and says so; mlmon's runs next
            assert p.stdout.readline().strip() == "exiting"
            # ... and waits for room instead of leaving its lines behind
            time.sleep(0.2)
            assert p.poll() is None, "the job exited while mlmond was stopped"
        finally:
            mlmond.signal(signal.SIGCONT)
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()

    def arrived():
        st, lat = mlmond.get(f"/v1/runs/{run_id}/latency?window=5m&op=last")
        return lat["ops"].get("last", {}).get("count") == 20000
    wait_for(arrived, 10, what="the 20 000 lines")


# 100 timings, 1..100 ms: p95 is the value of rank floor(0.95 * 99) = 94,
# 95 ms; p50 is 50 ms.
SLA_SCRIPT = """
    import json, time, mlmon
    run = mlmon.attach(name="sla")
    for v in range(1, 101):
        mlmon.observe("inference", float(v))
    while run.latency(op="inference")["ops"].get("inference", {}).get("count") != 100:
        time.sleep(0.1)
    print(json.dumps({"run": run.id, "p95_ok": run.check_sla("inference", 96, 95),
                      "p95_bad": run.check_sla("inference", 90, 95),
                      "p50_ok": run.check_sla("inference", target_latency_ms=51, percentile=50),
                      "none": run.check_sla("missing", 10, 95)}))
"""


def check_sla_answers(out):
    assert out["p95_ok"] is True and out["p95_bad"] is False and out["p50_ok"] is True
    assert out["none"] is None


def test_check_sla_over_the_latency_percentiles(mlmond):
    """Whatever the daemon: on one without slo= (400 for an unknown
    parameter) check_sla computes from p<percentile>_ms."""
    out, _ = run_script(mlmond, SLA_SCRIPT)
    check_sla_answers(out)


def test_check_sla_takes_the_daemons_slo_answer(mlmond):
    out, _ = run_script(mlmond, SLA_SCRIPT)
    r = mlmond.request("GET", f"/v1/runs/{out['run']}/latency?window=5m&op=inference&q=95&slo=inference:96ms@95")
    assert r.status == 200 and r.json["slo"][0]["met"] is True, (r.status, r.body)
    check_sla_answers(out)


def test_report_is_mlmonctls_table(mlmond):
    code = """
        import json, time, mlmon
        run = mlmon.attach(name="rep")
        for v in (3.0, 4.0, 5.0):
            mlmon.observe("inference", v, category="model_inference")
        mlmon.observe("load", 4.0, category="data")
        while run.latency(op="inference")["ops"].get("inference", {}).get("count") != 3 or \
                "load" not in run.latency()["ops"]:
            time.sleep(0.1)
        print(json.dumps({"run": run.id, "text": run.report()}))
    """
    with_ctl, _ = run_script(mlmond, code, PATH=os.path.dirname(MLMONCTL) + ":/usr/bin:/bin")
    r = mlmond.ctl("report", with_ctl["run"])
    assert r.returncode == 0
    # the run has exited since: its summary moved, its table of ops did not
    def table(text):
        return [line for line in text.splitlines() if line.startswith("  inference ")]

    assert len(table(with_ctl["text"])) == 1 and table(with_ctl["text"]) == table(r.stdout.decode())
    assert with_ctl["text"].startswith(f"run {with_ctl['run']} (rep)")
    alone, _ = run_script(mlmond, code, PATH="/usr/bin:/bin")
    assert "category model_inference" in alone["text"] and "inference" in alone["text"]
    # without mlmonctl too, a share is of all the ops' time: 12 and 4 of 16 ms
    shares = {line.split()[0]: line.split()[-1] for line in alone["text"].splitlines()
              if line.startswith(("  inference ", "  load "))}
    assert shares == {"inference": "75.0%", "load": "25.0%"}, alone["text"]


def test_the_examples_in_the_python_doc_run(mlmond):
    with open(os.path.join(ROOT, "doc", "python.md")) as f:
        text = f.read()
    blocks = re.findall(r"<!-- example -->\s*```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 3
    for code in blocks:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env_for(mlmond), timeout=60)
        assert r.returncode == 0, f"example failed:\n{code}\n{r.stdout}\n{r.stderr}"

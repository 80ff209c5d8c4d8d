# SPDX-License-Identifier: MIT
"""The lines a job lost while mlmond was away are told to its run once
mlmond is back: the gauge mlmon.dropped, summed over the run's processes,
in the run object, in `mlmonctl show` and in `mlmonctl report`."""

import json
import re
import subprocess
import sys
import textwrap

from test_python import env_for

JOB = textwrap.dedent("""
    import json, os, sys, mlmon
    run = mlmon.attach(name="lossy")
    print(json.dumps({"run": run.id}), flush=True)
    sys.stdin.readline()  # mlmond is gone
    for _ in range(700):
        mlmon.observe("step", 1.0)
    mlmon.flush()
    back_r, back_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a worker loses its own lines
        for _ in range(42):
            mlmon.observe("load", 2.0)
        mlmon.flush()
        os.read(back_r, 1)  # mlmond is back
        mlmon.observe("load", 2.0)
        mlmon.flush()
        os.write(res_w, str(mlmon.dropped()).encode())
        os._exit(0)
    os.waitpid(pid, os.WNOHANG)
    lost = mlmon.dropped()
    print(json.dumps({"dropped": lost}), flush=True)
    sys.stdin.readline()  # mlmond is back
    os.write(back_w, b"x")
    child = int(os.read(res_r, 100))
    os.waitpid(pid, 0)
    for _ in range(5):
        mlmon.observe("step", 1.0)
    o = run.wait_for("step", 5)
    print(json.dumps({"dropped": lost, "child": child, "count": o["count"]}), flush=True)
""")


def test_lines_lost_while_mlmond_was_away_are_counted_on_the_run(mlmond):
    p = subprocess.Popen([sys.executable, "-c", JOB], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env_for(mlmond))
    try:
        run_id = json.loads(p.stdout.readline())["run"]
        mlmond.stop()  # its sockets are gone
        p.stdin.write("go\n")
        p.stdin.flush()
        assert json.loads(p.stdout.readline())["dropped"] == 700
        mlmond.start()  # the run goes on: its process is alive
        p.stdin.write("go\n")
        p.stdin.flush()
        out = json.loads(p.stdout.readline())
        assert p.wait(timeout=30) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert out == {"dropped": 700, "child": 42, "count": 5}
    run = mlmond.run(run_id)
    assert run["gauges"]["mlmon.dropped"]["value"] == 742, run["gauges"]
    show = mlmond.ctl("show", run_id).stdout.decode()
    assert re.search(r"^ +mlmon\.dropped +742 ", show, re.M), show
    report = mlmond.ctl("report", run_id).stdout.decode()
    assert re.search(r"^ +mlmon\.dropped +742 ", report, re.M), report

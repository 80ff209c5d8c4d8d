# SPDX-License-Identifier: MIT
"""A tree run counts only what its owner may see: for a run whose process
is not root's, a descendant that is another user's (a setuid program such as
passwd or su, waiting for its user's keystrokes) or that is not dumpable is
left out, with what it started, and the run says how many and why. Its io
never counts, so the run's figures (anyone's to read over the TCP API)
cannot time the keystrokes it reads."""

import subprocess
import sys

from conftest import as_user, wait_for

NOBODY = 65534

# As nobody: a plain worker, passwd (setuid root) waiting on its stdin, and
# a worker that made itself non-dumpable; prints their pids.
TREE = r"""
import ctypes, os, subprocess, sys, time
libc = ctypes.CDLL(None)
plain = subprocess.Popen(["sleep", "60"])
setuid = subprocess.Popen(["passwd"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    libc.prctl(4, 0)  # PR_SET_DUMPABLE 0
    os.write(w, b"x")
    time.sleep(60)
    os._exit(0)
os.read(r, 1)
print(plain.pid, setuid.pid, pid, flush=True)
sys.stdin.read()
for p in (plain, setuid):
    p.kill()
os.kill(pid, 9)
"""


def uid_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return [int(x) for x in next(l for l in f if l.startswith("Uid:")).split()[1:]]


def test_another_users_and_undumpable_children_are_left_out(mlmond):
    p = subprocess.Popen(as_user(NOBODY) + [sys.executable, "-c", TREE], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        plain, setuid, undumpable = (int(x) for x in p.stdout.readline().split())
        # passwd is root's (effective uid 0) while it waits for the password
        wait_for(lambda: uid_of(setuid)[1] == 0, 5, what="passwd to run setuid")
        r = mlmond.ctl("register", p.pid, "--children", user=NOBODY)
        assert r.returncode == 0, r.stderr
        run_id = int(r.stdout.decode().strip())
        run = wait_for(lambda: (lambda x: x if x["latest"] and x["latest"]["processes"] else None)(mlmond.run(run_id)),
                       5, what="a sample")
        assert run["latest"]["processes"] == 2, run["latest"]  # the parent and the plain worker
        left = run["processes_left_out"]
        assert left["count"] == 2 and "not dumpable" in left["reason"], left
        show = mlmond.ctl("show", run_id)
        assert show.returncode == 0 and b"left out:" in show.stdout, show.stdout.decode()
        # a run of one process says nothing of it
        solo = mlmond.ctl("register", plain, user=NOBODY)
        assert solo.returncode == 0, solo.stderr
        assert mlmond.run(int(solo.stdout.decode()))["processes_left_out"] is None
    finally:
        p.stdin.close()
        p.wait(timeout=10)

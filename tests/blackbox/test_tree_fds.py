# SPDX-License-Identifier: MIT
"""A tree's members are read through files mlmond keeps open from one
sample to the next, each bound to its process: a member that leaves has
them closed, and a member that starts a thread and forks from it still has
that child counted."""

import os
import resource
import subprocess
import sys
import time

from conftest import now_ms, wait_for

# a single-threaded parent with one child; on "thread" it forks a second
# child from a new thread (listed in that thread's children file only)
PARENT = r"""
import subprocess, sys, threading
kids = [subprocess.Popen(["sleep", "1000"]) for _ in range(3)]
print("ready", *[k.pid for k in kids], flush=True)
sys.stdin.readline()
def spawn():
    kids.append(subprocess.Popen(["sleep", "1000"]))
    print("spawned", kids[-1].pid, flush=True)
    sys.stdin.readline()
threading.Thread(target=spawn).start()
sys.stdin.readline()
"""


def proc_links(pid):
    """The targets of pid's fds that are files under /proc."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith("/proc/"):
            out.append(target)
    return out


def kept_of(daemon_pid, pid):
    return [t for t in proc_links(daemon_pid) if t.startswith(f"/proc/{pid}/")]


def test_tree_files_kept_closed_and_thread_children(mlmond):
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        words = parent.stdout.readline().split()
        assert words[0] == "ready", words
        kids = [int(w) for w in words[1:]]
        r = mlmond.ctl("register", parent.pid, "--children")
        assert r.returncode == 0, r.stderr
        run_id = int(r.stdout.decode().strip())
        mlmond.wait_sample_after(run_id, now_ms() + 600)
        assert mlmond.run(run_id)["latest"]["processes"] == 4

        # every child's statm is read through a file kept open
        for k in kids:
            assert f"/proc/{k}/statm" in kept_of(mlmond.proc.pid, k), proc_links(mlmond.proc.pid)

        # a child that left has its files closed
        gone = kids[0]
        os.kill(gone, 9)
        wait_for(lambda: mlmond.run(run_id)["latest"]["processes"] == 3, 5, what="3 processes")
        mlmond.wait_sample_after(run_id, now_ms() + 300)
        assert kept_of(mlmond.proc.pid, gone) == [], proc_links(mlmond.proc.pid)

        # the parent starts a thread, which forks: that child is found
        parent.stdin.write("thread\n")
        parent.stdin.flush()
        words = parent.stdout.readline().split()
        assert words[0] == "spawned", words
        kids.append(int(words[1]))
        t0 = time.monotonic()
        wait_for(lambda: mlmond.run(run_id)["latest"]["processes"] == 4, 5, what="the thread's child")
        assert time.monotonic() - t0 < 5
    finally:
        parent.kill()
        parent.wait()
        for k in kids:
            try:
                os.kill(k, 9)
            except ProcessLookupError:
                pass


# writes 1 MiB when told (a line on stdin), then waits
WRITER = """
import sys
sys.stdin.readline()
with open(sys.argv[1], "wb") as f:
    f.write(b"x" * (1 << 20))
sys.stdin.readline()
"""


def fd_numbers(daemon_pid, prefix):
    """{target: fd number} of daemon_pid's fds whose targets start with prefix."""
    out = {}
    for fd in os.listdir(f"/proc/{daemon_pid}/fd"):
        try:
            target = os.readlink(f"/proc/{daemon_pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith(prefix):
            out[target] = int(fd)
    return out


def test_io_opened_by_name_near_the_fd_limit(mlmond, tmp_path):
    """A run's io file is kept open only below three quarters of the
    open-files limit: past it a run takes 4 fds, not 5, and its I/O is still
    measured (the file is opened by name when it is read)."""
    daemon = mlmond.proc.pid
    soft, hard = resource.prlimit(daemon, resource.RLIMIT_NOFILE)
    limit = max(int(fd) for fd in os.listdir(f"/proc/{daemon}/fd")) + 40
    below = limit // 4 * 3
    resource.prlimit(daemon, resource.RLIMIT_NOFILE, (limit, hard))
    procs, runs, past = [], [], None
    try:
        for i in range(limit // 4):
            p = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / f"w{i}")], stdin=subprocess.PIPE,
                                 text=True)
            procs.append(p)
            runs.append((p, mlmond.register(p.pid)["id"]))
            kept = fd_numbers(daemon, f"/proc/{p.pid}/")
            if kept[f"/proc/{p.pid}/stat"] >= below:
                past = runs[-1]
                break
        assert past, f"no run's files reached fd {below}"
        for p, _ in runs:
            kept = fd_numbers(daemon, f"/proc/{p.pid}/")
            io = kept.get(f"/proc/{p.pid}/io")
            assert io is None or io < below, (kept, below)
        p, run_id = past
        assert set(fd_numbers(daemon, f"/proc/{p.pid}/")) == {f"/proc/{p.pid}/stat", f"/proc/{p.pid}/statm"}
        assert f"/proc/{runs[0][0].pid}/io" in fd_numbers(daemon, f"/proc/{runs[0][0].pid}/")

        p.stdin.write("write\n")
        p.stdin.flush()

        def written():
            latest = mlmond.run(run_id)["latest"]
            return latest and (latest["wchar_bytes"] or 0) >= 1 << 20
        wait_for(written, 5, what="1 MiB written, read through io opened by name")
    finally:
        resource.prlimit(daemon, resource.RLIMIT_NOFILE, (soft, hard))
        for p in procs:
            p.kill()
            p.wait()

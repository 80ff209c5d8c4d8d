#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Cost per watched process: mlmond's CPU per pid-sample and its memory per
run, at one or more N, against pidstat -u -r -d on the same pids in the same
window.

usage: tests/bench/cost.py [-n N[,N...]] [-d SECONDS] [-i INTERVAL] [-t K]
                           [-p] [-w] [-b] [-m MLMOND] [--tmp DIR] [--late SECONDS]
                           [--idle SECONDS]

  -n N,...     processes to watch, one measurement per N (default 1000)
  -d SECONDS   the measured window (default 20)
  -i INTERVAL  the sampling interval of every run (default 1s)
  -t K         register trees of K processes (a parent and K-1 children,
               "children": true) instead of single processes: N/K runs; the
               figure per pid-sample then counts every process of a tree
  -p           perf record mlmond in the window and print where its CPU
               goes by library, with SQLite's share per stored sample
  -w           load the HTTP API in the window with wrk -c32 -t2 (GET
               /v1/runs and /v1/health in turn)
  --late S     then leave mlmond running S more seconds, so that every
               leak window is full, and print its RSS again
  --idle S     first measure mlmond's CPU for S seconds with no run, then
               with the first run alone (default 10; 0: not), and print the
               cost of each further process: the CPU less that of one run,
               per pid-sample of the other runs (what a namespace's net/dev,
               the host's files and the commit cost is paid once)
  -b           with each RSS figure, where mlmond's resident memory lies
               (/proc/PID/smaps): the brk heap, other anonymous mappings
               (malloc's arenas and large blocks, stacks), and files
  -m MLMOND    the binary (default build-bench, else build under the tree)

Figures, per N: mlmond's CPU (utime+stime and schedstat) per pid-sample,
pidstat's per pid-sample, their ratio, the anonymous memory per run (RssAnon
after registration and at the end, less RssAnon before it, over the runs;
and the same over the runs after the first, less RssAnon once the first run
alone was registered and sampled: the first registration allocates things
once), VmRSS, the ticks and overruns of the window, and how late the samples
were: each run's sample times less its schedule (the k-th sample one
interval after the k-1-th), less the smallest such offset of that run in
the window, the median, p99 and maximum over all samples, and how many
samples were taken of those due (a tick that overran skips some). Use a
debugoptimized build.
"""
import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from register import UnixConnection  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """utime+stime of pid, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def breakdown(pid):
    """Resident KiB of pid by kind of mapping: the brk heap, the other
    anonymous ones (the largest three named by size), files."""
    heap = files = 0
    anon = []
    name, kib = None, 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else ""
            elif head[0] == "Rss:":
                kib = int(head[1])
                if name == "[heap]":
                    heap += kib
                elif name == "" or name.startswith("[stack") or name.startswith("[anon"):
                    anon.append(kib)
                elif not name.startswith("["):
                    files += kib
    anon.sort(reverse=True)
    return (f"[heap] {heap} KiB, other anonymous {sum(anon)} KiB in {len(anon)} mappings "
            f"(largest {', '.join(map(str, anon[:3]))}), files {files} KiB")


def spawn(n, tree):
    """n sleeping processes, as n/tree trees when tree > 1: (the processes
    to register, every pid, what to end at the end)."""
    if tree <= 1:
        procs = [subprocess.Popen(["sleep", "100000"]) for _ in range(n)]
        return [p.pid for p in procs], [p.pid for p in procs], procs
    roots, allp = [], []
    script = 'for i in $(seq $1); do sleep 100000 & done; echo ready; wait'
    for _ in range(n // tree):
        p = subprocess.Popen(["bash", "-c", script, "tree", str(tree - 1)], stdout=subprocess.PIPE,
                             start_new_session=True)
        p.stdout.readline()
        roots.append(p)
    for p in roots:
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            allp += [p.pid] + [int(c) for c in f.read().split()]
    return [p.pid for p in roots], allp, roots


def end(procs, tree):
    for p in procs:
        try:
            if tree > 1:
                os.killpg(p.pid, signal.SIGTERM)
            else:
                p.terminate()
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait()


def register(sock, pids, interval, tree):
    conn = UnixConnection(sock)
    for pid in pids:
        body = {"pid": pid, "interval": interval}
        if tree > 1:
            body["children"] = True
        conn.request("POST", "/v1/runs", __import__("json").dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        if r.status != 201:
            sys.exit(f"register {pid}: {r.status} {data[:200]!r}")
    conn.close()


def perf_split(data):
    """{dso: percent} of a perf.data, self time."""
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso", "--stdio"],
                         capture_output=True, text=True).stdout
    split = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0].endswith("%") and not line.startswith("#"):
            split[f[1]] = split.get(f[1], 0.0) + float(f[0].rstrip("%"))
    return split


WRK_LUA = """
local paths = {"/v1/runs", "/v1/health"}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[n % 2 + 1])
end
"""


def wrk_start(daemon, tmp, duration):
    """wrk on mlmond's TCP listener for duration seconds."""
    listen = daemon.args[daemon.args.index("--listen") + 1]
    with open(f"{tmp}/wrk.lua", "w") as f:
        f.write(WRK_LUA)
    return subprocess.Popen(["wrk", "-c32", "-t2", f"-d{duration}s", "-s", f"{tmp}/wrk.lua", f"http://{listen}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def sample_times(sock, t0, t1):
    """{run id: [ts, ...]} of the samples of [t0, t1), through the API: the
    head's rows and the blocks the compaction made of them alike."""
    listed, path = [], "/v1/runs?state=all"
    while path:  # a page holds 500 runs: follow "next"
        st, runs = benchlib.call(sock, "GET", path)
        listed += runs["runs"]
        path = runs.get("next")
    out = {}
    for r in listed:
        st, got = benchlib.call(sock, "GET", f"/v1/runs/{r['id']}/samples?from={int(t0 * 1000)}"
                                f"&until={int(t1 * 1000) - 1}&limit=100000")
        out[r["id"]] = [x["ts"] for x in got["samples"]] if st == 200 else []
    return out


def lateness(by_run, interval_ms):
    """(median, p99, max) in ms of how late the samples were against each
    run's schedule, its earliest sample as the reference."""
    late = []
    for ts in by_run.values():
        if not ts:
            continue
        off = [t - round((t - ts[0]) / interval_ms) * interval_ms for t in ts]
        late += [o - min(off) for o in off]
    if not late:
        return None
    late.sort()
    return late[len(late) // 2], late[min(len(late) - 1, int(len(late) * 0.99))], late[-1]


def interval_ms(text):
    units = {"ms": 1, "s": 1000, "m": 60000}
    for u in ("ms", "s", "m"):
        if text.endswith(u):
            return float(text[:-len(u)]) * units[u]
    return float(text) * 1000


def measure(args, n):
    tmp = tempfile.mkdtemp(prefix="mlmond-cost.", dir=args.tmp)
    roots, allp, procs = spawn(n, args.tree)
    daemon = None
    try:
        daemon, sock, _, _ = benchlib.start_mlmond(args.mlmond, tmp)
        if not sock:
            sys.exit(f"mlmond did not start; see {tmp}/mlmond.log")
        time.sleep(1)
        anon0 = status_kib(daemon.pid, "RssAnon")
        i0 = benchlib.sched_ns(daemon.pid)
        time.sleep(args.idle)
        idle_us_s = (benchlib.sched_ns(daemon.pid) - i0) / 1e3 / max(args.idle, 1e-9)
        # the first run alone: what the first registration and its first
        # ticks allocate once (statements, page cache) is not a cost per run
        register(sock, roots[:1], args.interval, args.tree)
        time.sleep(2.5)
        anon_one = status_kib(daemon.pid, "RssAnon")
        o0 = benchlib.sched_ns(daemon.pid)
        time.sleep(args.idle)
        one_us_s = (benchlib.sched_ns(daemon.pid) - o0) / 1e3 / max(args.idle, 1e-9)
        register(sock, roots[1:], args.interval, args.tree)
        time.sleep(3)
        anon_reg = status_kib(daemon.pid, "RssAnon")
        pidstat = subprocess.Popen(["pidstat", "-h", "-u", "-r", "-d", "-p", ",".join(map(str, allp)), "1",
                                    str(args.duration + 10)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2)
        h0 = benchlib.call(sock, "GET", "/v1/health")[1]
        perf = None
        if args.perf:
            perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999", "-p", str(daemon.pid),
                                     "-o", f"{tmp}/perf.data"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wrk = wrk_start(daemon, tmp, args.duration) if args.wrk else None
        t0 = time.time()
        m0, p0 = cpu_s(daemon.pid), cpu_s(pidstat.pid)
        ms0, ps0 = benchlib.sched_ns(daemon.pid), benchlib.sched_ns(pidstat.pid)
        time.sleep(args.duration)
        ms1, ps1 = benchlib.sched_ns(daemon.pid), benchlib.sched_ns(pidstat.pid)
        m1, p1 = cpu_s(daemon.pid), cpu_s(pidstat.pid)
        t1 = time.time()
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        h1 = benchlib.call(sock, "GET", "/v1/health")[1]
        pidstat.kill()
        pidstat.wait()
        anon1, rss1 = status_kib(daemon.pid, "RssAnon"), status_kib(daemon.pid, "VmRSS")
        times = sample_times(sock, t0, t1)
        rows = sum(len(v) for v in times.values())
        late = lateness(times, interval_ms(args.interval))
        per = len(allp) // len(roots)
        pid_samples = rows * per
        wall = t1 - t0
        nominal = len(allp) * wall
        m_us = (ms1 - ms0) / 1e3 / max(pid_samples, 1)
        p_us = (ps1 - ps0) / 1e3 / nominal
        print(f"N={len(allp)} ({len(roots)} runs of {per}), {wall:.1f} s: mlmond {m_us:.2f} us/pid-sample "
              f"(utime+stime {(m1 - m0) * 1e6 / max(pid_samples, 1):.2f}), pidstat {p_us:.2f} us/pid-sample "
              f"(utime+stime {(p1 - p0) * 1e6 / nominal:.2f}), "
              f"ratio {m_us / p_us:.3f}; {pid_samples} pid-samples stored ({rows} rows)")
        if args.idle:
            # per-namespace reads (net/dev) and the first run's statements
            # are paid once, not per process: the slope from one run to N
            one = one_us_s * wall
            further = max(pid_samples * (len(roots) - 1) / len(roots), 1)
            print(f"  mlmond spends {idle_us_s:.0f} us/s with no run (host figures, commits, maintenance), "
                  f"{one_us_s:.0f} us/s with one run of {per}; each further process "
                  f"{((ms1 - ms0) / 1e3 - one) / further:.2f} us/pid-sample")
        print(f"  memory: RssAnon {anon0} KiB idle, {anon_reg} KiB registered, {anon1} KiB at the end: "
              f"{(anon_reg - anon0) / len(roots):.2f} / {(anon1 - anon0) / len(roots):.2f} KiB per run "
              f"(after the first run's {anon_one - anon0} KiB: "
              f"{(anon_reg - anon_one) / max(len(roots) - 1, 1):.2f} / "
              f"{(anon1 - anon_one) / max(len(roots) - 1, 1):.2f}); "
              f"VmRSS {rss1 / 1024:.1f} MiB")
        if args.breakdown:
            print(f"  resident at the end: {breakdown(daemon.pid)}")
        print(f"  ticks {h1['ticks'] - h0['ticks']}, overruns {h1['overruns'] - h0['overruns']}, "
              f"last_tick_ms {h1['last_tick_ms']}")
        if late:
            expected = int(len(roots) * wall * 1000 / interval_ms(args.interval))
            print(f"  samples late by {late[0]} ms median, {late[1]} ms p99, {late[2]} ms at most; "
                  f"{rows} samples of {expected} due")
        if wrk:
            out = wrk.communicate()[0]
            reqs = [line for line in out.splitlines() if "Requests/sec" in line or "requests in" in line]
            print("  wrk: " + "; ".join(r.strip() for r in reqs))
        if perf:
            split = perf_split(f"{tmp}/perf.data")
            top = sorted(split.items(), key=lambda kv: -kv[1])[:6]
            print("  perf by library: " + ", ".join(f"{d} {p:.1f}%" for d, p in top))
            sq = sum(p for d, p in split.items() if "sqlite" in d)
            print(f"  SQLite: {sq:.1f}% = {m_us * per * sq / 100:.2f} us per stored sample")
        if args.late:
            time.sleep(args.late)
            print(f"  after {args.late} s more: RssAnon {status_kib(daemon.pid, 'RssAnon')} KiB "
                  f"({(status_kib(daemon.pid, 'RssAnon') - anon0) / len(roots):.2f} KiB per run), "
                  f"VmRSS {status_kib(daemon.pid, 'VmRSS') / 1024:.1f} MiB")
            if args.breakdown:
                print(f"  resident then: {breakdown(daemon.pid)}")
        sys.stdout.flush()
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait()
        end(procs, args.tree)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", default="1000")
    ap.add_argument("-d", "--duration", type=int, default=20)
    ap.add_argument("-i", "--interval", default="1s")
    ap.add_argument("-t", "--tree", type=int, default=1)
    ap.add_argument("-p", "--perf", action="store_true")
    ap.add_argument("-k", "--keep", action="store_true")
    ap.add_argument("-w", "--wrk", action="store_true")
    ap.add_argument("-b", "--breakdown", action="store_true")
    ap.add_argument("--late", type=int, default=0)
    ap.add_argument("--idle", type=float, default=10)
    ap.add_argument("-m", "--mlmond")
    ap.add_argument("--tmp", default="/var/tmp")
    args = ap.parse_args()
    if not args.mlmond:
        for b in ("build-bench", "build"):
            if os.path.exists(f"{benchlib.SRC}/{b}/daemon/mlmond"):
                args.mlmond = f"{benchlib.SRC}/{b}/daemon/mlmond"
                break
    if not args.mlmond or not shutil.which("pidstat"):
        sys.exit("need an mlmond build (-m) and pidstat (Debian package sysstat)")
    # mlmond keeps up to 5 fds a run (it raises its soft limit to the hard one): raise the
    # hard one where it is too low and we may
    need = 5 * max(int(x) for x in args.n.split(",")) + 1024
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, need), max(hard, need)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"mlmond cost benchmark: {args.mlmond}, interval {args.interval}, {os.cpu_count()} CPUs, "
          f"load {open('/proc/loadavg').read().split()[0]}")
    for n in [int(x) for x in args.n.split(",")]:
        measure(args, n)
    return 0


if __name__ == "__main__":
    sys.exit(main())

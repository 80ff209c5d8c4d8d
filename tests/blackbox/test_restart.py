# SPDX-License-Identifier: MIT
"""A daemon restart loses nothing the processes used while mlmond was down:
the counters since registration come from the baseline stored with the run,
the outage leaves no invented samples, and the first rates after it are the
averages over it."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import Helper, MiB, needs, now_ms, proc_io, read_proc, schedstat_ns


# A process driven over a pipe: "write N" writes N MiB to its file and
# fsyncs it, "burn S" spends S s of CPU, "send N" sends N UDP datagrams of
# 1000 bytes to 10.9.9.2 (see netns_agent), "spawn" starts another such process
# as its child (answering its pid), "to PID CMD" passes CMD on to that child,
# "reap PID" ends it; each answers "done ..." when finished.
AGENT = r'''
import os, socket, subprocess, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
chunk = b"\x5a" * (1 << 20)
kids = {}
print("ready", flush=True)
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    out = ""
    if cmd == "write":
        for _ in range(int(arg)):
            os.write(fd, chunk)
        os.fsync(fd)
    elif cmd == "burn":
        end = time.process_time() + float(arg)
        while time.process_time() < end:
            pass
    elif cmd == "send":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(int(arg)):
            s.sendto(b"n" * 1000, ("10.9.9.2", 9))
        s.close()
    elif cmd == "spawn":
        p = subprocess.Popen([sys.executable, sys.argv[0], sys.argv[1] + f".{len(kids)}"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        kids[p.pid] = p
        out = str(p.pid)
    elif cmd == "to":
        pid, _, sub = arg.partition(" ")
        p = kids[int(pid)]
        p.stdin.write(sub + "\n")
        p.stdin.flush()
        out = p.stdout.readline().strip()
    elif cmd == "reap":
        p = kids.pop(int(arg))
        p.stdin.close()
        p.wait()
    print(("done " + out).strip(), flush=True)
'''


def start_agent(d):
    script = os.path.join(d, "agent.py")
    with open(script, "w") as f:
        f.write(AGENT)
    a = Helper([sys.executable, script, os.path.join(d, "agent.bin")])
    a.expect("ready")
    return a


# A network namespace of its own with a veth pair whose peer has a fixed
# neighbour entry: what the agent sends leaves by v0 and arrives on v1, so
# the namespace's counters move by exactly that, and nothing else moves them
# (no IPv6 chatter, no other process).
NETNS_SETUP = ("echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 && "
               "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && "
               "ip link add v0 type veth peer name v1 && ip addr add 10.9.9.1/24 dev v0 && "
               "ip link set v0 up && ip link set v1 up && "
               "ip neigh add 10.9.9.2 lladdr 02:00:00:00:00:02 dev v0")


def netns_agent(d):
    script = os.path.join(d, "agent.py")
    with open(script, "w") as f:
        f.write(AGENT)
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        needs("netns", "a network namespace of its own needs root, unshare and ip")
    probe = subprocess.run(["unshare", "-n", "sh", "-c", NETNS_SETUP], capture_output=True)
    if probe.returncode != 0:
        needs("netns", f"cannot set up a veth pair in a new namespace: {probe.stderr.decode().strip()}")
    a = Helper(["unshare", "-n", "sh", "-c",
                f"{NETNS_SETUP} && exec {sys.executable} {script} {os.path.join(d, 'agent.bin')}"])
    a.expect("ready")
    return a


def netdev(pid):
    """The namespace's (rx, tx) bytes over every interface but lo."""
    rx = tx = 0
    for line in read_proc(pid, "net/dev").decode().splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() != "lo":
            f = rest.split()
            rx, tx = rx + int(f[0]), tx + int(f[8])
    return rx, tx


def do(agent, line, timeout=60):
    agent.send(line)
    return agent.expect("done", timeout=timeout)


def first_after(samples, ts):
    return next(s for s in samples if s["ts"] > ts)


def last_before(samples, ts):
    return [s for s in samples if s["ts"] < ts][-1]


@pytest.mark.parametrize("outage", ["stop", "crash"])
def test_restart_counts_the_outage(make_mlmond, data_dir, outage):
    d = make_mlmond(interval="250ms")
    agent = start_agent(data_dir)
    try:
        pid = agent.pid
        io0, cpu0 = proc_io(pid), schedstat_ns(pid)
        run_id = d.register(pid, interval="250ms")["id"]
        do(agent, "write 32")
        d.wait_sample_after(run_id, now_ms())

        d.stop() if outage == "stop" else d.kill9()
        stopped = now_ms()
        gap_cpu0 = schedstat_ns(pid)
        do(agent, "write 32")
        do(agent, "burn 1.5")
        gap_cpu = (schedstat_ns(pid) - gap_cpu0) / 1e9
        restarted = now_ms()
        d.start()

        do(agent, "write 32")
        run = d.wait_sample_after(run_id, now_ms())
        io1, cpu1 = proc_io(pid), schedstat_ns(pid)
        latest, summary = run["latest"], run["summary"]
        kernel_write = io1["write_bytes"] - io0["write_bytes"]

        # the kernel's counters since registration, the outage included
        assert latest["wchar_bytes"] == io1["wchar"] - io0["wchar"], (latest, io0, io1)
        assert latest["write_bytes"] == kernel_write, (latest, io0, io1)
        assert summary["write_bytes"] == latest["write_bytes"]
        if kernel_write:  # a filesystem that accounts write_bytes
            assert abs(latest["write_bytes"] - 96 * MiB) <= 0.05 * 96 * MiB, latest
        kernel_cpu = (cpu1 - cpu0) / 1e9
        assert gap_cpu > 1.0, gap_cpu
        assert abs(latest["cpu_time_s"] - kernel_cpu) <= 0.5, (latest["cpu_time_s"], kernel_cpu, gap_cpu)
        assert abs(summary["cpu_time_s"] - kernel_cpu) <= 0.5, (summary["cpu_time_s"], kernel_cpu)

        samples = d.samples(run_id)
        # nothing invented for the outage
        inside = [s["ts"] for s in samples if stopped < s["ts"] < restarted]
        assert not inside, f"samples timestamped while mlmond was down: {inside}"
        # the first rates after it are its averages, not a spike
        before, after = last_before(samples, stopped), first_after(samples, restarted)
        span_s = (after["ts"] - before["ts"]) / 1000.0
        for counter, rate in (("write_bytes", "write_bytes_per_s"), ("cpu_time_s", "cpu_pct")):
            avg = (after[counter] - before[counter]) / span_s * (100.0 if rate == "cpu_pct" else 1.0)
            assert after[rate] is not None, after
            assert abs(after[rate] - avg) <= 0.02 * avg + 1.0, (rate, after[rate], avg, before, after)
        assert after["cpu_pct"] < 100.0, after
        # and the counters never go back
        for k in ("cpu_time_s", "write_bytes", "wchar_bytes", "rchar_bytes"):
            v = [s[k] for s in samples]
            assert v == sorted(v), f"{k} went back: {v}"
    finally:
        agent.close()


def test_restart_tree_counts_survivors_once(make_mlmond, data_dir):
    """A tree: the member that exited while mlmond watched keeps its share,
    the surviving members' use during the outage counts, and nothing counts
    twice."""
    d = make_mlmond(interval="250ms")
    agent = start_agent(data_dir)
    try:
        main = agent.pid
        early = int(do(agent, "spawn")[0])
        late = int(do(agent, "spawn")[0])
        base = {p: schedstat_ns(p) for p in (main, early, late)}
        wbase = {p: proc_io(p)["wchar"] for p in (main, early, late)}
        run_id = d.register(main, interval="250ms", children=True)["id"]
        wait = d.wait_sample_after
        wait(run_id, now_ms())

        do(agent, f"to {early} burn 0.5")
        do(agent, f"to {early} write 8")
        used = {early: (schedstat_ns(early) - base[early], proc_io(early)["wchar"] - wbase[early])}
        wait(run_id, now_ms())  # seen at its end
        do(agent, f"reap {early}")  # leaves while mlmond watches
        wait(run_id, now_ms())
        do(agent, f"to {late} burn 0.3")
        wait(run_id, now_ms())

        d.stop()
        do(agent, f"to {late} burn 1.5")  # while nobody watches
        do(agent, f"to {late} write 8")
        d.start()
        do(agent, "write 4")
        run = wait(run_id, now_ms())
        for p in (main, late):
            used[p] = (schedstat_ns(p) - base[p], proc_io(p)["wchar"] - wbase[p])
        cpu = sum(c for c, _ in used.values()) / 1e9
        wchar = sum(w for _, w in used.values())
        latest = run["latest"]
        assert abs(latest["cpu_time_s"] - cpu) <= 0.5, (latest["cpu_time_s"], cpu, used)
        # wchar is exact: the agents write only when told (the kernel adds a
        # reaped child's I/O to its parent's, so main's counts early's too)
        assert latest["wchar_bytes"] == wchar, (latest["wchar_bytes"], wchar, used)
        assert run["summary"]["cpu_time_s"] == latest["cpu_time_s"]
    finally:
        agent.close()


def test_restart_counts_the_outage_netns(make_mlmond, data_dir):
    """The network namespace's traffic while mlmond was down counts too."""
    agent = netns_agent(data_dir)
    d = make_mlmond(interval="250ms")
    try:
        pid = agent.pid
        rx0, tx0 = netdev(pid)
        run_id = d.register(pid, interval="250ms")["id"]
        do(agent, "send 500")
        d.wait_sample_after(run_id, now_ms())
        d.stop()
        stopped = now_ms()
        do(agent, "send 2000")
        restarted = now_ms()
        d.start()
        do(agent, "send 500")
        latest = d.wait_sample_after(run_id, now_ms())["latest"]
        rx1, tx1 = netdev(pid)
        assert tx1 - tx0 >= 3000 * 1000, (tx0, tx1)
        assert latest["netns_tx_bytes"] == tx1 - tx0, (latest, tx0, tx1)
        assert latest["netns_rx_bytes"] == rx1 - rx0, (latest, rx0, rx1)

        samples = d.samples(run_id)
        before, after = last_before(samples, stopped), first_after(samples, restarted)
        span_s = (after["ts"] - before["ts"]) / 1000.0
        avg = (after["netns_tx_bytes"] - before["netns_tx_bytes"]) / span_s
        assert after["netns_tx_bytes"] - before["netns_tx_bytes"] >= 2000 * 1000, (before, after)
        assert after["netns_tx_bytes_per_s"] is not None, after
        assert abs(after["netns_tx_bytes_per_s"] - avg) <= 0.02 * avg + 1.0, (after, avg)
    finally:
        agent.close()

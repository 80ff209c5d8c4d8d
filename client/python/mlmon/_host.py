# SPDX-License-Identifier: MIT
"""What the profiler reads at a block's edges, in the process, from the
files mlmond reads too: this process's CPU time (getrusage), and the host's
CPU time, memory, disk busy time and network bytes (/proc). Two readings
give exact figures for the span between them, where a daemon's samples,
one an interval, would blur the edges. Each reader gives None for what it
cannot read."""

import dataclasses
import os
import resource
import time
from typing import Optional


@dataclasses.dataclass
class Edge:
    ts_ms: float  # the wall clock, for the run's samples
    user_s: float  # this process (every thread) and the children it waited for
    system_s: float
    cpu_busy: Optional[int] = None  # host CPU time in clock ticks, as mlmond counts it
    cpu_all: Optional[int] = None
    mem_total: Optional[int] = None  # bytes, at a block's end
    mem_available: Optional[int] = None
    disk_busy_ms: Optional[dict] = None  # whole disk -> ms with I/O in flight
    net_bytes: Optional[int] = None  # received + sent, loopback left out


def _read(path):
    """A /proc file, in one read (a file object costs twice as much)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def _host_cpu():
    """(busy, all) of the "cpu" line of /proc/stat, as mlmond's host
    cpu_pct counts them: busy = user nice system irq softirq steal, all =
    busy + idle + iowait (guest time is in user and nice already)."""
    data = _read("/proc/stat")
    v = [int(x) for x in data[:data.index(b"\n")].split()[1:9]]
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy, busy + v[3] + v[4]


def _meminfo():
    out = {}
    for line in _read("/proc/meminfo").split(b"\n"):
        k, _, rest = line.partition(b":")
        if k in (b"MemTotal", b"MemAvailable"):
            out[k] = int(rest.split()[0]) * 1024
            if len(out) == 2:
                break
    return out.get(b"MemTotal"), out.get(b"MemAvailable")


_disks = []


def _whole_disks():
    """The block devices that are disks (not partitions), without loop and
    RAM disks, whose busy time means nothing here; listed once."""
    if not _disks:
        _disks.append({d.encode() for d in os.listdir("/sys/block") if not d.startswith(("loop", "ram", "zram"))})
    return _disks[0]


def _disk_busy_ms():
    """/proc/diskstats: field 13 of a line (the 10th statistic) is the time
    the device had I/O in flight, in ms: iostat's %util is its rate."""
    disks = _whole_disks()
    out = {}
    for line in _read("/proc/diskstats").split(b"\n"):
        p = line.split()
        if len(p) > 12 and p[2] in disks:
            out[p[2].decode("latin-1")] = int(p[12])
    return out


def _net_bytes():
    """Received and sent bytes of this process's network namespace
    (/proc/self/net/dev), loopback left out, as mlmond's netns_ figures."""
    total = 0
    for line in _read("/proc/self/net/dev").split(b"\n")[2:]:
        name, colon, rest = line.partition(b":")
        if colon and name.strip() != b"lo":
            v = rest.split()
            total += int(v[0]) + int(v[8])
    return total


def _try(fn):
    try:
        return fn()
    except (OSError, ValueError, IndexError):
        return None


def _host_figures(e, memory):
    cpu = _try(_host_cpu)
    if cpu:
        e.cpu_busy, e.cpu_all = cpu
    mem = _try(_meminfo) if memory else None
    if mem:
        e.mem_total, e.mem_available = mem
    e.disk_busy_ms = _try(_disk_busy_ms)
    e.net_bytes = _try(_net_bytes)


def _own_cpu(e):
    ru, rc = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    e.user_s, e.system_s = ru.ru_utime + rc.ru_utime, ru.ru_stime + rc.ru_stime


def read_edge(start):
    """Everything at one instant (some 100 us of reads; the host's memory
    only at the end): at a block's start this process's CPU time is read
    last, at its end first, so that the other reads stay outside the
    block."""
    e = Edge(ts_ms=time.time() * 1000.0, user_s=0.0, system_s=0.0)
    if start:
        _host_figures(e, memory=False)
        _own_cpu(e)
    else:
        _own_cpu(e)
        _host_figures(e, memory=True)
    return e

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A memory cgroup a test may create and limit: on cgroup v2 (a unified
hierarchy at /sys/fs/cgroup, or the hybrid one's /sys/fs/cgroup/unified,
where its memory controller is enabled), else on the v1 memory controller
(/sys/fs/cgroup/memory, as hybrid and legacy hosts have it). Below the
caller's own cgroup where that works, else below the hierarchy's root.

    memcg.py            exits 0 when this machine lets us make one (the probe
                        of .ci/capabilities), 1 with the reason otherwise"""
import os
import sys
import uuid


def own_paths():
    v2, v1 = None, None
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, ctrl, path = line.rstrip("\n").split(":", 2)
            if hid == "0" and ctrl == "":
                v2 = path
            elif "memory" in ctrl.split(","):
                v1 = path
    return v2, v1


class Memcg:
    """A fresh cgroup: version (2 or 1), dir (its directory), path (as
    /proc/PID/cgroup names it); limit() sets memory.max (with swap off) or
    memory.limit_in_bytes (and memsw); remove() once its processes are gone."""

    def __init__(self, version, mount, parent_rel):
        self.version = version
        self.path = os.path.join(parent_rel, "mlmond-test-" + uuid.uuid4().hex[:12])
        self.dir = os.path.join(mount, self.path.lstrip("/"))
        os.mkdir(self.dir)

    def write(self, name, value):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(str(value))

    def limit(self, nbytes):
        if self.version == 2:
            self.write("memory.max", nbytes)
            if os.path.exists(os.path.join(self.dir, "memory.swap.max")):
                self.write("memory.swap.max", 0)
        else:
            self.write("memory.limit_in_bytes", nbytes)
            if os.path.exists(os.path.join(self.dir, "memory.memsw.limit_in_bytes")):
                self.write("memory.memsw.limit_in_bytes", nbytes)

    def limit_file(self):
        return "memory.max" if self.version == 2 else "memory.limit_in_bytes"

    def remove(self):
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def _try(version, mount, parents):
    for rel in parents:
        if rel is None:
            continue
        try:
            cg = Memcg(version, mount, rel)
        except OSError:
            continue
        if os.path.exists(os.path.join(cg.dir, cg.limit_file())):
            return cg
        cg.remove()
    return None


def make():
    """A new limited-to-be memory cgroup, or (None, why)."""
    v2, v1 = own_paths()
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(os.path.join(mount, "cgroup.controllers")):
            cg = _try(2, mount, [v2, "/"])
            if cg:
                return cg, None
    if os.path.isdir("/sys/fs/cgroup/memory"):
        cg = _try(1, "/sys/fs/cgroup/memory", [v1, "/"])
        if cg:
            return cg, None
    return None, "no writable memory cgroup (v2 memory.max or the v1 memory controller)"


if __name__ == "__main__":
    cg, why = make()
    if cg is None:
        print(why, file=sys.stderr)
        sys.exit(1)
    cg.remove()

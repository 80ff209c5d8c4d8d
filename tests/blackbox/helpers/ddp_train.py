# SPDX-License-Identifier: MIT
"""One rank of a real DDP job, for the black-box tests of jobs: a tiny
model on gloo (CPU), each step timed as three ops sent as StatsD lines to
mlmond's unix datagram socket (the sender is told by its pid):

  compute   the rank's own work before the all-reduce (a forward pass, and
            DDP_SLOW_MS of sleep on the rank DDP_SLOW_RANK, or on every rank
            with DDP_SLOW_RANK=all)
  backward  loss.backward(), in which DDP all-reduces the gradients: the
            ranks that arrive first wait there for the last
  step      the whole step

It waits until mlmonctl run --ranks has registered its process, so that no
timing goes to the launcher's run, then runs until a rank sees the file
DDP_STOP (or DDP_MAX_S seconds pass), and writes its pid, rank, attempt and step
count to DDP_OUT/<attempt>-<rank>.json."""

import http.client
import json
import os
import socket
import time

STATSD = os.environ["MLMON_STATSD_SOCKET"]
API = os.environ["MLMON_SOCKET"]
RANK = int(os.environ["RANK"])
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
SLOW = os.environ.get("DDP_SLOW_RANK", "")
SLOW_S = float(os.environ.get("DDP_SLOW_MS", "10")) / 1000
STOP = os.environ["DDP_STOP"]
MAX_S = float(os.environ.get("DDP_MAX_S", "50"))


class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(API)


def registered():
    c = Unix("localhost")
    try:
        c.request("GET", f"/v1/runs?pid={os.getpid()}")
        return bool(json.loads(c.getresponse().read())["runs"])
    finally:
        c.close()


deadline = time.monotonic() + 20
while not registered():
    if time.monotonic() > deadline:
        raise SystemExit(f"rank {RANK}: not registered within 20 s")
    time.sleep(0.05)

import torch  # noqa: E402 (after the wait: the import takes a second)
import torch.distributed as dist  # noqa: E402

torch.set_num_threads(1)
torch.manual_seed(RANK)
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
slow = SLOW == "all" or SLOW == str(RANK)
steps = 0
end = time.monotonic() + MAX_S


def go_on():
    """The ranks stop together: any rank that sees the stop file (or its
    time run out) stops them all, else one would wait in an all-reduce for
    ranks that left."""
    flag = torch.tensor([int(os.path.exists(STOP) or time.monotonic() > end)])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return flag.item() == 0


while go_on():
    t0 = time.perf_counter()
    x = torch.randn(16, 32)
    loss = model(x).square().mean()
    if slow:
        time.sleep(SLOW_S)
    t1 = time.perf_counter()
    opt.zero_grad()
    loss.backward()
    t2 = time.perf_counter()
    opt.step()
    t3 = time.perf_counter()
    out.sendto((f"compute:{(t1 - t0) * 1e3:.3f}|ms\nbackward:{(t2 - t1) * 1e3:.3f}|ms\n"
                f"step:{(t3 - t0) * 1e3:.3f}|ms").encode(), STATSD)
    steps += 1
with open(os.path.join(os.environ["DDP_OUT"], f"{ATTEMPT}-{RANK}.json"), "w") as f:
    json.dump({"pid": os.getpid(), "rank": RANK, "attempt": ATTEMPT, "steps": steps}, f)
dist.barrier()
dist.destroy_process_group()
# torch 1.13's gloo may abort in its destructors at exit ("terminate called
# without an active exception"), most often on rank 0, which holds the
# rendezvous store: the job is done, so leave without them
os._exit(0)

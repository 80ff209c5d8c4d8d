# SPDX-License-Identifier: MIT
"""statsd_agent.py: a process that the StatsD and latency tests register and
drive. It reads one JSON command per line on stdin and answers one line on
stdout: "ok <JSON>" or "err <message>". It prints "ready PID" first and exits
when stdin closes (or, through PR_SET_PDEATHSIG, when the test runner dies).

Datagram payloads travel in the commands as latin-1 strings (so any byte
value can be sent). Commands ({"cmd": NAME, ...}):

  unix     path, data: [payload, ...]          one datagram each, over a
                                               fresh unix datagram socket
  udp      host, port, data: [...]             over this agent's one UDP
                                               socket (its source port stays
                                               the same); answers {"port": P}
  stock    host, port, n, stat, ms             statsd.StatsClient(host, port)
                                               .timing(stat, ms), n times; the
                                               client stays open; answers {"port": P}
  stock_gauge  host, port, stat, values[, delta]
                                               statsd.StatsClient(host, port)
                                               .gauge(stat, v, delta=delta) for each
                                               value, over one client kept open;
                                               answers {"port": P}
  http     socket, method, path, body          a request on the HTTP unix
                                               socket; answers {"status", "body"}
  run      argv                                runs a command as this agent's
                                               child; answers {"rc", "stdout", "stderr"}
  fork     depth (1 or 2), then: {command}     runs the command in a child
                                               (depth 1) or a grandchild (2);
                                               answers {"pids": [...], "result": ...}
  child    -                                   starts a child that sleeps until
                                               the agent exits; answers {"pid": P}
  seq      steps: [{command}, ...]             runs them in order
  wait_count  socket, run, op, count, timeout  polls /latency until op has
                                               count timings
  pace     path, line, per_batch, period_ms, batches
                                               waits for the next whole second B
                                               (Unix ms), then sends per_batch
                                               copies of line (one datagram) at
                                               B + k * period_ms; answers
                                               {"start_ms": B, "last_ms": ...}
"""

import ctypes
import json
import os
import socket
import sys
import time

PR_SET_PDEATHSIG = 1


def die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    except OSError:
        pass


class Agent:
    def __init__(self):
        self.udp = None
        self.stock = []
        self.children = []

    def payloads(self, c):
        return [d.encode("latin-1") for d in c["data"]]

    def do_unix(self, c):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            for d in self.payloads(c):
                s.sendto(d, c["path"])
        finally:
            s.close()
        return {"sent": len(c["data"])}

    def do_udp(self, c):
        if self.udp is None:
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.udp.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            self.udp.bind(("127.0.0.1", 0))
        for d in self.payloads(c):
            self.udp.sendto(d, (c["host"], c["port"]))
        return {"port": self.udp.getsockname()[1], "sent": len(c["data"])}

    def do_stock(self, c):
        import statsd  # Debian's python3-statsd
        client = statsd.StatsClient(c["host"], c["port"])
        for _ in range(c["n"]):
            client.timing(c["stat"], c["ms"])
        # kept open, as an application keeps its client: the daemon finds
        # the owner of the source port when it reads the datagram, and a
        # socket closed by then has none
        self.stock.append(client)
        return {"port": client._sock.getsockname()[1]}

    def do_stock_gauge(self, c):
        import statsd  # Debian's python3-statsd
        client = statsd.StatsClient(c["host"], c["port"])
        for v in c["values"]:
            client.gauge(c["stat"], v, delta=c.get("delta", False))
        self.stock.append(client)
        return {"port": client._sock.getsockname()[1]}

    def do_http(self, c):
        import http.client

        class Conn(http.client.HTTPConnection):
            def connect(self):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(10)
                s.connect(c["socket"])
                self.sock = s

        conn = Conn("localhost", timeout=10)
        body = c.get("body")
        headers = {"Connection": "close"}
        if body is not None:
            body = body.encode()
            headers["Content-Type"] = "application/json"
        conn.request(c["method"], c["path"], body=body, headers=headers)
        r = conn.getresponse()
        data = r.read().decode("utf-8", "replace")
        conn.close()
        return {"status": r.status, "body": data}

    def do_run(self, c):
        import subprocess
        p = subprocess.run(c["argv"], capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
        return {"rc": p.returncode, "stdout": p.stdout.decode("utf-8", "replace"),
                "stderr": p.stderr.decode("utf-8", "replace")}

    def do_fork(self, c):
        depth = c.get("depth", 1)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker (depth 1) or its parent (depth 2)
            os.close(r)
            code = 0
            try:
                if depth == 1:
                    out = {"pids": [os.getpid()], "result": self.dispatch(c["then"])}
                else:
                    sub = self.do_fork({"depth": 1, "then": c["then"]})
                    out = {"pids": [os.getpid()] + sub["pids"], "result": sub["result"]}
            except BaseException as e:  # report, never return into the agent's loop
                out = {"error": repr(e)}
                code = 1
            os.write(w, json.dumps(out).encode())
            os._exit(code)
        os.close(w)
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(r)
        os.waitpid(pid, 0)
        out = json.loads(b"".join(chunks))
        if "error" in out:
            raise RuntimeError("in the forked child: " + out["error"])
        return out

    def do_child(self, c):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(w)
            die_with_parent()
            os.read(r, 1)  # EOF when the agent exits
            os._exit(0)
        os.close(r)
        self.children.append((pid, w))
        return {"pid": pid}

    def do_pace(self, c):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        data = "\n".join([c["line"]] * c["per_batch"]).encode()
        start = (int(time.time() * 1000) // 1000 + 1) * 1000
        last = 0.0
        late = 0
        for k in range(c["batches"]):
            due = (start + k * c["period_ms"]) / 1000.0
            d = due - time.time()
            if d > 0:
                time.sleep(d)
            last = time.time()
            if last - due > 0.005:
                late += 1
            s.sendto(data, c["path"])
        s.close()
        return {"start_ms": start, "last_ms": last * 1000.0, "late": late}

    def do_seq(self, c):
        return [self.dispatch(s) for s in c["steps"]]

    def do_wait_count(self, c):
        """Polls GET /v1/runs/RUN/latency?window=1m until op has count
        timings (or timeout s)."""
        deadline = time.monotonic() + c.get("timeout", 10)
        got = 0
        while True:
            r = self.do_http({"socket": c["socket"], "method": "GET",
                              "path": f"/v1/runs/{c['run']}/latency?window=1m"})
            if r["status"] == 200:
                got = json.loads(r["body"])["ops"].get(c["op"], {}).get("count", 0)
                if got >= c["count"]:
                    return {"count": got}
            if time.monotonic() > deadline:
                raise TimeoutError(f"{c['op']}: {got} timings, expected {c['count']}")
            time.sleep(0.01)

    def dispatch(self, c):
        return getattr(self, "do_" + c["cmd"])(c)


def main():
    die_with_parent()
    agent = Agent()
    out = sys.stdout
    out.write(f"ready {os.getpid()}\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            res = agent.dispatch(json.loads(line))
            out.write("ok " + json.dumps(res) + "\n")
        except Exception as e:  # the test sees it
            out.write("err " + repr(e).replace("\n", " ") + "\n")
        out.flush()
    for pid, w in agent.children:
        os.close(w)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()

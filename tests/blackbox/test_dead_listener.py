# SPDX-License-Identifier: MIT
"""A flood of idle connections must not switch the HTTP API off. Idle
connections to both listeners, the unix socket and TCP, held past the
connection timeout and then closed, a few rounds: after each, both
listeners answer again within 1 s. Loopback only, bounded: about 10 s."""

import socket
import threading
import time

from conftest import wait_for

N = 300          # connections per listener and round: past connection_limit
HOLD_S = 2.5     # held past connection_timeout (1 s)
ROUNDS = 3
ANSWER_S = 1.0   # after the flood, each listener answers within this

CONFIG = """
[http]
connection_timeout = 1s
"""


def flood(mlmond, kind, held):
    socks = []
    for i in range(N):
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX)
        else:
            s = socket.socket()
            s.bind(("127.0.0.%d" % (2 + i % 40), 0))  # many loopback sources: past the per-IP limit
        s.settimeout(0.3)
        try:
            s.connect(mlmond.socket_path if kind == "unix" else ("127.0.0.1", mlmond.port))
            socks.append(s)
        except OSError:
            s.close()
    held[kind] = len(socks)
    time.sleep(HOLD_S)
    for s in socks:
        s.close()


def answers(mlmond, kind):
    """GET /v1/health on one listener: True on a 200."""
    try:
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(0.5)
            s.connect(mlmond.socket_path)
        else:
            s = socket.create_connection(("127.0.0.1", mlmond.port), timeout=0.5)
        with s:
            s.sendall(b"GET /v1/health HTTP/1.0\r\nHost: x\r\n\r\n")
            return s.recv(12).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def test_listeners_survive_idle_floods(make_mlmond):
    mlmond = make_mlmond(config_text=CONFIG)
    for r in range(1, ROUNDS + 1):
        held = {}
        ts = [threading.Thread(target=flood, args=(mlmond, k, held)) for k in ("unix", "tcp")]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert held["unix"] > 0 and held["tcp"] > 0, held
        for kind in ("unix", "tcp"):
            deadline = time.monotonic() + ANSWER_S
            while not answers(mlmond, kind):
                assert time.monotonic() < deadline, \
                    f"round {r}: the {kind} listener did not answer within {ANSWER_S} s of the flood " \
                    f"(held unix {held['unix']}, tcp {held['tcp']})"
                time.sleep(0.05)
        # connections beyond the limit waited in the backlog during the
        # flood ("a listener is not accepting"): that is over now
        wait_for(lambda: mlmond.get("/v1/health")[1]["status"] == "ok", ANSWER_S,
                 what=f"round {r}: health to say ok after the flood")

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Register many pids with mlmond over its unix socket, one kept-alive HTTP
connection, and report how long it took.

usage: register.py SOCKET INTERVAL IDS_OUT < pids (one per line)
Writes one run id per line to IDS_OUT (in the order of the pids) and prints
"ok=N failed=N wall_s=F p50_ms=F p99_ms=F max_ms=F" on stdout; failures go to
stderr with the daemon's answer.
"""
import http.client
import json
import socket
import sys
import time


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(self.unix_path)
        self.sock = s


def main():
    sock_path, interval, ids_out = sys.argv[1], sys.argv[2], sys.argv[3]
    pids = [int(l) for l in sys.stdin if l.strip()]
    conn = UnixConnection(sock_path)
    ids, lat, failed = [], [], 0
    t0 = time.monotonic()
    for pid in pids:
        body = json.dumps({"pid": pid, "interval": interval})
        t = time.monotonic()
        for attempt in range(2):
            try:
                conn.request("POST", "/v1/runs", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                break
            except (http.client.HTTPException, OSError) as e:
                # the server may close an idle kept-alive connection: reconnect once
                conn.close()
                if attempt:
                    resp, data = None, str(e).encode()
        lat.append(time.monotonic() - t)
        if resp is not None and resp.status == 201:
            ids.append(json.loads(data)["id"])
        else:
            failed += 1
            st = resp.status if resp is not None else "no response"
            print(f"register pid {pid}: {st} {data[:300].decode(errors='replace')}", file=sys.stderr)
    wall = time.monotonic() - t0
    conn.close()
    with open(ids_out, "w") as f:
        f.write("".join(f"{i}\n" for i in ids))
    lat.sort()

    def pct(p):
        return 1000.0 * lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0.0

    print(f"ok={len(ids)} failed={failed} wall_s={wall:.3f} p50_ms={pct(0.5):.3f} "
          f"p99_ms={pct(0.99):.3f} max_ms={1000.0 * (lat[-1] if lat else 0):.3f}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

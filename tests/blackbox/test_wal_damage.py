# SPDX-License-Identifier: MIT
"""A damaged write-ahead log is said, never silently dropped: mlmond is
killed (kill -9) with its recent ticks in the log, the log is damaged (4 KiB
of noise in its middle; its header overwritten), and mlmond started again.
It logs an error, keeps a byte-for-byte copy of the log beside the database
before SQLite resets it, and /v1/health says "degraded" with what was lost,
across restarts, until root acknowledges it (POST /v1/health/ack). A log
left by kill -9 alone is no damage."""

import os
import random

from conftest import now_ms
from test_auth import NOBODY, raw_as

DAMAGE_LOG = r"write-ahead log .* (is damaged|has no valid header)"
ERR = r"^<3>database: the write-ahead log "


def crash_with_ticks_in_the_log(d, helpers, n=5):
    """Registers n processes, lets the 100 ms ticks write for a while
    (within the 5 s between checkpoints), kills mlmond -9; returns the
    log's bytes. The schema's migrations are in the database file first (a
    clean stop checkpoints everything): the log holds the runs and ticks."""
    d.restart()
    for _ in range(n):
        h = helpers("busy", "5", "0")
        h.expect("ready")
        run = d.register(h.pid)
        d.wait_sample_after(run["id"], now_ms())
    d.wait_sample_after(run["id"], now_ms() + 1000)
    d.kill9()
    with open(d.db_path + "-wal", "rb") as f:
        wal = f.read()
    assert len(wal) > 16 * 4096, f"the log holds {len(wal)} bytes: the ticks were checkpointed"
    return wal


def damage(d, wal, at, n):
    b = bytearray(wal)
    rnd = random.Random(at)
    b[at:at + n] = bytes(rnd.randrange(256) for _ in range(n))
    with open(d.db_path + "-wal", "wb") as f:
        f.write(b)
    return bytes(b)


def copies(d):
    return sorted(f for f in os.listdir(d.dir) if ".db-wal.damaged-" in f)


def wal_reason(health):
    return [r for r in health["reasons"] if "write-ahead log" in r]


def test_kill9_alone_is_no_damage(make_mlmond, helpers):
    d = make_mlmond(interval="100ms")
    crash_with_ticks_in_the_log(d, helpers)
    d.start()
    st, health = d.get("/v1/health")
    assert st == 200 and health["wal_damage"] is None and not wal_reason(health), health
    assert copies(d) == []


def test_noise_in_the_middle_is_said_kept_and_reported_until_acknowledged(make_mlmond, helpers):
    d = make_mlmond(interval="100ms")
    d.allowed_errors.append(ERR)
    wal = crash_with_ticks_in_the_log(d, helpers)
    bad = damage(d, wal, len(wal) // 2, 4096)
    t0 = now_ms()
    d.start()
    line = d.wait_log(DAMAGE_LOG)
    assert line.startswith("<3>"), line  # at err
    st, health = d.get("/v1/health")
    assert st == 200 and health["status"] == "degraded" and len(wal_reason(health)) == 1, health
    w = health["wal_damage"]
    assert w["header_damaged"] is False and w["log_bytes"] == len(bad), w
    assert w["transactions_lost"] >= 1 and w["frames_lost"] >= w["transactions_lost"], w
    assert w["frames_replayed"] is not None and t0 - 1000 <= w["ts"] <= now_ms(), w
    # the copy, beside the database, is the log as it was found, byte for byte
    assert copies(d) == [os.path.basename(w["copy"])] and os.path.dirname(w["copy"]) == d.dir, w
    with open(w["copy"], "rb") as f:
        assert f.read() == bad
    assert os.stat(w["copy"]).st_mode & 0o777 == 0o600

    # reported across a restart, until acknowledged; not by just anyone
    d.restart()
    st, health = d.get("/v1/health")
    assert health["status"] == "degraded" and health["wal_damage"]["ts"] == w["ts"], health
    r = d.request("POST", "/v1/health/ack", b"", unix=True)
    assert r.status == 200 and r.json["status"] == "ok" and r.json["wal_damage"] is None, r.body
    st, health = d.get("/v1/health")
    assert health["status"] == "ok" and not wal_reason(health), health
    d.restart()
    assert d.get("/v1/health")[1]["wal_damage"] is None
    assert copies(d) == [os.path.basename(w["copy"])]  # the evidence stays
    r = d.request("POST", "/v1/health/ack", b"")  # over TCP: read-only
    assert r.status == 405, r.body


def test_an_overwritten_header_is_said_and_kept(make_mlmond, helpers):
    d = make_mlmond(interval="100ms")
    d.allowed_errors.append(ERR)
    wal = crash_with_ticks_in_the_log(d, helpers)
    bad = damage(d, wal, 0, 32)
    d.start()
    line = d.wait_log(DAMAGE_LOG)
    assert line.startswith("<3>") and "no valid header" in line, line
    st, health = d.get("/v1/health")
    w = health["wal_damage"]
    assert health["status"] == "degraded" and w["header_damaged"] is True, health
    assert w["frames_lost"] is None and w["transactions_lost"] is None and w["log_bytes"] == len(bad), w
    with open(w["copy"], "rb") as f:
        assert f.read() == bad


def test_only_root_acknowledges(make_mlmond, helpers):
    d = make_mlmond(interval="100ms")
    d.allowed_errors.append(ERR)
    wal = crash_with_ticks_in_the_log(d, helpers, n=2)
    damage(d, wal, len(wal) // 2, 4096)
    d.start()
    d.wait_log(DAMAGE_LOG)
    st, body = raw_as(NOBODY, d, "POST", "/v1/health/ack")
    assert st == 403 and body["error"]["code"] == "forbidden", body
    assert d.get("/v1/health")[1]["status"] == "degraded"

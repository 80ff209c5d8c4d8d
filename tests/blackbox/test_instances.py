# SPDX-License-Identifier: MIT
"""One mlmond per database and per socket: a second
instance on the same paths refuses to start with one clear line and exit
status 1, and leaves the first one's sockets where they are; a socket file
left by an instance that is gone is replaced."""

import os
import socket
import subprocess

from conftest import MLMOND, free_port


def second(mlmond, db=None, socket_path=None, statsd=None):
    """Starts mlmond on the first one's paths (some replaced); returns
    (exit status, stderr) once it has exited."""
    argv = [MLMOND, "-c", mlmond.config_path, "--db", db or mlmond.db_path,
            "--listen", f"127.0.0.1:{free_port()}", "--socket", socket_path or mlmond.socket_path,
            "--statsd-socket", statsd or mlmond.statsd_path, "--statsd-udp", "none"]
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=10)
    return r.returncode, r.stderr.decode()


def still_serves(mlmond):
    for path in (mlmond.socket_path, mlmond.statsd_path):
        assert os.path.exists(path), f"{path} was removed by the second instance"
    st, health = mlmond.uget("/v1/health")
    assert st == 200 and health["status"] == "ok", health
    st, _ = mlmond.get("/v1/health")
    assert st == 200


def test_second_instance_on_the_same_paths(mlmond):
    rc, err = second(mlmond)
    assert rc == 1, err
    assert "in use by another mlmond" in err and f"pid {mlmond.pid}" in err, err
    still_serves(mlmond)


def test_second_instance_on_a_live_socket(mlmond, tmpdir_0755):
    rc, err = second(mlmond, db=os.path.join(tmpdir_0755, "other.db"))
    assert rc == 1, err
    assert f"socket: {mlmond.socket_path} is in use" in err, err
    still_serves(mlmond)
    rc, err = second(mlmond, db=os.path.join(tmpdir_0755, "third.db"),
                     socket_path=os.path.join(tmpdir_0755, "third.sock"))
    assert rc == 1, err
    assert f"statsd_socket: {mlmond.statsd_path} is in use" in err, err
    still_serves(mlmond)


def test_stale_socket_replaced(make_mlmond):
    mlmond = make_mlmond()
    mlmond.kill9()  # its socket files stay behind, nobody listening
    assert os.path.exists(mlmond.socket_path)
    with socket.socket(socket.AF_UNIX) as s:
        assert s.connect_ex(mlmond.socket_path) != 0
    mlmond.start()
    still_serves(mlmond)

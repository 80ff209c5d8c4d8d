# SPDX-License-Identifier: MIT
"""The mlmon package in a Python environment of its own, installed the way
doc/python.md says for a machine without a package index: a wheel built from
client/python with Debian's python3-build (setuptools, no isolation), then
installed into a fresh `python3 -m venv` (no system site packages) with
`pip install --no-index`. The venv's python finds mlmon in the venv (not in
Debian's dist-packages), its version is mlmond's, and a job run by that
python reaches a test daemon: its timings come back from the API.

Skipped where Debian's python3-build or python3-venv is missing."""

import glob
import json
import os
import shutil
import subprocess
import textwrap

import pytest

from conftest import MLMOND, ROOT

STEPS = 25


def clean_env(**extra):
    """The environment without pip's settings from this machine (an index,
    find-links): what is installed comes from the wheel alone."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("PIP_", "PYTHON", "MLMON_", "VIRTUAL_ENV", "CONDA"))}
    e["PIP_CONFIG_FILE"] = os.devnull
    e["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e.update(extra)
    return e


def run(argv, timeout=120, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture
def venv(tmp_path):
    """A fresh venv with mlmon installed from a wheel built here: its python."""
    py = "/usr/bin/python3"
    for module, package in (("build", "python3-build"), ("wheel", "python3-wheel"), ("ensurepip", "python3-venv")):
        if subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode != 0:
            pytest.skip(f"Debian's {package} is not installed")
    # a copy, as the build writes into the source directory (mlmon/VERSION,
    # a link to the project's VERSION, is copied as the file itself)
    src = tmp_path / "src"
    shutil.copytree(os.path.join(ROOT, "client", "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    run([py, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(src)],
        env=clean_env())
    wheels = glob.glob(str(tmp_path / "dist" / "mlmon-*-py3-none-any.whl"))
    assert len(wheels) == 1, wheels
    run([py, "-m", "venv", str(tmp_path / "venv")], env=clean_env())
    vpy = str(tmp_path / "venv" / "bin" / "python")
    run([vpy, "-m", "pip", "install", "--no-index", wheels[0]], env=clean_env())
    return vpy, wheels[0]


def test_venv_install_reaches_the_daemon(venv, mlmond):
    vpy, wheel = venv
    version = run([MLMOND, "--version"]).split()[-1]
    assert os.path.basename(wheel) == f"mlmon-{version}-py3-none-any.whl"

    job = textwrap.dedent(f"""
        import importlib.metadata, json, sys, time
        import mlmon
        run = mlmon.attach(name="venv-job")
        for _ in range({STEPS}):
            with mlmon.timer("step", category="training"):
                time.sleep(0.002)
        o = run.wait_for("step", {STEPS})
        print(json.dumps({{"file": mlmon.__file__, "version": mlmon.__version__,
                          "dist": importlib.metadata.version("mlmon"), "path": sys.path,
                          "prefix": sys.prefix, "run": run.id, "count": o["count"]}}))
    """)
    r = subprocess.run([vpy, "-c", job], capture_output=True, text=True, timeout=60, cwd="/",
                       env=clean_env(MLMON_SOCKET=mlmond.socket_path, MLMON_STATSD_SOCKET=mlmond.statsd_path))
    assert r.returncode == 0, f"the job failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    venv_dir = os.path.dirname(os.path.dirname(vpy))
    # the venv's own copy, without Debian's dist-packages on the path
    assert got["prefix"] == venv_dir and got["file"].startswith(venv_dir + "/lib/"), got
    assert not any("dist-packages" in p for p in got["path"]), got["path"]
    assert got["version"] == got["dist"] == version, got
    assert got["count"] == STEPS, got

    # the daemon's side: the run and its timings
    st, run_json = mlmond.get(f"/v1/runs/{got['run']}")
    assert st == 200 and run_json["name"] == "venv-job", run_json
    st, lat = mlmond.get(f"/v1/runs/{got['run']}/latency?window=1m")
    assert st == 200 and lat["ops"]["step"]["count"] == STEPS and lat["ops"]["step"]["category"] == "training", lat
    assert lat["ops"]["step"]["min_ms"] >= 2.0, lat

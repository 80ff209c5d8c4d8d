# SPDX-License-Identifier: MIT
"""The peak RSS of a run with --children is the tree's: the highest tree sum
sampled (or the main process's VmHWM when that is higher), never below the
current RSS, in the samples, the summary, and mlmonctl's show and report."""

import re
import sys

from conftest import Helper, MiB, now_ms, read_proc, statm_rss_bytes

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def vmhwm_bytes(pid):
    m = re.search(rb"^VmHWM:\s+(\d+) kB", read_proc(pid, "status"), re.MULTILINE)
    return int(m.group(1)) * 1024


def field_bytes(text, label):
    """Every value of 'label  N.N UNIT' lines in mlmonctl's output, in bytes."""
    out = []
    for m in re.finditer(rf"^\s*{re.escape(label)}\s+([0-9.]+) ({'|'.join(UNITS)})\b", text, re.MULTILINE):
        out.append(float(m.group(1)) * UNITS[m.group(2)])
    return out


def test_tree_peak_is_the_trees(mlmond, helpers):
    h = helpers("tree", 48, 0)
    kids = [int(p) for p in h.expect("ready")]
    r = mlmond.ctl("register", h.pid, "--children", "--interval", "250ms")
    assert r.returncode == 0, r.stderr
    run_id = int(r.stdout.decode().strip())
    mlmond.wait_sample_after(run_id, now_ms() + 600)
    run = mlmond.run(run_id)
    latest, summary = run["latest"], run["summary"]
    tree_rss = sum(statm_rss_bytes(p) for p in [h.pid] + kids)
    # the main process alone peaked far lower: its VmHWM is no tree's peak
    assert vmhwm_bytes(h.pid) < 16 * MiB < 96 * MiB <= tree_rss

    assert latest["rss_bytes"] >= 96 * MiB, latest
    assert latest["peak_rss_bytes"] >= latest["rss_bytes"], latest
    samples = mlmond.samples(run_id)
    assert len(samples) >= 3
    for s in samples:
        assert s["peak_rss_bytes"] >= s["rss_bytes"], s
    top = max(s["rss_bytes"] for s in samples)
    assert summary["peak_rss_bytes"] >= top, (summary, top)
    assert latest["peak_rss_bytes"] >= top

    show = mlmond.ctl("show", run_id)
    assert show.returncode == 0, show.stderr
    text = show.stdout.decode()
    rss = field_bytes(text, "RSS:")
    peaks = field_bytes(text, "peak RSS:")
    assert rss and len(peaks) == 2, text  # the latest sample's, the summary's
    # rounded to 0.1 of their unit
    assert all(p >= rss[0] - 0.1 * MiB for p in peaks), text
    assert peaks[0] >= 96 * MiB, text

    report = mlmond.ctl("report", run_id)
    assert report.returncode == 0, report.stderr
    text = report.stdout.decode()
    peaks = field_bytes(text, "peak RSS:")
    assert peaks and peaks[0] >= 96 * MiB, text


def test_single_process_peak_is_its_vmhwm(mlmond):
    """Where the tree is one process, its VmHWM (reached before registration)
    is the peak, above the RSS now."""
    code = "b = b'x' * (64 << 20); del b; print('ready', flush=True); input()"
    h = Helper([sys.executable, "-c", code])
    try:
        h.expect("ready")
        hwm = vmhwm_bytes(h.pid)
        assert hwm >= 64 * MiB > statm_rss_bytes(h.pid)
        run_id = mlmond.register(h.pid, interval="250ms", children=True)["id"]
        run = mlmond.wait_sample_after(run_id, now_ms())
        assert run["latest"]["peak_rss_bytes"] == vmhwm_bytes(h.pid), run["latest"]
        assert run["summary"]["peak_rss_bytes"] == run["latest"]["peak_rss_bytes"], run
        assert run["latest"]["rss_bytes"] < hwm
    finally:
        h.close()

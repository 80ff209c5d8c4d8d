# SPDX-License-Identifier: MIT
"""Stock StatsD clients, end to end: Debian's python3-statsd (which cannot
send tags) in a registered process, over UDP (attributed by the source
port). The config's [categories] table gives its ops their category, a tag
still wins, and a reload applies a changed table. Its gauges show up in the
run object, in /throughput, in `mlmonctl show` and `report`, and in
/metrics."""

import re
import signal
import time

import pytest

from conftest import wait_for
from test_statsd import agents, latency, registered, settle, start_udp_mlmond  # noqa: F401

pytest.importorskip("statsd", reason="needs statsd: Debian's python3-statsd is not installed")  # Debian's python3-statsd (tools/packages.txt)

CATEGORIES = "[categories]\ninfer_gpu = gpu\ninfer* = model_inference\n*.load = io\n"


def op_of(d, rid, op):
    return latency(d, rid)["ops"].get(op)


def wait_op(d, rid, op, count):
    settle(lambda: (op_of(d, rid, op) or {}).get("count", 0), count, f"timings of {op}")
    return op_of(d, rid, op)


# ---- [categories]: a category for ops from clients without tags -------------------

def test_categories_table_names_the_category_of_untagged_ops(make_mlmond, agents):  # noqa: F811
    d = start_udp_mlmond(make_mlmond, config_text=CATEGORIES)
    a = agents()
    rid = registered(d, a)

    a.call("stock", host="127.0.0.1", port=d.udp_port, n=5, stat="infer_step", ms=12.5)
    a.call("stock", host="127.0.0.1", port=d.udp_port, n=2, stat="infer_gpu", ms=3)
    a.call("stock", host="127.0.0.1", port=d.udp_port, n=3, stat="weights.load", ms=40)
    a.call("stock", host="127.0.0.1", port=d.udp_port, n=4, stat="tokenize", ms=1)
    # a tag wins over the table, whatever the pattern says
    a.udp(d.udp_port, ["infer_tagged:7|ms|#category:custom"])

    assert wait_op(d, rid, "infer_step", 5)["category"] == "model_inference"
    assert wait_op(d, rid, "infer_gpu", 2)["category"] == "gpu"  # the first match, in file order
    assert wait_op(d, rid, "weights.load", 3)["category"] == "io"
    assert wait_op(d, rid, "tokenize", 4)["category"] is None
    assert wait_op(d, rid, "infer_tagged", 1)["category"] == "custom"

    p = d.ctl("report", rid)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    blocks = re.split(r"\n(?=category )", out)
    by_cat = {b.split("\n", 1)[0].split(" ", 1)[1]: b for b in blocks if b.startswith("category ")}
    assert "infer_step" in by_cat["model_inference"] and "infer_gpu" not in by_cat["model_inference"]
    assert "infer_gpu" in by_cat["gpu"]
    assert "weights.load" in by_cat["io"]
    assert "infer_tagged" in by_cat["custom"]
    assert "tokenize" in by_cat["(none)"]

    # POST .../observations without a category goes through the same table
    st, body = d.post(f"/v1/runs/{rid}/observations", [{"op": "infer_http", "ms": 2}])
    assert st == 202, body
    assert wait_op(d, rid, "infer_http", 1)["category"] == "model_inference"


def test_reload_applies_a_changed_categories_table(make_mlmond, agents):  # noqa: F811
    d = start_udp_mlmond(make_mlmond, config_text=CATEGORIES)
    a = agents()
    rid = registered(d, a)
    a.call("stock", host="127.0.0.1", port=d.udp_port, n=2, stat="infer_a", ms=5)
    assert wait_op(d, rid, "infer_a", 2)["category"] == "model_inference"

    d.write_config("[categories]\ninfer* = inference_v2\ntokenize = preprocessing\n")
    after = d.log_lines()
    d.signal(signal.SIGHUP)
    d.wait_log("configuration reloaded", after=after)
    a.call("stock", host="127.0.0.1", port=d.udp_port, n=3, stat="infer_b", ms=5)
    a.call("stock", host="127.0.0.1", port=d.udp_port, n=1, stat="tokenize", ms=5)
    assert wait_op(d, rid, "infer_b", 3)["category"] == "inference_v2"
    assert wait_op(d, rid, "tokenize", 1)["category"] == "preprocessing"

    # a bad table is refused and the running one kept
    d.write_config("[categories]\ninfer* = not a category\n")
    after = d.log_lines()
    d.signal(signal.SIGHUP)
    d.wait_log("reload failed", after=after)
    d.allowed_errors.append(r"reload failed")
    a.call("stock", host="127.0.0.1", port=d.udp_port, n=1, stat="infer_c", ms=5)
    assert wait_op(d, rid, "infer_c", 1)["category"] == "inference_v2"


def test_check_config_refuses_a_bad_categories_line(make_mlmond, tmp_path):
    import subprocess
    from conftest import MLMOND
    conf = tmp_path / "bad.conf"
    conf.write_text("[categories]\ninfer* = a|b\n")
    p = subprocess.run([MLMOND, "--config", str(conf), "--check-config"], capture_output=True, text=True)
    assert p.returncode != 0
    assert "[categories]" in p.stderr + p.stdout and "not a category" in p.stderr + p.stdout


# ---- gauges: the latest value everywhere a run is shown ------------------------------

ODD = 'lag"\\ms'  # a quote and a backslash: escaped in /metrics label values


def send_gauges(d, a, rid, stat, values):
    """Each value once the one before has landed: values of one gauge that
    arrive in the same millisecond are stored as one row (ts is the key)."""
    for v in values:
        a.call("stock_gauge", host="127.0.0.1", port=d.udp_port, stat=stat, values=[v])
        wait_for(lambda: d.run(rid)["gauges"].get(stat, {}).get("value") == v, 5, what=f"gauge {stat} = {v}")
        time.sleep(0.005)


def window_gauges(d, rid):
    st, body = d.get(f"/v1/runs/{rid}/throughput?window=1m")
    assert st == 200, body
    return body["windows"][0]["gauges"]


def test_stock_client_gauges_in_the_run_show_report_and_metrics(make_mlmond, agents):  # noqa: F811
    d = start_udp_mlmond(make_mlmond)
    a = agents()
    rid = registered(d, a)
    assert d.run(rid)["gauges"] == {}

    t0 = time.time() * 1000
    send_gauges(d, a, rid, "queue_depth", [3, 40, 12])
    send_gauges(d, a, rid, ODD, [7.5])
    g = d.run(rid)["gauges"]
    assert set(g) == {"queue_depth", ODD}
    assert set(g["queue_depth"]) == {"value", "ts"} and t0 - 1000 <= g["queue_depth"]["ts"] <= time.time() * 1000
    assert g[ODD]["value"] == 7.5

    # over a span: last, min, max, count (stored values and the ones still in memory)
    settle(lambda: window_gauges(d, rid).get("queue_depth", {}).get("count"), 3, "gauge values in the window")
    w = window_gauges(d, rid)["queue_depth"]
    assert (w["value"], w["min"], w["max"], w["count"]) == (12, 3, 40, 3)

    out = d.ctl("show", rid)
    assert out.returncode == 0, out.stderr
    show = out.stdout.decode()
    assert "gauges (latest):" in show
    assert re.search(r"^  queue_depth +12 ", show, re.M), show
    assert re.search(r'^  lag"\\ms +7\.5 ', show, re.M), show

    out = d.ctl("report", rid)
    assert out.returncode == 0, out.stderr
    report = out.stdout.decode()
    assert "Gauges over the span" in report
    assert re.search(r"^  queue_depth +12 +3 +40 +3 ", report, re.M), report

    r = d.request("GET", "/metrics")
    assert r.status == 200
    text = r.body.decode()
    assert "# TYPE mlmond_run_app_value gauge\n" in text and "# HELP mlmond_run_app_value " in text
    lines = [ln for ln in text.splitlines() if ln.startswith("mlmond_run_app_value{")]
    mine = [ln for ln in lines if f'run="{rid}"' in ln]
    assert any(ln.endswith(',gauge="queue_depth"} 12') for ln in mine), lines
    assert any(ln.endswith(',gauge="lag\\"\\\\ms"} 7.5') for ln in mine), lines
    # the same labels as the other per-run families
    info = [ln for ln in text.splitlines() if ln.startswith("mlmond_run_info{") and f'run="{rid}"' in ln][0]
    run_labels = info[len("mlmond_run_info{"):].split(',comm="')[0]
    assert all(ln.startswith("mlmond_run_app_value{" + run_labels + ",gauge=") for ln in mine), (info, mine)

    # an ended run: its gauges come from the store, /metrics forgets them
    a.close()
    wait_for(lambda: d.run(rid)["state"] != "running", 5, what="the run to end")
    g = d.run(rid)["gauges"]
    assert g["queue_depth"]["value"] == 12 and g[ODD]["value"] == 7.5
    text = d.request("GET", "/metrics").body.decode()
    assert f'run="{rid}"' not in text


def test_gauges_survive_a_restart_of_mlmond(make_mlmond, agents):  # noqa: F811
    d = start_udp_mlmond(make_mlmond)
    a = agents()
    rid = registered(d, a)
    send_gauges(d, a, rid, "queue_depth", [12])
    # stored at the next tick: the series shows it
    wait_for(lambda: d.get(f"/v1/runs/{rid}/samples")[1]["gauges"], 5, what="the gauge to be stored")
    d.restart()
    wait_for(lambda: d.run(rid)["state"] == "running", 5, what="the run to resume")
    assert d.run(rid)["gauges"]["queue_depth"]["value"] == 12
    text = d.request("GET", "/metrics").body.decode()
    assert re.search(r'^mlmond_run_app_value\{run="%d",.*gauge="queue_depth"\} 12$' % rid, text, re.M), text
    # a "+N" from a stock client goes on from the stored value
    a.call("stock_gauge", host="127.0.0.1", port=d.udp_port, stat="queue_depth", values=[5], delta=True)
    wait_for(lambda: d.run(rid)["gauges"]["queue_depth"]["value"] == 17, 5, what="queue_depth 12 + 5")

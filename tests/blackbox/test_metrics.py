# SPDX-License-Identifier: MIT
"""GET /metrics, end to end: the real daemon with real registered processes
(one whose name and comm hold a double quote, a backslash and a line feed)
and StatsD timings pushed over its socket; the exposition must pass
`promtool check metrics` with no lint problem, read back with the strict
parser below to the same figures as the JSON API (an unknown value is
absent, never 0), keep op totals since registration across slice
rotation and a daemon restart, leave ended runs out, and be scraped by a
real Prometheus server that answers a PromQL query with the run's resident
memory.

promtool and prometheus come from Debian's `prometheus` package
(tools/packages.txt); without them those parts are skipped."""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from conftest import free_port, needs, now_ms, wait_for
from test_latency import exact_quantile, lognormal_ms, send_timings
from test_statsd import agents, registered, settle  # noqa: F401

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# a run's name may not hold a newline (mlmond refuses control characters in
# what users name); a process's comm may, and carries it into the labels
WEIRD_NAME = 'we"ird\\name line 2 \\n'
WEIRD_COMM = b'q"\\\xff\nx'  # a comm is raw bytes: 0xff is not UTF-8
QUANTILE_REL = 0.01


# ---- a strict reader of the text format 0.0.4 ---------------------------------------

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


class Exposition:
    """families: name -> {"type", "help", "samples": [(sample name, labels dict, value)]}."""

    def __init__(self, text):
        self.families = {}
        self.series = set()
        assert text.endswith("\n"), "the exposition must end with a line feed"
        current = None  # the family whose samples are being written
        for n, line in enumerate(text[:-1].split("\n"), 1):
            where = f"line {n}: {line!r}"
            assert line, f"{where}: empty line"
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                kind, rest = line[2:6], line[7:]
                name, _, arg = rest.partition(" ")
                assert NAME_RE.fullmatch(name) and arg, where
                fam = self.families.setdefault(name, {"type": None, "help": None, "samples": []})
                key = "type" if kind == "TYPE" else "help"
                assert fam[key] is None, f"{where}: a second {kind} for {name}"
                assert not fam["samples"], f"{where}: {kind} after the family's samples"
                if key == "type":
                    assert arg in ("counter", "gauge", "summary", "histogram", "untyped"), where
                else:
                    assert "\\" not in arg.replace("\\\\", "").replace("\\n", ""), f"{where}: bad escape"
                fam[key] = arg
                current = name
                continue
            assert not line.startswith("#"), f"{where}: a comment we do not write"
            try:
                name, labels, value = self._sample(line, where)
            except IndexError:
                pytest.fail(f"{where}: the line ends inside a sample")
            fam_name = self._family_of(name)
            assert fam_name == current, f"{where}: not with the rest of family {fam_name}"
            fam = self.families[fam_name]
            assert fam["type"] and fam["help"], f"{where}: sample before HELP and TYPE"
            key = (name, frozenset(labels.items()))
            assert key not in self.series, f"{where}: the same series twice"
            self.series.add(key)
            fam["samples"].append((name, labels, value))

    def _family_of(self, name):
        for suffix in ("_sum", "_count"):
            base = name[: -len(suffix)]
            if name.endswith(suffix) and self.families.get(base, {}).get("type") == "summary":
                return base
        assert name in self.families, f"sample {name} of no declared family"
        return name

    @staticmethod
    def _sample(line, where):
        m = NAME_RE.match(line)
        assert m, where
        name, i, labels = m.group(0), m.end(), {}
        if line[i] == "{":
            i += 1
            while line[i] != "}":
                m = LABEL_RE.match(line, i)
                assert m and line[m.end():m.end() + 2] == '="', f"{where}: bad label at {i}"
                key, i, val = m.group(0), m.end() + 2, []
                while line[i] != '"':
                    if line[i] == "\\":
                        assert line[i + 1] in UNESCAPE, f"{where}: bad escape at {i}"
                        val.append(UNESCAPE[line[i + 1]])
                        i += 2
                    else:
                        val.append(line[i])
                        i += 1
                assert key not in labels, f"{where}: label {key} twice"
                labels[key] = "".join(val)
                i += 1
                if line[i] == ",":
                    i += 1
            i += 1
        assert line[i] == " ", f"{where}: no space before the value"
        value = line[i + 1:]
        assert re.fullmatch(r"[-+]?(\d+(\.\d*)?([eE][-+]?\d+)?|\.\d+|NaN|Inf)", value), f"{where}: value"
        return name, labels, float(value)

    def get(self, name, **labels):
        """Values of the samples called name whose labels include labels."""
        fam = self.families.get(self._base(name))
        if not fam:
            return []
        want = {k: str(v) for k, v in labels.items()}
        return [v for n, lab, v in fam["samples"] if n == name and all(lab.get(k) == x for k, x in want.items())]

    def one(self, name, **labels):
        v = self.get(name, **labels)
        assert len(v) == 1, f"{name}{labels}: {len(v)} samples, expected one"
        return v[0]

    def labels_of(self, name, **labels):
        fam = self.families.get(self._base(name), {"samples": []})
        want = {k: str(v) for k, v in labels.items()}
        return [lab for n, lab, _ in fam["samples"] if n == name and all(lab.get(k) == x for k, x in want.items())]

    def _base(self, name):
        for suffix in ("_sum", "_count"):
            if name.endswith(suffix) and self.families.get(name[: -len(suffix)], {}).get("type") == "summary":
                return name[: -len(suffix)]
        return name


def scrape(d):
    r = d.request("GET", "/metrics")
    assert r.status == 200, (r.status, r.body[:300])
    assert r.headers["content-type"] == CONTENT_TYPE
    return r.body.decode("utf-8")  # strict: invalid UTF-8 raises


def check_conventions(expo):
    for name, fam in expo.families.items():
        assert name.startswith("mlmond_"), name
        assert fam["samples"], f"{name}: a family with no samples"
        assert fam["type"] != "counter" or name.endswith("_total"), f"counter {name} without _total"
        assert fam["type"] == "counter" or not name.endswith("_total"), f"{fam['type']} {name} ending in _total"
        for n, labels, v in fam["samples"]:
            if name.startswith("mlmond_run_"):
                assert {"run", "name", "pid"} <= set(labels), f"{n}{labels}: run labels missing"
            assert not math.isnan(v), f"{n}{labels} is NaN: an unknown value must be left out"


# ---- what /metrics must agree with ------------------------------------------------

# metric -> (part of GET /v1/runs/ID, field, scale): both come from the same
# latest sample and live totals.
RUN_FIELDS = {
    "mlmond_run_cpu_seconds_total": ("latest", "cpu_time_s", 1),
    "mlmond_run_cpu_user_seconds_total": ("latest", "user_time_s", 1),
    "mlmond_run_cpu_system_seconds_total": ("latest", "system_time_s", 1),
    "mlmond_run_resident_memory_bytes": ("latest", "rss_bytes", 1),
    "mlmond_run_resident_memory_anon_bytes": ("latest", "rss_anon_bytes", 1),
    "mlmond_run_resident_memory_peak_bytes": ("summary", "peak_rss_bytes", 1),
    "mlmond_run_threads": ("latest", "threads", 1),
    "mlmond_run_processes": ("latest", "processes", 1),
    "mlmond_run_read_bytes_total": ("latest", "read_bytes", 1),
    "mlmond_run_write_bytes_total": ("latest", "write_bytes", 1),
    "mlmond_run_netns_receive_bytes_total": ("latest", "netns_rx_bytes", 1),
    "mlmond_run_netns_transmit_bytes_total": ("latest", "netns_tx_bytes", 1),
    "mlmond_run_gpu_memory_bytes": ("latest", "gpu_mem_bytes", 1),
    "mlmond_run_gpu_utilization_ratio": ("latest", "gpu_util_pct", 0.01),
    "mlmond_run_energy_joules_total": ("latest", "energy_j", 1),
}


def consistent_scrape(d, run_ids):
    """A scrape with the JSON of each run around it, taken when no sample
    landed in between (the same latest ts before and after)."""
    for _ in range(50):
        before = {i: d.run(i) for i in run_ids}
        text = scrape(d)
        after = {i: d.run(i) for i in run_ids}
        if all(before[i]["latest"] and before[i]["latest"]["ts"] == after[i]["latest"]["ts"] for i in run_ids):
            return Exposition(text), after
        time.sleep(0.05)
    pytest.fail("no scrape between two samples in 50 tries")


def check_run_against_json(expo, run):
    rid = run["id"]
    info = expo.labels_of("mlmond_run_info", run=rid)
    assert len(info) == 1, f"run {rid}: {len(info)} info series"
    assert info[0]["name"] == (run["name"] or "")
    assert info[0]["pid"] == str(run["pid"])
    assert info[0]["comm"] == run["comm"]
    assert expo.one("mlmond_run_info", run=rid) == 1
    assert expo.one("mlmond_run_registered_time_seconds", run=rid) == pytest.approx(run["registered_ts"] / 1000,
                                                                                    abs=1e-6)
    for metric, (part, field, scale) in RUN_FIELDS.items():
        if field not in run[part]:
            continue  # a figure this build does not have
        want, got = run[part][field], expo.get(metric, run=rid)
        if want is None:
            assert got == [], f"{metric}: {field} is null, yet exported as {got}"
            continue
        assert len(got) == 1, f"{metric}: {field} is {want}, exported {got}"
        # the JSON rounds fractions to 3 decimals
        assert got[0] == pytest.approx(want * scale, abs=0.0006 * scale), f"{metric} vs {field}"
        lab = expo.labels_of(metric, run=rid)[0]
        assert lab["name"] == (run["name"] or "") and lab["pid"] == str(run["pid"])
    assert expo.one("mlmond_run_leak_suspected", run=rid) == (1 if run["leak"]["suspected"] else 0)


def run_ids_exported(expo):
    return {lab["run"] for lab in expo.labels_of("mlmond_run_info")}


# ---- 1. the exposition: promtool, format, figures ------------------------------------

def test_metrics_agree_with_the_json_api(make_mlmond, helpers, agents):
    d = make_mlmond(interval="1s")
    weird = helpers("setname", WEIRD_COMM, "arg")
    weird.expect("ready")
    w = d.register(weird.pid, name=WEIRD_NAME)
    a = agents()
    ra = registered(d, a, name="server")
    gone = helpers("setname", "gone")
    gone.expect("ready")
    rg = d.register(gone.pid)["id"]
    dropped = helpers("setname", "dropped")
    dropped.expect("ready")
    rd = d.register(dropped.pid, name="dropped")["id"]

    # timings and counts from a registered process, over the StatsD socket
    values = lognormal_ms(2000, seed=6)
    send_timings(a, d.statsd_path, "inference", values)
    a.unix(d.statsd_path, ["requests:7|c\nrequests:7|c", "requests:7|c\nqueue:3|g"])
    settle(lambda: Exposition(scrape(d)).get("mlmond_run_op_duration_seconds_count", run=ra, op="inference"),
           [2000.0], "timings counted in /metrics")

    # one run unregistered, one exited: neither is exported any more
    st, _ = d.delete(f"/v1/runs/{rd}")
    assert st == 200
    gone.kill()
    wait_for(lambda: d.run(rg)["state"] == "exited", 5, what="the killed run to end")

    body = scrape(d)
    # (a) promtool: valid, and not one lint problem
    linted = shutil.which("promtool") is not None
    if linted:
        p = subprocess.run(["promtool", "check", "metrics"], input=body.encode(), capture_output=True, timeout=30)
        assert p.returncode == 0 and not p.stdout and not p.stderr, \
            f"promtool check metrics: {p.returncode}\n{p.stdout.decode()}{p.stderr.decode()}"

    # (b) the strict reader, and the figures of the JSON API
    expo, runs = consistent_scrape(d, [w["id"], ra])
    check_conventions(expo)
    assert run_ids_exported(expo) == {str(w["id"]), str(ra)}, "only running runs are exported"
    assert expo.get("mlmond_run_resident_memory_bytes", run=rg) == []
    assert expo.get("mlmond_run_resident_memory_bytes", run=rd) == []
    for rid in (w["id"], ra):
        check_run_against_json(expo, runs[rid])
    # the escaped labels read back to the bytes registered
    info = expo.labels_of("mlmond_run_info", run=w["id"])[0]
    assert info["name"] == WEIRD_NAME
    assert info["comm"] == 'q"\\\ufffd\nx'
    # no GPU on a process that never opened one: null in JSON, absent here
    if runs[w["id"]]["latest"]["gpu_mem_bytes"] is None:
        assert expo.get("mlmond_run_gpu_memory_bytes", run=w["id"]) == []

    # ops: counts and latency since registration, quantiles of the last minute
    assert expo.one("mlmond_run_ops_total", run=ra, op="inference") == 2000
    assert expo.one("mlmond_run_ops_total", run=ra, op="requests") == 21
    assert expo.get("mlmond_run_ops_total", run=ra, op="queue") == []  # a gauge is no op count
    assert expo.get("mlmond_run_op_duration_seconds_count", run=ra, op="requests") == []  # no timing: no summary
    assert expo.one("mlmond_run_op_duration_seconds_sum", run=ra, op="inference") == pytest.approx(
        math.fsum(values) / 1000, rel=1e-9)
    s = sorted(values)
    for q in (0.5, 0.9, 0.99):
        got = expo.one("mlmond_run_op_duration_seconds", run=ra, op="inference", quantile=q)
        want = exact_quantile(s, q * 100) / 1000
        assert got == pytest.approx(want, rel=QUANTILE_REL), f"quantile {q}: {got} vs exact {want}"
    assert expo.get("mlmond_run_op_duration_seconds", run=w["id"]) == []

    # host and daemon: what /v1/system and /v1/health say
    _, system = d.get("/v1/system")
    assert expo.one("mlmond_host_memory_total_bytes") == system["memory"]["total_bytes"]
    assert expo.one("mlmond_host_cpus") == system["ncpus"]
    assert {lab["mode"] for lab in expo.labels_of("mlmond_host_cpu_seconds_total")} >= {"user", "system", "idle"}
    _, health = d.get("/v1/health")
    assert expo.one("mlmond_runs_active") == health["runs_active"] == 2
    for key in ("statsd_received", "statsd_malformed", "statsd_unmatched", "db_write_errors"):
        assert expo.one(f"mlmond_{key}_total") == health[key], key
    assert expo.one("mlmond_statsd_received_total") == 2004
    assert 0 < expo.one("mlmond_ticks_total") <= health["ticks"]
    assert expo.one("mlmond_build_info", version=health["version"]) == 1

    # the totals hold as the slices close and go to the database ...
    time.sleep(2.5)
    later = Exposition(scrape(d))
    assert later.one("mlmond_run_ops_total", run=ra, op="inference") == 2000
    assert later.one("mlmond_run_op_duration_seconds_count", run=ra, op="inference") == 2000
    # ... and across a restart, read back from it (the process lives on)
    d.restart()
    restarted = Exposition(scrape(d))
    assert restarted.one("mlmond_run_ops_total", run=ra, op="requests") == 21
    assert restarted.one("mlmond_run_op_duration_seconds_count", run=ra, op="inference") == 2000
    assert restarted.one("mlmond_run_op_duration_seconds_sum", run=ra, op="inference") == pytest.approx(
        math.fsum(values) / 1000, rel=1e-9)
    # new timings add on
    send_timings(a, d.statsd_path, "inference", [5.0] * 10)
    settle(lambda: Exposition(scrape(d)).get("mlmond_run_op_duration_seconds_count", run=ra, op="inference"),
           [2010.0], "timings after the restart")
    if not linted:  # the rest ran: said as a skip, not passed over in silence
        needs("prometheus", "promtool is not installed (Debian package prometheus): the lint was not done")


def test_metrics_requests(mlmond):
    # HEAD, a query string, a write over the read-write socket
    r = mlmond.request("HEAD", "/metrics")
    assert r.status == 200 and r.headers["content-type"] == CONTENT_TYPE and r.body == b""
    r = mlmond.request("GET", "/metrics?format=json")
    assert r.status == 400 and r.json["error"]["code"] == "bad_request"
    r = mlmond.request("POST", "/metrics", {}, unix=True)
    assert r.status == 405 and "GET" in r.headers["allow"]
    # over the unix socket too, and answered from the cache while nothing changes
    a = mlmond.request("GET", "/metrics", unix=True)
    assert a.status == 200 and a.headers["content-type"] == CONTENT_TYPE
    # no runs: no run family at all, the host and the daemon are there
    expo = Exposition(a.body.decode())
    check_conventions(expo)
    assert not [n for n in expo.families if n.startswith("mlmond_run_")]
    assert expo.one("mlmond_runs_active") == 0


# ---- 2. a real Prometheus scrapes it -------------------------------------------------

class Prometheus:
    """A Prometheus server scraping mlmond on target_port (or on each of a
    list of ports) every `interval` (1s), evaluating the rule files `rules`
    as often; extra_args go on its command line."""

    def __init__(self, target_port, extra_args=(), interval="1s", rules=()):
        ports = target_port if isinstance(target_port, list) else [target_port]
        self.dir = tempfile.mkdtemp(prefix="mlmond-prom-")
        self.port = free_port()
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n"
                    f"  evaluation_interval: {interval}\n"
                    "scrape_configs:\n  - job_name: mlmond\n    static_configs:\n"
                    f"      - targets: [{', '.join(repr(f'127.0.0.1:{p}') for p in ports)}]\n")
            if rules:
                f.write(f"rule_files: [{', '.join(repr(r) for r in rules)}]\n")
        self.log = open(os.path.join(self.dir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}"] + list(extra_args),
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())

    def target(self):
        try:
            targets = self.api("/api/v1/targets")["data"]["activeTargets"]
        except OSError:
            return None
        return targets[0] if targets else None

    def logs(self):
        with open(os.path.join(self.dir, "prometheus.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def prometheus():
    if not shutil.which("prometheus"):
        needs("prometheus", "it is not installed (Debian package prometheus)")
    started = []

    def start(port):
        p = Prometheus(port)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def test_prometheus_scrapes_and_answers_promql(make_mlmond, helpers, prometheus):
    d = make_mlmond(interval="500ms")
    h = helpers("setname", WEIRD_COMM)
    h.expect("ready")
    rid = d.register(h.pid, name=WEIRD_NAME)["id"]
    d.wait_sample_after(rid, now_ms())

    prom = prometheus(d.port)

    def up():
        t = prom.target()
        if prom.proc.poll() is not None:
            pytest.fail(f"prometheus exited {prom.proc.returncode}:\n{prom.logs()}")
        if t and t["health"] == "down" and t.get("lastError"):
            pytest.fail(f"prometheus could not scrape mlmond: {t['lastError']}")
        return t and t["health"] == "up"
    wait_for(up, 60, interval=0.2, what="prometheus to scrape mlmond")

    def query(q):
        out = prom.api("/api/v1/query", query=q)
        assert out["status"] == "success", out
        return out["data"]["result"]

    res = wait_for(lambda: query(f'mlmond_run_resident_memory_bytes{{run="{rid}"}}'), 20, interval=0.2,
                   what="the run's resident memory in prometheus")
    assert len(res) == 1, res
    rss = d.run(rid)["latest"]["rss_bytes"]
    assert float(res[0]["value"][1]) == pytest.approx(rss, rel=0.03)
    # the escaped labels arrive as they were registered
    assert res[0]["metric"]["name"] == WEIRD_NAME
    assert res[0]["metric"]["pid"] == str(h.pid)
    info = query(f'mlmond_run_info{{run="{rid}"}}')
    assert len(info) == 1 and info[0]["metric"]["comm"] == 'q"\\\ufffd\nx'
    # a counter behaves as one: PromQL takes its rate
    rate = wait_for(lambda: query("rate(mlmond_ticks_total[5s])"), 15, interval=0.2, what="a rate of ticks")
    assert float(rate[0]["value"][1]) > 0
    # the scrape was clean: no sample rejected, the target healthy
    t = prom.target()
    assert t["health"] == "up" and not t["lastError"], t

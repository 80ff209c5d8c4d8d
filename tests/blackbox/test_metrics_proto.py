# SPDX-License-Identifier: MIT
"""GET /metrics in the Prometheus protobuf format, end to end: the real
daemon answers the Accept header Prometheus sends for native histograms
with a stream of length-delimited io.prometheus.client.MetricFamily
messages. The stream is decoded with Debian's python3-protobuf and the
metrics.proto Prometheus's client_model ships (compiled here by protoc);
it must hold every family of the text format with the same series, and
the op latency as a native histogram whose buckets add up to its exact
count, each timing sent in the bucket whose bounds hold it, growing from
scrape to scrape (totals since registration)."""

import collections
import importlib
import math
import os
import subprocess
import sys

import pytest

from conftest import wait_for
from test_latency import lognormal_ms, send_timings
from test_metrics import WEIRD_COMM, WEIRD_NAME, Exposition, scrape
from test_statsd import agents, registered, settle  # noqa: F401

PROTO_CT = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
# what Prometheus 2.42 sends with --enable-feature=native-histograms
PROM_ACCEPT = ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,"
               "application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;"
               "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
METRICS_PROTO = "/usr/share/gocode/src/github.com/prometheus/client_model/io/prometheus/client/metrics.proto"


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """The metrics_pb2 module, compiled from client_model's metrics.proto."""
    out = tmp_path_factory.mktemp("pb")
    subprocess.run(["protoc", f"--proto_path={os.path.dirname(METRICS_PROTO)}", "--proto_path=/usr/include",
                    f"--python_out={out}", METRICS_PROTO], check=True)
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("metrics_pb2")
    finally:
        sys.path.remove(str(out))


def decode(pb, body):
    """The MetricFamily messages of a delimited stream: a varint length,
    then that many bytes, to the end."""
    fams, i = [], 0
    while i < len(body):
        n, shift = 0, 0
        while True:
            b = body[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        assert i + n <= len(body), "a message runs past the end of the stream"
        f = pb.MetricFamily()
        f.ParseFromString(body[i:i + n])
        fams.append(f)
        i += n
    return fams


def scrape_proto(pb, d, accept=PROM_ACCEPT):
    r = d.request("GET", "/metrics", headers={"Accept": accept})
    assert r.status == 200, (r.status, r.body[:300])
    assert r.headers["content-type"] == PROTO_CT
    return {f.name: f for f in decode(pb, r.body)}


def labels_of(m):
    return {lp.name: lp.value for lp in m.label}


def buckets(h):
    """{index: count} of a native histogram's positive buckets."""
    out, idx, count, k = {}, 0, 0, 0
    for s in h.positive_span:
        idx += s.offset
        for _ in range(s.length):
            count += h.positive_delta[k]
            k += 1
            out[idx] = count
            idx += 1
    assert k == len(h.positive_delta), "spans and deltas disagree"
    return out


def bucket_index(v_ms):
    """The schema-7 bucket of a timing: the i with
    2^((i-1)/128) < v_ms / 1000 <= 2^(i/128), as Prometheus defines it."""
    s = v_ms / 1000.0
    i = math.ceil(math.log2(s) * 128)
    while 2 ** ((i - 1) / 128) >= s:  # log2's last bit, at a bound
        i -= 1
    while 2 ** (i / 128) < s:
        i += 1
    return i


def check_every_value_in_its_bucket(h, values):
    """Each timing sent is counted in the bucket whose bounds hold it, and
    no bucket counts anything else: the decoded spans and deltas against
    the buckets computed here from the values themselves."""
    want = dict(collections.Counter(bucket_index(v) for v in values))
    got = buckets(h)
    wrong = sorted(i for i in set(want) | set(got) if want.get(i) != got.get(i))
    assert not wrong, "buckets whose count is not the timings' in (2^((i-1)/128), 2^(i/128)] s: " + ", ".join(
        f"{i}: {got.get(i, 0)} vs {want.get(i, 0)}" for i in wrong[:10])


def check_native(h, count, sum_s):
    assert h.schema == 7
    assert h.zero_threshold == 1e-9
    assert h.sample_count == count
    assert h.sample_sum == pytest.approx(sum_s, rel=1e-9)
    b = buckets(h)
    assert all(c > 0 for c in b.values()), b
    assert h.zero_count + sum(b.values()) == count
    return b


def native_of(fams, **labels):
    fam = fams["mlmond_run_op_duration_seconds"]
    found = [m for m in fam.metric if labels.items() <= labels_of(m).items()]
    assert len(found) == 1, (labels, [labels_of(m) for m in fam.metric])
    return found[0].histogram


def test_protobuf_has_every_family_and_a_native_histogram(make_mlmond, helpers, agents, pb):
    d = make_mlmond(interval="1s")
    weird = helpers("setname", WEIRD_COMM, "arg")
    weird.expect("ready")
    d.register(weird.pid, name=WEIRD_NAME)
    a = agents()
    ra = registered(d, a, name="server")
    values = lognormal_ms(2000, seed=11)
    send_timings(a, d.statsd_path, "inference", values)
    a.unix(d.statsd_path, ["requests:7|c\nqueue:3|g"])
    settle(lambda: Exposition(scrape(d)).get("mlmond_run_op_duration_seconds_count", run=ra, op="inference"),
           [2000.0], "timings counted in /metrics")

    text = Exposition(scrape(d))
    fams = scrape_proto(pb, d)
    assert set(fams) == set(text.families)
    types = {"gauge": pb.GAUGE, "counter": pb.COUNTER, "summary": pb.HISTOGRAM}
    for name, fam in text.families.items():
        assert fams[name].type == types[fam["type"]], name
        assert fams[name].help, name
        if fam["type"] == "summary":
            continue
        want = sorted(sorted(lab.items()) for _, lab, _ in fam["samples"])
        got = sorted(sorted(labels_of(m).items()) for m in fams[name].metric)
        assert got == want, name
        for m in fams[name].metric:
            assert m.HasField("counter" if fam["type"] == "counter" else "gauge"), name
    # figures that hold still between the two scrapes are the same
    for name in ("mlmond_run_info", "mlmond_run_registered_time_seconds", "mlmond_run_ops_total",
                 "mlmond_statsd_received_total", "mlmond_host_cpus", "mlmond_run_app_value"):
        want = {tuple(sorted(lab.items())): v for _, lab, v in text.families[name]["samples"]}
        got = {tuple(sorted(labels_of(m).items())): (m.counter.value if m.HasField("counter") else m.gauge.value)
               for m in fams[name].metric}
        assert got == want, name
    # labels arrive unescaped: the registered name, the repaired comm
    info = [labels_of(m) for m in fams["mlmond_run_info"].metric]
    assert WEIRD_NAME in [lab["name"] for lab in info]
    assert 'q"\\\ufffd\nx' in [lab["comm"] for lab in info]

    # the latency: one native histogram per run and op, with the text's labels
    dur = fams["mlmond_run_op_duration_seconds"]
    want = [lab for n, lab, _ in text.families["mlmond_run_op_duration_seconds"]["samples"] if n.endswith("_count")]
    assert sorted(sorted(labels_of(m).items()) for m in dur.metric) == sorted(sorted(w.items()) for w in want)
    h = native_of(fams, run=str(ra), op="inference")
    before = check_native(h, 2000, sum(values) / 1000)
    check_every_value_in_its_bucket(h, values)
    assert text.one("mlmond_run_op_duration_seconds_sum", run=ra, op="inference") == pytest.approx(h.sample_sum)

    # totals since registration: more timings only add to every bucket
    more = lognormal_ms(500, seed=12)
    send_timings(a, d.statsd_path, "inference", more)
    h = wait_for(lambda: (lambda x: x if x.sample_count == 2500 else None)(
        native_of(scrape_proto(pb, d), run=str(ra), op="inference")), 10, what="2500 timings in the histogram")
    after = check_native(h, 2500, (sum(values) + sum(more)) / 1000)
    check_every_value_in_its_bucket(h, values + more)
    assert all(after.get(i, 0) >= c for i, c in before.items())


def test_accept_negotiation(mlmond, pb):
    def ct(accept):
        r = mlmond.request("GET", "/metrics", headers={"Accept": accept} if accept is not None else None)
        assert r.status == 200
        return r.headers["content-type"]

    text_ct = "text/plain; version=0.0.4; charset=utf-8"
    proto = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
    assert ct(None) == text_ct
    assert ct("text/plain") == text_ct
    assert ct("*/*") == text_ct
    assert ct(PROM_ACCEPT) == PROTO_CT
    assert ct(proto) == PROTO_CT
    assert ct(proto + ";q=0.4,text/plain;q=0.5") == text_ct
    assert ct(proto + ";q=0.6,text/plain;q=0.5") == PROTO_CT
    assert ct("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily") == text_ct  # not delimited
    assert ct("application/vnd.google.protobuf;proto=other.Message;encoding=delimited") == text_ct
    assert ct(proto + ";q=0") == text_ct
    assert ct("bogus;;;q=x,,") == text_ct
    # the answer cache keeps the two formats apart (both asked within its lifetime)
    for _ in range(3):
        assert ct(PROM_ACCEPT) == PROTO_CT
        assert ct(None) == text_ct
    assert scrape_proto(pb, mlmond)["mlmond_runs_active"].metric[0].gauge.value == 0

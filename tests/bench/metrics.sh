#!/bin/bash
# SPDX-License-Identifier: MIT
#
# GET /metrics throughput against Debian's prometheus-node-exporter: mlmond
# (a release build) with RUNS registered processes (real sleeping ones; each
# run also gets OPS ops of 100 StatsD timings, so the op counters and latency
# summaries are in the exposition), and node_exporter with its default
# collectors, both on loopback; wrk -t2 -c32 -d10s against each /metrics,
# interleaved, REPS times. Prints req/s of both, per repetition and in the
# median, the ratio mlmond / node_exporter, and each exposition's size and
# series count.
#
# Without -R, the applications are quiet after the setup: the data changes
# once per sampling tick (1 s), and mlmond answers repeated scrapes from its
# GET cache in between (at most 250 ms). -R RATE adds a sender of RATE
# timings/s to run 1, one per datagram: every datagram moves the data
# generation, so a cached answer lives at most 1/RATE s. Before the wrk runs,
# the time of one scrape is measured both ways: right after a StatsD line
# (a full render) and again at once (from the cache).
# mlmond runs with [http] per_ip_connection_limit = 64: the default (16)
# would refuse half of wrk's 32 connections from 127.0.0.1.
#
# Goal: mlmond >= 10x node_exporter's req/s.
#
# Needs (installs nothing): wrk, prometheus-node-exporter, curl, meson, ninja, gcc.
#
# usage: tests/bench/metrics.sh [-n RUNS] [-o OPS] [-r REPS] [-d SECONDS] [-c CONNS] [-t THREADS]
#                               [-R RATE] [-m MLMOND] [-B BUILDDIR] [-k] [-S]
#   defaults: -n 100 -o 2 -r 3 -d 10 -c 32 -t 2 -R 0
#   -m: an mlmond binary to use; else a release build in BUILDDIR (default
#       build-bench-metrics in the source tree) is set up or brought up to date.
# Exit status: 0 ran, 1 mlmond misbehaved (errors, non-2xx answers, crash), 2 setup error,
# 3 goal missed with -S.
set -u -o pipefail

SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/bench/lib.sh
. "$SRCDIR/tests/bench/lib.sh"
bench_parse_options n:RUNS=100 o:OPS=2 r:REPS=3 d:DUR=10 c:CONNS=32 t:THREADS=2 R:RATE=0 \
        "B:BUILDDIR=$SRCDIR/build-bench-metrics" -- "$@"

for v in RUNS OPS REPS DUR CONNS THREADS RATE; do [[ ${!v} =~ ^[0-9]+$ ]] || die "bad $v"; done
((RUNS >= 1)) || die "at least one run"
missing=()
command -v wrk >/dev/null || missing+=(wrk)
NODE_EXPORTER=$(command -v prometheus-node-exporter || command -v node_exporter) || missing+=(prometheus-node-exporter)
command -v curl >/dev/null || missing+=(curl)
if [[ -z $MLMOND ]]; then
        command -v meson >/dev/null || missing+=(meson)
        command -v ninja >/dev/null || missing+=(ninja-build)
fi
((RATE == 0)) || command -v gcc >/dev/null || missing+=(gcc)
((${#missing[@]} == 0)) || die "needs: ${missing[*]} (apt-get install -y ${missing[*]})"
PY=/usr/bin/python3

if [[ -z $MLMOND ]]; then
        if [[ ! -d $BUILDDIR ]]; then
                meson setup "$BUILDDIR" "$SRCDIR" --buildtype=release >/dev/null || die "meson setup $BUILDDIR failed"
        fi
        ninja -C "$BUILDDIR" daemon/mlmond >/dev/null || die "building $BUILDDIR failed"
        MLMOND=$BUILDDIR/daemon/mlmond
fi
[[ -x $MLMOND ]] || die "$MLMOND is not an executable"

TMP=$(mktemp -d /var/tmp/mlmond-metrics.XXXXXX) || die "mktemp failed"
MLMOND_PID=
NODE_PID=
SENDER_PID=
SLEEPERS=()
# shellcheck disable=SC2317 # bench_exit (lib.sh) runs it
bench_cleanup() {
        exec 3>&- 2>/dev/null
        for p in $SENDER_PID $NODE_PID "${SLEEPERS[@]}"; do kill "$p" 2>/dev/null; done
        for p in $SENDER_PID $NODE_PID "${SLEEPERS[@]}"; do wait "$p" 2>/dev/null; done
}
bench_traps


# --- mlmond, RUNS sleeping processes registered, OPS ops of timings each ---
start_mlmond $'[http]\nper_ip_connection_limit = 64\n'

for ((i = 0; i < RUNS; i++)); do
        sleep 100000 &
        SLEEPERS+=($!)
done
IDS=()
for ((i = 0; i < RUNS; i++)); do
        id=$(ucurl -X POST -H 'Content-Type: application/json' \
                -d "{\"pid\":${SLEEPERS[i]},\"name\":\"bench-$i\",\"tags\":{\"job\":\"metrics-bench\"}}" http://x/v1/runs |
                json 'd["id"]') || die "registering run $i failed"
        IDS+=("$id")
done
"$PY" - "$TMP/statsd.sock" "$OPS" "${IDS[@]}" <<'EOF' || die "sending the timings failed"
import random, socket, sys
path, ops, ids = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rng = random.Random(6)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for rid in ids:
    for k in range(ops):
        lines = [f"op{k}:{rng.lognormvariate(2, 0.5):.3f}|ms|#run:{rid}" for _ in range(100)]
        s.sendto("\n".join(lines).encode(), path)
EOF

if ((RATE > 0)); then
        gcc -O2 -Wall -o "$TMP/statsd_send" "$SRCDIR/tests/bench/statsd_send.c" -lm || die "cannot build statsd_send"
        mkfifo "$TMP/go"
        exec 3<>"$TMP/go"
        total_s=$((REPS * 2 * (DUR + 2) + 60))
        "$TMP/statsd_send" unix "$TMP/statsd.sock" -b -r "$RATE" -l 1 -d "$total_s" -o live -t "run:${IDS[0]}" <&3 \
                >"$TMP/send.out" &
        SENDER_PID=$!
        echo go >&3
fi

# --- node_exporter, default collectors ---
NPORT=$(free_port)
"$NODE_EXPORTER" --web.listen-address="127.0.0.1:$NPORT" >"$TMP/node.log" 2>&1 &
NODE_PID=$!
NURL="http://127.0.0.1:$NPORT/metrics"
LURL="http://127.0.0.1:$PORT/metrics"
for _ in $(seq 100); do curl -sf "$NURL" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf "$NURL" >/dev/null || { cat "$TMP/node.log" >&2; die "node_exporter did not come up"; }

sleep 3 # a few ticks: every run has samples and rates
echo "/metrics benchmark: wrk -t$THREADS -c$CONNS -d${DUR}s, $REPS repetitions, interleaved; binary $MLMOND"
echo "$(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); $(wrk -v 2>&1 | head -1);" \
        "$("$NODE_EXPORTER" --version 2>&1 | head -1)"
echo "mlmond: $RUNS runs, $OPS ops of 100 timings each;" \
        "$( ((RATE > 0)) && echo "a sender of $RATE timings/s, one per datagram" || echo "applications quiet after the setup")"
expo_stats() { # url -> "bytes series families"
        curl -sf "$1" | "$PY" -c '
import sys
t = sys.stdin.read()
lines = [l for l in t.splitlines() if l and not l.startswith("#")]
fams = [l for l in t.splitlines() if l.startswith("# TYPE ")]
print(len(t.encode()), len(lines), len(fams))'
}
read -r l_bytes l_series l_fams < <(expo_stats "$LURL")
read -r n_bytes n_series n_fams < <(expo_stats "$NURL")
echo "mlmond exposition: $l_bytes bytes, $l_series series in $l_fams families;" \
        "node_exporter: $n_bytes bytes, $n_series series in $n_fams families"

# one scrape right after a StatsD line (rendered) and one at once after it (cached)
"$PY" - "$TMP/statsd.sock" "${IDS[0]}" "$LURL" <<'EOF'
import socket, statistics, sys, time, urllib.request
path, rid, url = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def get():
    t = time.perf_counter()
    with urllib.request.urlopen(url) as r:
        r.read()
    return (time.perf_counter() - t) * 1000
rendered, cached = [], []
for i in range(50):
    s.sendto(f"probe:1|c|#run:{rid}".encode(), path)
    time.sleep(0.02)
    rendered.append(get())
    cached.append(get())
print(f"one scrape (python urllib, new connection): {statistics.median(rendered):.2f} ms rendered,"
      f" {statistics.median(cached):.2f} ms from the cache (medians of 50)")
EOF


wrk_compare node_exporter "$NURL" "$LURL" 10 x

#!/bin/bash
# SPDX-License-Identifier: MIT
#
# HTTP throughput against a minimal libmicrohttpd server: wrk -t2 -c32 -d10s
# against tests/bench/mhd_minimal.c (built here; internal polling thread +
# epoll, a fixed 400-byte JSON body) and against mlmond's
# GET /v1/runs/ID/latency?window=1m with data in that window, interleaved,
# REPS times. Prints req/s of both, per repetition and in the median, and
# the ratio mlmond / minimal.
#
# The run's data: a registered sender (tests/bench/statsd_send.c) sends RATE
# timings/s over the StatsD unix socket from PREFILL seconds before the first
# wrk run to the end, so the 1-minute window stays full.
# mlmond runs with [http] per_ip_connection_limit = 64: the default (16)
# would refuse half of wrk's 32 connections from 127.0.0.1.
#
# Goal: mlmond >= 75% of the minimal server's req/s.
#
# usage: tests/bench/http_latency.sh [-r REPS] [-d SECONDS] [-c CONNS] [-t THREADS] [-R RATE]
#                                    [-P PREFILL] [-m MLMOND] [-k] [-S]
#   defaults: -r 3 -d 10 -c 32 -t 2 -R 1000 -P 60
# Exit status: 0 ran, 1 mlmond misbehaved (errors, non-2xx answers, crash), 2 setup error,
# 3 goal missed with -S.
set -u -o pipefail

SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/bench/lib.sh
. "$SRCDIR/tests/bench/lib.sh"
bench_parse_options r:REPS=3 d:DUR=10 c:CONNS=32 t:THREADS=2 R:RATE=1000 P:PREFILL=60 -- "$@"

for v in REPS DUR CONNS THREADS RATE PREFILL; do [[ ${!v} =~ ^[0-9]+$ ]] || die "bad $v"; done
find_mlmond build-t3 build-bench build
command -v wrk >/dev/null || die "wrk is needed (apt-get install -y wrk)"
for t in gcc curl pkg-config; do command -v $t >/dev/null || die "$t is needed"; done
pkg-config --exists libmicrohttpd || die "libmicrohttpd-dev is needed"
PY=/usr/bin/python3

TMP=$(mktemp -d /var/tmp/mlmond-http.XXXXXX) || die "mktemp failed"
MLMOND_PID=
MHD_PID=
SENDER_PID=
# shellcheck disable=SC2317 # bench_exit (lib.sh) runs it
bench_cleanup() {
        exec 3>&- 4>&- 2>/dev/null
        for p in $SENDER_PID $MHD_PID; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}
bench_traps

# shellcheck disable=SC2046 # pkg-config prints several words on purpose
gcc -O2 -Wall -o "$TMP/mhd_minimal" "$SRCDIR/tests/bench/mhd_minimal.c" $(pkg-config --cflags --libs libmicrohttpd) ||
        die "cannot build mhd_minimal"
gcc -O2 -Wall -o "$TMP/statsd_send" "$SRCDIR/tests/bench/statsd_send.c" -lm || die "cannot build statsd_send"

# --- mlmond, and a registered sender feeding one op ---
start_mlmond $'[http]\nper_ip_connection_limit = 64\n'

mkfifo "$TMP/go"
exec 3<>"$TMP/go"
total_s=$((PREFILL + REPS * 2 * (DUR + 2) + 60))
"$TMP/statsd_send" unix "$TMP/statsd.sock" -b -r "$RATE" -d "$total_s" -o inference <&3 >"$TMP/send.out" &
SENDER_PID=$!
for _ in $(seq 100); do [[ -s $TMP/send.out ]] && break; sleep 0.05; done
read -r _ spid <"$TMP/send.out"
RUN=$(ucurl -X POST -H 'Content-Type: application/json' -d "{\"pid\":$spid,\"name\":\"http-bench\"}" http://x/v1/runs |
        json 'd["id"]') || die "registering the sender failed"
echo go >&3

# --- the minimal server ---
MPORT=$(free_port)
mkfifo "$TMP/mhd_in"
exec 4<>"$TMP/mhd_in"
"$TMP/mhd_minimal" "$MPORT" <&4 >"$TMP/mhd.out" &
MHD_PID=$!
for _ in $(seq 100); do [[ -s $TMP/mhd.out ]] && break; sleep 0.05; done
[[ -s $TMP/mhd.out ]] || die "mhd_minimal did not start"

MURL="http://127.0.0.1:$MPORT/v1/runs/$RUN/latency?window=1m"
LURL="http://127.0.0.1:$PORT/v1/runs/$RUN/latency?window=1m"
echo "HTTP benchmark: wrk -t$THREADS -c$CONNS -d${DUR}s, $REPS repetitions, interleaved; binary $MLMOND"
echo "$(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); $(wrk -v 2>&1 | head -1)"
echo "filling the window: $RATE timings/s for $PREFILL s ..."
sleep "$PREFILL"
count() { curl -sf "$LURL" | json 'd["ops"].get("inference", {}).get("count", 0)'; }
echo "mlmond answer: $(curl -sf "$LURL" | wc -c) bytes, $(count) timings in the window;" \
        "minimal answer: $(curl -sf "$MURL" | wc -c) bytes"


wrk_compare minimal "$MURL" "$LURL" 0.75 %
rc=$?
echo "after: $(count) timings in the window"
exit $rc

#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Latency query benchmark: 1 000 000 timings in one run, spread over the
# slices of about LOAD seconds (sent over the StatsD unix socket by
# tests/bench/statsd_send.c, built here), then 100 requests of
# GET /v1/runs/ID/latency?window=2m over TCP: the server's time per request
# (curl's time_starttransfer - time_pretransfer, one kept-alive connection),
# median and p99, and mlmond's CPU per request (schedstat). Measured twice:
# while the run is running (stored slices + the ones in memory), and after
# it ended (stored slices only).
#
# Goal: <= 1 ms per request.
#
# usage: tests/bench/latency_query.sh [-n TIMINGS] [-L LOAD_SECONDS] [-o OPS] [-q REQUESTS]
#                                     [-m MLMOND] [-t TMPBASE] [-k] [-S]
#   -n TIMINGS   timings to load (default 1000000)
#   -L SECONDS   spread them over this long (default 50; at most 110, the window is 2m)
#   -o OPS       spread them over this many op names (default 1)
#   -q REQUESTS  requests per measurement (default 100)
#   -m PATH      mlmond binary (default $MLMOND, else build-t3/, build-bench/, build/)
#   -t DIR       where the temporary directory goes (default /var/tmp; not tmpfs)
#   -k           keep the temporary directory
#   -S           strict: exit 3 if the goal is missed
# Exit status: 0 ran, 1 mlmond misbehaved (wrong count, crash, errors logged), 2 setup error.
set -u -o pipefail

SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/bench/lib.sh
. "$SRCDIR/tests/bench/lib.sh"
bench_parse_options n:N=1000000 L:LOAD=50 o:OPS=1 q:Q=100 "t:TMPBASE=${TMPDIR_BENCH:-/var/tmp}" -- "$@"

[[ $N =~ ^[0-9]+$ && $N -ge 1 ]] || die "-n must be a positive integer"
[[ $LOAD =~ ^[0-9]+$ && $LOAD -ge 1 && $LOAD -le 110 ]] || die "-L must be an integer in 1..110"
[[ $OPS =~ ^[0-9]+$ && $OPS -ge 1 && $OPS -le 256 ]] || die "-o must be an integer in 1..256"
[[ $Q =~ ^[0-9]+$ && $Q -ge 2 ]] || die "-q must be an integer >= 2"
find_mlmond build-t3 build-bench build
for t in gcc curl python3; do command -v $t >/dev/null || die "$t is needed"; done
PY=/usr/bin/python3

mkdir -p "$TMPBASE" || die "cannot create $TMPBASE"
TMP=$(mktemp -d "$TMPBASE/mlmond-latq.XXXXXX") || die "mktemp failed"
fstype=$(stat -f -c %T "$TMP")
[[ $fstype == tmpfs || $fstype == ramfs ]] && { rm -rf "$TMP"; die "$TMPBASE is $fstype; use -t DIR"; }

MLMOND_PID=
SENDERS=()
# shellcheck disable=SC2317 # bench_exit (lib.sh) runs it
bench_cleanup() {
        for p in "${SENDERS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}
bench_traps

gcc -O2 -Wall -o "$TMP/statsd_send" "$SRCDIR/tests/bench/statsd_send.c" -lm || die "cannot build statsd_send"
sched_ns() { local s=0 a t; for t in /proc/$1/task/*/schedstat; do read -r a _ <"$t" && s=$((s + a)); done; echo $s; }

start_mlmond ""

echo "latency query benchmark: $N timings over ~$LOAD s in $OPS op(s), $Q requests per measurement; binary $MLMOND"
echo "$(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# --- load: one sender process per op, all into the run of the first (registered;
# the others tag their lines with #run:ID) ---
per_op=$(((N + OPS - 1) / OPS))
rate=$(((per_op + LOAD - 1) / LOAD))
mkfifo "$TMP/go"
exec 3<>"$TMP/go"
# the parent sender: its stdin is the fifo, so it waits for "go" and then, after
# sending, for the fifo to close
"$TMP/statsd_send" unix "$TMP/statsd.sock" -b -r "$rate" -d $((LOAD + 5)) -n "$per_op" -o op0 <&3 >"$TMP/send0.out" &
SENDERS+=($!)
for _ in $(seq 100); do [[ -s $TMP/send0.out ]] && break; sleep 0.05; done
read -r _ spid <"$TMP/send0.out"
RUN=$(ucurl -X POST -H 'Content-Type: application/json' -d "{\"pid\":$spid,\"name\":\"latq\"}" http://x/v1/runs | json 'd["id"]') ||
        die "registering the sender failed"
t_load=$(date +%s.%N)
echo go >&3
# more ops: senders registered under the same run via #run tags
for ((i = 1; i < OPS; i++)); do
        # tagged lines need no living sender: it may exit as soon as it is done
        echo go | "$TMP/statsd_send" unix "$TMP/statsd.sock" -b -r "$rate" -d $((LOAD + 5)) -n "$per_op" -o "op$i" \
                -t "run:$RUN" >"$TMP/send$i.out" &
        SENDERS+=($!)
done
want=$((per_op * OPS))
# wait for every timing to be taken
deadline=$((SECONDS + LOAD + 60))
while :; do
        got=$(curl -sf "http://127.0.0.1:$PORT/v1/runs/$RUN/latency?window=2m" |
                json 'sum(o["count"] for o in d["ops"].values())') || got=0
        ((got >= want)) && break
        ((SECONDS > deadline)) && { echo "MLMOND: only $got of $want timings taken after $((LOAD + 60)) s" >&2; exit 1; }
        sleep 0.5
done
load_s=$("$PY" -c "import time; print(f'{time.time() - $t_load:.1f}')")
echo "loaded $got timings in run $RUN in $load_s s; daemon RSS $(awk '$1 == "VmRSS:" {print $2, $3}' /proc/$MLMOND_PID/status)"
sleep 2 # past the next tick: the closed slices are stored

measure() { # label
        local url="http://127.0.0.1:$PORT/v1/runs/$RUN/latency?window=2m"
        local args=() i
        for ((i = 0; i < Q; i++)); do args+=(-o /dev/null "$url"); done
        # a first request, checked, warms the connection and the page cache
        local first
        first=$(curl -sf "$url") || { echo "MLMOND: the query failed" >&2; exit 1; }
        local count
        count=$(echo "$first" | json 'sum(o["count"] for o in d["ops"].values())')
        if [[ $count != "$want" ]]; then
                echo "MLMOND: count $count in the answer, expected $want" >&2
                exit 1
        fi
        local c0 c1
        c0=$(sched_ns $MLMOND_PID)
        curl -sf -w '%{time_pretransfer} %{time_starttransfer} %{size_download}\n' "${args[@]}" >"$TMP/times" ||
                { echo "MLMOND: a query failed" >&2; exit 1; }
        c1=$(sched_ns $MLMOND_PID)
        "$PY" - "$TMP/times" "$c0" "$c1" "$1" "$Q" <<'EOF'
import math, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
t = sorted((s - p) * 1000.0 for p, s, _ in rows)
n = len(t)
med = t[n // 2] if n % 2 else (t[n // 2 - 1] + t[n // 2]) / 2
p99 = t[min(n - 1, math.ceil(0.99 * n) - 1)]
cpu = (int(sys.argv[3]) - int(sys.argv[2])) / 1e6 / int(sys.argv[5])
print(f"{sys.argv[4]}: server time per request over {n}: median {med:.3f} ms, p99 {p99:.3f} ms, "
      f"min {t[0]:.3f} ms, max {t[-1]:.3f} ms; mlmond CPU {cpu:.3f} ms/request; body {int(rows[0][2])} bytes")
print(f"RESULT {sys.argv[4].split()[0]} {med:.3f} {p99:.3f} {cpu:.3f}")
EOF
}

measure "running (stored + in-memory slices)" | tee "$TMP/m1"
# end the run: the senders exit, the last slices are stored
exec 3>&-
for p in "${SENDERS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
SENDERS=()
for _ in $(seq 100); do
        st=$(ucurl "http://x/v1/runs/$RUN" | json 'd["state"]')
        [[ $st != running ]] && break
        sleep 0.1
done
echo "run $RUN is $st"
measure "ended (stored slices only)" | tee "$TMP/m2"

mlmond_log_clean || exit 1
worst=$(cat "$TMP/m1" "$TMP/m2" | awk '$1 == "RESULT" && $3 > w { w = $3 } END { print w + 0 }')
if awk -v w="$worst" 'BEGIN { exit !(w <= 1.0) }'; then
        echo "goal <= 1 ms per request: met (worst median $worst ms)"
else
        echo "goal <= 1 ms per request: MISSED (worst median $worst ms)"
        ((STRICT)) && exit 3
fi
exit 0

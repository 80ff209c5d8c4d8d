# Shared by the benchmarks (http_latency.sh, latency_query.sh, metrics.sh, sampling.sh); sourced,
# not run. Expects SRCDIR (the source tree); the helpers below also use PY (a python3), TMP (the
# run's scratch directory) and MLMOND (the binary) once the script has set them.
# shellcheck shell=bash

# die MESSAGE: a setup error: the message on stderr, exit status 2.
die() { echo "${0##*/}: $*" >&2; exit 2; }

# bench_parse_options SPEC... -- "$@": the script's own options and the common ones (-m PATH:
# the mlmond binary, default $MLMOND; -k: keep the temporary directory; -S: strict; -h: the
# script's header comment as help). A SPEC is "x:VAR=DEFAULT" (-x VALUE sets VAR, DEFAULT
# otherwise) or "x+VAR" (-x sets VAR to 1, 0 otherwise). An unknown option exits 2.
bench_parse_options() {
        local specs=() spec optstring=h o
        while [[ $1 != -- ]]; do specs+=("$1"); shift; done
        shift
        specs+=("m:MLMOND=${MLMOND:-}" k+KEEP S+STRICT)
        for spec in "${specs[@]}"; do
                if [[ $spec == ?:* ]]; then
                        optstring+=${spec:0:2}
                        spec=${spec:2}
                        printf -v "${spec%%=*}" '%s' "${spec#*=}"
                else
                        optstring+=${spec:0:1}
                        printf -v "${spec:2}" 0
                fi
        done
        OPTIND=1
        while getopts "$optstring" o; do
                case $o in
                h) sed -n '3,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
                '?') exit 2 ;;
                esac
                for spec in "${specs[@]}"; do
                        [[ ${spec:0:1} == "$o" ]] || continue
                        if [[ $spec == ?:* ]]; then
                                spec=${spec:2}
                                printf -v "${spec%%=*}" '%s' "$OPTARG"
                        else
                                printf -v "${spec:2}" 1
                        fi
                done
        done
}

# find_mlmond BUILDDIR...: unless MLMOND is set, the first SRCDIR/BUILDDIR/daemon/mlmond that is
# an executable; dies if there is none.
find_mlmond() {
        local d
        if [[ -z $MLMOND ]]; then
                for d in "$@"; do
                        [[ -x $SRCDIR/$d/daemon/mlmond ]] && { MLMOND=$SRCDIR/$d/daemon/mlmond; break; }
                done
        fi
        [[ -x $MLMOND ]] || die "mlmond binary not found (build it, or pass -m PATH / MLMOND=)"
}

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ucurl() { curl -sf --max-time 30 --unix-socket "$TMP/sock" "$@"; }
json() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# bench_traps: from now on, the script's exit (also by SIGINT or SIGTERM: status 130, 143) runs its
# bench_cleanup (which ends what the script started, in its order), stops mlmond, and removes TMP
# unless KEEP; the exit status stays the script's.
bench_traps() {
        trap bench_exit EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
}
bench_exit() {
        local rc=$?
        trap - EXIT INT TERM
        bench_cleanup
        stop_mlmond
        if ((KEEP)); then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
        exit "$rc"
}

# start_mlmond CONFIG_TEXT: mlmond on a free loopback port (PORT), its unix socket and StatsD socket
# in TMP, log in TMP/mlmond.log; returns once /v1/health answers (else exits 1 with the log: mlmond
# misbehaved). Sets PORT and MLMOND_PID.
start_mlmond() {
        PORT=$(free_port)
        printf '%s' "$1" >"$TMP/mlmond.conf"
        "$MLMOND" -c "$TMP/mlmond.conf" --db "$TMP/db" --listen "127.0.0.1:$PORT" --socket "$TMP/sock" \
                --statsd-socket "$TMP/statsd.sock" --statsd-udp none >>"$TMP/mlmond.log" 2>&1 &
        MLMOND_PID=$!
        for _ in $(seq 300); do
                ucurl http://x/v1/health >/dev/null 2>&1 && return 0
                kill -0 "$MLMOND_PID" 2>/dev/null || break
                sleep 0.1
        done
        ucurl http://x/v1/health >/dev/null 2>&1 && return 0
        echo "${0##*/}: mlmond did not come up; its log:" >&2
        cat "$TMP/mlmond.log" >&2
        exit 1
}

# stop_mlmond: SIGTERM, up to 15 s for a clean exit, then SIGKILL (also for the cleanup traps).
# Sets STOP_STATUS to mlmond's exit status ("timeout" when it had to be killed) and clears
# MLMOND_PID.
stop_mlmond() {
        local rc
        STOP_STATUS=
        [[ -n ${MLMOND_PID:-} ]] || return 0
        kill -TERM "$MLMOND_PID" 2>/dev/null
        for _ in $(seq 150); do kill -0 "$MLMOND_PID" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$MLMOND_PID" 2>/dev/null; then
                STOP_STATUS=timeout
                kill -KILL "$MLMOND_PID" 2>/dev/null
        fi
        wait "$MLMOND_PID" 2>/dev/null
        rc=$?
        [[ $STOP_STATUS == timeout ]] || STOP_STATUS=$rc
        MLMOND_PID=
}

# mlmond_log_clean: false (and the lines on stderr) if mlmond logged an error or a sanitizer report.
mlmond_log_clean() {
        grep -qE 'ERROR|Sanitizer|^<[0-3]>' "$TMP/mlmond.log" || return 0
        echo "MLMOND logged errors:" >&2
        grep -E 'ERROR|Sanitizer|^<[0-3]>' "$TMP/mlmond.log" | head >&2
        return 1
}

# wrk_run URL: wrk -tTHREADS -cCONNS -dDUR against URL (the output appended to TMP/wrk.log);
# prints "req/s p50_ms p99_ms errors" (errors "-" when none, else socket errors and non-2xx).
wrk_run() {
        local out
        out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" --latency "$1" 2>&1)
        echo "$out" >>"$TMP/wrk.log"
        "$PY" -c '
import re, sys
out = sys.stdin.read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
def lat(p):
    m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)\s*$" % p, out, re.M)
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)] if m else float("nan")
err = re.search(r"Socket errors: (.*)", out)
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
bad = (err.group(1) if err else "") + (f" non-2xx {non2xx.group(1)}" if non2xx else "")
print(f"{rps:.0f} {lat(50):.3f} {lat(99):.3f} {bad.strip().replace(chr(32), chr(95)) or chr(45)}")' <<<"$out"
}

# wrk_compare NAME URL MLMOND_URL GOAL UNIT: REPS rounds of wrk_run, interleaved, against another
# server (NAME at URL) and mlmond; a row per round, then the medians and whether mlmond's req/s
# reach GOAL x the other's (UNIT %: the ratio shown as a percentage, x: as a factor). Returns 0,
# 1 if mlmond answered with errors or logged some, 3 if the goal was missed with STRICT; exits 1 if
# mlmond exited.
wrk_compare() {
        local name=$1 url=$2 lurl=$3 goal=$4 unit=$5 rc=0 scale=1 i ratio
        local o_rps o_p50 o_p99 o_err l_rps l_p50 l_p99 l_err
        [[ $unit == % ]] && scale=100
        printf '%-4s %14s %9s %9s %12s %9s %9s %8s\n' rep "$name r/s" "p50 ms" "p99 ms" "mlmond r/s" "p50 ms" \
                "p99 ms" ratio
        : >"$TMP/results"
        for ((i = 1; i <= REPS; i++)); do
                read -r o_rps o_p50 o_p99 o_err < <(wrk_run "$url")
                read -r l_rps l_p50 l_p99 l_err < <(wrk_run "$lurl")
                ratio=$("$PY" -c "print(f'{$l_rps / max($o_rps, 1) * $scale:.1f}$unit')")
                printf '%-4s %14s %9s %9s %12s %9s %9s %8s\n' "$i" "$o_rps" "$o_p50" "$o_p99" "$l_rps" "$l_p50" \
                        "$l_p99" "$ratio"
                [[ $o_err != - ]] && echo "  $name: $o_err"
                if [[ $l_err != - ]]; then echo "  MLMOND: $l_err"; rc=1; fi
                echo "$o_rps $l_rps" >>"$TMP/results"
                kill -0 "$MLMOND_PID" 2>/dev/null || { echo "MLMOND EXITED" >&2; exit 1; }
        done
        "$PY" - "$TMP/results" "$name" "$goal" "$scale" "$unit" <<'PYEOF'
import statistics, sys
path, name, goal, scale, unit = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
rows = [tuple(map(float, l.split())) for l in open(path)]
o = statistics.median(r[0] for r in rows)
l = statistics.median(r[1] for r in rows)
print(f"median: {name} {o:.0f} req/s, mlmond {l:.0f} req/s, ratio {l / max(o, 1) * scale:.1f}{unit}")
print(f"goal >= {goal * scale:g}{unit}: {'met' if l >= goal * o else 'MISSED'}")
sys.exit(l < goal * o)
PYEOF
        local missed=$?
        mlmond_log_clean || rc=1
        ((STRICT && rc == 0 && missed)) && rc=3
        return $rc
}

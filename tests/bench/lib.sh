# Shared by the HTTP benchmarks (http_latency.sh, latency_query.sh, metrics.sh); sourced, not run.
# Expects: PY (a python3), TMP (the run's scratch directory), MLMOND (the binary), die().
# shellcheck shell=bash

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ucurl() { curl -sf --max-time 30 --unix-socket "$TMP/sock" "$@"; }
json() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

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

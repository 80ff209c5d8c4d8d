#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Sampling cost benchmark: mlmond's own CPU per pid-sample and its RSS, with
# N idle processes registered at a 1 s interval, against `pidstat -u -r -d`
# sampling the same pids in the same window.
#
# Goals: <= 10 us of mlmond CPU per pid-sample (everything included:
# /proc reads, parsing, SQLite), i.e. <= 0.3x pidstat's CPU; peak RSS <= 10 MiB.
#
# usage: tests/bench/sampling.sh [-n N] [-d SECONDS] [-s SETTLE] [-m MLMOND] [-t TMPBASE]
#                                [-P PERF_SECONDS] [-R] [-k] [-S]
#   -n N        processes to register (default 1000)
#   -d SECONDS  measurement window (default 60)
#   -s SECONDS  settle time between registration and the window (default 3)
#   -m PATH     mlmond binary (default $MLMOND, else build-bench/daemon/mlmond,
#               else build/daemon/mlmond under the source tree)
#   -t DIR      where the temporary directory goes; must be a real filesystem,
#               not tmpfs (default /var/tmp)
#   -P SECONDS  after the window (pidstat stopped), run `perf stat` and
#               `perf record -g` on mlmond for SECONDS each and print the top
#               functions (needs perf)
#   -R          restart mlmond after registering: the resumed runs are all due
#               at once and share one tick per interval (isolates the cost of
#               the per-tick transaction; normally registration spreads them
#               over many ticks a second)
#   -k          keep the temporary directory (db, logs, perf data)
#   -S          strict: exit 3 if a goal is missed (default: report only)
# Exit status: 0 ran (goals reported), 1 mlmond misbehaved (registration
# refused, crash, errors in its log, bad exit status), 2 usage/setup error.
set -u -o pipefail

SRCDIR=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/bench/lib.sh
. "$SRCDIR/tests/bench/lib.sh"
INTERVAL=1s
bench_parse_options n:N=1000 d:D=60 s:SETTLE=3 "t:TMPBASE=${TMPDIR_BENCH:-/var/tmp}" P:PERF_S=0 R+RESTART -- "$@"

[[ $N =~ ^[0-9]+$ && $N -ge 1 ]] || die "-n must be a positive integer"
[[ $D =~ ^[0-9]+$ && $D -ge 2 ]] || die "-d must be an integer >= 2"
[[ $PERF_S =~ ^[0-9]+$ ]] || die "-P must be an integer"
find_mlmond build-bench build
for t in pidstat curl python3; do
        command -v $t >/dev/null || die "$t is needed (pidstat: Debian package sysstat)"
done
if ((PERF_S > 0)); then command -v perf >/dev/null || die "-P needs perf (apt-get install linux-perf)"; fi
PY=$(command -v python3)
REGISTER=$(dirname "$0")/register.py
CLK_TCK=$(getconf CLK_TCK)

# 1000 runs keep up to 5 fds each in mlmond (it raises its own soft limit to
# the hard one); pidstat itself opens files one at a time.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
need_fds=$((N * 5 + 64))
if [[ $(ulimit -Hn) != unlimited ]] && (($(ulimit -Hn) < need_fds)); then
        echo "warning: hard RLIMIT_NOFILE $(ulimit -Hn) < $need_fds: mlmond may refuse registrations" >&2
fi

mkdir -p "$TMPBASE" || die "cannot create $TMPBASE"
TMP=$(mktemp -d "$TMPBASE/mlmond-bench.XXXXXX") || die "mktemp failed"
fstype=$(stat -f -c %T "$TMP")
if [[ $fstype == tmpfs || $fstype == ramfs ]]; then
        rm -rf "$TMP"
        die "$TMPBASE is $fstype; the db must be on a real filesystem (use -t DIR)"
fi

SPAWNER=
MLMOND_PID=
PIDSTAT_PID=
# shellcheck disable=SC2317 # bench_exit (lib.sh) runs it
bench_cleanup() {
        [[ -n $PIDSTAT_PID ]] && kill "$PIDSTAT_PID" 2>/dev/null && wait "$PIDSTAT_PID" 2>/dev/null
        stop_mlmond
        if [[ -n $SPAWNER ]]; then
                # the sleepers and their parent shell form their own session/process group
                # (setsid -w lives until that shell has reaped them all)
                if [[ -s $TMP/pids.pgid ]]; then
                        kill -TERM -- "-$(<"$TMP/pids.pgid")" 2>/dev/null
                else
                        kill -TERM "$SPAWNER" 2>/dev/null
                fi
                wait "$SPAWNER" 2>/dev/null
        fi
}
bench_traps

now_ms() { date +%s%3N; }
now_s() { date +%s.%N; }
# utime+stime of a pid, in clock ticks: "utime stime"
cpu_ticks() { local s; s=$(</proc/$1/stat) || return 1; s=${s##*) }; set -- $s; echo "${12} ${13}"; }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
health() { curl -sf --max-time 10 --unix-socket "$TMP/sock" http://localhost/v1/health; }
# json_get KEY... < json: prints the values, one a line (null -> "null")
json_get() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); [print(json.dumps(d.get(k))) for k in sys.argv[1:]]' "$@"; }
calc() { awk "BEGIN { printf \"$1\", ($2) }"; }
# on-CPU time of a pid in ns (/proc/PID/schedstat; finer than the 1/CLK_TCK of utime+stime)
sched_ns() { local a; read -r a _ </proc/$1/schedstat && echo "$a"; }

echo "mlmond sampling benchmark: N=$N, interval $INTERVAL, window $D s; binary $MLMOND"
echo "temp dir $TMP ($fstype); $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# --- 1. N idle processes, in their own session so one kill ends them all ---
setsid -w bash -c 'echo $$ >"$2.pgid"; trap "" INT; trap "kill \$(jobs -p) 2>/dev/null; wait; exit 0" TERM; for ((i = 0; i < $1; i++)); do sleep 100000 & echo $!; done > "$2.tmp"; mv "$2.tmp" "$2"; wait' \
        spawner "$N" "$TMP/pids" </dev/null >/dev/null 2>&1 &
SPAWNER=$!
for _ in $(seq 600); do [[ -s $TMP/pids ]] && break; sleep 0.1; done
[[ -s $TMP/pids ]] || die "spawning $N sleepers failed"
mapfile -t PIDS <"$TMP/pids"
((${#PIDS[@]} == N)) || die "spawned ${#PIDS[@]} of $N sleepers"

# --- 2. mlmond on an empty config, db on a real filesystem ---
start_mlmond ""

# --- 3. register all N ---
idle_rss=$(status_kb $MLMOND_PID VmRSS)
read -r ru0 rs0 < <(cpu_ticks $MLMOND_PID)
reg=$(printf '%s\n' "${PIDS[@]}" | "$PY" "$REGISTER" "$TMP/sock" "$INTERVAL" "$TMP/ids" 2>"$TMP/register.err")
reg_rc=$?
read -r ru1 rs1 < <(cpu_ticks $MLMOND_PID)
eval "$(echo "$reg" | tr ' ' '\n' | grep -E '^[a-z0-9_]+=[0-9.]+$')"
reg_cpu_ms=$(calc "%.1f" "($ru1 + $rs1 - $ru0 - $rs0) * 1000 / $CLK_TCK")
echo "registration: ${ok:-0} ok, ${failed:-?} refused, ${wall_s:-?} s wall ($(calc "%.0f" "${ok:-0} / (${wall_s:-1} + 1e-9)") runs/s)," \
        "per request p50 ${p50_ms:-?} ms, p99 ${p99_ms:-?} ms, max ${max_ms:-?} ms; mlmond CPU ${reg_cpu_ms} ms" \
        "($(calc "%.0f" "$reg_cpu_ms * 1000 / (${ok:-0} + 1e-9)") us/registration)"
if ((reg_rc != 0)) || [[ ${ok:-0} != "$N" ]]; then
        echo "REGISTRATION FAILED (rc $reg_rc):" >&2
        head -20 "$TMP/register.err" >&2
        exit 1
fi
mapfile -t IDS <"$TMP/ids"
if ((RESTART)); then
        # A restart resumes every run due at once: all N then share one tick
        # (one transaction) per interval, instead of the ticks that the
        # registration spread gives them.
        stop_mlmond
        [[ $STOP_STATUS == 0 ]] || { echo "MLMOND: exit status $STOP_STATUS after SIGTERM (restart)" >&2; exit 1; }
        start_mlmond ""
        ra=$(health | json_get runs_active)
        echo "restarted mlmond (-R): $ra runs resumed"
        [[ $ra == "$N" ]] || { echo "MLMOND: $ra of $N runs resumed after the restart" >&2; exit 1; }
fi

# --- 4. pidstat on the same pids, then the common window ---
pidlist=$(IFS=,; echo "${PIDS[*]}")
pidstat -h -u -r -d -p "$pidlist" 1 $((D + SETTLE + 10)) >/dev/null 2>"$TMP/pidstat.err" &
PIDSTAT_PID=$!
sleep "$SETTLE"
kill -0 $PIDSTAT_PID 2>/dev/null || { cat "$TMP/pidstat.err" >&2; die "pidstat exited early"; }

h0=$(health) || { echo "health failed at window start" >&2; exit 1; }
read -r ticks0 overruns0 < <(echo "$h0" | json_get ticks overruns | paste -sd' ')
t0_ms=$(now_ms)
t0=$(now_s)
read -r mu0 ms0 < <(cpu_ticks $MLMOND_PID)
read -r pu0 ps0 < <(cpu_ticks $PIDSTAT_PID)
mns0=$(sched_ns $MLMOND_PID)
pns0=$(sched_ns $PIDSTAT_PID)
sleep "$D"
mns1=$(sched_ns $MLMOND_PID)
pns1=$(sched_ns $PIDSTAT_PID)
read -r mu1 ms1 < <(cpu_ticks $MLMOND_PID)
read -r pu1 ps1 < <(cpu_ticks $PIDSTAT_PID)
t1=$(now_s)
t1_ms=$(now_ms)
m_rss=$(status_kb $MLMOND_PID VmRSS)
m_hwm=$(status_kb $MLMOND_PID VmHWM)
m_anon=$(status_kb $MLMOND_PID RssAnon)
m_file=$(status_kb $MLMOND_PID RssFile)
m_shm=$(status_kb $MLMOND_PID RssShmem)
p_rss=$(status_kb $PIDSTAT_PID VmRSS)
p_hwm=$(status_kb $PIDSTAT_PID VmHWM)
pidstat_alive=1
kill -0 $PIDSTAT_PID 2>/dev/null || pidstat_alive=0
h1=$(health) || { echo "health failed at window end" >&2; exit 1; }
kill $PIDSTAT_PID 2>/dev/null
wait $PIDSTAT_PID 2>/dev/null
PIDSTAT_PID=

read -r ticks1 overruns1 last_tick_ms self_cpu_pct self_rss runs_active db_errors < <(
        echo "$h1" | json_get ticks overruns last_tick_ms self_cpu_pct self_rss_bytes runs_active db_write_errors | paste -sd' ')
wall=$(calc "%.3f" "$t1 - $t0")
ticks=$((ticks1 - ticks0))
win_overruns=$((overruns1 - overruns0))

# samples stored for one run in the window, through the API (expect ~D)
one_id=${IDS[$((N / 2))]}
one_samples=$(curl -sf --max-time 30 --unix-socket "$TMP/sock" \
        "http://localhost/v1/runs/$one_id/samples?from=$t0_ms&until=$t1_ms" |
        "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["samples"]))') || one_samples="?"

db_bytes() { du -cb "$TMP"/db "$TMP"/db-wal "$TMP"/db-shm 2>/dev/null | tail -1 | cut -f1; }
db_live=$(db_bytes)

# --- 5. optional: where the CPU goes (after the window, pidstat stopped) ---
if ((PERF_S > 0)); then
        echo
        echo "== perf stat -p mlmond, $PERF_S s =="
        perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p $MLMOND_PID -- sleep "$PERF_S" 2>&1 |
                grep -vE '^\s*$'
        echo "== perf record -e cpu-clock -g -p mlmond, $PERF_S s: top symbols (self) =="
        perf record -q -e cpu-clock -F 2999 -g -p $MLMOND_PID -o "$TMP/perf.data" -- sleep "$PERF_S" >/dev/null 2>&1
        perf report -i "$TMP/perf.data" --no-children --sort dso,sym --stdio -g none --percent-limit 0.7 2>/dev/null |
                grep -vE '^#|^\s*$' | head -40
        echo "== callers, by inclusive time (children) =="
        perf report -i "$TMP/perf.data" --children --sort sym --stdio -g none --percent-limit 3 2>/dev/null |
                grep -vE '^#|^\s*$' | head -40
fi

# --- 6. stop mlmond: SIGTERM must commit, checkpoint and exit 0 ---
stop_mlmond
m_exit=$STOP_STATUS
db_final=$(db_bytes)
# every pid-sample stored in the window, counted in the db (read after exit)
stored=$("$PY" - "$TMP/db" "$t0_ms" "$t1_ms" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
w = db.execute("SELECT count(*), count(DISTINCT run_id) FROM samples WHERE ts >= ? AND ts < ?",
               (int(sys.argv[2]), int(sys.argv[3]))).fetchone()
print(w[0], w[1], db.execute("SELECT count(*) FROM samples").fetchone()[0])
EOF
) || stored="0 0 0"
read -r stored stored_runs total_rows <<<"$stored"

# --- 7. figures ---
m_cpu=$(calc "%.3f" "($mu1 + $ms1 - $mu0 - $ms0) / $CLK_TCK")
m_usr=$(calc "%.2f" "($mu1 - $mu0) / $CLK_TCK")
m_sys=$(calc "%.2f" "($ms1 - $ms0) / $CLK_TCK")
p_cpu=$(calc "%.3f" "($pu1 + $ps1 - $pu0 - $ps0) / $CLK_TCK")
p_usr=$(calc "%.2f" "($pu1 - $pu0) / $CLK_TCK")
p_sys=$(calc "%.2f" "($ps1 - $ps0) / $CLK_TCK")
nominal=$(calc "%.0f" "$N * $wall")
# mlmond: the pid-samples it stored in the window; pidstat: N per second
m_per=$(calc "%.2f" "$m_cpu * 1e6 / ($stored > 0 ? $stored : $nominal)")
p_per=$(calc "%.2f" "$p_cpu * 1e6 / $nominal")
m_core=$(calc "%.2f" "100 * $m_cpu / $wall")
p_core=$(calc "%.2f" "100 * $p_cpu / $wall")
ratio=$(calc "%.2f" "$p_cpu > 0 ? $m_cpu / $p_cpu : 0")
# the same from schedstat (ns): a cross-check, and the figure to trust when CPU s is a few ticks
m_sch=$(calc "%.4f" "($mns1 - $mns0) / 1e9")
p_sch=$(calc "%.4f" "($pns1 - $pns0) / 1e9")
m_sch_per=$(calc "%.2f" "$m_sch * 1e6 / ($stored > 0 ? $stored : $nominal)")
p_sch_per=$(calc "%.2f" "$p_sch * 1e6 / $nominal")
sch_ratio=$(calc "%.2f" "$p_sch > 0 ? $m_sch / $p_sch : 0")
mib() { calc "%.1f" "$1 / 1024"; }

pass() { awk "BEGIN { exit !($1) }" && echo "ok" || echo "MISSED"; }
# judge on utime+stime unless it is only a few clock ticks; then on schedstat
if (($(calc "%.0f" "$m_cpu * $CLK_TCK") >= 100)); then
        j_ratio=$ratio j_per=$m_per j_src="utime+stime"
else
        j_ratio=$sch_ratio j_per=$m_sch_per j_src="schedstat, utime+stime being < 100 ticks"
fi
g_ratio=$(pass "$j_ratio <= 0.3")
g_per=$(pass "$j_per <= 10")
g_rss=$(pass "$m_hwm <= 10240")

echo
echo "mlmond sampling benchmark: N=$N pids, interval $INTERVAL, window $wall s"
printf '%-20s %8s %12s %15s %15s %10s %10s\n' "" "CPU s" "user/sys s" "us/pid-sample" "% of one core" "peak RSS" "RSS at end"
printf '%-20s %8s %12s %15s %15s %10s %10s\n' "mlmond" "$m_cpu" "$m_usr/$m_sys" "$m_per" "$m_core" \
        "$(mib "$m_hwm") MiB" "$(mib "$m_rss") MiB"
printf '%-20s %8s %12s %15s %15s %10s %10s\n' "pidstat -u -r -d" "$p_cpu" "$p_usr/$p_sys" "$p_per" "$p_core" \
        "$(mib "$p_hwm") MiB" "$(mib "$p_rss") MiB"
echo "schedstat cross-check: mlmond $m_sch s on CPU ($m_sch_per us/pid-sample), pidstat $p_sch s ($p_sch_per us/pid-sample), ratio $sch_ratio"
echo "ratio mlmond/pidstat CPU: $j_ratio (goal <= 0.3: $g_ratio); us/pid-sample $j_per (goal <= 10: $g_per);" \
        "peak RSS $(mib "$m_hwm") MiB (goal <= 10 MiB: $g_rss)  [CPU judged on $j_src]"
echo "mlmond pid-samples stored in the window: $stored from $stored_runs runs (nominal N x window = $nominal);" \
        "one run (id $one_id) via the API: $one_samples samples (expect ~$D)"
echo "mlmond ticks in the window: $ticks ($(calc "%.1f" "$ticks / $wall")/s, $(calc "%.1f" "$stored / ($ticks > 0 ? $ticks : 1)") pid-samples per tick);" \
        "overruns: $overruns1 total, $win_overruns in the window; last_tick_ms: $last_tick_ms"
echo "mlmond RSS: $(mib "$idle_rss") MiB idle before registration; at the end RssAnon $(mib "$m_anon") MiB," \
        "RssFile $(mib "$m_file") MiB, RssShmem $(mib "$m_shm") MiB"
echo "mlmond health at the end: runs_active $runs_active, self_cpu_pct $self_cpu_pct, self_rss_bytes $self_rss" \
        "($(calc "%.1f" "$self_rss / 1048576") MiB), db_write_errors $db_errors"
echo "db size: $(calc "%.1f" "$db_live / 1048576") MiB live (db+wal+shm), $(calc "%.1f" "$db_final / 1048576") MiB after exit" \
        "for $total_rows sample rows ($(calc "%.0f" "$db_final / ($total_rows + 1)") B/row)"
echo "mlmond exit status after SIGTERM: $m_exit"
((pidstat_alive)) || echo "warning: pidstat had exited before the end of the window" >&2

bad=0
if [[ $m_exit != 0 ]]; then echo "MLMOND: exit status $m_exit after SIGTERM" >&2; bad=1; fi
if [[ $db_errors != 0 || $runs_active != "$N" ]]; then
        echo "MLMOND: db_write_errors $db_errors, runs_active $runs_active (expected $N)" >&2
        bad=1
fi
if grep -qiE 'error|warn|fail|assert|abort' "$TMP/mlmond.log"; then
        echo "MLMOND log has warnings/errors ($(grep -ciE 'error|warn|fail|assert|abort' "$TMP/mlmond.log") lines), first ones:" >&2
        grep -iE 'error|warn|fail|assert|abort' "$TMP/mlmond.log" | head -10 >&2
        bad=1
fi
((bad)) && exit 1
if ((STRICT)) && [[ "$g_ratio$g_per$g_rss" == *MISSED* ]]; then exit 3; fi
exit 0

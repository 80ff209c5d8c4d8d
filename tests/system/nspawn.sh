#!/usr/bin/env bash
# Usage: tests/system/nspawn.sh BUILDDIR
#
# mlmond under a real systemd:
# boots a Debian 12 container with systemd-nspawn, installs BUILDDIR into it
# (`meson install --destdir`), and checks the units, the notify protocol, reload, the
# watchdog and the hardening score there. The container is lib.sh's: an overlay of a cached
# debootstrap (deb.sh installs the Debian package into the same one).
#
# Exit status: 0 all checks passed, 1 a check failed, 77 this machine cannot run the
# container (not root, no systemd-nspawn or debootstrap, debootstrap failed for lack of a
# mirror, or nspawn could not boot anything).
#
# Environment: MLMOND_TEST_MIRROR, MLMOND_TEST_CACHE, MLMOND_TEST_KEEP=1 (lib.sh).
# shellcheck disable=SC2317 # functions called through check/wait_for/trap
set -uo pipefail

builddir=$(cd "${1:?usage: nspawn.sh BUILDDIR}" && pwd)
# shellcheck source=tests/system/lib.sh
. "$(dirname "$0")/lib.sh"

need_containers
if [ ! -x "$builddir/daemon/mlmond" ] || [ ! -x "$builddir/client/mlmonctl" ]; then
    echo "FAIL: no mlmond or mlmonctl in $builddir (build it first)"
    exit 1
fi
use_rootfs

# --- this run's container: an overlay of the cache, the build installed into it ---------------

make_root
t_run=$SECONDS
if ! DESTDIR=$root meson install -C "$builddir" --no-rebuild --quiet >"$run/install.log" 2>&1; then
    cat "$run/install.log"
    echo "FAIL: meson install --destdir failed"
    exit 1
fi
unit_src=$(find "$root/usr" -path '*/systemd/system/mlmond.service' | head -n 1)
[ -n "$unit_src" ] || { echo "FAIL: meson install put no mlmond.service under /usr"; exit 1; }
unit_dir=${unit_src#"$root"}
unit_dir=${unit_dir%/mlmond.service}
mlmond=$(sed -n 's|^ExecStart=\([^ ]*\).*|\1|p' "$unit_src")
mlmonctl=$(dirname "$mlmond")/mlmonctl
conf=$(sed -n 's|^ExecStart=.*--config \([^ ]*\).*|\1|p' "$unit_src")
note "installed: $(sed -n 's/^ExecStart=//p' "$unit_src"), units in $unit_dir"

# Loopback is the host's (no private network): ports nobody uses now, not 9477/8125.
free_port() {
    /usr/bin/python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if sys.argv[1] == "udp" else socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' "$1"
}
http_port=$(free_port tcp)
udp_port=$(free_port udp)
if [ -z "$http_port" ] || [ -z "$udp_port" ]; then
    echo "FAIL: cannot pick free ports"
    exit 1
fi
# The addresses are the socket units' (drop-ins, as an admin would write them); the config
# says the same, which is what mlmond would bind without systemd.
mkdir -p "$root/etc/systemd/system/mlmond-http.socket.d" "$root/etc/systemd/system/mlmond-statsd.socket.d" \
    "$root$(dirname "$conf")"
printf '[Socket]\nListenStream=\nListenStream=127.0.0.1:%s\n' "$http_port" \
    >"$root/etc/systemd/system/mlmond-http.socket.d/test.conf"
printf '[Socket]\nListenDatagram=\nListenDatagram=127.0.0.1:%s\n' "$udp_port" \
    >"$root/etc/systemd/system/mlmond-statsd.socket.d/test.conf"
good_conf=$(printf '[daemon]\nlisten = 127.0.0.1:%s\nstatsd_udp = 127.0.0.1:%s\ninterval = 500ms\n' \
    "$http_port" "$udp_port")
printf '%s\n' "$good_conf" >"$root$conf"
base=http://127.0.0.1:$http_port

# --- boot --------------------------------------------------------------------------------------

# shellcheck disable=SC2119 # boot takes nspawn's arguments; none here
boot
missing=$(ct ldd "$mlmond" "$mlmonctl" 2>&1 | grep 'not found')
check "every library of mlmond and mlmonctl is in the container${missing:+ (missing: $missing; add its package to include= in lib.sh)}" \
    test -z "$missing"
check "boot made the user mlmond (sysusers.d) and /run/mlmond owned by it (tmpfiles.d)" \
    test "$(ct stat -c %U:%a /run/mlmond 2>/dev/null)" = mlmond:755

# --- start: READY=1 only once it serves --------------------------------------------------------

if ct systemctl start mlmond; then ok "systemctl start mlmond"; else fail "systemctl start mlmond"; fi
check "mlmond is active" test "$(prop mlmond ActiveState)" = active
main_pid=$(prop mlmond MainPID)
nrestarts=$(prop mlmond NRestarts)
# Type=notify: start returned after READY=1, so the first tick is done and the API answers.
health=$(ct curl -s -o /dev/stdout -w '\n%{http_code}' "$base/v1/health")
check "GET /v1/health right after start: 200, status ok, a tick already done (READY=1 came after it)" \
    /usr/bin/python3 -c 'import json, sys
body, code = sys.argv[1].rsplit("\n", 1)
h = json.loads(body)
sys.exit(0 if code == "200" and h["status"] == "ok" and h["ticks"] >= 1 else 1)' "$health"
note "health: ${health%%$'\n'*}"
status=$(prop mlmond StatusText)
check "STATUS= is one line about sampling ('$status')" test "${status#sampling}" != "$status"
check "journal: mlmond says it serves the sockets systemd passed" \
    sh -c "nsenter -t $ct_pid -a journalctl -q -u mlmond --no-pager | grep -q \"listen: on 127.0.0.1:$http_port, the socket systemd passed\""
caps=$(ct sh -c "grep -E '^Cap(Eff|Bnd|Amb):' /proc/$main_pid/status" | awk '{print $2}' | sort -u | tr '\n' ' ')
check "capabilities: only CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (CapEff/CapBnd/CapAmb = $caps)" \
    test "$caps" = "0000000000080004 "
check "runs as the user mlmond" test "$(ct ps -o user= -p "$main_pid")" = mlmond

# --- register a process of another user (root) and see it sampled -----------------------------

ct systemd-run -q --unit=mlmond-test-sleeper sleep 1000
sleeper=$(prop mlmond-test-sleeper MainPID)
run_id=$(ct "$mlmonctl" register "$sleeper" --name sleeper 2>&1)
check "mlmonctl register $sleeper (a root process; mlmond is not root) -> run '$run_id'" \
    test "$run_id" -ge 1 2>/dev/null
sleep 1.5
list=$(ct "$mlmonctl" list)
printf '%s\n' "$list" | sed 's/^/# /'
check "mlmonctl list shows it" sh -c "printf '%s\n' \"\$1\" | grep -Eq \"^ *$run_id +$sleeper +sleeper +running\"" _ "$list"
run_json=$(ct curl -s "$base/v1/runs/$run_id")
check "its /proc/PID/io is readable through the unit's capabilities (read_bytes not null)" \
    /usr/bin/python3 -c 'import json, sys
l = json.loads(sys.argv[1])["latest"]
sys.exit(0 if l["read_bytes"] is not None and l["rss_bytes"] else 1)' "$run_json"

# StatsD over the UDP socket systemd passed: a tagged line (its sending socket held open a
# moment, since a tag counts only from a sender whose uid mlmond can find), and an untagged one
# from a registered process that holds its sending socket (found through /proc/net/udp).
ct bash -c "exec 3>/dev/udp/127.0.0.1/$udp_port; echo 'tagged_op:5|ms|#pid:$sleeper' >&3; sleep 2"
ct systemd-run -q --unit=mlmond-test-sender bash -c \
    "exec 3>/dev/udp/127.0.0.1/$udp_port; while :; do echo 'untagged_op:7|ms' >&3; sleep 0.2; done"
sender=$(prop mlmond-test-sender MainPID)
sender_run=$(ct "$mlmonctl" register "$sender" --name sender 2>&1)
sleep 2.5
lat() { ct curl -s "$base/v1/runs/$1/latency?window=1m"; }
has_op() { /usr/bin/python3 -c 'import json, sys; sys.exit(0 if json.loads(sys.argv[1])["ops"].get(sys.argv[2], {}).get("count", 0) >= 1 else 1)' "$1" "$2"; }
check "StatsD over UDP (socket from mlmond-statsd.socket): a #pid-tagged timing reached run $run_id" \
    has_op "$(lat "$run_id")" tagged_op
check "StatsD over UDP: an untagged timing found its sender's run $sender_run through /proc/net/udp" \
    has_op "$(lat "$sender_run")" untagged_op

# --- reload: good config, then a bad one ------------------------------------------------------

ct systemctl reload mlmond
check "systemctl reload: still active, same MainPID, NRestarts unchanged" \
    test "$(prop mlmond ActiveState)/$(prop mlmond MainPID)/$(prop mlmond NRestarts)" = "active/$main_pid/$nrestarts"
printf '%s\ninterval = banana\n' "$good_conf" >"$root$conf"
ct systemctl reload mlmond
reload_error() { why=$(ct journalctl -q -u mlmond -p err --no-pager | grep 'reload failed' | tail -n 1) && [ -n "$why" ]; }
wait_for 5 reload_error
# STATUS= keeps the failure across maintenance passes (every 5 s) until a reload succeeds
sleep 6
status=$(prop mlmond StatusText)
check "STATUS= still says the reload failed after a maintenance pass: '$status'" \
    sh -c "printf '%s' \"\$1\" | grep -q '^reload failed.*banana.*sampling'" _ "$status"
check "reload with 'interval = banana': still active, same MainPID, NRestarts unchanged" \
    test "$(prop mlmond ActiveState)/$(prop mlmond MainPID)/$(prop mlmond NRestarts)" = "active/$main_pid/$nrestarts"
check "journal (priority err) says why: '${why#*]: }'" \
    sh -c "printf '%s' \"\$1\" | grep -q \"interval: 'banana' is not a duration\"" _ "$why"
printf '%s\n' "$good_conf" >"$root$conf"
ct systemctl reload mlmond
check "config restored and reloaded: active" test "$(prop mlmond ActiveState)" = active
sleep 6
status=$(prop mlmond StatusText)
status_is_sampling() { case $1 in sampling*) return 0 ;; *) return 1 ;; esac; }
check "STATUS= is back to sampling after the good reload: '$status'" status_is_sampling "$status"
check "the API still answers after the reloads" test "$(ct curl -s -o /dev/null -w '%{http_code}' "$base/v1/health")" = 200

# --- watchdog: a stopped daemon is killed and restarted ----------------------------------------

wd_usec=$(prop mlmond WatchdogUSec)
wd_s=$(ct systemd-analyze timespan "$wd_usec" 2>/dev/null | sed -n 's/^ *μs: *//p')
wd_s=$(((${wd_s:-30000000} + 999999) / 1000000))
ct kill -STOP "$main_pid"
t_wd=$SECONDS
new_pid=$main_pid
while [ $((SECONDS - t_wd)) -le $((wd_s + 20)) ]; do
    sleep 1
    new_pid=$(prop mlmond MainPID)
    if [ "$new_pid" != "$main_pid" ] && [ "$new_pid" != 0 ] && [ "$(prop mlmond ActiveState)" = active ]; then
        break
    fi
done
check "SIGSTOP: the watchdog (WatchdogSec=${wd_s}s) restarted mlmond after $(elapsed "$t_wd") s: MainPID $main_pid -> $new_pid" \
    test "$new_pid" != "$main_pid" -a "$new_pid" != 0
check "NRestarts went from $nrestarts to $(prop mlmond NRestarts)" test "$(prop mlmond NRestarts)" = $((nrestarts + 1))
check "journal: the watchdog timeout" sh -c "nsenter -t $ct_pid -a journalctl -q -u mlmond --no-pager | grep -q 'Watchdog timeout'"
check "after the restart: HTTP answers on the socket systemd kept" \
    test "$(ct curl -s -o /dev/null -w '%{http_code}' "$base/v1/health")" = 200
check "after the restart: the run is resumed (mlmonctl list)" \
    sh -c "nsenter -t $ct_pid -a $mlmonctl list | grep -Eq \"^ *$run_id +$sleeper +sleeper +running\""

# --- stop --------------------------------------------------------------------------------------

ct systemctl stop mlmond
check "systemctl stop: Result=success ($(prop mlmond Result)), exit status $(prop mlmond ExecMainStatus)" \
    test "$(prop mlmond Result)/$(prop mlmond ExecMainStatus)" = success/0
check "its sockets stopped with it (PartOf=): mlmond-http.socket $(prop mlmond-http.socket ActiveState)" \
    test "$(prop mlmond-http.socket ActiveState)/$(prop mlmond-statsd.socket ActiveState)" = inactive/inactive

# --- the units, as installed -------------------------------------------------------------------

verify=$(ct systemd-analyze verify "$unit_dir/mlmond.service" "$unit_dir/mlmond-http.socket" \
    "$unit_dir/mlmond-statsd.socket" 2>&1)
rc=$?
[ -z "$verify" ] || printf '%s\n' "$verify" | sed 's/^/# verify: /'
check "systemd-analyze verify of the installed units: clean" test "$rc" = 0 -a -z "$verify"
exposure=$(ct systemd-analyze security mlmond.service 2>/dev/null |
    sed -n 's/.*Overall exposure level for mlmond.service: \([0-9.]*\).*/\1/p')
check "systemd-analyze security mlmond.service: exposure ${exposure:-?} <= 1.5" \
    awk -v e="${exposure:-99}" 'BEGIN { exit !(e <= 1.5) }'

note "run took $(elapsed "$t_run") s (boot to checks done)"
finish mlmond mlmond-http.socket mlmond-statsd.socket

# shellcheck shell=bash
# What nspawn.sh and deb.sh share (sourced by both): the checks' output, the cached Debian 12 root
# file system, this run's overlay of it, booting it under systemd-nspawn and running commands in
# it.
#
# The root file system comes from debootstrap once and is cached in $MLMOND_TEST_CACHE (default
# /var/cache/mlmond-test); each run boots an overlay of it (or, where overlayfs is missing, a
# copy), so a run never changes the cache. Delete the cache directory to rebuild it.
#
# Environment: MLMOND_TEST_MIRROR (default: the mirror apt uses), MLMOND_TEST_CACHE,
# MLMOND_TEST_KEEP=1 (keep the container's directory for a look afterwards).
# shellcheck disable=SC2317 # functions called through check/wait_for/trap

cache=${MLMOND_TEST_CACHE:-/var/cache/mlmond-test}
suite=bookworm
# What mlmond and mlmonctl link against (ldd, checked again inside the container by nspawn.sh),
# plus systemd itself and the tools the scripts drive it with.
include=systemd,systemd-sysv,dbus,curl,procps,libsystemd0,libsqlite3-0,libmicrohttpd12,libjson-c5,libinih1,libprotobuf-c1
rootfs=$cache/$suite-rootfs

failures=0
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
fail() { n=$((n + 1)); failures=$((failures + 1)); echo "FAIL $n - $*"; }
check() { # check DESCRIPTION COMMAND...: ok if the command succeeds
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}
skip() { echo "SKIP: $*"; exit 77; }
note() { echo "# $*"; }
elapsed() { echo $((SECONDS - $1)); }
wait_for() { # wait_for SECONDS COMMAND...: until the command succeeds, polling every 0.1 s
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

# Skips (77) where this machine cannot run the container at all.
need_containers() {
    [ "$(id -u)" -eq 0 ] || skip "needs root (systemd-nspawn, mounts)"
    command -v systemd-nspawn >/dev/null || skip "no systemd-nspawn (Debian package systemd-container)"
    command -v nsenter >/dev/null || skip "no nsenter (util-linux)"
}

# --- the cached root file system ---------------------------------------------------------------

# The mirror apt uses (its proxy too), so this works wherever apt-get does.
find_mirror() {
    mirror=${MLMOND_TEST_MIRROR:-}
    if [ -z "$mirror" ]; then
        local uri
        uri=$(cd /tmp && apt-get -qq --print-uris download libinih1 2>/dev/null | head -n 1 | cut -d"'" -f2)
        mirror=${uri%%/pool/*}
        case $mirror in http://* | https://*) ;; *) mirror=http://deb.debian.org/debian ;; esac
    fi
    local proxy
    proxy=$(apt-config shell p Acquire::http::Proxy 2>/dev/null | sed -n "s/^p='\(.*\)'$/\1/p")
    if [ -n "$proxy" ] && [ -z "${http_proxy:-}" ]; then
        export http_proxy=$proxy
    fi
}

build_rootfs() {
    command -v debootstrap >/dev/null || skip "no debootstrap to build $rootfs"
    local tmp=$cache/.build.$$ t0=$SECONDS
    rm -rf "$tmp"
    find_mirror
    note "building $rootfs: debootstrap --variant=minbase $suite from $mirror (once; cached)"
    if ! debootstrap --variant=minbase --include="$include" "$suite" "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1; then
        tail -n 15 "$cache/debootstrap.log" | sed 's/^/# debootstrap: /'
        rm -rf "$tmp"
        skip "debootstrap failed (no network or mirror?); log: $cache/debootstrap.log"
    fi
    # apt's package cache is not needed to boot: 30 MiB less to keep
    rm -rf "$tmp"/var/cache/apt/archives/*.deb
    echo "$include" >"$tmp/.mlmond-test-include"
    rm -rf "$rootfs"
    mv "$tmp" "$rootfs"
    note "debootstrap took $(elapsed "$t0") s"
}

# The cache, built if needed; a shared lock on it is held until the script exits.
use_rootfs() {
    mkdir -p "$cache"
    exec 9>"$cache/.lock"
    flock 9 # one builder at a time; readers wait for it
    if [ "$(cat "$rootfs/.mlmond-test-include" 2>/dev/null)" != "$include" ]; then
        build_rootfs
    else
        note "using the cached root file system $rootfs"
    fi
    flock -u 9
    flock -s 9 # held while the cache is in use by this run
}

# --- this run's container: an overlay of the cache ----------------------------------------------

nspawn_pid=
ct_pid=
overlay=no

cleanup() {
    local rc=$?
    if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
        [ -n "$ct_pid" ] && timeout 10 nsenter -t "$ct_pid" -a systemctl poweroff --no-block >/dev/null 2>&1
        for _ in $(seq 1 100); do
            kill -0 "$nspawn_pid" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$nspawn_pid" 2>/dev/null; then
            note "the container did not power off in 20 s: killing it"
            kill -TERM "$nspawn_pid" 2>/dev/null
            sleep 3
            kill -KILL "$nspawn_pid" 2>/dev/null
        fi
        wait "$nspawn_pid" 2>/dev/null
    fi
    [ "$overlay" = yes ] && umount "$root" 2>/dev/null
    if [ "${MLMOND_TEST_KEEP:-0}" = 1 ]; then
        note "kept $run"
    else
        rm -rf "$run"
    fi
    exit "$rc"
}

# $run (this run's directory, removed at exit) and $root, the container's root: an overlay of
# the cache.
make_root() {
    run=$(mktemp -d /var/tmp/mlmond-nspawn.XXXXXX)
    root=$run/root
    mkdir -p "$root" "$run/upper" "$run/work"
    trap cleanup EXIT
    trap 'exit 1' INT TERM HUP
    if mount -t overlay overlay -o "lowerdir=$rootfs,upperdir=$run/upper,workdir=$run/work" "$root" 2>/dev/null; then
        overlay=yes
    else
        note "no overlayfs here: copying the cache for this run"
        if ! rmdir "$root" || ! cp -a --reflink=auto "$rootfs" "$root"; then
            echo "FAIL: cannot copy $rootfs"
            exit 1
        fi
    fi
}

ct() { nsenter -t "$ct_pid" -a "$@"; }

# boot [NSPAWN ARGS...]: boots $root and waits until its systemd has finished starting up.
boot() {
    local t_boot=$SECONDS state=
    systemd-nspawn -b -q --register=no --keep-unit --console=read-only -M "mlmond-test-$$" -D "$root" "$@" \
        >"$run/console.log" 2>&1 </dev/null &
    nspawn_pid=$!
    # The container's systemd is the child of the nspawn process.
    for _ in $(seq 1 100); do
        kill -0 "$nspawn_pid" 2>/dev/null || break
        ct_pid=$(pgrep -P "$nspawn_pid" | head -n 1)
        [ -n "$ct_pid" ] && [ "$(cat "/proc/$ct_pid/comm" 2>/dev/null)" = systemd ] && break
        ct_pid=
        sleep 0.1
    done
    if [ -z "$ct_pid" ]; then
        tail -n 20 "$run/console.log" | sed 's/^/# nspawn: /'
        skip "systemd-nspawn could not boot the container on this machine"
    fi
    # Until PID 1 listens on its private socket, systemctl fails at once, and until it has made
    # /run/systemd/system it says "offline" (no systemd running): ask again.
    while { [ -z "$state" ] || [ "$state" = offline ]; } && [ $((SECONDS - t_boot)) -lt 90 ] &&
        kill -0 "$nspawn_pid" 2>/dev/null; do
        state=$(ct timeout $((90 - (SECONDS - t_boot))) systemctl is-system-running --wait 2>/dev/null)
        case $state in '' | offline) sleep 0.2 ;; esac
    done
    if [ "$state" = running ] || [ "$state" = degraded ]; then
        ok "the container booted ($state) in $(elapsed "$t_boot") s"
    else
        fail "the container booted: is-system-running says '$state'"
        tail -n 20 "$run/console.log" | sed 's/^/# console: /'
        exit 1
    fi
    [ "$state" = degraded ] && note "failed units: $(ct systemctl --failed --plain --no-legend | tr '\n' ' ')"
    return 0
}

prop() { ct systemctl show -p "$2" --value "$1"; }

# finish UNITS...: the summary line and the exit status; the units' journal after a failure.
finish() {
    if [ "$failures" -gt 0 ]; then
        note "the journal of $*:"
        local u args=()
        for u in "$@"; do args+=(-u "$u"); done
        ct journalctl -q "${args[@]}" --no-pager | tail -n 40 | sed 's/^/#   /'
        echo "$failures of $n checks FAILED"
        exit 1
    fi
    echo "all $n checks passed"
    exit 0
}

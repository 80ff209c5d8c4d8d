#!/usr/bin/env bash
# Usage: tools/run-local.sh [extra mlmond args...]
#
# Builds mlmond (build/, reused when present) and runs it in the foreground with everything
# under build/local/: the database build/local/mlmond.db, the sockets in build/local/run/,
# the read-only HTTP API on 127.0.0.1:9477 and StatsD on UDP 127.0.0.1:8125. Extra arguments
# go to mlmond after these (e.g. --listen 127.0.0.1:9478, --interval 500ms). Ctrl-C stops it.
# Relative paths in extra arguments are relative to the repository root. The hints it prints
# name the address and socket mlmond will really use (the last --listen and --socket win, as in
# mlmond). MLMOND_BUILD_DIR picks another build directory than build/.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MLMOND_BUILD_DIR:-build}

tools/setup.sh
if [ ! -f "$build/meson-private/coredata.dat" ]; then
    meson setup "$build"
fi
meson compile -C "$build"
mkdir -p "$build/local/run"

listen=127.0.0.1:9477
socket=$build/local/run/mlmond.sock
prev=
for a in "$@"; do
    case $prev in
        --listen) listen=$a ;;
        --socket) socket=$a ;;
    esac
    case $a in
        --listen=*) listen=${a#--listen=} ;;
        --socket=*) socket=${a#--socket=} ;;
    esac
    prev=$a
done
case $socket in
    /*) ;;
    *) socket=$PWD/$socket ;;
esac

if [ "$listen" = none ]; then
    echo "run-local: no HTTP listener (--listen none)"
else
    echo "run-local: try  curl -s http://$listen/v1/health"
fi
echo "run-local: and  MLMON_SOCKET=$socket $build/client/mlmonctl list"
exec "$build/daemon/mlmond" --config etc/mlmond.conf \
    --db "$build/local/mlmond.db" \
    --listen 127.0.0.1:9477 \
    --socket "$build/local/run/mlmond.sock" \
    --statsd-socket "$build/local/run/statsd.sock" \
    "$@"

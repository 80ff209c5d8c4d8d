#!/usr/bin/env bash
# Usage: tools/run-local.sh [extra mlmond args...]
#
# Builds mlmond (build/, reused when present) and runs it in the foreground with everything
# under build/local/: the database build/local/mlmond.db, the sockets in build/local/run/,
# the read-only HTTP API on 127.0.0.1:9477 and StatsD on UDP 127.0.0.1:8125. Extra arguments
# go to mlmond after these (e.g. --listen 127.0.0.1:9478, --interval 500ms). Ctrl-C stops it.
# Relative paths in extra arguments are relative to the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh
if [ ! -f build/meson-private/coredata.dat ]; then
    meson setup build
fi
meson compile -C build
mkdir -p build/local/run

echo "run-local: try  curl -s http://127.0.0.1:9477/v1/health"
echo "run-local: and  MLMON_SOCKET=$PWD/build/local/run/mlmond.sock build/client/mlmonctl list"
exec build/daemon/mlmond --config etc/mlmond.conf \
    --db build/local/mlmond.db \
    --listen 127.0.0.1:9477 \
    --socket build/local/run/mlmond.sock \
    --statsd-socket build/local/run/statsd.sock \
    "$@"

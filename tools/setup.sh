#!/usr/bin/env bash
# Install the Debian 12 packages listed in tools/packages.txt (build and test dependencies).
# Idempotent: when all of them are installed already it touches neither apt nor the network.
#
# apt-get's exit code is not trusted: on some machines it exits 100 although the packages
# install fine (a broken preinstalled pcp package fails its postinst). Success is decided by
# asking dpkg-query about every package instead.
#
# Set MLMOND_SKIP_SETUP=1 to skip this (e.g. on a non-Debian machine with the deps at hand).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${MLMOND_SKIP_SETUP:-0}" = 1 ]; then
    exit 0
fi
if ! command -v dpkg-query >/dev/null; then
    echo "setup: no dpkg-query: this script knows Debian 12 only." >&2
    echo "setup: install the packages in tools/packages.txt yourself, then set MLMOND_SKIP_SETUP=1" >&2
    exit 1
fi

# tools/packages.txt: one package per line, '#' comments.
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' tools/packages.txt)

is_installed() {
    dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -qx 'install ok installed'
}

list_missing() {
    local pkg
    for pkg in "${packages[@]}"; do
        is_installed "$pkg" || echo "$pkg"
    done
}

mapfile -t missing < <(list_missing)
if [ "${#missing[@]}" -eq 0 ]; then
    echo "setup: all ${#packages[@]} packages of tools/packages.txt are installed"
    exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
        echo "setup: missing packages: ${missing[*]}; run tools/setup.sh as root" >&2
        exit 1
    fi
    as_root=(sudo)
fi

echo "setup: installing ${missing[*]}"
"${as_root[@]}" apt-get update ||
    echo "setup: apt-get update exited $? (ignored; every package is checked below)"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}" ||
    echo "setup: apt-get install exited $? (ignored; every package is checked below)"

mapfile -t missing < <(list_missing)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: FAILED: not installed after apt-get: ${missing[*]} (see apt's output above)" >&2
    exit 1
fi
echo "setup: all ${#packages[@]} packages of tools/packages.txt are installed"

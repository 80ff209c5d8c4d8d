#!/usr/bin/env bash
# Usage: tools/build-deb.sh [OUTDIR]
#
# Builds the Debian package from this tree as it is (committed or not): OUTDIR (default
# build-deb/) gets mlmond_<version>_<arch>.deb, its -dbgsym package, .buildinfo and .changes.
# It copies the tree's files (git's, untracked ones included, ignored ones not; outside a git
# checkout every file but build*/) into OUTDIR/src, writes debian/changelog there with the
# version of the file VERSION (the project's one place for it), and runs
# `dpkg-buildpackage -b -us -uc` there. Its last line is the path of the .deb.
#
# Needs the packages of tools/packages.txt (tools/setup.sh installs them): the build
# dependencies of debian/control, debhelper and dh-python. Not root: Rules-Requires-Root: no.
#
# Environment: DEB_BUILD_OPTIONS (e.g. nocheck: without the unit tests dh_auto_test runs),
# SOURCE_DATE_EPOCH (default: the time of the last commit, else now), MLMOND_DEB_KEEP=1 (keep
# OUTDIR/src, the copy and its build, for a look afterwards).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "${1:-$root/build-deb}"
out=$(cd "${1:-$root/build-deb}" && pwd)
src=$out/src
cd "$root"

version=$(tr -d '[:space:]' <VERSION)
commit=
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    commit=$(git rev-parse --short HEAD 2>/dev/null || true)
    [ -z "$(git status --porcelain 2>/dev/null)" ] || commit="$commit with uncommitted changes"
    : "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
fi
: "${SOURCE_DATE_EPOCH:=$(date +%s)}"
export SOURCE_DATE_EPOCH

rm -rf "$src"
mkdir -p "$src"
if [ -n "$commit" ]; then
    # files deleted in the working tree are still listed: tar skips them
    git ls-files -z --cached --others --exclude-standard |
        tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$src"
else
    tar --exclude='./build*' --exclude="./${out#"$root"/}" -cf - . | tar -xf - -C "$src"
fi

maintainer=$(sed -n 's/^Maintainer: //p' debian/control)
cat >"$src/debian/changelog" <<EOF
mlmond ($version) unstable; urgency=medium

  * Built from the repository${commit:+ at $commit}.

 -- $maintainer  $(date -R -u -d "@$SOURCE_DATE_EPOCH")
EOF

rm -f "$out"/mlmond_"$version"_*.deb "$out"/mlmond-dbgsym_"$version"_*.deb "$out"/mlmond_"$version"_*.changes \
    "$out"/mlmond_"$version"_*.buildinfo
(cd "$src" && dpkg-buildpackage -b -us -uc)
[ "${MLMOND_DEB_KEEP:-0}" = 1 ] || rm -rf "$src"
deb=$(ls "$out"/mlmond_"$version"_*.deb)
echo "$deb"

#!/usr/bin/env bash
# Usage: tools/test.sh [BUILDDIR] [extra `meson setup` args...]
#
# Installs the packages (tools/setup.sh), sets up BUILDDIR (default: build, relative to the
# repository root) with --werror if it is not set up yet, builds it, runs the test suite and
# prints "N passed, N failed" (", N skipped" appended when some were). The counts also go to
# BUILDDIR/test-counts.txt, which .ci/run adds up. A failed setup or build counts as 1 failed.
# Exit status: 0 only when nothing failed.
#
#   tools/test.sh                                        # the normal build in build/
#   tools/test.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false
set -euo pipefail
cd "$(dirname "$0")/.."

builddir=${1:-build}
if [ "$#" -gt 0 ]; then
    shift
fi
python=/usr/bin/python3
[ -x "$python" ] || python=python3

# report PASSED FAILED SKIPPED: print the summary line and write BUILDDIR/test-counts.txt.
report() {
    local line="$1 passed, $2 failed"
    if [ "$3" -gt 0 ]; then
        line+=", $3 skipped"
    fi
    mkdir -p "$builddir"
    printf 'passed=%s\nfailed=%s\nskipped=%s\n' "$1" "$2" "$3" >"$builddir/test-counts.txt"
    echo "$line"
}

# meson writes one JSON object per test to testlog.json, with a "result" field.
count_results() {
    "$python" - "$1" <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1], encoding="utf-8") as log:
    for line in log:
        if not line.strip():
            continue
        result = json.loads(line).get("result")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:  # FAIL, UNEXPECTEDPASS, TIMEOUT, ERROR, INTERRUPT, ...
            failed += 1
print(passed, failed, skipped)
PY
}

rm -f "$builddir/test-counts.txt"

if ! tools/setup.sh; then
    echo "test: tools/setup.sh failed" >&2
    report 0 1 0
    exit 1
fi

if [ -f "$builddir/meson-private/coredata.dat" ]; then
    # Already set up (maybe by tools/run-local.sh): make sure of --werror and the extra args.
    configure=(meson configure "$builddir" -Dwerror=true "$@")
else
    configure=(meson setup "$builddir" --werror "$@")
fi
if ! "${configure[@]}" || ! meson compile -C "$builddir"; then
    echo "test: the build in $builddir failed" >&2
    report 0 1 0
    exit 1
fi

testlog="$builddir/meson-logs/testlog.json"
rm -f "$testlog"
test_rc=0
meson test -C "$builddir" --print-errorlogs --num-processes 2 || test_rc=$?

passed=0 failed=0 skipped=0
if [ -f "$testlog" ]; then
    if ! counts=$(count_results "$testlog"); then
        echo "test: cannot read $testlog" >&2
        counts="0 1 0"
    fi
    read -r passed failed skipped <<<"$counts"
fi
if [ "$test_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "test: meson test exited $test_rc with no failed test in $testlog" >&2
    failed=1
fi

report "$passed" "$failed" "$skipped"
[ "$failed" -eq 0 ]

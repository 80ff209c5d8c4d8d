#!/usr/bin/env bash
# Usage: tools/test.sh [BUILDDIR] [extra `meson setup` args...]
#
# Installs the packages (tools/setup.sh), sets up BUILDDIR (default: build, relative to the
# repository root) with --werror if it is not set up yet, builds it, runs the test suite and
# prints "N passed, N failed" (", N skipped" appended when some were). The counts also go to
# BUILDDIR/test-counts.txt, which .ci/run adds up. A failed setup or build counts as 1 failed.
# Exit status: 0 only when nothing failed.
#
# A skip is said, never passed over: the meson tests that skipped (exit 77) and the tests that
# skipped inside a black-box file (which meson counts as one test that passed: each file's
# conftest writes its skips to BUILDDIR/test-skips/) are listed with their reasons, counted
# as skipped, and written to BUILDDIR/test-skips.txt ("WHERE<TAB>skip|xfail<TAB>REASON" a
# line), where .ci/run looks for capabilities CI must have. Expected failures are listed too.
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

# count_results TESTLOG SKIPDIR SKIPLIST FAILLIST: meson writes one JSON object per test to
# testlog.json, with a "result" field; the black-box files write their skips to SKIPDIR. Prints
# the skips to stderr and into SKIPLIST, "PASSED FAILED SKIPPED" on stdout, and writes FAILLIST:
# a line per failed test, its name and the FAILED lines of pytest's summary, which .ci/run
# repeats at its end, where a log cut to its last lines still shows them.
count_results() {
    "$python" - "$@" <<'PY'
import glob, json, os, sys
testlog, skipdir, skiplist, faillist = sys.argv[1:5]
passed = failed = skipped = 0
skips = []  # (where, kind, reason)
failures = []  # "TEST: RESULT[; each FAILED or ERROR line of pytest's summary]"
with open(testlog, encoding="utf-8") as log:
    for line in log:
        if not line.strip():
            continue
        test = json.loads(line)
        result = test.get("result")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
            said = [x.strip() for x in (test.get("stdout") or "").splitlines() if x.strip()]
            why = next((x for x in reversed(said) if x.upper().startswith("SKIP")), said[-1] if said else "")
            skips.append((test["name"].split(" / ")[-1], "skip", why.removeprefix("SKIP:").strip() or "(no reason)"))
        else:  # FAIL, UNEXPECTEDPASS, TIMEOUT, ERROR, INTERRUPT, ...
            failed += 1
            said = (test.get("stdout") or "").splitlines()
            why = [x.removeprefix("FAILED ../tests/").removeprefix("ERROR ../tests/")
                   for x in said if x.startswith(("FAILED ", "ERROR "))]
            failures.append(f"{test['name'].split(' / ')[-1]}: {result}" + "".join(f"; {x}" for x in why))
for path in sorted(glob.glob(os.path.join(skipdir, "*.txt"))):
    with open(path, encoding="utf-8") as f:
        for line in f:
            where, kind, reason = (line.rstrip("\n").split("\t", 2) + ["", ""])[:3]
            skips.append((where, kind, reason))
            skipped += kind == "skip"
with open(skiplist, "w", encoding="utf-8") as out:
    for where, kind, reason in skips:
        out.write(f"{where}\t{kind}\t{reason}\n")
        print(f"test: {'skipped' if kind == 'skip' else 'expected to fail'}: {where}: {reason}", file=sys.stderr)
with open(faillist, "w", encoding="utf-8") as out:
    out.writelines(f"{x}\n" for x in failures)
print(passed, failed, skipped)
PY
}

rm -f "$builddir/test-counts.txt" "$builddir/test-skips.txt" "$builddir/test-failures.txt"
rm -rf "$builddir/test-skips"

if ! tools/setup.sh; then
    echo "test: tools/setup.sh failed" >&2
    report 0 1 0
    echo "tools/setup.sh failed" >"$builddir/test-failures.txt"
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
    echo "the build failed" >"$builddir/test-failures.txt"
    exit 1
fi

testlog="$builddir/meson-logs/testlog.json"
rm -f "$testlog"
test_rc=0
# four at a time: the unit tests, the container test and the black-box files that mostly wait
# (tests/meson.build, bb_waiting); every other black-box file runs alone
meson test -C "$builddir" --print-errorlogs --num-processes 4 || test_rc=$?

passed=0 failed=0 skipped=0
if [ -f "$testlog" ]; then
    if ! counts=$(count_results "$testlog" "$builddir/test-skips" "$builddir/test-skips.txt" \
        "$builddir/test-failures.txt"); then
        echo "test: cannot read $testlog" >&2
        counts="0 1 0"
        echo "cannot read $testlog" >"$builddir/test-failures.txt"
    fi
    read -r passed failed skipped <<<"$counts"
fi
if [ "$test_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "test: meson test exited $test_rc with no failed test in $testlog" >&2
    failed=1
    echo "meson test exited $test_rc with no failed test in its log" >>"$builddir/test-failures.txt"
fi

report "$passed" "$failed" "$skipped"
[ "$failed" -eq 0 ]

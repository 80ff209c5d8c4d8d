#!/usr/bin/env bash
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
#        tools/fuzz.sh --build            # only build the targets (.ci/run, ahead of time)
#
# Builds every fuzz target of tests/fuzz/meson.build as a libFuzzer program
# (clang, ASan + UBSan, in build-fuzz/) and runs each for SECONDS (default
# 20) on a scratch copy of its seed corpus, so the repository's corpus is
# never written; as many targets at a time as there are CPUs (FUZZ_JOBS=N
# sets it). Prints one line per target with libFuzzer's execution
# count, then "N passed, N failed" (a crash, a leak or a sanitizer report
# fails its target; the reproducer is kept in build-fuzz/crashes/).
# Exit status: 0 only when no target failed.
#
#   tools/fuzz.sh                  # every target, 20 s each
#   tools/fuzz.sh 600 procfs       # one target for ten minutes
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=false
if [ "${1:-}" = --build ]; then
    build_only=true
    shift
fi
seconds=${1:-20}
if [ "$#" -gt 0 ]; then
    shift
fi
builddir=build-fuzz
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    # the keys of fuzz_targets in tests/fuzz/meson.build
    mapfile -t targets < <(sed -n "s/^  '\([a-z-]*\)' : .*/\1/p" tests/fuzz/meson.build)
fi

if [ ! -f "$builddir/meson-private/coredata.dat" ]; then
    # fuzzer-no-link: coverage feedback from the parsers' libraries too
    CC=clang-14 meson setup "$builddir" -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args=-fsanitize=fuzzer-no-link >/dev/null
fi
ninja -C "$builddir" $(printf 'tests/fuzz/fuzz-%s ' "${targets[@]}") >/dev/null
if $build_only; then
    exit 0
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$builddir/crashes"
passed=0 failed=0
# fuzz_one TARGET: fuzzes it on a scratch copy of its corpus; its exit status goes to
# $scratch/TARGET.rc, its log to $scratch/TARGET.log
fuzz_one() {
    local t=$1 rc=0
    mkdir -p "$scratch/$t"
    if [ -d "tests/fuzz/corpus/$t" ]; then
        cp "tests/fuzz/corpus/$t"/* "$scratch/$t/" 2>/dev/null || true
    fi
    "$builddir/tests/fuzz/fuzz-$t" -max_total_time="$seconds" -print_final_stats=1 \
        -artifact_prefix="$builddir/crashes/$t-" "$scratch/$t" >"$scratch/$t.log" 2>&1 || rc=$?
    echo "$rc" >"$scratch/$t.rc"
}

# as many targets at a time as there are CPUs (FUZZ_JOBS), each on its own
jobs=${FUZZ_JOBS:-$(nproc)}
running=0
for t in "${targets[@]}"; do
    fuzz_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait
for t in "${targets[@]}"; do
    log="$scratch/$t.log"
    if [ "$(cat "$scratch/$t.rc" 2>/dev/null)" = 0 ]; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "fuzz: $t: ${runs:-?} executions in ${seconds} s, no crash"
        passed=$((passed + 1))
    else
        echo "fuzz: $t: FAILED (reproducer in $builddir/crashes/); the end of its log:"
        tail -n 30 "$log"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

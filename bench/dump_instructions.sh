#!/usr/bin/env bash
# bench/dump_instructions.sh BUILD_DIR LIB [BASELINE_LIB]: the instructions of a
# dump of a full 4096-record ring (bench/watchdog --dump: the mean of 4 dumps
# on request, the first one included, counted inside ncclguard_dump_write), for
# LIB and, when given, an older build in the same run. Callgrind's count is the stable figure on a shared machine,
# where the dump's time (bench/watchdog) moves with the load.
set -u
B=$1
if ! command -v valgrind >/dev/null; then
    echo "dump instructions: valgrind is not installed; skipped"
    exit 0
fi
count() { # LIB: instructions per dump
    local d; d=$(mktemp -d)
    env LD_LIBRARY_PATH="$B/fakes" LD_PRELOAD="$1" NCCLGUARD_LOG_LEVEL=error \
        NCCLGUARD_DUMP_DIR="$d/dumps" valgrind --tool=callgrind \
        --toggle-collect=ncclguard_dump_write --callgrind-out-file="$d/cg" \
        "$B/bench/watchdog" --dump 3 >/dev/null 2>&1
    callgrind_annotate "$d/cg" 2>/dev/null |
        awk '/PROGRAM TOTALS/ {gsub(",", "", $1); printf "%d", $1 / 4}'
    rm -rf "$d"
}
this=$(count "$2")
echo "dump instructions (this build): $this per dump of a full 4096-record ring"
if [ -n "${3:-}" ]; then
    base=$(count "$3")
    echo "dump instructions (baseline): $base per dump"
    awk -v a="$this" -v b="$base" 'BEGIN {printf "dump instructions: ratio this build / baseline %.2f\n", a / b}'
fi

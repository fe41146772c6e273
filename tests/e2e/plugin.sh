#!/usr/bin/env bash
# libncclguard.so as NCCL's profiler plugin, with no LD_PRELOAD: named only in
# NCCL_PROFILER_PLUGIN (the pattern of a job whose NCCL the wrappers cannot see), it
# is found by the fake NCCL's plugin loader, and at exit each rank says, per
# communicator, how many collectives NCCL enqueued and how many kernels started and
# finished. Without NCCL_PROFILER_PLUGIN the preloaded shim is not a plugin.
source "$(dirname "$0")/lib.sh"

if [ ! -x "$APPS/trainloop" ] || [ ! -e "$SHIM" ]; then
    skip "profiler plugin" "harness not built"; finish; exit
fi
# under ASan the sanitizer's runtime must come first, as the shim is not preloaded
asan=
[ "${SANITIZE:-}" = 1 ] && asan=$(gcc -print-file-name=libasan.so)

mkdir -p "$TMP/plugin"
(cd "$TMP/plugin" && clean LD_PRELOAD="$asan" LD_LIBRARY_PATH="$FAKES" \
    NCCL_PROFILER_PLUGIN="$SHIM" NCCLGUARD_DUMP_DIR="$TMP/plugin/dumps" \
    -- "$APPS/launch" -n 2 --timeout 120 -- "$APPS/trainloop" --steps 5 --quiet \
    >"$TMP/plugin/out" 2>&1)
rc=$?
check "the job runs with the shim as its profiler plugin" test "$rc" = 0
seen='seen by the profiler plugin: [0-9]+ collectives enqueued, [0-9]+ kernels started'
lines=$(grep -cE "rank [01]/2 $seen, [0-9]+ finished\$" "$TMP/plugin/out")
if [ "$lines" = 2 ]; then pass "each rank reports the world communicator seen by the plugin"
else fail "each rank reports the world communicator seen by the plugin" "$lines lines"; show plugin; fi
# the world communicator: one hash on both ranks, nothing left unfinished, and as many
# collectives as kernels
world=$(grep -o 'communicator [0-9a-f]* rank [01]/2 seen by the profiler plugin: .*' \
    "$TMP/plugin/out" | sed 's/ rank [01]\/2//' | sort -u)
if [ "$(echo "$world" | wc -l)" = 1 ] &&
    echo "$world" | grep -qE ': ([1-9][0-9]*) collectives enqueued, \1 kernels started, \1 finished$'; then
    pass "both ranks saw the same collectives enqueued, started and finished"
else
    fail "both ranks saw the same collectives" "$world"
fi

mkdir -p "$TMP/preload"
(cd "$TMP/preload" && clean LD_PRELOAD="$(preload)" LD_LIBRARY_PATH="$FAKES" \
    NCCLGUARD_DUMP_DIR="$TMP/preload/dumps" \
    -- "$APPS/launch" -n 2 --timeout 120 -- "$APPS/trainloop" --steps 3 --quiet \
    >"$TMP/preload/out" 2>&1)
if ! grep -q 'seen by the profiler plugin' "$TMP/preload/out"; then
    pass "preloaded without NCCL_PROFILER_PLUGIN, the shim is not loaded as a plugin"
else
    fail "preloaded without NCCL_PROFILER_PLUGIN" "$(grep 'profiler plugin' "$TMP/preload/out")"
fi
finish

#!/usr/bin/env bash
# ThreadSanitizer over the threaded parts (make tsan builds everything with
# -fsanitize=thread into build-tsan): the flight recorder under concurrent
# writers, the observer's lanes beside one, jobs whose watchdog polls while
# application threads enqueue (and, in plugin mode, NCCL's threads report), the writer thread of the log files, a ring
# that overflows while the watchdog polls, and the dump thread's wake-ups.
source "$(dirname "$0")/lib.sh"
if [ "${SANITIZE:-}" != thread ]; then
    skip "tsan" "run with make tsan"; finish; exit
fi
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 report_signal_unsafe=0"
# Enqueue stacks off: libunwind's per-thread cache (unw_backtrace) is freed by a TSD
# destructor that runs after ThreadSanitizer has finished the exiting thread, and
# its mutex call then crashes inside TSan's interceptor (SIGSEGV in
# __tsan::MutexPreLock from __nptl_deallocate_tsd). Plain and ASan builds are not
# affected; the stack table's own concurrency is tested by test_shim_stacks.
export NCCLGUARD_STACKS=0
reports() { grep -c 'WARNING: ThreadSanitizer' "$1" 2>/dev/null || true; }
# unit NAME WHAT: the Check suite test_shim_NAME passes with no race reported
unit() {
    local out=$TMP/$1.out rc
    "$ROOT/$B/tests/unit/test_shim_$1" >"$out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$(reports "$out")" = 0 ]; then
        pass "$2"
    else
        fail "test_shim_$1 under TSan" "rc=$rc"; tail -n 30 "$out"
    fi
}

unit flight "flight recorder: concurrent writers and readers, no race"

# The observer's lanes while a writer overwrites their records in flight.
unit observer "observer lanes: records overwritten in flight while passes run, no race"

# The marker pools' stacks: threads take from each other's homes.
unit markers "marker pools: threads taking and giving back at once, no race"

# The cache of call sites: threads make sites and use each other's at once.
CK_RUN_CASE=threads unit stacks "enqueue stacks: threads making and using cached call sites, no race"

# The stack signal: threads unwind themselves into slots that the dumping thread reads.
unit threads "all-thread stacks: handler slots and the collector, no race"

# The live metrics file too, written every 0.1 s by the dump thread while the observer
# counts the ops it ends (watch/metrics.c).
mkdir -p "$TMP/metrics"
for args in "--steps 10 --threads 4" "--steps 10 --nonblocking" "--steps 6 --graph"; do
    (cd "$TMP" && NCCLGUARD_POLL_MS=1 NCCLGUARD_DUMP_AT_EXIT=1 \
        NCCLGUARD_METRICS=textfile:$TMP/metrics NCCLGUARD_METRICS_INTERVAL=0.1 \
        NCCLGUARD_METRICS_KEEP_AT_EXIT=1 \
        under_shim "$APPS/launch" -n 2 --timeout 300 -- "$APPS/trainloop" $args --quiet \
        >"$TMP/job.out" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && [ "$(reports "$TMP/job.out")" = 0 ] && ls "$TMP"/metrics/*.prom >/dev/null; then
        pass "watchdog polling every 1 ms during trainloop $args, metrics every 0.1 s: no race"
        rm -f "$TMP"/metrics/*.prom
    else
        fail "trainloop $args under TSan" "rc=$rc"; grep -A 30 'WARNING: ThreadSanitizer' "$TMP/job.out" | head -n 60
    fi
done
# plugin mode: NCCL's proxy thread moves kernel marks on while the observer polls them
(cd "$TMP" && NCCLGUARD_POLL_MS=1 NCCLGUARD_DUMP_AT_EXIT=1 NCCL_PROFILER_PLUGIN="$SHIM" \
    LD_PRELOAD="$(gcc -print-file-name=libtsan.so)" with_fakes "$APPS/launch" -n 2 --timeout 300 \
    -- "$APPS/trainloop_static" --steps 10 --threads 2 --quiet >"$TMP/plugin.out" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$(reports "$TMP/plugin.out")" = 0 ] &&
    grep -q 'seen by the profiler plugin only' "$TMP/plugin.out"; then
    pass "plugin mode, the watchdog polling every 1 ms: no race"
else
    fail "plugin mode under TSan" "rc=$rc"; grep -A 30 'WARNING: ThreadSanitizer' "$TMP/plugin.out" | head -n 60
fi
# the writer thread of the log and event files, fed by application threads and the
# watchdog at the debug level; and stuck in write(2) while callers go on
"$ROOT/$B/tests/unit/test_shim_output" >"$TMP/output.out" 2>&1
rc=$?
(cd "$TMP" && NCCLGUARD_POLL_MS=1 NCCLGUARD_LOG_LEVEL=debug NCCLGUARD_LOG="$TMP/tsan.log" \
    NCCLGUARD_EVENTS="$TMP/tsan.jsonl" under_shim "$APPS/launch" -n 2 --timeout 300 -- \
    "$APPS/trainloop" --steps 10 --threads 4 --quiet >"$TMP/spool.out" 2>&1)
rcj=$?
if [ $rc -eq 0 ] && [ $rcj -eq 0 ] && [ "$(reports "$TMP/output.out")" = 0 ] &&
    [ "$(reports "$TMP/spool.out")" = 0 ] && grep -q 'summary: ' "$TMP/tsan.log"; then
    pass "log and event writer thread, with many writers and when stuck: no race"
else
    fail "log writer under TSan" "rc=$rc job=$rcj"
    grep -h -A 30 'WARNING: ThreadSanitizer' "$TMP/output.out" "$TMP/spool.out" | head -n 60
fi
# records dropped in flight give their events back while the watchdog polls
(cd "$TMP" && NCCLGUARD_RING=16 NCCLGUARD_POLL_MS=1 under_shim "$E2E/ring_wrap" 200 40 \
    >"$TMP/wrap.out" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$(reports "$TMP/wrap.out")" = 0 ]; then
    pass "ring overflow with the watchdog polling every 1 ms: no race"
else
    fail "ring_wrap under TSan" "rc=$rc"; grep -A 30 'WARNING: ThreadSanitizer' "$TMP/wrap.out" | head -n 60
fi
# a dump held in fsync on the dump thread while the enforcer polls, reports timeouts,
# holds back an abort and an application thread destroys a communicator
if [ -f "$E2E/libslowfs.so" ]; then
    d=$TMP/stall
    mkdir -p "$d" && touch "$d/hold"
    (cd "$d" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_POLL_MS=5 NCCLGUARD_ABORT_AT=1 \
        NCCLGUARD_DUMP_DIR="$d/dumps" NCCLGUARD_EVENTS="$d/events.jsonl" SLOWFS_HOLD="$d/hold" \
        LD_PRELOAD="$(preload):$E2E/libslowfs.so" with_fakes \
        "$E2E/dump_stall" "$d/hold" "$d/events.jsonl" abort >"$TMP/stall.out" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && [ "$(reports "$TMP/stall.out")" = 0 ]; then
        pass "dump thread held while the enforcer polls and an abort waits: no race"
    else
        fail "dump_stall under TSan" "rc=$rc"; grep -A 30 'WARNING: ThreadSanitizer' "$TMP/stall.out" | head -n 60
    fi
fi
# the dump thread woken from the dump signal's handler, and by its own incident
# (raised on a timeout, written to the node's fan-out it watches)
d=$TMP/wake
mkdir -p "$d"
NCCLGUARD_POLL_MS=60000 NCCLGUARD_DUMP_DIR="$d" NCCLGUARD_NODE_DIR="$TMP" under_shim \
    "$E2E/idle_wakes" signal "$d" >"$TMP/wake.out" 2>&1
rc=$?
NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_POLL_MS=5 NCCLGUARD_DUMP_DIR="$d" \
    NCCLGUARD_NODE_DIR="$TMP" under_shim "$E2E/idle_wakes" hang "$d" >>"$TMP/wake.out" 2>&1
rc=$((rc + $?))
if [ $rc -eq 0 ] && [ "$(reports "$TMP/wake.out")" = 0 ]; then
    pass "dump thread woken by the dump signal and by an incident: no race"
else
    fail "idle_wakes under TSan" "rc=$rc"; grep -A 30 'WARNING: ThreadSanitizer' "$TMP/wake.out" | head -n 60
fi
dumps_sane
finish

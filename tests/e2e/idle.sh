#!/usr/bin/env bash
# The watchdog at rest: with an op in flight and nothing due, the enforcer and
# the dump thread wake far less often than the observer polls; a dump asked
# for by signal, and one for another process's incident on the same node, come
# at once, not at the next period (NCCLGUARD_POLL_MS=60000 here). The counts
# are timeslices from /proc (tests/e2e/progs/idle_wakes.c), the bounds halves
# of the observer's: no timing threshold.
source "$(dirname "$0")/lib.sh"
if [ ! -x "$E2E/idle_wakes" ]; then
    skip "idle" "harness not built"; finish; exit
fi

out=$(NCCLGUARD_POLL_MS=10 NCCLGUARD_LOG_LEVEL=error NCCLGUARD_DUMP_DIR=$TMP/wakes \
    under_shim timeout 120 "$E2E/idle_wakes" wakes 2>&1)
rc=$?
if [ $rc = 3 ]; then
    skip "idle wake-ups" "no /proc/<pid>/task/<tid>/schedstat"
elif [[ $rc = 0 && "$out" =~ observer\ ([0-9]+)\ enforcer\ ([0-9]+)\ dump\ ([0-9]+) ]]; then
    obs=${BASH_REMATCH[1]} enf=${BASH_REMATCH[2]} dmp=${BASH_REMATCH[3]}
    if [ "$obs" -ge 200 ] && [ $((enf * 2)) -le "$obs" ] && [ $((dmp * 2)) -le "$obs" ]; then
        pass "idle: the enforcer woke $enf and the dump thread $dmp times while the observer polled $obs"
    else
        fail "idle wake-ups" "observer $obs, enforcer $enf, dump thread $dmp (at most half each)"
    fi
else
    fail "idle wake-ups" "rc=$rc $out"
fi

# The same with a metrics file every 0.5 s (50 periods): the dump thread, which writes
# it, wakes for it once an interval and no more; the enforcer not at all. (Its timer
# runs on the wall clock and the observer's sleeps stretch on a loaded machine: at 0.1 s,
# 200 polls that took 16 s let the dump thread wake 161 times, over half.)
mkdir -p "$TMP/metrics"
out=$(NCCLGUARD_POLL_MS=10 NCCLGUARD_LOG_LEVEL=error NCCLGUARD_DUMP_DIR=$TMP/wakes \
    NCCLGUARD_METRICS=textfile:$TMP/metrics NCCLGUARD_METRICS_INTERVAL=0.5 NCCLGUARD_METRICS_KEEP_AT_EXIT=1 \
    under_shim timeout 120 "$E2E/idle_wakes" wakes 2>&1)
rc=$?
if [ $rc = 3 ]; then
    skip "idle wake-ups with metrics" "no /proc/<pid>/task/<tid>/schedstat"
elif [[ $rc = 0 && "$out" =~ observer\ ([0-9]+)\ enforcer\ ([0-9]+)\ dump\ ([0-9]+) ]]; then
    obs=${BASH_REMATCH[1]} enf=${BASH_REMATCH[2]} dmp=${BASH_REMATCH[3]}
    if [ "$obs" -ge 200 ] && [ $((enf * 2)) -le "$obs" ] && [ $((dmp * 2)) -le "$obs" ] &&
        ls "$TMP/metrics"/*.prom >/dev/null 2>&1; then
        pass "idle with metrics every 0.5 s: the dump thread woke $dmp and the enforcer $enf times while the observer polled $obs"
    else
        fail "idle wake-ups with metrics" "observer $obs, enforcer $enf, dump thread $dmp (at most half each); files: $(ls "$TMP/metrics")"
    fi
else
    fail "idle wake-ups with metrics" "rc=$rc $out"
fi

d=$TMP/signal
mkdir -p "$d"
out=$(NCCLGUARD_POLL_MS=60000 NCCLGUARD_TRIGGER_POLL_S=3600 NCCLGUARD_LOG_LEVEL=error \
    NCCLGUARD_DUMP_DIR=$d NCCLGUARD_NODE_DIR=$TMP under_shim timeout 120 \
    "$E2E/idle_wakes" signal "$d" 2>&1)
rc=$?
if [ $rc = 0 ]; then pass "a dump asked for by SIGUSR2 is written before the next period (60 s)"
else fail "dump by signal with a long period" "rc=$rc $out"; fi

# join: idle, long periods, waits for its dump; hang: times out after 1 s and
# raises the incident, which reaches join through the node's fan-out.
d=$TMP/join
mkdir -p "$d"
(NCCLGUARD_POLL_MS=60000 NCCLGUARD_TRIGGER_POLL_S=3600 NCCLGUARD_LOG_LEVEL=error RANK=1 \
    NCCLGUARD_DUMP_DIR=$d NCCLGUARD_NODE_DIR=$TMP under_shim timeout 120 \
    "$E2E/idle_wakes" join "$d" >"$TMP/join.out" 2>&1; echo $? >"$TMP/join.rc") &
if wait_for 60 grep -q "idle_wakes: ready" "$TMP/join.out"; then
    NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_LOG_LEVEL=error RANK=0 \
        NCCLGUARD_DUMP_DIR=$d NCCLGUARD_NODE_DIR=$TMP under_shim timeout 120 \
        "$E2E/idle_wakes" hang "$d" >"$TMP/hang.out" 2>&1
fi
wait
if [ "$(cat "$TMP/join.rc" 2>/dev/null)" = 0 ] && grep -q '"reason":"trigger"' "$d"/ncclguard-r1-*.json; then
    pass "another process's incident reaches an idle one through the fan-out before its next period"
else
    fail "incident through the fan-out with long periods" "$(cat "$TMP/join.out" "$TMP/hang.out" 2>/dev/null | tail -n 5)"
fi
dumps_sane
finish

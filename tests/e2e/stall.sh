#!/usr/bin/env bash
# A dump that a slow file system holds up stalls nobody but the dump thread
# (watch/dumper.c): the watchdog goes on polling and reporting timeouts, an
# application thread's ncclCommDestroy returns, and the escalation ladder waits
# for the dump before it aborts. The file system is libslowfs.so, whose fsync of
# a dump's temp file does not return while a hold file exists. No timing
# threshold: every step waits for its condition (tests/e2e/progs/dump_stall.c).
source "$(dirname "$0")/lib.sh"
if [ ! -x "$E2E/dump_stall" ] || [ ! -f "$E2E/libslowfs.so" ]; then
    skip "stall" "harness not built"; finish; exit
fi

for mode in plain abort exit sigterm; do
    d=$TMP/$mode
    mkdir -p "$d"
    touch "$d/hold"
    (cd "$d" || exit; [ $mode = abort ] && export NCCLGUARD_ABORT_AT=1
        NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_POLL_MS=50 \
        NCCLGUARD_DUMP_DIR="$d/dumps" NCCLGUARD_EVENTS="$d/events.jsonl" SLOWFS_HOLD="$d/hold" \
        LD_PRELOAD="$(preload):$E2E/libslowfs.so" with_fakes \
        timeout 400 "$E2E/dump_stall" "$d/hold" "$d/events.jsonl" $mode >"$d/out" 2>&1)
    rc=$?
    want=4 want_rc=0
    [ $mode = abort ] && want=6
    [ $mode = exit ] && want=4 # no dump: the process ended with it held
    [ $mode = sigterm ] && want=4 want_rc=143 # dies of SIGTERM, once the dump is written
    got=$(grep -c '^dump_stall: ok' "$d/out")
    if [ $rc -eq $want_rc ] && [ "$got" = $want ] && { [ $mode = exit ] || ls "$d"/dumps/*.json >/dev/null 2>&1; }; then
        pass "$mode: with the dump held, timeouts go on, ncclCommDestroy returns$([ $mode = abort ] && echo ', no abort before the dump')$([ $mode = exit ] && echo ', the process exits')$([ $mode = sigterm ] && echo ', SIGTERM waits for the dump')"
    else
        fail "dump held ($mode)" "rc=$rc, $got of $want steps"; cat "$d/out"
    fi
done
# SIGTERM found a dump written already: it wrote none of its own
if grep -q '"reason":"sigterm"' "$TMP"/sigterm/dumps/*.json 2>/dev/null; then
    fail "sigterm: a second dump" "$(ls "$TMP"/sigterm/dumps)"
else pass "sigterm: the held dump is the process's only one"; fi
# the dump still comes before the abort in the event log
if python3 - "$TMP/abort/events.jsonl" <<'PY'
import json, sys
ev = [json.loads(l)["event"] for l in open(sys.argv[1])]
assert ev.index("dump") < ev.index("abort"), ev
PY
then pass "abort: the event log has the dump before the abort"
else fail "dump before abort in the event log"; fi

dumps_sane
finish

#!/usr/bin/env bash
# The escalation ladder beyond warn and dump: abort (with the handle fenced) and
# kill, on the CPU harness. Timeouts are short (1-2 s) but every wait is bounded
# generously by launch --timeout.
source "$(dirname "$0")/lib.sh"
if [ ! -x "$APPS/trainloop" ] || [ ! -x "$E2E/fence" ]; then
    skip "ladder" "harness not built"; finish; exit
fi

# --- the fence: what the application sees on a handle ncclguard aborted -----------------
for mode in abort destroy; do
    (cd "$TMP" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_ABORT_AT=2 NCCLGUARD_DUMP_DIR=$TMP/fence-$mode \
        under_shim "$E2E/fence" $mode >"$TMP/fence-$mode.out" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c '^fence: ok' "$TMP/fence-$mode.out")" = 6 ] &&
        ! grep -q '^fakenccl:' "$TMP/fence-$mode.out" &&
        grep -q 'aborting comm' "$TMP/fence-$mode.out" &&
        ls "$TMP/fence-$mode"/*.json >/dev/null 2>&1; then
        pass "fenced handle: errors and explanations, then the application's own $mode succeeds without reaching NCCL"
    else
        fail "fence ($mode)" "rc=$rc"; cat "$TMP/fence-$mode.out"
    fi
done

# --- abort on the harness: stalled GPU, hung host ------------------------------------------
for fault in "--stall-gpu-rank 2 --stall-step 3" "--hang-rank 1 --hang-step 3"; do
    name=abort-${fault%% *}; name=${name//-/_}
    mkdir -p "$TMP/$name"
    (cd "$TMP/$name" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_ABORT_AT=3 NCCLGUARD_DUMP_DIR=$TMP/$name/dumps \
        under_shim "$APPS/launch" -n 4 --timeout 90 -- "$APPS/trainloop" --steps 30 $fault \
        --quiet >"$TMP/$name/out" 2>&1)
    rc=$?
    aborted=$(grep -c 'aborting comm' "$TMP/$name/out")
    # An abort is local (as in NCCL): no peer learns of it, so every rank that
    # fails must have escalated on its own. Each failing rank's error names its
    # own fenced communicator, and that rank printed its own "aborting comm".
    own=1
    while read -r r; do
        grep -q "^ncclguard: \[rank $r .*aborting comm" "$TMP/$name/out" || own=0
    done < <(sed -n 's/^trainloop: rank \([0-9]\): .* failed: .*/\1/p' "$TMP/$name/out")
    if [ $rc -eq 2 ] && [ "$aborted" -ge 1 ] && [ $own -eq 1 ] &&
        grep -q 'trainloop: rank [0-9]: .* failed: .*ncclguard aborted this communicator' \
            "$TMP/$name/out" &&
        ! grep 'trainloop: rank [0-9]: .* failed: ' "$TMP/$name/out" |
            grep -vq 'ncclguard aborted this communicator' &&
        [ "$(ls "$TMP/$name/dumps" | wc -l)" -ge 3 ] &&
        ! grep -q 'ncclCommAbort of comm .* after -' "$TMP/$name/out"; then
        pass "abort ($fault): each failing rank escalated on its own ($aborted comms aborted)"
    else
        fail "abort ($fault)" "rc=$rc aborted=$aborted"; tail -n 20 "$TMP/$name/out"
    fi
done

# --- an abort that misses its deadline escalates to kill ---------------------------------
(cd "$TMP" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_ABORT_AT=2 \
    NCCLGUARD_ABORT_DEADLINE=1 NCCLGUARD_KILL_AT=1000 NCCLGUARD_KILL_EXIT=77 \
    NCCLGUARD_DUMP_DIR=$TMP/deadline FAKENCCL_ABORT_HANG_MS=600000 \
    under_shim timeout 120 "$E2E/fence" wait >"$TMP/deadline.out" 2>&1)
rc=$?
if [ $rc -eq 77 ] && grep -q 'ncclCommAbort of comm .* has not returned' "$TMP/deadline.out" &&
    grep -q '"reason":"kill"' "$TMP"/deadline/*.json; then
    pass "an ncclCommAbort that hangs past abort_deadline escalates to kill (exit 77)"
else
    fail "abort deadline" "rc=$rc"; tail -n 8 "$TMP/deadline.out"
fi

# --- kill: the documented exit status, after a durable dump -------------------------------
mkdir -p "$TMP/kill"
(cd "$TMP/kill" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_KILL_AT=2 NCCLGUARD_KILL_EXIT=99 \
    NCCLGUARD_DUMP_DIR=$TMP/kill/dumps under_shim "$APPS/launch" -n 2 --timeout 90 -- \
    "$APPS/trainloop" --steps 30 --stall-gpu-rank 1 --stall-step 3 --quiet >"$TMP/kill/out" 2>&1)
rc=$?
reasons=$(python3 -c 'import glob,json,sys
print(sorted({json.load(open(p))["reason"] for p in glob.glob(sys.argv[1]+"/*.json")}))' \
    "$TMP/kill/dumps" 2>/dev/null)
# The rank that ended itself dumped with reason kill; its peer may have been
# stopped by launch before its own kill, with its timeout dump.
if [ $rc -eq 99 ] && grep -q 'launch: rank [01] exited with status 99' "$TMP/kill/out" &&
    grep -q 'ending the process with status 99' "$TMP/kill/out" &&
    [[ "$reasons" == *"'kill'"* ]] &&
    ! ls "$TMP/kill"/core* >/dev/null 2>&1; then
    pass "kill: exit status 99 (NCCLGUARD_KILL_EXIT), dump with reason kill, no core file"
else
    fail "kill" "rc=$rc reasons=$reasons"; tail -n 20 "$TMP/kill/out"
fi
finish

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

# --- dump and abort due in the same poll: the dump comes first --------------------------
# The fence's AllReduce is its communicator's first op, so FIRST_TIMEOUT (2 s) sets the
# ladder, not TIMEOUT (1 s): the dump is due at 1.5 x 2 s with the abort, and shows the
# state that mattered (the communicator ready, the op scheduled), not the abort's. With
# dump_at off, the abort still writes its dump first. warn_at is set apart from dump_at:
# at 3 the op is not yet reported timed out when it is dumped, at 1 it is (and the dump
# still waits for dump_at).
for ladder in "1.5 3" "1.5 1" "off 1"; do
    read -r dump_at warn_at <<<"$ladder"
    d=$TMP/order-$dump_at-$warn_at
    (cd "$TMP" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=2 NCCLGUARD_DUMP_AT=$dump_at \
        NCCLGUARD_WARN_AT=$warn_at NCCLGUARD_ABORT_AT=1.5 NCCLGUARD_DUMP_DIR=$d \
        under_shim "$E2E/fence" abort >"$d.out" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && python3 - "$d"/*.json "$warn_at" >"$d.check" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
(c,), (o,) = d["comms"], d["ops"]
assert d["reason"] == "timeout", d["reason"]
assert c["state"] == "ready" and o["state"] == "scheduled", (c["state"], o["state"])
warned = float(sys.argv[2]) <= 1.5
assert "first" in o["flags"] and ("timeout" in o["flags"]) == warned, o["flags"]
age = (d["time_ns"] - o["enqueue_ns"]) / 1e9
assert age >= 0.95 * 1.5 * 2, f"dumped after {age:.1f} s, before 1.5 x the first-op timeout"
PY
    then
        pass "dump_at=$dump_at warn_at=$warn_at abort_at=1.5: dumped ready and scheduled, then aborted"
    else
        fail "dump before abort (dump_at=$dump_at warn_at=$warn_at)" "rc=$rc $(cat "$d.check")"
        tail -n 5 "$d.out"
    fi
done

# --- abort on the harness: stalled GPU, hung host ------------------------------------------
# The ops that hang are not their communicator's first: FIRST_TIMEOUT, far off, must not
# be the one that counts.
for fault in "--stall-gpu-rank 2 --stall-step 3" "--hang-rank 1 --hang-step 3"; do
    name=abort-${fault%% *}; name=${name//-/_}
    mkdir -p "$TMP/$name"
    (cd "$TMP/$name" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=600 NCCLGUARD_ABORT_AT=3 NCCLGUARD_DUMP_DIR=$TMP/$name/dumps \
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
(cd "$TMP/kill" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=600 NCCLGUARD_KILL_AT=2 NCCLGUARD_KILL_EXIT=99 \
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
dumps_sane
finish

#!/usr/bin/env bash
# Enqueue stacks end to end: a hang's timeout line says where the op was
# enqueued, the dump holds the whole stack of every op, and the settings
# (NCCLGUARD_STACKS, NCCLGUARD_STACK_DEPTH) do what they say.
source "$(dirname "$0")/lib.sh"
LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop
if [ ! -x "$TRAIN" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "stacks" "harness not built"; finish; exit
fi
# stacks_check NAME [ARG]: checks the dumps of job NAME with check_dump.py, then runs
# the Python program on stdin with ARG (when given) and the dumps as arguments
stacks_check() {
    $CHECK schema "$TMP/$1"/dumps/*.json >"$TMP/$1/check" 2>&1 &&
        python3 - ${2:+"$2"} "$TMP/$1"/dumps/*.json >>"$TMP/$1/check" 2>&1
}

# --- a hang: where the timed-out op was enqueued, in the line and the dump ---------------
NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600 \
    UNTIL="[ \$(ls $TMP/hang/dumps/*.json 2>/dev/null | wc -l) -ge 2 ] && grep -q 'in flight' $TMP/hang/out" \
    job hang -n 2 --timeout 120 -- --steps 40 --hang-rank 1 --hang-step 3 --quiet
if grep -q 'ncclguard: \[rank 0 .*in flight .* at tl_step_issue ← run_worker ← main (stack [0-9]*)$' \
        "$TMP/hang/out" &&
    stacks_check hang "$(readelf -n "$TRAIN" | sed -n 's/.*Build ID: //p')" <<'PY'
import json, sys
build_id = sys.argv.pop(1)
for path in sys.argv[1:]:
    d = json.load(open(path))
    assert d["stack_table"]["depth"] == 24 and d["stack_table"]["lost"] == 0, d["stack_table"]
    stacks = {s["id"]: s["frames"] for s in d["stacks"]}
    assert d["ops"] and all(o["stack"] in stacks for o in d["ops"]), "an op without its stack"
    for frames in stacks.values():
        assert frames[0]["function"] == "tl_step_issue", frames[0]
        assert not any("libncclguard" in (f["module"] or "") for f in frames), frames
        assert build_id and frames[0]["build_id"] == build_id, (build_id, frames[0])
    if d["rank"] == 0:
        late = [o for o in d["ops"] if "timeout" in o["flags"]]
        assert late and all(stacks[o["stack"]][2]["function"] == "main" for o in late), late
print("every op's stack starts in tl_step_issue; none holds a frame of the shim")
PY
then
    pass "hang: the timeout line ends 'at tl_step_issue ← run_worker ← main'; $(tail -n 1 "$TMP/hang/check")"
else
    fail "enqueue stacks of a hang" "$(cat "$TMP/hang/check" 2>/dev/null)"; show hang
fi

# --- NCCLGUARD_STACKS=0: no stacks, and the dump says so ---------------------------------
NCCLGUARD_STACKS=0 NCCLGUARD_DUMP_AT_EXIT=1 job off -n 2 --timeout 120 -- --steps 5 --quiet
if [ $rc -eq 0 ] && stacks_check off <<'PY'
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    assert d["stack_table"] == {"depth": 0, "capacity": 0, "used": 0, "lost": 0}, d["stack_table"]
    assert d["stacks"] == [] and all(o["stack"] is None for o in d["ops"])
print("no stack anywhere")
PY
then
    pass "NCCLGUARD_STACKS=0: $(tail -n 1 "$TMP/off/check")"
else
    fail "NCCLGUARD_STACKS=0" "rc=$rc $(cat "$TMP/off/check" 2>/dev/null)"; show off
fi

# --- NCCLGUARD_STACK_DEPTH: 2 frames kept; a bad value: one line, and 24 ------------------
NCCLGUARD_STACK_DEPTH=2 NCCLGUARD_DUMP_AT_EXIT=1 job two -n 2 --timeout 120 -- --steps 5 --quiet
NCCLGUARD_STACK_DEPTH=many NCCLGUARD_DUMP_AT_EXIT=1 job bad -n 1 --timeout 120 -- --steps 5 --quiet
bad=$rc
if [ $rc -eq 0 ] && [ $bad -eq 0 ] && stacks_check two <<'PY' &&
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    assert d["stack_table"]["depth"] == 2 and d["stacks"], d["stack_table"]
    assert all(len(s["frames"]) == 2 for s in d["stacks"]), d["stacks"]
print("2 frames each")
PY
    [ "$(grep -c 'rank 0 .*NCCLGUARD_STACK_DEPTH=many ignored .*using 24' "$TMP/bad/out")" = 1 ] &&
    stacks_check bad <<'PY'
import json, sys
assert json.load(open(sys.argv[1]))["stack_table"]["depth"] == 24
PY
then
    pass "NCCLGUARD_STACK_DEPTH=2 keeps 2 frames; 'many' gets one line and the default 24"
else
    fail "NCCLGUARD_STACK_DEPTH" "rc=$rc/$bad $(cat "$TMP/two/check" "$TMP/bad/check" 2>/dev/null)"
    show two; show bad
fi

dumps_sane
finish

#!/usr/bin/env bash
# Chains of waits across communicators and streams, end to end: trainloop jobs on the
# CPU harness whose culprit is at the end of a chain, and `ncclguard analyze` names it
# with the cause found there and the path that led to it (docs/analysis.md, Chains).
#  - split: rank 1's split stream stalls (--stall-split-rank); its host waits for the
#    split result and never calls the next world AllReduce, nor does its tp partner.
#    rank 1 is missing on the world and gpu_not_started on the split: the verdict is
#    gpu_not_started on the split, with the chain world -> split.
#  - pipeline: rank 0 drops the Send of its hand-off group (--drop-send-rank); its
#    partner's tp and world streams wait behind the Recv through events the shim does
#    not see. The verdict is rank 0, p2p, with no "not NCCL's" for the victims.
source "$(dirname "$0")/lib.sh"
needs_harness chains "$APPS/trainloop"

# chain NAME CHECK: analyze $TMP/NAME/dumps (exit 1: a culprit), then the Python
# expression CHECK on the culprits `c` (verdict.culprits), the communicators `world`
# (the 4-rank one's id) and the text `t`; passes when it holds.
chain() {
    local name=$1 check=$2 rc out
    "$NG" analyze --json "$TMP/$name/dumps" >"$TMP/$name.json" 2>"$TMP/$name.err"
    rc=$?
    "$NG" analyze "$TMP/$name/dumps" >"$TMP/$name.txt" 2>/dev/null
    if [ $rc = 1 ] && out=$(python3 - "$TMP/$name.json" "$TMP/$name.txt" "$check" 2>&1 <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read().split("\n\n")[0]
c = v["verdict"]["culprits"]
world = [x["id"] for x in v["communicators"] if x["nranks"] == 4]
assert len(world) == 1, v["communicators"]
world = world[0]
ok = eval(" ".join(sys.argv[3].split()))
assert ok, " | ".join(f"{x['rank']}:{x['cause']} path={x['path']}" for x in c)
PY
); then
        pass "$name: $(head -n 1 "$TMP/$name.txt" | cut -c1-200)"
    else
        fail "$name" "exit $rc: ${out:-} $(head -n 2 "$TMP/$name.txt")"
        tail -n 5 "$TMP/$name/out"
    fi
}

# Short timeouts (not on the first op), few steps; every rank dumps for the incident.
export NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600

UNTIL=$(dumped split) job split -n 4 --timeout 60 -- --steps 8 --stall-split-rank 1 \
    --stall-split-step 2 --quiet
chain split 'len(c) == 1 and c[0]["rank"] == 1 and c[0]["cause"] == "gpu_not_started"
    and c[0]["comm"] != world and c[0]["path"][0]["comm"] == world
    and c[0]["path"][0]["cause"] == "missing" and c[0]["path"][-1]["comm"] == c[0]["comm"]
    and c[0]["chain"][-1] == 1 and "(chain: rank " in t and "not NCCL" in t'

UNTIL=$(dumped pipeline) job pipeline -n 4 --timeout 60 -- --pipeline --steps 8 \
    --drop-send-rank 0 --drop-send-step 2 --quiet
chain pipeline 'len(c) == 1 and c[0]["rank"] == 0 and c[0]["cause"] == "p2p"
    and c[0]["comm"] == world and c[0]["peer"] == 2 and c[0]["p2p"] and c[0]["op"] is None
    and "not NCCL" not in t and "stopped the point-to-point link with rank 2" in t'
# the victims' findings: rank 3's world AllReduce and rank 2's ReduceScatter never
# started; their chains end at rank 0, which stopped the link
if python3 - "$TMP/pipeline.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
f = {(x["rank"], x["cause"]) for x in v["findings"]}
assert {(2, "gpu_not_started"), (3, "gpu_not_started"), (0, "p2p")} <= f, f
c = v["verdict"]["culprits"][0]
assert [p["rank"] for p in c["path"]][-1] == 0 and len(c["path"]) >= 2, c["path"]
PY
then
    pass "pipeline: ranks 2 and 3 found gpu_not_started, their chains end at rank 0"
else
    fail "pipeline: the victims" "$(grep -a 'gpu_not_started\|p2p' "$TMP/pipeline.txt" | head -n 4)"
fi
# the whole pipeline, without the fault: every step checked, exit 0
NCCLGUARD_DUMP_AT_EXIT=0 job pipeline-ok -n 4 --timeout 120 -- --pipeline --steps 6 --quiet
[ $rc = 0 ] && [ "$(grep -c 'trainloop: rank [0-3] ok steps=6' "$TMP/pipeline-ok/out")" = 4 ] &&
    pass "pipeline without the fault: 4 ranks, every result exact" ||
    fail "pipeline without the fault" "rc=$rc: $(tail -n 3 "$TMP/pipeline-ok/out")"
unset NCCLGUARD_TIMEOUT NCCLGUARD_FIRST_TIMEOUT
dumps_sane
finish

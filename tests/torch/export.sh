#!/usr/bin/env bash
# torchfrtrace, PyTorch's own Flight Recorder analyzer, on `ncclguard export
# --torch-fr` of the e2e hangs (trainloop under the shim on the CPU harness):
#  (a) rank 1 hangs in host code at step 3 while the others wait in AllReduce;
#  (b) rank 3 calls an AllReduce of another count than the others.
# torchfrtrace must load every exported file (no traceback, exit 0), and the
# ranks it names (its "missing ranks" and "Culprit rank" lines) must be exactly
# the rank `ncclguard analyze` names for the same dumps. Its answer is printed
# beside ncclguard's.
TORCH_ANY_BUILD=1 # nothing is preloaded into Python: runs on the sanitizer build too
source "$(dirname "$0")/lib.sh"
NG=$ROOT/$B/ncclguard
FRTRACE=$(dirname "$TORCH_PY")/torchfrtrace
if [ ! -x "$NG" ] || [ ! -x "$APPS/trainloop" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "export" "ncclguard or the harness not built"; finish; exit
fi
if [ ! -x "$FRTRACE" ]; then
    fail "torchfrtrace" "not in $(dirname "$TORCH_PY"): run scripts/install-torch"; finish; exit
fi
export NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600

# frcase NAME: the dumps of job NAME exported, torchfrtrace run on the export, and
# the ranks it names compared with ncclguard's culprit
frcase() {
    local name=$1 dir=$TMP/$1/dumps out=$TMP/$1.fr
    local want
    want=$("$NG" analyze --json "$dir" 2>/dev/null | python3 -c 'import json, sys
print(" ".join(str(c["rank"]) for c in json.load(sys.stdin)["verdict"]["culprits"]))')
    if ! "$NG" export --torch-fr "$dir" -o "$out" >"$TMP/$name.export" 2>&1; then
        fail "$name: export" "$(head -c 300 "$TMP/$name.export")"; return
    fi
    timeout 120 "$FRTRACE" "$out" >"$TMP/$name.frtrace" 2>&1
    local rc=$?
    echo "---- ncclguard analyze $dir"
    "$NG" analyze "$dir" 2>/dev/null | head -n 1 | sed 's/^/  | /'
    echo "---- torchfrtrace $out (exit $rc; its findings)"
    local findings="^(Not all ranks|Collective sequence number|missing ranks|error msg|collective:)"
    grep -E "$findings" "$TMP/$name.frtrace" | head -n 12 | sed 's/^/  | /'
    if [ $rc = 0 ] && ! grep -q '^Traceback' "$TMP/$name.frtrace"; then
        pass "$name: torchfrtrace loads the 4 exported files ($(head -n 1 "$TMP/$name.export" |
            cut -c1-80))"
    else
        fail "$name: torchfrtrace" "exit $rc: $(tail -n 3 "$TMP/$name.frtrace" | tr '\n' ' ')"
        return
    fi
    local named
    named=$(python3 - "$TMP/$name.frtrace" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
ranks = set()
for m in re.finditer(r"^missing ranks: \{([0-9, ]*)\}", text, re.M):
    ranks |= {int(r) for r in m.group(1).split(",") if r.strip()}
for m in re.finditer(r"Culprit rank ([0-9]+);", text):
    ranks.add(int(m.group(1)))
print(" ".join(str(r) for r in sorted(ranks)))
PY
)
    if [ -n "$want" ] && [ "$named" = "$want" ]; then
        pass "$name: torchfrtrace names rank $named, as ncclguard analyze does"
    else
        fail "$name: the culprit" "ncclguard names '$want', torchfrtrace '$named'"
    fi
}

UNTIL="$(dumped hang) && grep -q 'verdict (' $TMP/hang/out" job hang -n 4 --timeout 60 -- \
    --steps 30 --hang-rank 1 --hang-step 3 --quiet
frcase hang
UNTIL=$(dumped mismatch) job mismatch -n 4 --timeout 60 -- --steps 30 --mismatch-rank 3 \
    --mismatch-step 2 --quiet
frcase mismatch
finish

#!/usr/bin/env bash
# The verdict in the job's log (evidence/verdict.h): after an incident, the rank
# that raised it waits for every rank's dump, runs the ncclguard command found
# next to the library, and logs its verdict lines. Here the library is copied
# beside a stand-in command that shows what it was given; tests/e2e/analyze.sh
# runs the real analyzer on the same kind of job.
source "$(dirname "$0")/lib.sh"
LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop
if [ ! -x "$TRAIN" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "verdict" "harness not built"; finish; exit
fi
mkdir -p "$TMP/lib"
cp "$SHIM" "$TMP/lib/libncclguard.so"
cat >"$TMP/lib/ncclguard" <<'SH'
#!/bin/sh
# stand-in analyzer: the verdict block, an empty line, then evidence
n=$(grep -l "\"incident\":\"$4\"" "$2"/ncclguard-*.json | wc -l)
echo "culprit: stand-in saw $n dumps of incident $4 in $2 ($1)"
echo "LD_PRELOAD=${LD_PRELOAD:-unset}"
echo "address space: $(ulimit -v)"
echo
echo "evidence: not part of the verdict"
SH
chmod +x "$TMP/lib/ncclguard"
SHIM=$TMP/lib/libncclguard.so
# hang NAME UNTIL ENV...: a 4-rank job whose rank 1 hangs in host code, stopped once
# the shell command UNTIL succeeds
hang() {
    local name=$1 until=$2; shift 2
    (export "$@" NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600
     UNTIL=$until job "$name" -n 4 --timeout 120 -- --steps 100 --hang-rank 1 --hang-step 3 \
        --quiet)
}

hang hang "grep -q 'verdict (.*LD_PRELOAD=' $TMP/hang/out && sleep 1" NCCLGUARD_VERDICT_WAIT_S=20
lines=$(grep -c 'verdict (4 dumps): ' "$TMP/hang/out")
if grep -q "ncclguard: \[rank [0-9] .*verdict (4 dumps): culprit: stand-in saw 4 dumps of incident [0-9.]*-r[0-9]@[^ ]* in $TMP/hang/dumps (analyze)" \
        "$TMP/hang/out" &&
    grep -q 'verdict (4 dumps): LD_PRELOAD=unset$' "$TMP/hang/out" && [ "$lines" = 3 ]; then
    pass "one rank logs the verdict once, after all 4 dumps, from the command beside the library, without LD_PRELOAD"
else
    fail "verdict in the log" "$lines verdict lines"; grep -a 'ncclguard:' "$TMP/hang/out" | tail -n 12
fi

# The analyzer runs under an address-space limit of 4 GiB (RLIMIT_AS; none under a
# sanitizer, which reserves terabytes of shadow memory).
case "${SANITIZE:-}" in 1|thread) want=unlimited ;; *) want=$((4 << 20)) ;; esac
if grep -q "verdict (4 dumps): address space: $want\$" "$TMP/hang/out"; then
    pass "the analyzer runs under RLIMIT_AS ($want KiB)"
else
    fail "the analyzer's address-space limit" "$(grep -a 'address space' "$TMP/hang/out")"
fi

hang off "[ \$(ls $TMP/off/dumps/*.json 2>/dev/null | wc -l) -ge 4 ] && sleep 2" \
    NCCLGUARD_VERDICT_WAIT_S=0
if grep -q 'dump written' "$TMP/off/out" && ! grep -q 'verdict' "$TMP/off/out"; then
    pass "NCCLGUARD_VERDICT_WAIT_S=0: dumps, and no verdict"
else
    fail "verdict off"; tail -n 8 "$TMP/off/out"
fi
finish

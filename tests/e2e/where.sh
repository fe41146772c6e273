#!/usr/bin/env bash
# The verdict's "where" on the thread a person needs (docs/analysis.md, "Where"): jobs
# whose NCCL calls come from a communication thread, and one rank whose main thread
# hangs in the job's code while its comm thread waits idle for work. The verdict
# shows the comm thread as idle, and the main thread's innermost job frames:
#  - Python (tests/e2e/progs/py_comm_thread.py, CPython 3.13, whose dump maps each
#    Python thread to its OS thread): a queue.Queue feeds the comm thread; the
#    verdict names stuck_in_training_step;
#  - C (tests/e2e/progs/comm_thread.c): a condition variable feeds it; the verdict
#    names job_stuck_in_main, and the comm thread idle in comm_main.
source "$(dirname "$0")/lib.sh"
needs_harness where "$APPS/launch"
# The peers time out (not on their first op, whose timeout is set far off).
export NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600

# hang NAME N CMD...: N ranks of CMD under launch and the shim, in $TMP/NAME, killed
# once every rank dumped for the incident (or after 120 s); then analyzed into
# $TMP/NAME.txt and $TMP/NAME.json.
hang() {
    local name=$1 n=$2 d=$TMP/$1
    shift 2
    mkdir -p "$d"
    (cd "$d" && NCCLGUARD_DUMP_DIR=$d/dumps exec setsid env LD_PRELOAD="$(preload)" \
        LD_LIBRARY_PATH="$FAKES${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$APPS/launch" -n "$n" --timeout 300 -- "$@" >"$d/out" 2>&1) &
    local pid=$!
    wait_for 120 bash -c \
        "[ \$(grep -l '\"incident\":\"' $d/dumps/*.json 2>/dev/null | wc -l) -ge $n ]"
    kill -KILL -- -$pid 2>/dev/null
    wait $pid 2>/dev/null
    "$NG" analyze "$d/dumps" >"$TMP/$name.txt" 2>&1
    "$NG" analyze --json "$d/dumps" >"$TMP/$name.json" 2>/dev/null
}

# verdict_has NAME RANK CAUSE WORDS...: the verdict names RANK with CAUSE, alone, and
# its line holds each of WORDS, in that order
verdict_has() {
    local name=$1 rank=$2 cause=$3 line re=""
    shift 3
    line=$(grep '^culprit: ' "$TMP/$name.txt")
    for w in "$@"; do re="$re.*$w"; done
    if [ "$(grep -c '^culprit: ' "$TMP/$name.txt")" = 1 ] &&
        grep -q "^culprit: rank $rank " <<<"$line" && grep -q "$re" <<<"$line" &&
        python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["verdict"]["culprits"]
assert [x["cause"] for x in c] == [sys.argv[2]], c
assert c[0]["where"]["also"], c[0]["where"]' "$TMP/$name.json" "$cause"; then
        pass "$name: ${line:0:240}"
    else
        fail "$name" "want rank $rank $cause with '$*': $(head -n 3 "$TMP/$name.txt")"
        tail -n 5 "$TMP/$name/out"
    fi
}

py=$(pyenv prefix 3.13.0 2>/dev/null)/bin/python3
if [ -x "$py" ]; then
    HANG_RANK=1 HANG_STEP=3 hang pycomm 3 "$py" "$ROOT/tests/e2e/progs/py_comm_thread.py"
    verdict_has pycomm 1 missing "thread [^;]* idle in a wait[^;]*comm_loop" \
        "main thread in Python stuck_in_training_step (py_comm_thread.py:[0-9]*) ← train"
else
    skip "pycomm" "CPython 3.13 not found (pyenv prefix 3.13.0)"
fi

if [ -x "$E2E/comm_thread" ]; then
    hang ccomm 3 "$E2E/comm_thread" 30 2 4
    verdict_has ccomm 2 missing "thread comm ([0-9]*) idle in a wait (futex), in comm_main" \
        "main thread in job_stuck_in_main ← main"
else
    skip "ccomm" "comm_thread not built"
fi
dumps_sane
finish

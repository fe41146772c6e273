#!/usr/bin/env bash
# The crash path (shim/evidence/crash.c), end to end: a rank that dies of SIGSEGV,
# SIGABRT or a SIGBUS sent with kill leaves a parseable dump with "reason": "crash"
# (its ops and its crashing thread's stack) and still dies of that signal; a handler
# installed before the first communicator (Python's faulthandler) still runs after it.
# And SIGTERM, as torchrun sends it: a dump ("sigterm") while an op is in flight (unless
# the process dumped already: tests/e2e/tracking.sh keeps its SIGUSR2 dumps), then
# the application's own handler (installed before or after the first communicator) or
# the default death; nothing when idle.
source "$(dirname "$0")/lib.sh"
PROG=$E2E/crash_mid_job
if [ ! -x "$PROG" ]; then skip "crash" "not built"; finish; exit; fi

# crash_dump DIR: the dump is valid, of reason crash, with the ops and one thread.
crash_dump() {
    $CHECK schema "$1"/*.json >/dev/null &&
        python3 - "$1"/*.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["threads"]
assert d["reason"] == "crash" and len(d["ops"]) >= 1, (d["reason"], len(d["ops"]))
assert len(t) == 1 and t[0]["stack_from"] == "self" and t[0]["frames"], t
PY
}

# Under ASan its own SEGV and BUS handlers are the ones we chain to: they report and
# exit 1, which shows the chaining as well as a death by the signal would.
asan_rc() { [ "${SANITIZE:-}" = 1 ] && [ "$1" != 134 ] && echo 1 || echo "$1"; }
# A stack overflow, on a thread that created its communicator (the crash handler then
# runs on the alternate stack the shim gave it), also when the application gave that
# thread an alternate stack too small for the handler.
for case in segv:139 abort:134 kill:135 overflow:139 overflow-small:139; do
    how=${case%%:*} want=$(asan_rc "${case##*:}")
    d=$TMP/$how
    NCCLGUARD_DUMP_DIR=$d under_shim "$PROG" "$how" >"$d.out" 2>&1
    rc=$?
    if [ $rc -eq "$want" ] && crash_dump "$d" 2>>"$d.out"; then
        pass "crash ($how): a crash dump, and the process still dies of the signal ($rc)"
    else
        fail "crash ($how)" "rc=$rc (want $want) $(tail -n 5 "$d.out")"
    fi
done

# child_dump DIR: a valid crash dump of the child's own state: none of the parent's 3 ops.
child_dump() {
    $CHECK schema "$1"/*.json >/dev/null &&
        python3 - "$1"/*.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["reason"] == "crash" and not d["ops"], (d["reason"], len(d["ops"]))
assert d["threads"][0]["stack_from"] == "self", d["threads"]
PY
}
# A forked worker that crashes (crash.h): a child of a process with a communicator dies of
# its SIGSEGV and dumps nothing of its parent's state; a child that asked for a
# communicator of its own (refused: CUDA after fork) dumps its own crash. The parent lives.
for case in fork-segv:0 fork-init-segv:1; do
    how=${case%%:*} want=${case##*:}
    d=$TMP/$how
    NCCLGUARD_DUMP_DIR=$d under_shim "$PROG" "$how" >"$d.out" 2>&1
    rc=$?
    n=$(ls "$d"/*.json 2>/dev/null | wc -l)
    died="child died of signal 11"
    [ "${SANITIZE:-}" = 1 ] && died="child exited 1" # ASan's own SEGV handler, chained to
    if [ $rc -eq 0 ] && grep -q "crash_mid_job: $died" "$d.out" && [ "$n" -eq "$want" ] &&
        { [ "$want" = 0 ] || child_dump "$d" 2>>"$d.out"; }; then
        pass "crash in a forked child ($how): it dies of the signal, $n dump(s)"
    else
        fail "crash in a forked child ($how)" "rc=$rc, $n dumps (want $want) $(tail -n 5 "$d.out")"
    fi
done

# Python's faulthandler (enabled before the first communicator) runs after the dump.
d=$TMP/python
NCCLGUARD_DUMP_DIR=$d under_shim python3 -X faulthandler "$ROOT/tests/e2e/progs/py_hang.py" crash \
    >"$d.out" 2>&1
rc=$?
if [ $rc -eq "$(asan_rc 139)" ] && grep -q 'Fatal Python error: Segmentation fault' "$d.out" &&
    crash_dump "$d" 2>>"$d.out"; then
    pass "crash under Python: the dump, then faulthandler's report, then death by SIGSEGV"
else
    fail "crash under Python" "rc=$rc $(tail -n 8 "$d.out")"
fi
# term_case HOW RC DUMP: HOW as in tests/e2e/progs/term_job.c; DUMP is 1 when a
# "sigterm" dump must be there, 0 when none may be.
term_case() {
    local how=$1 want=$2 dump=$3 d=$TMP/term-$1
    mkdir -p "$d"
    NCCLGUARD_DUMP_DIR=$d under_shim "$E2E/term_job" "$how" >"$d.out" 2>&1
    local rc=$? ok=0 n
    n=$(ls "$d"/*.json 2>/dev/null | wc -l)
    if [ $rc -eq "$want" ] && [ "$n" -eq "$dump" ]; then
        ok=1
        [ "$dump" = 0 ] || { $CHECK schema "$d"/*.json >/dev/null &&
            grep -q '"reason":"sigterm"' "$d"/*.json; } || ok=0
        [ "$want" != 42 ] || grep -q "application's handler ran" "$d.out" || ok=0
    fi
    if [ $ok = 1 ]; then pass "SIGTERM ($how): exit $rc, $n dump(s)"
    else fail "SIGTERM ($how)" "rc=$rc (want $want), $n dumps (want $dump) $(tail -n 3 "$d.out")"
    fi
}
term_case none 143 1
term_case before 42 1
term_case after 42 1
term_case idle 143 0
# The application's sa_flags hold when its handler is chained: SA_RESETHAND (its
# handler runs once, the second SIGTERM kills), SA_SIGINFO, SA_NODEFER and sa_mask.
term_case resethand 143 1
[ "$(grep -c "application's handler ran" "$TMP/term-resethand.out")" = 1 ] &&
    pass "SIGTERM (resethand): the handler ran once" ||
    fail "SIGTERM (resethand): the handler ran once" "$(cat "$TMP/term-resethand.out")"
term_case flags 42 1
finish

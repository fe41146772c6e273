#!/usr/bin/env bash
# Python stacks in the dump (shim/evidence/python.c), end to end: a Python program
# that calls NCCL through ctypes (tests/e2e/progs/py_hang.py) blocks in a named Python
# function; a dump on request must show that function, on each interpreter at hand:
# Debian's python3 (3.11, faulthandler's routine), pyenv's 3.12 (the same) and 3.13
# (_Py_DebugOffsets); 3.10 gets no stacks and one line that says why.
source "$(dirname "$0")/lib.sh"
PROG=$ROOT/tests/e2e/progs/py_hang.py
if [ ! -e "$FAKES/libnccl.so.2" ]; then skip "python" "harness not built"; finish; exit; fi
pyenv_python() {
    local p
    p=$(pyenv prefix "$1" 2>/dev/null) && [ -x "$p/bin/python3" ] && echo "$p/bin/python3"
}

# run_one NAME PYTHON METHOD: dumps the program on SIGUSR2 and checks the dump.
run_one() {
    local name=$1 py=$2 method=$3 d=$TMP/$1
    if [ -z "$py" ] || [ ! -x "$py" ]; then skip "python $name" "interpreter not found"; return; fi
    mkdir -p "$d"
    # Not through the under_shim function: $! must be the interpreter itself.
    NCCLGUARD_DUMP_DIR=$d/dumps LD_PRELOAD=$(preload) LD_LIBRARY_PATH=$FAKES \
        "$py" "$PROG" >"$d/out" 2>&1 &
    local pid=$! ok=0
    for _ in $(seq 300); do grep -q '^ready' "$d/out" && break; sleep 0.1; done
    kill -USR2 $pid 2>/dev/null
    for _ in $(seq 300); do ls "$d"/dumps/*.json >/dev/null 2>&1 && break; sleep 0.1; done
    kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
    if python3 "$ROOT/tests/unit/check_dump.py" "$d"/dumps/*.json >"$d/check" 2>&1 &&
        python3 - "$method" "$d"/dumps/*.json >>"$d/check" 2>&1 <<'PY'
import json, sys
method, path = sys.argv[1], sys.argv[2]
py = json.load(open(path))["python"]
assert py["method"] == method, f"method {py['method']}, expected {method}"
names = {f["function"] for t in py["threads"] for f in t["frames"]}
if method == "none":
    assert py["why"] and not py["threads"], py
else:
    assert "stuck_in_python_function" in names and "data_loader_worker" in names, names
    main = [t for t in py["threads"] if t["frames"] and
            t["frames"][0]["function"] == "stuck_in_python_function"]
    assert main and main[0]["frames"][0]["line"] > 0, main
PY
    then
        ok=1
    fi
    local what="the hung function is in the dump"
    [ "$method" = none ] && what="no stacks, and the reason in one line"
    if [ $ok = 1 ]; then pass "python $name ($method): $what"
    else fail "python $name" "$(cat "$d/check") $(tail -n 5 "$d/out")"; fi
}

run_one 3.11-debian /usr/bin/python3 faulthandler
run_one 3.12 "$(pyenv_python 3.12.1)" faulthandler
run_one 3.13 "$(pyenv_python 3.13.0)" debug_offsets
run_one 3.10 "$(pyenv_python 3.10.13)" none
finish

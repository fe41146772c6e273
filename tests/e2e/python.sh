#!/usr/bin/env bash
# Python stacks in the dump (shim/evidence/python.c), end to end, on every CPython at
# hand: pyenv's 3.8 to the newest, and Debian's python3 (3.11).
#  - The layout table: scripts/gen-python-layouts, run again for the interpreters
#    installed, gives the rows of shim/evidence/python_layouts.h.
#  - One dump: a Python program that calls NCCL through ctypes
#    (tests/e2e/progs/py_hang.py) blocks in a named Python function; the dump must show
#    that function at its line, on the main thread's tid, and the loader thread's.
#    3.8-3.12 and Debian's 3.11 are read with the generated layouts ("layout"), 3.13
#    with _Py_DebugOffsets; 3.7 gets no stacks and one line that says why.
#  - The stress test (tests/e2e/py_stress_check.py): threads that recurse deeply,
#    threads that come and go, a dump every 50 ms, 300 dumps per interpreter (60
#    under SANITIZE=1), all interpreters at once; every dump is checked.
source "$(dirname "$0")/lib.sh"
PROG=$ROOT/tests/e2e/progs/py_hang.py
if [ ! -e "$FAKES/libnccl.so.2" ]; then skip "python" "harness not built"; finish; exit; fi
pyenv_python() {
    local p
    p=$(pyenv prefix "$1" 2>/dev/null) && [ -x "$p/bin/python3" ] && echo "$p/bin/python3"
}

# ---- the generated table matches the headers of the interpreters here ----
layout_rows() { # FILE: one line per row of the table, the version comments dropped
    awk '/^    \{\.minor/ {row = $0; next} row && /^     / {row = row $0}
         row && /\},$/ {print row; row = ""}' "$1" | tr -s ' '
}
gen_pythons=()
for v in 3.8.18 3.9.18 3.10.13 3.11.7 3.12.1 3.13.0; do
    p=$(pyenv_python $v) && gen_pythons+=("$p")
done
if [ ${#gen_pythons[@]} = 0 ]; then
    skip "python layouts" "no pyenv interpreter"
elif ! "$ROOT/scripts/gen-python-layouts" "${gen_pythons[@]}" >"$TMP/layouts.h" 2>"$TMP/gen.err"
then
    fail "python layouts" "$(cat "$TMP/gen.err")"
else
    missing=$(comm -23 <(layout_rows "$TMP/layouts.h" | sort) \
                       <(layout_rows "$ROOT/shim/evidence/python_layouts.h" | sort))
    if [ -z "$missing" ] && [ "$(layout_rows "$TMP/layouts.h" | wc -l)" = ${#gen_pythons[@]} ]
    then
        pass "python layouts: python_layouts.h has the rows of ${#gen_pythons[@]} interpreters"
    else
        fail "python layouts" "rows the headers give that python_layouts.h lacks: $missing"
    fi
fi

# ---- one dump per interpreter ----
# run_one NAME PYTHON METHOD: dumps the program on SIGUSR2 and checks the dump.
run_one() {
    local name=$1 py=$2 method=$3 d=$TMP/$1
    if [ -z "$py" ] || [ ! -x "$py" ]; then skip "python $name" "interpreter not found"; return; fi
    mkdir -p "$d" && : >"$d/out"
    # Not through the under_shim function: $! must be the interpreter itself.
    NCCLGUARD_DUMP_DIR=$d/dumps LD_PRELOAD=$(preload) LD_LIBRARY_PATH=$FAKES \
        "$py" "$PROG" >"$d/out" 2>&1 &
    local pid=$! ok=0
    for _ in $(seq 300); do grep -q '^ready' "$d/out" && break; sleep 0.1; done
    kill -USR2 $pid 2>/dev/null
    for _ in $(seq 300); do ls "$d"/dumps/*.json >/dev/null 2>&1 && break; sleep 0.1; done
    kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
    if $CHECK schema "$d"/dumps/*.json >"$d/check" 2>&1 &&
        python3 - "$method" "$pid" "$PROG" "$d"/dumps/*.json >>"$d/check" 2>&1 <<'PY'
import json, re, sys
method, pid, prog, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
py = json.load(open(path))["python"]
assert py["method"] == method, f"method {py['method']}, expected {method}: {py['why']}"
if method == "none":
    assert py["why"] and not py["threads"], py
else:
    src = open(prog).read().splitlines()
    def line_of(text):  # the line of the program that holds text
        return next(i + 1 for i, s in enumerate(src) if text in s)
    main = [t for t in py["threads"] if t["tid"] == pid]
    assert main, f"no Python thread on the main tid {pid}: {py['threads']}"
    fr = [(f["function"], f["line"]) for f in main[0]["frames"]]
    want = [("stuck_in_python_function", line_of("time.sleep(0.2)")),
            ("<module>", line_of("    stuck_in_python_function()"))]
    assert fr == want, f"main thread {fr}, expected {want}"
    loader = [t for t in py["threads"] if t["frames"] and
              t["frames"][0]["function"] == "data_loader_worker"]
    assert loader and loader[0]["tid"] not in (None, pid), f"loader thread: {py['threads']}"
    assert loader[0]["frames"][0]["line"] == line_of("time.sleep(0.05)"), loader
PY
    then
        ok=1
    fi
    local what="the hung function at its line, on the main thread's tid"
    [ "$method" = none ] && what="no stacks, and the reason in one line"
    if [ $ok = 1 ]; then pass "python $name ($method): $what"
    else fail "python $name" "$(cat "$d/check") $(tail -n 5 "$d/out")"; fi
}

run_one 3.8 "$(pyenv_python 3.8.18)" layout
run_one 3.9 "$(pyenv_python 3.9.18)" layout
run_one 3.10 "$(pyenv_python 3.10.13)" layout
run_one 3.11 "$(pyenv_python 3.11.7)" layout
run_one 3.11-debian /usr/bin/python3 layout
run_one 3.12 "$(pyenv_python 3.12.1)" layout
run_one 3.13 "$(pyenv_python 3.13.0)" debug_offsets
run_one 3.7 "$(pyenv_python 3.7.16)" none

# ---- the stress test: every interpreter at once ----
dumps=300
[ "${SANITIZE:-}" = 1 ] && dumps=60
names=() pids=()
for v in 3.8.18 3.9.18 3.10.13 3.11.7 3.12.1 3.13.0 debian; do
    py=/usr/bin/python3
    if [ $v != debian ] && ! py=$(pyenv_python $v); then
        skip "python stress $v" "not installed"
        continue
    fi
    method=layout
    [ $v = 3.13.0 ] && method=debug_offsets
    mkdir -p "$TMP/stress-$v"
    PRELOAD=$(preload) LD_LIBRARY_PATH=$FAKES python3 "$ROOT/tests/e2e/py_stress_check.py" \
        "$py" $dumps $method "$TMP/stress-$v" >"$TMP/stress-$v/result" 2>&1 &
    names+=("$v") pids+=($!)
done
for i in "${!pids[@]}"; do
    v=${names[$i]}
    if wait "${pids[$i]}"; then pass "python stress $v: $(cat "$TMP/stress-$v/result")"
    else fail "python stress $v" "$(tail -n 3 "$TMP/stress-$v/result")"; fi
done
finish

#!/usr/bin/env bash
# ncclguard's Python stacks against py-spy's, thread by thread and frame by frame.
#  - In a real PyTorch process (the venv's torch and interpreter): py_threads.py
#    --torch runs a matmul (torch's intra-op threads) and a DataLoader with a worker
#    process (a feeder thread of multiprocessing in the main process), then parks
#    seven Python threads of its own (nested functions, a method and a lambda, a
#    recursion, names of 598 bytes, names that are not ASCII), one of them
#    waiting for rank 0's AllReduce over the fake NCCL, whose peer never comes.
#  - Without torch, the same program on every CPython pyenv has, and Debian's.
# Each process is read three times while nothing moves: ncclguard's dump on the
# AllReduce's timeout, `py-spy dump --json`, ncclguard's dump on SIGUSR2.
# tests/torch/pyspy_compare.py requires the two dumps to be equal and py-spy to
# show the same threads (tids), functions, files, lines and order; it prints the
# differences when they are not.
source "$(dirname "$0")/lib.sh"
PROG=$ROOT/tests/torch/py_threads.py
COMPARE="python3 $ROOT/tests/torch/pyspy_compare.py"
PYSPY=$(dirname "$TORCH_PY")/py-spy
if [ ! -e "$FAKES/libnccl.so.2" ]; then skip "pyspy" "harness not built"; finish; exit; fi
if [ ! -x "$PYSPY" ]; then skip "pyspy" "no py-spy in the venv"; finish; exit; fi

# py-spy reads another process's memory (ptrace rules): find out whether it can here
python3 -c 'import time; time.sleep(60)' &
probe=$!
wait_for 10 bash -c "'$PYSPY' dump --pid $probe >'$TMP/probe' 2>&1"
probed=$?
kill $probe 2>/dev/null; wait $probe 2>/dev/null
if [ $probed != 0 ]; then
    why=$(head -n 1 "$TMP/probe")
    skip "pyspy" "py-spy cannot read a process here (ptrace): ${why:-py-spy dump failed}"
    finish
    exit 0
fi
pyspy_version=$("$PYSPY" --version)

# start NAME PYTHON ARGS...: runs the program and its three readings in $TMP/NAME
# (in the background); leaves the comparison's line in $TMP/NAME/result and its
# status (0 equal, 1 different, 2 not read, 3 no stacks before 3.8, 4 py-spy cannot
# read it) in $TMP/NAME/rc.
start() {
    local name=$1 py=$2 d=$TMP/$1
    shift 2
    mkdir -p "$d/dumps"
    (
        # exec and setsid: $! is the interpreter, the leader of a group of its own;
        # the node directory in $TMP: the fan-out file of the incident goes with it
        mkdir -p "$d/node"
        (cd "$d" && NCCLGUARD_DUMP_DIR=$d/dumps NCCLGUARD_NODE_DIR=$d/node NCCLGUARD_TIMEOUT=2 \
            LD_PRELOAD=$(preload) LD_LIBRARY_PATH=$FAKES exec setsid "$py" "$PROG" "$@" \
            >"$d/out" 2>&1) &
        pid=$!
        f=$d/dumps/ncclguard-*-$pid.json
        rc=2
        if ! wait_for 120 grep -qs '^ready' "$d/out"; then
            echo "never ready: $(tail -n 3 "$d/out")" >"$d/result"
        elif ! wait_for 60 bash -c "grep -qs '\"reason\":\"timeout\"' $f"; then
            echo "no timeout dump: $(tail -n 3 "$d/out")" >"$d/result"
        elif cp $f "$d/before.json" &&
            ! "$PYSPY" dump --pid $pid --json >"$d/spy.json" 2>"$d/spy.err"; then
            echo "$pyspy_version cannot read it: $(head -n 1 "$d/spy.err")" >"$d/result"
            rc=4
        elif ! kill -USR2 $pid || ! wait_for 60 bash -c "grep -qs '\"reason\":\"signal\"' $f"
        then
            echo "no dump on SIGUSR2: $(tail -n 3 "$d/out")" >"$d/result"
        else
            cp $f "$d/after.json"
            $COMPARE "$PROG" "$d/out" "$d/spy.json" "$d/before.json" "$d/after.json" \
                >"$d/result" 2>&1
            rc=$?
        fi
        kill -KILL -- -$pid 2>/dev/null
        wait $pid 2>/dev/null
        echo $rc >"$d/rc"
    ) &
}

# report NAME: its case, once its run is over
report() {
    local d=$TMP/$1
    wait_for 300 test -s "$d/rc"
    case "$(cat "$d/rc" 2>/dev/null)" in
    0) pass "python $1 against py-spy: $(cat "$d/result")" ;;
    3) skip "python $1" "ncclguard reads no stacks here ($(cut -c 12- "$d/result"))" ;;
    4) if [ "$1" = torch ]; then fail "python $1" "$(cat "$d/result")" # the venv's own
       else skip "python $1" "$(cat "$d/result")"; fi ;;
    *) fail "python $1" "$(cat "$d/result" 2>/dev/null)" ;;
    esac
}

names=(torch)
start torch "$TORCH_PY" --torch
for v in $(pyenv versions --bare 2>/dev/null); do
    p=$(pyenv prefix "$v" 2>/dev/null)/bin/python
    case $v in
    2.*) skip "python $v" "Python 2: ncclguard reads CPython 3.8 and later" ;;
    *) if [ -x "$p" ]; then names+=("$v"); start "$v" "$p"
       else skip "python $v" "no interpreter at $p"; fi ;;
    esac
done
if [ -x /usr/bin/python3 ]; then names+=(debian); start debian /usr/bin/python3; fi
for n in "${names[@]}"; do report "$n"; done
wait
dumps_sane
# a dump of both ranks of one communicator (the program's two init threads) is
# consistent whichever of the two comes first in comms[] (check_dump.py once took the
# entry of the last rank for every op of the id)
if [ -s "$TMP/torch/after.json" ]; then
    for order in 1 -1; do
        python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
d["comms"] = sorted(d["comms"], key=lambda c: int(sys.argv[2]) * c["rank"])
json.dump(d, open(sys.argv[3], "w"))' "$TMP/torch/after.json" $order "$TMP/comms$order.json"
    done
    if out=$($CHECK sane "$TMP/comms1.json" 2>&1 && $CHECK sane "$TMP/comms-1.json" 2>&1); then
        pass "two ranks of one communicator in one dump: consistent in either order"
    else
        fail "two ranks of one communicator in one dump" "$out"
    fi
fi
finish

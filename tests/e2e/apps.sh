#!/usr/bin/env bash
# End-to-end tests of the test programs themselves, without the shim:
# launch (environment, exit status, killing, timeout, signal forwarding) and
# trainloop on the CPU harness (healthy runs, threads, nonblocking, graphs,
# and each injected fault). Every run is bounded by launch --timeout.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop

if [ ! -x "$LAUNCH" ]; then
    skip apps "$LAUNCH not built (make $B/apps/launch)"
    finish
    exit
fi

# run OUT CMD...: runs CMD with stdout and stderr in OUT; the status lands in $rc.
run() { local out=$1; shift; "$@" >"$out" 2>&1; rc=$?; }

# why OUT: the lines of OUT that explain a failure (sanitizer reports first), for fail().
why() {
    { grep -E -A12 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$1" | head -n 30
      tail -n 6 "$1"; } 2>/dev/null
}

# gone PIDFILES...: true when no process named in the files is alive.
gone() {
    local f
    for f in "$@"; do
        [ -s "$f" ] || continue
        if kill -0 "$(cat "$f")" 2>/dev/null; then return 1; fi
    done
    return 0
}

# wait_grep FILE PATTERN SECONDS: true once FILE matches PATTERN, false after SECONDS.
wait_grep() {
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        grep -q -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# rank_pid PID RANK: the pid of that rank, a process with RANK set among the children and
# grandchildren of PID (PID may be launch or a subshell running it).
rank_pid() {
    local c
    for c in $(pgrep -P "$1") $(for c in $(pgrep -P "$1"); do pgrep -P "$c"; done); do
        if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "RANK=$2"; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

# --- launch -----------------------------------------------------------------

test_launch_env() {
    local d=$TMP/env r ok=1 port runid
    run "$TMP/env.out" "$LAUNCH" -n 3 --timeout 60 --rdzv "$d" -- sh -c \
        'printf "%s\n" "$RANK" "$LOCAL_RANK" "$WORLD_SIZE" "$LOCAL_WORLD_SIZE" "$GROUP_RANK" \
            "$MASTER_ADDR" "$MASTER_PORT" "$LAUNCH_RDZV_DIR" "$LAUNCH_RUN_ID" \
            >"$LAUNCH_RDZV_DIR/env.$RANK"'
    [ "$rc" -eq 0 ] || ok=0
    port=$(sed -n 7p "$d/env.0" 2>/dev/null)
    runid=$(sed -n 9p "$d/env.0" 2>/dev/null)
    [[ "$port" =~ ^[0-9]+$ && -n "$runid" ]] || ok=0
    for r in 0 1 2; do
        printf '%s\n' $r $r 3 3 0 127.0.0.1 "$port" "$d" "$runid" | cmp -s - "$d/env.$r" || ok=0
    done
    [ $ok = 1 ] && pass launch_env || fail launch_env "status $rc; env.0: $(cat "$d/env.0" 2>&1)"
}

test_launch_rdzv_removed() {
    local dir
    run "$TMP/rdzv.out" "$LAUNCH" -n 2 --timeout 60 -- sh -c \
        '[ -d "$LAUNCH_RDZV_DIR" ] && touch "$LAUNCH_RDZV_DIR/f.$RANK" &&
         echo "dir=$LAUNCH_RDZV_DIR"'
    dir=$(sed -n 's/^dir=//p' "$TMP/rdzv.out" | head -n 1)
    if [ "$rc" -eq 0 ] && [ -n "$dir" ] && [ ! -e "$dir" ]; then
        pass launch_rdzv_removed
    else
        fail launch_rdzv_removed "status $rc, dir '$dir' $( [ -e "$dir" ] && echo still exists)"
    fi
}

test_launch_all_ok() {
    run "$TMP/ok.out" "$LAUNCH" -n 4 --timeout 60 -- true
    if [ "$rc" -eq 0 ] && ! grep -q '^launch:' "$TMP/ok.out"; then
        pass launch_all_ok
    else
        fail launch_all_ok "status $rc: $(cat "$TMP/ok.out")"
    fi
}

# launch_ends NAME RANKS STATUS LINE CMD...: launch runs CMD on RANKS ranks, exits with
# STATUS and says LINE (one whole line of its output)
launch_ends() {
    local name=$1 n=$2 want=$3 line=$4 out=$TMP/$1.out
    shift 4
    run "$out" "$LAUNCH" -n "$n" --timeout 60 -- "$@"
    if [ "$rc" -eq "$want" ] && grep -qx "$line" "$out"; then
        pass "$name"
    else
        fail "$name" "status $rc: $(cat "$out")"
    fi
}

test_launch_exit_status() {
    launch_ends launch_exit_status 4 7 'launch: rank 2 exited with status 7' \
        sh -c '[ "$RANK" != 2 ] || exit 7'
}

test_launch_signal_status() {
    launch_ends launch_signal_status 2 137 'launch: rank 1 killed by signal SIGKILL' \
        sh -c '[ "$RANK" != 1 ] || kill -KILL $$'
}

# Rank 1 fails once every other rank is up and sleeping; launch must end them all.
test_launch_kills_all() {
    local d=$TMP/kill start=$SECONDS
    run "$TMP/kill.out" "$LAUNCH" -n 3 --timeout 120 --rdzv "$d" -- bash -c '
        cd "$LAUNCH_RDZV_DIR" && echo $$ >"pid.$RANK.tmp" && mv "pid.$RANK.tmp" "pid.$RANK"
        if [ "$RANK" = 1 ]; then
            for i in $(seq 600); do
                [ -e pid.0 ] && [ -e pid.2 ] && exit 3
                sleep 0.1
            done
            exit 4
        fi
        exec sleep 300'
    if [ "$rc" -eq 3 ] && [ $((SECONDS - start)) -lt 100 ] && gone "$d"/pid.* &&
        grep -q 'rank 0 killed by signal SIGTERM (sent by launch)' "$TMP/kill.out"; then
        pass launch_kills_all
    else
        fail launch_kills_all "status $rc after $((SECONDS - start)) s: $(cat "$TMP/kill.out")"
    fi
}

test_launch_timeout() {
    local d=$TMP/to
    run "$TMP/to.out" "$LAUNCH" -n 2 --timeout 2 --rdzv "$d" -- sh -c \
        'echo $$ >"$LAUNCH_RDZV_DIR/pid.$RANK"; exec sleep 300'
    if [ "$rc" -eq 124 ] && gone "$d"/pid.* && grep -q '^launch: timeout' "$TMP/to.out"; then
        pass launch_timeout
    else
        fail launch_timeout "status $rc: $(cat "$TMP/to.out")"
    fi
}

# Ranks that ignore SIGTERM get SIGKILL after the grace period.
test_launch_timeout_sigkill() {
    local d=$TMP/tok
    run "$TMP/tok.out" "$LAUNCH" -n 2 --timeout 2 --grace 1 --rdzv "$d" -- bash -c \
        'trap "" TERM; echo $$ >"$LAUNCH_RDZV_DIR/pid.$RANK"; exec sleep 300'
    if [ "$rc" -eq 124 ] && gone "$d"/pid.* &&
        grep -q 'killed by signal SIGKILL (sent by launch)' "$TMP/tok.out"; then
        pass launch_timeout_sigkill
    else
        fail launch_timeout_sigkill "status $rc: $(cat "$TMP/tok.out")"
    fi
}

# forward_case NAME SIG RANK_EXIT WANT_RC: SIG sent to launch must reach each rank's trap.
forward_case() {
    local name=$1 sig=$2 d=$TMP/fwd-$2 out=$TMP/fwd-$2.out lp
    mkdir -p "$d"
    "$LAUNCH" -n 2 --timeout 120 --rdzv "$d" -- bash -c "
        trap 'echo got >\"\$LAUNCH_RDZV_DIR/$sig.\$RANK\"; exit $3' $sig
        touch \"\$LAUNCH_RDZV_DIR/ready.\$RANK\"
        while :; do sleep 0.1; done" >"$out" 2>&1 &
    lp=$!
    for ((i = 0; i < 600; i++)); do
        [ -e "$d/ready.0" ] && [ -e "$d/ready.1" ] && break
        sleep 0.1
    done
    kill -"$sig" $lp
    wait $lp
    rc=$?
    if [ "$rc" -eq "$4" ] && [ -e "$d/$sig.0" ] && [ -e "$d/$sig.1" ]; then
        pass "$name"
    else
        fail "$name" "status $rc, files: $(ls "$d"): $(cat "$out")"
    fi
}

test_launch_usage() {
    local ok=1
    "$LAUNCH" >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    "$LAUNCH" -n 0 -- true >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    "$LAUNCH" -n 2 --bogus -- true >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    "$LAUNCH" -n 2 --timeout x -- true >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    "$LAUNCH" -n 2 >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    [ $ok = 1 ] && pass launch_usage || fail launch_usage "a bad command line did not give 64"
}

test_launch_env
test_launch_rdzv_removed
test_launch_all_ok
test_launch_exit_status
test_launch_signal_status
test_launch_kills_all
test_launch_timeout
test_launch_timeout_sigkill
forward_case launch_forward_term TERM 3 3
forward_case launch_forward_usr1 USR1 0 0
test_launch_usage

# --- trainloop --------------------------------------------------------------

if [ ! -x "$TRAIN" ] || [ ! -e "$FAKES/libnccl.so.2" ] || [ ! -e "$FAKES/libcuda.so.1" ]; then
    skip trainloop "$TRAIN or the fakes are not built (make $B/apps/trainloop)"
    finish
    exit
fi

# Ops per worker in K steps: 7 AllReduce + AllGather + ReduceScatter + Send + Recv per step,
# a Broadcast every third step, and one graph launch per step with --graph.
ops_for() { local k=$1 graph=${2:-0}; echo $((k * (11 + graph) + (k + 2) / 3)); }

# healthy NAME N K THREADS GRAPH TRAINLOOP_ARGS...: all N ranks report ok with the right op count.
healthy() {
    local name=$1 n=$2 k=$3 t=$4 g=$5 out=$TMP/$1.out want r ok=1
    shift 5
    run "$out" with_fakes "$LAUNCH" -n "$n" --timeout 300 -- "$TRAIN" --steps "$k" --quiet "$@"
    want=$(($(ops_for "$k" "$g") * t))
    for ((r = 0; r < n; r++)); do
        grep -qx "trainloop: rank $r ok steps=$k ops=$want" "$out" || ok=0
    done
    if [ "$rc" -eq 0 ] && [ $ok = 1 ]; then
        pass "$name"
    else
        fail "$name" "status $rc (want ops=$want): $(why "$out")"
    fi
}

healthy trainloop_1rank 1 12 1 0
healthy trainloop_2ranks 2 12 1 0
healthy trainloop_4ranks 4 10 1 0
healthy trainloop_8ranks 8 6 1 0
healthy trainloop_threads 2 6 3 0 --threads 3
healthy trainloop_nonblocking 4 8 1 0 --nonblocking
healthy trainloop_nonblocking_threads 2 5 2 0 --nonblocking --threads 2
healthy trainloop_graph 2 6 1 1 --graph
healthy trainloop_graph_threads 2 4 2 1 --graph --threads 2

# A wrong input on one rank makes every rank's sum wrong: exit 1 with the mismatch line.
test_corrupt() {
    local out=$TMP/corrupt.out
    run "$out" with_fakes "$LAUNCH" -n 2 --timeout 300 -- "$TRAIN" --steps 4 --quiet \
        --corrupt-rank 1 --corrupt-step 2
    if [ "$rc" -eq 1 ] &&
        grep -q '^trainloop: rank [01] step 2: AllReduce result mismatch at index 0: got' \
            "$out"; then
        pass trainloop_corrupt_detected
    else
        fail trainloop_corrupt_detected "status $rc: $(why "$out")"
    fi
}

# Rank 1 blocks in trainloop_host_stall: launch times out (124), and gdb finds the frame.
test_hang() {
    local out=$TMP/hang.out bt=$TMP/hang.bt lp pid
    with_fakes "$LAUNCH" -n 2 --timeout 12 -- "$TRAIN" --steps 4 --quiet \
        --hang-rank 1 --hang-step 2 >"$out" 2>&1 &
    lp=$!
    if wait_grep "$out" 'rank 1: host stall before step 2' 28 && pid=$(rank_pid $lp 1); then
        timeout 60 gdb -batch -p "$pid" -ex 'thread apply all bt' >"$bt" 2>&1
        if grep -q 'trainloop_host_stall' "$bt"; then
            pass trainloop_hang_stack
        else
            fail trainloop_hang_stack "no trainloop_host_stall frame: $(tail -n 20 "$bt")"
        fi
    else
        fail trainloop_hang_stack "rank 1 never reported its stall: $(why "$out")"
    fi
    wait $lp
    rc=$?
    if [ "$rc" -eq 124 ] && ! grep -q ' ok steps=' "$out"; then
        pass trainloop_hang_timeout
    else
        fail trainloop_hang_timeout "status $rc: $(why "$out")"
    fi
}

# fault_hangs NAME NOTICE ARGS...: the fault fires (NOTICE printed), no rank finishes, and
# launch ends the job at its timeout with 124.
fault_hangs() {
    local name=$1 notice=$2 out=$TMP/$1.out
    shift 2
    run "$out" with_fakes "$LAUNCH" -n 2 --timeout 5 -- "$TRAIN" --steps 4 --quiet "$@"
    if [ "$rc" -eq 124 ] && grep -q -- "$notice" "$out" && ! grep -q ' ok steps=' "$out"; then
        pass "$name"
    else
        fail "$name" "status $rc: $(why "$out")"
    fi
}

# A failed NCCL call (injected by the fake) ends the rank with status 2 and NCCL's words.
test_call_error() {
    local out=$TMP/callerr.out
    local want='^trainloop: rank 1: ncclAllReduce failed: internal error - please report'
    run "$out" with_fakes env FAKENCCL_FAIL_OP=AllReduce FAKENCCL_FAIL_NTH=8 \
        FAKENCCL_FAIL_RANK=1 "$LAUNCH" -n 2 --timeout 120 -- "$TRAIN" --steps 4 --quiet
    if [ "$rc" -eq 2 ] && grep -q "$want this issue to the NCCL developers (.*injected" "$out"; then
        pass trainloop_call_error
    else
        fail trainloop_call_error "status $rc: $(why "$out")"
    fi
}

# An asynchronous error on a communicator is seen by the per-step ncclCommGetAsyncError.
test_async_error() {
    local out=$TMP/asyncerr.out
    local want='^trainloop: rank 0: ncclCommGetAsyncError failed: remote process exited'
    run "$out" with_fakes env FAKENCCL_ASYNC_ERROR_AFTER=15 FAKENCCL_ASYNC_ERROR_RANK=0 \
        "$LAUNCH" -n 2 --timeout 120 -- "$TRAIN" --steps 4 --quiet
    if [ "$rc" -eq 2 ] && grep -q "$want" "$out"; then
        pass trainloop_async_error
    else
        fail trainloop_async_error "status $rc: $(why "$out")"
    fi
}

test_usage() {
    local ok=1
    with_fakes "$TRAIN" --bogus >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    with_fakes "$TRAIN" --steps 0 >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    with_fakes "$TRAIN" --steps >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    with_fakes "$TRAIN" --hang-step 1 >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    with_fakes "$TRAIN" --steps 2 --hang-rank 0 --hang-step 2 >/dev/null 2>&1; [ $? -eq 64 ] || ok=0
    WORLD_SIZE=2 RANK=0 LAUNCH_RDZV_DIR=$TMP with_fakes "$TRAIN" --skip-rank 2 >/dev/null 2>&1
    [ $? -eq 64 ] || ok=0
    with_fakes "$TRAIN" --help | grep -q -- '--stall-gpu-rank' || ok=0
    [ $ok = 1 ] && pass trainloop_usage || fail trainloop_usage "a bad command line did not give 64"
}

test_corrupt
test_call_error
test_async_error
test_hang
fault_hangs trainloop_stall_gpu 'stream stalled before the first collective' \
    --stall-gpu-rank 1 --stall-step 1
fault_hangs trainloop_skip 'skipping AllReduce' --skip-rank 0 --skip-step 1
fault_hangs trainloop_mismatch 'instead of' --mismatch-rank 1 --mismatch-step 1
test_usage

finish

#!/usr/bin/env bash
# bench/stacks.sh BUILD_DIR: what the enqueue stacks add per NCCL call, at
# depth 24 (NCCLGUARD_STACK_DEPTH's default) and with the call 24 frames deep,
# issued in turn from 8 call sites (the cache of call sites answers all but the
# first call of each), against NCCLGUARD_STACKS=0 in the same run. Instructions from callgrind
# (the difference of an N2- and an N1-call run, so that start-up cancels out),
# time as the median of REPS runs of each, interleaved. Fake NCCL in no-op
# mode, TRACK=full, a ring that never wraps, no watchdog poll in the loop.
set -u
B=${1:-build}
N1=2000 N2=4000 N=200000 REPS=5 DEPTH=24
run() { # STACKS N [callgrind out]
    env LD_LIBRARY_PATH="$B/fakes" FAKENCCL_NOOP=1 FAKECUDA_INSTANT_EVENTS=1 \
        NCCLGUARD_POLL_MS=60000 NCCLGUARD_RING=1048576 NCCLGUARD_STACKS="$1" \
        LD_PRELOAD="$(realpath "$B/libncclguard.so")" \
        ${3:+valgrind --tool=callgrind --callgrind-out-file=$3} "$B/bench/stacks" "$2" $DEPTH \
        2>/dev/null
}
instr() { # STACKS N
    local out; out=$(mktemp)
    run "$1" "$2" "$out" >/dev/null
    callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
    rm -f "$out"
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
if command -v valgrind >/dev/null; then
    for s in 0 1; do
        a=$(instr $s $N1) b=$(instr $s $N2)
        eval "i$s=$(( (b - a) / (N2 - N1) ))"
    done
    printf 'enqueue stacks, depth %d, 8 call sites: %d instructions per call with them, %d without: +%d (%s x; target +150)\n' \
        $DEPTH "$i1" "$i0" $((i1 - i0)) "$(awk -v a="$i1" -v b="$i0" 'BEGIN {printf "%.2f", a / b}')"
else
    echo "stacks: valgrind is not installed; instruction counts skipped"
fi
t0=() t1=()
for _ in $(seq $REPS); do
    t0+=("$(run 0 $N)") t1+=("$(run 1 $N)")
done
m0=$(printf '%s\n' "${t0[@]}" | median) m1=$(printf '%s\n' "${t1[@]}" | median)
printf 'enqueue stacks, depth %d: %s ns per call with them, %s without (medians of %d, interleaved): +%s ns\n' \
    $DEPTH "$m1" "$m0" $REPS "$(awk -v a="$m1" -v b="$m0" 'BEGIN {printf "%.0f", a - b}')"

#!/usr/bin/env bash
# The straggler rule on real jobs (docs/analysis.md, "Stragglers"): seeded repeats
# of a healthy 4-rank trainloop job with host jitter (0-15 ms on every rank and step,
# a 40 ms pause on a random rank one step in ten), and of the same job with one
# rank's GPU 12 ms late on every step (--late-gpu-rank), 200 steps each, every
# collective timed (NCCLGUARD_TIMING_SAMPLE=1). Prints, for each series, how many
# runs named a straggler ("named k of N"), and for the late one how many named
# exactly the late rank. Targets: healthy named 0 of 20; late named 20 of 20, the
# late rank alone. About 15 s a run on the 2-core machine. With SAMPLE 16 (the default
# sampling) 200 steps are about 13 arrivals: measured 0 of 20 healthy, 9 of 20 late.
# Usage: bench/straggler.sh BUILD_DIR [RUNS] [SAMPLE]   (SAMPLE: NCCLGUARD_TIMING_SAMPLE)
set -u
B=$(cd "${1:-build}" && pwd)
RUNS=${2:-20}
SAMPLE=${3:-1}
T=$(mktemp -d "${TMPDIR:-/tmp}/ncclguard-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT

# run NAME SEED ARGS...: one job; prints the verdict's culprits as "rank:cause ..."
run() {
    local d=$T/$1-$2
    shift 2
    mkdir -p "$d"
    (cd "$d" && NCCLGUARD_TIMING_SAMPLE=$SAMPLE NCCLGUARD_DUMP_AT_EXIT=1 \
        NCCLGUARD_DUMP_DIR=$d/dumps LD_LIBRARY_PATH=$B/fakes LD_PRELOAD=$B/libncclguard.so \
        "$B/apps/launch" -n 4 --timeout 300 -- "$B/apps/trainloop" --quiet --steps 200 \
        --jitter-ms 15 --pause-ms 40 "$@" >"$d/out" 2>&1)
    "$B/ncclguard" analyze --json "$d/dumps" 2>/dev/null | python3 -c "import json, sys
v = json.load(sys.stdin)
print(' '.join(f'{c[\"rank\"]}:{c[\"cause\"]}' for c in v['verdict']['culprits']))"
    rm -rf "$d"
}

healthy=0 late=0 exact=0
for s in $(seq 1 "$RUNS"); do
    got=$(run healthy "$s" --seed "$s")
    [ -z "$got" ] || { healthy=$((healthy + 1)); echo "straggler: healthy seed $s: $got"; }
    r=$((s % 4))
    got=$(run late "$s" --seed "$s" --late-gpu-rank $r --late-gpu-ms 12)
    [ -z "$got" ] || late=$((late + 1))
    [ "$got" = "$r:slow" ] && exact=$((exact + 1)) || echo "straggler: late rank $r seed $s: '$got'"
done
echo "straggler: healthy jitter (sample 1 in $SAMPLE): named $healthy of $RUNS (target 0)"
echo "straggler: GPU 12 ms late (sample 1 in $SAMPLE): named $late of $RUNS," \
     "the late rank alone in $exact (target $RUNS)"

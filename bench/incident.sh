#!/usr/bin/env bash
# The cross-rank dump's latency: a 16-rank job on the CPU harness where rank 5 hangs on
# the host, alone on its "node" (its own NCCLGUARD_NODE_DIR), so that it learns of the
# incident only through the shared TRIGGER and its node's poller (NCCLGUARD_TRIGGER_POLL_S,
# default 2). Prints the time from the first timeout to the last of the 16 dumps.
# Target: <= 3 s. tests/e2e/incident.sh runs the same job and checks its dumps.
# Usage: bench/incident.sh BUILD_DIR [WORK_DIR]   (WORK_DIR is kept: dumps/, events, out;
# PRELOAD replaces the LD_PRELOAD value, for the sanitizer runtimes)
set -u
B=$(cd "${1:-build}" && pwd)
if [ -n "${2:-}" ]; then T=$2; mkdir -p "$T"; else
    T=$(mktemp -d "${TMPDIR:-/tmp}/ncclguard-bench.XXXXXX")
    trap 'rm -rf "$T"' EXIT
fi
mkdir -p "$T/nodeA" "$T/nodeB"
(cd "$T" && NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600 NCCLGUARD_DUMP_DIR=$T/dumps \
    NCCLGUARD_EVENTS=$T/events LD_LIBRARY_PATH=$B/fakes LD_PRELOAD=${PRELOAD:-$B/libncclguard.so} \
    "$B/apps/launch" -n 16 --timeout 300 -- /bin/sh -c \
    'if [ "$RANK" = 5 ]; then n=B; else n=A; fi; NCCLGUARD_NODE_DIR='"$T"'/node$n exec "$@"' \
    sh "$B/apps/trainloop" --steps 30 --hang-rank 5 --hang-step 3 --quiet >"$T/out" 2>&1) &
job=$!
for _ in $(seq 600); do
    n=$(find "$T/dumps" -maxdepth 1 -name 'ncclguard-r*.json' 2>/dev/null | wc -l)
    [ "$n" -ge 16 ] && break
    sleep 0.2
done
kill -TERM $job 2>/dev/null; wait $job 2>/dev/null
python3 - "$T/events" "$T/dumps" <<'PY'
import glob, json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
first = min(e["time_ns"] for e in events if e["event"] == "timeout")
dumps = [json.load(open(p)) for p in glob.glob(sys.argv[2] + "/*.json")]
last = max(d["time_ns"] for d in dumps)
print(f"incident: {len(dumps)} of 16 ranks dumped, one incident: "
      f"{len({d['incident'] for d in dumps}) == 1}; "
      f"first timeout to last dump {(last - first) / 1e9:.2f} s (target <= 3 s)")
PY

#!/usr/bin/env bash
# The cross-rank dump (shim/evidence/trigger.c), end to end: a rank that times out
# makes every rank dump once, the rank that waits on nothing included, through the
# trigger file of the shared dump directory and the node-local fan-out; and a person's
# `touch <dump dir>/TRIGGER` does the same. No timing thresholds: the figures are
# printed (and measured by `make bench`), the tests count dumps and incidents.
source "$(dirname "$0")/lib.sh"
LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop
if [ ! -x "$TRAIN" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "incident" "harness not built"; finish; exit
fi

# count_files DIR GLOB WANT: true when DIR holds at least WANT files matching GLOB
count_files() { [ "$(find "$1" -maxdepth 1 -name "$2" 2>/dev/null | wc -l)" -ge "$3" ]; }
# events_per_rank FILE EVENT: "rank:count ..." of EVENT in the event log
events_per_rank() {
    python3 - "$1" "$2" <<'PY'
import collections, json, sys
n = collections.Counter(json.loads(l)["rank"] for l in open(sys.argv[1])
                        if json.loads(l)["event"] == sys.argv[2])
print(" ".join(f"{r}:{c}" for r, c in sorted(n.items())))
PY
}

# --- 16 ranks on two "nodes": the culprit alone on its node -----------------------------
# Rank 5 blocks in trainloop_host_stall. Its node directory is its own, so the only
# way it learns of the incident is its node's poller, which stats the shared TRIGGER
# every NCCLGUARD_TRIGGER_POLL_S (default 2 s). The other 15 time out themselves and
# join the first one's incident.
J=$TMP/sixteen
PRELOAD=$(preload) "$ROOT/bench/incident.sh" "$B" "$J" >"$J.figure" 2>&1
if $CHECK incident "$J/dumps" 16 >"$J/check" && $CHECK hang "$J/dumps" 5 >>"$J/check" &&
    [ "$(events_per_rank "$J/events" dump)" = "$(seq -s ' ' -f '%g:1' 0 15)" ]; then
    what="16 ranks: one dump each, one incident, the culprit in trainloop_host_stall"
    pass "$what (first timeout to $(grep -o 'last dump [0-9.]* s' "$J.figure"))"
else
    fail "16-rank incident" "$(cat "$J/check") dumps per rank: $(events_per_rank "$J/events" dump)"
    tail -n 20 "$J/out"
fi

# --- the manual trigger: touch <dump dir>/TRIGGER ---------------------------------------
# A healthy job: a TRIGGER older than the job is history and starts nothing; each touch
# starts one incident, and each rank dumps once for it.
J=$TMP/manual
mkdir -p "$J/dumps" "$J/node"
touch "$J/dumps/TRIGGER"
(cd "$J" && NCCLGUARD_TRIGGER_POLL_S=1 NCCLGUARD_DUMP_DIR=$J/dumps NCCLGUARD_NODE_DIR=$J/node \
    NCCLGUARD_EVENTS=$J/events under_shim "$LAUNCH" -n 2 --timeout 300 -- \
    "$TRAIN" --steps 1000000 --compute-ms 20 --quiet >"$J/out" 2>&1) &
job=$!
# member KEY: the distinct values of KEY in the dumps of $J/dumps, sorted
member() { python3 -c 'import glob, json, sys
docs = [json.load(open(p)) for p in glob.glob(sys.argv[2] + "/*.json")]
print(" ".join(sorted({d[sys.argv[1]] for d in docs})))' "$1" "$J/dumps"; }
dumps_are() { [ "$(events_per_rank "$J/events" dump)" = "$1" ]; }
ok=0
# Two trigger periods with both communicators up: the older TRIGGER was polled, and left alone.
if wait_for 60 grep -qs 'comm_created.*"comm_rank":1' "$J/events" && sleep 2 && dumps_are "" &&
    touch "$J/dumps/TRIGGER" && wait_for 60 dumps_are "0:1 1:1"; then
    first=$(member incident)
    touch -d '+1 second' "$J/dumps/TRIGGER"
    if wait_for 60 dumps_are "0:2 1:2"; then
        second=$(member incident)
        case "$first/$second" in
        *-manual/*-manual) [ "$first" != "$second" ] && [[ "$first" != *" "* ]] && ok=1 ;;
        esac
    fi
fi
kill -TERM $job 2>/dev/null; wait $job 2>/dev/null
reasons=$(member reason)
if [ $ok = 1 ] && [ "$reasons" = "trigger" ]; then
    pass "touch TRIGGER: each touch one incident, one dump per rank; an older TRIGGER none"
else
    fail "manual trigger" "incidents '${first:-}' then '${second:-}', reasons $reasons, \
dumps $(events_per_rank "$J/events" dump)"
    tail -n 20 "$J/out"
fi
finish

#!/usr/bin/env bash
# Tracking paths that a training loop rarely takes, one one-rank job each
# (tests/e2e/progs/paths.c): nested and single-op groups, a deferred nonblocking
# record overwritten in the ring, the first-op timeout against the normal one,
# a group over more streams than get markers, and the state of communicators
# ended every way. The loops run more often than
# the marker pool has CUDA events (NCCLGUARD_RING=16: 80 of them), so that one
# event leaked per iteration runs it dry, and the dumps show it.
source "$(dirname "$0")/lib.sh"
PROG=$E2E/paths
if [ ! -x "$PROG" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "paths" "harness not built"; finish; exit
fi

# job NAME [VAR=VALUE...] ARGS: runs paths ARGS (env's command line) in $TMP/NAME, dumps
# in $TMP/NAME/dumps; sets (and returns) $rc. The watchdog polls every millisecond, so
# that it sees most ops finish (the others are overwritten in the ring first).
job() {
    local name=$1; shift
    mkdir -p "$TMP/$name"
    (cd "$TMP/$name" && NCCLGUARD_DUMP_DIR=$TMP/$name/dumps NCCLGUARD_POLL_MS=1 \
        under_shim env "$@" >"$TMP/$name/out" 2>&1)
    rc=$?
    return $rc
}
# no_dry_pool NAME: the job's marker pool never ran dry
no_dry_pool() {
    ! grep -q 'CUDA event pairs of a context are in use' "$TMP/$1/out" ||
        { echo "the marker pool ran dry" >"$TMP/$1/check"; return 1; }
}
# probed NAME: the dump with three ops held (paths.c's probe) is consistent: each of
# the three has a marker of its own
probed() {
    local held n
    held=$(ls "$TMP/$1"/dumps/held-*.json 2>/dev/null) && $CHECK sane "$held" >>"$TMP/$1/check" &&
        n=$(python3 -c 'import json, sys
print(sum(o["state"] == "scheduled" and o["marker"] is not None
          for o in json.load(open(sys.argv[1]))["ops"]))' "$held") && [ "$n" = 3 ] ||
        { echo "probe: ${n:-no} held ops with a marker of their own, want 3" >>"$TMP/$1/check"
          return 1; }
}

# --- nested groups: one group, launched at the outermost end, over two streams ------------
job nested NCCLGUARD_RING=16 NCCLGUARD_DUMP_AT_EXIT=1 "$PROG" nested 120
if [ $rc -eq 0 ] && no_dry_pool nested && $CHECK settled "$TMP/nested/dumps" >"$TMP/nested/check" &&
    probed nested &&
    python3 - "$TMP"/nested/dumps/ncclguard-*.json >>"$TMP/nested/check" 2>&1 <<'PY'
import collections, json, sys
ops = json.load(open(sys.argv[1]))["ops"]
groups = collections.Counter(o["group"] for o in ops if o["group"])
newest = sorted(groups)[-3:]  # the oldest group left in the ring may be partly overwritten
assert [groups[g] for g in newest] == [4, 4, 4], groups
assert all(len({o["stream"] for o in ops if o["group"] == g}) == 2 for g in newest), ops
print("3 groups of 4 ops over 2 streams")
PY
then
    pass "nested groups, 120 times: every op completed, $(tail -n 1 "$TMP/nested/check")"
else
    fail "nested groups" "rc=$rc $(cat "$TMP/nested/check")"; show nested
fi

# --- a group over more streams than it gets markers for: the 17th follows its group ------
# (once, they stayed scheduled and timed out on a healthy job; then they were untracked;
# now the 17th stream's op follows the group's first stream, which waits for the launch)
job wide NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_DUMP_AT_EXIT=1 "$PROG" wide 3
if [ $rc -eq 0 ] && grep -q 'summary: .* 0 timeouts' "$TMP/wide/out" &&
    python3 - "$TMP"/wide/dumps/ncclguard-*.json >"$TMP/wide/check" 2>&1 <<'PY'
import collections, json, sys
ops = json.load(open(sys.argv[1]))["ops"]
states = collections.Counter(o["state"] for o in ops)
assert states == {"completed": 51}, states
assert all(len({o["stream"] for o in ops if o["group"] == g}) == 17 for g in {o["group"] for o in ops}), ops
print("51 completed, the 17th stream's 3 too, no timeout")
PY
then
    pass "groups over 17 streams: $(cat "$TMP/wide/check")"
else
    fail "groups over 17 streams" "rc=$rc $(cat "$TMP/wide/check")"; show wide
fi

# --- single-op groups: each group marker is released by its only record ----------------
job single NCCLGUARD_RING=16 NCCLGUARD_DUMP_AT_EXIT=1 "$PROG" single 120
if [ $rc -eq 0 ] && no_dry_pool single && $CHECK settled "$TMP/single/dumps" >"$TMP/single/check" &&
    probed single; then
    pass "120 groups of one op per stream: each group marker returned once ($(head -n 1 "$TMP/single/check"))"
else
    fail "single-op groups" "rc=$rc $(cat "$TMP/single/check")"; show single
fi

# track_mode MODE CHECK WHAT: 20 single-op groups under NCCLGUARD_TRACK=MODE (job MODE),
# dumped at exit; passes "track=MODE: WHAT" when the job succeeds and its dumps pass
# `$CHECK CHECK`, then the Python program on stdin (with the dump as its argument)
track_mode() {
    local d=$TMP/$1
    job "$1" NCCLGUARD_TRACK="$1" NCCLGUARD_RING=16 NCCLGUARD_DUMP_AT_EXIT=1 "$PROG" single 20 \
        </dev/null
    if [ $rc -eq 0 ] && $CHECK "$2" "$d/dumps" >"$d/check" &&
        python3 - "$d"/dumps/ncclguard-*.json >>"$d/check" 2>&1; then
        pass "track=$1: $3"
    else
        fail "track=$1" "rc=$rc $(cat "$d/check")"; show "$1"
    fi
}

# --- NCCLGUARD_TRACK=end: end markers only, so no op is ever seen started ---------------
track_mode end settled "every op completed, none with a start time" <<'PY'
import json, sys
ops = json.load(open(sys.argv[1]))["ops"]
started = [o["index"] for o in ops if o["gpu_start_ns"] or o["seen_start_ns"]]
assert not started, f"ops with a start time: {started}"
PY

# --- NCCLGUARD_TRACK=off: no markers, so every op is untracked, none left in flight ------
track_mode off sane "every op untracked, none in flight" <<'PY'
import json, sys
ops = json.load(open(sys.argv[1]))["ops"]
other = [(o["index"], o["state"]) for o in ops if o["state"] != "untracked" or o["marker"] is not None]
assert ops and not other, f"ops not untracked: {other}"
PY

# --- a deferred record overwritten in the ring: its marker comes back exactly once ------
# Lost, the pool runs dry; returned twice, two ops get the same one.
job deferred NCCLGUARD_RING=16 NCCLGUARD_DUMP_AT_EXIT=1 "$PROG" deferred 120
if [ $rc -eq 0 ] && no_dry_pool deferred && probed deferred &&
    $CHECK settled "$TMP/deferred/dumps" >>"$TMP/deferred/check" &&
    [ "$(python3 -c 'import glob, json, sys
print(json.load(open(glob.glob(sys.argv[1])[0]))["flight"]["dropped_inflight"] >= 120)' \
        "$TMP/deferred/dumps/held-*.json")" = True ]; then
    pass "120 deferred records overwritten in the ring: each marker returned once"
else
    fail "deferred record overwritten" "rc=$rc $(cat "$TMP/deferred/check")"; show deferred
fi

# --- the first op of a communicator gets NCCLGUARD_FIRST_TIMEOUT, later ones the other ---
# AllReduce #1 and #2, Send p2p #1 and Recv p2p #2 (with the same peer) are held on the
# GPU. Only #2 of each kind may time out: the first ones are older, so with the short
# timeout they would have timed out in the same poll or before. The two timeouts can
# come in different polls and one incident gets one dump, so the checker waits for
# both in the event log, releases the ops, and reads the flags in the exit dump.
go=$TMP/timeouts/go
mkdir -p "$TMP/timeouts"
job timeouts NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=600 NCCLGUARD_DUMP_AT_EXIT=1 \
    NCCLGUARD_EVENTS="$TMP/timeouts/events" "$PROG" timeouts "$go" &
jobpid=$!
python3 - "$TMP/timeouts/events" >"$TMP/timeouts/check" 2>&1 <<'PY'
import json, os, sys, time
def timed_out():
    if not os.path.exists(sys.argv[1]): return set()
    events = [json.loads(line) for line in open(sys.argv[1]) if line.endswith("\n")]
    return {(e["op"], e["p2p_seq"] if e["op"] in ("Send", "Recv") else e["seq"])
            for e in events if e["event"] == "timeout"}
deadline = time.time() + 60
while time.time() < deadline:
    if {("AllReduce", 2), ("Recv", 2)} <= timed_out():
        time.sleep(0.5)  # 500 polls more: the first ones, past the short timeout, would go too
        seen = timed_out()
        assert seen == {("AllReduce", 2), ("Recv", 2)}, seen
        print("AllReduce #2 and Recv #2 timed out; the first ones, older, did not")
        sys.exit(0)
    time.sleep(0.1)
print("no timeout of AllReduce #2 and Recv #2 within 60 s")
sys.exit(1)
PY
checked=$?
touch "$go"
wait $jobpid
rc=$?
if [ $checked -eq 0 ] && [ $rc -eq 0 ] &&
    python3 - "$TMP"/timeouts/dumps/ncclguard-*.json >>"$TMP/timeouts/check" 2>&1 <<'PY'
import json, sys
ops = json.load(open(sys.argv[1]))["ops"]
def flags(kind, seq):
    key = "p2p_seq" if kind in ("Send", "Recv") else "seq"
    return [o["flags"] for o in ops if o["op"] == kind and o[key] == seq][0]
for kind in ("AllReduce", "Send"):
    assert "first" in flags(kind, 1) and "timeout" not in flags(kind, 1), (kind, flags(kind, 1))
for kind in ("AllReduce", "Recv"):
    assert "first" not in flags(kind, 2) and "timeout" in flags(kind, 2), (kind, flags(kind, 2))
PY
then
    pass "first-op timeout (600 s) apart from the normal one (1 s): $(head -n 1 "$TMP/timeouts/check")"
else
    fail "first-op and normal timeouts" "rc=$rc $(cat "$TMP/timeouts/check")"; show timeouts
fi

# --- communicators ended every way: their state in the exit dump -------------------------
job ends NCCLGUARD_DUMP_AT_EXIT=1 FAKENCCL_FAIL_OP=CommDestroy FAKENCCL_FAIL_NTH=3 "$PROG" ends
if [ $rc -eq 0 ] && $CHECK sane "$TMP/ends/dumps" >"$TMP/ends/check" &&
    python3 - "$TMP"/ends/dumps/*.json >>"$TMP/ends/check" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
state = {c["name"]: c["state"] for c in d["comms"] if c["name"]}
want = {"finalized": "finalizing", "finalized-destroyed": "destroyed", "destroyed": "destroyed",
        "revoked": "revoked", "revoked-in-flight": "revoked", "aborted": "aborted",
        "destroy-refused": "ready"}
assert state == want, state
ids = {c["id"]: c["name"] for c in d["comms"]}
ops = {}
for o in d["ops"]:
    ops.setdefault(ids[o["comm"]], []).append(o["state"])
assert ops["revoked-in-flight"] == ["aborted"], ops
assert sorted(ops["aborted"]) == ["aborted", "completed"], ops
assert all(s == ["completed"] for n, s in ops.items() if n not in ("revoked-in-flight", "aborted") and n), ops
print("states: " + ", ".join(f"{n} {s}" for n, s in sorted(state.items())))
PY
then
    pass "communicator end states: $(tail -n 1 "$TMP/ends/check")"
else
    fail "communicator end states" "rc=$rc $(cat "$TMP/ends/check")"; show ends
fi

dumps_sane
finish

#!/usr/bin/env bash
# `ncclguard analyze` end to end: each fault of trainloop (tests/apps) under the shim,
# on the CPU harness, gets a verdict that names exactly the faulty rank and its cause;
# healthy runs (a jittery one too) get healthy: true and no culprit; bad files in the
# dump directory each get a line, and the rest is still analyzed; the synthetic dumps
# of bench/gendumps get their planted culprit; the reader reads back what the shim
# wrote (schema /2, and the /1.x fixtures), with both JSON libraries alike.
source "$(dirname "$0")/lib.sh"
LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop
GEN=$ROOT/$B/bench/gendumps
needs_harness analyze "$TRAIN"


# Hangs: the peers time out (not on their first op, whose timeout is set far off), and
# every rank dumps for the incident.
export NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600
# every rank's dump of the incident
UNTIL="$(dumped hang) && grep -q 'verdict (' $TMP/hang/out" job hang -n 4 --timeout 60 -- --steps 30 --hang-rank 1 --hang-step 3 --quiet
verdict hang "1:missing"
if grep -q 'trainloop_host_stall' "$TMP/hang.txt" && grep -q '"where"' "$TMP/hang.json" &&
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["verdict"]["culprits"][0]
assert "trainloop_host_stall" in c["where"]["frames"] and c["seq"] and c["chain"][-1] == 1, c' \
        "$TMP/hang.json"; then
    pass "host hang: the verdict shows rank 1's thread in trainloop_host_stall"
else
    fail "host hang: where" "$(head -n 1 "$TMP/hang.txt")"
fi
# The verdict in the job's own log (evidence/verdict.h): the rank that raised the
# incident ran this ncclguard, beside the library, once every dump was there.
if [ "$(grep -c 'ncclguard: \[rank [0-9] .*verdict (4 dumps): culprit: rank 1 ' "$TMP/hang/out")" = 1 ]
then
    pass "host hang: the verdict is in the job's log, once: $(grep -o 'verdict (4 dumps): .*' "$TMP/hang/out" | head -c 120)"
else
    fail "host hang: verdict in the log" "$(grep -a 'verdict\|ncclguard analyze' "$TMP/hang/out" | head -n 3)"
fi

UNTIL=$(dumped skip) job skip -n 4 --timeout 60 -- --steps 30 --skip-rank 3 --skip-step 2 --quiet
verdict skip "3:missing"
grep -q 'skipped AllReduce' "$TMP/skip.txt" && pass "skipped op: said to be skipped" ||
    fail "skipped op: the words" "$(head -n 1 "$TMP/skip.txt")"

UNTIL=$(dumped mismatch) job mismatch -n 4 --timeout 60 -- --steps 30 --mismatch-rank 3 --mismatch-step 2 --quiet
verdict mismatch "3:mismatch"

UNTIL=$(dumped stall) job stall -n 4 --timeout 60 -- --steps 30 --stall-gpu-rank 2 --stall-step 3 --quiet
verdict stall "2:gpu_not_started"
grep -q "not NCCL's" "$TMP/stall.txt" && pass "GPU stall: the stream is blocked by non-NCCL work" ||
    fail "GPU stall: the blocker" "$(head -n 1 "$TMP/stall.txt")"

# A GPU stall that fills the launch queue (3 items: a real GPU's is about a thousand):
# rank 0's host then blocks in the next driver call of an op, the end marker's record
# included. Every op NCCL took is in its dump (the communicator's last_seq is in the
# ring), it times out, and the verdict names it. Both ranks wait in the same op from
# about the same moment: rank 1's timeout is set later, or the rank whose watchdog
# happens to pass first would make the other's dump a trigger dump, without a timeout.
FAKECUDA_QUEUE_DEPTH=3 UNTIL=$(dumped queuefull 2) RANKENV='[ "$RANK" = 1 ] && export NCCLGUARD_TIMEOUT=5' \
    job queuefull -n 2 --timeout 60 -- --steps 30 --stall-gpu-rank 0 --stall-step 2 --quiet
verdict queuefull "0:gpu_not_started"
if python3 - "$TMP"/queuefull/dumps/ncclguard-r0-*.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["comms"]:
    seqs = [o["seq"] for o in d["ops"] if o["comm"] == c["id"] and o["seq"]]
    assert c["last_seq"] in seqs, (c["id"], c["last_seq"], seqs)
    # an op left unfinished (its end marker perhaps still being recorded) was
    # never counted completed
    last = [o for o in d["ops"] if o["comm"] == c["id"] and o["seq"] == c["last_seq"]]
    if last[0]["state"] != "completed":
        assert c["last_completed_seq"] < c["last_seq"], c
assert any("timeout" in o["flags"] for o in d["ops"]), "rank 0 timed out no op"
PY
then
    pass "full launch queue: rank 0's dump holds its last op, timed out"
else
    fail "full launch queue: rank 0's dump" "$(grep -a 'ncclguard' "$TMP/queuefull/out" | head -n 3)"
fi

# A hang on the split communicator only: rank 1 stops after the step's world ops; its
# half waits in the AllGather, the other half in the Send/Recv ring, behind it.
UNTIL=$(dumped split) job split -n 4 --timeout 60 -- --steps 30 --hang-split-rank 1 --hang-split-step 2 --quiet
verdict split "1:missing"
python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); c=v["verdict"]["culprits"][0]
world=[x["id"] for x in v["communicators"] if x["nranks"] == 4]
assert c["comm"] not in world, (c["comm"], world)' "$TMP/split.json" &&
    pass "split hang: the culprit's communicator is the split one" ||
    fail "split hang: the communicator" "$(head -n 1 "$TMP/split.txt")"

# A crash: rank 2's crash dump; the launcher stops the others.
job crash -n 4 --timeout 15 -- --steps 30 --crash-rank 2 --crash-step 3 --quiet
verdict crash "2:crashed"
# The same job without rank 2's dump (a SIGKILL leaves none): no_dump, with the
# launcher's line about it.
mkdir -p "$TMP/nodump/dumps"
cp "$TMP"/crash/dumps/*.json "$TMP/nodump/dumps/" 2>/dev/null
rm -f "$TMP"/nodump/dumps/ncclguard-r2-*.json
if [ "$(ls "$TMP/nodump/dumps" | wc -l)" -ge 3 ]; then
    verdict nodump "2:no_dump" --launcher-log "$TMP/crash/out"
    # (under ASan, its SEGV handler ends the process: exit status 1)
    grep -Eq 'launcher: launch: rank 2 (killed by signal SIGSEGV|exited with status 1)' \
        "$TMP/nodump.txt" &&
        pass "no dump: the launcher's line is in the verdict" ||
        fail "no dump: the launcher's line" "$(head -n 1 "$TMP/nodump.txt")"
else
    fail "no dump" "the peers of the crash left $(ls "$TMP/nodump/dumps" | wc -l) dumps"
fi
unset NCCLGUARD_TIMEOUT NCCLGUARD_FIRST_TIMEOUT

# An asynchronous error on rank 0 (the fake NCCL injects ncclRemoteError after 20 ops):
# rank 0 exits on it; its exit dump has the communicator's error.
FAKENCCL_ASYNC_ERROR_AFTER=20 FAKENCCL_ASYNC_ERROR_RANK=0 NCCLGUARD_DUMP_AT_EXIT=1 \
    job async -n 2 --timeout 60 -- --steps 20 --quiet
verdict async "0:async_error"

# A slow rank: rank 1's GPU starts every kernel, copy and op 4 ms late; no hang.
# It is named slow, and nobody else is. The straggler rule reads the timing samples;
# every op timed: at the default sampling (one in 16 of a class) 160 steps are 10
# arrivals, enough only when the loaded machine's noise never puts another rank last.
RANKENV='[ "$RANK" = 1 ] && export FAKECUDA_OP_DELAY_US=4000' NCCLGUARD_DUMP_AT_EXIT=1 \
    NCCLGUARD_TIMING_SAMPLE=1 NCCLGUARD_SLOW_FACTOR=1000 job slow -n 4 --timeout 300 -- \
    --steps 160 --quiet
verdict slow "1:slow"
# The straggler of bench/straggler.sh (one run of its 20): host jitter and pauses on
# every rank, and rank 2's GPU 12 ms late on every step. Named, with the evidence.
NCCLGUARD_TIMING_SAMPLE=1 NCCLGUARD_DUMP_AT_EXIT=1 NCCLGUARD_SLOW_FACTOR=1000 job late -n 4 \
    --timeout 300 -- --steps 200 --jitter-ms 15 --pause-ms 40 --seed 5 --late-gpu-rank 2 --quiet
verdict late "2:slow"
grep -Eq 'arrived last at [0-9]+ of [0-9]+ collectives .*% of the waiting, p [<=] [-0-9.e]+ by' \
    "$TMP/late.txt" && pass "late GPU: the verdict says how strong the evidence is" ||
    fail "late GPU: the evidence" "$(head -n 1 "$TMP/late.txt")"

# Healthy: exit dumps of a plain job, and of one with host jitter and pauses (the ranks
# wait for each other, in turn: no straggler). Every op timed: at the default sampling
# a job this short has a few samples per class, most of them the first of their class,
# taken in the warm-up, and a healthy rank can come last at most of them (seen once:
# rank 0 last at 10 of 18; docs/analysis.md).
NCCLGUARD_TIMING_SAMPLE=1 NCCLGUARD_DUMP_AT_EXIT=1 job healthy -n 4 --timeout 300 -- \
    --steps 50 --quiet
verdict healthy healthy
# The jittery jobs are judged on the plain build only: under ASan, four ranks on two
# cores do not get fair host time, and a rank starved of it really is late at most
# collectives (rank 3 last at 43 of 100, p = 0.0005, in a clean-clone CI run).
if [ -z "${SANITIZE:-}" ]; then
    NCCLGUARD_TIMING_SAMPLE=1 NCCLGUARD_DUMP_AT_EXIT=1 job jitter -n 4 --timeout 300 -- \
        --steps 100 --jitter-ms 15 --pause-ms 40 --quiet
    verdict jitter healthy
    # The healthy job of bench/straggler.sh, one seed: another draw of jitter and pauses.
    NCCLGUARD_TIMING_SAMPLE=1 NCCLGUARD_DUMP_AT_EXIT=1 job jitter5 -n 4 --timeout 300 -- \
        --steps 200 --jitter-ms 15 --pause-ms 40 --seed 5 --quiet
    verdict jitter5 healthy
else
    skip "jittery healthy jobs" "judged on the plain build (host time is not fair under ASan)"
fi

dumps_sane # the shim's dumps and gendumps', before the bad files below

# Bad files among a healthy job's dumps: one line each, naming the file; the rest is
# still analyzed (healthy, exit 0).
bad=$TMP/bad/dumps
mkdir -p "$bad"
cp "$TMP"/healthy/dumps/*.json "$bad/"
one=$(ls "$bad" | head -n 1)
head -c 3000 "$bad/$one" >"$bad/ncclguard-r10-cut-1.json"            # truncated
printf '{"schema":"ncclguard.dump/2", "reason": [}' >"$bad/ncclguard-r11-corrupt-1.json"
sed 's/"schema":"ncclguard.dump\/2[.0-9]*"/"schema":"ncclguard.dump\/9"/' "$bad/$one" \
    >"$bad/ncclguard-r12-future-1.json"                                # unknown schema
sed 's/"rank":0,/"rank":13,/; s/"job":"[^"]*"/"job":"another"/' "$TMP/healthy/dumps/$(ls "$TMP/healthy/dumps" | head -n 1)" \
    >"$bad/ncclguard-r13-other-1.json"                                 # another job
cp "$bad/$one" "$bad/${one%.json}0.json" && touch -d '-1 hour' "$bad/${one%.json}0.json"
mkfifo "$bad/fifo.json"
mkdir "$bad/dir.json"
: >"$bad/empty.json"
verdict bad healthy
n=0
for f in ncclguard-r10-cut-1.json ncclguard-r11-corrupt-1.json ncclguard-r12-future-1.json \
    ncclguard-r13-other-1.json "${one%.json}0.json" fifo.json dir.json empty.json; do
    c=$(grep -c -- "/$f: " "$TMP/bad.err")
    [ "$c" = 1 ] && n=$((n + 1)) || echo "no single line for $f ($c): $(cat "$TMP/bad.err")"
done
[ $n = 8 ] && pass "8 bad files: one line each on stderr, naming the file" ||
    fail "bad files" "$n of 8 named once"
grep -q 'unknown schema' "$TMP/bad.err" && grep -q 'not of job' "$TMP/bad.err" &&
    grep -q 'second dump of rank 0' "$TMP/bad.err" && grep -q 'a FIFO' "$TMP/bad.err" &&
    pass "bad files: the lines say why (schema, job, second dump, FIFO)" ||
    fail "bad files: why" "$(cat "$TMP/bad.err")"
mkdir -p "$TMP/empty"
"$NG" analyze "$TMP/empty" >/dev/null 2>"$TMP/empty.err"
rc=$?
[ $rc = 3 ] && grep -q 'no usable dump' "$TMP/empty.err" &&
    pass "an empty directory: unusable input, exit 3" || fail "empty directory" "rc=$rc"

# A chain: rank 0 waits on comm A (ranks 0, 1) for rank 1, which never called the op
# because it waits on comm B (ranks 1, 2) for rank 2, which never called that one: the
# verdict names rank 2, with the chain 1 -> 2.
mkdir -p "$TMP/chain"
python3 - "$TMP/chain" <<'PY'
import json, sys
A, B = "00000000000000aa", "00000000000000bb"
def comm(cid, rank, last, done):
    return {"id": cid, "rank": rank, "nranks": 2, "device": 0, "name": None, "state": "ready",
            "blocking": True, "parent": None, "created_ns": 1, "last_seq": last,
            "last_completed_seq": done, "last_async_error": 0, "peers": []}
def op(index, cid, rank, seq, state, t):
    return {"index": index, "comm": cid, "comm_rank": rank, "comm_nranks": 2, "seq": seq,
            "p2p_seq": None, "op": "AllReduce", "count": 8, "datatype": "float32", "bytes": 32,
            "redop": "sum", "root": None, "peer": None, "stream": "0000000000000010",
            "group": None, "thread": 100 + index, "enqueue_ns": t, "enqueue_mono_ns": t,
            "state": state, "gpu_start_ns": t + 1 if state != "scheduled" else None,
            "gpu_end_ns": t + 2 if state == "completed" else None, "seen_start_ns": None,
            "seen_end_ns": None, "result": 0,
            "flags": ["timeout"] if state == "started" else [], "marker": None}
def frames(*names):
    return [{"pc": "%016x" % (0x1000 + i), "module": "/job/pipeline", "offset": i,
             "function": n, "function_offset": 4, "build_id": None} for i, n in enumerate(names)]
ranks = [
    ([comm(A, 0, 5, 4)], [op(1, A, 0, 5, "started", 50), op(0, A, 0, 4, "completed", 40)],
     frames("wait_stream", "stage_a", "main")),
    ([comm(A, 1, 4, 4), comm(B, 0, 3, 2)],
     [op(1, B, 0, 3, "started", 45), op(0, A, 1, 4, "completed", 40)],
     frames("wait_stream", "stage_b", "main")),
    ([comm(B, 1, 2, 2)], [op(0, B, 1, 2, "completed", 30)], frames("stage_c_hang", "main")),
]
for r, (comms, ops, fr) in enumerate(ranks):
    d = {"schema": "ncclguard.dump/2", "reason": "timeout" if r < 2 else "trigger",
         "incident": "1-r0@h", "time_ns": 10**12, "host": "h", "pid": 1000 + r, "rank": r,
         "local_rank": r, "job": "chain", "versions": {"ncclguard": "0.1.0", "nccl": None,
         "cuda_driver": None, "python": None}, "env": {},
         "flight": {"capacity": 16, "recorded": len(ops), "overwritten": 0, "dropped_inflight": 0},
         "comms": comms, "ops": ops,
         "threads": [{"tid": 1000 + r, "name": "pipeline", "state": "S", "syscall": None,
                      "stack_from": "self", "frames": fr}], "python": None}
    json.dump(d, open(f"{sys.argv[1]}/ncclguard-r{r}-h-{1000 + r}.json", "w"))
PY
verdict chain "2:missing"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["verdict"]["culprits"][0]
assert c["chain"] == [1, 2] and c["where"]["frames"][0] == "stage_c_hang", c' "$TMP/chain.json" &&
    pass "chain: followed from rank 1 to rank 2, in stage_c_hang" ||
    fail "chain" "$(head -n 1 "$TMP/chain.txt")"

# Synthetic dumps (bench/gendumps), 64 ranks in groups of 8: the planted culprit.
if [ -x "$GEN" ]; then
    for cause in missing mismatch gpu_not_started slow crash; do
        "$GEN" -o "$TMP/gen-$cause" -n 64 -r 512 --culprit 37 --cause $cause
        verdict "gen-$cause" "37:$( [ $cause = crash ] && echo crashed || echo $cause)"
    done
    "$GEN" -o "$TMP/gen-nodump" -n 64 -r 512 --no-dump 21
    verdict gen-nodump "21:no_dump"
    "$GEN" -o "$TMP/gen-none" -n 64 -r 512
    verdict gen-none healthy
else
    skip "synthetic dumps" "bench/gendumps not built"
fi

# The reader: what the shim wrote, read back member by member, by both JSON libraries;
# and the hand-written 1.x files.
ECHO=$ROOT/$B/tests/unit/dumpread_echo
if [ -x "$ECHO" ] && out=$(python3 "$ROOT/tests/unit/check_dumpread.py" "$ECHO" \
    "$TMP"/hang/dumps/*.json "$TMP"/crash/dumps/*.json "$TMP"/healthy/dumps/*.json \
    "$ROOT"/tests/fixtures/dumps/dump-{1.*,bad-*}.json 2>&1); then
    pass "round trip: ${out#check_dumpread: }"
else
    fail "round trip of the dumps" "${out:-dumpread_echo not built}"
fi
finish

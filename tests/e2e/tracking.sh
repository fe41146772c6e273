#!/usr/bin/env bash
# Tracking, flight recorder and watchdog, end to end: trainloop under launch with
# every rank preloaded. Timeouts here are seconds, generous for a loaded 2-core box.
source "$(dirname "$0")/lib.sh"
LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop
if [ ! -x "$TRAIN" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "tracking" "harness not built"; finish; exit
fi

# --- healthy: no timeout, no slow op, every op counted and completed ----------------------
# The harness's "GPU" is host threads sharing two cores with eight others, where a
# 10 ms blip of a 1 ms op is ordinary; the slow rule's factor is raised so that
# only a pathological op would count (the slow-rank case below tests the rule).
NCCLGUARD_SLOW_FACTOR=1000 job healthy -n 4 --timeout 300 -- --steps 50 --quiet
if [ $rc -eq 0 ] && ! grep -q 'ncclguard: .*\(in flight\|slow \)' "$TMP/healthy/out"; then
    pass "healthy 4 ranks x 50 steps: no timeout, no slow op"
else
    fail "healthy run" "rc=$rc"; show healthy
fi
counted=1
for r in 0 1 2 3; do
    app=$(grep -o "trainloop: rank $r ok steps=50 ops=[0-9]*" "$TMP/healthy/out" | grep -o '[0-9]*$')
    shim=$(grep "ncclguard: \[rank $r .*summary:" "$TMP/healthy/out" | grep -o '[0-9]* ops' | grep -o '[0-9]*')
    [ -n "$app" ] && [ "$app" = "$shim" ] || { counted=0; echo "rank $r: app ops=$app shim ops=$shim"; }
done
if [ $counted = 1 ]; then pass "exit summary counts every op of every rank"
else fail "exit summary counts every op"; fi

NCCLGUARD_DUMP_AT_EXIT=1 NCCLGUARD_EVENTS=$TMP/atexit.events \
    job atexit -n 4 --timeout 300 -- --steps 50 --quiet
if [ $rc -eq 0 ] && $CHECK completed "$TMP/atexit/dumps" 4 >"$TMP/atexit/check"; then
    pass "exit dumps: every op completed, seq = last_completed_seq on every rank"
else
    fail "exit dumps" "rc=$rc $(cat "$TMP/atexit/check")"
fi

# Split children: their rank and size in the communicator are known in every op of
# the dump and in their comm_created event (one per communicator and rank, no key
# twice), although only NCCL knows them when the split returns.
if python3 - "$TMP/atexit.events" "$TMP/atexit/dumps" >"$TMP/atexit/split" 2>&1 <<'PY'
import glob, json, sys
def no_dup_keys(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), keys
    return dict(pairs)
created = [json.loads(l, object_pairs_hook=no_dup_keys) for l in open(sys.argv[1])]
created = [e for e in created if e["event"] == "comm_created"]
assert len(created) == 8, len(created)  # 4 ranks x (world + half)
for e in created:
    want = 4 if e["parent"] == "0" * 16 else 2
    assert e["comm_nranks"] == want and 0 <= e["comm_rank"] < want, e
for path in glob.glob(sys.argv[2] + "/*.json"):
    d = json.load(open(path))
    size = {c["id"]: c["nranks"] for c in d["comms"]}
    bad = [o["seq"] for o in d["ops"] if o["comm_nranks"] != size[o["comm"]] or o["comm_rank"] < 0]
    assert not bad, (path, bad[:5])
print("8 comm_created events, every op with its communicator's rank and size")
PY
then
    pass "split children: $(cat "$TMP/atexit/split")"
else
    fail "split children's rank and size" "$(tail -n 3 "$TMP/atexit/split")"
fi

# --- a stalled GPU: the stalled rank has the op scheduled, its peers started -------------
# Here and below, the ops that hang are not their communicator's first: FIRST_TIMEOUT,
# set far off, must not be the timeout that counts. The first rank to time out raises the
# incident, and the others dump on it at once (the node's fan-out is watched), before
# their own timeout lines: the job runs until those lines are there too.
UNTIL="$(dumped stall) && [ \$(grep -c '\"event\":\"dump\"' $TMP/stall.events) -ge 4 ] &&
    grep -q 'rank 2 .*in flight .*not started on GPU' $TMP/stall/out &&
    grep -q 'rank 0 .*in flight .*started on GPU, not finished' $TMP/stall/out" \
    NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600 NCCLGUARD_EVENTS=$TMP/stall.events \
    job stall -n 4 --timeout 60 -- --steps 30 --stall-gpu-rank 2 --stall-step 3 --quiet
if grep -q 'ncclguard: \[rank 2 .*in flight .*not started on GPU' "$TMP/stall/out" &&
    grep -q 'ncclguard: \[rank 0 .*in flight .*started on GPU, not finished' "$TMP/stall/out" &&
    $CHECK stall "$TMP/stall/dumps" 2 >"$TMP/stall/check" &&
    $CHECK mainloop "$TMP/stall/dumps" 2 >>"$TMP/stall/check"; then
    pass "stalled GPU on rank 2: scheduled there, started on the peers ($(cat "$TMP/stall/check"))"
else
    fail "stalled GPU" "$(cat "$TMP/stall/check" 2>/dev/null)"; show stall
fi

if python3 - "$TMP/stall.events" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
kinds = {e["event"] for e in events}
need = {"comm_created", "timeout", "dump"}
assert need <= kinds, f"missing {need - kinds}"
assert {e["rank"] for e in events if e["event"] == "dump"} == {0, 1, 2, 3}
PY
then pass "event log: comm_created, timeout and dump events of every rank, valid JSON lines"
else fail "event log"; fi

# --- a dump on request: SIGUSR2 (forwarded by launch) -------------------------------------
mkdir -p "$TMP/signal"
(cd "$TMP/signal" && NCCLGUARD_DUMP_DIR=$TMP/signal/dumps NCCLGUARD_EVENTS=$TMP/signal/events \
    under_shim "$LAUNCH" -n 2 --timeout 120 --rdzv "$TMP/signal/rdzv" \
    -- "$TRAIN" --steps 100000 --compute-ms 5 --quiet >"$TMP/signal/out" 2>&1) &
lpid=$!
# the handler exists once a rank has its first communicator (4 = 2 ranks x 2 comms)
for _ in $(seq 600); do
    [ "$(cat "$TMP/signal/events" 2>/dev/null | grep -c comm_created)" -ge 4 ] && break; sleep 0.1
done
# launch forwards it to the ranks; its --rdzv names this job alone among the scripts'
# jobs that tests/run runs at the same time
pkill -USR2 -f "^$LAUNCH -n 2 --timeout 120 --rdzv $TMP/signal/rdzv -- "
for _ in $(seq 100); do [ "$(ls "$TMP/signal/dumps" 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.1; done
pkill -TERM -f "^$LAUNCH -n 2 --timeout 120 --rdzv $TMP/signal/rdzv -- "; wait $lpid 2>/dev/null
reasons=$(python3 -c 'import glob,json,sys
print(sorted(json.load(open(p))["reason"] for p in glob.glob(sys.argv[1]+"/*.json")))' "$TMP/signal/dumps" 2>/dev/null)
if [ "$reasons" = "['signal', 'signal']" ]; then
    pass "SIGUSR2 makes every rank write a dump"
else
    fail "dump on SIGUSR2" "reasons=$reasons"; show signal
fi

# --- a rank hung on the host: the others time out on the op it never called --------------
UNTIL=$(dumped hang) NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600 \
    job hang -n 4 --timeout 60 -- --steps 30 --hang-rank 1 --hang-step 3 --quiet
if $CHECK hang "$TMP/hang/dumps" 1 >"$TMP/hang/check" &&
    ! grep -q 'ncclguard: \[rank 1 .*in flight' "$TMP/hang/out"; then
    pass "host hang on rank 1: peers time out on one op, rank 1 dumps on their trigger"
else
    fail "host hang" "$(cat "$TMP/hang/check")"; show hang
fi
# Each peer's dump holds every thread's C stack, symbolized from the binary's
# .symtab (trainloop exports nothing), and passes the schema check.
if $CHECK stack "$TMP/hang/dumps" run_worker >"$TMP/hang/stack" &&
    $CHECK schema "$TMP"/hang/dumps/*.json >>"$TMP/hang/stack" 2>&1; then
    pass "host hang: the peers' dumps list their threads, the main one in run_worker"
else
    fail "host hang stacks" "$(cat "$TMP/hang/stack")"
fi

# --- skipped and mismatched collectives: the dumps differ exactly there -------------------
for kind in skip mismatch; do
    UNTIL=$(dumped $kind) NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600 \
        job $kind -n 4 --timeout 60 -- --steps 30 --$kind-rank 3 --$kind-step 2 --quiet
    if $CHECK differ "$TMP/$kind/dumps" 3 >"$TMP/$kind/check"; then
        pass "--$kind-rank 3: $(cat "$TMP/$kind/check")"
    else
        fail "--$kind-rank 3" "$(cat "$TMP/$kind/check")"; show $kind
    fi
done

# --- a slow rank: slow-op lines ----------------------------------------------------------
FAKENCCL_DELAY_MS=120 FAKENCCL_DELAY_RANK=1 NCCLGUARD_SLOW_MS=60 \
    job slow -n 2 --timeout 120 -- --steps 5 --quiet
if [ $rc -eq 0 ] && grep -q 'ncclguard: \[rank 1 .*slow [A-Za-z]* #' "$TMP/slow/out"; then
    pass "a 120 ms GPU delay on rank 1 gives slow-op lines"
else
    fail "slow ops" "rc=$rc"; show slow
fi

# --- timing samples: the first op of a class, then one in N (staggered per class), and an op
# that comes after a gap --------------------------------------------------------------------
# The others' events are created without timing: they have discovery times only,
# and the fake driver refuses their elapsed time (a misuse line would show it).
for every in 4 0; do
    NCCLGUARD_TIMING_SAMPLE=$every NCCLGUARD_DUMP_AT_EXIT=1 \
        job sample$every -n 2 --timeout 300 -- --steps 24 --quiet
    if [ $rc -eq 0 ] && ! grep -q '^fakecuda:' "$TMP/sample$every/out" &&
        python3 - "$every" "$TMP"/sample$every/dumps/*.json >"$TMP/sample$every/check" <<'PY'
import json, sys
every = int(sys.argv[1])
seen = {}  # class -> ops of it so far, in enqueue order
phase = {}  # class -> its phase: the k-th class its communicator met, mod every
classes = {}  # communicator -> classes met
last = {}  # communicator -> enqueue_mono_ns of its previous op
counts = {"sampled": 0, "discovered": 0}
for path in sys.argv[2:]:
    d = json.load(open(path))
    ops = sorted(d["ops"], key=lambda o: o["index"])
    assert d["flight"]["overwritten"] == 0, d["flight"]
    for o in ops:
        key = (path, o["comm"], o["op"], max(o["bytes"], 1).bit_length() - 1)
        n = seen[key] = seen.get(key, -1) + 1
        if n == 0 and every:
            k = classes[key[:2]] = classes.get(key[:2], -1) + 1
            phase[key] = k % every
        gap = o["enqueue_mono_ns"] - last.get(key[:2], 0) > 1000000
        last[key[:2]] = o["enqueue_mono_ns"]
        if o["state"] != "completed" or o["group"] is not None:
            continue
        # the first of a class, then every + phase ops later, then one in every;
        # and an op that comes more than 1 ms after its communicator's previous one
        is_sample = every and (n == 0 or (n >= every and (n - phase[key]) % every == 0) or gap)
        want = "sampled" if is_sample else "discovered"
        assert o["times"] == want, (o["index"], o["op"], n, o["times"], want)
        gpu = o["gpu_start_ns"] is not None and o["gpu_end_ns"] is not None
        assert gpu == (want == "sampled"), (o["index"], o["gpu_start_ns"], o["gpu_end_ns"])
        assert o["seen_end_ns"], o["index"]
        counts[want] += 1
assert counts["discovered"] and (counts["sampled"] or not every), counts
print("%(sampled)d sampled, %(discovered)d discovered" % counts)
PY
    then
        pass "NCCLGUARD_TIMING_SAMPLE=$every: $(cat "$TMP/sample$every/check")"
    else
        fail "timing samples ($every)" "rc=$rc $(tail -n 2 "$TMP/sample$every/check")"
        show sample$every
    fi
done

# --- more shapes: threads, nonblocking, graphs, async errors ----------------------------------
NCCLGUARD_DUMP_AT_EXIT=1 job threads -n 2 --timeout 300 -- --steps 10 --threads 8 --quiet
# The ring has room for every op, so no thread may go without an event pair: the
# summary would count ops "without GPU marker", and a warning name the pool.
if [ $rc -eq 0 ] && $CHECK completed "$TMP/threads/dumps" 2 >"$TMP/threads/check" &&
    [ "$(grep -o '"comms"' -c "$TMP"/threads/dumps/*.json | head -n 1 | cut -d: -f2)" -ge 1 ] &&
    grep -q 'summary: .* 0 records overwritten' "$TMP/threads/out" &&
    ! grep -q 'without GPU marker\|CUDA event pairs of a context are in use' "$TMP/threads/out"
then
    pass "8 threads with 8 communicators, every op tracked: $(cat "$TMP/threads/check")"
else
    fail "8 threads" "rc=$rc $(cat "$TMP/threads/check")"; show threads
fi

# Nonblocking ops answer ncclSuccess or ncclInProgress by timing; FAKENCCL_NB_SEED mixes
# both, the same way per seed. NB_SEEDS lists the runs ("none": the variable unset).
for seed in ${NB_SEEDS:-none 3}; do
    name=nonblocking-$seed nb_seed=$seed
    [ "$seed" = none ] && nb_seed= # empty reads as unset
    FAKENCCL_NB_SEED=$nb_seed NCCLGUARD_DUMP_AT_EXIT=1 job $name -n 4 --timeout 300 -- \
        --steps 10 --nonblocking --quiet
    if [ $rc -eq 0 ] && $CHECK completed "$TMP/$name/dumps" 4 >"$TMP/$name/check"; then
        pass "nonblocking communicators (seed $seed): $(cat "$TMP/$name/check")"
    else
        fail "nonblocking (seed $seed)" "rc=$rc $(cat "$TMP/$name/check")"; show $name
    fi
done

NCCLGUARD_POLL_MS=1 NCCLGUARD_DUMP_AT_EXIT=1 job graph -n 2 --timeout 300 -- --steps 10 --graph --quiet
captured=$(python3 -c 'import glob,json,sys
print(min(sum(o["state"]=="captured" for o in json.load(open(p))["ops"]) for p in glob.glob(sys.argv[1]+"/*.json")))' \
    "$TMP/graph/dumps" 2>/dev/null)
if [ $rc -eq 0 ] && [ "${captured:-0}" -gt 0 ]; then
    pass "capture + graph launch while the watchdog polls every 1 ms: $captured ops captured, no capture invalidated"
else
    fail "graph capture" "rc=$rc captured=${captured:-none}"; show graph
fi

FAKENCCL_ASYNC_ERROR_AFTER=20 FAKENCCL_ASYNC_ERROR_RANK=0 \
    job asyncerr -n 2 --timeout 60 -- --steps 20 --quiet
if grep -q 'ncclguard: \[rank 0 .*async error on comm' "$TMP/asyncerr/out"; then
    pass "an injected async error is reported"
else
    fail "async error" "rc=$rc"; show asyncerr
fi

# --- a communicator creation that never finishes ------------------------------------------
mkdir -p "$TMP/init"
(cd "$TMP/init" && NCCLGUARD_INIT_TIMEOUT=1 NCCLGUARD_DUMP_DIR=$TMP/init/dumps \
    under_shim timeout 8 "$E2E/stuck_init" >"$TMP/init/out" 2>&1)
state=$(python3 -c 'import glob,json,sys
d=[json.load(open(p)) for p in glob.glob(sys.argv[1]+"/*.json")]
print(d[0]["reason"], d[0]["comms"][0]["state"], d[0]["comms"][0]["nranks"])' "$TMP/init/dumps" 2>/dev/null)
if grep -q 'ncclguard: .*communicator .* still being created after' "$TMP/init/out" &&
    [ "$state" = "init_timeout initializing 2" ]; then
    pass "a stuck ncclCommInitRank is reported and dumped (init_timeout, comm initializing)"
else
    fail "init timeout" "state=$state"; tail -n 5 "$TMP/init/out"
fi

# --- SIGTERM while the communicator is being created: a dump (reason sigterm) -------------
# (the init timeout far off, so that only SIGTERM can dump). SIGTERM goes once the
# program says it calls ncclCommInitRank, and half a second more: a fixed delay from
# the start lost the race to a slow start under a sanitizer on a loaded machine.
mkdir -p "$TMP/initterm"
(cd "$TMP/initterm" && NCCLGUARD_INIT_TIMEOUT=600 NCCLGUARD_DUMP_DIR=$TMP/initterm/dumps \
    LD_PRELOAD=$(preload) LD_LIBRARY_PATH=$FAKES${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    exec "$E2E/stuck_init" >"$TMP/initterm/out" 2>&1) &
pid=$!
wait_for 60 grep -q 'stuck_init: creating' "$TMP/initterm/out" && sleep 0.5
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
state=$(python3 -c 'import glob,json,sys
d=[json.load(open(p)) for p in glob.glob(sys.argv[1]+"/*.json")]
print(len(d), d[0]["reason"], d[0]["comms"][0]["state"])' "$TMP/initterm/dumps" 2>/dev/null)
if [ "$state" = "1 sigterm initializing" ] && [ $rc = 143 ]; then
    pass "SIGTERM in ncclCommInitRank: a dump (sigterm, comm initializing), then SIGTERM's end"
else
    fail "SIGTERM in init" "rc=$rc state=$state"; tail -n 5 "$TMP/initterm/out"
fi

# --- two threads in op calls on one blocking communicator at once: said once ----------------
# NCCL leaves it undefined (one thread at a time per communicator); the shim sees both
# calls. One thread's call stays inside (its stream held, a launch queue of one item)
# while the main thread calls on the same communicator: one line. The same calls one
# after the other: none.
for how in overlap serial; do
    FAKECUDA_QUEUE_DEPTH=1 under_shim timeout 60 "$E2E/two_threads" $how >"$TMP/two-$how.out" 2>&1
    eval "rc_$how=$?"
done
n_overlap=$(grep -c 'ncclguard: .*two threads use communicator [0-9a-f]* at once (another thread.s collective was enqueued while thread [0-9]* was inside ncclAllReduce' "$TMP/two-overlap.out")
if [ "$rc_overlap" = 0 ] && [ "$rc_serial" = 0 ] && [ "$n_overlap" = 1 ] &&
    ! grep -q 'at once' "$TMP/two-serial.out"; then
    pass "two threads on one blocking communicator at once: one line; one after the other: none"
else
    fail "two threads on one communicator" "rc=$rc_overlap/$rc_serial lines=$n_overlap $(cat "$TMP/two-overlap.out" "$TMP/two-serial.out")"
fi

# --- the ring overflows: drops counted -----------------------------------------------------
NCCLGUARD_RING=64 NCCLGUARD_DUMP_AT_EXIT=1 job ring -n 2 --timeout 300 -- --steps 20 --quiet
if [ $rc -eq 0 ] && $CHECK flight "$TMP/ring/dumps" 64 >"$TMP/ring/check"; then
    pass "ring of 64 records: $(cat "$TMP/ring/check")"
else
    fail "ring overflow" "rc=$rc $(cat "$TMP/ring/check")"; show ring
fi

# --- records overwritten in flight give their CUDA events back ---------------------------
# The stream is held while 200 ops go through a ring of 16; the 40 ops after
# the release get markers again, so the watchdog sees them complete (every op a
# timing sample, so that the timed pairs must come back too).
mkdir -p "$TMP/wrap"
(cd "$TMP/wrap" && NCCLGUARD_RING=16 NCCLGUARD_POLL_MS=10 NCCLGUARD_DUMP_AT_EXIT=1 \
    NCCLGUARD_TIMING_SAMPLE=1 NCCLGUARD_DUMP_DIR=$TMP/wrap/dumps \
    under_shim "$E2E/ring_wrap" 200 40 >"$TMP/wrap/out" 2>&1)
rc=$?
if [ $rc -eq 0 ] && python3 - "$TMP"/wrap/dumps/*.json >"$TMP/wrap/check" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ops = d["ops"]
assert d["flight"]["dropped_inflight"] > 0, d["flight"]
assert len(ops) == 16 and min(o["seq"] for o in ops) > 200, [o["seq"] for o in ops]
bad = [(o["seq"], o["state"]) for o in ops if o["state"] != "completed" or not o["gpu_end_ns"]]
assert not bad, bad
print("%d dropped in flight; the last 16 ops completed" % d["flight"]["dropped_inflight"])
PY
then
    pass "ring wrap with the stream held: $(cat "$TMP/wrap/check")"
else
    fail "ring wrap gives events back" "rc=$rc $(tail -n 3 "$TMP/wrap/check" 2>/dev/null)"
    tail -n 5 "$TMP/wrap/out"
fi

# --- strings that the job or the policy controls, with bytes that are not UTF-8 ----------
# Job id, paths of the dump directory, the event log, the log and the config file, and
# the policy's values, reasons and previous values: the dump stays valid UTF-8 JSON (a
# strict decoder reads it) and each bad byte becomes U+FFFD. Only the ranks are
# preloaded, so that each applies the policy to the variables as they were set.
raw=$TMP/raw
mkdir -p "$raw"
site=$raw/$'site\xff.conf'
printf '[env.default]\nNCCL_NG_TEST_DEFAULT = "v\xffd"\n[env.forbid]\nNCCL_NG_TEST_FORBID = "reason \xff"\n' >"$site"
(cd "$raw" && SLURM_JOB_ID=$'j\xffob' NCCLGUARD_TEST_SITE_CONFIG=$site NCCL_NG_TEST_FORBID=$'was\xff' \
    NCCLGUARD_EVENTS=$raw/$'ev\xff.jsonl' NCCLGUARD_LOG=$raw/$'log\xff.txt' NCCLGUARD_DUMP_AT_EXIT=1 \
    NCCLGUARD_DUMP_DIR=$raw/$'dumps\xff' with_fakes "$LAUNCH" -n 2 --timeout 120 \
    -- env LD_PRELOAD="$(preload)" "$TRAIN" --steps 3 --quiet >"$raw/out" 2>&1)
rc=$?
if [ $rc -eq 0 ] && python3 - "$raw" >"$raw/check" 2>&1 <<'PY'
import glob, json, os, sys
root = sys.argv[1].encode()
dumps = glob.glob(os.path.join(root, b"dumps\xff", b"*.json"))
assert len(dumps) == 2, dumps
for path in dumps:
    with open(path, "rb") as f:
        d = json.loads(f.read().decode("utf-8"))  # strict: raises on a bad byte
    assert d["job"] == "j\ufffdob", d["job"]
    st = d["config"]["settings"]
    for key, leaf in (("dump_dir", "dumps"), ("events", "ev"), ("log", "log")):
        assert st[key]["value"].endswith("/" + leaf + "\ufffd" + ("" if key == "dump_dir" else
               ".jsonl" if key == "events" else ".txt")), st[key]
    src = d["config"]["sources"][0]
    assert src["path"].endswith("/site\ufffd.conf") and src["status"] == "loaded", src
    env = {e["name"]: e for e in d["config"]["env"]}
    assert env["NCCL_NG_TEST_DEFAULT"]["value"] == "v\ufffdd", env
    assert env["NCCL_NG_TEST_FORBID"]["reason"] == "reason \ufffd", env
    assert env["NCCL_NG_TEST_FORBID"]["was"] == "was\ufffd", env
    assert env["NCCL_NG_TEST_FORBID"]["origin"].endswith("/site\ufffd.conf:4"), env
print("2 dumps, every string valid UTF-8")
PY
then
    pass "non-UTF-8 bytes in job id, paths and policy values: $(cat "$raw/check")"
else
    fail "non-UTF-8 strings in the dump" "rc=$rc $(tail -n 3 "$raw/check")"; tail -n 5 "$raw/out"
fi

# --- ncclGroupSimulateEnd ends the group --------------------------------------------------
# On a blocking communicator it runs nothing; the five AllReduce after it are
# plain ops, each with its own marker, followed to completion.
mkdir -p "$TMP/gsim"
(cd "$TMP/gsim" && NCCLGUARD_DUMP_AT_EXIT=1 NCCLGUARD_DUMP_DIR=$TMP/gsim/dumps \
    under_shim "$E2E/group_sim" 5 >"$TMP/gsim/out" 2>&1)
rc=$?
if [ $rc -eq 0 ] && python3 - "$TMP"/gsim/dumps/*.json >"$TMP/gsim/check" 2>&1 <<'PY'
import json, sys
ops = sorted(json.load(open(sys.argv[1]))["ops"], key=lambda o: o["seq"])
assert len(ops) == 6, len(ops)
sim, plain = ops[0], ops[1:]
assert sim["group"] and sim["state"] == "failed", sim
bad = [(o["seq"], o["state"], o["group"]) for o in plain
       if o["group"] or o["state"] != "completed" or o["marker"] is None]
assert not bad, bad
print("the simulated op ended, the 5 after it completed with their own markers")
PY
then
    pass "ncclGroupSimulateEnd: $(cat "$TMP/gsim/check")"
else
    fail "ncclGroupSimulateEnd ends the group" "rc=$rc $(tail -n 2 "$TMP/gsim/check")"
fi

# --- the legacy stream while a blocking stream captures -----------------------------------
# cuStreamIsCapturing(NULL) answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT then; an event
# recorded on the legacy stream would invalidate the capture, so the op gets no marker.
FAKENCCL_NOOP=1 under_shim "$E2E/capture_implicit" >"$TMP/implicit.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '1 without GPU marker' "$TMP/implicit.out"; then
    pass "an op on the legacy stream during another stream's capture leaves the capture valid"
else
    fail "capture on a blocking stream, op on the legacy stream" "rc=$rc"; tail -n 3 "$TMP/implicit.out"
fi

# --- a communicator destroyed while another thread captures ------------------------------
# The settle before the destroy queries markers on the application's thread: in
# relaxed capture mode, so that the other thread's global-mode capture stays valid.
NCCLGUARD_POLL_MS=60000 under_shim "$E2E/capture_destroy" >"$TMP/cdestroy.out" 2>&1
rc=$?
if [ $rc -eq 0 ]; then
    pass "ncclCommDestroy during another thread's global-mode capture leaves the capture valid"
else
    fail "destroy during a capture" "rc=$rc"; tail -n 3 "$TMP/cdestroy.out"
fi

# --- a pipeline's broken link: a Send/Recv group that starts and never ends ---------------
# The ops of a group on one stream share its marker, and so its state: both the Send
# and the Recv are started, not only the first one.
mkdir -p "$TMP/ghang"
(cd "$TMP/ghang" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_POLL_MS=20 \
    NCCLGUARD_DUMP_DIR=$TMP/ghang/dumps under_shim "$E2E/group_hang" 3 >"$TMP/ghang/out" 2>&1)
if python3 - "$TMP"/ghang/dumps/*.json >"$TMP/ghang/check" 2>&1 <<'PY'
import json, sys
ops = json.load(open(sys.argv[1]))["ops"]
assert sorted(o["op"] for o in ops) == ["Recv", "Send"], ops
assert len({o["group"] for o in ops}) == 1 and ops[0]["group"], ops
bad = [(o["op"], o["state"]) for o in ops if o["state"] != "started"]
assert not bad, bad
print("Send and Recv of the group both started")
PY
then
    pass "a hung Send/Recv group: $(cat "$TMP/ghang/check")"
else
    fail "Send/Recv group state" "$(tail -n 2 "$TMP/ghang/check")"; tail -n 3 "$TMP/ghang/out"
fi

# --- the primary context released and retained again, three times ------------------------
# The event pool of the old context is dead (its events answer with an error): a new
# one is made, every op gets a marker, nothing times out, and kill_at kills nobody.
NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_KILL_AT=2 NCCLGUARD_POLL_MS=20 \
    NCCLGUARD_DUMP_DIR=$TMP/ctxcycle under_shim "$E2E/ctx_cycle" 3 >"$TMP/ctxcycle.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && ! grep -q 'in flight\|ending the process\|without GPU marker' "$TMP/ctxcycle.out" &&
    grep -q 'summary: 3 communicators, 30 ops' "$TMP/ctxcycle.out"; then
    pass "context released and retained 3 times: every op followed, no timeout, no kill"
else
    fail "context re-retain" "rc=$rc"; grep ncclguard "$TMP/ctxcycle.out" | tail -n 3
fi

# --- a healthy job with host jitter: no slow-op line ---------------------------------------
# 0-15 ms of host jitter per step and a 40 ms pause of one rank every tenth step make the
# other ranks wait in NCCL; one rank cannot tell that from its own slowness, so the
# factor rule needs a lasting change (6 of a class's last 8 samples), not a wait.
job jitter -n 4 --timeout 300 -- --steps 100 --jitter-ms 15 --pause-ms 40 --quiet
if [ $rc -eq 0 ] && ! grep -q 'ncclguard: .*slow ' "$TMP/jitter/out"; then
    pass "healthy job with host jitter and pauses: no slow-op line (default slow rule)"
else
    fail "jittery healthy job" "rc=$rc $(grep -c 'slow ' "$TMP/jitter/out") slow lines"
    grep 'slow ' "$TMP/jitter/out" | head -n 3
fi

# --- the observer stuck in CUDA: escalation goes on ----------------------------------------
# With one hardware queue for every stream (FAKECUDA_MAX_CONNECTIONS=1), a stalled stream
# holds up the observer's clock anchor (an event record and synchronize on a stream of its
# own, every 200 ms here): the observer blocks in cuEventSynchronize for good. The enforcer,
# which never calls CUDA, still reports the timeout, says the observer is stuck, writes the
# dump and carries out kill_at.
FAKECUDA_MAX_CONNECTIONS=1 NCCLGUARD_TEST_ANCHOR_MS=200 NCCLGUARD_TIMEOUT=1 \
    NCCLGUARD_FIRST_TIMEOUT=30 NCCLGUARD_KILL_AT=8 NCCLGUARD_POLL_MS=50 \
    job stuckobs -n 1 --timeout 60 -- --steps 30 --stall-gpu-rank 0 --stall-step 2 --quiet
if grep -q "observer has been inside a CUDA or NCCL call" "$TMP/stuckobs/out" &&
    grep -q 'ncclguard: .*in flight .*not started on GPU' "$TMP/stuckobs/out" &&
    grep -q 'ending the process with status 124' "$TMP/stuckobs/out" &&
    [ "$(ls "$TMP/stuckobs/dumps" 2>/dev/null | wc -l)" -ge 1 ]; then
    pass "observer stuck in cuEventSynchronize: timeout, dump and kill still happen (rc=$rc)"
else
    fail "observer stuck in CUDA" "rc=$rc"; show stuckobs
fi

# --- the observer never calls into a nonblocking communicator beside the application -------
# NCCL lets one thread at a time operate a communicator (on a nonblocking one,
# ncclCommGetAsyncError frees the pending group job without atomics); the fake NCCL reports
# any overlap. The observer polls every 1 ms here, beside 4 ranks x 2 communicators.
NCCLGUARD_POLL_MS=1 job nbpoll -n 4 --timeout 300 -- --steps 30 --nonblocking --quiet
if [ $rc -eq 0 ] && ! grep -q 'while another thread is inside' "$TMP/nbpoll/out"; then
    pass "nonblocking communicators polled every 1 ms: no call overlaps an application call"
else
    fail "observer and application inside one nonblocking communicator" "rc=$rc"
    grep 'while another thread is inside' "$TMP/nbpoll/out" | head -n 2
fi

# --- one communicator, two streams: NCCL runs its kernels one after another ---------------
# s1 is held; an AllReduce goes on s1, the next one on s2. The one on s2 waits for the
# one on s1 (NCCL's internal stream), so it is not started, although its start marker on
# s2 passed; the timeout line names the op on s1, the one in the way.
mkdir -p "$TMP/twostreams"
(cd "$TMP/twostreams" && NCCLGUARD_TIMEOUT=1 NCCLGUARD_FIRST_TIMEOUT=1 NCCLGUARD_POLL_MS=20 \
    NCCLGUARD_DUMP_DIR=$TMP/twostreams/dumps under_shim "$E2E/two_streams" 3 \
    >"$TMP/twostreams/out" 2>&1)
if grep -q 'ncclguard: .*AllReduce #1 on comm .*not started on GPU (1 more ops queued behind it)' \
        "$TMP/twostreams/out" && python3 - "$TMP"/twostreams/dumps/*.json >"$TMP/twostreams/check" \
        2>&1 <<'PY'
import json, sys
ops = {o["seq"]: o for o in json.load(open(sys.argv[1]))["ops"]}
assert ops[1]["stream"] != ops[2]["stream"], ops
assert ops[1]["state"] == "scheduled" and ops[2]["state"] == "scheduled", \
    [(s, o["state"]) for s, o in ops.items()]
print("the op on s2 waits, not started, behind the op on s1")
PY
then
    pass "one communicator on two streams: $(cat "$TMP/twostreams/check")"
else
    fail "one communicator, two streams" "$(tail -n 2 "$TMP/twostreams/check")"
    tail -n 3 "$TMP/twostreams/out"
fi

# --- ncclCommInitAll: one process, two devices, the ops of both followed ----------------
# The communicators run in each device's primary context, which the current one is
# for device 0 only; the watchdog's poll is far off, so that only the pools made at
# creation can give markers.
mkdir -p "$TMP/initall"
(cd "$TMP/initall" && FAKECUDA_DEVICES=2 NCCLGUARD_POLL_MS=60000 NCCLGUARD_DUMP_AT_EXIT=1 \
    NCCLGUARD_DUMP_DIR=$TMP/initall/dumps under_shim "$E2E/init_all" 4 >"$TMP/initall/out" 2>&1)
if grep -q 'init_all: done' "$TMP/initall/out" &&
    python3 - "$TMP"/initall/dumps/*.json >"$TMP/initall/check" 2>&1 <<'PY'
import json, sys
ops = json.load(open(sys.argv[1]))["ops"]
states = sorted((o["comm_rank"], o["seq"], o["state"]) for o in ops)
assert len(ops) == 8 and all(s == "completed" for _, _, s in states), states
print("8 AllReduce ops on 2 devices, all completed")
PY
then
    pass "ncclCommInitAll on two devices: $(cat "$TMP/initall/check")"
else
    fail "ncclCommInitAll on two devices" "$(tail -n 2 "$TMP/initall/check") $(tail -n 1 "$TMP/initall/out")"
fi

dumps_sane
finish

#!/usr/bin/env bash
# tests/gpu/torch.sh: a real PyTorch job with ProcessGroupNCCL on this machine's GPUs,
# under the shim (LD_PRELOAD, as tests/torch/binding.sh preloads it), with the NCCL that
# torch's wheel ships and the real CUDA driver. tests/gpu/run.sh runs it; B names the
# build folder (build). World size = the number of GPUs torch sees (one rank per GPU).
#  - healthy: tests/gpu/torch_job.py without and with the shim: the same result bytes;
#    with NCCLGUARD_DUMP_AT_EXIT=1 and NCCLGUARD_TIMING_SAMPLE=1 every rank's exit
#    dump holds the communicator (nranks = world size) and the job's AllReduce,
#    AllGather and Broadcast, every op completed with GPU start and end times;
#    `ncclguard analyze` calls it healthy.
#  - hang gpu (any world size): rank 0's current stream spins in a kernel before an
#    all_reduce, so its NCCL stream never starts the op: the shim's 2 s timeout
#    dumps every rank; rank 0's op is scheduled (the ops before it completed);
#    `ncclguard analyze` names rank 0, gpu_not_started, at any world size.
#  - hang host (world size 2 or more): rank 0 stops in load_batch before the
#    all_reduce; `ncclguard analyze` names rank 0, missing, and its dump (from the
#    cross-rank trigger) shows load_batch in its Python stack.
# Skips with one line when the venv of scripts/install-deps --torch is absent, or
# when torch sees no GPU.
source "$(dirname "$0")/../e2e/lib.sh"
NG=$ROOT/$B/ncclguard
JOB=$ROOT/tests/gpu/torch_job.py
TORCH_PY=${NCCLGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ncclguard}/torch-venv/bin/python
if [ ! -x "$TORCH_PY" ]; then
    skip "torch" "no PyTorch environment at $TORCH_PY (tests/gpu/README.md: install or copy it)"
    finish; exit
fi
if [ ! -e "$SHIM" ] || [ ! -x "$NG" ]; then
    fail "torch" "$SHIM or $NG not built"; finish; exit
fi
world=$("$TORCH_PY" -c 'import torch; print(torch.cuda.device_count())' 2>"$TMP/probe")
case $world in
'' | *[!0-9]* | 0)
    "$TORCH_PY" -c 'import torch; print("torch", torch.__version__, "for CUDA", torch.version.cuda)' \
        >"$TMP/version" 2>&1
    tail -n 1 "$TMP/probe" >>"$TMP/version"
    skip "torch" "torch sees no GPU: $(grep . "$TMP/version" | tr '\n' ' ' | cut -c1-300)"
    finish; exit ;;
esac
echo "torch: world size $world (one rank per GPU)"
export NCCLGUARD_NODE_DIR=$TMP/node # the cross-rank fan-out file stays in $TMP
mkdir -p "$NCCLGUARD_NODE_DIR"

# run NAME PRELOAD JOB_ARGS...: torchrun of the job in $TMP/NAME (dumps in dumps/, results
# and the output in NAME/out); sets $rc
run() {
    local name=$1 pre=$2 d=$TMP/$1
    shift 2
    mkdir -p "$d/dumps"
    (cd "$d" && NCCLGUARD_DUMP_DIR=$d/dumps LD_PRELOAD=$pre timeout 300 "$TORCH_PY" \
        -m torch.distributed.run --standalone --nproc-per-node "$world" "$JOB" --out "$d" \
        --dumps "$d/dumps" "$@" >"$d/out" 2>&1)
    rc=$?
}

# --- healthy: the same results with and without the shim; the shim saw every op ---
run plain ""
plain_rc=$rc
NCCLGUARD_DUMP_AT_EXIT=1 NCCLGUARD_TIMING_SAMPLE=1 run shim "$(preload)"
if [ $plain_rc = 0 ] && [ $rc = 0 ] && [ "$(ls "$TMP"/plain/result-r*.txt | wc -l)" = "$world" ] &&
    (cd "$TMP" && for f in plain/result-r*.txt; do cmp -s "$f" "shim/${f#plain/}" || exit 1; done)
then
    pass "healthy: $world rank(s), the same $(cat "$TMP"/plain/result-r*.txt | wc -l) results with and without the shim ($(grep -ho 'torch [^)]*' "$TMP/shim/out" | head -n 1))"
else
    fail "healthy: the results" "exit $plain_rc without the shim, $rc with; $(tail -n 4 "$TMP/shim/out" | tr '\n' ' ' | cut -c1-400)"
fi
if out=$($CHECK schema "$TMP"/shim/dumps/ncclguard-r*.json 2>&1) &&
    out=$($CHECK completed "$TMP/shim/dumps" "$world" 2>&1); then
    pass "healthy: every rank's exit dump is valid, every op completed"
else
    fail "healthy: the dumps" "$(echo "$out" | head -n 3 | tr '\n' ' ')"
fi
if out=$(python3 - "$world" "$TMP"/shim/dumps/ncclguard-r*.json <<'PY' 2>&1
import json, sys
world, files = int(sys.argv[1]), sys.argv[2:]
assert len(files) == world, "%d dumps for %d ranks" % (len(files), world)
counts = {}
for f in files:
    d = json.load(open(f))
    assert any(c["nranks"] == world for c in d["comms"]), (f, d["comms"])
    for o in d["ops"]:
        counts[o["op"]] = counts.get(o["op"], 0) + 1
        assert o["state"] == "completed", (f, o)
        assert o["times"] == "sampled" and 0 < o["gpu_start_ns"] <= o["gpu_end_ns"], (f, o)
for op in ("AllReduce", "AllGather", "Broadcast"):
    assert counts.get(op), "no %s in the dumps: %s" % (op, counts)
print(", ".join("%d %s" % (n, op) for op, n in sorted(counts.items())))
PY
); then
    pass "healthy: the shim saw the communicator and $out, each with GPU start and end times"
else
    fail "healthy: what the shim saw" "$(echo "$out" | tail -n 2 | tr '\n' ' ' | cut -c1-400)"
fi
"$NG" analyze "$TMP/shim/dumps" >"$TMP/shim.verdict" 2>&1
rc=$?
if [ $rc = 0 ]; then
    pass "healthy: ncclguard analyze: $(head -n 1 "$TMP/shim.verdict" | cut -c1-120)"
else
    fail "healthy: ncclguard analyze" "exit $rc: $(head -n 2 "$TMP/shim.verdict" | tr '\n' ' ')"
fi

# hang NAME WANT: run --hang NAME under the shim (2 s timeout) and analyze its dumps; WANT is
# the culprit as RANK:CAUSE (analyze exits 1), or "stuck": ops are stuck and no culprit is
# named (analyze exits 2)
hang() {
    local name=$1 want=$2 d=$TMP/hang-$1 want_rc=1
    NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600 run "hang-$name" "$(preload)" \
        --hang "$name" --hang-step 4
    local jrc=$rc
    "$NG" analyze --json "$d/dumps" >"$d/verdict.json" 2>/dev/null
    rc=$?
    "$NG" analyze "$d/dumps" >"$d/verdict.txt" 2>&1
    local got
    got=$(python3 -c 'import json, sys
print(" ".join("%d:%s" % (c["rank"], c["cause"])
               for c in json.load(open(sys.argv[1]))["verdict"]["culprits"]))' \
        "$d/verdict.json" 2>/dev/null)
    [ "$want" = stuck ] && want_rc=2 && want=""
    if [ $jrc = 0 ] && [ $rc = $want_rc ] && [ "$got" = "$want" ]; then
        pass "hang $name: every rank dumped; $(head -n 1 "$d/verdict.txt" | cut -c1-200)"
    else
        fail "hang $name" "job exit $jrc, analyze exit $rc, culprits '$got' (want '$want', exit $want_rc): $(head -n 2 "$d/verdict.txt" | tr '\n' ' ' | cut -c1-300); $(tail -n 3 "$d/out" | tr '\n' ' ' | cut -c1-300)"
    fi
}

# With one rank there is no peer that started the op: analyze names the rank whose op
# timed out before its GPU started it (cli/analyze/hang.c, a communicator of one rank).
hang gpu 0:gpu_not_started
if out=$(python3 - "$TMP"/hang-gpu/dumps/ncclguard-r0-*.json <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["reason"] == "timeout", d["reason"]
ar = sorted((o for o in d["ops"] if o["op"] == "AllReduce"), key=lambda o: o["seq"] or 0)
stuck = [o for o in ar if o["state"] != "completed"]
assert stuck and stuck[0]["state"] == "scheduled", [(o["seq"], o["state"]) for o in ar]
done = [o for o in ar if o["state"] == "completed"]
assert len(done) >= 4 and all(o["gpu_end_ns"] or o["seen_end_ns"] for o in done), done
print("AllReduce #%s scheduled after %d completed" % (stuck[0]["seq"], len(done)))
PY
); then
    pass "hang gpu: rank 0's dump (reason timeout): $out"
else
    fail "hang gpu: rank 0's dump" "$(echo "$out" | tail -n 2 | tr '\n' ' ' | cut -c1-400)"
fi

if [ "$world" -ge 2 ]; then
    hang host 0:missing
    if out=$(python3 - "$TMP"/hang-host/dumps/ncclguard-r0-*.json <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
fns = [f["function"] for t in (d["python"] or {}).get("threads", []) for f in t["frames"]]
assert "load_batch" in fns, "reason %s, Python functions %s" % (d["reason"], sorted(set(fns)))
PY
    ); then
        pass "hang host: rank 0's dump shows load_batch in its Python stack"
    else
        fail "hang host: rank 0's Python stack" "$(echo "$out" | tail -n 1 | cut -c1-300)"
    fi
else
    skip "hang host" "needs 2 GPUs (a peer that waits); this machine has 1"
fi
dumps_sane
finish

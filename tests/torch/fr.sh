#!/usr/bin/env bash
# PyTorch's own Flight Recorder dumps read by ncclguard: a 4-rank CPU job (Gloo
# records FR natively) in which
#  (a) rank 2 stops in a Python function before the 4th all_reduce while the
#      others wait in it: each rank writes torch's dump (_dump_fr_trace) to
#      hang/fr_trace_rank_<rank>, the waiting ones right after enqueueing it, rank 2
#      from a thread while it sleeps;
#  (b) then rank 1 all-reduces a bfloat16 tensor (of the same bytes) where the
#      others all-reduce float32: each rank dumps to mismatch/ afterwards.
# ncclguard must name rank 2 (never called the op) and rank 1 (a mismatch), read
# every entry as pickle.load reads it, and refuse a pickle that would run code.
# torchfrtrace's answer for the same dumps is printed beside ncclguard's.
TORCH_ANY_BUILD=1 # no preload: the reader is checked on the sanitizer build too
source "$(dirname "$0")/lib.sh"
NG=$ROOT/$B/ncclguard
FRTRACE=$(dirname "$TORCH_PY")/torchfrtrace
d=$TMP/fr
mkdir -p "$d/hang" "$d/mismatch"

cat >"$d/job.py" <<'PY'
import os, pickle, sys, threading, time
import torch
import torch.distributed as dist

rank, world, out = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), sys.argv[1]
dist.init_process_group("gloo", rank=rank, world_size=world)
deadline = time.monotonic() + 240

def dump(phase):
    data = torch._C._distributed_c10d._dump_fr_trace()
    tmp = f"{out}/{phase}/.part{rank}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, f"{out}/{phase}/fr_trace_rank_{rank}")

def dumped(phase):
    return sum(os.path.exists(f"{out}/{phase}/fr_trace_rank_{r}") for r in range(world))

def until(cond):
    while not cond():
        if time.monotonic() > deadline:
            os._exit(3)
        time.sleep(0.05)

def settled():
    # torch retires an entry a moment after its collective returns: until then
    # a dump shows a finished collective in flight
    fr = pickle.loads(torch._C._distributed_c10d._dump_fr_trace())
    return all(e["retired"] for e in fr["entries"])

x = torch.ones(1024)
for _ in range(3):
    dist.all_reduce(x)
until(settled)

def load_batch():  # rank 2's hang: it sleeps here until every rank has dumped
    until(lambda: dumped("hang") == world)

if rank == 2:
    def later():
        until(lambda: dumped("hang") == world - 1)
        dump("hang")
    threading.Thread(target=later, daemon=True).start()
    load_batch()
work = dist.all_reduce(x, async_op=True)
if rank != 2:
    dump("hang")  # the op is in flight: rank 2 has not called it
work.wait()

y = torch.ones(2048, dtype=torch.bfloat16) if rank == 1 else torch.ones(1024)
dist.all_reduce(y)
dist.all_reduce(x)
until(settled)
dump("mismatch")
sys.stdout.flush()
os._exit(0)
PY

port=$("$TORCH_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
pids=()
for r in 0 1 2 3; do
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=4 TORCH_FR_BUFFER_SIZE=2000 \
        timeout 300 "$TORCH_PY" "$d/job.py" "$d" >"$d/rank$r.log" 2>&1 &
    pids+=($!)
done
rcs=""
for p in "${pids[@]}"; do wait "$p"; rcs="$rcs $?"; done
if [ "$rcs" != " 0 0 0 0" ] || [ "$(ls "$d/hang" | wc -l)" != 4 ] ||
    [ "$(ls "$d/mismatch" | wc -l)" != 4 ]; then
    fail "the FR job" "exit statuses$rcs; $(tail -n 3 "$d"/rank*.log | tr '\n' ' ' | cut -c1-400)"
    finish
    exit 1
fi
pass "a 4-rank Gloo job wrote torch's FR dumps ($(head -c 5 "$d/hang/fr_trace_rank_0" |
    od -An -tx1 | tr -s ' ' | cut -c1-9)... version $("$TORCH_PY" -c 'import pickle, sys
print(pickle.load(open(sys.argv[1], "rb"))["version"])' "$d/hang/fr_trace_rank_0"))"

side_by_side() { # DIR: ncclguard's verdict, then torchfrtrace's answer
    echo "---- ncclguard analyze $1"
    "$NG" analyze "$1" | sed 's/^/  | /'
    echo "---- torchfrtrace $1"
    if [ -x "$FRTRACE" ]; then
        timeout 120 "$FRTRACE" "$1" >"$1.frtrace" 2>&1
        grep -v 'tabulate is not installed' "$1.frtrace" | tail -n 12 | sed 's/^/  | /'
        # torch 2.15's Gloo files the members of every group under pg_config[""],
        # where torchfrtrace looks them up by the group's name
        if grep -q "^KeyError: ('" "$1.frtrace"; then
            echo "  (torchfrtrace cannot match these entries' groups to pg_config," \
                "whose only key is \"\")"
        fi
    else
        echo "  | (no torchfrtrace in the environment)"
    fi
}

# --- (a) the rank that never called the op ---
side_by_side "$d/hang"
out=$("$NG" analyze "$d/hang" 2>&1)
rc=$?
if [ $rc = 1 ] && echo "$out" | head -n 1 |
    grep -qE '^culprit: rank 2 \(.*fr_trace_rank_2\): never called AllReduce #4 on comm'; then
    pass "FR hang: ncclguard names rank 2, which never called AllReduce #4"
else
    fail "FR hang" "exit $rc: $(echo "$out" | head -n 3 | tr '\n' ' ')"
fi

# --- (b) the mismatched collective ---
side_by_side "$d/mismatch"
out=$("$NG" analyze "$d/mismatch" 2>&1)
rc=$?
if [ $rc = 1 ] && echo "$out" | head -n 1 | grep -qE '^culprit: rank 1 \(.*\): called #5 on comm '\
'[0-9a-f]+ as AllReduce count 2048 bfloat16; 3 other ranks as AllReduce count 1024 float32'; then
    pass "FR mismatch: ncclguard names rank 1 (2048 bfloat16 where the others reduced 1024 float32)"
else
    fail "FR mismatch" "exit $rc: $(echo "$out" | head -n 3 | tr '\n' ' ')"
fi
if "$NG" report "$d/mismatch" -o "$d/report.html" >/dev/null 2>&1; [ $? = 1 ] &&
    grep -q 'bfloat16' "$d/report.html"; then
    pass "report reads the FR dumps too"
else
    fail "report" "$(ls -la "$d/report.html" 2>&1)"
fi

# --- every entry as Python's pickle.load reads it ---
"$ROOT/$B/tests/unit/dumpread_echo" "$d"/hang/fr_trace_rank_* "$d"/mismatch/fr_trace_rank_* \
    >"$d/echo.jsonl"
if "$TORCH_PY" - "$d/echo.jsonl" "$d"/hang/fr_trace_rank_* "$d"/mismatch/fr_trace_rank_* \
    >"$d/compare" 2>&1 <<'PY'
import json, math, pickle, sys
names = {"Float": "float32", "BFloat16": "bfloat16"}
echo = [json.loads(line) for line in open(sys.argv[1])]
bad = 0
for got, path in zip(echo, sys.argv[2:]):
    fr = pickle.load(open(path, "rb"))
    rank = int(path.rsplit("_", 1)[1])
    want = sorted(((e["record_id"], e["collective_seq_id"], e["profiling_name"].split(":")[1],
                    sum(math.prod(s) for s in e["input_sizes"]), names[e["input_dtypes"][0]],
                    "completed" if e["retired"] else e["state"]) for e in fr["entries"]))
    ops = {"AllReduce": "all_reduce"}
    have = sorted((o["index"], o["seq"], ops.get(o["op"], o["op"]), o["count"], o["datatype"],
                   o["state"]) for o in got["ops"])
    ok = have == want and got["rank"] == rank and got["schema"] == "torch.fr/" + fr["version"]
    ok = ok and [c["rank"] for c in got["comms"]] == [rank] and got["comms"][0]["nranks"] == 4
    if not ok:
        bad += 1
        print(path, "read", have, got["rank"], got["comms"], "pickle", want)
print("files", len(echo), "differ", bad)
sys.exit(1 if bad or len(echo) != 8 else 0)
PY
then
    pass "the reader reads every entry of the 8 dumps as pickle.load does ($(tail -n 1 "$d/compare"))"
else
    fail "entries" "$(head -c 600 "$d/compare")"
fi

# --- a pickle that would run code is refused, with one line, and the rest is read ---
cp -r "$d/hang" "$d/evil"
"$TORCH_PY" - "$d/evil/fr_trace_rank_3" <<'PY'
import os, pickle, sys
class Evil:
    def __reduce__(self):
        return (os.system, ("echo ran >" + sys.argv[1] + ".ran",))
d = pickle.load(open(sys.argv[1], "rb"))
d["entries"][0]["frames"] = Evil()
open(sys.argv[1], "wb").write(pickle.dumps(d, protocol=2))
PY
out=$("$NG" analyze "$d/evil" 2>&1)
refusal='fr_trace_rank_3: Flight Recorder dump: opcode (GLOBAL|STACK_GLOBAL) \(0x[0-9a-f]+\): '
if echo "$out" | grep -qE "${refusal}pickle code is never run" &&
    [ ! -e "$d/evil/fr_trace_rank_3.ran" ]; then
    pass "a dump with a GLOBAL/REDUCE is refused in one line, and nothing of it runs"
else
    fail "hostile pickle" "$(echo "$out" | grep -n 'rank_3' | head -n 3 | tr '\n' ' ')"
fi
finish

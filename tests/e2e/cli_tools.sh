#!/usr/bin/env bash
# The ncclguard command's job tools, end to end: `run` (the library preloaded from
# beside the command), `dump` (by signal to the processes that have a communicator,
# or by the job's trigger file), `diagnose` (against fixture trees) and `trace` (a
# Chrome trace of real dumps). No timing thresholds: conditions are waited for with
# generous bounds.
source "$(dirname "$0")/lib.sh"
LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop
needs_harness "cli tools" "$TRAIN"

# The sanitizer runtime alone (empty in a plain build): what LD_PRELOAD holds before `run`.
SANRT=$(p=$(preload); [ "$p" = "$SHIM" ] && echo "" || echo "${p%:*}")
# ng_run ARGS...: `ncclguard run ARGS` with the fakes on the library path
ng_run() { LD_PRELOAD=$SANRT with_fakes "$NG" run "$@"; }
# one_line_usage NAME CMD...: CMD exits 64 with exactly one line on stderr, naming usage
one_line_usage() {
    local name=$1 out rc; shift
    out=$("$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 64 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [[ "$out" == *usage:* ]]
    then pass "$name: one-line usage error"
    else fail "$name" "rc=$rc out=$out"; fi
}
# dump_members DIR KEY: the distinct values of KEY in the dumps of DIR, sorted, one line
dump_members() { python3 -c 'import glob, json, sys
docs = [json.load(open(p)) for p in glob.glob(sys.argv[1] + "/*.json")]
print(" ".join(sorted({str(d[sys.argv[2]]) for d in docs})))' "$1" "$2"; }
ndumps() { find "$1" -maxdepth 1 -name 'ncclguard-r*.json' 2>/dev/null | wc -l; }
dumps_are() { [ "$(ndumps "$1")" -eq "$2" ]; }

# --- run ----------------------------------------------------------------------------------
J=$TMP/run
mkdir -p "$J"
(cd "$J" && NCCLGUARD_DUMP_AT_EXIT=1 ng_run --dump-dir dumps -- \
    "$LAUNCH" -n 2 --timeout 300 -- "$TRAIN" --steps 5 --quiet >"$J/out" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$(ndumps "$J/dumps")" -eq 2 ] && grep -q '^ncclguard: ' "$J/out" &&
    [ "$(dump_members "$J/dumps" reason)" = exit ]; then
    pass "run: a 2-rank launch job under run has the library (ncclguard: lines, 2 exit dumps in --dump-dir)"
else
    fail "run preloads the library" "rc=$rc dumps=$(ls "$J/dumps" 2>&1)"; tail -n 5 "$J/out"
fi
# The exit status is the command's, and the environment is what run promises.
ng_run -- sh -c 'exit 7'
check "run: the exit status is the command's (7)" [ $? -eq 7 ]
: >"$J/job.conf"
got=$(cd "$J" && LD_PRELOAD=${SANRT:+$SANRT:}/lib/x86_64-linux-gnu/libm.so.6 "$NG" run --config \
    job.conf -- sh -c 'echo "$LD_PRELOAD|$NCCLGUARD_CONFIG"' 2>/dev/null)
want="${SANRT:+$SANRT:}$SHIM:/lib/x86_64-linux-gnu/libm.so.6|$J/job.conf"
check "run: prepends the library to an existing LD_PRELOAD, sets NCCLGUARD_CONFIG (absolute)" \
    [ "$got" = "$want" ]
got=$(LD_PRELOAD=${SANRT:+$SANRT:}$SHIM "$NG" run -- sh -c 'echo "$LD_PRELOAD"' 2>&1)
check "run: a library already in LD_PRELOAD is not added twice" [ "$got" = "${SANRT:+$SANRT:}$SHIM" ]
# Another copy of the library already in LD_PRELOAD (an older install) is replaced, not
# kept beside the new one: found by its file name, or as the same file under another.
mkdir -p "$J/old"
cp "$SHIM" "$J/old/libncclguard.so" && ln -sf "$SHIM" "$J/old/guard-link.so"
got=$(LD_PRELOAD=${SANRT:+$SANRT:}$J/old/libncclguard.so:/lib/x86_64-linux-gnu/libm.so.6 \
    "$NG" run -- sh -c 'echo "$LD_PRELOAD"' 2>&1)
check "run: another copy of the library in LD_PRELOAD is replaced" \
    [ "$got" = "${SANRT:+$SANRT:}$SHIM:/lib/x86_64-linux-gnu/libm.so.6" ]
got=$(LD_PRELOAD="${SANRT:+$SANRT }$J/old/guard-link.so" "$NG" run -- sh -c 'echo "$LD_PRELOAD"' 2>&1)
check "run: the library under another name (a link) is replaced too" \
    [ "$got" = "${SANRT:+$SANRT:}$SHIM" ]
# A path with a space: ld.so splits LD_PRELOAD there (ld.so(8): no escaping), so the job
# would run without the library. run refuses, with one line and exit 2.
mkdir -p "$J/with space"
cp "$NG" "$SHIM" "$J/with space/"
out=$(LD_PRELOAD=$SANRT "$J/with space/ncclguard" run -- true 2>&1); rc=$?
check "run: a library path with a space is refused: exit 2, one line naming LD_PRELOAD" \
    [ $rc -eq 2 -a "$(printf '%s\n' "$out" | wc -l)" -eq 1 -a -n "$(printf '%s' "$out" | grep LD_PRELOAD)" ]
# Two copies loaded at once (LD_PRELOAD set by hand): the first stays, the second says
# so once per process and passes everything through: one summary, one exit dump.
(cd "$J" && NCCLGUARD_DUMP_AT_EXIT=1 NCCLGUARD_DUMP_DIR="$J/twice" \
    LD_PRELOAD="$(preload):$J/old/libncclguard.so" with_fakes "$LAUNCH" -n 1 --timeout 120 -- \
    "$TRAIN" --steps 3 --quiet >"$J/twice.out" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c 'summary: ' "$J/twice.out")" = 1 ] && dumps_are "$J/twice" 1 &&
    [ "$(grep -c "\[rank 0 .*another copy of the library is loaded first ($SHIM; this one $J/old/libncclguard.so): this one stays off" "$J/twice.out")" = 1 ]; then
    pass "two copies loaded: the second stays off, with one line; one summary, one exit dump"
else
    fail "two copies loaded" "rc=$rc $(cat "$J/twice.out")"
fi
# Installed layout: PREFIX/bin/ncclguard finds PREFIX/lib/libncclguard.so (make install).
mkdir -p "$J/prefix/bin" "$J/prefix/lib"
cp "$NG" "$J/prefix/bin/" && cp "$SHIM" "$J/prefix/lib/"
got=$(LD_PRELOAD=$SANRT "$J/prefix/bin/ncclguard" run -- sh -c 'echo "$LD_PRELOAD"' 2>&1)
check "run: an installed ncclguard preloads PREFIX/lib/libncclguard.so" \
    [ "$got" = "${SANRT:+$SANRT:}$J/prefix/lib/libncclguard.so" ]
rm "$J/prefix/lib/libncclguard.so"
out=$(LD_PRELOAD=$SANRT "$J/prefix/bin/ncclguard" run -- true 2>&1); rc=$?
check "run: no library beside the command: exit 2 with one line" \
    [ $rc -eq 2 -a "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]
# Open MPI does not forward the environment to other nodes: run adds -x; MPICH's
# mpiexec (Hydra) forwards all of it, and gets nothing added.
mkdir -p "$J/ompi" "$J/mpich"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "mpirun (Open MPI) 4.1.5"; exit 0; }\necho "$*"\n' \
    >"$J/ompi/mpirun"
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "HYDRA build details:"; exit 0; }\necho "$*"\n' \
    >"$J/mpich/mpiexec"
chmod +x "$J/ompi/mpirun" "$J/mpich/mpiexec"
got=$(NCCLGUARD_TIMEOUT=60 ng_run --dump-dir /d -- "$J/ompi/mpirun" -np 2 app 2>&1)
case "$got" in
"-x LD_PRELOAD "*"-x NCCLGUARD_DUMP_DIR"*"-np 2 app") pass "run: Open MPI's mpirun gets -x LD_PRELOAD and -x NCCLGUARD_*" ;;
*) fail "run: Open MPI forwarding" "got: $got" ;;
esac
[[ "$got" == *"-x NCCLGUARD_TIMEOUT"* ]] || fail "run: -x for NCCLGUARD_TIMEOUT" "got: $got"
got=$(ng_run -- "$J/mpich/mpiexec" -n 2 app 2>&1)
check "run: MPICH's mpiexec is left as it is" [ "$got" = "-n 2 app" ]
one_line_usage "run with no command" "$NG" run
one_line_usage "run with an unknown option" "$NG" run --bogus -- true
one_line_usage "run with an unreadable --config" "$NG" run --config "$J/none.conf" -- true
out=$("$NG" run -- "$J/no-such-program" 2>&1); rc=$?
check "run: a missing command exits 127 with one line" \
    [ $rc -eq 127 -a "$(printf '%s\n' "$out" | wc -l)" -eq 1 ]

# --- the deployment recipes of scripts/deploy ----------------------------------------------
PROLOG=$ROOT/scripts/deploy/slurm-taskprolog
got=$(env -i PATH="$PATH" NCCLGUARD_LIB="$SHIM" LD_PRELOAD=/opt/x.so SLURM_SUBMIT_DIR=/s \
    SLURM_JOB_ID=42 "$PROLOG")
want="export LD_PRELOAD=$SHIM:/opt/x.so
export NCCLGUARD_DUMP_DIR=/s/ncclguard-42"
check "slurm-taskprolog: export lines prepend the library and name the job's dump directory" \
    [ "$got" = "$want" ]
got=$(env -i PATH="$PATH" NCCLGUARD_LIB="$SHIM" LD_PRELOAD="$SHIM" NCCLGUARD_DUMP_DIR=/d "$PROLOG")
check "slurm-taskprolog: nothing to add when preloaded with a dump directory" [ -z "$got" ]
got=$(env -i PATH="$PATH" NCCLGUARD_LIB=/nonexistent/lib.so "$PROLOG")
check "slurm-taskprolog: a missing library is one print line, nothing exported" \
    [ "$got" = "print ncclguard: no /nonexistent/lib.so on $(hostname): this task runs without ncclguard" ]
# What the task gets from those lines runs the job under the shim.
J=$TMP/prolog
mkdir -p "$J"
lines=$(env -i PATH="$PATH" NCCLGUARD_LIB="$SHIM" SLURM_SUBMIT_DIR="$J" SLURM_JOB_ID=42 "$PROLOG")
(cd "$J" && eval "$lines" &&
    LD_PRELOAD=${SANRT:+$SANRT:}$LD_PRELOAD NCCLGUARD_DUMP_AT_EXIT=1 with_fakes \
    "$LAUNCH" -n 2 --timeout 300 -- "$TRAIN" --steps 3 --quiet >"$J/out" 2>&1)
check "slurm-taskprolog: its environment runs a job under the shim (2 dumps in ncclguard-42)" \
    dumps_are "$J/ncclguard-42" 2
if python3 -c 'import yaml' 2>/dev/null; then
    got=$(python3 - "$ROOT/scripts/deploy/k8s-pod.yaml" <<'PY'
import sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))["spec"]
vols = {v["name"] for v in spec["volumes"]}
init = spec["initContainers"][0]
main = spec["containers"][0]
env = {e["name"]: e["value"] for e in main["env"]}
mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"]}
lib = env["LD_PRELOAD"]
assert "emptyDir" in next(v for v in spec["volumes"] if v["name"] == "ncclguard")
assert init["volumeMounts"][0]["name"] == "ncclguard" and "libncclguard.so" in init["command"][-1]
assert lib.startswith(mounts["ncclguard"] + "/") and {m for m in mounts} <= vols
print("ok")
PY
    )
    check "k8s-pod.yaml: the init container fills the emptyDir that LD_PRELOAD points into" [ "$got" = ok ]
else
    skip "k8s-pod.yaml" "no python3 yaml module"
fi

# --- diagnose against fixture trees ---------------------------------------------------------
FIX=$ROOT/tests/fixtures/diagnose
# diag_py ENV... -- PYTHON: runs diagnose --json --root $FIX with ENV, and PYTHON on its document d
diag_py() {
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    env -u NCCL_SOCKET_IFNAME "${envs[@]}" "$NG" diagnose --json --root "${ROOT_DIR:-$FIX}" |
        python3 -c "import json, sys; d = json.load(sys.stdin); $2"
}
# has_words TEXT WORD...: every WORD is a word of TEXT
has_words() { local t=" $1 " w; shift; for w; do [[ "$t" == *" $w "* ]] || return 1; done; }
selected='print(" ".join(i["name"] for i in d["net"]["interfaces"] if i["selected"]))'
for case in "unset|ib0" "eth|eth0" "^docker,lo|ens1f1 eth0 ib0" "=eth0,ib|eth0" \
    "^=eth|docker0 ens1f1 eth0 ib0 lo" "eth0:5000,lo|eth0 lo"; do
    spec=${case%|*} want=${case#*|}
    if [ "$spec" = unset ]; then got=$(diag_py -- "$selected")
    else got=$(diag_py NCCL_SOCKET_IFNAME="$spec" -- "$selected"); fi
    check "diagnose: NCCL_SOCKET_IFNAME=$spec selects $want" [ "$got" = "$want" ]
done
got=$(diag_py -- 'print(len(d["gpus"]), d["gpu_models"], d["driver"]["version"], [(p["device"], p["state"], p["rate"], p["link_layer"], p["netdev"]) for p in d["ib"]])')
want="2 ['NVIDIA H100 80GB HBM3'] 535.104.05 [('mlx5_0', '4: ACTIVE', '400 Gb/sec (4X NDR)', 'InfiniBand', None), ('mlx5_1', '1: DOWN', '40 Gb/sec (4X QDR)', 'Ethernet', 'ens1f1')]"
check "diagnose --json: GPUs, driver, IB ports (state, rate, link layer, netdev) of the fixture" \
    [ "$got" = "$want" ]
got=$(diag_py -- 'print(" ".join(sorted(x["what"].replace(" ", "_") for x in d["not_seen"])))')
check "diagnose: what --root cannot see (topology, IB MTU, addresses) is listed as not seen" \
    has_words "$got" topology_matrix IB_active_MTU interface_addresses
mkdir -p "$TMP/emptyroot"
got=$(ROOT_DIR=$TMP/emptyroot diag_py -- 'print(" ".join(sorted(x["what"].replace(" ", "_") for x in d["not_seen"])))')
check "diagnose: an empty root gives a not-seen line for the driver, GPUs, IB, interfaces" \
    has_words "$got" NVIDIA_driver GPUs InfiniBand network_interfaces
out=$("$NG" diagnose --root "$FIX")
if grep -q '^ib: *mlx5_0 port 1: 4: ACTIVE, 5: LinkUp, 400 Gb/sec (4X NDR), InfiniBand$' <<<"$out" &&
    grep -q '^  \* ib0: up, mtu 4092, 400000 Mb/s$' <<<"$out" &&
    grep -q '^not seen: topology matrix: ' <<<"$out" && grep -q '^driver: *NVIDIA 535.104.05' <<<"$out"
then pass "diagnose: the text report of the fixture"
else fail "diagnose text" "$out"; fi
# The env audit is envcheck's, against the NCCL library found.
got=$(diag_py NCCL_MAX_RINGS=8 -- 'print("skip" if d["nccl"] is None else
    [f["variable"] for f in d["env_audit"]["findings"]])')
if [ "$got" = skip ]; then skip "diagnose env audit" "no libnccl.so.2 on this machine"
else check "diagnose: the env audit reports NCCL_MAX_RINGS" [ "$got" = "['NCCL_MAX_RINGS']" ]; fi
one_line_usage "diagnose with a relative --root" "$NG" diagnose --root tests
one_line_usage "diagnose with an argument" "$NG" diagnose extra

# --- dump -----------------------------------------------------------------------------------
# A healthy 2-rank job that runs until stopped. Its launcher has the library preloaded
# too, but no communicator: dump must refuse it (SIGUSR2 would end it).
J=$TMP/dump
mkdir -p "$J/dumps" "$J/node"
(cd "$J" && NCCLGUARD_TRIGGER_POLL_S=1 NCCLGUARD_NODE_DIR=$J/node ng_run --dump-dir dumps -- \
    "$LAUNCH" -n 2 --timeout 600 -- "$TRAIN" --steps 100000000 --compute-ms 20 --quiet \
    >"$J/out" 2>&1) &
job=$!
markers_are() { [ "$(find "$J/node" -regex '.*/[0-9]+' 2>/dev/null | wc -l)" -eq "$1" ]; }
if wait_for 120 markers_are 2; then
    pids=$(find "$J/node" -regex '.*/[0-9]+' -printf '%f\n' | sort -n | tr '\n' ' ')
    launcher=$(pgrep -P $job -x launch || echo $job)
    out=$("$NG" dump --node-dir "$J/node" $pids 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c 'asked pid' <<<"$out")" -eq 2 ] &&
        wait_for 120 dumps_are "$J/dumps" 2 &&
        [ "$(dump_members "$J/dumps" reason)" = signal ]; then
        pass "dump PID...: both ranks dump (reason signal)"
    else
        fail "dump PID..." "rc=$rc out=$out dumps=$(ls "$J/dumps")"
    fi
    out=$("$NG" dump --node-dir "$J/node" "$launcher" 99999999 2>&1); rc=$?
    if [ $rc -eq 1 ] && [ "$(grep -c 'refused: .*no communicator' <<<"$out")" -eq 2 ] &&
        [ "$(printf '%s\n' "$out" | wc -l)" -eq 2 ] && kill -0 "$launcher"; then
        pass "dump refuses the launcher (no communicator) and a missing pid, one line each"
    else
        fail "dump refuses processes without a communicator" "rc=$rc out=$out"
    fi
    rm -f "$J/dumps"/*.json
    out=$("$NG" dump --node-dir "$J/node" --all --job nosuchjob 2>&1); rc=$?
    check "dump --all --job of another job: nothing signalled, exit 1" \
        [ $rc -eq 1 -a "$(ndumps "$J/dumps")" -eq 0 ]
    out=$("$NG" dump --node-dir "$J/node" --all 2>&1); rc=$?
    if [ $rc -eq 0 ] && wait_for 120 dumps_are "$J/dumps" 2; then
        pass "dump --all: every process with a communicator dumps"
    else
        fail "dump --all" "rc=$rc out=$out"
    fi
    rm -f "$J/dumps"/*.json
    out=$("$NG" dump --dir "$J/dumps" --incident drill-7 2>&1); rc=$?
    if [ $rc -eq 0 ] && wait_for 120 dumps_are "$J/dumps" 2 &&
        [ "$(dump_members "$J/dumps" reason)" = trigger ] &&
        [[ "$(dump_members "$J/dumps" incident)" == *-drill-7 ]] &&
        [[ "$out" == *"$(dump_members "$J/dumps" incident)"* ]]; then
        pass "dump --dir --incident: every rank dumps for the incident <mtime>-drill-7, as printed"
    else
        fail "dump --dir --incident" "rc=$rc out=$out incident=$(dump_members "$J/dumps" incident)"
    fi
else
    fail "dump: the job's markers" "$(ls "$J/node" 2>&1)"; tail -n 5 "$J/out"
fi
kill -TERM ${launcher:-$job} 2>/dev/null; wait $job 2>/dev/null
# The marker's checks, with markers planted for a process of this script's own. It maps
# the library (preloaded, no communicator): dump proves that before it signals.
M=$TMP/markers/ncclguard-$(id -u)
mkdir -p "$M" && chmod 700 "$M"
env LD_PRELOAD="$(preload)" bash -c "trap 'echo got >$TMP/usr1; exit 0' USR1; while :; do sleep 0.1; done" &
victim=$! # env execs: $! becomes bash
wait_for 30 grep -q libncclguard "/proc/$victim/maps"
start=$(python3 -c 'import sys; s = open("/proc/%s/stat" % sys.argv[1]).read()
print(s[s.rindex(")") + 2:].split()[19])' $victim)
plant() { # START SIGNAL
    printf '{"schema":"ncclguard.marker/1","pid":%d,"start_time":%s,"rank":3,"local_rank":3,"host":"h","job":"j","dump_signal":%d}\n' \
        $victim "$1" "$2" >"$M/$victim"
}
plant $((start + 1)) 10
out=$("$NG" dump --node-dir "$TMP/markers" $victim 2>&1)
check "dump refuses a marker of an earlier process with the same pid" \
    grep -q "refused: the marker .* belongs to an earlier process" <<<"$out"
plant "$start" 0
out=$("$NG" dump --node-dir "$TMP/markers" --all 2>&1)
check "dump --all refuses a process whose dumps on request are off" \
    grep -q "pid $victim refused: its dumps on request are off" <<<"$out"
plant "$start" 10
out=$("$NG" dump --node-dir "$TMP/markers" --all --job j 2>&1)
check "dump refuses a process whose marker names another signal than the configured one" \
    grep -q "pid $victim refused: it takes signal 10 for a dump, and the dump signal here is 12 (SIGUSR2" \
    <<<"$out"
out=$(NCCLGUARD_DUMP_SIGNAL=SIGUSR1 "$NG" dump --node-dir "$TMP/markers" --all --job j 2>&1)
if wait_for 60 [ -s "$TMP/usr1" ]; then
    pass "dump sends the configured dump signal (NCCLGUARD_DUMP_SIGNAL=SIGUSR1) to a proved process"
else fail "dump sends the configured signal" "$out"; kill $victim; fi
wait $victim 2>/dev/null
one_line_usage "dump with neither PID nor --all" "$NG" dump
one_line_usage "dump --incident without --dir" "$NG" dump --incident x 1
one_line_usage "dump with a bad incident id" "$NG" dump --dir "$J" --incident 'a/b'
one_line_usage "dump with a bad pid" "$NG" dump 12x

# --- trace: a Chrome trace of a real hang's dumps ---------------------------------------------
# Rank 2 hangs in host code at step 30; the others time out and every rank dumps once.
J=$TMP/trace
mkdir -p "$J"
(cd "$J" && NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=30 NCCLGUARD_TRIGGER_POLL_S=1 \
    NCCLGUARD_NODE_DIR=$J/node ng_run --dump-dir dumps -- "$LAUNCH" -n 4 --timeout 600 -- \
    "$TRAIN" --steps 100 --hang-rank 2 --hang-step 30 --quiet >"$J/out" 2>&1) &
job=$!
wait_for 300 dumps_are "$J/dumps" 4
kill -TERM $(pgrep -P $job -x launch || echo $job) 2>/dev/null; wait $job 2>/dev/null
# trace_py NAME ARGS... -- PYTHON: runs trace with ARGS into $J/NAME.json (stderr in
# $J/NAME.err), then PYTHON on its events ev, its ranks' X spans and its document d
trace_py() {
    local name=$1 args=(); shift
    while [ "$1" != -- ]; do args+=("$1"); shift; done
    "$NG" trace "${args[@]}" -o "$J/$name.json" 2>"$J/$name.err" || { echo "trace rc=$?"; return; }
    python3 -c "import json, sys
d = json.load(open(sys.argv[1])); ev = d['traceEvents']
X = [e for e in ev if e['ph'] == 'X']
ranks = lambda es: sorted({e['pid'] for e in es})
$2" "$J/$name.json"
}
if [ "$(ndumps "$J/dumps")" -eq 4 ]; then
    got=$(trace_py all "$J/dumps" -- '
enq = [e for e in ev if e["ph"] == "i" and e["cat"] == "enqueue"]
tracks = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["tid"]}
inc = [e for e in ev if e["cat" if "cat" in e else "ph"] == "incident"]
print(ranks(X), ranks(enq), {p for p, _ in tracks} == set(ranks(X)),
      all((e["pid"], e["tid"]) in tracks for e in X), len(inc), d["otherData"]["incident"] == inc[0]["args"]["id"],
      ranks(e for e in ev if e.get("cat") == "timeout"), all(e["ts"] >= 0 for e in enq),
      sorted({e["cat"] for e in X} - {"gpu", "discovered", "in flight"}))')
    check "trace: spans and enqueues on every rank's stream tracks, the incident, the waiting ranks' timeouts" \
        [ "$got" = "[0, 1, 2, 3] [0, 1, 2, 3] True True 1 True [0, 1, 3] True []" ]
    got=$(trace_py ranks "$J/dumps" --ranks 1,3 -- 'print(ranks(e for e in ev if e["ph"] != "M" and e.get("cat") != "incident"), ranks(X))')
    check "trace --ranks 1,3: only ranks 1 and 3, and stderr says 2 ranks were left out" \
        [ "$got" = "[1, 3] [1, 3]" ] && grep -q 'left out 2 ranks not in --ranks' "$J/ranks.err"
    # the window: ops before it are left out (and counted on stderr), none without one.
    # Its length comes from the data (the incident minus the middle enqueue), not a guess.
    read -r all win < <(trace_py w0 "$J/dumps" --window 0 -- '
enq = sorted(e["ts"] for e in ev if e["ph"] == "i" and e["cat"] == "enqueue")
inc = [e["ts"] for e in ev if e.get("cat") == "incident"][0]
print(len(enq), (inc - enq[len(enq) // 2]) / 1e6)')
    # (a kept op either was enqueued in the window or its span ends in it)
    got=$(trace_py win "$J/dumps" --window "$win" -- '
enq = [e for e in ev if e["ph"] == "i" and e["cat"] == "enqueue"]
key = lambda e: (e["pid"], e["name"], e["args"]["comm"])
kept = {key(e) for e in enq}
print(len(enq), all(e["ts"] >= 0 for e in enq), all(e["ts"] + e["dur"] >= 0 or key(e) in kept for e in X))')
    left=$(grep -o 'left out [0-9]* ops older than the window' "$J/win.err" | grep -o '[0-9]*')
    n1=${got%% *}
    if [ "${got#* }" = "True True" ] && [ -n "$left" ] && [ "$n1" -gt 0 ] && [ "$n1" -lt "$all" ] &&
        [ $((n1 + left)) -le "$all" ] && ! grep -q 'left out' "$J/w0.err"; then
        pass "trace --window $win: $n1 of $all enqueues kept, $left ops said left out; --window 0 keeps all"
    else
        fail "trace --window" "got=$got all=$all win=$win left=$left $(cat "$J/win.err")"
    fi
    # Clocks per host: rank 3's realtime was 10 s ahead for its older half of ops and then
    # stepped back (its monotonic clock was not): its spans land where they were.
    mkdir -p "$J/step" && cp "$J"/dumps/ncclguard-r*.json "$J/step/"
    python3 - "$J"/step/ncclguard-r3-*.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
mid = sorted(o["index"] for o in d["ops"])[len(d["ops"]) // 2]
for o in d["ops"]:
    if o["index"] < mid:
        for k in ("enqueue_ns", "gpu_start_ns", "gpu_end_ns", "seen_start_ns", "seen_end_ns"):
            if o[k] is not None: o[k] += 10 ** 10
json.dump(d, open(sys.argv[1], "w"))
PY
    spans() { python3 -c 'import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
print(json.dumps({"%d %s %s" % (e["pid"], e["name"], e["args"]["comm"]): e["ts"] for e in ev if e["ph"] == "X"}))' "$1"; }
    "$NG" trace "$J/step" --window 0 -o "$J/step.json" 2>/dev/null
    got=$(python3 -c 'import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(len(a) == len(b) and len(a) > 0, max(abs(a[k] - b[k]) for k in a) < 1000)' \
        "$(spans "$J/w0.json")" "$(spans "$J/step.json")")
    check "trace: a 10 s realtime step on one rank's host is undone by its realtime/monotonic pairs" \
        [ "$got" = "True True" ]
    rm -rf "$J/step"
    # a damaged dump is named on stderr and the rest is traced
    mkdir -p "$J/bad" && cp "$J"/dumps/ncclguard-r*.json "$J/bad/"
    f=$(ls "$J"/bad/ncclguard-r1-*.json); head -c 2000 "$f" >"$f.cut" && mv "$f.cut" "$f"
    got=$(trace_py bad "$J/bad" -- 'print(ranks(X))')
    check "trace: a truncated dump is named on stderr, the other ranks are traced" \
        [ "$got" = "[0, 2, 3]" ] && grep -q "ncclguard-r1-.*: not valid JSON (truncated or corrupt).*; left out" "$J/bad.err"
    rm -rf "$J/bad" # not a dump of the shim's: dumps_sane below reads every dump under $TMP
else
    fail "trace: the hang job's dumps" "$(ls "$J/dumps" 2>&1)"; tail -n 5 "$J/out"
fi
one_line_usage "trace without -o" "$NG" trace "$J/dumps"
one_line_usage "trace with bad --ranks" "$NG" trace "$J/dumps" -o "$J/x.json" --ranks 3-1
one_line_usage "trace with bad --window" "$NG" trace "$J/dumps" -o "$J/x.json" --window -5
out=$("$NG" trace "$TMP/emptyroot" -o "$J/x.json" 2>&1); rc=$?
check "trace of a directory without dumps: exit 3 (as analyze), one line" [ $rc -eq 3 -a "$(wc -l <<<"$out")" -eq 1 ]
dumps_sane

finish

#!/usr/bin/env bash
# Hostile input, the way a careless or hostile user would give it: environment
# values, output paths (log, event log, dumps), secrets named by the policy, a job
# that tries to drop the site file, and signals. Each case runs the preloaded
# library in a short job and checks that the job goes on, that one clear line says
# what was ignored, and that nothing hangs (every run has a hard `timeout`).
# Hostile config files themselves (FIFO, device, 50 MB, binary, world-writable,
# another owner) are cases of tests/e2e/policy.sh.
source "$(dirname "$0")/lib.sh"
LAUNCH=$APPS/launch
TRAIN=$APPS/trainloop
PROBE=$E2E/policy_probe
if [ ! -x "$TRAIN" ] || [ ! -e "$SHIM" ] || [ ! -x "$PROBE" ]; then
    fail "build" "the shim, trainloop or policy_probe is missing: make"; finish; exit 1
fi
mkdir -p "$TMP/home"

# start VAR=value...: a process that never creates a communicator (the constructor
# only), under the shim; stderr in $TMP/err
start() {
    clean "$@" -- timeout 20 env LD_PRELOAD="$(preload)" /bin/true 2>"$TMP/err"
}
# job DIR VAR=value...: a one-rank job of 2 steps under the shim, run in DIR;
# combined output in DIR/out, exit status in $rc
job() {
    local dir=$1; shift
    mkdir -p "$dir"
    (cd "$dir" && clean LD_LIBRARY_PATH="$FAKES" "$@" -- timeout 60 "$LAUNCH" -n 1 \
        --timeout 50 -- env LD_PRELOAD="$(preload)" "$TRAIN" --steps 2 --quiet >"$dir/out" 2>&1)
    rc=$?
}
lines() { grep -c '^ncclguard: ' "$1"; }

# --- environment values: integers past 2^64 are refused, not wrapped -----------------------
start NCCLGUARD_RING=18446744073709551632 NCCLGUARD_DUMP_SIGNAL=18446744073709551626
if [ $? -eq 0 ] && [ "$(lines "$TMP/err")" -eq 2 ] &&
    grep -q "NCCLGUARD_RING=18446744073709551632 ignored (environment): ring: .* is not an \
integer from 16 to 16777216; using 4096 (built-in)" "$TMP/err" &&
    grep -q "NCCLGUARD_DUMP_SIGNAL=18446744073709551626 ignored (environment): .*using SIGUSR2" \
        "$TMP/err"; then
    pass "integers of 2^64 or more are refused with one line each (ring, dump_signal)"
else
    fail "integer overflow" "$(cat "$TMP/err")"
fi

# --- log levels: one set of spellings; the line that rejects a level is never hidden -------
for bad in 0 3 garbage WARNING ' info'; do
    start NCCLGUARD_LOG_LEVEL="$bad" NCCLGUARD_TIMOUT=5
    if [ "$(lines "$TMP/err")" -eq 2 ] &&
        grep -q "NCCLGUARD_LOG_LEVEL=$bad ignored (environment): log_level: '$bad' is not one of \
error|warn|info|debug; using info (built-in)" "$TMP/err" &&
        grep -q 'NCCLGUARD_TIMOUT is not a setting' "$TMP/err"; then
        pass "NCCLGUARD_LOG_LEVEL='$bad': one line rejects it, other warnings still shown"
    else
        fail "NCCLGUARD_LOG_LEVEL='$bad'" "$(cat "$TMP/err")"
    fi
done
printf 'lock = log_level\n' >"$TMP/lock-level.conf"
start NCCLGUARD_TEST_SITE_CONFIG="$TMP/lock-level.conf" NCCLGUARD_LOG_LEVEL=error
if [ "$(lines "$TMP/err")" -eq 1 ] && grep -q "NCCLGUARD_LOG_LEVEL=error ignored (environment): \
the site locked log_level at info" "$TMP/err"; then
    pass "a level the site locked is not hidden by the job's own NCCLGUARD_LOG_LEVEL=error"
else
    fail "locked log level" "$(cat "$TMP/err")"
fi
start NCCLGUARD_LOG_LEVEL=Error NCCLGUARD_TIMOUT=5
if [ ! -s "$TMP/err" ]; then
    pass "NCCLGUARD_LOG_LEVEL=Error (any case) is accepted and hides warnings"
else
    fail "NCCLGUARD_LOG_LEVEL=Error" "$(cat "$TMP/err")"
fi

# --- output paths: nothing a job names as its log or event log can hang it ----------------
# out_path NAME SETTING PATH WHY: a one-rank job with NCCLGUARD_<SETTING>=PATH finishes,
# says once why it ignored PATH, and (for the log) logs to stderr instead
out_path() {
    local name=$1 setting=$2 path=$3 why=$4 d=$TMP/out-$RANDOM
    job "$d" NCCLGUARD_$setting="$path"
    if [ $rc -eq 0 ] && [ "$(grep -c "$why" "$d/out")" -eq 1 ] &&
        grep -q "ncclguard: .*summary: [0-9]* communicators" "$d/out"; then
        pass "NCCLGUARD_$setting is $name: the job ends normally, one line says why"
    else
        fail "NCCLGUARD_$setting is $name" "rc=$rc $(tail -n 5 "$d/out")"
    fi
}
mkfifo "$TMP/fifo"
out_path "a FIFO" LOG "$TMP/fifo" \
    "cannot log to $TMP/fifo (the log setting): a FIFO, not a regular file; logging to stderr"
out_path "a FIFO" EVENTS "$TMP/fifo" \
    "cannot write the event log to $TMP/fifo (the events setting): a FIFO, not a regular file"
ln -s /dev/zero "$TMP/zero-link"
out_path "a symbolic link" LOG "$TMP/zero-link" "a symbolic link, which is not followed"
out_path "a device" EVENTS /dev/null "a character device, not a regular file"
out_path "a directory" LOG "$TMP" "a directory, not a regular file"
# a site file's `log =` goes through the same path (the test-only site file: see below)
printf 'log = %s\n' "$TMP/fifo" >"$TMP/log-fifo.conf"
job "$TMP/site-log" NCCLGUARD_TEST_SITE_CONFIG="$TMP/log-fifo.conf"
if [ $rc -eq 0 ] && [ "$(grep -c "cannot log to $TMP/fifo (the log setting): a FIFO" \
    "$TMP/site-log/out")" -eq 1 ] && grep -q 'summary: [0-9]* communicators' "$TMP/site-log/out"
then
    pass "a site file's log = a FIFO: the job ends normally, one line says why"
else
    fail "site log = FIFO" "rc=$rc $(tail -n 5 "$TMP/site-log/out")"
fi
job "$TMP/created" NCCLGUARD_LOG="$TMP/created/ng.log" NCCLGUARD_EVENTS="$TMP/created/ev.jsonl"
if [ $rc -eq 0 ] && [ "$(stat -c %a "$TMP/created/ng.log" "$TMP/created/ev.jsonl")" = \
    "$(printf '600\n600')" ] && grep -q 'summary: [0-9]* communicators' "$TMP/created/ng.log"; then
    pass "the log and the event log are created mode 0600"
else
    fail "log and event file modes" "rc=$rc $(stat -c '%a %n' "$TMP"/created/* 2>&1)"
fi

# --- dump paths: a dump directory that is not one falls back to $TMPDIR, once --------------
# dump_path NAME DIR: a one-rank job that dumps at exit, with NCCLGUARD_DUMP_DIR=DIR
dump_path() {
    local name=$1 dir=$2 d=$TMP/dump-$RANDOM got
    job "$d" SLURM_JOB_ID=hostile TMPDIR="$TMP/tmpdir" NCCLGUARD_DUMP_AT_EXIT=1 \
        NCCLGUARD_DUMP_DIR="$dir"
    got=$(ls "$TMP"/tmpdir/ncclguard-hostile/ncclguard-r0-*.json 2>/dev/null | wc -l)
    if [ $rc -eq 0 ] && grep -q 'summary: [0-9]* communicators' "$d/out" && [ "$got" -eq 1 ] &&
        [ "$(grep -c "cannot write dumps to $dir" "$d/out")" -eq 1 ]; then
        pass "NCCLGUARD_DUMP_DIR is $name: the job ends normally, the dump goes to \$TMPDIR"
    else
        fail "NCCLGUARD_DUMP_DIR is $name" "rc=$rc dumps=$got $(tail -n 4 "$d/out")"
    fi
    rm -rf "$TMP"/tmpdir/ncclguard-hostile
}
mkdir -p "$TMP/tmpdir"
printf 'not a directory\n' >"$TMP/plain-file"
dump_path "a FIFO" "$TMP/fifo"
dump_path "a regular file" "$TMP/plain-file"
dump_path "a device" /dev/null

# --- the site file: no variable of the job removes its locks, forces or forbids ------------
# The site file is /etc/ncclguard.conf; NCCLGUARD_TEST_SITE_CONFIG stands in for it here,
# which the shim honours only while /etc/ncclguard.conf does not exist.
printf '%s\n' 'lock = timeout, disable' 'timeout = 101' '[env.force]' 'NCCL_DEBUG = WARN' \
    '[env.forbid]' 'NCCL_TIMEOUT' >"$TMP/site.conf"
printf '%s\n' 'lock = slow_ms' 'timeout = 5' 'slow_ms = 9' '[env.force]' 'NCCL_DEBUG = INFO' \
    '[env.default]' 'NCCL_FROM_JOB = 1' >"$TMP/job.conf"
# site_probe VAR=value...: the policy probe with the stand-in site file; stdout in $TMP/out
site_probe() {
    clean NCCLGUARD_TEST_SITE_CONFIG="$TMP/site.conf" NCCL_DEBUG=TRACE NCCL_TIMEOUT=1 "$@" -- \
        timeout 20 "$PROBE" --setting timeout --setting disable --setting slow_ms \
        --env NCCL_DEBUG --env NCCL_TIMEOUT --env NCCL_FROM_JOB >"$TMP/out" 2>"$TMP/err"
}
site_holds() {
    grep -q "^timeout=101s (site $TMP/site.conf:2 (locked))$" "$TMP/out" &&
        grep -q '^disable=no (built-in (locked))$' "$TMP/out" &&
        grep -q '^NCCL_DEBUG=WARN$' "$TMP/out" && grep -q '^NCCL_TIMEOUT unset$' "$TMP/out"
}
for job in '' /dev/null /nonexistent/job.conf; do
    site_probe NCCLGUARD_CONFIG="$job"
    if site_holds && ! grep -q 'ncclguard: .*job' "$TMP/err"; then
        pass "NCCLGUARD_CONFIG='$job' keeps the site's lock, force and forbid, silently"
    else
        fail "NCCLGUARD_CONFIG='$job'" "$(cat "$TMP/out" "$TMP/err")"
    fi
done
site_probe NCCLGUARD_CONFIG="$TMP/job.conf"
if site_holds && grep -q "^slow_ms=9 (job $TMP/job.conf:3)$" "$TMP/out" &&
    grep -q '^NCCL_FROM_JOB=1$' "$TMP/out" &&
    grep -q "job.conf:1: 'lock' is only allowed in the site file" "$TMP/err" &&
    grep -q "job.conf:2: timeout is locked by the site file" "$TMP/err" &&
    grep -q "job.conf:5: NCCL_DEBUG is forced by the site file" "$TMP/err"; then
    pass "a job file adds to the site file: its own values apply, the site's locks hold"
else
    fail "job file on top of the site file" "$(cat "$TMP/out" "$TMP/err")"
fi
site_probe NCCLGUARD_DISABLE=1
if site_holds && grep -q "NCCLGUARD_DISABLE=1 ignored (environment): the site locked disable" \
    "$TMP/err"; then
    pass "NCCLGUARD_DISABLE=1 when the site locked disable: ignored, with one line"
else
    fail "NCCLGUARD_DISABLE=1 with a site lock" "$(cat "$TMP/out" "$TMP/err")"
fi
# A real /etc/ncclguard.conf, in a mount namespace of its own: the test-only variable
# cannot replace it, and NCCLGUARD_CONFIG= cannot remove it.
if [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null; then
    mkdir -p "$TMP/etc"
    cp -a /etc/ld.so.cache /etc/passwd /etc/group "$TMP/etc/" 2>/dev/null
    cp "$TMP/site.conf" "$TMP/etc/ncclguard.conf"
    printf 'timeout = 7\n' >"$TMP/escape.conf"
    clean NCCLGUARD_CONFIG= NCCLGUARD_TEST_SITE_CONFIG="$TMP/escape.conf" NCCL_TIMEOUT=1 -- \
        unshare -m sh -c 'mount --bind "$1" /etc && exec timeout 20 "$2" --setting timeout \
        --env NCCL_TIMEOUT' sh "$TMP/etc" "$PROBE" >"$TMP/out" 2>"$TMP/err"
    if grep -q '^timeout=101s (site /etc/ncclguard.conf:2 (locked))$' "$TMP/out" &&
        grep -q '^NCCL_TIMEOUT unset$' "$TMP/out"; then
        pass "a real /etc/ncclguard.conf applies; NCCLGUARD_CONFIG= and the test variable do not \
replace it"
    else
        fail "real site file" "$(cat "$TMP/out" "$TMP/err")"
    fi
    # Nor can a faked system root (NCCLGUARD_TEST_SYSROOT) switch a conditional
    # section of it: test switches are off where a site file exists, said once.
    mkdir -p "$TMP/fakeroot/proc/driver/nvidia/gpus/0000:01:00.0"
    printf 'Model: \t\t NVIDIA H100 80GB HBM3\n' \
        >"$TMP/fakeroot/proc/driver/nvidia/gpus/0000:01:00.0/information"
    { cat "$TMP/site.conf"; printf '%s\n' '[when gpu=H100*]' 'slow_ms = 55'; } \
        >"$TMP/etc/ncclguard.conf"
    clean NCCLGUARD_TEST_SYSROOT="$TMP/fakeroot" NCCLGUARD_TEST_ANCHOR_MS=5 -- \
        unshare -m sh -c 'mount --bind "$1" /etc && exec timeout 20 "$2" --setting slow_ms' \
        sh "$TMP/etc" "$PROBE" >"$TMP/out" 2>"$TMP/err"
    if grep -q '^slow_ms=0 (built-in)$' "$TMP/out" &&
        [ "$(grep -c 'ignored (environment): test switches (NCCLGUARD_TEST_\*) apply only on a machine without a site file' "$TMP/err")" = 1 ]; then
        pass "a faked system root does not switch a section of a real site file (one line says so)"
    else
        fail "faked system root with a real site file" "$(cat "$TMP/out" "$TMP/err")"
    fi
else
    skip "real site file" "needs root and unshare -m to put a site file at /etc/ncclguard.conf"
fi

# --- secrets: values of variables the policy names are never copied into any output --------
# Every output the shim writes (stderr, the log, the event log, the dumps) and the CLI's,
# at the debug level and on every rank; only NCCL_*, CUDA_*, TORCH_* and NCCLGUARD_* values
# are shown, and of those not the ones whose name says secret (*PASSWORD*, *TOKEN*,
# *SECRET*, *KEY*: NCCL_PASSWORD, TORCH_NCCL_TOKEN). No hash of a secret goes anywhere
# either: not into NCCLGUARD_POLICY_APPLIED (every child's environment), not into a dump.
printf '%s\n' '[env.forbid]' 'AWS_SECRET_ACCESS_KEY' 'DB_*' '[env.force]' 'HF_TOKEN = siteSECRET2' \
    'NCCL_DEBUG = WARN' 'NCCL_PASSWORD = siteSECRET7' '[env.default]' 'MY_PASSWORD = siteSECRET3' \
    'TORCH_NCCL_TOKEN = siteSECRET8' >"$TMP/secret-site.conf"
SECRETS=(AWS_SECRET_ACCESS_KEY=xyzSECRETxyz1 HF_TOKEN=userSECRET4 MY_PASSWORD=userSECRET5
         DB_PASS=userSECRET6 NCCL_DEBUG=INFO NCCL_IB_SECRET_KEY=userSECRET9)
d=$TMP/secrets
job "$d" NCCLGUARD_TEST_SITE_CONFIG="$TMP/secret-site.conf" "${SECRETS[@]}" \
    NCCLGUARD_LOG_LEVEL=debug NCCLGUARD_VERBOSE=1 NCCLGUARD_DUMP_AT_EXIT=1 \
    NCCLGUARD_DUMP_DIR="$d/dumps" NCCLGUARD_LOG="$d/ng.log" NCCLGUARD_EVENTS="$d/ev.jsonl"
clean NCCLGUARD_TEST_SITE_CONFIG="$TMP/secret-site.conf" "${SECRETS[@]}" -- \
    "$NG" envcheck --policy --nccl "$FAKES/libnccl.so.2" >"$d/envcheck.txt" 2>&1
clean "${SECRETS[@]}" -- "$NG" envcheck --policy --site "$TMP/secret-site.conf" --json \
    --nccl "$FAKES/libnccl.so.2" >"$d/envcheck.json" 2>&1
# what a child of the policy's process inherits
clean NCCLGUARD_TEST_SITE_CONFIG="$TMP/secret-site.conf" "${SECRETS[@]}" -- \
    LD_PRELOAD="$(preload)" sh -c 'echo "$NCCLGUARD_POLICY_APPLIED"' >"$d/applied.txt" 2>/dev/null
# each secret's FNV-1a hash (the form the marker and the old log lines used), in full
# and its top 32 bits
hashes=$(python3 -c 'import sys
for v in sys.argv[1:]:
    h = 0xcbf29ce484222325
    for b in v.encode(): h = ((h ^ b) * 0x100000001b3) & (1 << 64) - 1
    print("%016x" % h); print("%08x" % (h >> 32))' xyzSECRETxyz1 siteSECRET2 siteSECRET3 \
    userSECRET4 userSECRET5 userSECRET6 siteSECRET7 siteSECRET8 userSECRET9)
leaks=$(grep -rlF -e xyzSECRETxyz1 -e siteSECRET2 -e siteSECRET3 -e userSECRET4 -e userSECRET5 \
    -e userSECRET6 -e siteSECRET7 -e siteSECRET8 -e userSECRET9 "$d"
    for h in $hashes; do grep -rlF "$h" "$d"; done)
dump=$(ls "$d"/dumps/*.json 2>/dev/null | head -n 1)
if [ $rc -eq 0 ] && [ -z "$leaks" ] && [ -n "$dump" ] && [ -s "$d/ng.log" ] &&
    [ -s "$d/ev.jsonl" ] && grep -q 'NCCL_DEBUG=' "$d/applied.txt" &&
    ! grep -qE 'TOKEN|PASSWORD' "$d/applied.txt" && python3 - "$dump" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
env = {e["name"]: e for e in d["config"]["env"]}
hidden = re.compile(r"^<not shown: \d+ bytes>$")
assert hidden.match(env["AWS_SECRET_ACCESS_KEY"]["was"]), env["AWS_SECRET_ACCESS_KEY"]
assert env["AWS_SECRET_ACCESS_KEY"]["was"] == "<not shown: 13 bytes>"
assert hidden.match(env["HF_TOKEN"]["was"]) and hidden.match(env["HF_TOKEN"]["value"])
assert hidden.match(env["DB_PASS"]["was"]), env.get("DB_PASS")
assert hidden.match(env["NCCL_PASSWORD"]["value"]), env["NCCL_PASSWORD"]
assert hidden.match(env["TORCH_NCCL_TOKEN"]["value"]), env["TORCH_NCCL_TOKEN"]
assert env["NCCL_DEBUG"]["was"] == "INFO" and env["NCCL_DEBUG"]["value"] == "WARN"
e = d["env"]
assert e["NCCL_PASSWORD"] == e["TORCH_NCCL_TOKEN"] == e["NCCL_IB_SECRET_KEY"] == "<not shown>", e
assert e["NCCL_DEBUG"] == "WARN", e
applied = e.get("NCCLGUARD_POLICY_APPLIED", "")
assert "NCCL_DEBUG=" in applied and not re.search("TOKEN|PASSWORD", applied), applied
PY
then
    if grep -q "AWS_SECRET_ACCESS_KEY removed (site forbid, .*; was '<not shown: 13 bytes>')" \
        "$d/ng.log" && grep -q "NCCL_PASSWORD=<not shown: 11 bytes> (site force" "$d/ng.log"; then
        pass "secrets appear in no output, not even as a hash; the log names what the site set"
    else
        fail "secrets: log line" "$(grep -e AWS -e NCCL_PASSWORD "$d/ng.log")"
    fi
else
    fail "secrets named by the policy" "rc=$rc leaks in: ${leaks:-none}; dump=${dump:-none} applied=$(cat "$d/applied.txt")"
fi

# --- signals: SIGUSR2 before the first communicator; the node marker after it -------------
# A process without a communicator has no handler, so SIGUSR2 ends it as it would
# without the shim (README, limits), and it leaves no marker; a process with one has
# a marker (docs/node-marker.md) that says which signal asks it for a dump.
MARKERS=/dev/shm/ncclguard-$(id -u)
env -i PATH="$PATH" LD_PRELOAD="$(preload)" sleep 30 & # env execs: $! becomes sleep
spid=$!
for _ in $(seq 100); do # until sleep runs with the shim mapped
    grep -q libncclguard "/proc/$spid/maps" 2>/dev/null && break
    sleep 0.1
done
mapped=$(grep -c libncclguard "/proc/$spid/maps" 2>/dev/null)
kill -USR2 $spid
{ wait $spid; } 2>/dev/null
src=$?
if [ "${mapped:-0}" -gt 0 ] && [ $src -eq $((128 + $(kill -l USR2))) ] &&
    [ ! -e "$MARKERS/$spid" ]; then
    pass "SIGUSR2 before the first communicator ends the process, as without the shim; no marker"
else
    fail "SIGUSR2 before the first communicator" "mapped=$mapped status $src"
fi
d=$TMP/marker
mkdir -p "$d"
(cd "$d" && clean LD_LIBRARY_PATH="$FAKES" SLURM_JOB_ID="hostile-$$" NCCLGUARD_DUMP_DIR="$d/dumps" \
    -- timeout 60 "$LAUNCH" -n 1 --timeout 50 -- env LD_PRELOAD="$(preload)" "$TRAIN" \
    --steps 3 --hang-rank 0 --quiet >"$d/out" 2>&1) &
jpid=$!
marker=
for _ in $(seq 120); do
    marker=$(grep -l "\"job\":\"hostile-$$\"" "$MARKERS"/* 2>/dev/null | head -n 1)
    [ -n "$marker" ] && break
    sleep 0.25
done
mpid=${marker##*/}
if [ -n "$marker" ] && python3 - "$marker" "$mpid" <<'PY'
import json, os, signal, sys
m = json.load(open(sys.argv[1]))
pid = int(sys.argv[2])
assert m["schema"] == "ncclguard.marker/1" and m["pid"] == pid, m
stat = open("/proc/%d/stat" % pid).read()
assert m["start_time"] == int(stat[stat.rindex(")") + 2:].split()[19]), m
assert m["dump_signal"] == signal.SIGUSR2 and m["rank"] == 0 and m["local_rank"] == 0, m
assert oct(os.stat(sys.argv[1]).st_mode & 0o777) == "0o600"
PY
then
    kill -USR2 "$mpid"
    for _ in $(seq 120); do
        ls "$d"/dumps/ncclguard-r0-*-"$mpid".json >/dev/null 2>&1 && break
        sleep 0.25
    done
    if ls "$d"/dumps/ncclguard-r0-*-"$mpid".json >/dev/null 2>&1; then
        pass "a process with a communicator has a marker (pid, start time, signal), and dumps on it"
    else
        fail "dump on the marker's signal" "no dump for pid $mpid: $(tail -n 3 "$d/out")"
    fi
else
    fail "node marker" "'${marker:-none}': $(cat "$marker" 2>/dev/null) $(tail -n 3 "$d/out")"
fi
[ -n "$mpid" ] && kill -KILL "$mpid" 2>/dev/null
wait $jpid 2>/dev/null
[ -n "$marker" ] && rm -f "$marker" # a killed process cannot remove its own
# the marker of a process that is gone, and one of a pid that is another process now
# (this shell's, with a start time that is not its own): the next marker sweeps both
mkdir -p "$MARKERS"
gone=$(( $(cat /proc/sys/kernel/pid_max) - 1 ))
[ -d "/proc/$gone" ] && gone=
for p in $gone $$; do
    printf '{"schema":"ncclguard.marker/1","pid":%s,"start_time":1,"dump_signal":12}\n' "$p" \
        >"$MARKERS/$p"
done
printf 'not a marker\n' >"$MARKERS/hostile-$$.other"
d=$TMP/marker-exit
job "$d" SLURM_JOB_ID="hostile-exit-$$" NCCLGUARD_DUMP_AT_EXIT=1 NCCLGUARD_DUMP_DIR="$d/dumps"
if [ ! -e "$MARKERS/$$" ] && { [ -z "$gone" ] || [ ! -e "$MARKERS/$gone" ]; } &&
    [ -e "$MARKERS/hostile-$$.other" ]; then
    pass "markers of processes that are gone are removed; other files are left alone"
else
    fail "stale markers" "$(ls "$MARKERS" | head)"
fi
rm -f "$MARKERS/hostile-$$.other" "$MARKERS/$$" ${gone:+"$MARKERS/$gone"}
epid=$(ls "$d"/dumps 2>/dev/null | sed -n 's/^ncclguard-r0-.*-\([0-9]*\)\.json$/\1/p' | head -n 1)
if [ $rc -eq 0 ] && [ -n "$epid" ] && [ ! -e "$MARKERS/$epid" ] &&
    ! grep -qs "\"job\":\"hostile-exit-$$\"" "$MARKERS"/*; then
    pass "a process that exits removes its marker"
else
    fail "marker removed at exit" "rc=$rc pid=${epid:-?} $(ls "$MARKERS" 2>&1)"
fi

# --- shared places: files and directories someone else planted (issue 19) ----------------
# Each reader of a shared place (the trigger file, the node markers, a dump directory)
# takes only a regular file or directory of ours that nobody else may write: a FIFO, a
# symlink, a device, an oversized file or a stranger's file is refused with one line and
# never waited on. A second user is simulated with setpriv (root only).
OTHER=
if [ "$(id -u)" -eq 0 ] && setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null
then
    chmod 711 "$TMP" # nobody may pass through, as through a shared working directory
    OTHER="setpriv --reuid=nobody --regid=nogroup --clear-groups"
fi
NOBODY=$(id -u nobody 2>/dev/null || echo 65534)
# bg_job DIR VAR=value... -- TRAINLOOP ARGS...: a 2-rank job in the background, in a session
# of its own ($bg: its id, for stop_job); combined output in DIR/out
bg_job() {
    local dir=$1 vars=(); shift
    while [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    mkdir -p "$dir/node"
    # exec: $! is setsid, which makes the session (its id is $!); no `timeout`, which
    # would leave it for a process group of its own: launch --timeout bounds the job
    (cd "$dir" && exec setsid env -i PATH="$PATH" HOME="$TMP/home" \
        ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} ${TSAN_OPTIONS:+TSAN_OPTIONS=$TSAN_OPTIONS} \
        LD_LIBRARY_PATH="$FAKES" "${vars[@]}" "$LAUNCH" -n 2 --timeout 280 -- \
        env LD_PRELOAD="$(preload)" "$TRAIN" --quiet "$@" >"$dir/out" 2>&1) &
    bg=$!
}
stop_job() { kill -KILL -- "-$1" 2>/dev/null; wait "$1" 2>/dev/null; }
ndumps() { find "$1" -maxdepth 1 -name 'ncclguard-r*.json' 2>/dev/null | wc -l; }
nlines() { grep -c "$2" "$1" 2>/dev/null; }
# (for wait_for, which runs its command again each time)
dumps_ge() { [ "$(ndumps "$1")" -ge "$2" ]; }
lines_gt() { [ "$(nlines "$1" "$2")" -gt "$3" ]; }
markers_ge() { [ "$(find "$1" -name '[0-9]*' 2>/dev/null | wc -l)" -ge "$2" ]; }

# A FIFO named TRIGGER in the dump directory before the job starts: the rank that times
# out must still dump (it used to block in open(2) on it: no dump, no fan-out, no kill).
d=$TMP/trigger-fifo
mkdir -p "$d/dumps" && chmod 700 "$d/dumps" && mkfifo "$d/dumps/TRIGGER"
bg_job "$d" NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=60 NCCLGUARD_DUMP_DIR="$d/dumps" \
    NCCLGUARD_NODE_DIR="$d/node" NCCLGUARD_TRIGGER_POLL_S=1 -- --steps 100 --hang-rank 1 \
    --hang-step 3
wait_for 120 dumps_ge "$d/dumps" 2
stop_job $bg
if [ "$(ndumps "$d/dumps")" -ge 2 ] && [ "$(nlines "$d/out" "trigger file $d/dumps/TRIGGER \
ignored (a FIFO, not a regular file)")" -ge 1 ] && [ -p "$d/dumps/TRIGGER" ]; then
    pass "a FIFO named TRIGGER before start: the timed-out rank dumps, the node fans out, one line"
else
    fail "FIFO TRIGGER before start" "dumps=$(ndumps "$d/dumps") $(grep -a 'ncclguard:' "$d/out" |
        tail -n 4)"
fi

# After start, the elected poller stats TRIGGER every period: a FIFO, a symlink, a device,
# an oversized file, one its group may write and one of another user are each refused with
# one line and start nothing; the poller then still takes a real trigger.
d=$TMP/trigger-kinds
mkdir -p "$d/dumps" && chmod 700 "$d/dumps"
bg_job "$d" NCCLGUARD_DUMP_DIR="$d/dumps" NCCLGUARD_NODE_DIR="$d/node" NCCLGUARD_TRIGGER_POLL_S=1 \
    -- --steps 100000000 --compute-ms 20
T=$d/dumps/TRIGGER
wait_for 120 markers_ge "$d/node" 2 # both ranks have a communicator
# plant NAME WHY CMD...: CMD makes $T.new, which replaces TRIGGER; then one more "ignored"
# line saying WHY must come, and no dump
plant_trigger() {
    local name=$1 why=$2 before; shift 2
    before=$(nlines "$d/out" "trigger file $T ignored")
    rm -f "$T.new"; "$@" && mv -T "$T.new" "$T" || { skip "TRIGGER $name" "cannot make one"; return; }
    if wait_for 60 lines_gt "$d/out" "trigger file $T ignored" "$before" &&
        grep -q "trigger file $T ignored ($why)" "$d/out" && [ "$(ndumps "$d/dumps")" -eq 0 ]; then
        pass "TRIGGER made after start is $name: refused with one line, no dump"
    else
        fail "TRIGGER after start: $name" "dumps=$(ndumps "$d/dumps") $(grep -a 'ncclguard:' \
            "$d/out" | tail -n 3)"
    fi
}
printf 'r0@h\n' >"$d/target"
plant_trigger "a FIFO" "a FIFO, not a regular file" mkfifo "$T.new"
plant_trigger "a symlink" "a symbolic link, which is not followed" ln -s "$d/target" "$T.new"
plant_trigger "a device" "a character device, not a regular file" mknod "$T.new" c 1 5
plant_trigger "an oversized file" "too large (5000 bytes; the limit is 4096)" \
    sh -c "head -c 5000 /dev/zero | tr '\\0' x >'$T.new'"
plant_trigger "group-writable" "writable by its group (mode 0664)" \
    sh -c "printf 'x\\n' >'$T.new' && chmod 664 '$T.new'"
plant_trigger "another user's" "owned by uid $NOBODY, not by you (uid $(id -u)) nor by root" \
    sh -c "printf 'x\\n' >'$T.new' && chown nobody '$T.new'"
rm -f "$T"
"$NG" dump --dir "$d/dumps" --incident after-hostile >/dev/null 2>&1
if wait_for 120 dumps_ge "$d/dumps" 2; then
    pass "after the refused TRIGGER files, the poller still takes a real trigger (2 dumps)"
else
    fail "poller alive after hostile TRIGGER files" "$(grep -a 'ncclguard:' "$d/out" | tail -n 3)"
fi
stop_job $bg

# The poller's lock files in the node directory: removed when their job ends, and a stale
# one (no process holds it) is swept by the next poller; one that is held stays.
d=$TMP/locks
N=$d/node/ncclguard-$(id -u)
mkdir -p "$N" && chmod 700 "$N"
: >"$N/poller-00000000deadbeef.lock"
: >"$N/poller-00000000cafef00d.lock"
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(300)' "$N/poller-00000000cafef00d.lock" &
holder=$!
wait_for 30 sh -c "! flock -n '$N/poller-00000000cafef00d.lock' true"
(cd "$TMP" && mkdir -p "$d" && clean LD_LIBRARY_PATH="$FAKES" NCCLGUARD_NODE_DIR="$d/node" \
    NCCLGUARD_TRIGGER_POLL_S=1 NCCLGUARD_DUMP_DIR="$d/dumps" -- timeout 120 "$LAUNCH" -n 2 \
    --timeout 100 -- env LD_PRELOAD="$(preload)" "$TRAIN" --steps 60 --compute-ms 40 --quiet \
    >"$d/out" 2>&1)
rc=$?
locks=$(cd "$N" && ls poller-*.lock 2>/dev/null | tr '\n' ' ')
kill $holder 2>/dev/null; wait $holder 2>/dev/null
if [ $rc -eq 0 ] && [ "$locks" = "poller-00000000cafef00d.lock " ]; then
    pass "lock files: the job's own is gone after it, a stale one swept, a held one kept"
else
    fail "poller lock files" "rc=$rc left: $locks"
fi

# A process that exits while its dump thread is trying the lock (held open 500 ms by the
# test switch, after the file is made) leaves no lock file: its exit waits for the try.
d=$TMP/lock_exit
N=$d/node/ncclguard-$(id -u)
mkdir -p "$N" && chmod 700 "$N"
(cd "$d" && clean LD_LIBRARY_PATH="$FAKES" LD_PRELOAD="$(preload)" NCCLGUARD_NODE_DIR="$d/node" \
    NCCLGUARD_TEST_LOCK_DELAY_MS=500 NCCLGUARD_DUMP_DIR="$d/dumps" -- "$E2E/call_each" \
    >"$d/out" 2>&1)
rc=$?
locks=$(cd "$N" && ls poller-*.lock 2>/dev/null | tr '\n' ' ')
if [ $rc -eq 0 ] && [ -z "$locks" ]; then
    pass "an exit during the dump thread's try at the lock leaves no lock file"
else
    fail "lock file of an exit during a try" "rc=$rc left: $locks"
fi

# Node markers that prove nothing: no start time, a signal of their own (9), a process
# without the library, a FIFO, a symlink, an oversized or group-writable file. `dump --all`
# signals none of them, says why for each, and does not hang; the targets live on.
F=$TMP/forge/ncclguard-$(id -u)
mkdir -p "$F" && chmod 700 "$F"
start_of() { python3 -c 'import sys; s = open("/proc/%s/stat" % sys.argv[1]).read()
print(s[s.rindex(")") + 2:].split()[19])' "$1"; }
forged() { # PID START SIGNAL
    printf '{"schema":"ncclguard.marker/1","pid":%s,"start_time":%s,"rank":0,"local_rank":0,"host":"h","job":"j","dump_signal":%s}\n' \
        "$1" "$2" "$3"
}
victims=()
for _ in 1 2 3 4 5 6 7; do
    env -i PATH="$PATH" LD_PRELOAD="$(preload)" sleep 300 & # env execs: $! becomes sleep
    victims+=($!)
done
sleep 300 & # the same without the library
plain=$!
for v in "${victims[@]}"; do wait_for 30 grep -q libncclguard "/proc/$v/maps"; done
v=("${victims[@]}")
forged "${v[0]}" 0 9 >"$F/${v[0]}"
forged "${v[1]}" "$(start_of "${v[1]}")" 9 >"$F/${v[1]}"
forged "$plain" "$(start_of "$plain")" 12 >"$F/$plain"
mkfifo "$F/${v[2]}"
forged "${v[3]}" "$(start_of "${v[3]}")" 12 >"$TMP/forge/elsewhere" && ln -s "$TMP/forge/elsewhere" "$F/${v[3]}"
{ forged "${v[4]}" "$(start_of "${v[4]}")" 12; head -c 5000 /dev/zero | tr '\0' ' '; } >"$F/${v[4]}"
forged "${v[5]}" "$(start_of "${v[5]}")" 12 >"$F/${v[5]}" && chmod 660 "$F/${v[5]}"
out=$(timeout 30 "$NG" dump --node-dir "$TMP/forge" --all 2>&1); rc=$?
alive=0
for p in "${v[@]:0:6}" $plain; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
refused=$(grep -c 'refused: ' <<<"$out")
if [ $rc -eq 1 ] && [ $alive -eq 7 ] && [ "$refused" -eq 7 ] &&
    grep -q "pid ${v[0]} refused: its marker .* names no start time" <<<"$out" &&
    grep -q "pid ${v[1]} refused: it takes signal 9 for a dump, and the dump signal here is 12 (SIGUSR2" \
        <<<"$out" &&
    grep -q "pid $plain refused: libncclguard.so is not mapped in it" <<<"$out" &&
    grep -q "pid ${v[2]} refused: its marker .* is refused (a FIFO, not a regular file)" <<<"$out" &&
    grep -q "pid ${v[3]} refused: .*(a symbolic link, which is not followed)" <<<"$out" &&
    grep -q "pid ${v[4]} refused: .*(too large (" <<<"$out" &&
    grep -q "pid ${v[5]} refused: .*(writable by its group (mode 0660))" <<<"$out"; then
    pass "dump --all: forged markers (start time 0, signal 9, no library, FIFO, symlink, \
oversized, group-writable) signal nothing, one line each, every target alive"
else
    fail "forged markers" "rc=$rc alive=$alive/7 refused=$refused: $out"
fi
rm -rf "$F"
# A process of another user, with the library and a marker in our directory that names it
# rightly: not ours to signal (root could).
if [ -n "$OTHER" ]; then
    mkdir -p "$F" && chmod 700 "$F"
    env -i PATH="$PATH" LD_PRELOAD="$(preload)" $OTHER sleep 300 &
    theirs=$!
    wait_for 30 grep -q libncclguard "/proc/$theirs/maps"
    forged "$theirs" "$(start_of "$theirs")" 12 >"$F/$theirs"
    out=$(timeout 30 "$NG" dump --node-dir "$TMP/forge" --all 2>&1); rc=$?
    if [ $rc -eq 1 ] && kill -0 "$theirs" 2>/dev/null &&
        grep -q "pid $theirs refused: it runs as uid $NOBODY/$NOBODY, not as you" <<<"$out"; then
        pass "dump --all: a marker naming another user's process signals nothing"
    else
        fail "another user's process" "rc=$rc: $out"
    fi
    kill "$theirs" 2>/dev/null; wait "$theirs" 2>/dev/null
    rm -rf "$F"
fi
# A marker directory another user made first, open to everyone: refused whole, even with a
# marker that would prove its process (start time, library, the configured signal).
if [ -n "$OTHER" ]; then
    mkdir -p "$TMP/foreign" && chmod 1777 "$TMP/foreign"
    $OTHER sh -c "mkdir -m 0777 '$TMP/foreign/ncclguard-$(id -u)'"
    chmod 0777 "$TMP/foreign/ncclguard-$(id -u)" # whatever nobody's umask was
    $OTHER sh -c "$(declare -f forged); forged ${v[6]} $(start_of "${v[6]}") 12 \
        >'$TMP/foreign/ncclguard-$(id -u)/${v[6]}'"
    out=$(timeout 30 "$NG" dump --node-dir "$TMP/foreign" --all 2>&1); rc=$?
    if [ $rc -eq 1 ] && kill -0 "${v[6]}" 2>/dev/null && [ "$(wc -l <<<"$out")" -eq 1 ] &&
        grep -q "the marker directory $TMP/foreign/ncclguard-$(id -u) is refused (owned by uid \
$NOBODY, not by you (uid $(id -u))): nothing signalled" <<<"$out"; then
        pass "dump --all: a 0777 marker directory of another user is refused with one line"
    else
        fail "foreign marker directory" "rc=$rc: $out"
    fi
    # the shim itself neither writes nor trusts it: the job runs, nothing of ours lands there
    d=$TMP/foreign-job
    job "$d" NCCLGUARD_NODE_DIR="$TMP/foreign" NCCLGUARD_TRIGGER_POLL_S=1
    if [ $rc -eq 0 ] && [ "$(ls "$TMP/foreign/ncclguard-$(id -u)")" = "${v[6]}" ]; then
        pass "the shim writes no marker or lock into another user's node directory"
    else
        fail "shim and a foreign node directory" "rc=$rc $(ls "$TMP/foreign/ncclguard-$(id -u)")"
    fi
    # our own directory, but open to everyone: refused too
    chown root "$TMP/foreign/ncclguard-$(id -u)"
    out=$(timeout 30 "$NG" dump --node-dir "$TMP/foreign" --all 2>&1); rc=$?
    check "dump --all: a marker directory of ours that everyone may write is refused" \
        grep -q "is refused (writable by everyone (mode 0777))" <<<"$out"
else
    skip "foreign marker directory" "needs root and setpriv to play another user"
fi
for p in "${v[@]}" $plain; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done

# The default dump directory ./ncclguard-<job> in a working directory that others may write
# to: a symlink someone planted there is not followed, and a directory of theirs is not used;
# the dumps go to $TMPDIR, with one line.
if [ -n "$OTHER" ]; then
    W=$TMP/shared-cwd
    mkdir -p "$W" "$TMP/victim" "$TMP/tmpdir2" && chmod 1777 "$W" && chmod 700 "$TMP/victim"
    $OTHER ln -s "$TMP/victim" "$W/ncclguard-symjob"
    $OTHER mkdir -m 0777 "$W/ncclguard-ownjob"
    for jobid in symjob ownjob; do
        case $jobid in
        symjob) why="EPERM: a symbolic link, not followed" ;;
        ownjob) why="EPERM: owned by uid $NOBODY, not by you" ;;
        esac
        job "$W" SLURM_JOB_ID=$jobid TMPDIR="$TMP/tmpdir2" NCCLGUARD_DUMP_AT_EXIT=1
        got=$(ls "$TMP"/tmpdir2/ncclguard-$jobid/ncclguard-r0-*.json 2>/dev/null | wc -l)
        if [ $rc -eq 0 ] && [ "$got" -eq 1 ] && [ -z "$(find "$TMP/victim" "$W/ncclguard-ownjob" -mindepth 1)" ] &&
            [ "$(grep -c "cannot write dumps to $W/ncclguard-$jobid ($why): dumps go to \
$TMP/tmpdir2/ncclguard-$jobid" "$W/out")" -eq 1 ]; then
            pass "default dump directory is ${why#EPERM: }: not used, dumps in \$TMPDIR, one line"
        else
            fail "default dump directory ($jobid)" "rc=$rc dumps=$got victim: $(ls -A "$TMP/victim") \
$(grep 'dump' "$W/out" | tail -n 2)"
        fi
    done
else
    skip "default dump directory planted by another user" "needs root and setpriv"
fi

# The analyzer's memory is bounded by its input: a dump whose 50 communicators claim 4M
# ranks each (16 MiB of members each), and 5 more with ops 2M seqs apart (144 MB of seqs
# each), against the same dump as it was written.
src=$(ls "$TMP"/tmpdir2/ncclguard-symjob/*.json "$TMP"/secrets/dumps/*.json 2>/dev/null | head -n 1)
if [ -n "$src" ]; then
    mkdir -p "$TMP/mem/plain" "$TMP/mem/claims"
    cp "$src" "$TMP/mem/plain/"
    python3 - "$src" "$TMP/mem/claims/$(basename "$src")" <<'PY'
import copy, json, sys
d = json.load(open(sys.argv[1]))
c0, op0 = d["comms"][0], copy.deepcopy(d["ops"][0])
for i in range(55):  # 50 that claim 4M ranks, 5 of one rank whose ops are 2M seqs apart
    c = copy.deepcopy(c0)
    n = 4 << 20 if i < 50 else 1
    c.update(id="%016x" % (0x7e57000000000000 + i), nranks=n, rank=0, peers=[])
    d["comms"].append(c)
    for seq in (1, 2000000) if i >= 50 else (1,):
        o = copy.deepcopy(op0)
        o.update(comm=c["id"], seq=seq, p2p_seq=None, op="AllReduce", comm_nranks=n)
        d["ops"].append(o)
json.dump(d, open(sys.argv[2], "w"))
PY
    rss() { /usr/bin/time -f '%M' "$NG" analyze "$1" 2>&1 >"$1.out" | tail -n 1; }
    base=$(rss "$TMP/mem/plain") big=$(rss "$TMP/mem/claims")
    size=$(stat -c %s "$TMP/mem/claims/$(basename "$src")")
    bound=$((base + size * 100 / 1024)) # KiB: 100 bytes of memory per byte of input, generously
    notes=$(grep -c 'claims 4194304 ranks, more than the .* bytes of dumps read can bound' \
        "$TMP/mem/claims.out")
    spans=$(grep -c 'seqs 1 and 2000000 are too far apart for this input' "$TMP/mem/claims.out")
    if [ "${big:-0}" -gt 0 ] && [ "$big" -le "$bound" ] && [ "$notes" -eq 50 ] &&
        [ "$spans" -eq 5 ]; then
        pass "analyze: 50 communicators claiming 4M ranks: ${big} KiB RSS (plain ${base} KiB, \
bound ${bound} KiB for $size bytes), each left out with one line"
    else
        fail "analyzer memory" "rss=${big:-?} KiB plain=$base bound=$bound notes=$notes/$spans"
    fi
else
    skip "analyzer memory" "no dump to build the input from"
fi

# trace and analyze on a dump directory holding a FIFO, an oversized (sparse) file and a
# symlink to a device, each named like a dump: one line each, exit 3, no hang.
H=$TMP/hostile-dumps
mkdir -p "$H"
mkfifo "$H/ncclguard-r0-h-1.json"
truncate -s 1100M "$H/ncclguard-r1-h-2.json"
ln -s /dev/zero "$H/ncclguard-r2-h-3.json"
for cmd in trace analyze; do
    if [ $cmd = trace ]; then out=$(timeout 30 "$NG" trace "$H" -o "$TMP/t.json" 2>&1); rc=$?
    else out=$(timeout 30 "$NG" analyze "$H" 2>&1 >/dev/null); rc=$?; fi
    if [ $rc -eq 3 ] && grep -q "r0-h-1.json: .*a FIFO" <<<"$out" &&
        grep -q "r1-h-2.json: too large (1153433600 bytes" <<<"$out" &&
        grep -q "r2-h-3.json: a character device, not a regular file" <<<"$out" &&
        [ "$(grep -c 'h-[123].json' <<<"$out")" -eq 3 ]; then
        pass "$cmd: a FIFO, an oversized file and a device named *.json: one line each, exit 3"
    else
        fail "$cmd on hostile files" "rc=$rc: $out"
    fi
done

finish

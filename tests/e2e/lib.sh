# Shared helpers for the end-to-end scripts in tests/e2e. Source it first.
# Each script calls pass/fail/skip per case and `finish` at the end, which
# prints the "e2e-summary:" line that tests/run reads.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=${B:-build}
ROOT=$PWD
SHIM=$ROOT/$B/libncclguard.so
FAKES=$ROOT/$B/fakes
APPS=$ROOT/$B/apps
NG=$ROOT/$B/ncclguard # the command
E2E=$ROOT/$B/tests/e2e # the small programs of tests/e2e/progs
CHECK="python3 $ROOT/tests/unit/check_dump.py" # the dump checker: $CHECK schema DUMP..., $CHECK completed DIR N...
REAL_NCCL_DIR=${NCCL_HOME:-/usr/local/cuda}/lib
_passed=0 _failed=0 _skipped=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ncclguard-e2e.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

pass() { echo "PASS $1"; _passed=$((_passed + 1)); }
fail() { echo "FAIL $1: ${2:-}"; _failed=$((_failed + 1)); }
skip() { echo "SKIP $1: ${2:-}"; _skipped=$((_skipped + 1)); }
# check NAME CMD...: pass when CMD succeeds
check() { local n=$1; shift; if "$@"; then pass "$n"; else fail "$n" "command failed: $*"; fi; }
finish() { echo "e2e-summary: passed=$_passed failed=$_failed skipped=$_skipped"; [ $_failed -eq 0 ]; }
# needs_harness NAME PROGRAM...: unless ncclguard ($NG), each PROGRAM and the fake
# libnccl.so.2 are built, says SKIP NAME and ends the script
needs_harness() {
    local name=$1 p ok=1
    shift
    for p in "$NG" "$@"; do [ -x "$p" ] || ok=0; done
    [ -e "$FAKES/libnccl.so.2" ] || ok=0
    [ $ok -eq 1 ] && return
    skip "$name" "ncclguard or the harness not built"; finish; exit
}
# dumps_sane: every dump the script's jobs wrote under $TMP shows what any dump must
# ($CHECK tree): one case, for scripts that write dumps, before finish
dumps_sane() {
    local out
    if out=$($CHECK tree "$TMP" 2>&1); then pass "${out#check_dump: }"
    else fail "every dump consistent" "$out"; fi
}

# wait_for N CMD...: polls CMD every 0.2 s, up to N seconds (a bound for a broken
# run, not a measurement); fails when CMD never succeeded.
wait_for() {
    local n=$1; shift
    for _ in $(seq $((n * 5))); do "$@" && return 0; sleep 0.2; done
    return 1
}

# clean VAR=value... -- CMD...: CMD with nothing else in its environment (but PATH, HOME in
# $TMP/home, and the sanitizers' options where set)
clean() {
    local vars=()
    while [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    env -i PATH="$PATH" HOME="$TMP/home" ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} \
        ${TSAN_OPTIONS:+TSAN_OPTIONS=$TSAN_OPTIONS} "${vars[@]}" "$@"
}

# show NAME [N]: the last N (12) lines of job NAME's output, printed after a failed case
show() { echo "--- $1 (last lines)"; tail -n "${2:-12}" "$TMP/$1/out"; }

# job NAME LAUNCH_ARGS -- TRAINLOOP_ARGS: trainloop under launch and the shim, in
# $TMP/NAME, with dumps in $TMP/NAME/dumps and the combined output (the
# launcher's too) in $TMP/NAME/out; sets $rc. A script may define a job of its own.
#  - RANKENV: shell code each rank runs before trainloop (one rank's variables);
#  - UNTIL: for a job that hangs, a shell command: the job runs in a session of its
#    own and is killed whole once UNTIL succeeds (SIGKILL: no teardown dumps that
#    would replace the ones to check), or after 120 s; $rc is then 0 when UNTIL
#    succeeded.
# dumped NAME [N]: an UNTIL command, true once N (4) dumps of job NAME belong to an incident
dumped() { echo "[ \$(grep -l '\"incident\":\"' $TMP/$1/dumps/*.json 2>/dev/null | wc -l) -ge ${2:-4} ]"; }

job() {
    local name=$1; shift
    local largs=()
    while [ "$1" != -- ]; do largs+=("$1"); shift; done
    shift
    mkdir -p "$TMP/$name"
    local cmd=("$APPS/launch" "${largs[@]}" --)
    [ -z "${RANKENV:-}" ] || cmd+=(/bin/sh -c "$RANKENV; exec \"\$@\"" sh)
    cmd+=("$APPS/trainloop" "$@")
    if [ -z "${UNTIL:-}" ]; then
        (cd "$TMP/$name" && NCCLGUARD_DUMP_DIR=$TMP/$name/dumps under_shim "${cmd[@]}" \
            >"$TMP/$name/out" 2>&1)
        rc=$?
        return 0
    fi
    (cd "$TMP/$name" && NCCLGUARD_DUMP_DIR=$TMP/$name/dumps exec setsid env \
        LD_PRELOAD="$(preload)" LD_LIBRARY_PATH="$FAKES${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "${cmd[@]}" >"$TMP/$name/out" 2>&1) &
    local pid=$!
    wait_for 120 bash -c "$UNTIL"
    rc=$?
    kill -KILL -- -$pid 2>/dev/null
    wait $pid 2>/dev/null
    return 0
}

# hang NAME RANKS UNTIL VAR=value...: a job of RANKS ranks whose rank 1 hangs in host code at
# step 3, with these variables, a 2 s timeout and 600 s for the first op, stopped once the
# shell command UNTIL succeeds (see job; in a subshell, so $rc is not set)
hang() {
    local name=$1 ranks=$2 until=$3; shift 3
    (export "$@" NCCLGUARD_TIMEOUT=2 NCCLGUARD_FIRST_TIMEOUT=600
     UNTIL=$until job "$name" -n "$ranks" --timeout 120 -- --steps 100 --hang-rank 1 \
        --hang-step 3 --quiet)
}

# LD_PRELOAD value for the shim; under SANITIZE=1 the ASan runtime must come first.
preload() {
    case "${SANITIZE:-}" in
    1) echo "$(gcc -print-file-name=libasan.so):$SHIM" ;;
    thread) echo "$(gcc -print-file-name=libtsan.so):$SHIM" ;;
    *) echo "$SHIM" ;;
    esac
}
# with_fakes CMD...: run CMD with the CPU harness on the library path
with_fakes() { LD_LIBRARY_PATH=$FAKES${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"; }
# under_shim CMD...: run CMD with the fakes and the shim preloaded
under_shim() { LD_PRELOAD=$(preload) with_fakes "$@"; }
# planted NAME EXPECTED CHECKER PATH...: the self-test of a checker (a command or a
# function). Copies each PATH of the tree into $TMP/NAME, runs the shell code in $edit
# there, and passes when `CHECKER --root $TMP/NAME` then fails with a message that
# contains EXPECTED.
planted() {
    local name=$1 expect=$2 checker=$3 tree=$TMP/$1 out
    shift 3
    mkdir -p "$tree" && (cd "$ROOT" && cp -r "$@" "$tree/")
    (cd "$tree" && eval "$edit")
    if out=$("$checker" --root "$tree" 2>&1); then
        fail "planted $name is caught" "the checker passed"
    elif grep -qF -- "$expect" <<<"$out"; then
        pass "planted $name is caught"
    else
        fail "planted $name is caught" "got: $out"
    fi
}

# verdict NAME WANT [ANALYZE_ARGS...]: analyze $TMP/NAME/dumps; WANT is "healthy", or the
# culprits as "rank:cause ..." in the verdict's order; passes when the verdict is exactly
# that and the exit status matches (0 healthy, 1 culprit).
verdict() {
    local name=$1 want=$2; shift 2
    local dir=$TMP/$name/dumps
    [ -d "$dir" ] || dir=$TMP/$name
    "$NG" analyze --json "$@" "$dir" >"$TMP/$name.json" 2>"$TMP/$name.err"
    local rc=$?
    "$NG" analyze "$@" "$dir" >"$TMP/$name.txt" 2>/dev/null
    local got
    got=$(python3 - "$TMP/$name.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
assert v["schema"] == "ncclguard.analysis/1", v["schema"]
c = v["verdict"]["culprits"]
assert v["verdict"]["healthy"] == (not c and not v["stuck"]), v["verdict"]
for x in c:
    assert set(x) >= {"rank", "host", "pid", "cause", "comm", "seq", "chain", "where"}, x
print("healthy" if v["verdict"]["healthy"] else
      " ".join(f"{x['rank']}:{x['cause']}" for x in c) or "no-culprit")
PY
)
    local want_rc=1
    [ "$want" = healthy ] && want_rc=0
    if [ "$got" = "$want" ] && [ $rc -eq $want_rc ]; then
        pass "$name: $(head -n 1 "$TMP/$name.txt" | cut -c1-160)"
    else
        fail "$name" "want '$want' (exit $want_rc), got '$got' (exit $rc): $(head -n 3 "$TMP/$name.txt")"
        tail -n 5 "$TMP/$name/out" 2>/dev/null
    fi
}

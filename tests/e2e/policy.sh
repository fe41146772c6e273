#!/usr/bin/env bash
# Site policy end to end: hostile config files, the precedence of real files and
# variables, locks, conditional sections, logging once per node, a parent and a
# child that both apply the policy, the example site file, and `ncclguard
# envcheck` on the blog recipe against the real NVIDIA libnccl.so.2 and the fake.
# The policy runs in the constructor of build/tests/e2e/policy_probe, as it does
# in the preloaded library.
source "$(dirname "$0")/lib.sh"
PROBE=$E2E/policy_probe
REAL=$REAL_NCCL_DIR/libnccl.so.2
FAKE=$FAKES/libnccl.so.2
EXAMPLE=$ROOT/docs/examples/site.conf
mkdir -p "$TMP/home"
RECIPE=(NCCL_IBEXT_DISABLE=1 NCCL_TIMEOUT=1800 NCCL_BUFFSIZE=1048576
        NCCL_IB_TC=106 NCCL_IB_MTU=4096 NCCL_MAX_RINGS=8 NCCL_MIN_NRINGS=4)

# probe CONFIG ARGS...: the probe with CONFIG as the site file (NCCLGUARD_TEST_SITE_CONFIG:
# tests/e2e/hostile.sh checks that it cannot replace a real /etc/ncclguard.conf) and the
# variables of EXTRA;
# stdout in $TMP/out, stderr in $TMP/err
probe() {
    local conf=$1; shift
    clean NCCLGUARD_TEST_SITE_CONFIG="$conf" "${EXTRA[@]}" -- timeout 20 "$PROBE" "$@" \
        >"$TMP/out" 2>"$TMP/err"
}
EXTRA=()
lines() { grep -c "$1" "$2"; }

if [ ! -x "$PROBE" ] || [ ! -x "$NG" ]; then
    fail "build" "$PROBE or $NG missing: make $B/tests/e2e/policy_probe $B/ncclguard"
    finish
    exit 1
fi

# --- no config file: nothing happens, nothing is said ------------------------------------
probe /nonexistent/ncclguard.conf --setting timeout --env NCCLGUARD_POLICY_APPLIED
if [ $? -eq 0 ] && [ ! -s "$TMP/err" ] && grep -q '^timeout=300s (built-in)$' "$TMP/out" &&
    grep -q '^NCCLGUARD_POLICY_APPLIED unset$' "$TMP/out"; then
    pass "no config file: built-in settings, no message, environment untouched"
else
    fail "no config file" "$(cat "$TMP/out" "$TMP/err")"
fi

# --- hostile files: a normal start with defaults and one clear line ------------------------
# hostile NAME PATH EXPECTED-REASON
hostile() {
    local name=$1 path=$2 reason=$3
    probe "$path" --setting timeout --env NCCL_FROM_FILE
    local rc=$? n
    n=$(grep -c '^ncclguard: ' "$TMP/err")
    if [ $rc -eq 0 ] && [ "$n" -eq 1 ] && grep -q "site config file ignored ($path): $reason" \
        "$TMP/err" && grep -q '^timeout=300s (built-in)$' "$TMP/out" &&
        grep -q '^NCCL_FROM_FILE unset$' "$TMP/out"; then
        pass "hostile file: $name"
    else
        fail "hostile file: $name" "rc=$rc lines=$n $(cat "$TMP/err" "$TMP/out" | head -5)"
    fi
}
GOOD=$'timeout = 5\n[env.default]\nNCCL_FROM_FILE = 1\n'
cp "$(type -P true)" "$TMP/garbage.conf"
hostile "binary garbage" "$TMP/garbage.conf" "not a text file"
{ printf '%s' "$GOOD"; yes '# padding' | head -c $((50 * 1024 * 1024)); } >"$TMP/huge.conf"
hostile "a 50 MB file" "$TMP/huge.conf" "too large (52428[0-9]* bytes; the limit is 1048576)"
rm -f "$TMP/huge.conf"
mkfifo "$TMP/fifo.conf"
hostile "a FIFO (never opened, so nothing blocks)" "$TMP/fifo.conf" "a FIFO, not a regular file"
ln -s /dev/zero "$TMP/zero.conf"
hostile "a symlink to /dev/zero" "$TMP/zero.conf" "a character device, not a regular file"
mkdir "$TMP/dir.conf"
hostile "a directory" "$TMP/dir.conf" "a directory, not a regular file"
printf '%s' "$GOOD" >"$TMP/ww.conf"; chmod 666 "$TMP/ww.conf"
hostile "a world-writable file" "$TMP/ww.conf" "world-writable (mode 0666)"
printf '%s' "$GOOD" >"$TMP/other.conf"; chown 12345:12345 "$TMP/other.conf"
hostile "a file owned by another user" "$TMP/other.conf" "owned by uid 12345, which is neither"
# unreadable: a root-owned 0600 file, read by an unprivileged process
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    mkdir -m 755 "$TMP/pub"; printf '%s' "$GOOD" >"$TMP/pub/secret.conf"
    chmod 600 "$TMP/pub/secret.conf"; chmod 755 "$TMP"
    clean NCCLGUARD_TEST_SITE_CONFIG="$TMP/pub/secret.conf" -- timeout 20 setpriv --reuid=65534 \
        --regid=65534 --clear-groups "$PROBE" --setting timeout --env NCCL_FROM_FILE \
        >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c '^ncclguard: ' "$TMP/err")" -eq 1 ] &&
        grep -q "cannot open it (Permission denied)" "$TMP/err" &&
        grep -q '^timeout=300s (built-in)$' "$TMP/out"; then
        pass "hostile file: unreadable by the process (uid 65534)"
    else
        fail "hostile file: unreadable" "rc=$rc $(cat "$TMP/err" "$TMP/out" | head -5)"
    fi
    chmod 700 "$TMP"
else
    skip "hostile file: unreadable" "needs root and setpriv to read as another user"
fi
# malformed lines: reported with file:line, the rest applies
printf 'timeout = 42\ntimeout = soon\n[env.default]\nNCCL_OK = 1\nno equals here\n' >"$TMP/bad.conf"
probe "$TMP/bad.conf" --setting timeout --env NCCL_OK
if [ $? -eq 0 ] &&
    grep -q "^ncclguard: .*$TMP/bad.conf:2: timeout: 'soon' is not a duration.*; line ignored$" \
        "$TMP/err" && grep -q "$TMP/bad.conf:5: .*; line ignored$" "$TMP/err" &&
    grep -q "^timeout=42s (site $TMP/bad.conf:1)$" "$TMP/out" &&
    grep -q '^NCCL_OK=1$' "$TMP/out"; then
    pass "malformed lines are reported as file:line and skipped; the rest applies"
else
    fail "malformed lines" "$(cat "$TMP/err" "$TMP/out")"
fi

# --- precedence of real sources: site < user < env < site lock -------------------------------
mkdir -p "$TMP/xdg"
printf '%s\n' 'timeout = 101' 'slow_ms = 11' 'poll_ms = 21' '[env.default]' 'NCCL_P_SITE = site' \
    'NCCL_P_BOTH = site' >"$TMP/site.conf"
printf 'timeout = 102\nslow_ms = 12\n[env.default]\nNCCL_P_BOTH = user\n' >"$TMP/xdg/ncclguard.conf"
EXTRA=(XDG_CONFIG_HOME="$TMP/xdg" NCCLGUARD_TIMEOUT=103 NCCL_P_SITE=env)
probe "$TMP/site.conf" --setting timeout --setting slow_ms --setting poll_ms --setting ring \
    --env NCCL_P_SITE --env NCCL_P_BOTH
if grep -q '^timeout=103s (env NCCLGUARD_TIMEOUT)$' "$TMP/out" &&
    grep -q "^slow_ms=12 (user $TMP/xdg/ncclguard.conf:2)$" "$TMP/out" &&
    grep -q "^poll_ms=21 (site $TMP/site.conf:3)$" "$TMP/out" &&
    grep -q '^ring=4096 (built-in)$' "$TMP/out" &&
    grep -q '^NCCL_P_SITE=env$' "$TMP/out" && grep -q '^NCCL_P_BOTH=user$' "$TMP/out"; then
    pass "precedence: env > user file > site file > built-in"
else
    fail "precedence" "$(cat "$TMP/out" "$TMP/err")"
fi
printf 'lock = timeout\ntimeout = 101\n' >"$TMP/locked.conf"
probe "$TMP/locked.conf" --setting timeout
if grep -q "^timeout=101s (site $TMP/locked.conf:2 (locked))$" "$TMP/out" &&
    grep -q "NCCLGUARD_TIMEOUT=103 ignored (environment): the site locked timeout" "$TMP/err" &&
    grep -q "ncclguard.conf:1: timeout is locked by the site file" "$TMP/err"; then
    pass "precedence: a site lock beats the user file and the environment, and says so"
else
    fail "locks" "$(cat "$TMP/out" "$TMP/err")"
fi
EXTRA=()

# --- conditional sections --------------------------------------------------------------------
mkdir -p "$TMP/root/proc/driver/nvidia/gpus/0000:01:00.0" "$TMP/root/sys/class/infiniband/mlx5_0"
printf 'Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: 1\n' \
    >"$TMP/root/proc/driver/nvidia/gpus/0000:01:00.0/information"
cat >"$TMP/when.conf" <<'EOF'
[when gpu=H100* ib=yes world_size=8..1024 nodes>=2 job=train-*]
env.default.NCCL_WHEN_MATCH = yes
timeout = 77
[when gpu=*A100*]
env.default.NCCL_WHEN_OTHER = yes
[when gpus>=8]
env.default.NCCL_WHEN_GPUS = yes
EOF
EXTRA=(NCCLGUARD_TEST_SYSROOT="$TMP/root" WORLD_SIZE=16 LOCAL_WORLD_SIZE=8 SLURM_JOB_NAME=train-7)
probe "$TMP/when.conf" --env NCCL_WHEN_MATCH --env NCCL_WHEN_OTHER --env NCCL_WHEN_GPUS \
    --setting timeout
if grep -q '^NCCL_WHEN_MATCH=yes$' "$TMP/out" && grep -q '^NCCL_WHEN_OTHER unset$' "$TMP/out" &&
    grep -q '^NCCL_WHEN_GPUS unset$' "$TMP/out" &&
    grep -q "^timeout=77s (site $TMP/when.conf:3)$" "$TMP/out"; then
    pass "conditional sections: a matching one applies, others do not"
else
    fail "conditional sections" "$(cat "$TMP/out" "$TMP/err")"
fi
EXTRA=(NCCLGUARD_TEST_SYSROOT="$TMP/root" WORLD_SIZE=16 LOCAL_WORLD_SIZE=16 SLURM_JOB_NAME=train-7)
probe "$TMP/when.conf" --env NCCL_WHEN_MATCH --setting timeout
if grep -q '^NCCL_WHEN_MATCH unset$' "$TMP/out" &&
    grep -q '^timeout=300s (built-in)$' "$TMP/out"; then
    pass "conditional sections: one unmet term (nodes>=2 on one node) disables the section"
else
    fail "conditional sections (one node)" "$(cat "$TMP/out" "$TMP/err")"
fi
EXTRA=()

# --- logging once per node, with provenance ---------------------------------------------------
printf '[env.default]\nNCCL_IB_TIMEOUT = 22\n' >"$TMP/one.conf"
: >"$TMP/all.err"
for r in 0 1 2 3; do
    EXTRA=(LOCAL_RANK=$r RANK=$r)
    probe "$TMP/one.conf" --env NCCL_IB_TIMEOUT
    grep -q '^NCCL_IB_TIMEOUT=22$' "$TMP/out" || echo "rank $r: $(cat "$TMP/out")" >>"$TMP/all.err"
    cat "$TMP/err" >>"$TMP/all.err"
done
EXTRA=()
if [ "$(grep -c 'NCCL_IB_TIMEOUT' "$TMP/all.err")" -eq 1 ] &&
    grep -q "^ncclguard: \[rank 0 host [^]]*\] NCCL_IB_TIMEOUT=22 (site default, \
$TMP/one.conf:2; was unset)$" "$TMP/all.err"; then
    pass "each change is applied on every rank and logged once per node, with its provenance"
else
    fail "once per node" "$(cat "$TMP/all.err")"
fi

# --- parent and child both apply the policy ---------------------------------------------------
cat >"$TMP/pc.conf" <<'EOF'
[env.default]
NCCL_IB_TIMEOUT = 22
[env.force]
NCCL_DEBUG = WARN
[env.forbid]
NCCL_TIMEOUT
[when world_size>=64]
env.default.NCCL_IB_TIMEOUT = 23
EOF
EXTRA=(NCCL_DEBUG=INFO NCCL_TIMEOUT=5)
probe "$TMP/pc.conf" --changes --exec "$PROBE" --changes --env NCCL_IB_TIMEOUT --env NCCL_DEBUG \
    --env NCCL_TIMEOUT
if grep -q '^NCCL_IB_TIMEOUT set$' "$TMP/out" && grep -q '^NCCL_IB_TIMEOUT already$' "$TMP/out" &&
    grep -q '^NCCL_DEBUG forced$' "$TMP/out" && grep -q '^NCCL_DEBUG already$' "$TMP/out" &&
    grep -q '^NCCL_TIMEOUT absent$' "$TMP/out" && grep -q '^NCCL_IB_TIMEOUT=22$' "$TMP/out" &&
    grep -q '^NCCL_DEBUG=WARN$' "$TMP/out" && grep -q '^NCCL_TIMEOUT unset$' "$TMP/out" &&
    [ "$(grep -c '^ncclguard: ' "$TMP/err")" -eq 3 ]; then
    pass "parent then child: the child finds the policy applied and changes and says nothing"
else
    fail "parent/child idempotence" "$(cat "$TMP/out" "$TMP/err")"
fi
# torchrun's case: only the children have WORLD_SIZE
probe "$TMP/pc.conf" --exec /usr/bin/env WORLD_SIZE=64 "$PROBE" --changes --env NCCL_IB_TIMEOUT
if grep -q '^NCCL_IB_TIMEOUT replaced$' "$TMP/out" && grep -q '^NCCL_IB_TIMEOUT=23$' "$TMP/out" &&
    grep -q "NCCL_IB_TIMEOUT=23 (site default, $TMP/pc.conf:8; was '22', from the parent \
process's policy)" "$TMP/err"; then
    pass "a child whose conditions differ replaces the parent's default, not the user's value"
else
    fail "parent/child with different conditions" "$(cat "$TMP/out" "$TMP/err")"
fi
EXTRA=(NCCL_IB_TIMEOUT=18)
probe "$TMP/pc.conf" --exec /usr/bin/env WORLD_SIZE=64 "$PROBE" --env NCCL_IB_TIMEOUT
if grep -q '^NCCL_IB_TIMEOUT=18$' "$TMP/out"; then
    pass "a user's own value survives parent and child"
else
    fail "user's value through parent and child" "$(cat "$TMP/out" "$TMP/err")"
fi
EXTRA=()

# --- NCCLGUARD_DISABLE: no environment change ---------------------------------------------
EXTRA=(NCCLGUARD_DISABLE=1)
probe "$TMP/one.conf" --env NCCL_IB_TIMEOUT
if grep -q '^NCCL_IB_TIMEOUT unset$' "$TMP/out" &&
    grep -q 'NCCLGUARD_DISABLE is on' "$TMP/err"; then
    pass "NCCLGUARD_DISABLE=1: the policy changes nothing and says so"
else
    fail "NCCLGUARD_DISABLE" "$(cat "$TMP/out" "$TMP/err")"
fi
EXTRA=()

# --- the example site file: no problem, and the config object is valid JSON -----------------
EXTRA=("${RECIPE[@]}")
probe "$EXAMPLE" --json --env NCCL_TIMEOUT --env NCCL_MAX_NCHANNELS --env NCCL_BUFFSIZE
if ! grep -q 'line ignored\|section ignored\|config file ignored' "$TMP/err" &&
    grep -q '^NCCL_TIMEOUT unset$' "$TMP/out" && grep -q '^NCCL_MAX_NCHANNELS=8$' "$TMP/out" &&
    grep -q '^NCCL_BUFFSIZE=1048576$' "$TMP/out" &&
    head -n 1 "$TMP/out" | python3 -c '
import json, sys
c = json.load(sys.stdin)
s = c["settings"]
assert s["timeout"]["value"] == 300 and s["timeout"]["locked"], s["timeout"]
assert s["abort_at"]["value"] == 6 and s["kill_at"]["value"] == 6.5
assert c["sources"][0]["status"] == "loaded" and c["sources"][0]["problems"] == 0
out = {e["name"]: e["outcome"] for e in c["env"]}
assert out["NCCL_TIMEOUT"] == "removed" and out["NCCL_MAX_NCHANNELS"] == "set", out
'; then
    pass "docs/examples/site.conf loads without a problem and rewrites the recipe"
else
    fail "example site file" "$(cat "$TMP/err"; head -c 600 "$TMP/out")"
fi
EXTRA=()

# --- the preloaded library applies the policy before main (Python sees it too) ---------------
if [ -e "$SHIM" ] && command -v python3 >/dev/null; then
    clean LD_PRELOAD="$(preload)" NCCLGUARD_TEST_SITE_CONFIG="$EXAMPLE" NCCL_TIMEOUT=1800 -- python3 -c '
import os
e = os.environ
print("NCCL_DEBUG=%s NCCL_TIMEOUT=%s" % (e.get("NCCL_DEBUG"), e.get("NCCL_TIMEOUT")))
' >"$TMP/out" 2>"$TMP/err"
    if grep -qx 'NCCL_DEBUG=WARN NCCL_TIMEOUT=None' "$TMP/out" &&
        grep -q "NCCL_TIMEOUT removed (site forbid, $EXAMPLE:[0-9]*; was '1800')" "$TMP/err"; then
        pass "under LD_PRELOAD the constructor applies the policy before Python reads os.environ"
    else
        fail "policy in the library constructor" "$(cat "$TMP/out" "$TMP/err" | head -5)"
    fi
else
    skip "policy in the library constructor" "$SHIM not built"
fi

# --- envcheck: the recipe against the real NVIDIA libnccl.so.2 --------------------------------
if [ -r "$REAL" ]; then
    clean "${RECIPE[@]}" -- "$NG" envcheck --nccl "$REAL" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    ok=1
    V='NCCL 2\.28\.[0-9]*'
    for pat in \
        "^note: NCCL_IBEXT_DISABLE=1 is not read by $V itself (environment): the IBext transport" \
        '^warning: NCCL_TIMEOUT=1800 is not an NCCL variable (environment): NCCL has no timeout' \
        "^warning: NCCL_BUFFSIZE=1048576 (1 MiB) is below NCCL's default of 4194304 (4 MiB)" \
        "^warning: NCCL_IB_MTU=4096 is not read by $V (environment): NCCL uses the active MTU" \
        "^warning: NCCL_MAX_RINGS=8 is not read by $V (environment): did you mean \
NCCL_MAX_NCHANNELS?$" \
        "^warning: NCCL_MIN_NRINGS=4 is a deprecated alias of NCCL_MIN_NCHANNELS in $V" \
        "^ncclguard envcheck: $V at .*libnccl.so.2 (187 variable names known): \
7 NCCL_\\* variables, 5 warnings, 1 note$"
    do
        grep -q "$pat" "$TMP/out" || { ok=0; echo "missing: $pat"; }
    done
    if [ $rc -eq 0 ] && [ $ok -eq 1 ] && ! grep -q 'NCCL_IB_TC' "$TMP/out"; then
        pass "envcheck: each line of the recipe against the real libnccl.so.2"
    else
        fail "envcheck on the recipe (real NCCL)" "rc=$rc $(cat "$TMP/out" "$TMP/err")"
    fi
    clean "${RECIPE[@]}" -- "$NG" envcheck --strict --nccl "$REAL" >/dev/null 2>&1
    rc1=$?
    clean -- "$NG" envcheck --strict --nccl "$REAL" >/dev/null 2>&1
    rc0=$?
    clean CUDA_HOME=/nonexistent NCCL_HOME=/nonexistent "${RECIPE[@]}" -- "$NG" envcheck --json \
        >"$TMP/json" 2>"$TMP/err"
    rcj=$?
    if [ $rc1 -eq 1 ] && [ $rc0 -eq 0 ] && [ $rcj -eq 0 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "ncclguard.envcheck/1"
assert d["nccl"]["version"].startswith("2.28") and d["nccl"]["known_variables"] == 187, d["nccl"]
kinds = {f["variable"]: (f["severity"], f["kind"]) for f in d["findings"]}
assert kinds == {"NCCL_IBEXT_DISABLE": ("note", "plugin"), "NCCL_TIMEOUT": ("warning", "myth"),
                 "NCCL_BUFFSIZE": ("warning", "value"), "NCCL_IB_MTU": ("warning", "myth"),
                 "NCCL_MAX_RINGS": ("warning", "unknown"),
                 "NCCL_MIN_NRINGS": ("warning", "deprecated")}, kinds
assert d["warnings"] == 5 and d["notes"] == 1 and d["variables"] == 7
' "$TMP/json"; then
        pass "envcheck: --strict exits 1 with warnings and 0 without; --json, found without --nccl"
    else
        fail "envcheck exit codes and --json" \
            "strict=$rc1 clean=$rc0 json=$rcj $(head -c 400 "$TMP/json")"
    fi
    # the same audit in a process, at the first communicator (the shim's hook)
    EXTRA=("${RECIPE[@]}")
    probe /nonexistent --audit "$REAL"
    if [ "$(grep -c '^ncclguard: .*NCCL_' "$TMP/err")" -eq 6 ] &&
        grep -q "NCCL_MAX_RINGS=8 is not read by $V (environment): did you mean \
NCCL_MAX_NCHANNELS?" "$TMP/err"; then
        pass "first-communicator audit in a process that mapped the real libnccl.so.2"
    else
        fail "first-communicator audit (real NCCL)" "$(cat "$TMP/err")"
    fi
    EXTRA=()
    # with the example policy applied first, the recipe's harmful lines are gone
    clean NCCLGUARD_TEST_SYSROOT="$TMP/no-ib" "${RECIPE[@]}" -- \
        "$NG" envcheck --policy --site "$EXAMPLE" --nccl "$REAL" \
        >"$TMP/out" 2>"$TMP/err"
    if grep -q '^ncclguard envcheck: .*: 6 NCCL_\* variables, 1 warning, 1 note$' "$TMP/out" &&
        grep -q '^warning: NCCL_BUFFSIZE=1048576' "$TMP/out"; then
        pass "envcheck --policy: the example policy leaves only the user's NCCL_BUFFSIZE to fix"
    else
        fail "envcheck --policy" "$(cat "$TMP/out" "$TMP/err")"
    fi
else
    skip "envcheck against the real libnccl.so.2" "$REAL is not installed"
fi

# --- envcheck against the fake NCCL: another library, another list ---------------------------
if [ -r "$FAKE" ] && [ -r "$REAL" ]; then
    clean "${RECIPE[@]}" -- "$NG" envcheck --json --nccl "$FAKE" >"$TMP/fake.json" 2>"$TMP/err"
    rcf=$?
    clean "${RECIPE[@]}" -- "$NG" envcheck --json --nccl "$REAL" >"$TMP/real.json" 2>/dev/null
    if [ $rcf -eq 0 ] && python3 -c '
import json, sys
fake, real = (json.load(open(p)) for p in sys.argv[1:3])
# what the bytes of the fake say about one name of the recipe
tc = "known" if b"\0NCCL_IB_TC\0" in open(sys.argv[3], "rb").read() else "unknown"
assert fake["nccl"]["known_variables"] != real["nccl"]["known_variables"], "same list"
fk = {f["variable"]: f["kind"] for f in fake["findings"]}
rk = {f["variable"]: f["kind"] for f in real["findings"]}
assert fk != rk, "same findings"
assert ("NCCL_IB_TC" in fk) == (tc == "unknown"), (tc, fk)
' "$TMP/fake.json" "$TMP/real.json" "$FAKE"; then
        pass "envcheck against the fake NCCL: its own list of names gives other findings"
    else
        fail "envcheck against the fake NCCL" \
            "rc=$rcf $(head -c 600 "$TMP/fake.json") $(cat "$TMP/err")"
    fi
else
    skip "envcheck against the fake NCCL" "$FAKE not built yet"
fi

# --- envcheck: no NCCL, usage ------------------------------------------------------------------
clean -- "$NG" envcheck --nccl "$TMP/nothing-here.so" >/dev/null 2>"$TMP/err"
rc2=$?
clean -- "$NG" frobnicate >/dev/null 2>&1
rc64=$?
clean -- "$NG" envcheck --bogus >/dev/null 2>&1
rc64b=$?
clean -- "$NG" --help >"$TMP/help" 2>&1
rch=$?
if [ $rc2 -eq 2 ] && grep -q 'no NCCL library at' "$TMP/err" && [ $rc64 -eq 64 ] &&
    [ $rc64b -eq 64 ] && [ $rch -eq 0 ] && grep -q '^  envcheck ' "$TMP/help"; then
    pass "envcheck exits 2 without NCCL; bad commands and options exit 64; --help lists envcheck"
else
    fail "exit codes" "no-nccl=$rc2 unknown-cmd=$rc64 bad-opt=$rc64b help=$rch"
fi

finish

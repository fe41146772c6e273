#!/usr/bin/env bash
# The preloaded library itself: exports, dependencies, pass-through against the
# real NVIDIA NCCL and against the fake, inertness in processes that never use
# NCCL, fork safety, the libunwind hazard, missing symbols, NCCLGUARD_DISABLE.
source "$(dirname "$0")/lib.sh"

# --- exports: the entry points of nccl_api.def, the plugins', and dlclose ----------------
expected=$(grep -oE '^NCCL_API(_VOID)?\((ncclResult_t|ng_cstr), [A-Za-z_]+, [A-Za-z]+|^NCCL_API_VOID\([A-Za-z]+' \
    shim/intercept/nccl_api.def | awk -F', ' '{print $NF}' | sed 's/.*(//; s/^/nccl/';
    echo ncclProfiler_v5 ncclEnvPlugin_v1 dlclose | tr ' ' '\n') # intercept/: the plugins', loader.c
expected=$(echo "$expected" | sort)
exported=$(nm -D --defined-only "$SHIM" | awk '{print $3}' | sort)
if [ -n "$expected" ] && [ "$expected" = "$exported" ]; then
    pass "exports are exactly the $(echo "$expected" | wc -l) entry points of nccl_api.def, the plugins and dlclose"
else
    fail "exports" "$(diff <(echo "$expected") <(echo "$exported") | head -n 10)"
fi

# --- dependencies: libc only ------------------------------------------------------------
needed=$(readelf -d "$SHIM" | awk '/NEEDED/ {print $5}' | tr -d '[]' |
    grep -v -e '^libc\.so' -e '^ld-linux' -e '^libasan' -e '^libubsan' -e '^libtsan')
if [ -z "$needed" ]; then pass "NEEDED has the C library only"
else fail "NEEDED has the C library only" "$needed"; fi

# --- pass-through against the real NCCL (no fake libcuda on the path) -------------------
if [ -e "$E2E/nccl_probe" ] && ldd "$E2E/nccl_probe" | grep -q 'libnccl.so.2 => /'; then
    "$E2E/nccl_probe" >"$TMP/real.plain" 2>/dev/null
    LD_PRELOAD=$(preload) "$E2E/nccl_probe" >"$TMP/real.shim" 2>"$TMP/real.err"
    if grep -q 'ncclGetVersion -> 0 version=' "$TMP/real.plain" &&
        grep -q 'ncclCommInitRank -> ' "$TMP/real.plain" &&
        cmp -s "$TMP/real.plain" "$TMP/real.shim"; then
        pass "real libnccl.so.2 answers the same with and without the shim"
    else
        fail "real libnccl.so.2 differential" "$(diff "$TMP/real.plain" "$TMP/real.shim" | head)"
    fi
else
    skip "real libnccl.so.2 differential" "the real libnccl.so.2 is not installed"
fi

# --- the libunwind hazard ------------------------------------------------------------
if [ "${SANITIZE:-}" = 1 ]; then
    skip "exception binding" "ASan interposes _Unwind_RaiseException itself; checked on the plain build"
else
    LD_DEBUG=bindings LD_DEBUG_OUTPUT=$TMP/bind LD_PRELOAD=$(preload) \
        "$E2E/dlopen_throw" "$E2E/libthrow.so" >/dev/null 2>&1
    rc=$?
    binds=$(cat "$TMP"/bind.* 2>/dev/null | grep "normal symbol \`_Unwind_RaiseException'")
    if [ $rc -eq 0 ] && [ -n "$binds" ] && ! echo "$binds" | grep -qv 'to [^ ]*libgcc_s\.so'; then
        pass "C++ exceptions under the shim unwind through libgcc_s"
    else
        fail "C++ exceptions under the shim unwind through libgcc_s" "rc=$rc ${binds:-no binding seen}"
    fi
fi

# --- inertness: a process that never creates a communicator ----------------------------
# wait_ready PID: until the process has exec'd and mapped its libraries
wait_ready() {
    for _ in $(seq 100); do
        grep -q 'libc.so' "/proc/$1/maps" 2>/dev/null && [ -n "$(ls /proc/$1/fd 2>/dev/null)" ] &&
            return 0
        sleep 0.05
    done
    return 1
}
# snapshot PID: threads, open fds, mapped files (the shim itself left out)
snapshot() {
    echo "threads $(ls "/proc/$1/task" | wc -l)"
    echo "fds $(ls "/proc/$1/fd" | sort -n | tr '\n' ' ')"
    awk '$6 != "" && $6 !~ /libncclguard\.so$/ {print "file " $6}' "/proc/$1/maps" | sort -u
}
anon_kb() { awk '/^Anonymous:/ {print $2}' "/proc/$1/smaps_rollup"; }
# No allocation of note: anonymous memory may grow by the pages of its own data that
# the constructor touches (the policy's settings, about 40 KiB), nothing more.
ANON_SLACK_KB=128
# A command that sets up for a while (an interpreter) says when it is done by creating
# the file $INERT_READY; the others are steady once their libraries are mapped.
inert() { # NAME CMD...: compare the process with and without the shim
    local name=$1; shift
    rm -f "$TMP/ready.plain" "$TMP/ready.shim"
    INERT_READY=$TMP/ready.plain "$@" & local p1=$!
    INERT_READY=$TMP/ready.shim LD_PRELOAD=$SHIM "$@" & local p2=$!
    if wait_ready $p1 && wait_ready $p2; then
        for _ in $(seq 200); do
            case "$*" in *INERT_READY*) ;; *) break ;; esac
            [ -e "$TMP/ready.plain" ] && [ -e "$TMP/ready.shim" ] && break
            sleep 0.05
        done
        sleep 0.5
        snapshot $p1 >"$TMP/inert.plain"
        snapshot $p2 >"$TMP/inert.shim"
        local shim_mapped grew
        shim_mapped=$(grep -c 'libncclguard\.so' "/proc/$p2/maps")
        grew=$(($(anon_kb $p2) - $(anon_kb $p1)))
        kill $p1 $p2 2>/dev/null; wait $p1 $p2 2>/dev/null
        if [ "$shim_mapped" -gt 0 ] && cmp -s "$TMP/inert.plain" "$TMP/inert.shim" &&
            [ $grew -le $ANON_SLACK_KB ]; then
            pass "inert in $name: same threads, fds, mapped files; anonymous memory +${grew} KiB"
        else
            fail "inert in $name" "$(diff "$TMP/inert.plain" "$TMP/inert.shim" | head; echo "shim mapped: $shim_mapped, anonymous +${grew} KiB")"
        fi
    else
        kill $p1 $p2 2>/dev/null; wait $p1 $p2 2>/dev/null
        fail "inert in $name" "process did not start"
    fi
}
if [ "${SANITIZE:-}" = 1 ]; then
    skip "inertness" "measured on the production build (ASan adds its own threads and maps)"
else
    inert sleep sleep 30
    PYTHONHASHSEED=0 inert python3 python3 -c \
        'import os, time; open(os.environ["INERT_READY"], "w").close(); time.sleep(30)'
    # a process that never uses NCCL writes nothing either
    out=$(LD_PRELOAD=$SHIM python3 -c 'print("ok")' 2>&1)
    if [ "$out" = ok ]; then pass "silent in a process without NCCL"
    else fail "silent in a process without NCCL" "$out"; fi
fi

# --- everything below needs the CPU harness ---------------------------------------------
if [ ! -e "$FAKES/libnccl.so.2" ] || [ ! -e "$E2E/call_each" ]; then
    skip "harness tests" "fake NCCL not built"
    finish; exit
fi

# --- differential: every call reaches the fake unchanged ------------------------------
# The shim's own NCCL calls (version probe, async-error polls, the audit) are all
# made on its watchdog thread, "ncclguard-wd"; the application's calls must be
# exactly the same with and without the shim.
app_calls() { grep -v ' thread=ncclguard' "$1"; }
differential() { # NAME CMD...: runs CMD with and without the shim, compares the call logs
    local name=$1; shift
    with_fakes env FAKENCCL_CALL_LOG="$TMP/$name.plain.%r" "$@" >"$TMP/$name.out.plain" 2>/dev/null
    under_shim env FAKENCCL_CALL_LOG="$TMP/$name.shim.%r" "$@" >"$TMP/$name.out.shim" 2>/dev/null
    local ok=1 f
    for f in "$TMP/$name".plain.*; do
        app_calls "$f" >"$f.app"
        app_calls "${f/.plain./.shim.}" >"$f.shimapp" 2>/dev/null
        cmp -s "$f.app" "$f.shimapp" || { ok=0; diff "$f.app" "$f.shimapp" | head -n 6; }
    done
    [ $ok = 1 ] && ls "$TMP/$name".plain.* >/dev/null 2>&1
}
if differential each "$E2E/call_each" && cmp -s "$TMP/each.out.plain" "$TMP/each.out.shim"; then
    calls=$(cut -d' ' -f1 "$TMP"/each.plain.x | sort -u | wc -l)
    if [ "$calls" -ge 41 ]; then
        pass "call_each: every one of the $calls entry points reaches the fake unchanged"
    else
        fail "call_each differential" "only $calls entry points called"
    fi
else
    fail "call_each differential" "$(diff "$TMP/each.out.plain" "$TMP/each.out.shim" | head -n 4)"
fi
if differential train "$APPS/launch" -n 2 --timeout 120 -- "$APPS/trainloop" --steps 5 --quiet &&
    [ "$(cat "$TMP"/train.plain.*.app | wc -l)" -gt 100 ]; then
    pass "trainloop, 2 ranks: identical call logs with and without the shim ($(cat "$TMP"/train.plain.*.app | wc -l) calls)"
else
    fail "trainloop differential"
fi

# --- an entry point the loaded NCCL lacks: ncclInvalidUsage and one log line --------------
out=$(LD_LIBRARY_PATH=$E2E/oldnccl LD_PRELOAD=$(preload) "$E2E/missing_sym" 2>"$TMP/missing.err")
if [ "$out" = "version 21903 -> 0; shrink -> 5, 5" ] &&
    [ "$(grep -c 'ncclCommShrink is missing from the loaded NCCL' "$TMP/missing.err")" = 1 ]; then
    pass "an entry point missing from an older NCCL: ncclInvalidUsage, logged once"
else
    fail "missing entry point" "$out / $(cat "$TMP/missing.err")"
fi

# --- trainloop runs healthy under the shim with 2, 4 and 8 ranks ------------------------
for n in 2 4 8; do
    under_shim "$APPS/launch" -n $n --timeout 300 -- "$APPS/trainloop" --steps 10 --quiet \
        >"$TMP/healthy$n.out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c 'trainloop: rank [0-9]* ok' "$TMP/healthy$n.out")" = $n ]; then
        pass "trainloop healthy under the shim with $n ranks"
    else
        fail "trainloop with $n ranks" "rc=$rc"; tail -n 5 "$TMP/healthy$n.out"
    fi
done

# --- NCCLGUARD_DISABLE=1 is a pure pass-through ---------------------------------------
under_shim env NCCLGUARD_DISABLE=1 NCCLGUARD_LOG_LEVEL=debug FAKENCCL_CALL_LOG="$TMP/each.off" \
    "$E2E/call_each" >"$TMP/each.out.off" 2>"$TMP/each.err.off"
if cmp -s "$TMP/each.plain.x" "$TMP/each.off" && ! grep -q '^ncclguard:' "$TMP/each.err.off"; then
    pass "NCCLGUARD_DISABLE=1: identical calls and no tracking"
else
    fail "NCCLGUARD_DISABLE=1" "$(head -n 3 "$TMP/each.err.off")"
fi
under_shim env NCCLGUARD_LOG_LEVEL=debug "$E2E/call_each" >/dev/null 2>"$TMP/each.err.on"
if grep -q '^ncclguard: .*summary: [1-9][0-9]* communicators' "$TMP/each.err.on"; then
    pass "tracking on by default: exit summary counts communicators"
else
    fail "exit summary" "$(head -n 3 "$TMP/each.err.on")"
fi

# --- fork while another thread is inside an NCCL call -----------------------------------
mkdir -p "$TMP/forkdumps"
# LeakSanitizer cannot stop the threads a fork child lacks, and then reports false leaks.
if ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
    NCCLGUARD_DUMP_AT_EXIT=1 NCCLGUARD_DUMP_DIR=$TMP/forkdumps NCCLGUARD_LOG_LEVEL=debug \
        timeout 120 bash -c "$(declare -f under_shim with_fakes preload); SHIM=$SHIM FAKES=$FAKES \
        SANITIZE=${SANITIZE:-} under_shim $E2E/fork_in_call" >"$TMP/fork.out" 2>&1 &&
    [ "$(grep -c 'fork_in_call: child ok' "$TMP/fork.out")" = 20 ] &&
    ! grep -q '^ncclguard: \[[^]]*\] \(summary\|dump\|cannot write the dump\)' "$TMP/fork.out" &&
    [ -z "$(ls "$TMP/forkdumps" 2>/dev/null)" ]; then
    pass "fork while threads are inside NCCL calls: 20 children exit cleanly, report and dump nothing of the parent"
else
    fail "fork in call" "$(grep -v 'child ok' "$TMP/fork.out" | tail -n 5; ls "$TMP/forkdumps")"
fi

finish

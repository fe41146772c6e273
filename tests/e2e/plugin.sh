#!/usr/bin/env bash
# libncclguard.so as NCCL's profiler plugin, with no LD_PRELOAD: named only in
# NCCL_PROFILER_PLUGIN (the pattern of a job whose NCCL the wrappers cannot see), it
# is found by the fake NCCL's plugin loader, and at exit each rank says, per
# communicator, how many collectives NCCL enqueued and how many kernels started and
# finished. Without NCCL_PROFILER_PLUGIN the preloaded shim is not a plugin. A plugin
# named in NCCLGUARD_PROFILER_CHAIN (countprof, in the role of NCCL's Inspector) gets from
# behind ncclguard's the very events it gets when it is NCCL's only plugin. As NCCL's env
# plugin (NCCL_ENV_PLUGIN), the shim makes a forced value hold at NCCL's read time.
source "$(dirname "$0")/lib.sh"

if [ ! -x "$APPS/trainloop" ] || [ ! -e "$SHIM" ]; then
    skip "profiler plugin" "harness not built"; finish; exit
fi
# under ASan the sanitizer's runtime must come first, as the shim is not preloaded
asan=
[ "${SANITIZE:-}" = 1 ] && asan=$(gcc -print-file-name=libasan.so)

mkdir -p "$TMP/plugin"
(cd "$TMP/plugin" && clean LD_PRELOAD="$asan" LD_LIBRARY_PATH="$FAKES" \
    NCCL_PROFILER_PLUGIN="$SHIM" NCCLGUARD_DUMP_DIR="$TMP/plugin/dumps" \
    -- "$APPS/launch" -n 2 --timeout 120 -- "$APPS/trainloop" --steps 5 --quiet \
    >"$TMP/plugin/out" 2>&1)
rc=$?
check "the job runs with the shim as its profiler plugin" test "$rc" = 0
check "each rank says its communicators were seen by the plugin only" \
    test "$(grep -c 'communicators seen by the profiler plugin only: no call went through the wrappers' "$TMP/plugin/out")" = 2
seen='seen by the profiler plugin: [0-9]+ collectives and [0-9]+ sends and receives enqueued, [0-9]+ kernels started'
lines=$(grep -cE "rank [01]/2 $seen, [0-9]+ finished\$" "$TMP/plugin/out")
if [ "$lines" = 2 ]; then pass "each rank reports the world communicator seen by the plugin"
else fail "each rank reports the world communicator seen by the plugin" "$lines lines"; show plugin; fi
# the world communicator: one hash on both ranks, nothing left unfinished, and as many
# kernels as collectives and sends and receives
world=$(grep -o 'communicator [0-9a-f]* rank [01]/2 seen by the profiler plugin: .*' \
    "$TMP/plugin/out" | sed 's/ rank [01]\/2//' | sort -u)
counts=$(echo "$world" | sed -nE 's/.*: ([0-9]+) collectives and ([0-9]+) sends and receives enqueued, ([0-9]+) kernels started, ([0-9]+) finished$/\1 \2 \3 \4/p')
read -r colls p2ps kstarted kdone <<<"${counts:-0 0 -1 -2}"
if [ "$(echo "$world" | wc -l)" = 1 ] && [ "$colls" -gt 0 ] &&
    [ $((colls + p2ps)) = "$kstarted" ] && [ "$kstarted" = "$kdone" ]; then
    pass "both ranks saw the same collectives enqueued, started and finished"
else
    fail "both ranks saw the same collectives" "$world"
fi

# preloaded, the shim names itself in NCCL_PROFILER_PLUGIN (profiler_plugin): NCCL loads
# it as its plugin too, and it asks for no event while the wrappers see every communicator
# plugin_job NAME VAR=value...: 2 ranks of trainloop with no preload but the sanitizer's (a
# VAR of the same name given later wins); preload_job: the same with the shim preloaded
plugin_job() {
    local name=$1; shift
    mkdir -p "$TMP/$name"
    (cd "$TMP/$name" && clean LD_PRELOAD="$asan" LD_LIBRARY_PATH="$FAKES" \
        COUNTPROF_LOG="$TMP/$name/trace" NCCLGUARD_DUMP_DIR="$TMP/$name/dumps" "$@" \
        -- "$APPS/launch" -n 2 --timeout 120 -- "$APPS/trainloop" --steps 4 --quiet \
        >"$TMP/$name/out" 2>&1)
}
preload_job() {
    local name=$1; shift
    plugin_job "$name" LD_PRELOAD="$(preload)" "$@"
}
preload_job preload
if [ "$(grep -c '2 communicators seen by the profiler plugin, 2 through the wrappers, 2 of them by both' "$TMP/preload/out")" = 2 ] &&
    grep -qE 'seen by the profiler plugin: 0 collectives and 0 sends and receives enqueued, 0 kernels' "$TMP/preload/out"; then
    pass "preloaded, the shim is NCCL's profiler plugin too, and asks for no event"
else
    fail "preloaded, the shim is NCCL's profiler plugin too" "$(grep 'profiler' "$TMP/preload/out" | head -n 4)"
fi
preload_job preload_off NCCLGUARD_PROFILER_PLUGIN=0
check "with profiler_plugin off, the preloaded shim is not NCCL's plugin" \
    test "$(grep -c 'profiler plugin' "$TMP/preload_off/out")" = 0
# the job's own plugin is chained behind the shim, and gets every event it asks for
preload_job preload_own NCCL_PROFILER_PLUGIN="$FAKES/libnccl-profiler-count.so"
if grep -q "the job's plugin .*libnccl-profiler-count.so is chained behind it" "$TMP/preload_own/out" &&
    grep -q 'chained behind ncclguard' "$TMP/preload_own/out" &&
    [ "$(cat "$TMP"/preload_own/trace.* 2>/dev/null | grep -c '^start Coll ')" -gt 0 ]; then
    pass "preloaded, a plugin the job names is chained behind the shim's"
else
    fail "preloaded, the job's plugin is chained" "$(grep 'profiler' "$TMP/preload_own/out" | head -n 4)"
fi
# a site's value of NCCL_PROFILER_PLUGIN stays: none, or a plugin of its own
printf '[env.force]\nNCCL_PROFILER_PLUGIN = none\n' >"$TMP/none.conf"
preload_job preload_none NCCLGUARD_CONFIG="$TMP/none.conf"
printf '[env.force]\nNCCL_PROFILER_PLUGIN = %s\n' "$FAKES/libnccl-profiler-count.so" >"$TMP/site.conf"
# (the env plugin off: it would hold the site's value at NCCL's read time by itself)
preload_job preload_site NCCLGUARD_CONFIG="$TMP/site.conf" NCCLGUARD_ENV_PLUGIN=0
if [ "$(cat "$TMP/preload_none/out" "$TMP/preload_site/out" | grep -c 'seen by the profiler plugin')" = 0 ] &&
    [ "$(cat "$TMP"/preload_site/trace.* 2>/dev/null | grep -c '^start Coll ')" -gt 0 ]; then
    pass "a value the site forces for NCCL_PROFILER_PLUGIN stays (none, or its own plugin)"
else
    fail "a value the site forces for NCCL_PROFILER_PLUGIN stays" "$(grep profiler "$TMP/preload_site/out" | head -n 3)"
fi

# --- chaining: countprof alone, then behind ncclguard; its traces must be the same ---------
# every line of a run's traces, the communicator ids (random per run) left out, sorted
traces() { cat "$TMP/$1"/trace.* 2>/dev/null | sed 's/ id=[0-9a-f]*$//' | sort; }
plugin_job alone NCCL_PROFILER_PLUGIN="$FAKES/libnccl-profiler-count.so"
plugin_job chained NCCL_PROFILER_PLUGIN="$SHIM" \
    NCCLGUARD_PROFILER_CHAIN="$FAKES/libnccl-profiler-count.so"
n=$(traces alone | grep -c '^start Coll ')
if [ "$n" -gt 0 ] && [ "$(traces alone)" = "$(traces chained)" ]; then
    pass "a chained plugin gets the same events as when it is alone ($n Coll)"
else
    fail "a chained plugin gets the same events" \
        "$(diff <(traces alone) <(traces chained) | head -n 8)"; show chained
fi
plugin_job both LD_PRELOAD="${asan:+$asan:}$SHIM" NCCL_PROFILER_PLUGIN="$SHIM"
check "preloaded and named as the plugin, each rank says both paths saw its communicators" \
    test "$(grep -c '2 communicators seen by the profiler plugin, 2 through the wrappers' "$TMP/both/out")" = 2
if grep -q 'chained behind ncclguard' "$TMP/chained/out" &&
    grep -q 'seen by the profiler plugin' "$TMP/chained/out"; then
    pass "ncclguard's plugin goes on seeing the job while it chains"
else
    fail "ncclguard's plugin goes on seeing the job while it chains" "no line"; show chained
fi
# a plugin that asks for less (Coll only) gets no more for being behind ncclguard's,
# which asks for KernelCh too
plugin_job alone_coll COUNTPROF_MASK=2 NCCL_PROFILER_PLUGIN="$FAKES/libnccl-profiler-count.so"
plugin_job chained_coll COUNTPROF_MASK=2 NCCL_PROFILER_PLUGIN="$SHIM" \
    NCCLGUARD_PROFILER_CHAIN="$FAKES/libnccl-profiler-count.so"
if [ "$(traces alone_coll | grep -c KernelCh)" = 0 ] &&
    [ "$(traces alone_coll)" = "$(traces chained_coll)" ]; then
    pass "a chained plugin gets only the events its own mask asks for"
else
    fail "a chained plugin gets only the events its own mask asks for" \
        "$(diff <(traces alone_coll) <(traces chained_coll) | head -n 8)"
fi
# --- the pynccl pattern: NCCL through a private dlopen handle, shim preloaded --------------
ph_job() {
    local name=$1; shift
    mkdir -p "$TMP/$name"
    (cd "$TMP/$name" && clean LD_PRELOAD="$(preload)" LD_LIBRARY_PATH="$FAKES" \
        NCCLGUARD_DUMP_DIR="$TMP/$name/dumps" "$@" -- "$E2E/private_handle" 7 \
        >"$TMP/$name/out" 2>&1)
}
ph_job private NCCL_PROFILER_PLUGIN="$SHIM"
if grep -q 'private_handle: ok' "$TMP/private/out" &&
    grep -q 'rank 0/1 seen by the profiler plugin: 7 collectives and 0 sends and receives enqueued, 7 kernels started, 7 finished$' "$TMP/private/out" &&
    grep -q '1 communicators seen by the profiler plugin only' "$TMP/private/out"; then
    pass "calls through a private handle, unseen by the wrappers, are seen by the plugin"
else
    fail "calls through a private handle are seen by the plugin" "$(tail -n 4 "$TMP/private/out")"
fi

# --- env plugin: a forced value holds at NCCL's read time --------------------------------
# loaded by NCCL as its plugin only (not preloaded), while NCCL's threads run: the library
# changes no environment variable (setenv beside their getenv); preloaded, it names itself
mkdir -p "$TMP/late"
(cd "$TMP/late" && clean LD_PRELOAD="$asan" LD_LIBRARY_PATH="$FAKES" NCCL_PROFILER_PLUGIN="$SHIM" \
    -- "$E2E/private_handle" 3 >"$TMP/late/out" 2>&1)
if grep -q 'private_handle: NCCL_ENV_PLUGIN unset' "$TMP/late/out" &&
    grep -q 'seen by the profiler plugin: 3 collectives' "$TMP/late/out" &&
    grep -q "private_handle: NCCL_ENV_PLUGIN .*libncclguard.so" "$TMP/private/out"; then
    pass "loaded as NCCL's plugin only, the shim sets no variable; preloaded, it names itself"
else
    fail "the environment of a late-loaded shim" "$(grep 'NCCL_ENV_PLUGIN' "$TMP/late/out" "$TMP/private/out")"
fi
# the plugin a lone process names itself (no launcher passed it on) is chained too
ph_job private_own NCCL_PROFILER_PLUGIN="$FAKES/libnccl-profiler-count.so" \
    COUNTPROF_LOG="$TMP/private_own/trace"
if grep -q 'rank 0/1 seen by the profiler plugin: 7 collectives' "$TMP/private_own/out" &&
    [ "$(cat "$TMP"/private_own/trace.* 2>/dev/null | grep -c '^start Coll ')" = 7 ]; then
    pass "a lone process's own plugin is chained behind the shim's, and gets all 7 Coll"
else
    fail "a lone process's own plugin is chained" "$(tail -n 3 "$TMP/private_own/out")"
fi
# no silence: with the plugin off, a private handle's process says what it misses
ph_job private_off NCCLGUARD_PROFILER_PLUGIN=0
check "plugin off: a process that loaded NCCL and made no communicator through the wrappers says so" \
    grep -q 'libnccl.so.2 is loaded, but no communicator was created through the wrappers and the profiler plugin is off' "$TMP/private_off/out"
check "plugin on: no such line" \
    test "$(grep -c 'profiler plugin is off' "$TMP/private/out")" = 0
# env_after_start sets NCCL_PROFILER_PLUGIN=countprof in main, after the constructor; the
# job's config forces it to none. Without the env plugin (env_plugin off) the process's value
# wins (countprof traces); with the shim as NCCL's env plugin, by default or named in
# NCCL_ENV_PLUGIN, NCCL reads the forced none.
printf '[env.force]\nNCCL_PROFILER_PLUGIN = none\n' >"$TMP/force.conf"
env_job() {
    local name=$1; shift
    mkdir -p "$TMP/$name"
    (cd "$TMP/$name" && clean LD_PRELOAD="$(preload)" LD_LIBRARY_PATH="$FAKES" \
        NCCLGUARD_CONFIG="$TMP/force.conf" COUNTPROF_LOG="$TMP/$name/trace" \
        NCCL_NEVER_READ_X=1 "$@" -- "$E2E/env_after_start" "$FAKES/libnccl-profiler-count.so" \
        >"$TMP/$name/out" 2>&1)
}
env_job env_off NCCLGUARD_ENV_PLUGIN=0
env_job env_on NCCL_ENV_PLUGIN="$SHIM"
env_job env_default
if ls "$TMP"/env_off/trace.* >/dev/null 2>&1; then
    pass "without the env plugin, a value the process set after start wins"
else
    fail "without the env plugin, a value the process set after start wins" "no trace"
    show env_off
fi
for n in env_on env_default; do
    if grep -q 'env_after_start: ok' "$TMP/$n/out" && ! ls "$TMP"/$n/trace.* >/dev/null 2>&1
    then pass "$n: with the env plugin, the forced value holds at NCCL's read time"
    else fail "$n: with the env plugin, the forced value holds at NCCL's read time" "countprof ran"
        show $n; fi
done
# the job's own env plugin is chained: it answers the reads the site's rules leave alone
# (its log), and the site's forced value still wins over its answer
env_job env_chain NCCL_ENV_PLUGIN="$FAKES/libnccl-env-test.so" ENVPLUG_LOG="$TMP/envplug.log" \
    ENVPLUG_FORCE="NCCL_PROFILER_PLUGIN=$FAKES/libnccl-profiler-count.so"
if grep -q 'env_after_start: ok' "$TMP/env_chain/out" && grep -q ' init 2\.28' "$TMP/envplug.log" &&
    grep -q ' get NCCL_' "$TMP/envplug.log" && ! ls "$TMP"/env_chain/trace.* >/dev/null 2>&1 &&
    grep -q 'env plugin envplug chained behind ncclguard' "$TMP/env_chain/out"; then
    pass "the job's own env plugin is chained, and the site's forced value holds over it"
else
    fail "the job's env plugin chained" "$(tail -n 3 "$TMP/env_chain/out"; head -n 3 "$TMP/envplug.log" 2>&1)"
fi
# the shim named itself, and the process named another plugin before NCCL read it
mkdir -p "$TMP/renamed"
(cd "$TMP/renamed" && clean LD_PRELOAD="$(preload)" LD_LIBRARY_PATH="$FAKES" \
    -- "$E2E/env_after_start" "$FAKES/libnccl-profiler-count.so" >"$TMP/renamed/out" 2>&1)
check "a NCCL_PROFILER_PLUGIN the process changed before NCCL read it: the shim says NCCL never loaded it" \
    grep -q 'NCCL never loaded ncclguard as its profiler plugin' "$TMP/renamed/out"
check "the env plugin names the NCCL variables set and never read" \
    grep -q 'through the env plugin; 1 set and never read: NCCL_NEVER_READ_X$' "$TMP/env_on/out"

plugin_job self NCCL_PROFILER_PLUGIN="$SHIM" NCCLGUARD_PROFILER_CHAIN="$SHIM"
check "chaining ncclguard to itself is refused with one line" \
    grep -q 'profiler_chain=.*is ncclguard itself' "$TMP/self/out"
finish

#!/usr/bin/env bash
# The stacks of threads in calls that a signal would cut short, end to end
# (tests/e2e/progs/blocked_calls.c): one thread in each of nanosleep, a timed futex
# wait, an untimed futex wait, epoll_wait, recv with SO_RCVTIMEO, read on a pipe,
# poll and a busy loop, dumped by SIGUSR2 in several rounds. No call returns early
# (each thread checks its result, errno and time against its own timeout); the
# threads in calls a signal would cut short are unwound from outside ("cfi"),
# never signalled; and every thread's frames are gdb's `thread apply all bt`
# for it, frame by frame (gdb attaches only after the rounds: its stop would cut
# some calls short). In the plain build every frame is exact; under SANITIZE=1
# (frame pointers) the frames above a frame whose CFI needs rbp are confirmed
# guesses, and must still be gdb's.
source "$(dirname "$0")/lib.sh"
PROG=$E2E/blocked_calls
if [ ! -x "$PROG" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "blocked calls" "harness not built"; finish; exit
fi
d=$TMP/blocked
mkdir -p "$d/dumps" "$d/copies" && : >"$d/out"
(cd "$d" && NCCLGUARD_DUMP_DIR=$d/dumps exec setsid env LD_PRELOAD="$(preload)" \
    LD_LIBRARY_PATH="$FAKES${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$PROG" "$d/dumps" "$d/copies" 3 >"$d/out" 2>&1) &
job=$!
if wait_for 300 grep -q '^ready' "$d/out"; then
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' \
        "$d/copies/final.json")
    if command -v gdb >/dev/null; then
        timeout 120 gdb -batch -nx -p "$pid" -x "$ROOT/tests/e2e/gdb_frames.py" >"$d/gdb" 2>&1
    fi
fi
kill -KILL -- -$job 2>/dev/null
wait $job 2>/dev/null

if grep -q '^ready' "$d/out" && python3 "$ROOT/tests/unit/check_dump.py" "$d"/copies/*.json \
        >"$d/check" 2>&1 && python3 - "$d" "${SANITIZE:-}" >>"$d/check" 2>&1 <<'PY'
import glob, json, os, sys
d, sanitize = sys.argv[1], sys.argv[2]
out = open(os.path.join(d, "out")).read().splitlines()
tids = {l.split()[1]: int(l.split()[2]) for l in out if l.startswith("thread ")}
assert len(tids) == 8, tids
# 1. no call was cut short, and each thread was in its call through at least one dump
rounds = [l.split() for l in out if l.startswith("round ")]
assert len(rounds) == 3 * 8, rounds
bad = [" ".join(r) for r in rounds if r[3] != "ok"]
assert not bad, "cut short: %s" % bad
covered = {}
for r in rounds:
    if r[-1] == "covered":
        covered.setdefault(r[2], []).append(int(r[1]))
assert set(covered) == set(tids), "never in its call through a dump: %s" % (set(tids) - set(covered))
# 2. gdb's frames, the reference
ref = {}
gdb_out = os.path.join(d, "gdb")
if os.path.exists(gdb_out):
    for l in open(gdb_out):
        if l.startswith("frames "):
            p = l.split()
            ref[int(p[1])] = [(int(x.split(":", 1)[0], 16), x.split(":", 1)[1]) for x in p[2:]]
    assert ref, "gdb gave no frames: %s" % open(gdb_out).read()[-400:]
outside = {"nanosleep", "timed_futex", "epoll_wait", "recv", "poll"}
guessed = 0
def same(name, t, frames):
    """The dump's frames of thread t against gdb's, frame by frame."""
    want = ref[t["tid"]]
    got = [(int(f["pc"], 16), f["function"]) for f in frames]
    ok = len(got) == len(want)
    for i, ((pc, fn), (gpc, gname)) in enumerate(zip(got, want)):
        # A signalled thread's pc: a call restarted after the handler (SA_RESTART)
        # was 2 bytes back (the syscall instruction), a busy loop has moved on.
        ok &= pc == gpc or (i == 0 and t["stack_from"] == "signal" and
                            (gpc - pc == 2 or fn == gname))
    assert ok, "%s (%s): dump %s, gdb %s" % (name, t["stack_from"],
        ["%x:%s%s" % (pc, fn, "?" if f["guess"] else "") for (pc, fn), f in zip(got, frames)],
        ["%x:%s" % p for p in want])
for name in ["final"] + ["round-%d" % r for r in (1, 2, 3)]:
    dump = json.load(open(os.path.join(d, "copies", name + ".json")))
    threads = {t["tid"]: t for t in dump["threads"]}
    for tname, tid in tids.items():
        if name != "final" and int(name[6:]) not in covered[tname]:
            continue
        t = threads[tid]
        want_from = "cfi" if tname in outside else "signal"
        assert t["stack_from"] == want_from, (name, tname, t["stack_from"])
        frames = t["frames"]
        g = [f["guess"] for f in frames]
        guessed += sum(g)
        if not sanitize:
            assert not any(g) and t["stack_note"] is None, (name, tname, t["stack_note"])
        if ref:
            same("%s %s" % (name, tname), t, frames)
print("8 threads, 3 rounds: no call cut short; %s; %d guessed frames%s" % (
      "every stack is gdb's" if ref else "gdb not installed", guessed,
      "" if sanitize else " (none allowed)"))
PY
then
    pass "blocked calls: $(tail -n 1 "$d/check")"
else
    fail "blocked calls" "$(tail -n 5 "$d/check" 2>/dev/null) $(tail -n 5 "$d/out")"
fi
dumps_sane
finish

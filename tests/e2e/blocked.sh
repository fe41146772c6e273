#!/usr/bin/env bash
# The stacks of threads in calls that a signal would cut short, end to end
# (tests/e2e/progs/blocked_calls.c): one thread in each of nanosleep, a timed futex
# wait, an untimed futex wait, epoll_wait, recv with SO_RCVTIMEO, read on a pipe,
# poll and a busy loop, and one more in nanosleep under two functions with frame
# pointers, dumped by SIGUSR2 in several rounds. No call returns early
# (each thread checks its result, errno and time against its own timeout); the
# threads in calls a signal would cut short are unwound from outside ("cfi"),
# never signalled; and every thread's frames are gdb's `thread apply all bt`
# for it, frame by frame (gdb attaches only after the rounds: its stop would cut
# some calls short). In the plain build every frame is exact but those above the
# frame-pointer functions; under SANITIZE=1 (frame pointers everywhere) the frames
# above a frame whose CFI needs rbp are confirmed guesses; all must still be gdb's.
source "$(dirname "$0")/lib.sh"
PROG=$E2E/blocked_calls
if [ ! -x "$PROG" ] || [ ! -e "$FAKES/libnccl.so.2" ]; then
    skip "blocked calls" "harness not built"; finish; exit
fi
# start_rounds DIR ROUNDS: the program under the shim in DIR, in a session of its own, with
# its dumps in DIR/dumps, its copies of them in DIR/copies and its output in DIR/out, for
# ROUNDS rounds of SIGUSR2 dumps; $job is its pid
start_rounds() {
    mkdir -p "$1/dumps" "$1/copies" && : >"$1/out"
    (cd "$1" && NCCLGUARD_DUMP_DIR=$1/dumps exec setsid env LD_PRELOAD="$(preload)" \
        LD_LIBRARY_PATH="$FAKES${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$PROG" "$1/dumps" "$1/copies" "$2" >"$1/out" 2>&1) &
    job=$!
}
d=$TMP/blocked
start_rounds "$d" 3
if wait_for 300 grep -q '^ready' "$d/out"; then
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' \
        "$d/copies/final.json")
    if command -v gdb >/dev/null; then
        timeout 120 gdb -batch -nx -p "$pid" -x "$ROOT/tests/e2e/gdb_frames.py" >"$d/gdb" 2>&1
    fi
fi
kill -KILL -- -$job 2>/dev/null
wait $job 2>/dev/null

if grep -q '^ready' "$d/out" && $CHECK schema "$d"/copies/*.json \
        >"$d/check" 2>&1 && python3 - "$d" "${SANITIZE:-}" >>"$d/check" 2>&1 <<'PY'
import glob, json, os, sys
d, sanitize = sys.argv[1], sys.argv[2]
out = open(os.path.join(d, "out")).read().splitlines()
tids = {l.split()[1]: int(l.split()[2]) for l in out if l.startswith("thread ")}
assert len(tids) == 9, tids
# 1. no call was cut short, and each thread was in its call through at least one dump
rounds = [l.split() for l in out if l.startswith("round ")]
assert len(rounds) == 3 * 9, rounds
bad = [" ".join(r) for r in rounds if r[3] != "ok"]
assert not bad, "cut short: %s" % bad
covered = {}
for r in rounds:
    if r[-1] == "covered":
        covered.setdefault(r[2], []).append(int(r[1]))
assert set(covered) == set(tids), "never in a call through a dump: %s" % (set(tids) - set(covered))
# 2. gdb's frames, the reference
ref = {}
gdb_out = os.path.join(d, "gdb")
if os.path.exists(gdb_out):
    for l in open(gdb_out):
        if l.startswith("frames "):
            p = l.split()
            ref[int(p[1])] = [(int(x.split(":", 1)[0], 16), x.split(":", 1)[1]) for x in p[2:]]
    assert ref, "gdb gave no frames: %s" % open(gdb_out).read()[-400:]
outside = {"nanosleep", "timed_futex", "epoll_wait", "recv", "poll", "framed"}
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
        if tname == "framed":
            # CFI stops at framed_inner, whose CFA is rbp + 16: the frames above it are
            # guesses (confirmed: the direct call from framed_outer), with a note
            names = [f["function"] for f in frames]
            k = names.index("framed_inner")
            assert g == [False] * (k + 1) + [True] * (len(g) - k - 1), (name, names, g)
            assert names[k + 1] == "framed_outer" and "CFI stopped at frame %d" % k in \
                t["stack_note"], (name, names, t["stack_note"])
        elif not sanitize:
            assert not any(g) and t["stack_note"] is None, (name, tname, t["stack_note"])
        if ref:
            same("%s %s" % (name, tname), t, frames)
print("9 threads, 3 rounds: no call cut short; %s; %d guessed frames%s" % (
      "every stack is gdb's" if ref else "gdb not installed", guessed,
      "" if sanitize else " (only above the frame-pointer functions)"))
PY
then
    pass "blocked calls: $(tail -n 1 "$d/check")"
else
    fail "blocked calls" "$(tail -n 5 "$d/check" 2>/dev/null) $(tail -n 5 "$d/out")"
fi
# --- guessed frames in the command: the verdict's where never takes one, report marks them
# Rank 0 waits on an AllReduce rank 1 never called; rank 1's stack is one exact frame,
# then two guesses (a stale caller and main, as an unconfirmed scan could give).
g=$TMP/guessed
mkdir -p "$g"
python3 - "$g" <<'PY'
import json, sys
A = "00000000000000aa"
def frame(i, name, guess):
    return {"pc": "%016x" % (0x1000 + i), "module": "/job/app", "offset": i, "function": name,
            "function_offset": 4, "build_id": None, "guess": guess}
for r in (0, 1):
    ops = [{"index": 0, "comm": A, "comm_rank": r, "comm_nranks": 2, "seq": 4, "p2p_seq": None,
            "op": "AllReduce", "count": 8, "datatype": "float32", "bytes": 32, "redop": "sum",
            "root": None, "peer": None, "stream": "0000000000000010", "group": None,
            "thread": 1000 + r, "enqueue_ns": 40, "enqueue_mono_ns": 40, "state": "completed",
            "gpu_start_ns": 41, "gpu_end_ns": 42, "seen_start_ns": None, "seen_end_ns": None,
            "times": "sampled", "result": 0, "flags": [], "marker": None, "stack": None}]
    if r == 0:
        ops.insert(0, dict(ops[0], index=1, seq=5, state="started", gpu_end_ns=None,
                           enqueue_ns=50, enqueue_mono_ns=50, gpu_start_ns=51,
                           flags=["timeout"]))
    fr = ([frame(0, "wait_here", False), frame(1, "stale_caller", True), frame(2, "main", True)]
          if r == 1 else [frame(0, "allreduce_wait", False), frame(1, "main", False)])
    d = {"schema": "ncclguard.dump/2.2", "reason": "timeout" if r == 0 else "trigger",
         "incident": "1-r0@h", "time_ns": 10**12, "host": "h", "pid": 1000 + r, "rank": r,
         "local_rank": r, "job": "guess", "versions": {"ncclguard": "0.1.0", "nccl": None,
         "cuda_driver": None, "python": None}, "env": {},
         "flight": {"capacity": 16, "recorded": len(ops), "overwritten": 0, "dropped_inflight": 0},
         "ops": ops,
         "comms": [{"id": A, "rank": r, "nranks": 2, "device": 0, "name": None, "state": "ready",
                    "blocking": True, "parent": None, "created_ns": 1, "last_seq": 5 - r,
                    "last_completed_seq": 4, "last_async_error": 0, "peers": []}],
         "stack_table": {"depth": 0, "capacity": 0, "used": 0, "lost": 0}, "stacks": [],
         "threads": [{"tid": 1000 + r, "name": "app", "state": "S", "syscall": "poll",
                      "stack_from": "cfi", "frames": fr,
                      "stack_note": "CFI stopped at frame 0 (test)" if r == 1 else None}],
         "python": None, "ras": None}
    json.dump(d, open(f"{sys.argv[1]}/ncclguard-r{r}-h-{1000 + r}.json", "w"))
PY
"$NG" analyze --json "$g" >"$g.json" 2>"$g.err"
"$NG" report "$g" -o "$g.html" >"$g.out" 2>&1
if $CHECK schema "$g"/*.json >"$g.check" 2>&1 &&
    python3 - "$g.json" "$g.html" >>"$g.check" 2>&1 <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["verdict"]["culprits"]
assert c and c[0]["rank"] == 1, c
where = c[0]["where"]["frames"]
assert where == ["wait_here"], where
html = open(sys.argv[2]).read()
assert "? stale_caller" in html and "? main" in html and "wait_here" in html, html[-800:]
assert "CFI stopped at frame 0 (test)" in html
print("where is wait_here alone; the report marks stale_caller and main with '?'")
PY
then
    pass "guessed frames: $(tail -n 1 "$g.check")"
else
    fail "guessed frames" "$(tail -n 5 "$g.check") $(head -c 300 "$g.err")"
fi

# --- the other way to the registers, measured: a ptrace stop (PTRACE_SEIZE, INTERRUPT,
# DETACH) on each thread of a fresh run. signal(7): a stop makes epoll_wait and sockets
# with timeouts fail with EINTR; nanosleep, poll and futex waits are restarted. This is
# why the shim reads registers from /proc instead of stopping such threads.
p=$TMP/ptrace
start_rounds "$p" 0
stop_rc=9
if wait_for 300 grep -q '^ready' "$p/out"; then
    ppid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' \
        "$p/copies/final.json")
    python3 "$ROOT/tests/e2e/ptrace_stop.py" "$ppid" \
        $(awk '/^thread /{print $2 "=" $3}' "$p/out") >"$p/stop" 2>&1
    stop_rc=$?
fi
kill -KILL -- -$job 2>/dev/null
wait $job 2>/dev/null
if [ $stop_rc = 2 ]; then
    skip "a ptrace stop" "$(cat "$p/stop")"
elif [ $stop_rc = 0 ] && python3 - "$p/stop" >"$p/check" 2>&1 <<'PY'
import sys
calls = {l.split()[0]: l.split()[1:] for l in open(sys.argv[1])}
left = sorted(n for n, (a, b) in calls.items() if a != b and b != "219")  # 219: restart_syscall
assert left == ["epoll_wait", "recv"], calls
print("a stop cuts short %s; nanosleep, timed and untimed futex, poll, read go on" %
      " and ".join(left))
PY
then
    pass "ptrace stop: $(tail -n 1 "$p/check")"
else
    fail "ptrace stop" "rc=$stop_rc $(cat "$p/stop" "$p/check" 2>/dev/null | tail -n 12)"
fi

dumps_sane
finish

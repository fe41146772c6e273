#!/usr/bin/env python3
"""Compares the Python stacks of ncclguard's dumps with py-spy's (tests/torch/pyspy.sh).

    pyspy_compare.py PROG OUT SPY_JSON DUMP_BEFORE DUMP_AFTER

PROG is tests/torch/py_threads.py, OUT its output (the "tids" line), SPY_JSON what
`py-spy dump --json` printed between the two dumps. It checks:
  - the stacks did not move: DUMP_BEFORE and DUMP_AFTER show the same Python
    threads with the same frames (else the comparison proves nothing);
  - the same Python threads in DUMP_AFTER and py-spy (by pthread_t), with the same
    kernel tid; a thread without frames may be missing from either;
  - for each, the same frames in the same order: function, file and line. py-spy
    names a frame by co_qualname on 3.11 and later (Condition.wait) and by co_name
    before; the dump gives co_name (wait), which must then be the qualified name's
    last part;
  - the scene is the one py_threads.py sets: each of its threads (by the tid it
    printed) stops in its function at the line tagged "# @NAME", called from the
    line tagged "# @NAME-call"; with torch, the feeder thread of its DataLoader's
    index queue (multiprocessing's _feed) is among them; the thread "long" shows its 598-byte file and
    200-byte function names, the thread "unicode" its three frames named in
    UTF-8; the collective is rank 0's pending AllReduce.
Prints one line with the figures, or the differences and exits 1.
"""
import json
import re
import sys


def tags(prog):
    out = {}
    for n, line in enumerate(open(prog), 1):
        for m in re.finditer(r"# @([a-z-]+)", line):
            out[m.group(1)] = n
    return out


def ng_threads(dump):
    return {int(t["thread_id"], 16): t for t in dump["python"]["threads"]}


def ng_frames(t):
    return [(f["function"], f["file"], f["line"]) for f in t["frames"]]


def main():
    prog, out, spy_path, before_path, after_path = sys.argv[1:6]
    before, after = json.load(open(before_path)), json.load(open(after_path))
    spy = json.load(open(spy_path))
    version = after["versions"]["python"]
    qualified = tuple(int(x) for x in version.split(".")[:2]) >= (3, 11)
    problems = []
    py = after["python"]
    if py["method"] == "none":  # before 3.8 by design; a failure from 3.8 on
        print("no stacks: %s" % py["why"])
        return 3 if tuple(int(x) for x in version.split(".")[:2]) < (3, 8) else 1
    a, b = ng_threads(before), ng_threads(after)
    if {k: ng_frames(t) for k, t in a.items()} != {k: ng_frames(t) for k, t in b.items()}:
        problems.append("the stacks moved between the two dumps: the comparison is void")
    s = {t["thread_id"]: t for t in spy}
    frames = renamed = 0
    for ident in sorted(set(b) | set(s)):
        nt, st = b.get(ident), s.get(ident)
        who = "thread %x (%s)" % (ident, st["thread_name"] if st else "tid %s" % nt["tid"])
        if nt is None or st is None:
            if (nt and nt["frames"]) or (st and st["frames"]):
                problems.append("%s: only %s has it" % (who, "py-spy" if st else "ncclguard"))
            continue
        if st.get("os_thread_id") is not None and nt["tid"] != st["os_thread_id"]:
            problems.append("%s: tid %s, py-spy %s" % (who, nt["tid"], st["os_thread_id"]))
        want = []
        for f in st["frames"]:
            name = f["name"]
            if qualified and "." in name:
                name = name.rsplit(".", 1)[1]
            want.append((name, f["filename"], f["line"]))
            renamed += name != f["name"]
        got = ng_frames(nt)
        if got != want:
            lines = ["%s: frames differ (innermost first; ncclguard | py-spy):" % who]
            for i in range(max(len(got), len(want))):
                g = got[i] if i < len(got) else None
                w = want[i] if i < len(want) else None
                lines.append("  %s %-3d %s | %s" % ("  " if g == w else "!!", i, g, w))
            problems.append("\n".join(lines))
        frames += len(got)

    # the scene: each thread of py_threads.py where the program put it
    tag = tags(prog)
    m = re.search(r"^tids (.*)$", open(out).read(), re.M)
    tids = dict((k, int(v)) for k, v in (kv.split("=") for kv in m.group(1).split())) if m else {}
    by_tid = {t["tid"]: t for t in b.values()}
    for name in ("collective", "waiter", "sleeper", "deep", "method", "main"):
        t = by_tid.get(tids.get(name))
        mine = [f for f in ng_frames(t) if f[1] == prog] if t else []
        if len(mine) < 2 or mine[0][2] != tag[name] or mine[1][2] != tag[name + "-call"]:
            problems.append("thread %s (tid %s) is not where the program put it: %s"
                            % (name, tids.get(name), mine[:2]))
    t = by_tid.get(tids.get("long"))
    parked = [f for f in t["frames"] if f["file"].startswith("/nowhere/")] if t else []
    if not parked or len(parked[0]["file"]) != 598 or len(parked[0]["function"]) != 200:
        problems.append("thread long (tid %s) lacks its long names: %s"
                        % (tids.get("long"), parked[:1]))
    t = by_tid.get(tids.get("unicode"))
    wide = [f[:2] for f in ng_frames(t) if f[1].startswith("/nowhere/")] if t else []
    if len(wide) != 3 or any(max(map(ord, f + n)) < 128 for n, f in wide):
        problems.append("thread unicode (tid %s) lacks its names that are not ASCII: %s"
                        % (tids.get("unicode"), wide))
    text = open(out).read()
    m = re.search(r"^torch (.*)$", text, re.M)
    feeder = [t for t in b.values() if any(
        f[0] == "_feed" and f[1].endswith("multiprocessing/queues.py") for f in ng_frames(t))]
    if m and not feeder:
        problems.append("no feeder thread of torch's DataLoader (multiprocessing's _feed)")
    pending = [o for o in after["ops"] if o["comm_rank"] == 0 and o["seq"] == 2]
    if not pending or pending[0]["state"] not in ("scheduled", "started"):
        problems.append("rank 0's AllReduce #2 is not pending: %s" % pending)
    others = [t for t in b.values() if t["tid"] not in tids.values() and t["frames"]]
    native = len(after["threads"]) - len(b)
    if problems:
        print("\n".join(problems))
        return 1
    print("%s%s (%s): %d threads, %d frames equal (%d of py-spy's names qualified), "
          "%d Python threads not the program's, %d threads without Python" %
          ("%s, " % m.group(1) if m else "", version, py["method"], len(b), frames, renamed,
           len(others), native))
    return 0


if __name__ == "__main__":
    sys.exit(main())

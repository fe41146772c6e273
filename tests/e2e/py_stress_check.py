#!/usr/bin/env python3
"""Dumps tests/e2e/progs/py_stress.py on SIGUSR2 every 50 ms and checks each dump.

    py_stress_check.py [--survive-only] PYTHON DUMPS METHOD DIR

The program runs with LD_PRELOAD=$PRELOAD (this checker does not) and the rest of
the environment given, with NCCLGUARD_DUMP_DIR=DIR/dumps. Each round sends
SIGUSR2, waits for the dump file to be replaced (a new inode), reads it and checks
it, then waits out the rest of the 50 ms. The program must survive all DUMPS
dumps. In each dump, unless --survive-only:
  - python.method is METHOD, and every Python thread has a tid or a note;
  - the main thread (tid = the pid) stops in stuck_in_python_function at the line
    tagged @main-sleep, called from <module> at @main-call;
  - the deep thread (its tid as the program printed it) shows deep() at @deep-sleep,
    then deep() at @deep-call, 100 frames in all, with a note that says it has more;
  - a thread whose stack holds churner() has a churner's tid;
  - the tids of main, deep and the churners are among the dump's threads[].tid;
  - every frame of the program's file names one of its functions.
Prints one line: the dumps survived and checked, with the median and the longest
time from the signal to the dump's rename (a figure, never checked), or the first
failure.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

PERIOD = 0.05
WAIT_S = 60


def tags(path):
    out, funcs = {}, set()
    for n, line in enumerate(open(path), 1):
        m = re.search(r"# @([a-z-]+)", line)
        if m:
            out[m.group(1)] = n
        m = re.match(r"\s*def (\w+)\(", line)
        if m:
            funcs.add(m.group(1))
    return out, funcs | {"<module>", "<listcomp>"}  # a comprehension is a function up to 3.11


def check(d, pid, ids, method, prog, tag, funcs):
    py = d.get("python")
    assert py, "python is null"
    assert py["method"] == method, f"method {py['method']}, expected {method}: {py.get('why')}"
    tids = {t["tid"] for t in d["threads"]}
    by_tid = {}
    for t in py["threads"]:
        assert t["tid"] is not None or t.get("note"), f"thread without tid or note: {t}"
        if t["tid"] is not None:
            by_tid[t["tid"]] = t
        for f in t["frames"]:
            if f["file"] == prog:
                assert f["function"] in funcs, f"unknown function {f['function']}"
    main = by_tid.get(pid)
    assert main, f"no Python thread with the main tid {pid}: {[t['tid'] for t in py['threads']]}"
    fr = [(f["function"], f["line"]) for f in main["frames"]]
    assert fr[:2] == [("stuck_in_python_function", tag["main-sleep"]),
                      ("<module>", tag["main-call"])], f"main: {fr}"
    deep = by_tid.get(ids["deep"])
    assert deep, f"no Python thread with the deep tid {ids['deep']}"
    fr = [(f["function"], f["line"]) for f in deep["frames"]]
    want = [("deep", tag["deep-sleep"])] + [("deep", tag["deep-call"])] * 99
    assert fr == want, f"deep: {fr[:3]}... ({len(fr)} frames)"
    assert deep.get("note"), "deep: no note that frames were left out"
    churners = {ids["churn1"], ids["churn2"]}
    for t in py["threads"]:
        if any(f["function"] == "churner" for f in t["frames"]):
            assert t["tid"] in churners, f"a churner's stack on tid {t['tid']}, not {churners}"
    for who, tid in (("main", pid), ("deep", ids["deep"]), ("churn1", ids["churn1"]),
                     ("churn2", ids["churn2"])):
        assert tid in tids, f"{who} tid {tid} not in threads[].tid"


def main():
    args = sys.argv[1:]
    survive_only = args[:1] == ["--survive-only"]
    if survive_only:
        args = args[1:]
    python, dumps, method, work = args[0], int(args[1]), args[2], args[3]
    prog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs", "py_stress.py")
    tag, funcs = tags(prog)
    ddir = os.path.join(work, "dumps")
    env = dict(os.environ, NCCLGUARD_DUMP_DIR=ddir, LD_PRELOAD=os.environ.get("PRELOAD", ""))
    out = open(os.path.join(work, "out"), "w+")
    p = subprocess.Popen([python, prog], env=env, stdout=subprocess.PIPE, stderr=out, text=True)
    line = p.stdout.readline()
    if not line.startswith("ready "):
        p.kill()
        sys.exit(f"FAIL: the program did not start: {line!r}")
    ids = json.loads(line[6:])
    inode, done, took = None, 0, []
    try:
        for i in range(dumps):
            t0 = time.monotonic()
            p.send_signal(signal.SIGUSR2)
            while True:
                if p.poll() is not None:
                    how = (f"signal {signal.Signals(-p.returncode).name}" if p.returncode < 0
                           else f"exit {p.returncode}")
                    sys.exit(f"FAIL: the program died ({how}) after {done} dumps")
                try:
                    path = [os.path.join(ddir, n) for n in os.listdir(ddir)
                            if n.endswith(f"-{p.pid}.json")][0]
                    st = os.stat(path)
                    if st.st_ino != inode:
                        inode = st.st_ino
                        took.append(time.monotonic() - t0)
                        break
                except (OSError, IndexError):
                    pass
                if time.monotonic() - t0 > WAIT_S:
                    sys.exit(f"FAIL: dump {i + 1} did not come in {WAIT_S} s")
                time.sleep(0.002)
            d = json.load(open(path))
            if not survive_only:
                try:
                    check(d, p.pid, ids, method, prog, tag, funcs)
                except AssertionError as e:
                    json.dump(d, open(os.path.join(work, "bad.json"), "w"))
                    sys.exit(f"FAIL: dump {i + 1}: {e}")
            done += 1
            time.sleep(max(0.0, PERIOD - (time.monotonic() - t0)))
        if p.poll() is not None:
            sys.exit(f"FAIL: the program died after {done} dumps")
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    what = "survived" if survive_only else "survived and checked"
    took.sort()
    print(f"{done} dumps {what} (signal to dump: median {took[len(took) // 2] * 1e3:.1f} ms, "
          f"longest {took[-1] * 1e3:.1f} ms)")


main()

"""A Python rank whose stacks change all the time, for dumps taken while it runs.

After one AllReduce through the shim (py_hang.py), it starts:
  - "deep": recurses DEEP levels into deep(), then sleeps at the bottom (a
    stable stack, longer than the dump keeps);
  - two "churn" threads that recurse up and down to random depths without end;
  - a spawner of short-lived threads that recurse a little and exit, four at
    a time, so thread states come and go during every dump;
and prints "ready" with the native thread ids of main, deep and the churners
(JSON), then
sleeps in stuck_in_python_function. Lines tagged "# @name" are where the
stacks stop; tests/e2e/py_stress_check.py reads the tags from this file.
"""
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_hang  # noqa: E402  (loads the fakes, RTLD_GLOBAL)

DEEP = 150
ids = {}


def deep(n):
    if n == 0:
        ids["deep"] = threading.get_native_id()
        while True:
            time.sleep(0.05)  # @deep-sleep
    deep(n - 1)  # @deep-call


def churn(n):
    if n:
        return churn(n - 1)  # @churn-call
    return sum(range(30))  # @churn-bottom


def churner(seed):
    ids[f"churn{seed}"] = threading.get_native_id()
    rng = random.Random(seed)
    while True:
        churn(rng.randrange(1, 120))  # @churner-call
        time.sleep(0.0005)


def short_lived():
    churn(12)  # @short-call


def spawner():
    while True:
        batch = [threading.Thread(target=short_lived) for _ in range(4)]
        for t in batch:
            t.start()
        for t in batch:
            t.join()
        time.sleep(0.001)


def stuck_in_python_function():
    while True:
        time.sleep(0.05)  # @main-sleep


py_hang.one_rank_allreduce()
threading.Thread(target=deep, args=(DEEP,), name="deep", daemon=True).start()
for seed in (1, 2):
    threading.Thread(target=churner, args=(seed,), name="churn", daemon=True).start()
threading.Thread(target=spawner, name="spawner", daemon=True).start()
while not {"deep", "churn1", "churn2"} <= set(ids):
    time.sleep(0.01)
ids["main"] = threading.get_native_id()
print("ready " + json.dumps(ids), flush=True)
stuck_in_python_function()  # @main-call

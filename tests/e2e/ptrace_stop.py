#!/usr/bin/env python3
"""What a ptrace stop does to blocked calls: the other way to take a thread's
registers, that tests/e2e/blocked.sh measures so that the shim's choice stays
argued (shim/evidence/stackscan.h).

usage: ptrace_stop.py PID NAME=TID...

Stops each thread with PTRACE_SEIZE + PTRACE_INTERRUPT (as eu-stack or py-spy
do), waits for the stop, detaches, and then prints one line per thread:
"NAME before after": its call (the first field of /proc/PID/task/TID/syscall)
before the stop and half a second after it. A call that the stop cut short
shows another call after (the program's next wait); one the kernel restarted
shows itself or restart_syscall. Exits 2 when ptrace is refused (Yama's
ptrace_scope, seccomp, a container), printing why.
"""
import ctypes
import os
import sys
import time

PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH = 0x4206, 0x4207, 17
WALL = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def call_of(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/syscall") as f:
        return f.read().split()[0]


def main(argv):
    pid = int(argv[1])
    threads = [a.split("=") for a in argv[2:]]
    before = {name: call_of(pid, tid) for name, tid in threads}
    for name, tid in threads:
        if libc.ptrace(PTRACE_SEIZE, int(tid), None, None) != 0:
            print("ptrace refused: %s" % os.strerror(ctypes.get_errno()))
            return 2
        libc.ptrace(PTRACE_INTERRUPT, int(tid), None, None)
        status = ctypes.c_int()
        libc.waitpid(int(tid), ctypes.byref(status), WALL)
        libc.ptrace(PTRACE_DETACH, int(tid), None, None)
    time.sleep(0.5)
    for name, tid in threads:
        print(name, before[name], call_of(pid, tid))
    return 0


sys.exit(main(sys.argv))

"""A Python rank whose NCCL calls come from a communication thread fed by a queue.

Like a framework's gradient reducer: the main thread trains and hands each step's
bucket to the thread "comm" through a queue.Queue; that thread issues the AllReduce
and hands the step back. Run one process per rank under tests/apps/launch (RANK,
WORLD_SIZE, LAUNCH_RDZV_DIR). The unique id goes through the rendezvous directory.

With HANG_RANK=R and HANG_STEP=S, rank R's main thread blocks in
stuck_in_training_step before step S: its comm thread then waits idle on the
queue, while the other ranks' comm threads wait in the AllReduce and time out.
The verdict must name stuck_in_training_step. The calls go through py_hang.py's
ctypes.CDLL(None) to the preloaded shim, with its ncclUniqueId.
"""
import ctypes
import os
import queue
import sys
import threading
import time

from py_hang import UniqueId, g  # loads the fakes, RTLD_GLOBAL

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
HANG_RANK = int(os.environ.get("HANG_RANK", "-1"))
HANG_STEP = int(os.environ.get("HANG_STEP", "3"))
STEPS = int(os.environ.get("STEPS", "20"))


def check(what, rc):
    if rc != 0:
        sys.exit(f"py_comm_thread: rank {RANK}: {what} returned {rc}")


def unique_id():
    """Rank 0 makes the id and publishes it (write, then rename); the others wait for it."""
    uid = UniqueId()
    path = os.path.join(os.environ.get("LAUNCH_RDZV_DIR", "."),
                        f"pyuid-{os.environ.get('LAUNCH_RUN_ID', 'x')}")
    if RANK == 0:
        check("ncclGetUniqueId", g.ncclGetUniqueId(ctypes.byref(uid)))
        with open(path + ".tmp", "wb") as f:
            # all 128 bytes: the c_char array's value would stop at the first NUL
            # of the id's random part (about 1 run in 16 with the fake's 8+16 bytes)
            f.write(ctypes.string_at(ctypes.addressof(uid), 128))
        os.rename(path + ".tmp", path)
        return uid
    for _ in range(6000):
        if os.path.exists(path):
            break
        time.sleep(0.01)
    with open(path, "rb") as f:
        ctypes.memmove(ctypes.addressof(uid), f.read(128), 128)
    return uid


class Comm:
    def __init__(self):
        dev, ctx, self.buf = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
        self.stream, self.comm = ctypes.c_void_p(), ctypes.c_void_p()
        check("cuInit", g.cuInit(0))
        check("cuDeviceGet", g.cuDeviceGet(ctypes.byref(dev), 0))
        check("cuDevicePrimaryCtxRetain", g.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
        check("cuCtxSetCurrent", g.cuCtxSetCurrent(ctx))
        self.ctx = ctx
        check("cuStreamCreate", g.cuStreamCreate(ctypes.byref(self.stream), 1))
        check("cuMemAlloc", g.cuMemAlloc_v2(ctypes.byref(self.buf), ctypes.c_size_t(4096)))
        check("ncclCommInitRank", g.ncclCommInitRank(ctypes.byref(self.comm), WORLD,
                                                     unique_id(), RANK))

    def allreduce(self):
        # ncclAllReduce(send, recv, count, ncclFloat32 = 7, ncclSum = 0, comm, stream)
        b = ctypes.c_void_p(self.buf.value)
        check("ncclAllReduce", g.ncclAllReduce(b, b, ctypes.c_size_t(1024), 7, 0, self.comm,
                                               self.stream))
        check("cuStreamSynchronize", g.cuStreamSynchronize(self.stream))


def comm_loop(comm, todo, done):
    """The communication thread: one AllReduce per bucket it is handed."""
    g.cuCtxSetCurrent(comm.ctx)
    while True:
        step = todo.get()
        if step is None:
            return
        comm.allreduce()
        done.put(step)


def stuck_in_training_step():
    while True:
        time.sleep(0.2)


def train(comm):
    todo, done = queue.Queue(), queue.Queue()
    threading.Thread(target=comm_loop, args=(comm, todo, done), name="comm",
                     daemon=True).start()
    for step in range(STEPS):
        if RANK == HANG_RANK and step == HANG_STEP:
            print(f"rank {RANK}: hangs before step {step}", flush=True)
            stuck_in_training_step()
        todo.put(step)
        done.get()
    todo.put(None)


train(Comm())
print(f"py_comm_thread: rank {RANK} ok", flush=True)

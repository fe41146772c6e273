"""Python threads parked at known lines while one hangs in a collective over the fake NCCL.

The program of tests/torch/pyspy.sh, which compares the Python stacks of
ncclguard's dump of it with py-spy's. It runs on CPython 3.6 and later:

    py_threads.py [--torch]

Every thread ends in a call that does not return, so that no stack moves between
the readings: a lock or an event wait (C code), a long sleep, or the fake NCCL.
  - "collective": collective_step -> all_reduce_and_wait. One process holds both
    ranks of a communicator (two threads call ncclCommInitRank, one per fake
    device); after one grouped AllReduce of both, rank 0 alone issues a second
    one and waits for it in cuStreamSynchronize, which never returns: the peer
    never joins.
  - "waiter": wait_for_work -> wait_on_event: Event.wait(), so the innermost
    frames are the standard library's threading.py.
  - "sleeper": sleep_outer -> sleep_inner: time.sleep.
  - "deep": recurse(DEPTH) down to 0, then a lock acquire: DEPTH + 1 frames of
    the same function at two lines, whose order a reader must keep.
  - "method": Parked.run, a method (co_name "run"), and a lambda.
  - "long": code compiled under a file name of LONG_FILE's 598 bytes, whose
    function has a name of 200 (more than a reader keeps without trying).
  - "unicode": code under file names that are not ASCII, one of each kind of
    str (1, 2 and 4 bytes a character), in functions named likewise.
  - the main thread: main -> park_main: an Event wait, after "ready".
With --torch it first imports torch, multiplies two matrices (torch's intra-op
threads: native, without Python state) and takes one batch from a DataLoader with
one worker process, whose index queue's feeder thread is a Python thread that
multiprocessing started for torch's loader, parked in its queue's wait. torch's own
libnccl.so.2 (the wheel's, reached through libtorch_cuda.so's RPATH) stays local to
torch; the fake CUDA and NCCL are then loaded by path into the global scope, where
the preloaded shim finds them behind its wrappers, and the calls go through
ctypes.CDLL(None), as in tests/e2e/progs/py_hang.py.

Prints "torch VERSION, N intra-op threads" with --torch, "tids NAME=TID ..." for the
threads it started (from /proc/thread-self) and
"ready" once every thread is parked or about to be.
"""
import ctypes
import os
import sys
import threading
import time

DEPTH = 25
ready = threading.Barrier(8)  # the seven threads and main
never = threading.Event()
tids = {}


def fakes_dir():
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if d and os.path.exists(os.path.join(d, "libnccl.so.2")):
            return d
    sys.exit("py_threads: no libnccl.so.2 on LD_LIBRARY_PATH")


def torch_work():
    import torch
    import torch.utils.data

    a = torch.randn(512, 512)
    (a @ a).sum().item()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(64.0)),
                                         batch_size=4, num_workers=1)
    it = iter(loader)
    next(it)
    print("torch %s, %d intra-op threads" % (torch.__version__, torch.get_num_threads()),
          flush=True)
    return loader, it  # kept alive: the worker and the feeder thread stay


class UniqueId(ctypes.Structure):  # ncclUniqueId: passed by value
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(what, rc):
    if rc != 0:
        print("py_threads: %s returned %d" % (what, rc), flush=True)
        os._exit(1)


class Rank:
    """Rank 0's communicator, stream and buffer, after an op both ranks completed."""

    def __init__(self, g):
        self.g = g
        self.streams, self.bufs, ctxs = [], [], []
        for d in range(2):
            dev, ctx = ctypes.c_int(), ctypes.c_void_p()
            stream, buf = ctypes.c_void_p(), ctypes.c_uint64()
            check("cuDeviceGet", g.cuDeviceGet(ctypes.byref(dev), d))
            check("cuDevicePrimaryCtxRetain", g.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
            check("cuCtxSetCurrent", g.cuCtxSetCurrent(ctx))
            check("cuStreamCreate", g.cuStreamCreate(ctypes.byref(stream), 1))
            check("cuMemAlloc", g.cuMemAlloc_v2(ctypes.byref(buf), ctypes.c_size_t(4096)))
            self.streams.append(stream)
            self.bufs.append(buf)
            ctxs.append(ctx)
        # one thread per rank makes its communicator (a collective call), with its
        # device's context current, as a framework's rank does
        uid, comms = UniqueId(), (ctypes.c_void_p * 2)()
        check("ncclGetUniqueId", g.ncclGetUniqueId(ctypes.byref(uid)))

        def init(d):
            check("cuCtxSetCurrent", g.cuCtxSetCurrent(ctxs[d]))
            check("ncclCommInitRank", g.ncclCommInitRank(ctypes.byref(comms, d * 8), 2, uid, d))

        makers = [threading.Thread(target=init, args=(d,)) for d in range(2)]
        for t in makers:
            t.start()
        for t in makers:
            t.join()
        self.comms, self.ctxs = comms, ctxs
        check("ncclGroupStart", g.ncclGroupStart())
        for d in range(2):
            self.all_reduce(d)
        check("ncclGroupEnd", g.ncclGroupEnd())
        for d in range(2):
            check("cuStreamSynchronize", g.cuStreamSynchronize(self.streams[d]))

    def all_reduce(self, d):
        # ncclAllReduce(send, recv, count, ncclFloat32 = 7, ncclSum = 0, comm, stream)
        b = ctypes.c_void_p(self.bufs[d].value)
        check("ncclAllReduce", self.g.ncclAllReduce(b, b, ctypes.c_size_t(1024), 7, 0,
                                                    ctypes.c_void_p(self.comms[d]),
                                                    self.streams[d]))


def note_tid(name):
    tids[name] = int(os.readlink("/proc/thread-self").split("/")[-1])


def all_reduce_and_wait(rank):
    check("cuCtxSetCurrent", rank.g.cuCtxSetCurrent(rank.ctxs[0]))
    rank.all_reduce(0)
    ready.wait()
    rank.g.cuStreamSynchronize(rank.streams[0])  # @collective


def collective_step(rank):
    note_tid("collective")
    all_reduce_and_wait(rank)  # @collective-call


def wait_on_event():
    ready.wait()
    never.wait()  # @waiter


def wait_for_work():
    note_tid("waiter")
    wait_on_event()  # @waiter-call


def sleep_inner():
    ready.wait()
    time.sleep(100000)  # @sleeper


def sleep_outer():
    note_tid("sleeper")
    sleep_inner()  # @sleeper-call


def recurse(n, lock):
    if n == 0:
        ready.wait()
        lock.acquire()  # @deep
        return
    recurse(n - 1, lock)  # @deep-call


def deep():
    note_tid("deep")
    lock = threading.Lock()
    lock.acquire()
    recurse(DEPTH, lock)  # @deep-top


class Parked(threading.Thread):
    def run(self):
        note_tid("method")
        park = lambda: (ready.wait(), never.wait())  # @method  # noqa: E731
        park()  # @method-call


LONG_FILE = "/nowhere/" + "long-directory-name/" * 29 + "parked.py"
LONG_NAME = "parked_" + "x" * 193
LONG_SRC = """def %s():
    ready.wait()
    never.wait()
%s()
""" % (LONG_NAME, LONG_NAME)


def long_names():
    note_tid("long")
    exec(compile(LONG_SRC, LONG_FILE, "exec"), {"ready": ready, "never": never})


# not ASCII, one of each kind of str: Latin-1, CJK, and an astral character (in
# a file name; in a function name, a CJK Extension B letter). Escaped: the
# source stays ASCII. Each function, in a file of its own, calls the next.
WIDE = [("/nowhere/caf\u00e9/r\u00e9sum\u00e9.py", "\u00e9t\u00e9"),
        ("/nowhere/\u5b66\u7fd2/\u8a13\u7df4.py", "\u5f85\u3064"),
        ("/nowhere/\U0001f40d/snake.py", "\U00020000x")]


def wide_names():
    note_tid("unicode")
    glob = {"ready": ready, "never": never}
    for i, (file, name) in enumerate(WIDE):
        body = "%s()" % WIDE[i + 1][1] if i + 1 < len(WIDE) else "ready.wait(); never.wait()"
        exec(compile("def %s():\n    %s\n" % (name, body), file, "exec"), glob)
    glob[WIDE[0][1]]()  # @unicode


def park_main():
    print("tids " + " ".join("%s=%d" % kv for kv in sorted(tids.items())), flush=True)
    print("ready", flush=True)
    never.wait()  # @main


def main():
    keep = torch_work() if "--torch" in sys.argv[1:] else None
    d = fakes_dir()
    ctypes.CDLL(os.path.join(d, "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
    ctypes.CDLL(os.path.join(d, "libnccl.so.2"), mode=ctypes.RTLD_GLOBAL)
    g = ctypes.CDLL(None)
    check("cuInit", g.cuInit(0))
    rank = Rank(g)
    started = [threading.Thread(target=collective_step, args=(rank,), name="collective"),
               threading.Thread(target=wait_for_work, name="waiter"),
               threading.Thread(target=sleep_outer, name="sleeper"),
               threading.Thread(target=deep, name="deep"),
               Parked(name="method"),
               threading.Thread(target=long_names, name="long"),
               threading.Thread(target=wide_names, name="unicode")]
    for t in started:
        t.daemon = True
        t.start()
    ready.wait()
    note_tid("main")
    park_main()  # @main-call
    return keep


if __name__ == "__main__":
    main()  # @module

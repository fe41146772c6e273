"""A Python rank that calls NCCL through ctypes, then hangs in a Python function.

libnccl.so.2 is loaded RTLD_GLOBAL and the calls go through ctypes.CDLL(None),
so they resolve in the global scope, where the preloaded shim comes first: the
way a framework's linked calls reach it. After one AllReduce it prints "ready"
and blocks in stuck_in_python_function, whose name the dump must show. With
the argument "crash" it dereferences NULL instead (the crash path's test).
py_stress.py imports it for one_rank_allreduce.
"""
import ctypes
import sys
import threading
import time

ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL("libnccl.so.2", mode=ctypes.RTLD_GLOBAL)
g = ctypes.CDLL(None)


class UniqueId(ctypes.Structure):  # ncclUniqueId: passed by value
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(what, rc):
    if rc != 0:
        sys.exit(f"py_hang: {what} returned {rc}")


def one_rank_allreduce():
    dev, ctx, stream, buf = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_uint64()
    check("cuInit", g.cuInit(0))
    check("cuDeviceGet", g.cuDeviceGet(ctypes.byref(dev), 0))
    check("cuDevicePrimaryCtxRetain", g.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check("cuCtxSetCurrent", g.cuCtxSetCurrent(ctx))
    check("cuStreamCreate", g.cuStreamCreate(ctypes.byref(stream), 1))
    check("cuMemAlloc", g.cuMemAlloc_v2(ctypes.byref(buf), ctypes.c_size_t(4096)))
    uid = UniqueId()
    check("ncclGetUniqueId", g.ncclGetUniqueId(ctypes.byref(uid)))
    comm = ctypes.c_void_p()
    check("ncclCommInitRank", g.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0))
    # ncclAllReduce(send, recv, count, ncclFloat32 = 7, ncclSum = 0, comm, stream)
    check("ncclAllReduce", g.ncclAllReduce(ctypes.c_void_p(buf.value), ctypes.c_void_p(buf.value),
                                           ctypes.c_size_t(1024), 7, 0, comm, stream))
    check("cuStreamSynchronize", g.cuStreamSynchronize(stream))


def data_loader_worker():
    while True:
        time.sleep(0.05)


def stuck_in_python_function():
    while True:
        time.sleep(0.2)


if __name__ == "__main__":
    one_rank_allreduce()
    if sys.argv[1:] == ["crash"]:
        ctypes.string_at(0)
    threading.Thread(target=data_loader_worker, name="loader", daemon=True).start()
    print("ready", flush=True)
    stuck_in_python_function()

/*
 * private_handle: calls NCCL the way vLLM's pynccl does, through a private
 * handle: dlopen("libnccl.so.2", RTLD_LOCAL) and dlsym on that handle, which
 * searches that library and its dependencies, never a preloaded one. Runs
 * argv[1] AllReduce calls on a communicator of one rank; the program itself
 * links no NCCL. Exit 0 when every call succeeded.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

typedef ncclResult_t (*uid_fn)(ncclUniqueId *);
typedef ncclResult_t (*init_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*ar_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
typedef ncclResult_t (*destroy_fn)(ncclComm_t);

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5;
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 3;
    uid_fn get_uid = (uid_fn)dlsym(h, "ncclGetUniqueId");
    init_fn init = (init_fn)dlsym(h, "ncclCommInitRank");
    ar_fn all_reduce = (ar_fn)dlsym(h, "ncclAllReduce");
    destroy_fn destroy = (destroy_fn)dlsym(h, "ncclCommDestroy");
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUdeviceptr buf;
    ncclUniqueId id;
    ncclComm_t comm;
    if (!get_uid || !init || !all_reduce || !destroy || cuInit(0) || cuDeviceGet(&dev, 0) ||
        cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&buf, 64) || get_uid(&id) ||
        init(&comm, 1, id, 0))
        return 2;
    for (int i = 0; i < n; i++)
        if (all_reduce((void *)buf, (void *)buf, 16, ncclFloat32, ncclSum, comm, s)) return 2;
    if (cuStreamSynchronize(s) || destroy(comm)) return 2;
    printf("private_handle: ok\n");
    return 0;
}

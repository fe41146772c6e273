/*
 * stuck_init: rank 0 of a two-rank communicator whose rank 1 never comes, so
 * ncclCommInitRank never returns; the test stops it with timeout(1) or, once
 * the line "stuck_init: creating" is out, with a signal of its own.
 */
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    ncclUniqueId id;
    ncclComm_t comm;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || ncclGetUniqueId(&id))
        return 2;
    printf("stuck_init: creating\n");
    fflush(stdout);
    ncclResult_t r = ncclCommInitRank(&comm, 2, id, 0);
    printf("stuck_init: ncclCommInitRank returned %d\n", r);
    return 3;
}

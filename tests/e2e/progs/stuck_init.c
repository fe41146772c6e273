/*
 * stuck_init: rank 0 of a two-rank communicator whose rank 1 never comes, so
 * ncclCommInitRank never returns; the test stops it with timeout(1).
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
    ncclResult_t r = ncclCommInitRank(&comm, 2, id, 0);
    printf("stuck_init: ncclCommInitRank returned %d\n", r);
    return 3;
}

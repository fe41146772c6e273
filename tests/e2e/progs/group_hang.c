/*
 * group_hang: two ranks of one communicator in this process (created in one
 * group, as one thread may). Rank 0 issues a group of a Send to and a Recv from
 * rank 1; rank 1 never issues its side, so the group starts on rank 0's stream
 * and never finishes: a broken link of a pipeline. The process waits `secs`
 * seconds (for the shim's timeout and dump), then leaves without cleaning up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cuda.h>
#include <nccl.h>

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 3;
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUdeviceptr buf;
    ncclUniqueId id;
    ncclComm_t comm[2];
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(&buf, 256) || ncclGetUniqueId(&id))
        return 2;
    if (ncclGroupStart() || ncclCommInitRank(&comm[0], 2, id, 0) ||
        ncclCommInitRank(&comm[1], 2, id, 1) || ncclGroupEnd())
        return 3;
    void *p = (void *)buf;
    if (ncclGroupStart() || ncclSend(p, 8, ncclFloat, 1, comm[0], s) ||
        ncclRecv((char *)p + 128, 8, ncclFloat, 1, comm[0], s) || ncclGroupEnd())
        return 4;
    printf("group_hang: rank 0's group issued, rank 1 silent\n");
    fflush(stdout);
    sleep((unsigned)secs);
    _exit(0);
}

/*
 * ctx_cycle: one rank that releases its primary context and retains it again,
 * `rounds` times, as a framework that tears down and rebuilds its CUDA state
 * does. Each round: retain and make current, a stream, a communicator, ten
 * AllReduce waited for, destroy the communicator and the stream, release.
 * Exits 0 when every call succeeded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cuda.h>
#include <nccl.h>

static int round_trip(CUdevice dev)
{
    CUcontext ctx;
    CUstream s;
    CUdeviceptr buf;
    ncclUniqueId id;
    ncclComm_t comm;
    if (cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&buf, 64) ||
        ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0))
        return -1;
    void *p = (void *)buf;
    for (int i = 0; i < 10; i++)
        if (ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s) || cuStreamSynchronize(s))
            return -1;
    usleep(300 * 1000); /* the watchdog polls this context's markers meanwhile */
    if (ncclCommDestroy(comm) || cuMemFree(buf) || cuStreamDestroy(s) || cuCtxSetCurrent(NULL) ||
        cuDevicePrimaryCtxRelease(dev))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    CUdevice dev;
    if (cuInit(0) || cuDeviceGet(&dev, 0)) return 2;
    for (int r = 0; r < rounds; r++) {
        if (round_trip(dev)) {
            fprintf(stderr, "ctx_cycle: round %d failed\n", r);
            return 3;
        }
        usleep(300 * 1000); /* released: the watchdog must not use the context */
    }
    printf("ctx_cycle: %d rounds\n", rounds);
    return 0;
}

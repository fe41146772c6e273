/*
 * one_rank.h: the start of the one-rank jobs of tests/e2e/progs: the first
 * device's primary context made current, a non-blocking stream, `bytes` of
 * device memory and a communicator of one rank. 0, or -1 on any failure.
 */
#ifndef NCCLGUARD_E2E_ONE_RANK_H
#define NCCLGUARD_E2E_ONE_RANK_H

#include <cuda.h>
#include <nccl.h>

static inline int one_rank_job(CUstream *s, CUdeviceptr *buf, size_t bytes, ncclComm_t *comm)
{
    CUdevice dev;
    CUcontext ctx;
    ncclUniqueId id;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(s, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(buf, bytes) || ncclGetUniqueId(&id) || ncclCommInitRank(comm, 1, id, 0))
        return -1;
    return 0;
}

#endif

/*
 * capture_implicit: one rank. A blocking stream captures in global mode while
 * an AllReduce is enqueued on the legacy (NULL) stream, then the capture ends.
 * Run it with FAKENCCL_NOOP=1, so that the fake NCCL itself puts no work on the
 * legacy stream: whatever touches the legacy stream during the capture is the
 * shim's. Exit 0 when the capture survived, 1 when it was invalidated, 2+ on
 * other failures.
 */
#include <stdio.h>

#include "one_rank.h"

int main(void)
{
    CUstream s, blocking;
    CUdeviceptr buf;
    ncclComm_t comm;
    CUgraph graph = NULL;
    if (one_rank_job(&s, &buf, 64, &comm) || cuStreamCreate(&blocking, CU_STREAM_DEFAULT)) return 2;
    void *p = (void *)buf;
    if (cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_GLOBAL)) return 3;
    ncclResult_t r = ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, NULL);
    CUresult end = cuStreamEndCapture(blocking, &graph);
    printf("capture_implicit: AllReduce -> %d, cuStreamEndCapture -> %d\n", (int)r, (int)end);
    if (r != ncclSuccess) return 4;
    return end == CUDA_SUCCESS ? 0 : end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ? 1 : 5;
}

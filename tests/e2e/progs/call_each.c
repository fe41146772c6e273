/*
 * call_each: calls every NCCL 2.28 entry point at least once, on one-rank
 * communicators, in a fixed order. With FAKENCCL_CALL_LOG set, the fake NCCL
 * logs what it received; tests/e2e/shim.sh compares the log of a run under the
 * shim with the log of a plain run. Return codes are printed, not judged: an
 * error answer must pass through unchanged too.
 */
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#define SHOW(call) printf("%-60s -> %d\n", #call, (int)(call))

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(&s, 0)) {
        fprintf(stderr, "call_each: no CUDA context\n");
        return 2;
    }
    int version = 0, n = 0;
    SHOW(ncclGetVersion(&version));
    ncclUniqueId id, id2[2];
    SHOW(ncclGetUniqueId(&id));
    ncclComm_t comm = NULL, cfgcomm = NULL, scal = NULL, split = NULL, shrunk = NULL;
    SHOW(ncclCommInitRank(&comm, 1, id, 0));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.commName = "call_each";
    SHOW(ncclGetUniqueId(&id));
    SHOW(ncclCommInitRankConfig(&cfgcomm, 1, id, 0, &cfg));
    SHOW(ncclGetUniqueId(&id2[0]));
    SHOW(ncclGetUniqueId(&id2[1]));
    SHOW(ncclCommInitRankScalable(&scal, 1, 0, 2, id2, NULL));
    ncclComm_t all[2] = {NULL, NULL};
    int devs[2] = {0, 1};
    SHOW(ncclCommInitAll(all, 2, devs));
    SHOW(ncclCommCount(comm, &n));
    SHOW(ncclCommCuDevice(comm, &n));
    SHOW(ncclCommUserRank(comm, &n));
    ncclResult_t async = ncclSuccess;
    SHOW(ncclCommGetAsyncError(comm, &async));

    CUdeviceptr a, b;
    cuMemAlloc(&a, 4096);
    cuMemAlloc(&b, 4096);
    cuMemsetD8(a, 1, 4096);
    void *sa = (void *)a, *rb = (void *)b;
    SHOW(ncclAllReduce(sa, rb, 16, ncclFloat, ncclSum, comm, s));
    SHOW(ncclBroadcast(sa, rb, 16, ncclInt32, 0, comm, s));
    SHOW(ncclBcast(rb, 16, ncclUint8, 0, comm, s));
    SHOW(ncclReduce(sa, rb, 16, ncclDouble, ncclMax, 0, comm, s));
    SHOW(ncclAllGather(sa, rb, 16, ncclInt8, comm, s));
    SHOW(ncclReduceScatter(sa, rb, 16, ncclInt64, ncclMin, comm, s));
    SHOW(ncclAlltoAll(sa, rb, 16, ncclUint32, comm, s));
    SHOW(ncclGather(sa, rb, 16, ncclFloat16, 0, comm, s));
    SHOW(ncclScatter(sa, rb, 16, ncclBfloat16, 0, comm, s));
    SHOW(ncclGroupStart());
    SHOW(ncclSend(sa, 8, ncclFloat, 0, comm, s));
    SHOW(ncclRecv(rb, 8, ncclFloat, 0, comm, s));
    SHOW(ncclGroupEnd());
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    SHOW(ncclGroupStart());
    SHOW(ncclAllReduce(sa, rb, 16, ncclFloat, ncclAvg, comm, s));
    SHOW(ncclGroupSimulateEnd(&sim));
    SHOW(cuStreamSynchronize(s));

    float scalar = 2.0f;
    ncclRedOp_t op;
    SHOW(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm));
    SHOW(ncclAllReduce(sa, rb, 16, ncclFloat, op, comm, s));
    SHOW(ncclRedOpDestroy(op, comm));
    void *mem = NULL, *reg = NULL;
    SHOW(ncclMemAlloc(&mem, 1 << 20));
    SHOW(ncclCommRegister(comm, mem, 1 << 20, &reg));
    SHOW(ncclCommDeregister(comm, reg));
    ncclWindow_t win = NULL;
    SHOW(ncclCommWindowRegister(comm, mem, 1 << 20, &win, NCCL_WIN_DEFAULT));
    SHOW(ncclCommWindowDeregister(comm, win));
    SHOW(ncclMemFree(mem));
    SHOW(cuStreamSynchronize(s));

    SHOW(ncclCommSplit(comm, 0, 0, &split, NULL));
    int excluded[1] = {0};
    SHOW(ncclCommShrink(comm, excluded, 0, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
    for (int i = 0; i <= (int)ncclNumResults; i++) printf("%s\n", ncclGetErrorString(i));
    SHOW(ncclCommCount(NULL, &n)); /* an error on purpose */
    printf("last error: %s\n", ncclGetLastError(NULL));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ncclResetDebugInit();
#pragma GCC diagnostic pop
    SHOW(ncclCommRevoke(shrunk, NCCL_REVOKE_DEFAULT));
    SHOW(ncclCommDestroy(shrunk));
    SHOW(ncclCommFinalize(split));
    SHOW(ncclCommDestroy(split));
    SHOW(ncclCommAbort(scal));
    SHOW(ncclCommDestroy(all[0]));
    SHOW(ncclCommDestroy(all[1]));
    SHOW(ncclCommDestroy(cfgcomm));
    SHOW(ncclCommFinalize(comm));
    SHOW(ncclCommDestroy(comm));
    return 0;
}

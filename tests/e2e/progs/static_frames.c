/*
 * static_frames: frames in static functions, for offline symbolization
 * (tests/e2e/symbols.sh). The main thread blocks in ncclCommInitRank (rank 0
 * of two; the other never comes) called from setup, a static function, called
 * from main. neighbour, an exported function (built with -rdynamic, so it is
 * in .dynsym), lies just before setup in the binary (-fno-toplevel-reorder):
 * once .symtab is stripped, the nearest exported symbol below setup's frame
 * is neighbour, which must never be taken for it.
 */
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) void neighbour(int n)
{
    for (int i = 0; i < n; i++) sink += i;
}

/* Not a tail call: the frame of setup stays on the stack under the call. */
__attribute__((noinline)) static int setup(ncclComm_t *comm)
{
    ncclUniqueId id;
    if (ncclGetUniqueId(&id)) return 2;
    ncclResult_t r = ncclCommInitRank(comm, 2, id, 0);
    printf("static_frames: ncclCommInitRank returned %d\n", r);
    sink += 1;
    return 3;
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    ncclComm_t comm;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx))
        return 2;
    neighbour(sink);
    int rc = setup(&comm);
    sink += rc;
    return rc;
}

/*
 * static_frames: frames in static functions, for offline symbolization
 * (tests/e2e/symbols.sh). The main thread blocks in ncclCommInitRank (rank 0
 * of two; the other never comes) called from setup, a static function, called
 * from main. neighbour, an exported function (built with -rdynamic, so it is
 * in .dynsym), lies just before setup in the binary (-fno-toplevel-reorder):
 * once .symtab is stripped, the nearest exported symbol below setup's frame
 * is neighbour, which must never be taken for it.
 *
 * With argv[1] "crash", main creates a communicator of one rank, then calls
 * fault_at_entry, whose first instruction stores to address 0: the innermost
 * frame of the crash is the faulting instruction itself, the first byte of the
 * function (looked up at pc - 1, as a return address would be, it would lie
 * before the function).
 */
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "one_rank.h"

volatile int sink;

void neighbour(int n); /* exported on purpose, see above */

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

#if defined(__x86_64__)
__attribute__((naked, noinline)) static void fault_at_entry(void)
{
    __asm__ volatile("movl $1, 0\n\tret");
}
#else
static volatile int *volatile nowhere;
__attribute__((noinline, no_sanitize("undefined", "address"))) static void fault_at_entry(void)
{
    *nowhere = 1;
}
#endif

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    ncclComm_t comm;
    if (argc > 1 && !strcmp(argv[1], "crash")) {
        CUstream s;
        CUdeviceptr buf;
        if (one_rank_job(&s, &buf, 4096, &comm) != 0) return 3;
        fault_at_entry();
        return 0;
    }
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx))
        return 2;
    neighbour(sink);
    int rc = setup(&comm);
    sink += rc;
    return rc;
}

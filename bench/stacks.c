/*
 * stacks: what the enqueue stacks cost per call.
 *
 *   stacks N DEPTH   N 8-byte AllReduce calls made DEPTH frames below main
 *                    (each frame a function of its own), from 8 call sites in
 *                    turn, after a warm-up; prints ns per call
 *
 * bench/stacks.sh runs it under the shim with NCCLGUARD_STACKS=1 and =0, on
 * the fake NCCL in no-op mode, for instructions (callgrind) and time (A/B
 * interleaved). A real job calls NCCL from deep in the framework: PyTorch's
 * c10d sits 20 to 40 C frames below the interpreter's, so the default depth
 * of 24 is what it pays, and a training step issues its collectives from a
 * handful of places. Like a PyTorch wheel, the program is built without
 * frame pointers (the build's -O2 omits them).
 */
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "timing.h"

static ncclComm_t comm;
static CUstream stream;
static void *buf;

static int setup(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    ncclUniqueId id;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(&p, 8) || ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0))
        return -1;
    buf = (void *)p;
    return 0;
}

/* 8 call sites: functions of their own, so that each call has its own stack */
#define SITE(k)                                                       \
    __attribute__((noinline)) static void site##k(void)               \
    {                                                                 \
        ncclAllReduce(buf, buf, 2, ncclFloat, ncclSum, comm, stream); \
        __asm__ volatile("" ::: "memory");                            \
    }
SITE(0)
SITE(1)
SITE(2)
SITE(3)
SITE(4)
SITE(5)
SITE(6)
SITE(7)

static void calls(long n)
{
    static void (*const sites[8])(void) = {site0, site1, site2, site3, site4, site5, site6, site7};
    for (long i = 0; i < n; i++) sites[i & 7]();
}

/* depth frames of their own (noinline, and work after the call so that it is
 * not a tail call), then the loop: prints ns per call */
__attribute__((noinline)) static double below(int depth, long n)
{
    if (depth > 0) {
        double r = below(depth - 1, n);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    /* pass 0 warms up (the unwinder's caches, the stack table, the sites);
     * pass 1 is timed. Both call from the same place: one stack per call
     * site, as in a training loop. */
    double t = 0;
    for (int pass = 0; pass < 2; pass++) {
        long k = pass ? n : n / 10 + 1;
        cuStreamSynchronize(stream);
        double t0 = bench_now_ns();
        calls(k);
        t = (bench_now_ns() - t0) / (double)k;
    }
    cuStreamSynchronize(stream);
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: stacks N DEPTH\n");
        return 2;
    }
    if (setup()) return 2;
    /* a site, below() itself, calls() and main take 4 frames */
    printf("%.1f\n", below(atoi(argv[2]) > 4 ? atoi(argv[2]) - 4 : 0, atol(argv[1])));
    return 0;
}

/*
 * init_all: one process, two devices, one communicator each from
 * ncclCommInitAll (the pattern of torch.cuda.nccl and DataParallel): the
 * current context is device 0's when the communicators are made. Each step is
 * a group of one AllReduce per device, on a stream of that device's primary
 * context; the process synchronizes both and exits. Run with FAKECUDA_DEVICES=2.
 */
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define NDEV 2

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 4;
    CUcontext ctx[NDEV];
    CUstream s[NDEV];
    CUdeviceptr buf[NDEV];
    ncclComm_t comms[NDEV];
    if (cuInit(0)) return 2;
    for (int d = NDEV - 1; d >= 0; d--) { /* device 0's context current at the end */
        CUdevice dev;
        if (cuDeviceGet(&dev, d) || cuDevicePrimaryCtxRetain(&ctx[d], dev) ||
            cuCtxSetCurrent(ctx[d]) || cuStreamCreate(&s[d], CU_STREAM_NON_BLOCKING) ||
            cuMemAlloc(&buf[d], 64))
            return 2;
    }
    if (ncclCommInitAll(comms, NDEV, NULL)) return 3;
    for (int i = 0; i < steps; i++) {
        if (ncclGroupStart()) return 4;
        for (int d = 0; d < NDEV; d++) {
            void *p = (void *)buf[d];
            if (ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comms[d], s[d])) return 4;
        }
        if (ncclGroupEnd()) return 4;
    }
    for (int d = 0; d < NDEV; d++)
        if (cuCtxSetCurrent(ctx[d]) || cuStreamSynchronize(s[d])) return 5;
    for (int d = 0; d < NDEV; d++)
        if (ncclCommDestroy(comms[d])) return 6;
    printf("init_all: done\n");
    return 0;
}

/*
 * The CUDA side of trainloop, through the driver API only: the device and its
 * primary context (the one cudart and so NCCL would use), per-thread streams,
 * the fake compute kernel, and waiting for a stream without blocking in CUDA.
 */
#include <stdatomic.h>
#include <time.h>

#include "trainloop.h"

/* Fails the program with the CUDA error's name when R is not CUDA_SUCCESS. */
void tl_cu_check(CUresult r, const char *call)
{
    const char *name = NULL, *text = NULL;
    if (r == CUDA_SUCCESS) return;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    tl_die(TL_EXIT_CALL, ": %s failed: %s (%s)", call, name ? name : "unknown CUresult",
           text ? text : "no description");
}

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Picks device LOCAL_RANK % count and makes its primary context current. A
 * framework reaches the device through cudart, which uses the primary context,
 * so NCCL and the shim see the same context as they would under PyTorch.
 */
void tl_device_open(struct tl_proc *p)
{
    int count = 0;
    TL_CU(cuInit, (0));
    TL_CU(cuDeviceGetCount, (&count));
    if (count < 1) tl_die(TL_EXIT_SETUP, ": no CUDA device");
    p->dev_ordinal = p->local_rank % count;
    TL_CU(cuDeviceGet, (&p->dev, p->dev_ordinal));
    TL_CU(cuDevicePrimaryCtxRetain, (&p->ctx, p->dev));
    TL_CU(cuCtxSetCurrent, (p->ctx));
}

void tl_device_close(struct tl_proc *p)
{
    TL_CU(cuDevicePrimaryCtxRelease, (p->dev));
}

/* A compute stream for the "backward pass" and a communication stream, like DDP. */
void tl_streams_create(struct tl_worker *w)
{
    TL_CU(cuCtxSetCurrent, (w->p->ctx));
    TL_CU(cuStreamCreate, (&w->compute, CU_STREAM_NON_BLOCKING));
    TL_CU(cuStreamCreate, (&w->comm_stream, CU_STREAM_NON_BLOCKING));
    TL_CU(cuEventCreate, (&w->grads_ready, CU_EVENT_DISABLE_TIMING));
    if (w->p->opt.pipeline || w->p->opt.stall_split.rank >= 0)
        TL_CU(cuStreamCreate, (&w->tp_stream, CU_STREAM_NON_BLOCKING));
}

void tl_streams_destroy(struct tl_worker *w)
{
    TL_CU(cuEventDestroy, (w->grads_ready));
    TL_CU(cuStreamDestroy, (w->compute));
    TL_CU(cuStreamDestroy, (w->comm_stream));
    if (w->tp_stream) TL_CU(cuStreamDestroy, (w->tp_stream));
}

/* The fake compute kernel: occupies the stream for a few milliseconds. */
static void CUDA_CB compute_kernel(void *arg)
{
    int ms = (int)(long)arg;
    if (ms > 0) sleep_us(ms * 1000L);
}

/* Runs the "backward pass" on the compute stream and makes comm_stream wait for it. */
void tl_enqueue_compute(struct tl_worker *w, int ms)
{
    TL_CU(cuLaunchHostFunc, (w->compute, compute_kernel, (void *)(long)ms));
    TL_CU(cuEventRecord, (w->grads_ready, w->compute));
    TL_CU(cuStreamWaitEvent, (w->comm_stream, w->grads_ready, 0));
    if (w->tp_stream) TL_CU(cuStreamWaitEvent, (w->tp_stream, w->grads_ready, 0));
}

/* After this long without completion, a stream wait also polls NCCL for async errors. */
#define TL_SLOW_WAIT_S 5.0
#define TL_ERROR_POLL_S 0.1

/*
 * Waits until stream S has finished, by polling cuStreamQuery. It never blocks
 * inside CUDA: like a framework's watchdog, once the wait is slow it polls
 * ncclCommGetAsyncError on this worker's communicators, so that a communicator
 * aborted underneath us (by NCCL, or by a preloaded tool) ends the program
 * with an error instead of a hang even when the stream never drains. The
 * polls start late so that healthy runs make a deterministic set of NCCL calls.
 */
void tl_stream_wait(struct tl_worker *w, CUstream s)
{
    double start = mono_s(), next_poll = start + TL_SLOW_WAIT_S;
    long pause_us = 20;
    for (;;) {
        CUresult r = cuStreamQuery(s);
        if (r == CUDA_SUCCESS) return;
        if (r != CUDA_ERROR_NOT_READY) tl_cu_check(r, "cuStreamQuery");
        sleep_us(pause_us);
        if (pause_us < 1000) pause_us *= 2;
        double now = mono_s();
        if (now >= next_poll) {
            tl_comms_poll_errors(w);
            next_poll = now + TL_ERROR_POLL_S;
        }
    }
}

/*
 * events_bench: what the driver calls that the shim makes per op cost on a real GPU, how
 * much memory its event pools take, and the driver behaviours its context cache and
 * untimed markers rely on (tests/gpu/README.md). Built against cuda.h, linked with
 * libcuda.so.1; meaningful only with the real driver. Prints one line per figure.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../bench/timing.h"

#define RECORDS 100000
#define REPS 7
#define POOL_EVENTS 8320 /* 2 x (4096 + 64): one context's pool at the default ring */

static int failed;

static void check(const char *what, int ok)
{
    printf("check: %s: %s\n", what, ok ? "ok" : "FAILED");
    if (!ok) failed = 1;
}

/* ns per cuEventRecord of one event of `flags`, re-recorded RECORDS times. */
static double record_ns(CUstream s, unsigned flags)
{
    CUevent ev;
    if (cuEventCreate(&ev, flags)) return -1;
    double t0 = bench_now_ns();
    for (int i = 0; i < RECORDS; i++) cuEventRecord(ev, s);
    double t1 = bench_now_ns();
    cuStreamSynchronize(s);
    cuEventDestroy(ev);
    return (t1 - t0) / RECORDS;
}

static double capturing_ns(CUstream s)
{
    CUstreamCaptureStatus st;
    double t0 = bench_now_ns();
    for (int i = 0; i < RECORDS; i++) cuStreamIsCapturing(s, &st);
    return (bench_now_ns() - t0) / RECORDS;
}

static double get_ctx_ns(CUstream s)
{
    CUcontext c;
    double t0 = bench_now_ns();
    for (int i = 0; i < RECORDS; i++) cuStreamGetCtx(s, &c);
    return (bench_now_ns() - t0) / RECORDS;
}

/*
 * What a record into a capturing stream does. The shim asks cuStreamIsCapturing
 * before each op (its third driver call per op) so that it never records there;
 * if the driver leaves the capture and its graph as they were, and a query of
 * such an event fails with CUDA_ERROR_CAPTURED_EVENT, the shim could record
 * first and learn of the capture from the observer's query instead (on streams
 * other than the legacy one, whose record would invalidate another stream's
 * capture). Printed, not checked: these decide a design, they guard nothing yet.
 */
static void probe_capture(CUstream s)
{
    /* cuGraphGetNodes: by name, so that this builds against the fake driver. */
    CUresult (*get_nodes)(CUgraph, CUgraphNode *,
                          size_t *) = (CUresult(*)(CUgraph, CUgraphNode *,
                                                   size_t *))dlsym(RTLD_DEFAULT, "cuGraphGetNodes");
    CUevent ev;
    CUdeviceptr buf;
    if (cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) || cuMemAlloc(&buf, 8)) return;
    size_t nodes[2] = {0, 0};
    CUresult rec[2] = {0, 0}, end[2] = {0, 0};
    CUgraph g[2] = {NULL, NULL};
    for (int with = 0; with < 2; with++) {
        cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        if (with) rec[0] = cuEventRecord(ev, s);
        cuMemsetD8Async(buf, 0, 8, s);
        if (with) rec[1] = cuEventRecord(ev, s);
        end[with] = cuStreamEndCapture(s, &g[with]);
        if (get_nodes && g[with]) get_nodes(g[with], NULL, &nodes[with]);
    }
    CUresult query = cuEventQuery(ev);
    CUgraphExec exec;
    CUresult launch = g[1] && !cuGraphInstantiateWithFlags(&exec, g[1], 0) ? cuGraphLaunch(exec, s)
                                                                           : CUDA_ERROR_UNKNOWN;
    cuStreamSynchronize(s);
    CUresult after_launch = cuEventQuery(ev);
    cuEventRecord(ev, s);
    cuStreamSynchronize(s);
    printf("probe: record into a capturing stream: %d, %d (0 success); capture ended %d "
           "(without the records %d); graph nodes %zu (without %zu%s); query after the "
           "capture %d (%d is CUDA_ERROR_CAPTURED_EVENT); graph launch %d, query after it %d; "
           "recorded again outside, query %d\n",
           rec[0], rec[1], end[1], end[0], nodes[1], nodes[0],
           get_nodes ? "" : ", not counted: no cuGraphGetNodes", query, CUDA_ERROR_CAPTURED_EVENT,
           launch, after_launch, cuEventQuery(ev));
}

/* Host and device memory of n events of `flags` in the current context. */
static void pool_memory(const char *label, unsigned flags)
{
    size_t free0, free1, total;
    CUevent *ev = calloc(POOL_EVENTS, sizeof *ev);
    long r0 = bench_rss_kib();
    cuMemGetInfo(&free0, &total);
    for (int i = 0; ev && i < POOL_EVENTS; i++) cuEventCreate(&ev[i], flags);
    long r1 = bench_rss_kib();
    cuMemGetInfo(&free1, &total);
    printf("memory: %d events %s: host %ld KiB, device %zu KiB\n", POOL_EVENTS, label, r1 - r0,
           (free0 - free1) / 1024);
}

int main(void)
{
    CUdevice dev;
    CUcontext a, b;
    CUstream s;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&a, dev) ||
        cuCtxSetCurrent(a) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) {
        fprintf(stderr, "events_bench: no usable CUDA device\n");
        return 2;
    }
    double v[4][REPS];
    for (int r = 0; r < REPS; r++) {
        v[0][r] = record_ns(s, CU_EVENT_DEFAULT);
        v[1][r] = record_ns(s, CU_EVENT_DISABLE_TIMING);
        v[2][r] = capturing_ns(s);
        v[3][r] = get_ctx_ns(s);
    }
    double timed = bench_median(v[0], REPS), untimed = bench_median(v[1], REPS);
    printf("cost: cuEventRecord, timing event: %.1f ns\n", timed);
    printf("cost: cuEventRecord, CU_EVENT_DISABLE_TIMING: %.1f ns (%.2fx the timing one)\n",
           untimed, untimed / timed);
    printf("cost: cuStreamIsCapturing: %.1f ns\n", bench_median(v[2], REPS));
    printf("cost: cuStreamGetCtx: %.1f ns (the shim caches it per stream)\n",
           bench_median(v[3], REPS));
    printf("cost: the shim's default per op (capture query + 2 untimed records, 1 in 16 "
           "ops timed): %.1f ns\n",
           bench_median(v[2], REPS) + 2 * untimed + 2 * (timed - untimed) / 16);

    probe_capture(s);

    /* Driver behaviours the shim relies on. */
    CUevent t, u;
    float ms;
    cuEventCreate(&t, CU_EVENT_DEFAULT);
    cuEventCreate(&u, CU_EVENT_DISABLE_TIMING);
    cuEventRecord(t, s);
    cuEventRecord(u, s);
    cuStreamSynchronize(s);
    check("cuEventElapsedTime refuses a CU_EVENT_DISABLE_TIMING event",
          cuEventElapsedTime(&ms, t, u) == CUDA_ERROR_INVALID_HANDLE);
    pool_memory("with timing", CU_EVENT_DEFAULT);
    pool_memory("without timing", CU_EVENT_DISABLE_TIMING);
    long r0 = bench_rss_kib();
    if (cuCtxCreate_v4(&b, NULL, 0, dev)) return 2;
    printf("memory: a second context: host %ld KiB before its pool\n", bench_rss_kib() - r0);
    pool_memory("without timing, second context", CU_EVENT_DISABLE_TIMING);
    CUstream sb;
    cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING);
    check("an event of context A recorded on a stream of context B is refused "
          "(CUDA_ERROR_INVALID_HANDLE)",
          cuEventRecord(t, sb) == CUDA_ERROR_INVALID_HANDLE);
    /* A handle of a destroyed stream of A that comes back for a stream of B. */
    cuCtxSetCurrent(a);
    CUstream old;
    cuStreamCreate(&old, CU_STREAM_NON_BLOCKING);
    CUstream was = old;
    cuStreamDestroy(old);
    cuCtxSetCurrent(b);
    int reused = 0;
    for (int i = 0; i < 1000 && !reused; i++) {
        CUstream n;
        if (cuStreamCreate(&n, CU_STREAM_NON_BLOCKING)) break;
        reused = n == was;
        if (!reused) cuStreamDestroy(n);
    }
    cuCtxSetCurrent(a);
    if (reused)
        check("a reused stream handle, now of another context, refuses A's event",
              cuEventRecord(t, was) == CUDA_ERROR_INVALID_HANDLE);
    else
        printf("check: stream handles were not reused in 1000 creations (nothing to check)\n");
    return failed;
}

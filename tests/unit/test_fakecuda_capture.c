/*
 * test_fakecuda_capture.c: stream capture in the fake libcuda.so.1: work is recorded, not
 * run, and runs at each graph launch; captured events cannot be queried; CUDA's rule for
 * potentially unsafe calls across threads and capture modes; the legacy stream's implicit
 * dependency; fork/join of streams into a capture.
 */
#include <pthread.h>
#include <semaphore.h>

#include "test_fakecuda_util.h"

static void end_ok_and_launch(CUstream s, CUstream on, int times, CUgraph *g_out)
{
    CUgraph g = NULL;
    CUgraphExec x;
    CU_OK(cuStreamEndCapture(s, &g));
    ck_assert_ptr_nonnull(g);
    CU_OK(cuGraphInstantiate(&x, g, 0));
    for (int i = 0; i < times; i++) CU_OK(cuGraphLaunch(x, on));
    CU_OK(cuStreamSynchronize(on));
    CU_OK(cuGraphExecDestroy(x));
    if (g_out)
        *g_out = g;
    else
        CU_OK(cuGraphDestroy(g));
}

NG_TEST(test_captured_work_runs_at_each_launch)
{
    fct_init_ctx();
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    int count = 0, release = 1;
    static struct fct_log log;
    static struct fct_entry e[3];
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    cuuint64_t id = 0;
    CUgraph building = NULL;
    CU_OK(cuStreamIsCapturing(s, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_OK(cuStreamGetCaptureInfo(s, &st, &id, &building, NULL, NULL, NULL));
    ck_assert_uint_ne(id, 0);
    ck_assert_ptr_nonnull(building);
    for (int i = 0; i < 3; i++) {
        e[i] = (struct fct_entry){&log, i};
        CU_OK(cuLaunchHostFunc(s, fct_append, &e[i]));
        CU_OK(cuLaunchHostFunc(s, fct_bump, &count));
    }
    CU_OK(fakecuda_test_spin(s, &release));
    CU_OK(fakecuda_test_kernel(s, 1000));
    fct_stays_zero(&count); /* recorded, not executed */
    end_ok_and_launch(s, s, 4, NULL);
    ck_assert_int_eq(fct_load(&count), 12);
    ck_assert_int_eq(fct_load(&log.n), 12);
    for (int i = 0; i < 12; i++) ck_assert_int_eq(log.v[i], i % 3);
    CU_OK(cuStreamIsCapturing(s, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
}
END_TEST

NG_TEST(test_captured_event_not_queryable)
{
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUevent ev = fct_event(0);
    float ms;
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuEventRecord(ev, s));
    CUgraph g;
    CU_OK(cuStreamEndCapture(s, &g));
    CU_IS(cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
    CU_IS(cuEventSynchronize(ev), CUDA_ERROR_CAPTURED_EVENT);
    CU_IS(cuEventElapsedTime(&ms, ev, ev), CUDA_ERROR_CAPTURED_EVENT);
    CUgraphExec x;
    CU_OK(cuGraphInstantiate(&x, g, 0));
    CU_OK(cuGraphLaunch(x, s)); /* a plain captured record is no event record at launch */
    CU_OK(cuStreamSynchronize(s));
    CU_IS(cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
    CU_OK(cuEventRecord(ev, s)); /* recorded again outside capture */
    CU_OK(cuEventSynchronize(ev));
    CU_OK(cuEventQuery(ev));
}
END_TEST

NG_TEST(test_external_event_record_node)
{
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUevent ev = fct_event(0);
    int release = 0;
    CU_IS(cuEventRecordWithFlags(ev, s, CU_EVENT_RECORD_EXTERNAL), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuEventRecordWithFlags(ev, s, CU_EVENT_RECORD_EXTERNAL));
    CUgraph g;
    CUgraphExec x;
    CU_OK(cuStreamEndCapture(s, &g));
    CU_OK(cuGraphInstantiate(&x, g, 0));
    CU_OK(fakecuda_test_spin(s, &release));
    CU_OK(cuGraphLaunch(x, s)); /* records the event at this point of the launch */
    CU_IS(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    fct_store(&release, 1);
    CU_OK(cuEventSynchronize(ev));
    CU_OK(cuEventQuery(ev));
}
END_TEST

NG_TEST(test_own_unsafe_call_invalidates)
{
    fct_init_ctx();
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    CUstream other = fct_stream(CU_STREAM_NON_BLOCKING);
    CUevent ev = fct_event(0);
    CUdeviceptr d;
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CU_IS(cuStreamQuery(other), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUstreamCaptureStatus st;
    CU_OK(cuStreamIsCapturing(s, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    int count = 0;
    CU_IS(cuLaunchHostFunc(s, fct_bump, &count), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CUgraph g = (CUgraph)1;
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_ptr_null(g);
    /* each listed call is potentially unsafe */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuMemAlloc(&d, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuEventQuery(ev), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuEventSynchronize(ev), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuStreamSynchronize(other), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* a relaxed capture lets its own thread make them */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_OK(cuEventQuery(ev));
    CU_OK(cuStreamQuery(other));
    CU_OK(cuMemAlloc(&d, 64));
    CU_OK(cuLaunchHostFunc(s, fct_bump, &count));
    end_ok_and_launch(s, other, 1, NULL);
    ck_assert_int_eq(fct_load(&count), 1);
    /* synchronising the capturing stream itself is never allowed */
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CU_IS(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}
END_TEST

/* Thread A of the cross-thread tests: begins a capture, lets B probe, then ends it. */
struct capturer {
    CUcontext ctx;
    CUstreamCaptureMode mode;
    sem_t began, probed;
    CUstreamCaptureStatus status_after_probe;
    CUresult end_result;
    CUgraph graph;
};

static void *capture_thread(void *arg)
{
    struct capturer *c = arg;
    CUstream s;
    int count = 0;
    CU_OK(cuCtxSetCurrent(c->ctx));
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamBeginCapture(s, c->mode));
    CU_OK(cuLaunchHostFunc(s, fct_bump, &count));
    sem_post(&c->began);
    sem_wait(&c->probed);
    CU_OK(cuStreamIsCapturing(s, &c->status_after_probe));
    c->end_result = cuStreamEndCapture(s, &c->graph);
    return NULL;
}

/* A captures in capture_mode; B (this thread) in b_mode calls cuEventQuery. */
static CUresult cross_thread(CUstreamCaptureMode capture_mode, CUstreamCaptureMode b_mode,
                             struct capturer *c)
{
    CUcontext ctx = fct_init_ctx();
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    CUevent ev = fct_event(0);
    CU_OK(cuEventRecord(ev, s));
    CU_OK(cuEventSynchronize(ev));
    *c = (struct capturer){.ctx = ctx, .mode = capture_mode};
    sem_init(&c->began, 0, 0);
    sem_init(&c->probed, 0, 0);
    CUstreamCaptureMode m = b_mode;
    CU_OK(cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_GLOBAL); /* every thread starts in GLOBAL */
    pthread_t t;
    pthread_create(&t, NULL, capture_thread, c);
    sem_wait(&c->began);
    CUresult r = cuEventQuery(ev);
    sem_post(&c->probed);
    pthread_join(t, NULL);
    m = CU_STREAM_CAPTURE_MODE_GLOBAL;
    CU_OK(cuThreadExchangeStreamCaptureMode(&m));
    ck_assert_int_eq(m, b_mode);
    return r;
}

NG_TEST(test_cross_thread_global_breaks_capture)
{
    struct capturer c;
    unsigned long loud = fakecuda_misuse_count();
    CU_IS(cross_thread(CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_GLOBAL, &c),
          CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_uint_gt(fakecuda_misuse_count(), loud);
    ck_assert_int_eq(c.status_after_probe, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CU_IS(c.end_result, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    ck_assert_ptr_null(c.graph);
}
END_TEST

/* A capture in capture_mode that a thread in probe_mode probes stays active and ends with
 * a graph. */
static void capture_survives_probe(CUstreamCaptureMode capture_mode, CUstreamCaptureMode probe_mode)
{
    struct capturer c;
    CU_OK(cross_thread(capture_mode, probe_mode, &c));
    ck_assert_int_eq(c.status_after_probe, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_OK(c.end_result);
    ck_assert_ptr_nonnull(c.graph);
}

NG_TEST(test_cross_thread_thread_local_is_exempt)
{
    capture_survives_probe(CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}
END_TEST

NG_TEST(test_cross_thread_relaxed_is_exempt)
{
    capture_survives_probe(CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_RELAXED);
}
END_TEST

NG_TEST(test_cross_thread_capture_not_global_is_ignored)
{
    capture_survives_probe(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_GLOBAL);
    capture_survives_probe(CU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
END_TEST

NG_TEST(test_legacy_stream_implicit_dependency)
{
    fct_init_ctx();
    CUstream b = fct_stream(0);
    CUstream nb = fct_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr d;
    int ran = 0;
    CU_OK(cuMemAlloc(&d, 64));
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CU_OK(cuThreadExchangeStreamCaptureMode(&m));
    CU_OK(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    CU_IS(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CU_OK(cuStreamIsCapturing(b, &st)); /* a status query does not invalidate */
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_IS(cuLaunchHostFunc(NULL, fct_set, &ran), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CU_OK(cuStreamIsCapturing(b, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CUgraph g;
    CU_IS(cuStreamEndCapture(b, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CU_OK(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuMemsetD8(d, 0, 64), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); /* synchronous copy */
    CU_IS(cuStreamEndCapture(b, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* a non-blocking stream's capture leaves the legacy stream usable */
    CU_OK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuLaunchHostFunc(NULL, fct_set, &ran));
    CU_OK(cuMemsetD8(d, 0, 64));
    end_ok_and_launch(nb, nb, 1, NULL);
    ck_assert_int_eq(fct_load(&ran), 1);
    CU_IS(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
          CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}
END_TEST

NG_TEST(test_capture_misuse)
{
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUgraph g;
    CU_IS(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    CU_IS(cuStreamBeginCapture(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    CU_OK(cuStreamEndCapture(s, &g));
    CU_OK(cuGraphDestroy(g));
    CU_IS(cuGraphDestroy(g), CUDA_ERROR_INVALID_HANDLE);
    CUgraphExec x;
    CU_IS(cuGraphInstantiate(&x, g, 0), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

struct ender {
    CUstream s;
    CUresult r;
};

static void *end_elsewhere(void *arg)
{
    struct ender *e = arg;
    CUgraph g;
    e->r = cuStreamEndCapture(e->s, &g);
    return NULL;
}

NG_TEST(test_end_capture_on_wrong_thread)
{
    CUcontext ctx = fct_init_ctx();
    (void)ctx;
    struct ender e = {NULL, CUDA_SUCCESS};
    CU_OK(cuStreamCreate(&e.s, 0));
    CU_OK(cuStreamBeginCapture(e.s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    pthread_t t;
    pthread_create(&t, NULL, end_elsewhere, &e);
    pthread_join(t, NULL);
    CU_IS(e.r, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    CUgraph g;
    CU_OK(cuStreamEndCapture(e.s, &g));
    /* a relaxed capture may end anywhere */
    CU_OK(cuStreamBeginCapture(e.s, CU_STREAM_CAPTURE_MODE_RELAXED));
    pthread_create(&t, NULL, end_elsewhere, &e);
    pthread_join(t, NULL);
    CU_OK(e.r);
}
END_TEST

NG_TEST(test_fork_join_streams_in_capture)
{
    fct_init_ctx();
    CUstream s1 = fct_stream(CU_STREAM_NON_BLOCKING);
    CUstream s2 = fct_stream(CU_STREAM_NON_BLOCKING);
    CUevent fork_ev = fct_event(CU_EVENT_DISABLE_TIMING);
    CUevent join_ev = fct_event(CU_EVENT_DISABLE_TIMING);
    int count = 0;
    CU_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuEventRecord(fork_ev, s1));
    CU_OK(cuStreamWaitEvent(s2, fork_ev, 0)); /* s2 joins the capture */
    CUstreamCaptureStatus st;
    CU_OK(cuStreamIsCapturing(s2, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_OK(cuLaunchHostFunc(s2, fct_bump, &count));
    CU_OK(cuLaunchHostFunc(s1, fct_bump, &count));
    CU_OK(cuEventRecord(join_ev, s2));
    CU_OK(cuStreamWaitEvent(s1, join_ev, 0)); /* joined back */
    fct_stays_zero(&count);
    end_ok_and_launch(s1, s1, 2, NULL);
    ck_assert_int_eq(fct_load(&count), 4);
    CU_OK(cuStreamIsCapturing(s2, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    /* the same without joining back */
    CU_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuEventRecord(fork_ev, s1));
    CU_OK(cuStreamWaitEvent(s2, fork_ev, 0));
    CU_OK(cuLaunchHostFunc(s2, fct_bump, &count));
    CUgraph g;
    CU_IS(cuStreamEndCapture(s1, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    ck_assert_ptr_null(g);
}
END_TEST

NG_TEST(test_wait_on_uncaptured_event_is_isolation)
{
    fct_init_ctx();
    CUstream s1 = fct_stream(CU_STREAM_NON_BLOCKING);
    CUstream s2 = fct_stream(CU_STREAM_NON_BLOCKING);
    CUevent ev = fct_event(0);
    CU_OK(cuEventRecord(ev, s2));
    CU_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_IS(cuStreamWaitEvent(s1, ev, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
    CUgraph g;
    CU_IS(cuStreamEndCapture(s1, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* an external wait node is fine, and waits at launch */
    int release = 0, ran = 0;
    CU_OK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(cuStreamWaitEvent(s1, ev, CU_EVENT_WAIT_EXTERNAL));
    CU_OK(cuLaunchHostFunc(s1, fct_set, &ran));
    CU_OK(cuStreamEndCapture(s1, &g));
    CUgraphExec x;
    CU_OK(cuGraphInstantiate(&x, g, 0));
    CU_OK(fakecuda_test_spin(s2, &release));
    CU_OK(cuEventRecord(ev, s2));
    CU_OK(cuGraphLaunch(x, s1));
    fct_stays_zero(&ran);
    fct_store(&release, 1);
    CU_OK(cuStreamSynchronize(s1));
    ck_assert_int_eq(fct_load(&ran), 1);
}
END_TEST

NG_TEST(test_test_kernels_obey_capture)
{
    fct_init_ctx();
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    int never = 0, ran = 0;
    CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU_OK(fakecuda_test_spin(s, &never));
    CU_OK(fakecuda_test_kernel(s, 1000000000ull * 3600));
    CUgraph g;
    CU_OK(cuStreamEndCapture(s, &g));
    CU_OK(cuLaunchHostFunc(s, fct_set, &ran)); /* not stuck behind the captured spin */
    CU_OK(cuStreamSynchronize(s));
    ck_assert_int_eq(fct_load(&ran), 1);
}
END_TEST

NG_TEST(test_capture_on_per_thread_stream)
{
    fct_init_ctx();
    int count = 0;
    CUresult (*begin_ptsz)(CUstream, CUstreamCaptureMode);
    CU_OK(cuGetProcAddress("cuStreamBeginCapture", (void **)&begin_ptsz, 12000,
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    CU_OK(begin_ptsz(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL)); /* NULL: per-thread stream */
    CUstreamCaptureStatus st;
    CU_OK(cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CU_OK(cuLaunchHostFunc(CU_STREAM_PER_THREAD, fct_bump, &count));
    end_ok_and_launch(CU_STREAM_PER_THREAD, CU_STREAM_PER_THREAD, 3, NULL);
    ck_assert_int_eq(fct_load(&count), 3);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("fakecuda_capture", "capture", 180, ng_check_tests(), NULL));
}

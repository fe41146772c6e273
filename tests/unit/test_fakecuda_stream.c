/*
 * test_fakecuda_stream.c: the fake GPU at work: FIFO streams, events that complete when
 * their stream reaches them, elapsed time, the legacy and per-thread default streams,
 * stream destruction, memory, and the FAKECUDA_* fault variables.
 */
#include <malloc.h>
#include <pthread.h>
#include <string.h>

#include "test_fakecuda_util.h"

NG_TEST(test_fifo_order)
{
    fct_init_ctx();
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    static struct fct_log log;
    static struct fct_entry e[2000];
    for (int i = 0; i < 2000; i++) {
        e[i] = (struct fct_entry){&log, i};
        if (i % 3 == 0) CU_OK(fakecuda_test_kernel(s, 1000)); /* interleave other work */
        CU_OK(cuLaunchHostFunc(s, fct_append, &e[i]));
    }
    CU_OK(cuStreamSynchronize(s));
    ck_assert_int_eq(fct_load(&log.n), 2000);
    for (int i = 0; i < 2000; i++) ck_assert_int_eq(log.v[i], i);
}
END_TEST

NG_TEST(test_event_not_ready_until_reached)
{
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUevent ev = fct_event(CU_EVENT_DEFAULT);
    CUevent never = fct_event(CU_EVENT_DISABLE_TIMING);
    int release = 0;
    CU_OK(cuEventQuery(never)); /* never recorded: complete, like CUDA */
    CU_OK(fakecuda_test_spin(s, &release));
    CU_OK(cuEventRecord(ev, s));
    double end = fct_now() + FCT_QUIET_MS / 1000.0;
    while (fct_now() < end) {
        CU_IS(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
        CU_IS(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
        fct_sleep_ms(10);
    }
    fct_store(&release, 1);
    CU_OK(cuEventSynchronize(ev));
    CU_OK(cuEventQuery(ev));
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuStreamQuery(s));
}
END_TEST

NG_TEST(test_elapsed_time_lower_bound)
{
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUevent a = fct_event(0);
    CUevent b = fct_event(CU_EVENT_BLOCKING_SYNC);
    CUevent notiming = fct_event(CU_EVENT_DISABLE_TIMING);
    int release = 0;
    float ms = -1;
    CU_IS(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE); /* never recorded */
    CU_OK(cuEventRecord(a, s));
    CU_OK(fakecuda_test_kernel(s, 50 * 1000000ull));
    CU_OK(cuEventRecord(b, s));
    CU_OK(cuEventSynchronize(b));
    CU_OK(cuEventElapsedTime(&ms, a, b));
    ck_assert_float_ge(ms, 50.0f);
    float ms1 = -1; /* the pre-12.8 export answers the same */
    CUresult (*plain)(float *, CUevent, CUevent);
    CU_OK(cuGetProcAddress("cuEventElapsedTime", (void **)&plain, 12000, 0, NULL));
    CU_OK(plain(&ms1, a, b));
    ck_assert_float_eq(ms, ms1);
    CU_OK(cuEventRecord(notiming, s));
    CU_OK(cuEventSynchronize(notiming));
    CU_IS(cuEventElapsedTime(&ms, a, notiming), CUDA_ERROR_INVALID_HANDLE);
    /* not complete yet */
    CU_OK(fakecuda_test_spin(s, &release));
    CU_OK(cuEventRecord(b, s));
    CU_IS(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
    fct_store(&release, 1);
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuEventElapsedTime(&ms, a, b));
    ck_assert_float_ge(ms, 50.0f);
}
END_TEST

/* cuda.h, cuEventElapsedTime: "If either event was created with the
 * CU_EVENT_DISABLE_TIMING flag, then this function will return
 * CUDA_ERROR_INVALID_HANDLE", whichever side, even when both are complete. */
NG_TEST(test_elapsed_refuses_untimed_events)
{
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUevent timed = fct_event(CU_EVENT_DEFAULT);
    CUevent untimed = fct_event(CU_EVENT_DISABLE_TIMING);
    CUevent untimed2 = fct_event(CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC);
    CU_OK(cuEventRecord(timed, s));
    CU_OK(cuEventRecord(untimed, s));
    CU_OK(cuEventRecord(untimed2, s));
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuEventQuery(untimed)); /* progress is there, only the time is not */
    float ms = -1;
    CU_IS(cuEventElapsedTime(&ms, untimed, timed), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuEventElapsedTime(&ms, timed, untimed), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuEventElapsedTime_v2(&ms, untimed, untimed2), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_float_eq(ms, -1);
    CU_OK(cuEventElapsedTime(&ms, timed, timed));
}
END_TEST

/* The per-thread counters of the benchmarks: every call, and timed records apart. */
NG_TEST(test_thread_call_counters)
{
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUevent timed = fct_event(CU_EVENT_DEFAULT);
    CUevent untimed = fct_event(CU_EVENT_DISABLE_TIMING);
    unsigned long long c0 = fakecuda_thread_calls(), t0 = fakecuda_thread_timed_records();
    CU_OK(cuEventRecord(untimed, s));
    CU_OK(cuEventRecord(untimed, s));
    CU_OK(cuEventRecord(timed, s));
    ck_assert_uint_eq(fakecuda_thread_calls() - c0, 3);
    ck_assert_uint_eq(fakecuda_thread_timed_records() - t0, 1);
    CU_OK(cuStreamSynchronize(s));
}
END_TEST

NG_TEST(test_rerecord_moves_event)
{
    fct_init_ctx();
    CUstream s1 = fct_stream(0);
    CUstream s2 = fct_stream(0);
    CUevent ev = fct_event(0);
    int release = 0;
    CU_OK(cuEventRecord(ev, s1));
    CU_OK(cuEventSynchronize(ev));
    CU_OK(fakecuda_test_spin(s2, &release));
    CU_OK(cuEventRecord(ev, s2));
    CU_IS(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    fct_store(&release, 1);
    CU_OK(cuEventSynchronize(ev));
    CU_OK(cuEventQuery(ev));
}
END_TEST

NG_TEST(test_stream_wait_event)
{
    fct_init_ctx();
    CUstream s1 = fct_stream(CU_STREAM_NON_BLOCKING);
    CUstream s2 = fct_stream(CU_STREAM_NON_BLOCKING);
    CUevent ev = fct_event(CU_EVENT_DISABLE_TIMING);
    int release = 0, ran = 0;
    CU_OK(fakecuda_test_spin(s1, &release));
    CU_OK(cuEventRecord(ev, s1));
    CU_OK(cuStreamWaitEvent(s2, ev, 0));
    /* re-recording the event later does not change what s2 waits for */
    CU_OK(cuEventRecord(ev, s2));
    CU_OK(cuLaunchHostFunc(s2, fct_set, &ran));
    fct_stays_zero(&ran);
    CU_IS(cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
    fct_store(&release, 1);
    CU_OK(cuStreamSynchronize(s2));
    ck_assert_int_eq(fct_load(&ran), 1);
}
END_TEST

NG_TEST(test_legacy_waits_for_blocking_streams_only)
{
    fct_init_ctx();
    CUstream blocking = fct_stream(CU_STREAM_DEFAULT);
    CUstream nonblocking = fct_stream(CU_STREAM_NON_BLOCKING);
    int rel_b = 0, rel_nb = 0, legacy_ran = 0;
    unsigned flags = 7;
    CU_OK(cuStreamGetFlags(nonblocking, &flags));
    ck_assert_uint_eq(flags, CU_STREAM_NON_BLOCKING);
    CU_OK(fakecuda_test_spin(nonblocking, &rel_nb));
    CU_OK(fakecuda_test_spin(blocking, &rel_b));
    CU_OK(cuLaunchHostFunc(NULL, fct_set, &legacy_ran));
    fct_stays_zero(&legacy_ran); /* held by the blocking stream */
    CU_IS(cuStreamQuery(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY);
    fct_store(&rel_b, 1);
    CU_OK(cuStreamSynchronize(NULL)); /* returns although the non-blocking stream spins */
    ck_assert_int_eq(fct_load(&legacy_ran), 1);
    CU_IS(cuStreamQuery(nonblocking), CUDA_ERROR_NOT_READY);
    fct_store(&rel_nb, 1);
    CU_OK(cuStreamSynchronize(nonblocking));
}
END_TEST

NG_TEST(test_blocking_streams_wait_for_legacy)
{
    fct_init_ctx();
    CUstream blocking = fct_stream(0);
    CUstream nonblocking = fct_stream(CU_STREAM_NON_BLOCKING);
    int release = 0, b_ran = 0, nb_ran = 0, ptds_ran = 0;
    CU_OK(fakecuda_test_spin(CU_STREAM_LEGACY, &release));
    CU_OK(cuLaunchHostFunc(blocking, fct_set, &b_ran));
    CU_OK(cuLaunchHostFunc(CU_STREAM_PER_THREAD, fct_set, &ptds_ran));
    CU_OK(cuLaunchHostFunc(nonblocking, fct_set, &nb_ran));
    CU_OK(cuStreamSynchronize(nonblocking)); /* not held by the legacy stream */
    ck_assert_int_eq(fct_load(&nb_ran), 1);
    fct_stays_zero(&b_ran);
    ck_assert_int_eq(fct_load(&ptds_ran), 0); /* the per-thread stream is blocking too */
    fct_store(&release, 1);
    CU_OK(cuStreamSynchronize(blocking));
    CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    ck_assert_int_eq(fct_load(&b_ran), 1);
    ck_assert_int_eq(fct_load(&ptds_ran), 1);
}
END_TEST

struct ptds_probe {
    CUcontext ctx;
    unsigned long long id, id_again, id_ptsz_null;
    int *release;
    int done;
};

static void *ptds_thread(void *arg)
{
    struct ptds_probe *p = arg;
    CU_OK(cuCtxSetCurrent(p->ctx));
    CU_OK(cuStreamGetId(CU_STREAM_PER_THREAD, &p->id));
    CU_OK(cuStreamGetId(CU_STREAM_PER_THREAD, &p->id_again));
    CUresult (*get_id_ptsz)(CUstream, unsigned long long *);
    CUdriverProcAddressQueryResult st;
    CU_OK(cuGetProcAddress("cuStreamGetId", (void **)&get_id_ptsz, 12000,
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    CU_OK(get_id_ptsz(NULL, &p->id_ptsz_null)); /* NULL means per-thread in _ptsz calls */
    if (p->release) {
        CU_OK(fakecuda_test_spin(CU_STREAM_PER_THREAD, p->release));
    } else {
        CU_OK(cuLaunchHostFunc(CU_STREAM_PER_THREAD, fct_set, &p->done));
        CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    }
    return NULL;
}

NG_TEST(test_per_thread_default_stream)
{
    CUcontext ctx = fct_init_ctx();
    int release = 0;
    struct ptds_probe a = {ctx, 0, 0, 0, &release, 0}, b = {ctx, 0, 0, 0, NULL, 0};
    int base = fakecuda_live_threads();
    pthread_t ta, tb;
    pthread_create(&ta, NULL, ptds_thread, &a);
    pthread_join(ta, NULL); /* a's per-thread stream still spins */
    pthread_create(&tb, NULL, ptds_thread, &b);
    pthread_join(tb, NULL); /* b's per-thread stream is independent of a's */
    ck_assert_int_eq(fct_load(&b.done), 1);
    ck_assert_uint_eq(a.id, a.id_again);
    ck_assert_uint_eq(a.id, a.id_ptsz_null);
    ck_assert_uint_eq(b.id, b.id_ptsz_null);
    ck_assert_uint_ne(a.id, b.id);
    unsigned long long mine, legacy;
    CU_OK(cuStreamGetId(CU_STREAM_PER_THREAD, &mine));
    CU_OK(cuStreamGetId(NULL, &legacy));
    ck_assert_uint_ne(mine, a.id);
    ck_assert_uint_ne(mine, legacy);
    CUcontext c = NULL;
    CU_OK(cuStreamGetCtx(CU_STREAM_PER_THREAD, &c));
    ck_assert_ptr_eq(c, ctx);
    /* a thread's per-thread stream is destroyed at its exit, once its work is done */
    fct_store(&release, 1);
    double end = fct_now() + FCT_DEADLINE_S;
    while (fakecuda_live_threads() > base && fct_now() < end) fct_sleep_ms(5);
    ck_assert_int_le(fakecuda_live_threads(), base);
}
END_TEST

NG_TEST(test_stream_destroy_lets_work_finish)
{
    fct_init_ctx();
    int base = fakecuda_live_threads(), release = 0, ran = 0;
    CUstream s = fct_stream(0);
    CUevent ev = fct_event(0);
    CU_OK(fakecuda_test_spin(s, &release));
    CU_OK(cuEventRecord(ev, s));
    CU_OK(cuLaunchHostFunc(s, fct_set, &ran));
    ck_assert_int_eq(fakecuda_live_threads(), base + 1);
    CU_OK(cuStreamDestroy(s));
    CU_OK(cuEventDestroy(ev)); /* the queued record must not crash the worker */
    CU_IS(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuLaunchHostFunc(s, fct_set, &ran), CUDA_ERROR_INVALID_HANDLE);
    fct_stays_zero(&ran);
    fct_store(&release, 1);
    ck_assert(fct_wait_int(&ran, 1));
    double end = fct_now() + FCT_DEADLINE_S;
    while (fakecuda_live_threads() > base && fct_now() < end) fct_sleep_ms(5);
    ck_assert_int_eq(fakecuda_live_threads(), base);
}
END_TEST

NG_TEST(test_event_of_other_context_rejected)
{
    CUcontext a = fct_init_ctx(), b;
    CUevent ev = fct_event(0);
    CUstream sa = fct_stream(0);
    CUstream sb;
    CU_OK(cuCtxCreate(&b, NULL, 0, 1));
    CU_OK(cuStreamCreate(&sb, 0));
    CUcontext got;
    CU_OK(cuStreamGetCtx(sb, &got));
    ck_assert_ptr_eq(got, b);
    CU_OK(cuStreamGetCtx(sa, &got));
    ck_assert_ptr_eq(got, a);
    CU_IS(cuEventRecord(ev, sb), CUDA_ERROR_INVALID_HANDLE);
    CU_IS(cuEventRecord(ev, NULL), CUDA_ERROR_INVALID_HANDLE); /* legacy stream of b */
    CU_OK(cuEventRecord(ev, sa));
    CU_OK(cuStreamWaitEvent(sb, ev, 0)); /* waiting across contexts is allowed */
    CU_OK(cuStreamSynchronize(sb));
}
END_TEST

NG_TEST(test_ctx_synchronize)
{
    fct_init_ctx();
    CUstream s1 = fct_stream(CU_STREAM_NON_BLOCKING);
    CUstream s2 = fct_stream(0);
    CU_OK(fakecuda_test_kernel(s1, 30 * 1000000ull));
    CU_OK(fakecuda_test_kernel(s2, 30 * 1000000ull));
    CU_OK(fakecuda_test_kernel(CU_STREAM_PER_THREAD, 30 * 1000000ull));
    CU_OK(cuCtxSynchronize());
    CU_OK(cuStreamQuery(s1));
    CU_OK(cuStreamQuery(s2));
    CU_OK(cuStreamQuery(CU_STREAM_PER_THREAD));
}
END_TEST

NG_TEST(test_memory)
{
    fct_init_ctx();
    size_t free0, total, free1;
    CU_OK(cuMemGetInfo(&free0, &total));
    CUdeviceptr d, d2;
    CU_OK(cuMemAlloc(&d, 4096));
    CU_OK(cuMemAlloc(&d2, 4096));
    CU_OK(cuMemGetInfo(&free1, &total));
    ck_assert_uint_eq(free0 - free1, 8192);
    unsigned char in[4096], out[4096];
    for (int i = 0; i < 4096; i++) in[i] = (unsigned char)(i * 7);
    CU_OK(cuMemcpyHtoD(d, in, sizeof in));
    CU_OK(cuMemcpyDtoD(d2, d, sizeof in));
    CU_OK(cuMemcpyDtoH(out, d2, sizeof out));
    ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    CU_OK(cuMemsetD32(d, 0x01020304u, 1024));
    CU_OK(cuMemcpyDtoH(out, d, 8));
    ck_assert_int_eq(((uint32_t *)out)[1], 0x01020304);
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    CU_OK(cuMemsetD8Async(d2, 0xAB, 4096, s));
    CU_OK(cuMemcpyDtoHAsync(out, d2, 4096, s));
    CU_OK(cuStreamSynchronize(s));
    ck_assert_int_eq(out[4095], 0xAB);
    /* misuse: out of range, misaligned, bad and double frees */
    CU_IS(cuMemcpyHtoD(d + 4000, in, 200), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)in, out, 16), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemsetD32(d + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CU_IS(cuMemFree(d + 16), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFree(d));
    CU_IS(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
    void *h;
    CU_OK(cuMemAllocHost(&h, 256));
    CU_OK(cuMemcpyDtoH(h, d2, 256)); /* pinned memory is also addressable by the device */
    CU_IS(cuMemFree((CUdeviceptr)(uintptr_t)h), CUDA_ERROR_INVALID_VALUE);
    CU_OK(cuMemFreeHost(h));
    CU_OK(cuMemFree(d2));
    CU_OK(cuMemGetInfo(&free1, &total));
    ck_assert_uint_eq(free1, free0);
}
END_TEST

struct release_later {
    int *flag;
};

static void *release_after_quiet(void *arg)
{
    fct_sleep_ms(FCT_QUIET_MS);
    fct_store(((struct release_later *)arg)->flag, 1);
    return NULL;
}

NG_TEST(test_sync_copy_waits_for_blocking_streams)
{
    fct_init_ctx();
    CUstream b = fct_stream(0);
    CUdeviceptr d;
    int release = 0;
    CU_OK(cuMemAlloc(&d, 64));
    CU_OK(cuMemsetD8(d, 0, 64));
    CU_OK(fakecuda_test_spin(b, &release));
    CU_OK(cuMemsetD8Async(d, 7, 64, b));
    struct release_later rl = {&release};
    pthread_t t;
    pthread_create(&t, NULL, release_after_quiet, &rl);
    unsigned char out[64];
    CU_OK(cuMemcpyDtoH(out, d, sizeof out)); /* legacy stream: after b's earlier work */
    ck_assert_int_eq(out[0], 7);
    ck_assert_int_eq(out[63], 7);
    pthread_join(t, NULL);
}
END_TEST

NG_TEST(test_record_and_query_allocate_nothing)
{
    fct_init_ctx();
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    CUevent ev = fct_event(CU_EVENT_DISABLE_TIMING);
    /* grow the op pool: 200 ops queued at once behind a held stream, more than the
     * loop below ever has queued (at most 100 between synchronisations) */
    volatile int release = 0;
    CU_OK(fakecuda_test_spin(s, &release));
    for (int i = 0; i < 200; i++) {
        CU_OK(cuEventRecord(ev, s));
        cuEventQuery(ev);
    }
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    CU_OK(cuStreamSynchronize(s));
    struct mallinfo2 before = mallinfo2();
    for (int i = 0; i < 20000; i++) {
        CU_OK(cuEventRecord(ev, s));
        CUresult r = cuEventQuery(ev);
        ck_assert(r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY);
        if (i % 100 == 99) CU_OK(cuStreamSynchronize(s));
    }
    CU_OK(cuStreamSynchronize(s));
    struct mallinfo2 after = mallinfo2();
    ck_assert_uint_eq(after.uordblks, before.uordblks);
}
END_TEST

NG_TEST(test_op_delay_env)
{
    setenv("FAKECUDA_OP_DELAY_US", "40000", 1);
    fct_init_ctx();
    CUstream s = fct_stream(0);
    CUevent a = fct_event(0);
    CUevent b = fct_event(0);
    CU_OK(cuEventRecord(a, s));
    CU_OK(fakecuda_test_kernel(s, 0));
    CU_OK(cuEventRecord(b, s));
    CU_OK(cuEventSynchronize(b));
    float ms = 0;
    CU_OK(cuEventElapsedTime(&ms, a, b));
    ck_assert_float_ge(ms, 40.0f);
}
END_TEST

NG_TEST(test_stall_env)
{
    setenv("FAKECUDA_STALL_AFTER_OPS", "2", 1);
    fct_init_ctx();
    CUstream s = fct_stream(0);
    int ran[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) CU_OK(cuLaunchHostFunc(s, fct_set, &ran[i]));
    ck_assert(fct_wait_int(&ran[1], 1));
    fct_stays_zero(&ran[2]); /* the third op never runs */
    CU_IS(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
}
END_TEST

/* FAKECUDA_INSTANT_EVENTS=1: a record completes at once, even behind work; a stream that
 * waits on it does not wait. Without it the same record is not ready. */
START_TEST(test_instant_events_env)
{
    const int instant = _i;
    if (instant) setenv("FAKECUDA_INSTANT_EVENTS", "1", 1);
    fct_init_ctx();
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    CUstream t = fct_stream(CU_STREAM_NON_BLOCKING);
    CUevent e = fct_event(0);
    int ran = 0;
    volatile int release = 0;
    CU_OK(fakecuda_test_spin(s, &release));
    CU_OK(cuEventRecord(e, s));
    CU_IS(cuEventQuery(e), instant ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY);
    CU_OK(cuStreamWaitEvent(t, e, 0));
    CU_OK(cuLaunchHostFunc(t, fct_set, &ran));
    if (instant) {
        ck_assert(fct_wait_int(&ran, 1));
    } else {
        fct_stays_zero(&ran);
    }
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    CU_OK(cuStreamSynchronize(t));
    CU_OK(cuEventSynchronize(e));
}
END_TEST

/* A driver call made on a helper thread, to watch whether it returns. */
struct blocking_call {
    CUcontext ctx;
    CUstream s;
    CUevent ev;
    bool sync; /* cuEventSynchronize(ev), else cuEventRecord(ev, s) */
    int returned;
};

static void *blocking_call_main(void *arg)
{
    struct blocking_call *c = arg;
    CU_OK(cuCtxSetCurrent(c->ctx));
    CU_OK(c->sync ? cuEventSynchronize(c->ev) : cuEventRecord(c->ev, c->s));
    fct_store(&c->returned, 1);
    return NULL;
}

/* Starts c on a thread and checks that it has not returned after FCT_QUIET_MS. */
static void start_blocked(struct blocking_call *c, pthread_t *t)
{
    ck_assert_int_eq(pthread_create(t, NULL, blocking_call_main, c), 0);
    fct_stays_zero(&c->returned);
}

/* cuEventSynchronize on an event behind a kernel that never ends blocks the host with it. */
NG_TEST(test_event_synchronize_blocks_while_stalled)
{
    struct blocking_call c = {.ctx = fct_init_ctx(), .sync = true};
    volatile int release = 0;
    pthread_t t;
    CU_OK(cuStreamCreate(&c.s, 0));
    CU_OK(cuEventCreate(&c.ev, 0));
    CU_OK(fakecuda_test_spin(c.s, &release));
    CU_OK(cuEventRecord(c.ev, c.s));
    start_blocked(&c, &t);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(fct_load(&c.returned), 1);
}
END_TEST

/* FAKECUDA_QUEUE_DEPTH=2: a record on a stream holding two items blocks the host until one
 * ends; another stream has its own queue and takes work meanwhile. */
NG_TEST(test_queue_depth_blocks_enqueue)
{
    setenv("FAKECUDA_QUEUE_DEPTH", "2", 1);
    struct blocking_call c = {.ctx = fct_init_ctx()};
    volatile int release = 0;
    int ran = 0;
    CUstream other;
    pthread_t t;
    CU_OK(cuStreamCreate(&c.s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&c.ev, 0));
    CU_OK(fakecuda_test_spin(c.s, &release));
    CU_OK(cuLaunchHostFunc(c.s, fct_bump, &ran));
    start_blocked(&c, &t);
    CU_OK(cuLaunchHostFunc(other, fct_bump, &ran));
    CU_OK(cuStreamSynchronize(other));
    ck_assert_int_eq(fct_load(&ran), 1);
    ck_assert_int_eq(fct_load(&c.returned), 0);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    CU_OK(cuEventSynchronize(c.ev));
    ck_assert_int_eq(fct_load(&ran), 2);
}
END_TEST

/* Unset, FAKECUDA_QUEUE_DEPTH is FC_QUEUE_DEPTH_DEFAULT (1024), as a real launch queue is
 * bounded: a stalled stream takes that many items, and the next record blocks the host. */
NG_TEST(test_queue_depth_bounded_by_default)
{
    unsetenv("FAKECUDA_QUEUE_DEPTH");
    struct blocking_call c = {.ctx = fct_init_ctx()};
    volatile int release = 0;
    int ran = 0;
    pthread_t t;
    CU_OK(cuStreamCreate(&c.s, CU_STREAM_NON_BLOCKING));
    CU_OK(cuEventCreate(&c.ev, CU_EVENT_DISABLE_TIMING));
    CU_OK(fakecuda_test_spin(c.s, &release));
    for (int i = 1; i < 1024; i++) CU_OK(cuLaunchHostFunc(c.s, fct_bump, &ran));
    start_blocked(&c, &t);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    CU_OK(cuEventSynchronize(c.ev));
    ck_assert_int_eq(fct_load(&ran), 1023);
}
END_TEST

/* FAKECUDA_MAX_CONNECTIONS=1: the streams of a context share one queue, so a host function
 * waiting behind s's stalled kernel holds up t's work pushed after it; with a queue per
 * stream (unset) t runs at once. */
START_TEST(test_max_connections_shares_one_queue)
{
    const int shared = _i;
    if (shared) setenv("FAKECUDA_MAX_CONNECTIONS", "1", 1);
    fct_init_ctx();
    CUstream s = fct_stream(CU_STREAM_NON_BLOCKING);
    CUstream t = fct_stream(CU_STREAM_NON_BLOCKING);
    volatile int release = 0;
    int on_s = 0, on_t = 0;
    CU_OK(fakecuda_test_spin(s, &release));
    CU_OK(cuLaunchHostFunc(s, fct_set, &on_s));
    CU_OK(cuLaunchHostFunc(t, fct_set, &on_t));
    if (shared) {
        fct_stays_zero(&on_t);
        CU_IS(cuStreamQuery(t), CUDA_ERROR_NOT_READY);
    } else {
        ck_assert(fct_wait_int(&on_t, 1));
    }
    ck_assert_int_eq(fct_load(&on_s), 0);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    CU_OK(cuStreamSynchronize(t));
    CU_OK(cuStreamSynchronize(s));
    ck_assert_int_eq(fct_load(&on_s) + fct_load(&on_t), 2);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = ng_check_suite("fakecuda_stream", "stream", 180, ng_check_tests(), &tc);
    tcase_add_loop_test(tc, test_instant_events_env, 0, 2);
    tcase_add_loop_test(tc, test_max_connections_shares_one_queue, 0, 2);
    return ng_check_run(s);
}

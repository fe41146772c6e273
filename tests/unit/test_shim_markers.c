/*
 * test_shim_markers.c: the marker pools (shim/track/markers.c) against the fake
 * driver. A thread gets back the markers it gave back, not ones another
 * thread used meanwhile; and a thread whose own markers are all in use takes
 * the ones other threads gave back, so that no op goes untracked while a
 * marker is free; threads that take and give back all at once, taking from
 * each other's homes, lose none and hand none out twice.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include "../fakes/fakecuda.h"
#include "base/atomic.h"
#include "check_main.h"
#include "policy/config_load.h"
#include "track/markers.h"
#include "track/track.h"

extern char **environ;

#define RING 16
#define POOL (RING + 64) /* plain pairs: track.c sizes the pool at the ring + 64 */

static CUcontext ctx;
static CUstream s;

/* Tracking with a ring of RING records and no timing samples, a context and
 * a stream. */
static void start(void)
{
    setenv("NCCLGUARD_LOG_LEVEL", "error", 1);
    struct ng_config_paths none = {.site = "", .user = "", .job = ""};
    ncclguard_config_load(&none, environ, 0);
    struct ng_track_params tp = {.mode = NG_TRACK_FULL, .ring = RING, .timing_sample = 0};
    ck_assert_int_eq(ncclguard_track_start(&tp), 0);
    CUdevice dev;
    ck_assert(!cuInit(0) && !cuDeviceGet(&dev, 0) && !cuDevicePrimaryCtxRetain(&ctx, dev) &&
              !cuCtxSetCurrent(ctx));
    ncclguard_markers_prepare_current();
    ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
}

static int take(void)
{
    void *end_ev;
    int m = -1;
    ck_assert_int_eq(ncclguard_marker_begin(s, 1, 0, &m, &end_ev), NG_MARKER_OK);
    return m;
}

/* Runs fn(arg) on a thread of its own, with the context current there. */
struct job {
    void (*fn)(int *);
    int *arg;
};

static void *run_job(void *p)
{
    struct job *j = p;
    cuCtxSetCurrent(ctx);
    j->fn(j->arg);
    return NULL;
}

static void on_other_thread(void (*fn)(int *), int *arg)
{
    pthread_t t;
    struct job j = {fn, arg};
    ck_assert_int_eq(pthread_create(&t, NULL, run_job, &j), 0);
    pthread_join(t, NULL);
}

static void take_and_give_back(int *m)
{
    *m = take();
    ncclguard_marker_release(*m);
}

NG_TEST(a_thread_gets_back_its_own)
{
    start();
    int mine = take(), other;
    ncclguard_marker_release(mine);
    on_other_thread(take_and_give_back, &other);
    ck_assert_int_ne(other, mine); /* one shared stack would have handed it mine */
    ck_assert_int_eq(take(), mine);
}
END_TEST

/* Takes every pair of the pool, *n of them, and gives them all back. */
static void take_all_and_give_back(int *n)
{
    int m[POOL];
    for (int i = 0; i < *n; i++) m[i] = take();
    for (int i = 0; i < *n; i++) ncclguard_marker_release(m[i]);
}

NG_TEST(none_out_of_reach)
{
    void *end_ev;
    start();
    int n = POOL;
    on_other_thread(take_all_and_give_back, &n); /* all now wait at that thread's home */
    int m[POOL];
    for (int i = 0; i < POOL; i++) m[i] = take();
    int extra;
    ck_assert_int_eq(ncclguard_marker_begin(s, 1, 0, &extra, &end_ev), NG_MARKER_NONE);
    struct ng_marker_stats st;
    ncclguard_markers_stats(&st);
    ck_assert_uint_eq(st.no_marker, 1);
    for (int i = 0; i < POOL; i++) ncclguard_marker_release(m[i]);
}
END_TEST

/* Takes up to 30 markers at a time and gives them back, 2000 times; several
 * of these at once run dry and take from each other's homes. *out: 0, or 1
 * when one marker was handed out twice. */
#define CHURNERS 4
static ng_atomic(int) held[POOL]; /* 1 while a thread holds the pair */

static void churn(int *out)
{
    void *end_ev;
    int m[30];
    *out = 0;
    for (int round = 0; round < 2000; round++) {
        int n = 0, want = 1 + round % 30;
        while (n < want && ncclguard_marker_begin(s, 1, 0, &m[n], &end_ev) == NG_MARKER_OK) n++;
        for (int i = 0; i < n; i++)
            if (ng_atomic_exchange_acq_rel(&held[m[i] % POOL], 1)) *out = 1;
        for (int i = 0; i < n; i++) {
            ng_atomic_store_release(&held[m[i] % POOL], 0);
            ncclguard_marker_release(m[i]);
        }
    }
}

NG_TEST(threads_at_once_lose_none)
{
    start();
    pthread_t t[CHURNERS];
    struct job j[CHURNERS];
    int twice[CHURNERS];
    for (int i = 0; i < CHURNERS; i++) {
        j[i] = (struct job){churn, &twice[i]};
        ck_assert_int_eq(pthread_create(&t[i], NULL, run_job, &j[i]), 0);
    }
    for (int i = 0; i < CHURNERS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(twice[i], 0);
    }
    int n = POOL;
    take_all_and_give_back(&n); /* every pair is free again, wherever it waits */
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("markers", "homes", 0, ng_check_tests(), NULL));
}

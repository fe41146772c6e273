/*
 * test_fakecuda_util.h: helpers shared by the Check suites of the fake libcuda.so.1.
 *
 * Every waiting helper has a generous deadline (seconds) and only bounds how long a broken
 * fake may hang a test; no test asserts an upper bound on a duration. Check runs each test
 * in its own process, so each test starts with an uninitialised fake driver.
 */
#ifndef TEST_FAKECUDA_UTIL_H
#define TEST_FAKECUDA_UTIL_H

#include <check.h>

#include "check_main.h"
#include <cuda.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "fakecuda.h"

#define CU_OK(x) ck_assert_int_eq((int)(x), (int)CUDA_SUCCESS)
#define CU_IS(x, e) ck_assert_int_eq((int)(x), (int)(e))

/* Seconds a test waits for something that must happen before it calls it a failure. */
#define FCT_DEADLINE_S 60.0
/* How long a test watches for something that must NOT happen (no upper bound is asserted). */
#define FCT_QUIET_MS 200

static inline double fct_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void fct_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* cuInit plus a fresh regular context on device 0, made current. */
static inline CUcontext fct_init_ctx(void)
{
    CUcontext ctx = NULL;
    CU_OK(cuInit(0));
    CU_OK(cuCtxCreate(&ctx, NULL, 0, 0));
    return ctx;
}

/* A new stream of the current context (cuStreamCreate's flags), checked. */
static inline CUstream fct_stream(unsigned flags)
{
    CUstream s = NULL;
    CU_OK(cuStreamCreate(&s, flags));
    return s;
}

/* A new event (cuEventCreate's flags), checked. */
static inline CUevent fct_event(unsigned flags)
{
    CUevent ev = NULL;
    CU_OK(cuEventCreate(&ev, flags));
    return ev;
}

static inline int fct_load(const int *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void fct_store(int *p, int v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Polls until *p == want or the deadline passes; returns whether it got there. */
static inline bool fct_wait_int(const int *p, int want)
{
    double end = fct_now() + FCT_DEADLINE_S;
    while (fct_load(p) != want) {
        if (fct_now() > end) return false;
        fct_sleep_ms(2);
    }
    return true;
}

/* Watches *p for FCT_QUIET_MS (what must not happen): it must still be 0 then. */
static inline void fct_stays_zero(const int *p)
{
    fct_sleep_ms(FCT_QUIET_MS);
    ck_assert_int_eq(fct_load(p), 0);
}

/* Host function: atomically increments the int it is given. */
static inline void CUDA_CB fct_bump(void *arg)
{
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_ACQ_REL);
}

/* Host function: sets the int it is given to 1. */
static inline void CUDA_CB fct_set(void *arg)
{
    fct_store(arg, 1);
}

/* An ordered log that host functions append to. */
struct fct_log {
    int n;
    int v[4096];
};

struct fct_entry {
    struct fct_log *log;
    int value;
};

static inline void CUDA_CB fct_append(void *arg)
{
    struct fct_entry *e = arg;
    int i = __atomic_fetch_add(&e->log->n, 1, __ATOMIC_ACQ_REL);
    if (i < 4096) e->log->v[i] = e->value;
}

#endif

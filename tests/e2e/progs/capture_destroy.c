/*
 * capture_destroy: one rank. While a second thread captures a stream in global
 * mode, the main thread destroys a communicator whose ops the watchdog has not
 * seen finish yet (run with a long NCCLGUARD_POLL_MS). Exit 0 when the capture
 * survived, 1 when it was invalidated, 2+ on other failures.
 */
#include <pthread.h>
#include <stdio.h>

#include "one_rank.h"

static CUcontext ctx;
static CUstream capturing;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int step; /* 1: capture begun; 2: communicator destroyed */
static CUresult begin_rc, end_rc;

static void wait_step(int s)
{
    pthread_mutex_lock(&lock);
    while (step < s) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void set_step(int s)
{
    pthread_mutex_lock(&lock);
    step = s;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void *capture_thread(void *arg)
{
    (void)arg;
    CUgraph graph = NULL;
    cuCtxSetCurrent(ctx);
    begin_rc = cuStreamBeginCapture(capturing, CU_STREAM_CAPTURE_MODE_GLOBAL);
    set_step(1);
    wait_step(2);
    end_rc = cuStreamEndCapture(capturing, &graph);
    return NULL;
}

int main(void)
{
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (one_rank_job(&s, &buf, 64, &comm) || cuCtxGetCurrent(&ctx) ||
        cuStreamCreate(&capturing, CU_STREAM_NON_BLOCKING))
        return 2;
    void *p = (void *)buf;
    for (int i = 0; i < 3; i++)
        if (ncclAllReduce(p, p, 4, ncclFloat, ncclSum, comm, s)) return 3;
    if (cuStreamSynchronize(s)) return 3;
    pthread_t t;
    if (pthread_create(&t, NULL, capture_thread, NULL)) return 4;
    wait_step(1);
    ncclResult_t r = ncclCommDestroy(comm);
    set_step(2);
    pthread_join(t, NULL);
    printf("capture_destroy: begin %d, destroy %d, end %d\n", (int)begin_rc, (int)r, (int)end_rc);
    if (begin_rc || r) return 5;
    return end_rc == CUDA_SUCCESS ? 0 : end_rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ? 1 : 6;
}

/*
 * two_threads: one rank, one blocking communicator, two threads. argv[1]:
 * "overlap": two threads' ncclAllReduce stay inside their calls (their stream is
 * held by a spinning kernel and the launch queue holds one item,
 * FAKECUDA_QUEUE_DEPTH=1, so each call's first driver call blocks) while the main
 * thread makes calls on the same communicator on another stream: threads at once,
 * which NCCL leaves undefined (each of the two finds it, the shim says it once). "serial": the same calls one thread after the other, which
 * is allowed. Exits 0 when every call returned ncclSuccess.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../fakes/fakecuda.h"
#include "one_rank.h"

static ncclComm_t comm;
#define CALLERS 2
static CUstream held[CALLERS];
static CUcontext ctx;
static void *buf;
static volatile int tid[CALLERS];

/* One call on the communicator, on its own stream (argument: which). */
static void *caller(void *arg)
{
    tid[(long)arg] = (int)syscall(SYS_gettid);
    if (cuCtxSetCurrent(ctx)) return (void *)1;
    return (void *)(long)ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, held[(long)arg]);
}

/* Whether thread t sleeps (blocked in the call: the fake driver waits for room). */
static int sleeping(int t)
{
    char path[64], text[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", t);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

int main(int argc, char **argv)
{
    static volatile int release;
    CUstream other;
    CUdeviceptr mem;
    if (argc < 2 || one_rank_job(&held[0], &mem, 64, &comm) ||
        cuStreamCreate(&held[1], CU_STREAM_NON_BLOCKING) ||
        cuStreamCreate(&other, CU_STREAM_NON_BLOCKING) || cuCtxGetCurrent(&ctx))
        return 2;
    buf = (void *)mem;
    int overlap = !strcmp(argv[1], "overlap");
    for (int k = 0; overlap && k < CALLERS; k++)
        if (fakecuda_test_spin(held[k], &release)) return 2;
    pthread_t t[CALLERS];
    void *ret = NULL;
    for (long k = 0; k < CALLERS; k++) {
        if (pthread_create(&t[k], NULL, caller, (void *)k)) return 2;
        if (!overlap && (pthread_join(t[k], &ret) || ret)) return 3;
    }
    /* until both sleep inside their calls (bounded: 20 s), then calls meanwhile */
    for (int i = 0; overlap && i < 2000; i++) {
        int in = 0;
        for (int k = 0; k < CALLERS; k++) in += tid[k] && sleeping(tid[k]);
        if (in == CALLERS) break;
        usleep(10000);
    }
    for (int i = 0; i < 20; i++) {
        if (ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, comm, other)) return 3;
        if (overlap) usleep(20000);
    }
    if (cuStreamSynchronize(other)) return 3;
    release = 1;
    for (int k = 0; overlap && k < CALLERS; k++)
        if (pthread_join(t[k], &ret) || ret) return 3;
    for (int k = 0; k < CALLERS; k++)
        if (cuStreamSynchronize(held[k])) return 3;
    printf("two_threads: %s: every call returned\n", argv[1]);
    return 0;
}

/*
 * fork_in_call: forks while one thread is inside an NCCL call (a
 * ncclCommInitRank whose peer never comes) and another is enqueueing
 * AllReduces. The child, like a data-loader worker, cannot use CUDA (the
 * driver forbids it after a fork), but it may call the NCCL functions that need
 * no GPU, and it must exit normally: no deadlock on a lock the fork copied in a
 * held state, no report or dump of the parent's communicators.
 * Exit 0 when the child exited 0. The parent leaves with _exit, so every
 * "ncclguard:" line and dump file of the run comes from the child.
 */
#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static ncclUniqueId stuck_id;
static ncclComm_t comm;
static CUstream stream;
static CUdeviceptr buf;
static volatile int in_call, stop;

static void *stuck_thread(void *arg)
{
    (void)arg;
    ncclComm_t c;
    in_call = 1;
    ncclCommInitRank(&c, 2, stuck_id, 0); /* rank 1 never comes */
    return NULL;
}

static void *hammer_thread(void *arg)
{
    CUcontext ctx = arg;
    cuCtxSetCurrent(ctx);
    while (!stop) ncclAllReduce((void *)buf, (void *)buf, 1, ncclFloat, ncclSum, comm, stream);
    return NULL;
}

static int child_main(void)
{
    alarm(60);
    int version = 0;
    ncclUniqueId id;
    if (ncclGetVersion(&version) != ncclSuccess || version <= 0) return 10;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 11;
    if (!ncclGetErrorString(ncclInternalError)) return 12;
    printf("fork_in_call: child ok\n");
    fflush(stdout);
    exit(0); /* a normal exit: atexit handlers, library destructors */
}

int main(void)
{
    alarm(120);
    CUdevice dev;
    CUcontext ctx;
    ncclUniqueId id;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(&buf, sizeof(float))) {
        fprintf(stderr, "fork_in_call: no CUDA context\n");
        return 2;
    }
    if (ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0)) return 3;
    if (ncclGetUniqueId(&stuck_id)) return 4;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, stuck_thread, NULL);
    pthread_create(&t2, NULL, hammer_thread, ctx);
    while (!in_call) usleep(1000);
    usleep(200 * 1000); /* let it get deep into the call */
    int failures = 0;
    for (int i = 0; i < 20; i++) { /* fork at many points of the hammer's calls */
        pid_t pid = fork();
        if (pid == 0) child_main();
        int status = 0;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "fork_in_call: child %d failed (status %#x)\n", i, status);
            failures++;
        }
    }
    stop = 1;
    pthread_join(t2, NULL);
    printf("fork_in_call: %d of 20 children failed\n", failures);
    fflush(stdout);
    _exit(failures ? 1 : 0); /* the stuck thread stays stuck */
}

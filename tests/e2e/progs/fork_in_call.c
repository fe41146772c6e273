/*
 * fork_in_call: forks while another thread is inside an NCCL call (a
 * ncclCommInitRank whose peer never arrives), then checks that the child can
 * use NCCL on its own: a new one-rank communicator and an AllReduce. Exit 0
 * when the child succeeded. Runs on the fake NCCL (tests/e2e/shim.sh).
 */
#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static ncclUniqueId stuck_id;
static volatile int in_call;

static void *stuck_thread(void *arg)
{
    (void)arg;
    ncclComm_t comm;
    in_call = 1;
    ncclCommInitRank(&comm, 2, stuck_id, 0); /* rank 1 never comes */
    return NULL;
}

static int child_main(void)
{
    alarm(60);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx))
        return 10;
    ncclUniqueId id;
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 11;
    if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 12;
    CUdeviceptr buf;
    if (cuMemAlloc(&buf, sizeof(float))) return 13;
    float one = 1.0f, out = 0;
    if (cuMemcpyHtoD(buf, &one, sizeof one)) return 14;
    if (ncclAllReduce((void *)buf, (void *)buf, 1, ncclFloat, ncclSum, comm, NULL)) return 15;
    if (cuCtxSynchronize() || cuMemcpyDtoH(&out, buf, sizeof out)) return 16;
    if (out != 1.0f) return 17;
    if (ncclCommDestroy(comm) != ncclSuccess) return 18;
    return 0;
}

int main(void)
{
    alarm(120);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "fork_in_call: no CUDA context\n");
        return 2;
    }
    ncclUniqueId id;
    ncclComm_t comm;
    /* The parent has a communicator of its own before the fork, too. */
    if (ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0)) return 3;
    if (ncclGetUniqueId(&stuck_id)) return 4;
    pthread_t t;
    pthread_create(&t, NULL, stuck_thread, NULL);
    while (!in_call) usleep(1000);
    usleep(200 * 1000); /* let it get deep into the call */
    pid_t pid = fork();
    if (pid == 0) _exit(child_main());
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return 5;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fork_in_call: child failed (status %#x)\n", status);
        _exit(1);
    }
    printf("fork_in_call: child ok\n");
    fflush(stdout);
    _exit(0); /* the stuck thread stays stuck */
}

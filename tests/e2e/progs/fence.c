/*
 * fence MODE: a one-rank job whose stream never reaches its AllReduce, so that
 * ncclguard's ladder (run with a short timeout and abort_at) aborts the
 * communicator. Then, like a framework's clean-up, it checks what the shim
 * answers on the aborted handle and ends it with MODE = abort or destroy.
 * Prints one line per check; exit 0 when every answer is the documented one.
 * MODE = wait: after the AllReduce it only sleeps (up to 100 s), for the tests
 * in which the ladder itself ends the process.
 */
#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../fakes/fakecuda.h"
#include "one_rank.h"

#define EXPECT(cond, what)                                    \
    do {                                                      \
        int ok_ = (cond);                                     \
        printf("fence: %s: %s\n", ok_ ? "ok" : "FAIL", what); \
        failures += !ok_;                                     \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 2 ||
        (strcmp(argv[1], "abort") && strcmp(argv[1], "destroy") && strcmp(argv[1], "wait")))
        return 64;
    alarm(120);
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (one_rank_job(&s, &buf, 64, &comm)) return 2;
    static volatile int release;
    fakecuda_test_spin(s, &release); /* the "GPU" never gets to the AllReduce */
    if (ncclAllReduce((void *)buf, (void *)buf, 4, ncclFloat, ncclSum, comm, s)) return 3;
    if (!strcmp(argv[1], "wait")) {
        sleep(100);
        return 5;
    }
    ncclResult_t async = ncclSuccess;
    for (int i = 0; i < 1000 && async == ncclSuccess; i++) { /* up to 100 s */
        if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) return 4;
        usleep(100 * 1000);
    }
    int failures = 0;
    EXPECT(async == ncclRemoteError, "ncclCommGetAsyncError reports ncclRemoteError");
    const char *text = ncclGetLastError(comm);
    EXPECT(text && strstr(text, "ncclguard aborted this communicator"),
           "ncclGetLastError(comm) explains the abort");
    EXPECT(ncclAllReduce((void *)buf, (void *)buf, 4, ncclFloat, ncclSum, comm, s) ==
               ncclInvalidUsage,
           "a later AllReduce fails with ncclInvalidUsage");
    text = ncclGetLastError(NULL);
    EXPECT(text && strstr(text, "ncclguard aborted"), "ncclGetLastError(NULL) explains it too");
    int n = -1;
    EXPECT(ncclCommCount(comm, &n) == ncclInvalidUsage && n == -1,
           "ncclCommCount fails without touching the handle");
    ncclResult_t r = !strcmp(argv[1], "abort") ? ncclCommAbort(comm) : ncclCommDestroy(comm);
    EXPECT(r == ncclSuccess, "the application's own abort/destroy succeeds");
    release = 1;
    return failures ? 1 : 0;
}

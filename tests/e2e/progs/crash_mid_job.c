/*
 * crash_mid_job: one rank that runs a few AllReduces, then dies of a signal
 * (argv[1]: "segv" dereferences NULL, "abort" calls abort(), "kill" is sent
 * SIGBUS by itself with kill(2), "overflow" overflows the stack of a thread of
 * its own that created the communicator and ran the ops, "overflow-small" does
 * the same after giving that thread a 4 KB alternate signal stack, too small
 * for the crash handler). The shim must leave a crash dump and let the process
 * die of that signal. "fork-segv": the process forks after its ops, like a data-loader
 * worker, and the child dereferences NULL; "fork-init-segv": the child first asks for a
 * communicator of its own (the driver refuses it CUDA, so the creation fails) and then
 * does. The parent prints how the child ended and exits 0.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "one_rank.h"

static volatile int *volatile nowhere; /* NULL, out of the compiler's sight */

/* Not instrumented: UBSan would stop the store to NULL before it faults. */
__attribute__((noinline, no_sanitize("undefined", "address"))) static void
crash_here(const char *how)
{
    if (!strcmp(how, "abort")) abort();
    if (!strcmp(how, "kill")) kill(getpid(), SIGBUS);
    *nowhere = 1;
}

static volatile int bottom = -1; /* never reached: recursion without end, out of sight */

/* Recursion that no compiler turns into a loop: each frame keeps a page alive. */
__attribute__((noinline, no_sanitize("address"))) static int deeper(int n)
{
    volatile char page[4096];
    page[n % sizeof page] = (char)n;
    if (n == bottom) return 0;
    return deeper(n + 1) + page[(n * 7) % sizeof page];
}

static char small_stack[4096];

static int job(const char *how)
{
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (!strcmp(how, "overflow-small")) {
        stack_t ss = {.ss_sp = small_stack, .ss_size = sizeof small_stack, .ss_flags = 0};
        if (sigaltstack(&ss, NULL)) return 4;
    }
    if (one_rank_job(&s, &buf, 4096, &comm) != 0) return 3;
    for (int i = 0; i < 3; i++)
        if (ncclAllReduce((void *)buf, (void *)buf, 1024, ncclFloat, ncclSum, comm, s)) return 2;
    cuStreamSynchronize(s);
    if (!strncmp(how, "overflow", 8)) return deeper(0);
    if (!strncmp(how, "fork-", 5)) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) return 6;
        if (pid == 0) {
            alarm(60);
            ncclUniqueId id;
            ncclComm_t own;
            if (!strcmp(how, "fork-init-segv") &&
                (ncclGetUniqueId(&id) || ncclCommInitRank(&own, 1, id, 0) == ncclSuccess))
                _exit(7); /* the creation must have been tried, and failed */
            crash_here("segv");
            _exit(8);
        }
        int status = 0;
        if (waitpid(pid, &status, 0) != pid) return 9;
        if (WIFSIGNALED(status))
            printf("crash_mid_job: child died of signal %d\n", WTERMSIG(status));
        else
            printf("crash_mid_job: child exited %d\n", WEXITSTATUS(status));
        return 0;
    }
    crash_here(how);
    return 0;
}

static void *job_thread(void *how)
{
    return (void *)(long)job(how);
}

int main(int argc, char **argv)
{
    if (argc < 2) return 3;
    int rc;
    if (!strncmp(argv[1], "overflow", 8)) {
        pthread_t t;
        void *ret;
        if (pthread_create(&t, NULL, job_thread, argv[1]) || pthread_join(t, &ret)) return 5;
        rc = (int)(long)ret;
    } else {
        rc = job(argv[1]);
    }
    if (rc || !strncmp(argv[1], "fork-", 5)) return rc;
    fprintf(stderr, "crash_mid_job: still alive\n");
    return 0;
}

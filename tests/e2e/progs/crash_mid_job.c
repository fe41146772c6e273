/*
 * crash_mid_job: one rank that runs a few AllReduces, then dies of a signal
 * (argv[1]: "segv" dereferences NULL, "abort" calls abort(), "kill" is sent
 * SIGBUS by itself with kill(2)). The shim must leave a crash dump and let the
 * process die of that signal.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv)
{
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (argc < 2 || one_rank_job(&s, &buf, 4096, &comm) != 0) return 3;
    for (int i = 0; i < 3; i++)
        if (ncclAllReduce((void *)buf, (void *)buf, 1024, ncclFloat, ncclSum, comm, s)) return 2;
    cuStreamSynchronize(s);
    crash_here(argv[1]);
    fprintf(stderr, "crash_mid_job: still alive\n");
    return 0;
}

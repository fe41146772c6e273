/*
 * term_job: one rank that gets SIGTERM, the way torchrun tears a job down.
 * argv[1]: "none" (no handler of its own), "before" or "after" (its own
 * handler, installed before or after the first communicator: it says so and
 * exits 42), "idle" (no handler, nothing in flight: its op finished and its
 * communicator was destroyed). Except when idle, an
 * AllReduce is left in flight behind a stream that never gets to it.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "one_rank.h"

static void app_term(int sig)
{
    (void)sig;
    static const char msg[] = "term_job: the application's handler ran\n";
    write(2, msg, sizeof msg - 1);
    _exit(42);
}

static void CUDA_CB block_stream(void *arg)
{
    (void)arg;
    for (;;) pause();
}

static void install_app_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = app_term;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) return 64;
    const char *how = argv[1];
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    if (!strcmp(how, "before")) install_app_handler();
    if (one_rank_job(&s, &buf, 4096, &comm) != 0) return 3;
    if (!strcmp(how, "after")) {
        install_app_handler();
        /* Wait (bounded) until the shim's watchdog has put its handler in front. */
        struct sigaction cur;
        for (int i = 0; i < 1000; i++) {
            sigaction(SIGTERM, NULL, &cur);
            if (cur.sa_handler != app_term) break;
            usleep(10000);
        }
    }
    if (strcmp(how, "idle") && cuLaunchHostFunc(s, block_stream, NULL)) return 2;
    if (ncclAllReduce((void *)buf, (void *)buf, 1024, ncclFloat, ncclSum, comm, s)) return 2;
    if (!strcmp(how, "idle")) { /* finished, and settled by the end of the communicator */
        cuStreamSynchronize(s);
        ncclCommDestroy(comm);
    }
    kill(getpid(), SIGTERM);
    for (int i = 0; i < 100; i++) usleep(100000);
    fprintf(stderr, "term_job: SIGTERM was swallowed\n");
    return 0;
}

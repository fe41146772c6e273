/*
 * term_job: one rank that gets SIGTERM, the way torchrun tears a job down.
 * argv[1]: "none" (no handler of its own), "before" or "after" (its own
 * handler, installed before or after the first communicator: it says so and
 * exits 42), "idle" (no handler, nothing in flight: its op finished and its
 * communicator was destroyed), "resethand" (its handler, installed with
 * SA_RESETHAND, says so and returns: the second SIGTERM must kill), "flags"
 * (its handler, with SA_SIGINFO | SA_NODEFER and SIGUSR1 in sa_mask, checks
 * that it runs as installed: exit 42, else 43). Except when idle, an
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

static void app_term_once(int sig)
{
    (void)sig;
    static const char msg[] = "term_job: the application's handler ran\n";
    write(2, msg, sizeof msg - 1);
}

/* SA_SIGINFO gives the sender; SA_NODEFER leaves SIGTERM unblocked; sa_mask blocks SIGUSR1. */
static void app_term_flags(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    int ok = sig == SIGTERM && si && si->si_signo == SIGTERM && si->si_pid == getpid() &&
             !sigismember(&now, SIGTERM) && sigismember(&now, SIGUSR1);
    static const char good[] = "term_job: the application's handler ran as installed\n";
    static const char bad[] = "term_job: the application's handler ran with the wrong flags\n";
    if (ok)
        write(2, good, sizeof good - 1);
    else
        write(2, bad, sizeof bad - 1);
    _exit(ok ? 42 : 43);
}

static void CUDA_CB block_stream(void *arg)
{
    (void)arg;
    for (;;) pause();
}

static void install_app_handler(const char *how)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = app_term;
    sa.sa_flags = SA_RESTART;
    if (!strcmp(how, "resethand")) {
        sa.sa_handler = app_term_once;
        sa.sa_flags |= SA_RESETHAND;
    } else if (!strcmp(how, "flags")) {
        sa.sa_sigaction = app_term_flags;
        sa.sa_flags |= SA_SIGINFO | SA_NODEFER;
        sigaddset(&sa.sa_mask, SIGUSR1);
    }
    sigaction(SIGTERM, &sa, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) return 64;
    const char *how = argv[1];
    CUstream s;
    CUdeviceptr buf;
    ncclComm_t comm;
    int own = !strcmp(how, "before") || !strcmp(how, "resethand") || !strcmp(how, "flags");
    if (own) install_app_handler(how);
    if (one_rank_job(&s, &buf, 4096, &comm) != 0) return 3;
    if (!strcmp(how, "after")) {
        install_app_handler(how);
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
    if (!strcmp(how, "resethand")) kill(getpid(), SIGTERM); /* the default's now */
    for (int i = 0; i < 100; i++) usleep(100000);
    fprintf(stderr, "term_job: SIGTERM was swallowed\n");
    return 0;
}

/*
 * crash.c: see crash.h.
 *
 * Chaining: the saved disposition is put back, then a fault raised by the
 * faulting instruction simply happens again when the handler returns, now
 * with the previous handler (or the default action, and a core) and the
 * original siginfo. A signal that no instruction will raise again (sent with
 * kill, or abort's SIGABRT) is raised once more; it is blocked while the
 * handler runs, so it arrives just after it returns.
 */
#include "evidence/crash.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "base/altstack.h"
#include "base/atomic.h"
#include "evidence/dump.h"
#include "evidence/python.h"
#include "evidence/threads.h"

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NSIGS (int)(sizeof crash_signals / sizeof crash_signals[0])

static struct sigaction previous[NSIGS];
static ng_atomic(int) installed[NSIGS];
static ng_atomic(int) crashed; /* one crash dump per process */
static ng_atomic(int) in_child;

static int index_of(int sig)
{
    for (int i = 0; i < NSIGS; i++)
        if (crash_signals[i] == sig) return i;
    return -1;
}

static void on_crash(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    int i = index_of(sig);
    if (!ng_atomic_load_relaxed(&in_child) && !ng_atomic_exchange_acq_rel(&crashed, 1)) {
        ncclguard_threads_take_self(uc);
        ncclguard_python_forget();
        ncclguard_dump_write_signal("crash", NULL, 0);
    }
    if (i >= 0) sigaction(sig, &previous[i], NULL);
    errno = saved_errno;
    if (si->si_code <= 0 || sig == SIGABRT) raise(sig);
}

void ncclguard_crash_init(void)
{
    ng_atomic_store_relaxed(&in_child, 0); /* a fork child with a communicator of its own */
    ncclguard_altstack_ensure(); /* SA_ONSTACK: room to run on a thread whose stack overflowed */
    for (int i = 0; i < NSIGS; i++) {
        if (ng_atomic_load_acquire(&installed[i])) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_crash;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(crash_signals[i], &sa, &previous[i]) == 0)
            ng_atomic_store_release(&installed[i], 1);
    }
}

void ncclguard_crash_atfork_child(void)
{
    ng_atomic_store_relaxed(&in_child, 1);
}

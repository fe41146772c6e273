/*
 * sigterm.c: see sigterm.h.
 */
#include "evidence/sigterm.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "base/atomic.h"
#include "base/ops.h"
#include "evidence/dump.h"
#include "evidence/python.h"
#include "evidence/threads.h"
#include "track/comm.h"
#include "track/flight.h"

static struct sigaction app;     /* the disposition we chain to */
static ng_atomic(int) app_ready; /* app is being replaced while 0 */
static ng_atomic(int) installed;
static ng_atomic(int) dumped; /* one SIGTERM dump per process */

/* True when a record of the ring is neither finished nor being written. */
static int op_in_flight(void)
{
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    uint64_t head = ncclguard_flight_head();
    uint64_t oldest = head > st.capacity ? head - st.capacity : 0;
    for (uint64_t i = head; i-- > oldest;) {
        int s = ncclguard_flight_state(i);
        if (s >= 0 && !ng_op_state_final(s)) return 1;
    }
    return 0;
}

/* True when a communicator is being created (init, split, shrink; a nonblocking
 * one until NCCL says it is ready): a job stopped there, by its launcher or a
 * time limit, leaves this dump or none. */
static int comm_being_created(void)
{
    for (int i = 0; i < ncclguard_comm_count(); i++)
        if (ng_comm_state(ncclguard_comm_at(i)) == NG_COMM_INITIALIZING) return 1;
    return 0;
}

/* How long SIGTERM waits for a dump under way on another thread (a timeout's,
 * a peer's incident): launchers give a process about 30 s between SIGTERM and
 * SIGKILL (torchrun, Slurm's KillWait, Kubernetes' grace period), and a dump
 * takes milliseconds unless its file system hangs. */
#define DUMP_WAIT_MS 10000

/*
 * Calls the application's handler a as the kernel would have: with its sa_mask
 * blocked and SIGTERM too unless SA_NODEFER, and with SA_RESETHAND the
 * disposition back to the default first, so that the next SIGTERM kills. Our
 * own handler stays installed: it finds the default then. The mask is put
 * back after the handler returns (sigprocmask is async-signal-safe).
 */
static void chain(const struct sigaction *a, int sig, siginfo_t *si, void *uc)
{
    sigset_t mask, saved;
    sigprocmask(SIG_BLOCK, NULL, &mask);
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&a->sa_mask, s) == 1) sigaddset(&mask, s);
    if (a->sa_flags & SA_NODEFER)
        sigdelset(&mask, sig);
    else
        sigaddset(&mask, sig);
    if (a->sa_flags & SA_RESETHAND) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        app = dfl;
    }
    sigprocmask(SIG_SETMASK, &mask, &saved);
    if (a->sa_flags & SA_SIGINFO)
        a->sa_sigaction(sig, si, uc);
    else
        a->sa_handler(sig);
    sigprocmask(SIG_SETMASK, &saved, NULL);
}

static void on_sigterm(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    /* Ending the process now would lose a dump being written: most often the
     * very evidence of the incident that made the launcher send SIGTERM. */
    ncclguard_dump_wait(DUMP_WAIT_MS);
    /* A process that dumped already (an incident, a request) has left evidence
     * richer than a handler can write (every thread, Python): it is kept. */
    if (!ncclguard_dump_written() && (op_in_flight() || comm_being_created()) &&
        !ng_atomic_exchange_acq_rel(&dumped, 1)) {
        ncclguard_threads_take_self(uc);
        ncclguard_python_forget();
        ncclguard_dump_write_signal("sigterm", NULL, 0);
    }
    errno = saved_errno;
    struct sigaction a = app;
    if (!ng_atomic_load_acquire(&app_ready) || a.sa_handler == SIG_DFL) {
        /* The default: die of SIGTERM, which is blocked until we return. */
        signal(sig, SIG_DFL);
        raise(sig);
    } else if (a.sa_handler != SIG_IGN) {
        chain(&a, sig, si, uc);
    }
}

/* Installs our handler, keeping the one in place as the application's. */
static void install(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigterm;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ng_atomic_store_release(&app_ready, 0);
    if (sigaction(SIGTERM, &sa, &old) != 0) return;
    if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_sigterm) {
        ng_atomic_store_release(&app_ready, 1); /* ours already: keep the saved one */
        return;
    }
    app = old;
    ng_atomic_store_release(&app_ready, 1);
    ng_atomic_store_release(&installed, 1);
}

void ncclguard_sigterm_init(void)
{
    install();
}

void ncclguard_sigterm_rearm(void)
{
    struct sigaction cur;
    if (!ng_atomic_load_acquire(&installed) || sigaction(SIGTERM, NULL, &cur) != 0) return;
    if (!((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigterm)) install();
}

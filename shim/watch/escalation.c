/* ladder.c: see ladder.h. */
#include "watch/escalation.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "track/comm.h"
#include "policy/config.h"
#include "evidence/dump.h"
#include "base/events.h"
#include "intercept/real.h"
#include "base/json.h"
#include "base/log.h"

#define MAX_ABORTS 64

struct abort_job {
    struct ng_comm *comm;
    ncclComm_t handle;
    int64_t started_mono;
    int done;     /* atomic: the helper thread returned from ncclCommAbort */
    int result;   /* its ncclResult_t */
    int reported; /* the watchdog has logged the outcome */
};

static struct abort_job jobs[MAX_ABORTS];
static int njobs;
static uint64_t finished;

static void *abort_main(void *arg)
{
    struct abort_job *j = arg;
    pthread_setname_np(pthread_self(), "ncclguard-abort");
    const struct ng_real *real = ncclguard_real();
    int r = real->CommAbort ? real->CommAbort(j->handle) : ncclInvalidUsage;
    __atomic_store_n(&j->result, r, __ATOMIC_RELAXED);
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

void ncclguard_ladder_abort(struct ng_comm *c, const char *why)
{
    if (!c || __atomic_load_n(&c->fenced, __ATOMIC_ACQUIRE) || njobs == MAX_ABORTS) return;
    /* Fence first: from here on, nobody but the helper touches the handle. */
    pthread_mutex_lock(&c->poll_lock);
    c->ending = 1;
    snprintf(c->fence_reason, sizeof c->fence_reason,
             "ncclguard aborted this communicator: %s; see the ncclguard dump", why);
    __atomic_store_n(&c->fenced, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&c->state, NG_COMM_ABORTED, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->poll_lock);

    struct abort_job *j = &jobs[njobs++];
    *j = (struct abort_job){
        .comm = c, .handle = ncclguard_comm_handle(c), .started_mono = ng_clock_ns(CLOCK_MONOTONIC)};
    NG_WARN("aborting comm %016llx (rank %d of %d): %s", (unsigned long long)c->id,
            ng_comm_rank(c), ng_comm_nranks(c), why);
    char quoted[512];
    ncclguard_event("abort", "\"comm\":\"%016llx\",\"why\":%s", (unsigned long long)c->id,
                    ncclguard_json_quote(why, quoted, sizeof quoted));
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&t, &attr, abort_main, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc) {
        NG_WARN("cannot start the abort thread (%s): comm %016llx stays fenced, not aborted",
                strerror(rc), (unsigned long long)c->id);
        j->done = j->reported = 1;
    }
}

void ncclguard_ladder_check(int64_t now_mono)
{
    const struct ng_settings *s = ncclguard_settings();
    for (int i = 0; i < njobs; i++) {
        struct abort_job *j = &jobs[i];
        if (j->reported) continue;
        double took = (double)(now_mono - j->started_mono) / 1e9;
        if (__atomic_load_n(&j->done, __ATOMIC_ACQUIRE)) {
            j->reported = 1;
            finished++;
            NG_WARN("ncclCommAbort of comm %016llx returned %d after %.1f s",
                    (unsigned long long)j->comm->id, j->result, took);
            continue;
        }
        if (took < s->abort_deadline) continue;
        j->reported = 1;
        NG_WARN("ncclCommAbort of comm %016llx has not returned after %.1f s (abort_deadline)",
                (unsigned long long)j->comm->id, took);
        if (s->kill_at > 0) ncclguard_ladder_kill("ncclCommAbort missed its deadline");
    }
}

void ncclguard_ladder_kill(const char *why)
{
    const struct ng_settings *s = ncclguard_settings();
    char path[1024];
    int dumped = ncclguard_dump_write("kill", path, sizeof path) == 0;
    NG_ERROR("ending the process with status %lld: %s%s%s", (long long)s->kill_exit, why,
             dumped ? "; dump: " : "; no dump could be written", dumped ? path : "");
    char quoted[512];
    ncclguard_event("kill", "\"why\":%s,\"status\":%lld",
                    ncclguard_json_quote(why, quoted, sizeof quoted), (long long)s->kill_exit);
    if (s->kill_core) {
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    _exit((int)s->kill_exit);
}

void ncclguard_ladder_stats(uint64_t *started, uint64_t *done)
{
    *started = (uint64_t)njobs;
    *done = finished;
}

/* escalation.c: see escalation.h. */
#include "watch/escalation.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/events.h"
#include "base/json.h"
#include "base/log.h"
#include "base/spool.h"
#include "base/thread.h"
#include "evidence/marker.h"
#include "evidence/trigger.h"
#include "policy/config.h"
#include "track/comm.h"
#include "watch/dumper.h"
#include "watch/nccl_calls.h"

#define MAX_ABORTS 64

struct abort_job {
    struct ng_comm *comm;
    ncclComm_t handle;
    int64_t started_mono;
    ng_atomic(int) done;   /* the helper thread returned from ncclCommAbort */
    ng_atomic(int) result; /* its ncclResult_t */
    int reported;          /* the watchdog has logged the outcome */
};

static struct abort_job jobs[MAX_ABORTS];
/* written by the enforcer; read by the exit summary too (ncclguard_escalation_stats) */
static ng_atomic(int) njobs;
static ng_atomic(uint64_t) finished;

static void *abort_main(void *arg)
{
    struct abort_job *j = arg;
    pthread_setname_np(pthread_self(), "ncclguard-abort");
    const struct ng_nccl_calls *nccl = ncclguard_nccl_calls();
    int r = nccl->comm_abort ? nccl->comm_abort(j->handle) : ncclInvalidUsage;
    ng_atomic_store_relaxed(&j->result, r);
    ng_atomic_store_release(&j->done, 1);
    return NULL;
}

void ncclguard_escalation_abort(struct ng_comm *c, const char *why)
{
    if (!c || ng_atomic_load_acquire(&c->fenced) || ng_atomic_load_relaxed(&njobs) == MAX_ABORTS)
        return;
    /* Fence first: from here on, nobody but the helper touches the handle. */
    pthread_mutex_lock(&c->poll_lock);
    c->ending = 1;
    snprintf(c->fence_reason, sizeof c->fence_reason,
             "ncclguard aborted this communicator: %s; see the ncclguard dump", why);
    ng_atomic_store_release(&c->fenced, 1);
    ng_atomic_store_release(&c->state, NG_COMM_ABORTED);
    pthread_mutex_unlock(&c->poll_lock);

    struct abort_job *j = &jobs[ng_atomic_add_relaxed(&njobs, 1)];
    *j = (struct abort_job){.comm = c,
                            .handle = ncclguard_comm_handle(c),
                            .started_mono = ng_clock_ns(CLOCK_MONOTONIC)};
    NG_WARN("aborting comm %016llx (rank %d of %d): %s", (unsigned long long)c->id, ng_comm_rank(c),
            ng_comm_nranks(c), why);
    char quoted[512];
    ncclguard_event("abort", "\"comm\":\"%016llx\",\"why\":%s", (unsigned long long)c->id,
                    ncclguard_json_quote(why, quoted, sizeof quoted));
    int rc = ncclguard_thread_start(NULL, abort_main, j);
    if (rc) {
        NG_WARN("cannot start the abort thread (%s): comm %016llx stays fenced, not aborted",
                strerror(rc), (unsigned long long)c->id);
        ng_atomic_store_relaxed(&j->done, 1);
        j->reported = 1;
    }
}

int ncclguard_escalation_check(int64_t now_mono)
{
    const struct ng_settings *s = ncclguard_settings();
    int under_way = 0;
    for (int i = 0; i < ng_atomic_load_relaxed(&njobs); i++) {
        struct abort_job *j = &jobs[i];
        if (j->reported) continue;
        double took = now_mono > j->started_mono ? (double)(now_mono - j->started_mono) / 1e9 : 0;
        if (ng_atomic_load_acquire(&j->done)) {
            j->reported = 1;
            ng_atomic_add_relaxed(&finished, 1);
            NG_WARN("ncclCommAbort of comm %016llx returned %d after %.1f s",
                    (unsigned long long)j->comm->id, j->result, took);
            continue;
        }
        if (took < s->abort_deadline) {
            under_way++;
            continue;
        }
        j->reported = 1;
        NG_WARN("ncclCommAbort of comm %016llx has not returned after %.1f s (abort_deadline)",
                (unsigned long long)j->comm->id, took);
        if (s->kill_at > 0) ncclguard_escalation_kill("ncclCommAbort missed its deadline");
    }
    return under_way;
}

void ncclguard_escalation_kill(const char *why)
{
    const struct ng_settings *s = ncclguard_settings();
    /* the kill's own dump, on the dump thread (after any dump under way) */
    char path[1024];
    uint64_t t = ncclguard_dumper_post(NG_DUMPER_KILL);
    int dumped = ncclguard_dumper_wait(t, ng_clock_ns(CLOCK_MONOTONIC) +
                                              NG_DUMPER_WAIT_S * 1000000000LL) &&
                 ncclguard_dumper_result(path, sizeof path) == 0;
    NG_ERROR("ending the process with status %lld: %s%s%s", (long long)s->kill_exit, why,
             dumped ? "; dump: " : "; no dump could be written", dumped ? path : "");
    char quoted[512];
    ncclguard_event("kill", "\"why\":%s,\"status\":%lld",
                    ncclguard_json_quote(why, quoted, sizeof quoted), (long long)s->kill_exit);
    ncclguard_marker_remove(); /* _exit runs no exit handler */
    ncclguard_trigger_exit();
    ncclguard_spool_finish(NG_SPOOL_EXIT_MS); /* the lines above, if the files take them */
    if (s->kill_core) {
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    _exit((int)s->kill_exit);
}

void ncclguard_escalation_stats(uint64_t *started, uint64_t *done)
{
    *started = (uint64_t)ng_atomic_load_relaxed(&njobs);
    *done = ng_atomic_load_relaxed(&finished);
}

/*
 * fakenccl communicators: registry, NCCL's handle checks, and the calls
 * that end or query a communicator (Finalize, Destroy, Abort, Revoke,
 * GetAsyncError, Count, CuDevice, UserRank).
 *
 * End of life, as NCCL behaves:
 *   Finalize  waits until every launched op has finished (nonblocking: on a
 *             thread, ncclInProgress meanwhile); Destroy is then local.
 *   Destroy   without Finalize waits the same way, then unmaps. A comm with
 *             an async error refuses it (NCCL's EnsureReady): use Abort.
 *   Abort     is local, as NCCL's setCommAbortFlags (init.cc): this rank's
 *             running and queued ops end, it waits only for this process's
 *             host functions to notice, and unmaps. Peers are not told:
 *             their ops wait until they abort themselves, or, with
 *             FAKENCCL_ABORT_NOTIFY=1, until a second later they see what a
 *             network transport would report (ncclRemoteError).
 *   Revoke    is local the same way; the handle stays valid for Destroy,
 *             Split and Shrink, later ops on it fail with ncclInvalidUsage,
 *             and its async error reads ncclSuccess once quiescent.
 * Handles are never freed, so stale ones are rejected loudly.
 */
#include "fakenccl_calllog.h"
#include "fakenccl_comm.h"
#include "fakenccl_profiler.h"

#include <time.h>

#include <stdlib.h>
#include <string.h>

static _Atomic(struct fn_comm *) registry;

struct fn_comm *fn_comm_new(void)
{
    struct fn_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->magic = FN_COMM_MAGIC;
    c->rank = c->nranks = c->dev = -1;
    c->blocking = true;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    atomic_init(&c->state, FN_INITIALIZING);
    atomic_init(&c->async_err, ncclSuccess);
    c->next = atomic_load(&registry);
    while (!atomic_compare_exchange_weak(&registry, &c->next, c))
        ;
    return c;
}

bool fn_comm_known(const void *p)
{
    for (struct fn_comm *c = atomic_load(&registry); c; c = c->next)
        if (c == p) return c->magic == FN_COMM_MAGIC;
    return false;
}

void fn_comm_set_async(struct fn_comm *c, ncclResult_t err)
{
    int expected = ncclSuccess;
    atomic_compare_exchange_strong(&c->async_err, &expected, (int)err);
}

ncclResult_t fn_comm_check_handle(struct fn_comm *c, const char *api)
{
    if (!c) {
        fn_warn("%s : comm argument is NULL", api);
        return ncclInvalidArgument;
    }
    if (!fn_comm_known(c)) {
        fn_warn("Error: corrupted comm object detected");
        fn_loud("nccl%s: the communicator handle was not made by this library", api);
        return ncclInvalidArgument;
    }
    switch (atomic_load(&c->state)) {
    case FN_DESTROYED:
        fn_loud("nccl%s on a destroyed communicator (rank %d of %d): use after ncclCommDestroy",
                api, c->rank, c->nranks);
        fn_warn("%s : comm has already been destroyed", api);
        return ncclInvalidArgument;
    case FN_ABORTED:
        fn_loud("nccl%s on an aborted communicator (rank %d of %d): use after ncclCommAbort", api,
                c->rank, c->nranks);
        fn_warn("%s : comm has already been aborted", api);
        return ncclInvalidArgument;
    case FN_FORKED:
        fn_loud("nccl%s in a fork child on a communicator of the parent process", api);
        fn_warn("%s : comm belongs to the parent process", api);
        return ncclInvalidArgument;
    default: return ncclSuccess;
    }
}

ncclResult_t fn_comm_async(struct fn_comm *c)
{
    switch (atomic_load(&c->state)) {
    case FN_INITIALIZING:
    case FN_FINALIZING: return ncclInProgress;
    case FN_FAILED: return (ncclResult_t)atomic_load(&c->async_err);
    case FN_REVOKED: return atomic_load(&c->nb_jobs) > 0 ? ncclInProgress : ncclSuccess;
    default: break;
    }
    ncclResult_t e = (ncclResult_t)atomic_load(&c->async_err);
    if (e != ncclSuccess) return e;
    pthread_mutex_lock(&c->mu);
    bool peer_failed = fn_seg_peer_failed(&c->seg, c->rank, true) >= 0;
    pthread_mutex_unlock(&c->mu);
    if (peer_failed) {
        fn_comm_set_async(c, ncclRemoteError);
        return (ncclResult_t)atomic_load(&c->async_err);
    }
    return atomic_load(&c->nb_jobs) > 0 ? ncclInProgress : ncclSuccess;
}

/* NCCL's ncclCommEnsureReady: in progress is a usage error, an async error is returned. */
static ncclResult_t ensure_ready(struct fn_comm *c)
{
    ncclResult_t r = fn_comm_async(c);
    if (r == ncclSuccess) return r;
    fn_warn("Attempt to use communicator before the previous operation returned ncclSuccess");
    return r == ncclInProgress ? ncclInvalidArgument : r;
}

ncclResult_t fn_comm_check(struct fn_comm *c, const char *api)
{
    ncclResult_t r = fn_comm_check_handle(c, api);
    return r != ncclSuccess ? r : ensure_ready(c);
}

ncclResult_t fn_comm_check_op(struct fn_comm *c, const char *api)
{
    ncclResult_t r = fn_comm_check(c, api);
    if (r != ncclSuccess) return r;
    switch (atomic_load(&c->state)) {
    case FN_REVOKED: fn_warn("%s : communicator is revoked", api); return ncclInvalidUsage;
    case FN_FINALIZED: fn_warn("%s : communicator is finalized", api); return ncclInvalidUsage;
    default: return ncclSuccess;
    }
}

/* Waits (under mu) until no launched batch and no host function uses c. */
static void wait_quiet(struct fn_comm *c)
{
    while (c->pending > 0 || c->inflight > 0) pthread_cond_wait(&c->cv, &c->mu);
}

/* Unmaps the segment once nothing in this process uses it. Under mu. */
static void drop_segment(struct fn_comm *c)
{
    while (c->inflight > 0) pthread_cond_wait(&c->cv, &c->mu);
    fn_seg_detach(&c->seg);
}

struct quiesce_job {
    struct fn_comm *c;
    enum fn_state final_state;
};

/* Nonblocking Finalize/Revoke: waits on a thread, then settles the state. */
static void *quiesce_main(void *arg)
{
    struct quiesce_job *q = arg;
    struct fn_comm *c = q->c;
    pthread_mutex_lock(&c->mu);
    wait_quiet(c);
    int expected = q->final_state == FN_FINALIZED ? FN_FINALIZING : FN_REVOKED;
    atomic_compare_exchange_strong(&c->state, &expected, (int)q->final_state);
    atomic_fetch_sub(&c->nb_jobs, 1);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    free(q);
    return NULL;
}

/* Settles c into final_state after quiescing: inline when blocking, else on a thread. */
static ncclResult_t quiesce(struct fn_comm *c, enum fn_state final_state)
{
    if (!c->blocking) {
        struct quiesce_job *q = malloc(sizeof *q);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (q) {
            *q = (struct quiesce_job){c, final_state};
            atomic_fetch_add(&c->nb_jobs, 1);
            if (pthread_create(&t, &attr, quiesce_main, q) == 0) {
                pthread_attr_destroy(&attr);
                return ncclInProgress;
            }
            atomic_fetch_sub(&c->nb_jobs, 1);
            free(q);
        }
        pthread_attr_destroy(&attr);
    }
    pthread_mutex_lock(&c->mu);
    wait_quiet(c);
    if (final_state == FN_FINALIZED) atomic_store(&c->state, FN_FINALIZED);
    pthread_mutex_unlock(&c->mu);
    return c->blocking ? ncclSuccess : ncclInProgress;
}

static ncclResult_t comm_finalize(struct fn_comm *c)
{
    if (!c) return ncclSuccess;
    ncclResult_t r = fn_comm_check(c, "CommFinalize");
    if (r != ncclSuccess) return r;
    int st = atomic_load(&c->state);
    if (st == FN_FINALIZED || st == FN_REVOKED) {
        fn_warn("CommFinalize : communicator is already %s",
                st == FN_REVOKED ? "revoked" : "finalized");
        return ncclInvalidArgument;
    }
    if ((r = fn_fault_check_call("CommFinalize", c->rank)) != ncclSuccess) return r;
    atomic_store(&c->state, FN_FINALIZING);
    return quiesce(c, FN_FINALIZED);
}

static ncclResult_t comm_destroy(struct fn_comm *c)
{
    if (!c) return ncclSuccess;
    ncclResult_t r = fn_comm_check(c, "CommDestroy");
    if (r == ncclSuccess) r = fn_fault_check_call("CommDestroy", c->rank);
    if (r != ncclSuccess) return r;
    pthread_mutex_lock(&c->mu);
    wait_quiet(c); /* NCCL synchronizes its streams: outstanding ops must finish */
    fn_prof_comm_fini(c);
    atomic_store(&c->state, FN_DESTROYED);
    drop_segment(c);
    pthread_mutex_unlock(&c->mu);
    return ncclSuccess;
}

static ncclResult_t comm_abort(struct fn_comm *c)
{
    if (!c) return ncclSuccess;
    ncclResult_t r = fn_comm_check_handle(c, "CommAbort");
    if (r != ncclSuccess) return r;
    fn_prof_comm_fini(c);
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->state, FN_ABORTED);
    fn_seg_mark_failed(&c->seg, c->rank, false);
    pthread_cond_broadcast(&c->cv);
    drop_segment(c);
    pthread_mutex_unlock(&c->mu);
    return ncclSuccess;
}

static ncclResult_t comm_revoke(struct fn_comm *c, int flags)
{
    if (!c) return ncclSuccess;
    if (flags != NCCL_REVOKE_DEFAULT) {
        fn_warn("CommRevoke : revokeFlags %d is not supported", flags);
        return ncclInvalidArgument;
    }
    ncclResult_t r = fn_comm_check_handle(c, "CommRevoke");
    if (r != ncclSuccess) return r;
    int st = atomic_load(&c->state);
    if (st != FN_READY) {
        fn_warn("CommRevoke : communicator is %s", st == FN_REVOKED        ? "already revoked"
                                                   : st == FN_INITIALIZING ? "not initialized"
                                                                           : "finalized");
        return ncclInvalidArgument;
    }
    if ((r = fn_fault_check_call("CommRevoke", c->rank)) != ncclSuccess) return r;
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->state, FN_REVOKED);
    fn_seg_mark_failed(&c->seg, c->rank, true);
    pthread_mutex_unlock(&c->mu);
    return quiesce(c, FN_REVOKED);
}

/* CommCount, CommCuDevice, CommUserRank: NCCL's CommCheck, PtrCheck, EnsureReady. */
static ncclResult_t comm_attr(struct fn_comm *c, int *out, const char *api, const char *what)
{
    ncclResult_t r = fn_comm_check_handle(c, api);
    if (r != ncclSuccess) return r;
    if ((r = fn_ptr_check(out, api, what)) != ncclSuccess) return r;
    if ((r = ensure_ready(c)) != ncclSuccess) return r;
    *out = !strcmp(what, "count") ? c->nranks : !strcmp(what, "devid") ? c->dev : c->rank;
    return ncclSuccess;
}

void fn_comm_atfork_child(void)
{
    for (struct fn_comm *c = atomic_load(&registry); c; c = c->next) {
        int st = atomic_load(&c->state);
        if (st == FN_ABORTED || st == FN_DESTROYED || st == FN_FORKED) continue;
        atomic_store(&c->state, FN_FORKED);
        fn_seg_forget(&c->seg);
    }
}

/* ---- API ---- */

static void log_comm_call(const char *name, ncclComm_t comm, ncclResult_t r)
{
    struct fn_logline l;
    if (fn_log_begin(&l, name)) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_end(&l, r);
    }
}

/* Runs fn on comm between fn_comm_enter and fn_comm_leave, then logs the call; name is the
 * API's ("ncclCommDestroy"), entered without its "nccl". */
static ncclResult_t owned_comm_call(ncclComm_t comm, const char *name,
                                    ncclResult_t (*fn)(struct fn_comm *))
{
    struct fn_comm *owner = fn_comm_enter(comm, name + strlen("nccl"));
    ncclResult_t r = fn((struct fn_comm *)comm);
    fn_comm_leave(owner);
    log_comm_call(name, comm, r);
    return r;
}

FN_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    return owned_comm_call(comm, "ncclCommFinalize", comm_finalize);
}
FN_WEAK_ALIAS(ncclCommFinalize);

FN_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    return owned_comm_call(comm, "ncclCommDestroy", comm_destroy);
}
FN_WEAK_ALIAS(ncclCommDestroy);

FN_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    /* NCCL's abort of a blocking communicator can itself hang. */
    int hang_ms = fn_cfg()->abort_hang_ms;
    if (hang_ms > 0) {
        struct timespec ts = {hang_ms / 1000, (long)(hang_ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    ncclResult_t r = comm_abort((struct fn_comm *)comm);
    log_comm_call("ncclCommAbort", comm, r);
    return r;
}
FN_WEAK_ALIAS(ncclCommAbort);

FN_EXPORT ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    struct fn_comm *owner = fn_comm_enter(comm, "CommRevoke");
    ncclResult_t r = comm_revoke((struct fn_comm *)comm, revokeFlags);
    fn_comm_leave(owner);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommRevoke")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        fn_log_fmt(&l, " revokeFlags=%d", revokeFlags);
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommRevoke);

FN_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    struct fn_comm *c = (struct fn_comm *)comm;
    struct fn_comm *owner = fn_comm_enter(comm, "CommGetAsyncError");
    ncclResult_t r = fn_comm_check_handle(c, "CommGetAsyncError");
    if (r == ncclSuccess && !asyncError) {
        fn_warn("CommGetAsyncError : asyncError argument is NULL");
        r = ncclInvalidArgument;
    }
    if (r == ncclSuccess) *asyncError = fn_comm_async(c);
    fn_comm_leave(owner);
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclCommGetAsyncError")) {
        fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);
        if (r == ncclSuccess)
            fn_log_fmt(&l, " asyncError=%d", (int)*asyncError);
        else
            fn_log_fmt(&l, " asyncError=%s", asyncError ? "-" : "null");
        fn_log_end(&l, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclCommGetAsyncError);

/* The three attribute getters differ only in their names. */
#define FN_ATTR_API(Name, arg, what)                                          \
    FN_EXPORT ncclResult_t pnccl##Name(const ncclComm_t comm, int *arg)       \
    {                                                                         \
        struct fn_comm *owner = fn_comm_enter(comm, #Name);                   \
        ncclResult_t r = comm_attr((struct fn_comm *)comm, arg, #Name, what); \
        fn_comm_leave(owner);                                                 \
        struct fn_logline l;                                                  \
        if (fn_log_begin(&l, "nccl" #Name)) {                                 \
            fn_log_ptr(&l, "comm", FN_LOG_COMM, comm);                        \
            if (r == ncclSuccess)                                             \
                fn_log_fmt(&l, " " #arg "=%d", *arg);                         \
            else                                                              \
                fn_log_fmt(&l, " " #arg "=%s", arg ? "-" : "null");           \
            fn_log_end(&l, r);                                                \
        }                                                                     \
        return r;                                                             \
    }                                                                         \
    FN_WEAK_ALIAS(nccl##Name)

FN_ATTR_API(CommCount, count, "count");
FN_ATTR_API(CommCuDevice, device, "devid");
FN_ATTR_API(CommUserRank, rank, "rank");

/*
 * Communicator life cycle for one worker: creation (blocking or nonblocking),
 * the split into two halves, groups, async-error polling, and teardown. Every
 * NCCL return code goes through tl_nccl_check, the one error idiom here.
 */
#include <time.h>

#include "trainloop.h"

static _Thread_local int t_group_depth;

static void pause_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

static __attribute__((noreturn)) void nccl_fail(ncclResult_t r, const char *call)
{
    /* ncclGetLastError ignores its argument; NULL keeps a possibly freed handle out of it. */
    const char *last = ncclGetLastError(NULL);
    tl_die(TL_EXIT_CALL, ": %s failed: %s (%s)", call, ncclGetErrorString(r),
           last && *last ? last : "no details");
}

/*
 * Accepts R from CALL on COMM. On a nonblocking communicator ncclInProgress is
 * not a failure: inside a group it is settled at ncclGroupEnd, outside it we
 * poll until the call has completed. Any other error ends the program.
 */
void tl_nccl_check(struct tl_worker *w, ncclComm_t comm, ncclResult_t r, const char *call)
{
    if (r == ncclSuccess) return;
    if (r == ncclInProgress && w->p->opt.nonblocking) {
        if (t_group_depth == 0) tl_comm_wait(w, comm, call);
        return;
    }
    nccl_fail(r, call);
}

/* Polls ncclCommGetAsyncError until COMM is no longer ncclInProgress (nonblocking mode). */
void tl_comm_wait(struct tl_worker *w, ncclComm_t comm, const char *call)
{
    (void)w;
    for (;;) {
        ncclResult_t state = ncclInProgress;
        ncclResult_t r = ncclCommGetAsyncError(comm, &state);
        if (r != ncclSuccess) nccl_fail(r, "ncclCommGetAsyncError");
        if (state == ncclSuccess) return;
        if (state != ncclInProgress) nccl_fail(state, call);
        pause_ms(1);
    }
}

static void poll_one(ncclComm_t comm)
{
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) nccl_fail(r, "ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress) nccl_fail(state, "ncclCommGetAsyncError");
}

/* One async-error check of each communicator of W, as a framework's watchdog does. */
void tl_comms_poll_errors(struct tl_worker *w)
{
    if (w->world) poll_one(w->world);
    if (w->half) poll_one(w->half);
}

void tl_group_start(struct tl_worker *w)
{
    TL_NCCL(w, NULL, ncclGroupStart, ());
    t_group_depth++;
}

/* Ends a group over communicators A and B (B may be NULL); settles ncclInProgress on both. */
void tl_group_end(struct tl_worker *w, ncclComm_t a, ncclComm_t b)
{
    ncclResult_t r = ncclGroupEnd();
    t_group_depth--;
    if (r == ncclInProgress && w->p->opt.nonblocking) {
        if (a) tl_comm_wait(w, a, "ncclGroupEnd");
        if (b) tl_comm_wait(w, b, "ncclGroupEnd");
        return;
    }
    tl_nccl_check(w, a, r, "ncclGroupEnd");
}

static void expect_shape(ncclComm_t comm, int want_rank, int want_size, const char *what)
{
    int rank = -1, size = -1;
    ncclResult_t r = ncclCommUserRank(comm, &rank);
    if (r != ncclSuccess) nccl_fail(r, "ncclCommUserRank");
    r = ncclCommCount(comm, &size);
    if (r != ncclSuccess) nccl_fail(r, "ncclCommCount");
    if (rank != want_rank || size != want_size)
        tl_die(TL_EXIT_SETUP, ": %s communicator is rank %d of %d, expected %d of %d", what, rank,
               size, want_rank, want_size);
}

/*
 * Creates the world communicator from ID, then splits it into two halves:
 * color 0 for ranks below nranks/2, color 1 for the rest (a world of one rank
 * gives a single half of one rank). Nonblocking mode uses config.blocking = 0
 * for both and waits for each to become ready.
 */
void tl_comms_create(struct tl_worker *w, ncclUniqueId id)
{
    const struct tl_proc *p = w->p;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclResult_t r;
    if (p->opt.nonblocking) {
        cfg.blocking = 0;
        r = ncclCommInitRankConfig(&w->world, p->nranks, id, p->rank, &cfg);
        tl_nccl_check(w, w->world, r, "ncclCommInitRankConfig");
        if (r == ncclSuccess) tl_comm_wait(w, w->world, "ncclCommInitRankConfig");
    } else {
        r = ncclCommInitRank(&w->world, p->nranks, id, p->rank);
        tl_nccl_check(w, w->world, r, "ncclCommInitRank");
    }
    expect_shape(w->world, p->rank, p->nranks, "world");

    int low = p->nranks / 2;
    int color = p->rank < low ? 0 : 1;
    w->half_base = color ? low : 0;
    w->half_size = color ? p->nranks - low : low;
    w->half_rank = p->rank - w->half_base;
    r = ncclCommSplit(w->world, color, p->rank, &w->half, p->opt.nonblocking ? &cfg : NULL);
    if (p->opt.nonblocking && (r == ncclSuccess || r == ncclInProgress)) {
        /* As in NCCL, the child handle appears once the job tied to the parent is done. */
        tl_comm_wait(w, w->world, "ncclCommSplit");
        if (!w->half)
            tl_die(TL_EXIT_CALL, ": ncclCommSplit failed: no communicator after completion");
        tl_comm_wait(w, w->half, "ncclCommSplit");
    } else {
        tl_nccl_check(w, w->half, r, "ncclCommSplit");
    }
    expect_shape(w->half, w->half_rank, w->half_size, "split");
}

static void destroy_one(struct tl_worker *w, ncclComm_t *comm)
{
    ncclResult_t r = ncclCommFinalize(*comm);
    tl_nccl_check(w, *comm, r, "ncclCommFinalize");
    if (w->p->opt.nonblocking) tl_comm_wait(w, *comm, "ncclCommFinalize");
    r = ncclCommDestroy(*comm);
    if (r != ncclSuccess) nccl_fail(r, "ncclCommDestroy");
    *comm = NULL;
}

/* Finalize (flushes outstanding work, so Destroy is local), then Destroy; split first. */
void tl_comms_destroy(struct tl_worker *w)
{
    destroy_one(w, &w->half);
    destroy_one(w, &w->world);
}

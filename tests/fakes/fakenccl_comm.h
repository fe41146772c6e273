/*
 * fakenccl communicators: the handle behind ncclComm_t, the registry of
 * every handle ever made, state checks, and creation jobs.
 *
 * Handles are never freed: a destroyed or aborted handle stays in the
 * registry in a final state, so a stale pointer is recognised and rejected
 * loudly instead of being dereferenced as garbage. Only the shared-memory
 * mapping is released.
 *
 * Threads: API threads (any), stream workers of the fake libcuda (which run
 * the fake's host functions), the nonblocking helper thread and creation
 * threads. `state`, `async_err`, `nb_jobs`, `completed_ops` and `quiesce`
 * are atomics; the execution counters, the accounting fields (inflight,
 * pending), the child ordinal, the control epoch, the redops and the `seg`
 * mapping itself (while it can change) are under `mu`. rank, nranks, dev,
 * ctx and blocking are written before the handle becomes usable (state
 * FN_READY, published with a release store) and never change after.
 */
#ifndef FAKENCCL_COMM_H
#define FAKENCCL_COMM_H

#include "fakenccl_shm.h"

#include <cuda.h>
#include <pthread.h>

#define FN_COMM_MAGIC 0x434f4d4du
#define FN_MAX_REDOPS 64

enum fn_state {
    FN_INITIALIZING, /* creation still running (nonblocking or inside a group) */
    FN_READY,
    FN_FINALIZING, /* ncclCommFinalize waits for outstanding work */
    FN_FINALIZED,
    FN_REVOKED,
    FN_FAILED,    /* creation failed; async_err has why */
    FN_ABORTED,   /* final */
    FN_DESTROYED, /* final */
    FN_FORKED,    /* inherited by a fork child: never usable there */
};

/* A PreMulSum operator made by ncclRedOpCreatePreMulSum. */
struct fn_redop {
    bool used;
    ncclDataType_t dtype;
    ncclScalarResidence_t residence;
    unsigned char value[8]; /* the scalar, for ncclScalarHostImmediate */
    const void *ptr;        /* the scalar's address, for ncclScalarDevice */
};

struct fn_comm {
    uint32_t magic;
    struct fn_comm *next;  /* registry link, written once before publication */
    _Atomic int state;     /* enum fn_state */
    _Atomic int async_err; /* ncclResult_t reported by ncclCommGetAsyncError */

    /* fixed once creation completed */
    int rank, nranks, dev;
    CUcontext ctx;
    bool blocking;
    uint8_t key[FN_KEY_BYTES];
    struct fn_seg seg;
    char name[64]; /* config->commName */

    /* execution-time counters, used by stream workers */
    uint64_t exec_coll_seq;  /* collectives started on the stream, under mu */
    uint64_t exec_step;      /* staging steps consumed, under mu */
    uint64_t *exec_send_seq; /* [nranks] sends started per peer, under mu */
    uint64_t *exec_recv_seq; /* [nranks] receives started per peer, under mu */
    _Atomic long completed_ops;
    _Atomic bool quiesce;   /* ncclCommShrink(NCCL_SHRINK_ABORT) ends this rank's running ops */
    _Atomic bool connected; /* the first launch's connection setup is done (nonblocking) */
    _Atomic int callers;    /* API calls inside this comm now (fakenccl_owner.c) */
    _Atomic(const char *) caller_api; /* the API name of the latest of them */
    _Atomic bool overlap_reported;    /* the misuse line for overlapping calls was printed */

    pthread_mutex_t mu;
    pthread_cond_t cv;   /* broadcast when inflight, pending or nb_jobs drop */
    int inflight;        /* host functions currently using seg */
    int pending;         /* launched (not captured) batches not yet finished */
    _Atomic int nb_jobs; /* nonblocking launches and jobs not yet finished */
    /* NCCL's internal stream (enqueue.cc): a launch waits for this comm's earlier ones */
    _Atomic uint64_t order_launched; /* batches launched (not captured), ever */
    uint64_t order_finished;         /* of those, batches finished, under mu */
    uint64_t ctrl_epoch;             /* control all-gathers joined on this comm */
    uint64_t child_ordinal;          /* splits and shrinks made from this comm */
    struct fn_redop redops[FN_MAX_REDOPS];
    void *prof_ctx;                /* the profiler plugin's context (fakenccl_profiler.c) */
    bool prof_live;                /* its init succeeded and finalize has not run */
    _Atomic uint64_t prof_seq[16]; /* NCCL's comm->seqNumber[func]: per collective type */
};

/* Allocates a handle (state FN_INITIALIZING) and adds it to the registry. */
struct fn_comm *fn_comm_new(void);
/* True when `p` is a handle that this process made. Lock-free, any thread. */
bool fn_comm_known(const void *p);

/* NCCL's CommCheck: a NULL or foreign handle, a destroyed/aborted/forked one (loud). */
ncclResult_t fn_comm_check_handle(struct fn_comm *c, const char *api);
/*
 * The checks of NCCL's CommCheck + ncclCommEnsureReady, for API `api`
 * (NCCL's opName, e.g. "AllReduce" or "CommCount"): a NULL or foreign
 * handle, a destroyed/aborted one (loud), a comm whose creation or previous
 * nonblocking operation is still in progress (ncclInvalidArgument, as
 * NCCL), and a pending async error (returned as is).
 */
ncclResult_t fn_comm_check(struct fn_comm *c, const char *api);
/* fn_comm_check plus: a revoked or finalized comm accepts no new operation. */
ncclResult_t fn_comm_check_op(struct fn_comm *c, const char *api);

/* The async error now visible on c: its own, or ncclRemoteError after a peer's abort/revoke. */
ncclResult_t fn_comm_async(struct fn_comm *c);
/* Records an async error once (the first one wins). */
void fn_comm_set_async(struct fn_comm *c, ncclResult_t err);

/* Marks every handle of a fork child as unusable and drops the child's mappings. */
void fn_comm_atfork_child(void);

/* ---- one thread at a time (fakenccl_owner.c) ---- */

/*
 * Marks the calling thread as inside API `api` (NCCL's opName) on comm and
 * returns the handle, or NULL when comm is not one of this library's; a
 * second call inside a nonblocking comm at once prints one misuse line.
 * Every fn_comm_enter is paired with fn_comm_leave (which accepts NULL).
 */
struct fn_comm *fn_comm_enter(ncclComm_t comm, const char *api);
void fn_comm_leave(struct fn_comm *c);

/* ---- creation (fakenccl_create.c) ---- */

/* A deferred creation: InitRank/Split/Shrink called inside a group, or nonblocking. */
struct fn_create_job;
/*
 * Runs the creation jobs recorded by the calling thread's group, each on its
 * own thread (ncclGroupEnd). Blocking: waits for all and returns the first
 * error. When any is nonblocking: returns at once with *async set. Frees jobs.
 */
ncclResult_t fn_create_group_end(struct fn_create_job **jobs, int njobs, bool *async);
/* Drops a recorded creation (its group failed): the handle fails with `why`. Frees the job. */
void fn_create_cancel(struct fn_create_job *job, ncclResult_t why);

#endif

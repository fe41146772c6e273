/*
 * fakenccl operations: what an API call records (fn_op), how ops are fused
 * into one host function per stream (fn_batch), how that host function
 * makes progress on the stream worker of the fake libcuda (fn_exec), and the
 * group state of each thread.
 *
 * Path of one op: ops.c checks the arguments and builds an fn_op; outside a
 * group, launch.c wraps it in a batch and enqueues fn_batch_run with
 * cuLaunchHostFunc on the caller's stream (a nonblocking comm hands the
 * batch to the helper thread instead); inside a group, group.c collects ops
 * until the outermost ncclGroupEnd, which makes one batch per stream.
 * fn_batch_run (exec.c) then assigns sequence numbers at execution time and
 * drives each op's state machine (coll.c, p2p.c) until every op is done,
 * sleeping on the communicators' doorbells when nothing can move.
 */
#ifndef FAKENCCL_EXEC_H
#define FAKENCCL_EXEC_H

#include "fakenccl_comm.h"

enum fn_op_kind {
    FN_OP_ALLREDUCE,
    FN_OP_BROADCAST, /* also ncclBcast */
    FN_OP_REDUCE,
    FN_OP_ALLGATHER,
    FN_OP_REDUCESCATTER,
    FN_OP_ALLTOALL,
    FN_OP_GATHER,
    FN_OP_SCATTER,
    FN_OP_SEND,
    FN_OP_RECV,
};

/* The reduction a collective descriptor carries when its op is a PreMulSum. */
#define FN_REDOP_PREMULSUM 1000
/* The descriptor's reduction or root for ops that have none. */
#define FN_NONE (-1)

/* One recorded operation; immutable once recorded (a captured one lives forever). */
struct fn_op {
    enum fn_op_kind kind;
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    ncclDataType_t dtype;
    int redop; /* ncclRedOp_t, FN_REDOP_PREMULSUM, or FN_NONE */
    int root;  /* root, peer for Send/Recv, or FN_NONE */
    struct fn_comm *comm;
    CUstream stream;
    struct fn_redop premul; /* the PreMulSum operator, copied at call time */
    void *prof_api;         /* the profiler's CollApi/P2pApi handle of the call, or NULL */
    void *prof_task;        /* its Coll/P2p handle, set at launch (fakenccl_profiler.c) */
    void *prof_kernel;      /* its KernelCh handle while the op runs */
};

/*
 * The batches of one launch that share a communicator, directly or through
 * another batch: NCCL launches a communicator's part of a group once the
 * launch stream waited for every user stream of it, and makes every user
 * stream wait for the launch's end (enqueue.cc: ncclLaunchPrepare,
 * ncclLaunchFinish; the NCCL user guide, "CUDA Stream Semantics": "as if the
 * NCCL group operation was posted on every stream"). So no batch of a join
 * starts before each has reached its place on its stream, and none lets its
 * stream go on before each has finished.
 */
struct fn_join {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int members; /* batches launched (one that failed to launch leaves) */
    int arrived, finished;
    /* The batches number their ops one after another, in batch order (that of
     * their first op in the call), so that every rank numbers a launch's
     * collectives alike, whichever stream's batch runs first; `unordered` once
     * a batch failed to launch. */
    int numbered;
    bool unordered;
    int refs; /* batches that still hold it */
};

/* The ops of one stream in one launch: run by one host function. */
struct fn_batch {
    CUstream stream;
    CUcontext ctx; /* made current to launch (NULL/legacy streams are per context) */
    bool captured; /* recorded into a graph: kept forever, run at each launch */
    int nops;
    struct fn_op *ops;
    int ncomms;
    struct fn_comm **comms; /* distinct comms of ops, in first-use order */
    /* per comm: its batches launched before this launch, which must finish first */
    uint64_t *turns;
    struct fn_join *join; /* NULL: alone in its launch, or captured */
    int join_index;       /* its place among the join's batches */
};

/* Batch b leaves its join (the last one frees it); `launched`: it had arrived or
 * will, else it never runs and the others stop waiting for it. */
void fn_join_leave(struct fn_batch *b, bool launched);

/* Progress of one op during one execution of its batch. */
enum fn_step { FN_STEP_BLOCKED, FN_STEP_MOVED, FN_STEP_DONE, FN_STEP_FAILED };

struct fn_exec {
    const struct fn_op *op;
    enum fn_step status; /* BLOCKED/MOVED while running */
    uint64_t seq;        /* collective seq (0-based) or p2p seq (1-based) */
    uint64_t step;       /* first staging step of a collective */
    uint64_t rounds, round;
    int phase;
    size_t pos;     /* bytes moved so far (p2p) */
    void *snapshot; /* private copy of an in-place AlltoAll send buffer */
    bool reported;  /* the mismatch line was printed */
};

/* ---- coll.c / p2p.c: one step of an op's state machine, on a stream worker ---- */
uint64_t fn_coll_rounds(const struct fn_op *op);
enum fn_step fn_coll_step(struct fn_exec *e);
enum fn_step fn_p2p_step(struct fn_exec *e);
/* Why an op on c must stop now (abort, revoke, async error), or ncclSuccess. */
ncclResult_t fn_exec_interrupted(struct fn_comm *c);
/* NCCL's name of an op kind ("AllReduce"). */
const char *fn_op_name(enum fn_op_kind k);

/* ---- exec.c ---- */
/*
 * The host function: runs a batch to completion on the stream worker. A
 * batch that is not captured first waits for its comms' earlier batches
 * (b->turns), as NCCL makes each launch wait for the comm's internal stream.
 */
void fn_batch_run(void *arg);

/* ---- launch.c ---- */
/*
 * Launches ops (already checked) now: one batch per (stream, context), one
 * cuLaunchHostFunc each. When any comm is nonblocking (and no stream is
 * capturing or the per-thread default stream) the launch is handed to a
 * thread and ncclInProgress is returned; an op outside a group (`group`
 * false) may instead finish within the call and return ncclSuccess
 * (fakenccl_nb.c). Copies `ops`.
 */
ncclResult_t fn_launch(const struct fn_op *ops, int nops, bool group);
/* Fork: a child forgets the parent's helper thread and queued launches. */
void fn_helper_atfork(enum fn_fork_phase phase);

/* ---- nb.c: nonblocking launches ---- */
/* Whether c's first launch has connected it to every peer (always, for a blocking comm). */
bool fn_nb_connected(struct fn_comm *c);
/*
 * The connection setup of c's first launch: marks this rank as arrived and
 * waits until every rank has (the abort of c, or a failed peer, ends the
 * wait with that error). Blocking; never on the caller's thread of a
 * nonblocking op.
 */
ncclResult_t fn_nb_connect(struct fn_comm *c);
/* Marks this rank as arrived without waiting (a launch the fake issues on the caller's thread). */
void fn_nb_arrive(struct fn_comm *c);
/* FAKENCCL_NB_SEED: whether this nonblocking op of `rank` finishes within its call. */
bool fn_nb_done_in_call(int rank);

/* ---- group.c ---- */
int fn_group_depth(void);
/* Records an op in the calling thread's open group. */
ncclResult_t fn_group_add_op(const struct fn_op *op);
/* Records a deferred creation in the calling thread's open group. */
ncclResult_t fn_group_add_create(struct fn_create_job *job);
/* Remembers the first error of a call made inside the group (ncclGroupEnd returns it). */
void fn_group_note_error(ncclResult_t err);

#endif

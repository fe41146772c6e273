/*
 * track.h: what the generated wrappers in interpose.c call around each NCCL call.
 * track.c has the ops and groups (the hot path), lifecycle.c the creation and
 * ending of communicators, their async errors and fences.
 *
 * Owns: the meaning of each call for ncclguard: which communicator it creates or
 * ends, the per-communicator sequence numbers of collectives and point-to-point
 * ops, and the thread-local group depth.
 *
 * Threads: every function runs on the application thread that made the NCCL
 * call (the hot path for ops): no malloc, no lock held for long, no syscall.
 * The *_pre function fills a ticket on the caller's stack that the matching
 * *_post function receives with the real call's result.
 */
#ifndef NCCLGUARD_TRACK_H
#define NCCLGUARD_TRACK_H

#include <nccl.h>
#include <stdint.h>

#include "track/comm.h"
#include "track/flight.h"

#define NG_OPS(X)                                                                  \
    X(ALLREDUCE, "AllReduce") X(BROADCAST, "Broadcast") X(BCAST, "Bcast")           \
    X(REDUCE, "Reduce") X(ALLGATHER, "AllGather") X(REDUCESCATTER, "ReduceScatter") \
    X(ALLTOALL, "AlltoAll") X(GATHER, "Gather") X(SCATTER, "Scatter")              \
    X(SEND, "Send") X(RECV, "Recv")

enum ng_op_type {
#define NG_OP_ENUM(e, s) NG_OP_##e,
    NG_OPS(NG_OP_ENUM)
#undef NG_OP_ENUM
    NG_OP_NTYPES
};

/* initial-exec: the library is preloaded, so its TLS is static and needs no
 * __tls_get_addr call on the hot path. */
#define NG_TLS __thread __attribute__((tls_model("initial-exec")))

/* NCCL accepted the call (ncclInProgress: a nonblocking one, still launching). */
static inline int ng_accepted(ncclResult_t r)
{
    return r == ncclSuccess || r == ncclInProgress;
}

/* The op name as NCCL spells it ("AllReduce"). */
const char *ncclguard_op_name(int type);

enum ng_end_kind { NG_END_FINALIZE, NG_END_DESTROY, NG_END_ABORT, NG_END_REVOKE };

struct ng_op_ticket {
    struct ng_comm *comm; /* NULL: not tracked */
    int fenced;           /* the communicator was aborted by ncclguard: refuse the call */
    int captured;         /* the stream was capturing */
    int group_slot;       /* index in the thread's group stream list, -1 if none */
    struct ng_op_record rec;
};

struct ng_init_ticket {
    struct ng_comm *comm;
    ncclComm_t *out;
};

struct ng_end_ticket {
    struct ng_comm *comm;
    int kind;
    int fenced;
};

/* True once the shim tracks calls; false when disabled or turned off by an error. */
extern int ncclguard_tracking;

void ncclguard_op_pre(struct ng_op_ticket *t, int type, ncclComm_t comm, cudaStream_t stream,
                      size_t count, ncclDataType_t dtype, int redop, int root);
void ncclguard_op_post(struct ng_op_ticket *t, ncclResult_t r);

void ncclguard_group_start_post(ncclResult_t r);
void ncclguard_group_end_pre(void);
void ncclguard_group_end_post(ncclResult_t r);

/* Sets up tracking at the first communicator creation (ring, markers, watchdog). */
void ncclguard_track_start(void);
void ncclguard_track_atfork_child(void);

/* Watchdog: refreshes the realtime offset that enqueue times are based on. */
void ncclguard_track_refresh_clock(void);

/* Nonblocking communicators: records the end markers waiting for communicator
 * `slot` (-1: all) to finish launching. */
void ncclguard_flush_deferred(int slot);

/* Creation: InitRank, InitRankConfig and InitRankScalable (nids unique ids). */
void ncclguard_init_pre(struct ng_init_ticket *t, ncclComm_t *out, int nranks, int rank,
                        int nids, const ncclUniqueId *ids, const ncclConfig_t *config);
void ncclguard_init_all_pre(struct ng_init_ticket *t, ncclComm_t *out, int ndev);
void ncclguard_split_pre(struct ng_init_ticket *t, ncclComm_t parent, int color,
                         ncclComm_t *out, const ncclConfig_t *config);
void ncclguard_shrink_pre(struct ng_init_ticket *t, ncclComm_t parent, const int *excluded,
                          int nexcluded, ncclComm_t *out, const ncclConfig_t *config);
void ncclguard_init_post(struct ng_init_ticket *t, ncclResult_t r);
void ncclguard_init_all_post(struct ng_init_ticket *t, int ndev, ncclResult_t r);

void ncclguard_end_pre(struct ng_end_ticket *t, ncclComm_t comm, int kind);
void ncclguard_end_post(struct ng_end_ticket *t, ncclResult_t r);

void ncclguard_async_error_post(ncclComm_t comm, const ncclResult_t *err, ncclResult_t r);

/* A handle the registry does not know: if this thread has a nonblocking
 * split/shrink child still waiting for its handle, that child is this one. */
struct ng_comm *ncclguard_comm_adopt(ncclComm_t handle);

/*
 * Communicators that ncclguard aborted ("fenced", see comm.h). NCCL freed the
 * handle, so every later call on it is answered here: collectives and queries
 * fail with ncclInvalidUsage, ncclCommGetAsyncError reports ncclRemoteError (the
 * way a framework's watchdog notices a broken communicator), ncclGetLastError
 * explains what happened, and the application's own Abort/Destroy/Finalize of
 * the handle succeed without reaching NCCL (no double free).
 */
int ncclguard_fenced(ncclComm_t comm);
ncclResult_t ncclguard_fenced_result(void);
ncclResult_t ncclguard_end_fenced(struct ng_end_ticket *t);
ncclResult_t ncclguard_async_error_fenced(ncclResult_t *err);
/* The text for ncclGetLastError(comm), or NULL to ask NCCL. */
const char *ncclguard_fenced_last_error(ncclComm_t comm);

/* Totals for the exit summary. */
uint64_t ncclguard_op_total(int type);

#endif

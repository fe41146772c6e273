/*
 * ops.h: the vocabulary of NCCL operations, in one place (a leaf header).
 *
 * NG_OPS lists every op the shim records, one X(ID, name, timeout, shape) each:
 *   ID       NG_OP_<ID>, the value in records and dumps;
 *   name     as NCCL spells it ("AllReduce"), in logs and dumps;
 *   timeout  the settings.def key of its own timeout (NCCLGUARD_<timeout>);
 *   shape    which arguments it takes: NG_OP_REDOP (a reduction), NG_OP_ROOT (a
 *            root rank), NG_OP_PEER (a peer: point-to-point).
 * Adding an op is one line here, one in intercept/nccl_api.def and one timeout
 * setting in policy/settings.def.
 *
 * Also the states of a recorded op (the dump's "state") and whether NCCL
 * accepted a call.
 *
 * Threads: any, including signal handlers (constants and pure functions).
 */
#ifndef NCCLGUARD_OPS_H
#define NCCLGUARD_OPS_H

#include <nccl.h>
#include <stdint.h>

#define NG_OP_REDOP 0x1
#define NG_OP_ROOT 0x2
#define NG_OP_PEER 0x4

#define NG_OPS(X)                                                         \
    X(ALLREDUCE, "AllReduce", TIMEOUT_ALLREDUCE, NG_OP_REDOP)             \
    X(BROADCAST, "Broadcast", TIMEOUT_BROADCAST, NG_OP_ROOT)              \
    X(BCAST, "Bcast", TIMEOUT_BROADCAST, NG_OP_ROOT)                      \
    X(REDUCE, "Reduce", TIMEOUT_REDUCE, NG_OP_REDOP | NG_OP_ROOT)         \
    X(ALLGATHER, "AllGather", TIMEOUT_ALLGATHER, 0)                       \
    X(REDUCESCATTER, "ReduceScatter", TIMEOUT_REDUCESCATTER, NG_OP_REDOP) \
    X(ALLTOALL, "AlltoAll", TIMEOUT_ALLTOALL, 0)                          \
    X(GATHER, "Gather", TIMEOUT_GATHER, NG_OP_ROOT)                       \
    X(SCATTER, "Scatter", TIMEOUT_SCATTER, NG_OP_ROOT)                    \
    X(SEND, "Send", TIMEOUT_SEND, NG_OP_PEER)                             \
    X(RECV, "Recv", TIMEOUT_RECV, NG_OP_PEER)

enum ng_op_type {
#define NG_OP_ENUM(id, name, timeout, shape) NG_OP_##id,
    NG_OPS(NG_OP_ENUM)
#undef NG_OP_ENUM
        NG_OP_NTYPES
};

/* The op name as NCCL spells it; "Unknown" for anything else. */
static inline const char *ng_op_name(int type)
{
    static const char *const names[] = {
#define NG_OP_NAME(id, name, timeout, shape) name,
        NG_OPS(NG_OP_NAME)
#undef NG_OP_NAME
    };
    return type >= 0 && type < NG_OP_NTYPES ? names[type] : "Unknown";
}

/* NG_OP_REDOP | NG_OP_ROOT | NG_OP_PEER, as the op takes them. type must be an
 * enum ng_op_type (the hot path asks, with the type its wrapper passed). */
static inline int ng_op_shape(int type)
{
    static const unsigned char shapes[] = {
#define NG_OP_SHAPE(id, name, timeout, shape) shape,
        NG_OPS(NG_OP_SHAPE)
#undef NG_OP_SHAPE
    };
    return shapes[type];
}

static inline int ng_op_is_p2p(int type)
{
    return (ng_op_shape(type) & NG_OP_PEER) != 0;
}

/* Where a recorded op is: X(ID, name), NG_OP_<ID> and the dump's name. */
#define NG_OP_STATES(X)                                                                        \
    X(SCHEDULED, "scheduled") /* enqueued; the GPU has not reached it */                       \
    X(STARTED, "started")     /* the GPU passed the start marker */                            \
    X(COMPLETED, "completed") /* the GPU passed the end marker */                              \
    X(FAILED, "failed")       /* NCCL returned an error at enqueue, or an async error */       \
    X(ABORTED, "aborted")     /* its communicator was aborted or revoked before it finished */ \
    X(CAPTURED, "captured")   /* recorded into a CUDA graph: no markers */                     \
    X(UNTRACKED, "untracked") /* no marker (TRACK=off, or none could be recorded): never followed */

enum ng_op_state {
#define NG_OP_STATE_ENUM(id, name) NG_OP_##id,
    NG_OP_STATES(NG_OP_STATE_ENUM)
#undef NG_OP_STATE_ENUM
        NG_OP_NSTATES
};

/* True for a state that never changes again. */
static inline int ng_op_state_final(int s)
{
    return s >= NG_OP_COMPLETED;
}

/* "scheduled", "started", ...: the dump's names; "unknown" for anything else. */
static inline const char *ng_op_state_name(int state)
{
    static const char *const names[] = {
#define NG_OP_STATE_NAME(id, name) name,
        NG_OP_STATES(NG_OP_STATE_NAME)
#undef NG_OP_STATE_NAME
    };
    return state >= 0 && state < NG_OP_NSTATES ? names[state] : "unknown";
}

/* How much of an op's GPU progress is followed: the choices of the `track`
 * setting (policy/settings.def), in their order. */
enum ng_track_mode { NG_TRACK_OFF = 0, NG_TRACK_END = 1, NG_TRACK_FULL = 2 };

/* NCCL accepted the call (ncclInProgress: a nonblocking one, still launching). */
/* The size class of an op: the power of two of its bytes (0 for 0 and 1), at
 * most NG_SIZE_CLASSES - 1. */
#define NG_SIZE_CLASSES 48
static inline int ng_size_class(uint64_t bytes)
{
    int c = bytes > 1 ? 63 - __builtin_clzll(bytes) : 0;
    return c < NG_SIZE_CLASSES ? c : NG_SIZE_CLASSES - 1;
}

/* The size of one element of `t` in bytes; 8 for a type this NCCL's header lacks. */
static inline uint64_t ng_dtype_size(ncclDataType_t t)
{
    /* A table, not a switch: a load instead of a chain of compares. */
    static const uint8_t size[] = {
        [ncclInt8] = 1,    [ncclUint8] = 1,    [ncclFloat8e4m3] = 1, [ncclFloat8e5m2] = 1,
        [ncclFloat16] = 2, [ncclBfloat16] = 2, [ncclInt32] = 4,      [ncclUint32] = 4,
        [ncclFloat32] = 4, [ncclInt64] = 8,    [ncclUint64] = 8,     [ncclFloat64] = 8,
    };
    return (unsigned)t < sizeof size && size[t] ? size[t] : 8;
}

static inline int ng_accepted(ncclResult_t r)
{
    return r == ncclSuccess || r == ncclInProgress;
}

#endif

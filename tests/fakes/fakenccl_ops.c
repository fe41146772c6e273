/*
 * fakenccl op API: AllReduce, Broadcast, Bcast, Reduce, AllGather,
 * ReduceScatter, AlltoAll, Gather, Scatter, Send, Recv.
 *
 * Each call is checked the way NCCL's ncclEnqueueCheck does (CommCheck,
 * EnsureReady, ArgsCheck: root, datatype, reduction; plus the buffers the
 * op will touch, which NCCL only checks in debug mode but the fake would
 * otherwise crash on), then recorded in the open group or launched.
 * FAKENCCL_NOOP=1 skips all of it: the call only logs and returns
 * ncclSuccess, which is what benchmarks of the call overhead want.
 */
#include "fakenccl_calllog.h"
#include "fakenccl_exec.h"
#include "fakenccl_profiler.h"

static bool is_rooted(enum fn_op_kind k)
{
    return k == FN_OP_BROADCAST || k == FN_OP_REDUCE || k == FN_OP_GATHER || k == FN_OP_SCATTER ||
           k == FN_OP_SEND || k == FN_OP_RECV;
}

static bool is_reducing(enum fn_op_kind k)
{
    return k == FN_OP_ALLREDUCE || k == FN_OP_REDUCE || k == FN_OP_REDUCESCATTER;
}

/* Which buffers this rank's part of the op reads (send) and writes (recv). */
static void buffers_used(const struct fn_op *op, bool *send, bool *recv)
{
    bool root = op->root == op->comm->rank;
    switch (op->kind) {
    case FN_OP_BROADCAST:
        *send = root;
        *recv = true;
        break;
    case FN_OP_SCATTER:
        *send = root;
        *recv = true;
        break;
    case FN_OP_REDUCE:
    case FN_OP_GATHER:
        *send = true;
        *recv = root;
        break;
    case FN_OP_SEND:
        *send = true;
        *recv = false;
        break;
    case FN_OP_RECV:
        *send = false;
        *recv = true;
        break;
    default: *send = *recv = true; break;
    }
}

/* A PreMulSum operator of op's comm: copies it into op, or fails as NCCL's ArgsCheck. */
static ncclResult_t resolve_redop(struct fn_op *op, const char *api)
{
    struct fn_comm *c = op->comm;
    int idx = op->redop - (int)ncclNumOps;
    bool ok = false;
    pthread_mutex_lock(&c->mu);
    if (idx >= 0 && idx < FN_MAX_REDOPS && c->redops[idx].used) {
        ok = c->redops[idx].dtype == op->dtype;
        op->premul = c->redops[idx];
    }
    pthread_mutex_unlock(&c->mu);
    if (!ok) {
        fn_warn("%s : reduction operation %d unknown to this communicator", api, op->redop);
        return ncclInvalidArgument;
    }
    op->redop = FN_REDOP_PREMULSUM;
    return ncclSuccess;
}

static ncclResult_t check_args(struct fn_op *op, const char *api)
{
    int n = op->comm->nranks;
    if (is_rooted(op->kind) && (op->root < 0 || op->root >= n)) {
        fn_warn("%s : invalid root %d (root should be in the 0..%d range)", api, op->root, n);
        return ncclInvalidArgument;
    }
    if ((unsigned)op->dtype >= ncclNumTypes) {
        fn_warn("%s : invalid type %d", api, (int)op->dtype);
        return ncclInvalidArgument;
    }
    if (is_reducing(op->kind)) {
        if (op->redop < 0) {
            fn_warn("%s : invalid reduction operation %d", api, op->redop);
            return ncclInvalidArgument;
        }
        if (op->redop >= (int)ncclNumOps && resolve_redop(op, api) != ncclSuccess)
            return ncclInvalidArgument;
    } else {
        op->redop = FN_NONE;
    }
    bool send, recv;
    buffers_used(op, &send, &recv);
    if (op->count > 0 && ((send && !op->sendbuff) || (recv && !op->recvbuff))) {
        fn_warn("%s : %s is not a valid pointer", api,
                send && !op->sendbuff ? "sendbuff" : "recvbuff");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* Checks an op and records it in the open group or launches it. */
static ncclResult_t submit(struct fn_op *op, const char *api, const char *fault_api)
{
    ncclResult_t r = fn_comm_check_op(op->comm, api);
    if (r == ncclSuccess) r = check_args(op, api);
    if (r == ncclSuccess) r = fn_fault_check_call(fault_api, op->comm->rank);
    if (r != ncclSuccess) {
        fn_group_note_error(r);
        return r;
    }
    op->prof_api = fn_prof_api_start(op);
    r = fn_group_depth() > 0 ? fn_group_add_op(op) : fn_launch(op, 1, false);
    fn_prof_api_stop(op->prof_api); /* the API event ends with the call (enqueue.cc) */
    return r;
}

static ncclResult_t run(enum fn_op_kind kind, const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t dtype, int redop, int root, ncclComm_t comm,
                        cudaStream_t stream, const char *api, const char *fault_api)
{
    if (fn_cfg()->noop) return ncclSuccess;
    struct fn_op op = {.kind = kind,
                       .sendbuff = sendbuff,
                       .recvbuff = recvbuff,
                       .count = count,
                       .dtype = dtype,
                       .redop = redop,
                       .root = root,
                       .comm = (struct fn_comm *)comm,
                       .stream = (CUstream)stream};
    struct fn_comm *owner = fn_comm_enter(comm, api);
    ncclResult_t r = submit(&op, api, fault_api);
    fn_comm_leave(owner);
    return r;
}

/* Logs the arguments every op has after its buffers and count. */
static void log_tail(struct fn_logline *l, ncclComm_t comm, cudaStream_t stream, ncclResult_t r)
{
    fn_log_ptr(l, "comm", FN_LOG_COMM, comm);
    fn_log_ptr(l, "stream", FN_LOG_STREAM, stream);
    fn_log_end(l, r);
}

FN_EXPORT ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_ALLREDUCE, sendbuff, recvbuff, count, datatype, (int)op, FN_NONE,
                         comm, stream, "AllReduce", "AllReduce");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclAllReduce")) {
        fn_log_ptr(&l, "sendbuff", FN_LOG_BUF, sendbuff);
        fn_log_ptr(&l, "recvbuff", FN_LOG_BUF, recvbuff);
        fn_log_fmt(&l, " count=%zu datatype=%d op=%d", count, (int)datatype, (int)op);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclAllReduce);

FN_EXPORT ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm,
                                      cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_BROADCAST, sendbuff, recvbuff, count, datatype, FN_NONE, root, comm,
                         stream, "Broadcast", "Broadcast");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclBroadcast")) {
        fn_log_ptr(&l, "sendbuff", FN_LOG_BUF, sendbuff);
        fn_log_ptr(&l, "recvbuff", FN_LOG_BUF, recvbuff);
        fn_log_fmt(&l, " count=%zu datatype=%d root=%d", count, (int)datatype, root);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclBroadcast);

FN_EXPORT ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_BROADCAST, buff, buff, count, datatype, FN_NONE, root, comm, stream,
                         "Broadcast", "Bcast");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclBcast")) {
        fn_log_ptr(&l, "buff", FN_LOG_BUF, buff);
        fn_log_fmt(&l, " count=%zu datatype=%d root=%d", count, (int)datatype, root);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclBcast);

FN_EXPORT ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclRedOp_t op, int root,
                                   ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_REDUCE, sendbuff, recvbuff, count, datatype, (int)op, root, comm,
                         stream, "Reduce", "Reduce");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclReduce")) {
        fn_log_ptr(&l, "sendbuff", FN_LOG_BUF, sendbuff);
        fn_log_ptr(&l, "recvbuff", FN_LOG_BUF, recvbuff);
        fn_log_fmt(&l, " count=%zu datatype=%d op=%d root=%d", count, (int)datatype, (int)op, root);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclReduce);

FN_EXPORT ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, FN_NONE, FN_NONE,
                         comm, stream, "AllGather", "AllGather");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclAllGather")) {
        fn_log_ptr(&l, "sendbuff", FN_LOG_BUF, sendbuff);
        fn_log_ptr(&l, "recvbuff", FN_LOG_BUF, recvbuff);
        fn_log_fmt(&l, " sendcount=%zu datatype=%d", sendcount, (int)datatype);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclAllGather);

FN_EXPORT ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, (int)op,
                         FN_NONE, comm, stream, "ReduceScatter", "ReduceScatter");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclReduceScatter")) {
        fn_log_ptr(&l, "sendbuff", FN_LOG_BUF, sendbuff);
        fn_log_ptr(&l, "recvbuff", FN_LOG_BUF, recvbuff);
        fn_log_fmt(&l, " recvcount=%zu datatype=%d op=%d", recvcount, (int)datatype, (int)op);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclReduceScatter);

/* AlltoAll, Gather and Scatter share one shape: buffers, count, type (and a root). */
#define FN_COUNT_OP(Name, KIND, has_root)                                                    \
    FN_EXPORT ncclResult_t pnccl##Name(const void *sendbuff, void *recvbuff, size_t count,   \
                                       ncclDataType_t datatype, int root, ncclComm_t comm,   \
                                       cudaStream_t stream)                                  \
    {                                                                                        \
        ncclResult_t r = run(KIND, sendbuff, recvbuff, count, datatype, FN_NONE, root, comm, \
                             stream, #Name, #Name);                                          \
        struct fn_logline l;                                                                 \
        if (fn_log_begin(&l, "nccl" #Name)) {                                                \
            fn_log_ptr(&l, "sendbuff", FN_LOG_BUF, sendbuff);                                \
            fn_log_ptr(&l, "recvbuff", FN_LOG_BUF, recvbuff);                                \
            fn_log_fmt(&l, " count=%zu datatype=%d", count, (int)datatype);                  \
            if (has_root) fn_log_fmt(&l, " root=%d", root);                                  \
            log_tail(&l, comm, stream, r);                                                   \
        }                                                                                    \
        return r;                                                                            \
    }                                                                                        \
    FN_WEAK_ALIAS(nccl##Name)

FN_COUNT_OP(Gather, FN_OP_GATHER, true);
FN_COUNT_OP(Scatter, FN_OP_SCATTER, true);

FN_EXPORT ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_ALLTOALL, sendbuff, recvbuff, count, datatype, FN_NONE, FN_NONE,
                         comm, stream, "AlltoAll", "AlltoAll");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclAlltoAll")) {
        fn_log_ptr(&l, "sendbuff", FN_LOG_BUF, sendbuff);
        fn_log_ptr(&l, "recvbuff", FN_LOG_BUF, recvbuff);
        fn_log_fmt(&l, " count=%zu datatype=%d", count, (int)datatype);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclAlltoAll);

FN_EXPORT ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                                 int peer, ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_SEND, sendbuff, NULL, count, datatype, FN_NONE, peer, comm, stream,
                         "Send", "Send");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclSend")) {
        fn_log_ptr(&l, "sendbuff", FN_LOG_BUF, sendbuff);
        fn_log_fmt(&l, " count=%zu datatype=%d peer=%d", count, (int)datatype, peer);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclSend);

FN_EXPORT ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t r = run(FN_OP_RECV, NULL, recvbuff, count, datatype, FN_NONE, peer, comm, stream,
                         "Recv", "Recv");
    struct fn_logline l;
    if (fn_log_begin(&l, "ncclRecv")) {
        fn_log_ptr(&l, "recvbuff", FN_LOG_BUF, recvbuff);
        fn_log_fmt(&l, " count=%zu datatype=%d peer=%d", count, (int)datatype, peer);
        log_tail(&l, comm, stream, r);
    }
    return r;
}
FN_WEAK_ALIAS(ncclRecv);

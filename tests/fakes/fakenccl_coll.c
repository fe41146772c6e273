/*
 * fakenccl collectives: the staging protocol that moves real data between
 * the ranks of a communicator, on the stream workers.
 *
 * Each collective publishes a "linear send buffer" of L bytes per rank (its
 * sendbuff, or nothing for the non-root ranks of Broadcast and Scatter) in
 * rounds of coll_bytes. Round k is global step t = e->step + k:
 *   phase 0  wait until every rank finished reading step t-1 (slot free),
 *            stage my chunk and my descriptor, publish posted = t;
 *   phase 1  wait until every rank posted t; at round 0 compare every
 *            rank's descriptor (a mismatch prints one line and hangs, as
 *            NCCL would); compute my outputs from all staged chunks;
 *            publish done = t.
 * Steps are numbered per communicator at execution time, so two ranks agree
 * on them exactly when they executed the same collectives before. Nothing
 * here blocks: a step returns FN_STEP_BLOCKED and the caller sleeps on the
 * doorbell.
 */
#include "fakenccl_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fn_op_name(enum fn_op_kind k)
{
    static const char *const names[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                        "ReduceScatter", "AlltoAll",  "Gather", "Scatter",
                                        "Send",          "Recv"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* Bytes of the linear send buffer that every rank stages (the same on all ranks). */
static size_t linear_bytes(const struct fn_op *op)
{
    size_t b = op->count * fn_type_size(op->dtype);
    switch (op->kind) {
    case FN_OP_REDUCESCATTER:
    case FN_OP_ALLTOALL:
    case FN_OP_SCATTER: return b * (size_t)op->comm->nranks;
    default: return b;
    }
}

uint64_t fn_coll_rounds(const struct fn_op *op)
{
    size_t len = linear_bytes(op), chunk = op->comm->seg.hdr->coll_bytes;
    return len == 0 ? 1 : (len + chunk - 1) / chunk;
}

ncclResult_t fn_exec_interrupted(struct fn_comm *c)
{
    int st = atomic_load(&c->state);
    if ((st != FN_READY && st != FN_FINALIZING) || atomic_load(&c->quiesce))
        return ncclInvalidUsage;
    if (fn_seg_peer_failed(&c->seg, c->rank, true) >= 0) {
        fn_comm_set_async(c, ncclRemoteError);
        return ncclRemoteError;
    }
    ncclResult_t a = (ncclResult_t)atomic_load(&c->async_err);
    return a;
}

static void describe(const struct fn_op *op, uint64_t seq, struct fn_coll_desc *d)
{
    memset(d, 0, sizeof *d);
    d->seq = seq;
    d->count = op->count;
    d->kind = (int32_t)op->kind;
    d->dtype = (int32_t)op->dtype;
    d->redop = op->redop;
    d->root = op->root;
}

static int desc_text(const struct fn_coll_desc *d, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s #%llu count=%llu datatype=%s op=%d root=%d",
                    fn_op_name((enum fn_op_kind)d->kind), (unsigned long long)d->seq,
                    (unsigned long long)d->count, fn_type_name((ncclDataType_t)d->dtype), d->redop,
                    d->root);
}

/* Compares every rank's round-0 descriptor with mine; on a mismatch prints one line (once). */
static bool descs_match(struct fn_exec *e)
{
    struct fn_comm *c = e->op->comm;
    const struct fn_coll_desc *mine = &fn_seg_coll(&c->seg, c->rank)->desc;
    for (int r = 0; r < c->nranks; r++) {
        const struct fn_coll_desc *d = &fn_seg_coll(&c->seg, r)->desc;
        if (!memcmp(d, mine, sizeof *d)) continue;
        if (!e->reported) {
            char a[160], b[160];
            desc_text(mine, a, sizeof a);
            desc_text(d, b, sizeof b);
            fn_loud("rank %d: %s #%llu mismatch: this rank runs %s but rank %d runs %s; "
                    "the operation hangs on every rank, as NCCL would",
                    c->rank, fn_op_name(e->op->kind), (unsigned long long)e->seq, a, r, b);
            e->reported = true;
        }
        return false;
    }
    return true;
}

static const void *premul_scalar(const struct fn_op *op)
{
    return op->premul.residence == ncclScalarDevice ? op->premul.ptr : op->premul.value;
}

/* Phase 0: stages my chunk [a, b) of the linear send buffer and my descriptor. */
static void stage(struct fn_exec *e, size_t a, size_t b)
{
    const struct fn_op *op = e->op;
    struct fn_comm *c = op->comm;
    struct fn_coll_slot *slot = fn_seg_coll(&c->seg, c->rank);
    describe(op, e->seq, &slot->desc);
    bool rooted_src = op->kind == FN_OP_BROADCAST || op->kind == FN_OP_SCATTER;
    if (b == a || (rooted_src && c->rank != op->root)) return;
    const char *src = e->snapshot ? e->snapshot : op->sendbuff;
    char *dst = fn_seg_coll_data(&c->seg, c->rank);
    if (op->redop == FN_REDOP_PREMULSUM)
        fn_scale(dst, src + a, (b - a) / fn_type_size(op->dtype), op->dtype, premul_scalar(op));
    else
        memcpy(dst, src + a, b - a);
}

/* out[0, len) = reduction over every rank's staged bytes [off, off + len). */
static void reduce_slots(const struct fn_exec *e, char *out, size_t off, size_t len)
{
    const struct fn_op *op = e->op;
    struct fn_comm *c = op->comm;
    size_t es = fn_type_size(op->dtype);
    ncclRedOp_t rop = op->redop == FN_REDOP_PREMULSUM ? ncclSum : (ncclRedOp_t)op->redop;
    memmove(out, fn_seg_coll_data(&c->seg, 0) + off, len);
    for (int r = 1; r < c->nranks; r++)
        fn_reduce(out, fn_seg_coll_data(&c->seg, r) + off, len / es, op->dtype, rop);
    if (op->redop == ncclAvg) fn_divide(out, len / es, op->dtype, c->nranks);
}

/* Copies [lo, hi) ∩ [a, b) of rank r's staged chunk to dst + (x - lo) for each x. */
static void copy_part(const struct fn_exec *e, int r, size_t a, size_t b, size_t lo, size_t hi,
                      char *dst)
{
    size_t x0 = a > lo ? a : lo, x1 = b < hi ? b : hi;
    if (x0 < x1)
        memmove(dst + (x0 - lo), fn_seg_coll_data(&e->op->comm->seg, r) + (x0 - a), x1 - x0);
}

/* Phase 1: computes my outputs for the chunk [a, b) from every rank's staged data. */
static void consume(struct fn_exec *e, size_t a, size_t b)
{
    const struct fn_op *op = e->op;
    struct fn_comm *c = op->comm;
    int me = c->rank, n = c->nranks;
    char *recv = op->recvbuff;
    size_t blk = op->count * fn_type_size(op->dtype); /* one rank's block of the output */
    if (a == b) return; /* an empty op: nothing to write, and its buffers may be NULL */
    switch (op->kind) {
    case FN_OP_ALLREDUCE: reduce_slots(e, recv + a, 0, b - a); break;
    case FN_OP_REDUCE:
        if (me == op->root) reduce_slots(e, recv + a, 0, b - a);
        break;
    case FN_OP_BROADCAST: copy_part(e, op->root, a, b, 0, blk, recv); break;
    case FN_OP_ALLGATHER:
        for (int r = 0; r < n; r++) copy_part(e, r, a, b, 0, blk, recv + (size_t)r * blk);
        break;
    case FN_OP_GATHER:
        if (me == op->root)
            for (int r = 0; r < n; r++) copy_part(e, r, a, b, 0, blk, recv + (size_t)r * blk);
        break;
    case FN_OP_REDUCESCATTER: {
        size_t lo = (size_t)me * blk, hi = lo + blk;
        size_t x0 = a > lo ? a : lo, x1 = b < hi ? b : hi;
        if (x0 < x1) reduce_slots(e, recv + (x0 - lo), x0 - a, x1 - x0);
        break;
    }
    case FN_OP_ALLTOALL:
        for (int r = 0; r < n; r++)
            copy_part(e, r, a, b, (size_t)me * blk, (size_t)(me + 1) * blk, recv + (size_t)r * blk);
        break;
    case FN_OP_SCATTER:
        copy_part(e, op->root, a, b, (size_t)me * blk, (size_t)(me + 1) * blk, recv);
        break;
    default: break;
    }
}

/* An in-place AlltoAll overwrites parts of its send buffer that later rounds stage: copy it. */
static void snapshot_if_needed(struct fn_exec *e)
{
    const struct fn_op *op = e->op;
    size_t len = linear_bytes(op);
    const char *s = op->sendbuff, *r = op->recvbuff;
    if (op->kind != FN_OP_ALLTOALL || len == 0 || s >= r + len || r >= s + len) return;
    e->snapshot = malloc(len);
    if (e->snapshot) memcpy(e->snapshot, s, len);
}

enum fn_step fn_coll_step(struct fn_exec *e)
{
    const struct fn_op *op = e->op;
    struct fn_comm *c = op->comm;
    struct fn_seg *seg = &c->seg;
    if (fn_exec_interrupted(c) != ncclSuccess) return FN_STEP_FAILED;
    size_t chunk = seg->hdr->coll_bytes, len = linear_bytes(op);
    size_t a = e->round * chunk, b = a + chunk < len ? a + chunk : len;
    uint64_t t = e->step + e->round;
    if (e->phase == 0) {
        for (int r = 0; r < c->nranks; r++)
            if (atomic_load_explicit(&fn_seg_coll(seg, r)->done, memory_order_acquire) < t - 1)
                return FN_STEP_BLOCKED;
        if (e->round == 0) snapshot_if_needed(e);
        stage(e, a, b);
        atomic_store_explicit(&fn_seg_coll(seg, c->rank)->posted, t, memory_order_release);
        fn_seg_ring(seg);
        e->phase = 1;
        return FN_STEP_MOVED;
    }
    for (int r = 0; r < c->nranks; r++)
        if (atomic_load_explicit(&fn_seg_coll(seg, r)->posted, memory_order_acquire) < t)
            return FN_STEP_BLOCKED;
    if (!descs_match(e)) return FN_STEP_BLOCKED; /* a mismatch: hang until abort/revoke */
    consume(e, a, b);
    atomic_store_explicit(&fn_seg_coll(seg, c->rank)->done, t, memory_order_release);
    fn_seg_ring(seg);
    e->phase = 0;
    if (++e->round < e->rounds) return FN_STEP_MOVED;
    free(e->snapshot);
    e->snapshot = NULL;
    return FN_STEP_DONE;
}

/*
 * fakenccl point-to-point: Send/Recv through one ring per ordered
 * (sender, receiver) pair of a communicator, on the stream workers.
 *
 * Messages on one pair are numbered 1, 2, ... at execution time on each
 * side (the p2p seq), so they match in order per (communicator, peer), as in
 * NCCL. A send is a rendezvous: it announces its message (count, datatype)
 * once the previous one was acknowledged, streams the bytes through the
 * ring as space allows, and completes when the receiver acknowledges the
 * whole message. The receiver checks the announcement against its own
 * count and datatype; a mismatch prints one line on both sides and hangs,
 * as NCCL would. Like every step function, this one never blocks.
 */
#include "fakenccl_exec.h"

#include <string.h>

static void mismatch_line(struct fn_exec *e, const struct fn_p2p_chan *ch)
{
    const struct fn_op *op = e->op;
    if (e->reported) return;
    e->reported = true;
    if (op->kind == FN_OP_RECV)
        fn_loud("rank %d: Recv #%llu mismatch: this rank receives count=%zu datatype=%s from "
                "rank %d, which sends count=%llu datatype=%s; the operation hangs on both "
                "ranks, as NCCL would",
                op->comm->rank, (unsigned long long)e->seq - 1, op->count, fn_type_name(op->dtype),
                op->root, (unsigned long long)ch->count, fn_type_name((ncclDataType_t)ch->dtype));
    else
        fn_loud("rank %d: Send #%llu mismatch: rank %d expects another count or datatype than "
                "count=%zu datatype=%s; the operation hangs on both ranks, as NCCL would",
                op->comm->rank, (unsigned long long)e->seq - 1, op->root, op->count,
                fn_type_name(op->dtype));
}

/* Moves bytes between a user buffer and a ring at cumulative position pos (wrapping). */
static void ring_copy(char *ring, uint64_t cap, uint64_t pos, char *user, size_t len, bool to_ring)
{
    size_t off = (size_t)(pos % cap), first = len < cap - off ? len : (size_t)(cap - off);
    if (to_ring) {
        memcpy(ring + off, user, first);
        memcpy(ring, user + first, len - first);
    } else {
        memcpy(user, ring + off, first);
        memcpy(user + first, ring, len - first);
    }
}

static enum fn_step send_step(struct fn_exec *e)
{
    const struct fn_op *op = e->op;
    struct fn_comm *c = op->comm;
    struct fn_p2p_chan *ch = fn_seg_chan(&c->seg, c->rank, op->root);
    char *ring = fn_seg_chan_ring(&c->seg, c->rank, op->root);
    uint64_t cap = c->seg.hdr->ring_bytes;
    size_t bytes = op->count * fn_type_size(op->dtype);
    if (atomic_load(&ch->mismatch) == e->seq) {
        mismatch_line(e, ch);
        return FN_STEP_BLOCKED;
    }
    if (e->phase == 0) { /* announce once the previous message was fully received */
        if (atomic_load_explicit(&ch->acked, memory_order_acquire) < e->seq - 1)
            return FN_STEP_BLOCKED;
        ch->count = op->count;
        ch->dtype = (int32_t)op->dtype;
        atomic_store_explicit(&ch->hdr_seq, e->seq, memory_order_release);
        fn_seg_ring(&c->seg);
        e->phase = 1;
        return FN_STEP_MOVED;
    }
    if (e->phase == 1) {
        uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
        uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_acquire);
        size_t space = (size_t)(cap - (head - tail)), left = bytes - e->pos;
        size_t k = left < space ? left : space;
        if (k > 0) {
            ring_copy(ring, cap, head, (char *)op->sendbuff + e->pos, k, true);
            atomic_store_explicit(&ch->head, head + k, memory_order_release);
            e->pos += k;
            fn_seg_ring(&c->seg);
        }
        if (e->pos == bytes) e->phase = 2;
        return k > 0 || e->phase == 2 ? FN_STEP_MOVED : FN_STEP_BLOCKED;
    }
    return atomic_load_explicit(&ch->acked, memory_order_acquire) >= e->seq ? FN_STEP_DONE
                                                                            : FN_STEP_BLOCKED;
}

static enum fn_step recv_step(struct fn_exec *e)
{
    const struct fn_op *op = e->op;
    struct fn_comm *c = op->comm;
    struct fn_p2p_chan *ch = fn_seg_chan(&c->seg, op->root, c->rank);
    char *ring = fn_seg_chan_ring(&c->seg, op->root, c->rank);
    uint64_t cap = c->seg.hdr->ring_bytes;
    size_t bytes = op->count * fn_type_size(op->dtype);
    if (e->phase == 0) {
        if (atomic_load_explicit(&ch->hdr_seq, memory_order_acquire) < e->seq)
            return FN_STEP_BLOCKED;
        if (ch->count != op->count || ch->dtype != (int32_t)op->dtype) {
            atomic_store(&ch->mismatch, e->seq);
            fn_seg_ring(&c->seg);
            mismatch_line(e, ch);
            e->phase = 3;
            return FN_STEP_BLOCKED;
        }
        e->phase = 1;
    }
    if (e->phase == 3) return FN_STEP_BLOCKED; /* mismatched: hang until abort/revoke */
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ch->head, memory_order_acquire);
    size_t avail = (size_t)(head - tail), left = bytes - e->pos;
    size_t k = left < avail ? left : avail;
    if (k > 0) {
        ring_copy(ring, cap, tail, (char *)op->recvbuff + e->pos, k, false);
        atomic_store_explicit(&ch->tail, tail + k, memory_order_release);
        e->pos += k;
        fn_seg_ring(&c->seg);
    }
    if (e->pos < bytes) return k > 0 ? FN_STEP_MOVED : FN_STEP_BLOCKED;
    atomic_store_explicit(&ch->acked, e->seq, memory_order_release);
    fn_seg_ring(&c->seg);
    return FN_STEP_DONE;
}

enum fn_step fn_p2p_step(struct fn_exec *e)
{
    if (fn_exec_interrupted(e->op->comm) != ncclSuccess) return FN_STEP_FAILED;
    return e->op->kind == FN_OP_SEND ? send_step(e) : recv_step(e);
}

/*
 * The ops of one training step and their buffers. The table below is the
 * whole workload: gradient buckets of several sizes and types (some inside
 * one group), collectives on the split communicator, the pipeline send/recv
 * ring, and a periodic broadcast. Issuing follows table order on every rank,
 * which is what makes per-communicator sequence numbers match across ranks.
 */
#include <stdlib.h>
#include <string.h>

#include "trainloop.h"

/* Op 0 is the gradient bucket that --skip/--mismatch/--corrupt act on. */
#define TL_FAULT_OP 0

static const struct tl_op op_table[] = {
    /* name        kind              dtype        redop    count  grp half every */
    {"AllReduce", TL_ALLREDUCE, ncclFloat32, ncclSum, 4096, 0, 0, 1},
    {"AllReduce", TL_ALLREDUCE, ncclFloat32, ncclSum, 262144, 0, 0, 1}, /* 1 MiB */
    {"AllReduce", TL_ALLREDUCE, ncclInt32, ncclSum, 1000, 1, 0, 1},
    {"AllReduce", TL_ALLREDUCE, ncclFloat64, ncclSum, 513, 1, 0, 1},
    {"AllReduce", TL_ALLREDUCE, ncclFloat32, ncclAvg, 2048, 1, 0, 1},
    {"AllReduce", TL_ALLREDUCE, ncclInt32, ncclMax, 77, 1, 0, 1},
    {"AllReduce", TL_ALLREDUCE, ncclInt32, ncclAvg, 333, 0, 0, 1},
    {"AllGather", TL_ALLGATHER, ncclFloat32, ncclSum, 256, 0, 1, 1},
    {"ReduceScatter", TL_REDUCESCATTER, ncclInt32, ncclSum, 128, 0, 1, 1},
    {"Send/Recv", TL_SENDRECV, ncclFloat64, ncclSum, 1000, 0, 0, 1},
    {"Broadcast", TL_BROADCAST, ncclFloat64, ncclSum, 4096, 0, 0, 3},
    /* Captured once into a CUDA graph and launched every step (--graph only); keep it last. */
    {"AllReduce(graph)", TL_ALLREDUCE, ncclFloat32, ncclSum, 1024, 0, 0, 1},
};
#define TL_TABLE_OPS ((int)(sizeof(op_table) / sizeof(op_table[0])))

_Static_assert(TL_TABLE_OPS <= TL_MAX_OPS, "raise TL_MAX_OPS");

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) tl_die(TL_EXIT_SETUP, ": out of memory (%zu bytes)", n);
    return p;
}

/* Allocates device and host buffers for every op, sized for this worker's communicators. */
void tl_ops_setup(struct tl_worker *w)
{
    w->ops = op_table;
    w->nops = w->p->opt.graph ? TL_TABLE_OPS : TL_TABLE_OPS - 1;
    w->graph_op = w->p->opt.graph ? TL_TABLE_OPS - 1 : -1;
    for (int k = 0; k < w->nops; k++) {
        const struct tl_op *op = &op_table[k];
        struct tl_buf *b = &w->buf[k];
        size_t m = (size_t)(op->on_half ? w->half_size : w->p->nranks);
        size_t es = tl_dtype_size(op->dtype);
        b->nsend = op->kind == TL_REDUCESCATTER ? op->count * m : op->count;
        b->nrecv = op->kind == TL_ALLGATHER ? op->count * m : op->count;
        TL_CU(cuMemAlloc, (&b->dsend, b->nsend * es));
        TL_CU(cuMemAlloc, (&b->drecv, b->nrecv * es));
        b->hsend = xmalloc(b->nsend * es);
        b->hrecv = xmalloc(b->nrecv * es);
    }
}

void tl_buf_free(struct tl_buf *b)
{
    TL_CU(cuMemFree, (b->dsend));
    TL_CU(cuMemFree, (b->drecv));
    free(b->hsend);
    free(b->hrecv);
    memset(b, 0, sizeof(*b));
}

void tl_ops_free(struct tl_worker *w)
{
    for (int k = 0; k < w->nops; k++) tl_buf_free(&w->buf[k]);
}

/* The pipeline stage: send to rank+1 and receive from rank-1 around the ring, in one group. */
static void send_recv_ring(struct tl_worker *w, const struct tl_op *op, struct tl_buf *b)
{
    int n = w->p->nranks, r = w->p->rank;
    tl_group_start(w);
    TL_NCCL(w, w->world, ncclSend,
            ((void *)b->dsend, op->count, op->dtype, (r + 1) % n, w->world, w->comm_stream));
    TL_NCCL(w, w->world, ncclRecv,
            ((void *)b->drecv, op->count, op->dtype, (r + n - 1) % n, w->world, w->comm_stream));
    tl_group_end(w, w->world, NULL);
    w->nccl_ops += 2;
}

static void issue_op(struct tl_worker *w, int k, int step)
{
    const struct tl_op *op = &w->ops[k];
    struct tl_buf *b = &w->buf[k];
    ncclComm_t comm = op->on_half ? w->half : w->world;
    CUstream st = op->on_half && w->tp_stream ? w->tp_stream : w->comm_stream;
    void *s = (void *)b->dsend, *r = (void *)b->drecv;
    size_t count = op->count;
    switch (op->kind) {
    case TL_ALLREDUCE:
        if (k == TL_FAULT_OP && tl_fault_now(w->p, &w->p->opt.mismatch, step)) {
            count = op->count - 1;
            tl_note(" step %d: AllReduce #%d with count %zu instead of %zu (--mismatch-rank)", step,
                    k, count, op->count);
        }
        TL_NCCL(w, comm, ncclAllReduce, (s, r, count, op->dtype, op->redop, comm, st));
        break;
    case TL_ALLGATHER: TL_NCCL(w, comm, ncclAllGather, (s, r, count, op->dtype, comm, st)); break;
    case TL_REDUCESCATTER:
        TL_NCCL(w, comm, ncclReduceScatter, (s, r, count, op->dtype, op->redop, comm, st));
        break;
    case TL_BROADCAST:
        TL_NCCL(w, comm, ncclBroadcast, (s, r, count, op->dtype, 0, comm, st));
        break;
    case TL_SENDRECV: send_recv_ring(w, op, b); return;
    }
    w->nccl_ops++;
}

/* Decides which ops run in STEP: periodic ones on their steps, minus a --skip-rank fault. */
static void plan_step(struct tl_worker *w, int step)
{
    for (int k = 0; k < w->nops; k++) w->issued[k] = step % w->ops[k].every == 0;
    if (tl_fault_now(w->p, &w->p->opt.skip, step)) {
        w->issued[TL_FAULT_OP] = 0;
        tl_note(" step %d: skipping AllReduce #%d (--skip-rank)", step, TL_FAULT_OP);
    }
}

/*
 * Enqueues one whole step, as a data-parallel framework would: inputs copied
 * in and the "backward pass" on the compute stream; the communication stream
 * waits for it, then runs every op; results are copied back. Nothing here
 * waits for the device; the caller does, then checks the results.
 */
void tl_step_issue(struct tl_worker *w, int step)
{
    plan_step(w, step);
    tl_fill_inputs(w, step);
    for (int k = 0; k < w->nops; k++) {
        struct tl_buf *b = &w->buf[k];
        if (w->issued[k])
            TL_CU(cuMemcpyHtoDAsync,
                  (b->dsend, b->hsend, b->nsend * tl_dtype_size(w->ops[k].dtype), w->compute));
    }
    tl_enqueue_compute(w, w->p->opt.compute_ms);
    if (tl_fault_now(w->p, &w->p->opt.stall_gpu, step)) tl_enqueue_gpu_stall(w, step);
    if (w->p->opt.late_gpu_rank == w->p->rank) tl_enqueue_gpu_late(w);

    /* Consecutive grouped ops form one group; it ends on the communicators they used. */
    int in_group = 0, stalled = 0, split_stalled = 0;
    ncclComm_t used[2] = {NULL, NULL}; /* world, half */
    for (int k = 0; k < w->nops; k++) {
        if (!w->issued[k]) continue;
        if (in_group && !w->ops[k].grouped) {
            tl_group_end(w, used[0], used[1]);
            in_group = 0;
        }
        if (k == w->graph_op) {
            tl_graph_launch(w);
            continue;
        }
        if (w->ops[k].on_half && !stalled && tl_fault_now(w->p, &w->p->opt.hang_split, step)) {
            stalled = 1;
            tl_note(": host stall in step %d before the split communicator's first op "
                    "(--hang-split-rank, in trainloop_host_stall)",
                    step);
            trainloop_host_stall();
        }
        if (w->ops[k].on_half && !split_stalled &&
            tl_fault_now(w->p, &w->p->opt.stall_split, step)) {
            split_stalled = 1;
            tl_enqueue_split_stall(w, step);
        }
        if (w->ops[k].grouped) {
            if (!in_group) {
                tl_group_start(w);
                in_group = 1;
                used[0] = used[1] = NULL;
            }
            used[w->ops[k].on_half] = w->ops[k].on_half ? w->half : w->world;
        }
        issue_op(w, k, step);
    }
    if (in_group) tl_group_end(w, used[0], used[1]);

    for (int k = 0; k < w->nops; k++) {
        struct tl_buf *b = &w->buf[k];
        if (w->issued[k])
            TL_CU(cuMemcpyDtoHAsync,
                  (b->hrecv, b->drecv, b->nrecv * tl_dtype_size(w->ops[k].dtype),
                   w->ops[k].on_half && w->tp_stream ? w->tp_stream : w->comm_stream));
    }
}

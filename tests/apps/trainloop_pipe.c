/*
 * --pipeline: a pipeline-parallel step instead of the op table. The two halves of
 * the split are the stages (ranks below nranks/2, and the rest); a rank's partner is
 * the rank at its place in the other stage. Each step, as a framework orders its
 * streams with events:
 *   world stream: the hand-off group (Send to the partner, Recv from it);
 *   tp stream:    after the hand-off (event handoff_done), a ReduceScatter on the
 *                 rank's half;
 *   world stream: after the ReduceScatter (event rs_done), an AllReduce on the world.
 * The shim sees the ops, not the event waits between the streams.
 * --drop-send-rank R: rank R leaves the Send out of its hand-off group in step S, so
 * that its partner's Recv never ends, and both of its partner's streams wait behind it.
 */
#include <stdlib.h>
#include <string.h>

#include "trainloop.h"

#define PIPE_COUNT 256 /* floats per hand-off and per rank's block of each collective */

enum { PIPE_HANDOFF, PIPE_RS, PIPE_AR };

static int partner(const struct tl_worker *w)
{
    int half = w->p->nranks / 2;
    return w->p->rank < half ? w->p->rank + half : w->p->rank - half;
}

/* What rank C sends or contributes in STEP: small integers, exact in float32 sums. */
static float contribution(int c, int step)
{
    return (float)(1 + c + (step % 7) * 10);
}

void tl_pipeline_setup(struct tl_worker *w)
{
    size_t n[3][2] = {{PIPE_COUNT, PIPE_COUNT},
                      {PIPE_COUNT * (size_t)w->half_size, PIPE_COUNT},
                      {PIPE_COUNT, PIPE_COUNT}};
    for (int k = 0; k < 3; k++) {
        struct tl_buf *b = &w->pipe[k];
        b->nsend = n[k][0];
        b->nrecv = n[k][1];
        TL_CU(cuMemAlloc, (&b->dsend, b->nsend * sizeof(float)));
        TL_CU(cuMemAlloc, (&b->drecv, b->nrecv * sizeof(float)));
        b->hsend = calloc(b->nsend, sizeof(float));
        b->hrecv = calloc(b->nrecv, sizeof(float));
        if (!b->hsend || !b->hrecv) tl_die(TL_EXIT_SETUP, ": out of memory");
    }
    TL_CU(cuEventCreate, (&w->handoff_done, CU_EVENT_DISABLE_TIMING));
    TL_CU(cuEventCreate, (&w->rs_done, CU_EVENT_DISABLE_TIMING));
}

void tl_pipeline_free(struct tl_worker *w)
{
    for (int k = 0; k < 3; k++) tl_buf_free(&w->pipe[k]);
    TL_CU(cuEventDestroy, (w->handoff_done));
    TL_CU(cuEventDestroy, (w->rs_done));
}

/* Enqueues one step on both streams; the caller waits for both and checks. */
void tl_pipeline_step(struct tl_worker *w, int step)
{
    float mine = contribution(w->p->rank, step);
    for (int k = 0; k < 3; k++) {
        struct tl_buf *b = &w->pipe[k];
        for (size_t i = 0; i < b->nsend; i++) ((float *)b->hsend)[i] = mine;
        memset(b->hrecv, 0, b->nrecv * sizeof(float));
        TL_CU(cuMemcpyHtoDAsync, (b->dsend, b->hsend, b->nsend * sizeof(float), w->compute));
    }
    tl_enqueue_compute(w, w->p->opt.compute_ms);

    struct tl_buf *h = &w->pipe[PIPE_HANDOFF], *rs = &w->pipe[PIPE_RS], *ar = &w->pipe[PIPE_AR];
    int q = partner(w), drop = tl_fault_now(w->p, &w->p->opt.drop_send, step);
    if (drop) tl_note(" step %d: hand-off to rank %d without its Send (--drop-send-rank)", step, q);
    tl_group_start(w);
    if (!drop) {
        TL_NCCL(w, w->world, ncclSend,
                ((void *)h->dsend, PIPE_COUNT, ncclFloat32, q, w->world, w->comm_stream));
        w->nccl_ops++;
    }
    TL_NCCL(w, w->world, ncclRecv,
            ((void *)h->drecv, PIPE_COUNT, ncclFloat32, q, w->world, w->comm_stream));
    tl_group_end(w, w->world, NULL);
    TL_CU(cuEventRecord, (w->handoff_done, w->comm_stream));

    TL_CU(cuStreamWaitEvent, (w->tp_stream, w->handoff_done, 0));
    TL_NCCL(w, w->half, ncclReduceScatter,
            ((void *)rs->dsend, (void *)rs->drecv, PIPE_COUNT, ncclFloat32, ncclSum, w->half,
             w->tp_stream));
    TL_CU(cuEventRecord, (w->rs_done, w->tp_stream));

    TL_CU(cuStreamWaitEvent, (w->comm_stream, w->rs_done, 0));
    TL_NCCL(w, w->world, ncclAllReduce,
            ((void *)ar->dsend, (void *)ar->drecv, PIPE_COUNT, ncclFloat32, ncclSum, w->world,
             w->comm_stream));
    w->nccl_ops += 3;

    TL_CU(cuMemcpyDtoHAsync, (h->hrecv, h->drecv, h->nrecv * sizeof(float), w->comm_stream));
    TL_CU(cuMemcpyDtoHAsync, (rs->hrecv, rs->drecv, rs->nrecv * sizeof(float), w->tp_stream));
    TL_CU(cuMemcpyDtoHAsync, (ar->hrecv, ar->drecv, ar->nrecv * sizeof(float), w->comm_stream));
}

static void expect(const struct tl_buf *b, float want, const char *what, int step)
{
    for (size_t i = 0; i < b->nrecv; i++)
        if (((const float *)b->hrecv)[i] != want)
            tl_die(TL_EXIT_WRONG, ": step %d: %s[%zu] = %g, expected %g", step, what, i,
                   (double)((const float *)b->hrecv)[i], (double)want);
}

/* The partner's hand-off, the sum over the half, and the sum over the world. */
void tl_pipeline_check(struct tl_worker *w, int step)
{
    float half = 0, world = 0;
    for (int c = 0; c < w->p->nranks; c++) {
        world += contribution(c, step);
        if (c >= w->half_base && c < w->half_base + w->half_size) half += contribution(c, step);
    }
    expect(&w->pipe[PIPE_HANDOFF], contribution(partner(w), step), "hand-off", step);
    expect(&w->pipe[PIPE_RS], half, "ReduceScatter", step);
    expect(&w->pipe[PIPE_AR], world, "AllReduce", step);
}

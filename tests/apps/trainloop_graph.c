/*
 * --graph: one AllReduce is captured into a CUDA graph at start-up and the
 * graph is launched every step, the way CUDA-graph training replays its
 * collectives. Capture uses the global mode (PyTorch's default), in which a
 * potentially unsafe CUDA call from any other thread would invalidate it; so
 * the worker threads capture one at a time, between two barriers, while no
 * other thread of this process makes CUDA calls.
 */
#include "trainloop.h"

void tl_graph_capture(struct tl_worker *w)
{
    struct tl_proc *p = w->p;
    const struct tl_op *op = &w->ops[w->graph_op];
    const struct tl_buf *b = &w->buf[w->graph_op];

    pthread_barrier_wait(&p->barrier);
    pthread_mutex_lock(&p->capture_lock);
    TL_CU(cuStreamBeginCapture, (w->comm_stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    TL_NCCL(w, w->world, ncclAllReduce,
            ((void *)b->dsend, (void *)b->drecv, op->count, op->dtype, op->redop, w->world,
             w->comm_stream));
    TL_CU(cuStreamEndCapture, (w->comm_stream, &w->graph));
    TL_CU(cuGraphInstantiateWithFlags, (&w->graph_exec, w->graph, 0));
    pthread_mutex_unlock(&p->capture_lock);
    pthread_barrier_wait(&p->barrier);
}

/* Replays the captured AllReduce on the communication stream. */
void tl_graph_launch(struct tl_worker *w)
{
    TL_CU(cuGraphLaunch, (w->graph_exec, w->comm_stream));
    w->nccl_ops++;
}

void tl_graph_destroy(struct tl_worker *w)
{
    if (w->graph_op < 0) return;
    TL_CU(cuGraphExecDestroy, (w->graph_exec));
    TL_CU(cuGraphDestroy, (w->graph));
}

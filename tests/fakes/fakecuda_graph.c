/*
 * fakecuda_graph.c: graphs made by stream capture, their instantiation and launch.
 *
 * A graph is the list of work captured, in capture order. Instantiation copies it, so an
 * exec outlives its graph. cuGraphLaunch enqueues a fresh copy of every node, in order, on
 * the launch stream (each launch is a new execution); an event record captured with
 * CU_EVENT_RECORD_EXTERNAL records its event at that point of every launch, and a wait
 * captured with CU_EVENT_WAIT_EXTERNAL waits for its event's latest record. Other event
 * nodes only ordered work inside the capture and do nothing at launch. Launching into a
 * capturing stream captures the nodes again.
 *
 * Threads: any. A graph under capture is only changed under the capture lock.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>
#include <string.h>

#define FC_GRAPH_FLAGS                                                                      \
    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | \
     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

struct fc_exec {
    struct fc_hdr hdr;
    struct fc_work *nodes;
    size_t count;
};

struct fc_graph *fc_graph_new(void)
{
    return fc_handle_new(FC_KIND_GRAPH, sizeof(struct fc_graph));
}

bool fc_graph_append(struct fc_graph *g, const struct fc_work *w)
{
    if (g->count == g->cap) {
        size_t n = g->cap ? 2 * g->cap : 16;
        struct fc_work *nodes = realloc(g->nodes, n * sizeof *nodes);
        if (!nodes) return false;
        g->nodes = nodes;
        g->cap = n;
    }
    g->nodes[g->count++] = *w;
    return true;
}

/* Destroys a graph; its handle stays recognisable as destroyed. */
void fc_graph_discard(struct fc_graph *g)
{
    fc_handle_kill(g);
    free(g->nodes);
    g->nodes = NULL;
    g->count = g->cap = 0;
}

static CUresult graph_lookup(CUgraph h, const char *call, struct fc_graph **out)
{
    FC_TRY(fc_handle_check(h, FC_KIND_GRAPH, call, "graph"));
    *out = (struct fc_graph *)h;
    return CUDA_SUCCESS;
}

static CUresult exec_lookup(CUgraphExec h, const char *call, struct fc_exec **out)
{
    FC_TRY(fc_handle_check(h, FC_KIND_EXEC, call, "graph exec"));
    *out = (struct fc_exec *)h;
    return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *ph, CUgraph hg, unsigned long long flags, const char *call)
{
    FC_TRY(fc_enter(call));
    if (!ph) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(unsigned long long)FC_GRAPH_FLAGS) {
        fc_complain(call, "invalid flags 0x%llx", flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_graph *g;
    FC_TRY(graph_lookup(hg, call, &g));
    struct fc_exec *x = fc_handle_new(FC_KIND_EXEC, sizeof *x);
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    if (g->count) {
        x->nodes = malloc(g->count * sizeof *x->nodes);
        if (!x->nodes) {
            fc_handle_kill(x);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(x->nodes, g->nodes, g->count * sizeof *x->nodes);
    }
    x->count = g->count;
    *ph = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

FC_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                            unsigned long long flags)
{
    return instantiate(phGraphExec, hGraph, flags, "cuGraphInstantiateWithFlags");
}

FC_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                   CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
    if (phErrorNode) *phErrorNode = NULL;
    if (logBuffer && bufferSize) logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph, 0, "cuGraphInstantiate");
}

FC_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
    if (phErrorNode) *phErrorNode = NULL;
    if (logBuffer && bufferSize) logBuffer[0] = '\0';
    return instantiate(phGraphExec, hGraph, 0, "cuGraphInstantiate_v2");
}

/* Enqueues (or captures) one node of a launch on s. */
static CUresult launch_node(struct fc_stream *s, const struct fc_work *n, const char *call)
{
    unsigned ext = fc_stream_capturing(s) ? 1u : 0u; /* stay external if captured again */
    switch (n->kind) {
    case FC_WORK_NODE_RECORD:
        if (!n->u.node.external) return CUDA_SUCCESS;
        if (!atomic_load(&n->u.node.ev->hdr.alive)) return CUDA_SUCCESS;
        return fc_event_record(n->u.node.ev, s, ext * CU_EVENT_RECORD_EXTERNAL, call);
    case FC_WORK_NODE_WAIT:
        if (!atomic_load(&n->u.node.ev->hdr.alive)) return CUDA_SUCCESS;
        return fc_event_wait(s, n->u.node.ev, ext * CU_EVENT_WAIT_EXTERNAL, call);
    default: return fc_submit(s, n, call);
    }
}

static CUresult graph_launch(CUgraphExec hx, CUstream hs, bool ptds, const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_exec *x;
    struct fc_stream *s;
    FC_TRY(exec_lookup(hx, call, &x));
    FC_TRY(fc_stream_resolve(hs, ptds, call, &s));
    for (size_t i = 0; i < x->count; i++) FC_TRY(launch_node(s, &x->nodes[i], call));
    return CUDA_SUCCESS;
}

FC_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, false, "cuGraphLaunch");
}

FC_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, true, "cuGraphLaunch_ptsz");
}

FC_API CUresult cuGraphDestroy(CUgraph hGraph)
{
    FC_TRY(fc_enter("cuGraphDestroy"));
    struct fc_graph *g;
    FC_TRY(graph_lookup(hGraph, "cuGraphDestroy", &g));
    fc_graph_discard(g);
    return CUDA_SUCCESS;
}

FC_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FC_TRY(fc_enter("cuGraphExecDestroy"));
    struct fc_exec *x;
    FC_TRY(exec_lookup(hGraphExec, "cuGraphExecDestroy", &x));
    fc_handle_kill(x);
    free(x->nodes); /* queued copies of the nodes do not point here */
    x->nodes = NULL;
    x->count = 0;
    return CUDA_SUCCESS;
}

/*
 * fakecuda_capture.c: stream capture and CUDA's rule for potentially unsafe calls.
 *
 * A capture begins on an origin stream; work pushed into a capturing stream is appended to
 * the capture's graph instead of running. Another stream joins the capture by waiting on an
 * event recorded in it (fork) and must be joined back (the origin, or any member, waits on
 * an event recorded after its last captured work) before cuStreamEndCapture, or the capture
 * fails with CUDA_ERROR_STREAM_CAPTURE_UNJOINED. The graph is a linear list in capture order,
 * a valid linearisation of the real graph.
 *
 * Unsafe calls (cuEventQuery, cuEventSynchronize, cuStreamQuery, cuStreamSynchronize,
 * cuCtxSynchronize, cuMemAlloc, cuMemFree, synchronous memcpy and memset) follow the rule of
 * cuThreadExchangeStreamCaptureMode. A thread in mode GLOBAL (the default) is prohibited
 * when it has its own capture under way not begun in RELAXED mode, or when any other thread
 * has one under way begun in GLOBAL mode; THREAD_LOCAL only by its own non-relaxed capture;
 * RELAXED never. A prohibited call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
 * invalidates the offending captures. A capture counts as under way from begin to end, also
 * once invalidated.
 *
 * Threads: any. g_cap_lock protects the capture list and the capture fields of streams;
 * the checks made by every unsafe call take it only while some capture is under way.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>

static pthread_mutex_t g_cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_capture *g_caps; /* captures under way, under g_cap_lock */
static _Atomic int g_caps_count;  /* length of g_caps, read without the lock */
static _Atomic uint64_t g_next_cap_id = 1;
static _Thread_local CUstreamCaptureMode tls_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

void fc_capture_atfork_child(void)
{
    pthread_mutex_init(&g_cap_lock, NULL);
    g_caps = NULL;
    atomic_store(&g_caps_count, 0);
}

static const char *mode_name(CUstreamCaptureMode m)
{
    return m == CU_STREAM_CAPTURE_MODE_GLOBAL         ? "GLOBAL"
           : m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? "THREAD_LOCAL"
                                                      : "RELAXED";
}

CUresult fc_capture_check_unsafe(const char *call)
{
    if (atomic_load_explicit(&g_caps_count, memory_order_acquire) == 0) return CUDA_SUCCESS;
    CUstreamCaptureMode mode = tls_mode;
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
    uint64_t me = fc_thread_id();
    int hits = 0;
    bool own_hit = false;
    pthread_mutex_lock(&g_cap_lock);
    for (struct fc_capture *c = g_caps; c; c = c->next) {
        bool own = c->owner == me;
        bool offends = own ? c->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                           : mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                                 c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
        if (offends) {
            c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
            hits++;
            own_hit |= own;
        }
    }
    pthread_mutex_unlock(&g_cap_lock);
    if (!hits) return CUDA_SUCCESS;
    fc_complain(call,
                "potentially unsafe call while %s stream capture is under way (this "
                "thread's capture mode is %s); %d capture(s) invalidated",
                own_hit ? "this thread's" : "another thread's GLOBAL-mode", mode_name(mode), hits);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult fc_capture_check_sync(struct fc_stream *s, const char *call)
{
    if (!fc_stream_capturing(s)) return CUDA_SUCCESS;
    if (!fc_capture_invalidate(s)) return CUDA_SUCCESS;
    fc_complain(call, "stream %p is capturing; the capture is invalidated", (void *)s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult fc_capture_check_ctx(struct fc_ctx *ctx, const char *call)
{
    if (atomic_load(&g_caps_count) == 0) return CUDA_SUCCESS;
    int hits = 0;
    pthread_mutex_lock(&g_cap_lock);
    for (struct fc_capture *c = g_caps; c; c = c->next)
        for (size_t i = 0; i < c->nmembers; i++)
            if (c->members[i]->ctx == ctx) {
                c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
                hits++;
                break;
            }
    pthread_mutex_unlock(&g_cap_lock);
    if (!hits) return CUDA_SUCCESS;
    fc_complain(call, "a stream of context %p is capturing; %d capture(s) invalidated", (void *)ctx,
                hits);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/*
 * Use of the legacy stream while a blocking stream of its context captures: the implicit
 * dependency is not allowed (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). Enqueues and synchronising
 * calls invalidate those captures; status queries (invalidate=false) do not.
 */
CUresult fc_capture_check_legacy(struct fc_stream *s, bool invalidate, const char *call)
{
    struct fc_ctx *ctx = s->ctx;
    if (atomic_load(&ctx->capturing_blocking) == 0) return CUDA_SUCCESS;
    int hits = 0;
    pthread_mutex_lock(&g_cap_lock);
    for (struct fc_capture *c = g_caps; c; c = c->next)
        for (size_t i = 0; i < c->nmembers; i++) {
            struct fc_stream *m = c->members[i];
            if (m->ctx == ctx && fc_stream_blocking(m)) {
                if (invalidate) c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
                hits++;
                break;
            }
        }
    pthread_mutex_unlock(&g_cap_lock);
    if (!hits) return CUDA_SUCCESS;
    fc_complain(call,
                "the legacy stream is used while a blocking stream of its context is "
                "capturing%s",
                invalidate ? "; the capture is invalidated" : "");
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

bool fc_capture_invalidate(struct fc_stream *s)
{
    pthread_mutex_lock(&g_cap_lock);
    struct fc_capture *c = atomic_load(&s->capture);
    if (c) c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    pthread_mutex_unlock(&g_cap_lock);
    return c != NULL;
}

CUresult fc_capture_add(struct fc_stream *s, const struct fc_work *w, const char *call,
                        bool *captured, uint64_t *cap_id, int64_t *node)
{
    pthread_mutex_lock(&g_cap_lock);
    struct fc_capture *c = atomic_load(&s->capture);
    *captured = c != NULL;
    CUresult r = CUDA_SUCCESS;
    if (!c) {
        /* capture ended meanwhile: the caller runs the work */
    } else if (c->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (!fc_graph_append(c->graph, w)) {
        c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        s->cap_last_node = (int64_t)c->graph->count - 1;
        if (cap_id) *cap_id = c->id;
        if (node) *node = s->cap_last_node;
    }
    pthread_mutex_unlock(&g_cap_lock);
    if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        fc_complain(call, "the capture of stream %p was invalidated by an earlier error",
                    (void *)s);
    return r;
}

/* Adds s to c. Caller holds g_cap_lock. */
static bool add_member(struct fc_capture *c, struct fc_stream *s)
{
    if (c->nmembers == c->cap_members) {
        size_t n = c->cap_members ? 2 * c->cap_members : 4;
        struct fc_stream **m = realloc(c->members, n * sizeof *m);
        if (!m) return false;
        c->members = m;
        c->cap_members = n;
    }
    c->members[c->nmembers++] = s;
    atomic_store(&s->capture, c);
    s->cap_last_node = s->cap_joined_upto = -1;
    if (fc_stream_blocking(s)) atomic_fetch_add(&s->ctx->capturing_blocking, 1);
    return true;
}

static void drop_member(struct fc_capture *c, size_t i)
{
    struct fc_stream *s = c->members[i];
    atomic_store(&s->capture, NULL);
    if (fc_stream_blocking(s)) atomic_fetch_sub(&s->ctx->capturing_blocking, 1);
    c->members[i] = c->members[--c->nmembers];
}

/* Ends c: every member leaves it and it leaves the list. Caller holds g_cap_lock. */
static void finish(struct fc_capture *c)
{
    while (c->nmembers) drop_member(c, c->nmembers - 1);
    struct fc_capture **pp = &g_caps;
    while (*pp != c) pp = &(*pp)->next;
    *pp = c->next;
    atomic_fetch_sub(&g_caps_count, 1);
    free(c->members);
}

static struct fc_capture *find(uint64_t id)
{
    struct fc_capture *c = g_caps;
    while (c && c->id != id) c = c->next;
    return c;
}

/*
 * s waits on an event last recorded at node src_node of stream src in capture cap_id.
 * Inside that capture: a dependency (marks src joined up to that node). From a stream not
 * capturing: s joins the capture (fork). *handled=false when the capture has ended.
 */
CUresult fc_capture_wait_event(struct fc_stream *s, uint64_t cap_id, struct fc_stream *src,
                               int64_t src_node, bool *handled, const char *call)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_cap_lock);
    struct fc_capture *c = find(cap_id), *mine = atomic_load(&s->capture);
    *handled = c != NULL;
    if (!c) {
    } else if (mine == c) {
        if (src != s && src_node > src->cap_joined_upto) src->cap_joined_upto = src_node;
    } else if (mine) {
        c->status = mine->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
    } else if (s->kind == FC_STREAM_LEGACY) {
        c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else if (!add_member(c, s)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&g_cap_lock);
    if (r == CUDA_ERROR_STREAM_CAPTURE_MERGE)
        fc_complain(call, "stream %p would merge two capture sequences", (void *)s);
    else if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        fc_complain(call, "the legacy stream cannot join a capture");
    return r;
}

/* s is being destroyed: the capture it began is dropped, one it joined is invalidated. */
void fc_capture_stream_gone(struct fc_stream *s)
{
    if (!fc_stream_capturing(s)) return;
    struct fc_graph *discard = NULL;
    pthread_mutex_lock(&g_cap_lock);
    struct fc_capture *c = atomic_load(&s->capture);
    if (c && c->origin == s) {
        finish(c);
        discard = c->graph;
        free(c);
    } else if (c) {
        for (size_t i = 0; i < c->nmembers; i++)
            if (c->members[i] == s) drop_member(c, i);
        c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    }
    pthread_mutex_unlock(&g_cap_lock);
    if (discard) fc_graph_discard(discard);
}

/* ------------------------------------- API ------------------------------------- */

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, bool ptds, const char *call)
{
    FC_TRY(fc_enter(call));
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
        fc_complain(call, "invalid capture mode %d", (int)mode);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_stream *s;
    FC_TRY(fc_stream_resolve(h, ptds, call, &s));
    if (s->kind == FC_STREAM_LEGACY) {
        fc_complain(call, "capture cannot begin on the legacy stream");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    struct fc_capture *c = calloc(1, sizeof *c);
    struct fc_graph *g = fc_graph_new();
    if (!c || !g) {
        free(c);
        if (g) fc_graph_discard(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->id = atomic_fetch_add(&g_next_cap_id, 1);
    c->mode = mode;
    c->status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    c->owner = fc_thread_id();
    c->origin = s;
    c->graph = g;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_cap_lock);
    if (atomic_load(&s->capture)) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else if (!add_member(c, s)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        c->next = g_caps;
        g_caps = c;
        atomic_fetch_add(&g_caps_count, 1);
    }
    pthread_mutex_unlock(&g_cap_lock);
    if (r != CUDA_SUCCESS) {
        if (r == CUDA_ERROR_ILLEGAL_STATE)
            fc_complain(call, "stream %p is already capturing", (void *)s);
        free(c->members);
        free(c);
        fc_graph_discard(g);
    }
    return r;
}

FC_API CUresult cuStreamBeginCapture(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false, "cuStreamBeginCapture");
}

FC_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true, "cuStreamBeginCapture_ptsz");
}

FC_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, false, "cuStreamBeginCapture_v2");
}

FC_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, true, "cuStreamBeginCapture_v2_ptsz");
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, bool ptds, const char *call)
{
    FC_TRY(fc_enter(call));
    if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    FC_TRY(fc_stream_resolve(h, ptds, call, &s));
    CUresult r = CUDA_SUCCESS;
    struct fc_graph *g = NULL;
    pthread_mutex_lock(&g_cap_lock);
    struct fc_capture *c = atomic_load(&s->capture);
    if (!c) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else if (c->origin != s) {
        c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    } else if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->owner != fc_thread_id()) {
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    } else {
        for (size_t i = 1; i < c->nmembers; i++)
            if (c->members[i]->cap_last_node > c->members[i]->cap_joined_upto)
                r = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
        if (c->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        finish(c);
        g = c->graph;
        free(c);
    }
    pthread_mutex_unlock(&g_cap_lock);
    if (r == CUDA_SUCCESS) {
        *phGraph = (CUgraph)g;
        return CUDA_SUCCESS;
    }
    *phGraph = NULL;
    if (g) fc_graph_discard(g);
    if (r == CUDA_ERROR_ILLEGAL_STATE) fc_complain(call, "stream %p is not capturing", (void *)s);
    if (r == CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
        fc_complain(call, "stream %p did not begin the capture it is part of", (void *)s);
    if (r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
        fc_complain(call, "a non-relaxed capture must end on the thread that began it");
    if (r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
        fc_complain(call, "a stream forked into the capture was not joined back");
    return r;
}

FC_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, false, "cuStreamEndCapture");
}

FC_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, true, "cuStreamEndCapture_ptsz");
}

/* Capture status, id and graph of the stream h (IMPLICIT on a legacy stream in use). */
static CUresult capture_info(CUstream h, bool ptds, const char *call, CUstreamCaptureStatus *status,
                             cuuint64_t *id, CUgraph *graph)
{
    FC_TRY(fc_enter(call));
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    FC_TRY(fc_stream_resolve(h, ptds, call, &s));
    if (s->kind == FC_STREAM_LEGACY) FC_TRY(fc_capture_check_legacy(s, false, call));
    pthread_mutex_lock(&g_cap_lock);
    struct fc_capture *c = atomic_load(&s->capture);
    *status = c ? c->status : CU_STREAM_CAPTURE_STATUS_NONE;
    if (id && c) *id = c->id;
    if (graph)
        *graph = c && c->status == CU_STREAM_CAPTURE_STATUS_ACTIVE ? (CUgraph)c->graph : NULL;
    pthread_mutex_unlock(&g_cap_lock);
    return CUDA_SUCCESS;
}

FC_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return capture_info(hStream, false, "cuStreamIsCapturing", captureStatus, NULL, NULL);
}

FC_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return capture_info(hStream, true, "cuStreamIsCapturing_ptsz", captureStatus, NULL, NULL);
}

FC_API CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                       cuuint64_t *id_out)
{
    return capture_info(hStream, false, "cuStreamGetCaptureInfo", captureStatus_out, id_out, NULL);
}

FC_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream,
                                            CUstreamCaptureStatus *captureStatus_out,
                                            cuuint64_t *id_out)
{
    return capture_info(hStream, true, "cuStreamGetCaptureInfo_ptsz", captureStatus_out, id_out,
                        NULL);
}

/* The fake's graphs have no node handles: the dependency set reads as empty. */
static void no_deps(const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
}

FC_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream,
                                          CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out, CUgraph *graph_out,
                                          const CUgraphNode **dependencies_out,
                                          size_t *numDependencies_out)
{
    no_deps(dependencies_out, NULL, numDependencies_out);
    return capture_info(hStream, false, "cuStreamGetCaptureInfo_v2", captureStatus_out, id_out,
                        graph_out);
}

FC_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               size_t *numDependencies_out)
{
    no_deps(dependencies_out, NULL, numDependencies_out);
    return capture_info(hStream, true, "cuStreamGetCaptureInfo_v2_ptsz", captureStatus_out, id_out,
                        graph_out);
}

FC_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *status,
                                          cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                          const CUgraphEdgeData **edges, size_t *ndeps)
{
    no_deps(deps, edges, ndeps);
    return capture_info(hStream, false, "cuStreamGetCaptureInfo_v3", status, id, graph);
}

FC_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *status,
                                               cuuint64_t *id, CUgraph *graph,
                                               const CUgraphNode **deps,
                                               const CUgraphEdgeData **edges, size_t *ndeps)
{
    no_deps(deps, edges, ndeps);
    return capture_info(hStream, true, "cuStreamGetCaptureInfo_v3_ptsz", status, id, graph);
}

FC_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    FC_TRY(fc_enter("cuThreadExchangeStreamCaptureMode"));
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
        fc_complain("cuThreadExchangeStreamCaptureMode", "invalid mode");
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUstreamCaptureMode old = tls_mode;
    tls_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

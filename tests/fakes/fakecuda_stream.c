/*
 * fakecuda_stream.c: the stream API, the special stream handles and the per-thread default
 * streams.
 *
 * Handles: NULL and CU_STREAM_LEGACY name the legacy default stream of the current context;
 * CU_STREAM_PER_THREAD (and NULL in the _ptsz/_ptds exports) names the calling thread's
 * per-thread default stream of the current context, created on first use and destroyed when
 * the thread exits. It is a blocking stream: it orders against the legacy stream.
 *
 * Every export that takes a stream exists twice, plain and _ptsz (per-thread default stream
 * semantics for NULL), as in the real driver. Threads: any thread.
 */
#include "fakecuda_internal.h"

#define FC_PTDS_SLOTS 16
#define FC_PRIO_LEAST 0
#define FC_PRIO_GREATEST (-5)

struct ptds_slot {
    struct fc_ctx *ctx;
    uint64_t gen;
    struct fc_stream *s;
};

static _Thread_local struct ptds_slot tls_ptds[FC_PTDS_SLOTS];
static pthread_key_t g_ptds_key;

/* Thread exit: destroy this thread's per-thread default streams (queued work still runs). */
static void ptds_thread_exit(void *unused)
{
    (void)unused;
    for (int i = 0; i < FC_PTDS_SLOTS; i++) {
        struct fc_stream *s = tls_ptds[i].s;
        if (s && atomic_load(&s->hdr.alive)) {
            fc_capture_stream_gone(s);
            fc_stream_retire(s);
        }
        tls_ptds[i].s = NULL;
    }
}

__attribute__((constructor)) static void ptds_key_init(void)
{
    pthread_key_create(&g_ptds_key, ptds_thread_exit);
}

/* The calling thread's per-thread default stream of ctx, created on first use. */
static CUresult ptds_stream(struct fc_ctx *ctx, const char *call, struct fc_stream **out)
{
    uint64_t gen = atomic_load(&ctx->gen);
    int free_slot = -1;
    for (int i = 0; i < FC_PTDS_SLOTS; i++) {
        struct ptds_slot *p = &tls_ptds[i];
        bool live = p->s && atomic_load(&p->s->hdr.alive);
        if (live && p->ctx == ctx && p->gen == gen) {
            *out = p->s;
            return CUDA_SUCCESS;
        }
        if (!live && free_slot < 0) free_slot = i;
    }
    if (free_slot < 0) {
        fc_complain(call, "more than %d contexts with a per-thread default stream on one thread",
                    FC_PTDS_SLOTS);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct fc_stream *s = fc_stream_alloc(ctx, FC_STREAM_PER_THREAD, 0, 0);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    tls_ptds[free_slot] = (struct ptds_slot){ctx, gen, s};
    pthread_setspecific(g_ptds_key, tls_ptds);
    *out = s;
    return CUDA_SUCCESS;
}

/*
 * Turns a CUstream into a live stream: the special handles through the current context
 * (per-thread stream for CU_STREAM_PER_THREAD, and for NULL when ptds), others through the
 * handle arena (CUDA_ERROR_INVALID_HANDLE, loud, when destroyed or foreign).
 */
CUresult fc_stream_resolve(CUstream h, bool ptds, const char *call, struct fc_stream **out)
{
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        struct fc_ctx *ctx;
        FC_TRY(fc_ctx_current(call, &ctx));
        if (h == CU_STREAM_PER_THREAD || (h == NULL && ptds)) return ptds_stream(ctx, call, out);
        *out = ctx->legacy;
        return CUDA_SUCCESS;
    }
    FC_TRY(fc_handle_check(h, FC_KIND_STREAM, call, "stream"));
    *out = (struct fc_stream *)h;
    return CUDA_SUCCESS;
}

/* Enqueues w on s, or records it into the capture s belongs to. */
CUresult fc_submit(struct fc_stream *s, const struct fc_work *w, const char *call)
{
    if (fc_stream_capturing(s)) {
        bool captured;
        FC_TRY(fc_capture_add(s, w, call, &captured, NULL, NULL));
        if (captured) return CUDA_SUCCESS;
    }
    if (s->kind == FC_STREAM_LEGACY) FC_TRY(fc_capture_check_legacy(s, true, call));
    return fc_queue_push(s, w, call, NULL);
}

/* Runs w on s and waits for it: the synchronous memcpy/memset path. */
CUresult fc_run_sync(struct fc_stream *s, const struct fc_work *w, const char *call)
{
    FC_TRY(fc_capture_check_unsafe(call));
    FC_TRY(fc_capture_check_sync(s, call));
    if (s->kind == FC_STREAM_LEGACY) FC_TRY(fc_capture_check_legacy(s, true, call));
    uint64_t ticket;
    FC_TRY(fc_queue_push(s, w, call, &ticket));
    fc_stream_wait_ticket(s, ticket);
    return CUDA_SUCCESS;
}

/*
 * Waits for the work s has now. On the legacy stream this is a marker op, which waits for
 * the earlier work of every blocking stream as well.
 */
CUresult fc_stream_sync(struct fc_stream *s, const char *call)
{
    if (s->kind == FC_STREAM_LEGACY) {
        struct fc_work nop = {.kind = FC_WORK_NOP};
        return fc_run_sync(s, &nop, call);
    }
    FC_TRY(fc_capture_check_unsafe(call));
    FC_TRY(fc_capture_check_sync(s, call));
    return fc_stream_wait_done(s, atomic_load(&s->enq_count));
}

/* ------------------------------------- API ------------------------------------- */

static CUresult stream_create(CUstream *ph, unsigned flags, int priority, const char *call)
{
    FC_TRY(fc_enter(call));
    if (!ph) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) {
        fc_complain(call, "invalid flags 0x%x", flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_ctx *ctx;
    FC_TRY(fc_ctx_current(call, &ctx));
    if (priority > FC_PRIO_LEAST) priority = FC_PRIO_LEAST;
    if (priority < FC_PRIO_GREATEST) priority = FC_PRIO_GREATEST;
    struct fc_stream *s = fc_stream_alloc(ctx, FC_STREAM_USER, flags, priority);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

FC_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return stream_create(phStream, Flags, 0, "cuStreamCreate");
}

FC_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    return stream_create(phStream, flags, priority, "cuStreamCreateWithPriority");
}

static CUresult stream_destroy(CUstream h, const char *call)
{
    FC_TRY(fc_enter(call));
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        fc_complain(call, "the default streams cannot be destroyed");
        return CUDA_ERROR_INVALID_HANDLE;
    }
    struct fc_stream *s;
    FC_TRY(fc_stream_resolve(h, false, call, &s));
    fc_capture_stream_gone(s);
    fc_stream_retire(s);
    return CUDA_SUCCESS;
}

FC_API CUresult cuStreamDestroy(CUstream hStream)
{
    return stream_destroy(hStream, "cuStreamDestroy");
}

FC_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
    return stream_destroy(hStream, "cuStreamDestroy_v2");
}

static CUresult stream_synchronize(CUstream h, bool ptds, const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_stream *s;
    FC_TRY(fc_stream_resolve(h, ptds, call, &s));
    return fc_stream_sync(s, call);
}

FC_API CUresult cuStreamSynchronize(CUstream hStream)
{
    return stream_synchronize(hStream, false, "cuStreamSynchronize");
}

FC_API CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_synchronize(hStream, true, "cuStreamSynchronize_ptsz");
}

static CUresult stream_query(CUstream h, bool ptds, const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_stream *s;
    FC_TRY(fc_stream_resolve(h, ptds, call, &s));
    FC_TRY(fc_capture_check_unsafe(call));
    FC_TRY(fc_capture_check_sync(s, call));
    if (s->kind == FC_STREAM_LEGACY) {
        FC_TRY(fc_capture_check_legacy(s, true, call));
        return fc_legacy_idle(s->ctx) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    }
    return fc_stream_idle(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FC_API CUresult cuStreamQuery(CUstream hStream)
{
    return stream_query(hStream, false, "cuStreamQuery");
}

FC_API CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    return stream_query(hStream, true, "cuStreamQuery_ptsz");
}

static CUresult stream_get(CUstream h, bool ptds, const char *call, void *out, struct fc_stream **s)
{
    FC_TRY(fc_enter(call));
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    return fc_stream_resolve(h, ptds, call, s);
}

static CUresult get_ctx(CUstream h, CUcontext *pctx, CUgreenCtx *pgreen, bool ptds,
                        const char *call)
{
    struct fc_stream *s;
    FC_TRY(stream_get(h, ptds, call, pctx, &s));
    *pctx = (CUcontext)s->ctx;
    if (pgreen) *pgreen = NULL;
    return CUDA_SUCCESS;
}

FC_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    return get_ctx(hStream, pctx, NULL, false, "cuStreamGetCtx");
}

FC_API CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    return get_ctx(hStream, pctx, NULL, true, "cuStreamGetCtx_ptsz");
}

FC_API CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    return get_ctx(hStream, pCtx, pGreenCtx, false, "cuStreamGetCtx_v2");
}

FC_API CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    return get_ctx(hStream, pCtx, pGreenCtx, true, "cuStreamGetCtx_v2_ptsz");
}

static CUresult get_flags(CUstream h, unsigned *flags, bool ptds, const char *call)
{
    struct fc_stream *s;
    FC_TRY(stream_get(h, ptds, call, flags, &s));
    *flags = s->flags;
    return CUDA_SUCCESS;
}

FC_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    return get_flags(hStream, flags, false, "cuStreamGetFlags");
}

FC_API CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    return get_flags(hStream, flags, true, "cuStreamGetFlags_ptsz");
}

static CUresult get_id(CUstream h, unsigned long long *id, bool ptds, const char *call)
{
    struct fc_stream *s;
    FC_TRY(stream_get(h, ptds, call, id, &s));
    *id = s->id;
    return CUDA_SUCCESS;
}

FC_API CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    return get_id(hStream, streamId, false, "cuStreamGetId");
}

FC_API CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
    return get_id(hStream, streamId, true, "cuStreamGetId_ptsz");
}

static CUresult get_priority(CUstream h, int *prio, bool ptds, const char *call)
{
    struct fc_stream *s;
    FC_TRY(stream_get(h, ptds, call, prio, &s));
    *prio = s->priority;
    return CUDA_SUCCESS;
}

FC_API CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
    return get_priority(hStream, priority, false, "cuStreamGetPriority");
}

FC_API CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
    return get_priority(hStream, priority, true, "cuStreamGetPriority_ptsz");
}

static CUresult launch_host(CUstream h, CUhostFn fn, void *arg, bool ptds, const char *call)
{
    FC_TRY(fc_enter(call));
    if (!fn) {
        fc_complain(call, "fn is NULL");
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_stream *s;
    FC_TRY(fc_stream_resolve(h, ptds, call, &s));
    struct fc_work w = {.kind = FC_WORK_HOST, .u.host = {fn, arg}};
    return fc_submit(s, &w, call);
}

FC_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return launch_host(hStream, fn, userData, false, "cuLaunchHostFunc");
}

FC_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return launch_host(hStream, fn, userData, true, "cuLaunchHostFunc_ptsz");
}

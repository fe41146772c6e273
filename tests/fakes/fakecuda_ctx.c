/*
 * fakecuda_ctx.c: contexts, primary contexts and the per-thread current-context stack.
 *
 * A context owns a legacy default stream and a list of streams (fakecuda_queue.c). Destroying
 * a context (or releasing a primary context to zero) first waits for its queued work, as the
 * real driver synchronises, then destroys its streams and frees its memory; its handle stays
 * recognisable as destroyed. A primary context keeps one handle per device for the life of
 * the process; each (re)activation is a new incarnation (gen), so streams and events of an
 * older incarnation are rejected.
 *
 * Threads: any thread. g_ctx_lock serialises primary-context reference counting and context
 * teardown; the current-context stack is thread-local.
 */
#include "fakecuda_internal.h"

#include <stdlib.h>

#define FC_CTX_STACK 32
#define FC_CTX_FLAGS_ALLOWED 0xFFu
#define FC_PRIO_LEAST 0
#define FC_PRIO_GREATEST (-5)

static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_ctx *g_primary[FC_MAX_DEVICES]; /* under g_ctx_lock */
static unsigned g_primary_flags[FC_MAX_DEVICES]; /* under g_ctx_lock */
static _Thread_local struct fc_ctx *tls_stack[FC_CTX_STACK];
static _Thread_local int tls_depth;

void fc_ctx_atfork_child(void)
{
    pthread_mutex_init(&g_ctx_lock, NULL);
}

bool fc_ctx_usable(struct fc_ctx *ctx, uint64_t gen)
{
    return atomic_load(&ctx->hdr.alive) && atomic_load(&ctx->active) &&
           atomic_load(&ctx->gen) == gen;
}

CUresult fc_ctx_current(const char *call, struct fc_ctx **out)
{
    if (tls_depth == 0) {
        fc_complain(call, "no current context on this thread (cuCtxSetCurrent first)");
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    struct fc_ctx *ctx = tls_stack[tls_depth - 1];
    if (!atomic_load(&ctx->hdr.alive) || !atomic_load(&ctx->active)) {
        fc_complain(call, "the current context %p was destroyed", (void *)ctx);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *out = ctx;
    return CUDA_SUCCESS;
}

CUresult fc_ctx_lookup(CUcontext h, const char *call, struct fc_ctx **out)
{
    enum fc_handle_state st = fc_handle_state(h, FC_KIND_CTX);
    struct fc_ctx *ctx = (struct fc_ctx *)h;
    if (st == FC_HANDLE_FOREIGN) {
        fc_complain(call, "%p is not a context", (void *)h);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (st == FC_HANDLE_DEAD || !atomic_load(&ctx->active)) {
        fc_complain(call, "context %p was destroyed%s", (void *)h,
                    ctx->primary ? " (primary context not retained)" : "");
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *out = ctx;
    return CUDA_SUCCESS;
}

/* Starts a new incarnation of ctx with a fresh legacy stream. Caller serialises. */
static CUresult ctx_activate(struct fc_ctx *ctx)
{
    atomic_store(&ctx->next_ticket, 1);
    atomic_fetch_add(&ctx->gen, 1);
    struct fc_stream *legacy = fc_stream_alloc(ctx, FC_STREAM_LEGACY, 0, 0);
    if (!legacy) return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_store(&ctx->legacy, legacy);
    atomic_store(&ctx->active, true);
    return CUDA_SUCCESS;
}

/*
 * Ends the current incarnation: waits for queued work (the real driver synchronises too, so
 * a stream stuck in a host function makes this wait), then destroys every stream and frees
 * the memory. Caller holds g_ctx_lock.
 */
static void ctx_teardown(struct fc_ctx *ctx)
{
    fc_ctx_drain(ctx);
    atomic_store(&ctx->active, false);
    for (;;) {
        /* retire one live stream at a time: retiring takes ctx->lock itself */
        struct fc_stream *victim = NULL;
        pthread_mutex_lock(&ctx->lock);
        for (struct fc_stream *s = ctx->streams; s && !victim; s = s->ctx_next)
            if (atomic_load(&s->hdr.alive)) victim = s;
        pthread_mutex_unlock(&ctx->lock);
        if (!victim) break;
        fc_capture_stream_gone(victim);
        fc_stream_retire(victim);
    }
    fc_mem_release_ctx(ctx);
}

static struct fc_ctx *ctx_new(CUdevice dev, unsigned flags, bool primary)
{
    struct fc_ctx *ctx = fc_handle_new(FC_KIND_CTX, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->device = dev;
    ctx->flags = flags;
    ctx->primary = primary;
    ctx->id = fc_next_id();
    pthread_mutex_init(&ctx->lock, NULL);
    return ctx;
}

static CUresult push_current(struct fc_ctx *ctx, const char *call)
{
    if (tls_depth == FC_CTX_STACK) {
        fc_complain(call, "context stack deeper than %d", FC_CTX_STACK);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    tls_stack[tls_depth++] = ctx;
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev, bool extra_params,
                           const char *call)
{
    FC_TRY(fc_enter(call));
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~FC_CTX_FLAGS_ALLOWED) {
        fc_complain(call, "invalid flags 0x%x", flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!fc_device_valid(dev)) {
        fc_complain(call, "device %d does not exist", dev);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if (extra_params) {
        fc_complain(call, "execution affinity and CIG parameters are not supported by the fake");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    struct fc_ctx *ctx = ctx_new(dev, flags, false);
    if (!ctx) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_ctx_lock);
    CUresult r = ctx_activate(ctx);
    pthread_mutex_unlock(&g_ctx_lock);
    FC_TRY(r);
    FC_TRY(push_current(ctx, call));
    *pctx = (CUcontext)ctx;
    return CUDA_SUCCESS;
}

FC_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev, false, "cuCtxCreate");
}

FC_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev, false, "cuCtxCreate_v2");
}

FC_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                               unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev, paramsArray && numParams > 0, "cuCtxCreate_v3");
}

FC_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                               unsigned int flags, CUdevice dev)
{
    bool extra = ctxCreateParams && ((ctxCreateParams->execAffinityParams &&
                                      ctxCreateParams->numExecAffinityParams > 0) ||
                                     ctxCreateParams->cigParams);
    return ctx_create(pctx, flags, dev, extra, "cuCtxCreate_v4");
}

static CUresult ctx_destroy(CUcontext h, const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_ctx *ctx;
    FC_TRY(fc_ctx_lookup(h, call, &ctx));
    if (ctx->primary) {
        fc_complain(call, "%p is a primary context: use cuDevicePrimaryCtxRelease", (void *)h);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&g_ctx_lock);
    ctx_teardown(ctx);
    fc_handle_kill(ctx);
    pthread_mutex_unlock(&g_ctx_lock);
    if (tls_depth > 0 && tls_stack[tls_depth - 1] == ctx) tls_depth--;
    return CUDA_SUCCESS;
}

FC_API CUresult cuCtxDestroy(CUcontext ctx)
{
    return ctx_destroy(ctx, "cuCtxDestroy");
}
FC_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    return ctx_destroy(ctx, "cuCtxDestroy_v2");
}

static CUresult ctx_push(CUcontext h, const char *call)
{
    FC_TRY(fc_enter(call));
    struct fc_ctx *ctx;
    FC_TRY(fc_ctx_lookup(h, call, &ctx));
    return push_current(ctx, call);
}

FC_API CUresult cuCtxPushCurrent(CUcontext ctx)
{
    return ctx_push(ctx, "cuCtxPushCurrent");
}
FC_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    return ctx_push(ctx, "cuCtxPushCurrent_v2");
}

static CUresult ctx_pop(CUcontext *pctx, const char *call)
{
    FC_TRY(fc_enter(call));
    if (tls_depth == 0) {
        fc_complain(call, "the context stack of this thread is empty");
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    struct fc_ctx *ctx = tls_stack[--tls_depth];
    if (pctx) *pctx = (CUcontext)ctx;
    return CUDA_SUCCESS;
}

FC_API CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    return ctx_pop(pctx, "cuCtxPopCurrent");
}
FC_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    return ctx_pop(pctx, "cuCtxPopCurrent_v2");
}

FC_API CUresult cuCtxSetCurrent(CUcontext h)
{
    FC_TRY(fc_enter("cuCtxSetCurrent"));
    if (!h) {
        if (tls_depth > 0) tls_depth--;
        return CUDA_SUCCESS;
    }
    struct fc_ctx *ctx;
    FC_TRY(fc_ctx_lookup(h, "cuCtxSetCurrent", &ctx));
    if (tls_depth == 0) return push_current(ctx, "cuCtxSetCurrent");
    tls_stack[tls_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    FC_TRY(fc_enter("cuCtxGetCurrent"));
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = tls_depth ? (CUcontext)tls_stack[tls_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

/* The context named by h, or the current one when h is NULL. */
static CUresult ctx_or_current(CUcontext h, const char *call, struct fc_ctx **out)
{
    FC_TRY(fc_enter(call));
    return h ? fc_ctx_lookup(h, call, out) : fc_ctx_current(call, out);
}

FC_API CUresult cuCtxGetDevice(CUdevice *device)
{
    struct fc_ctx *ctx;
    FC_TRY(ctx_or_current(NULL, "cuCtxGetDevice", &ctx));
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->device;
    return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext h)
{
    struct fc_ctx *ctx;
    FC_TRY(ctx_or_current(h, "cuCtxGetDevice_v2", &ctx));
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->device;
    return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetFlags(unsigned int *flags)
{
    struct fc_ctx *ctx;
    FC_TRY(ctx_or_current(NULL, "cuCtxGetFlags", &ctx));
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_ctx_lock); /* primary context flags change under it */
    *flags = ctx->flags;
    pthread_mutex_unlock(&g_ctx_lock);
    return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetId(CUcontext h, unsigned long long *ctxId)
{
    struct fc_ctx *ctx;
    FC_TRY(ctx_or_current(h, "cuCtxGetId", &ctx));
    if (!ctxId) return CUDA_ERROR_INVALID_VALUE;
    *ctxId = ctx->id;
    return CUDA_SUCCESS;
}

FC_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    FC_TRY(fc_enter("cuCtxGetStreamPriorityRange"));
    if (leastPriority) *leastPriority = FC_PRIO_LEAST;
    if (greatestPriority) *greatestPriority = FC_PRIO_GREATEST;
    return CUDA_SUCCESS;
}

/* Waits for every stream of the context; a potentially unsafe call during capture. */
static CUresult ctx_sync(CUcontext h, const char *call)
{
    struct fc_ctx *ctx;
    FC_TRY(ctx_or_current(h, call, &ctx));
    FC_TRY(fc_capture_check_unsafe(call));
    FC_TRY(fc_capture_check_ctx(ctx, call));
    return fc_ctx_drain(ctx);
}

FC_API CUresult cuCtxSynchronize(void)
{
    return ctx_sync(NULL, "cuCtxSynchronize");
}
FC_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    return ctx_sync(ctx, "cuCtxSynchronize_v2");
}

/* ------------------------------ primary contexts ------------------------------ */

static CUresult primary_device(CUdevice dev, const char *call)
{
    FC_TRY(fc_enter(call));
    if (fc_device_valid(dev)) return CUDA_SUCCESS;
    fc_complain(call, "device %d does not exist", dev);
    return CUDA_ERROR_INVALID_DEVICE;
}

FC_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FC_TRY(primary_device(dev, "cuDevicePrimaryCtxRetain"));
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_ctx_lock);
    struct fc_ctx *ctx = g_primary[dev];
    if (!ctx) ctx = g_primary[dev] = ctx_new(dev, 0, true);
    if (!ctx) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        if (ctx->refcount == 0) {
            ctx->flags = g_primary_flags[dev];
            r = ctx_activate(ctx);
        }
        if (r == CUDA_SUCCESS) {
            ctx->refcount++;
            *pctx = (CUcontext)ctx;
        }
    }
    pthread_mutex_unlock(&g_ctx_lock);
    return r;
}

static CUresult primary_release(CUdevice dev, const char *call)
{
    FC_TRY(primary_device(dev, call));
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_ctx_lock);
    struct fc_ctx *ctx = g_primary[dev];
    if (!ctx || ctx->refcount == 0) {
        fc_complain(call, "the primary context of device %d is not retained", dev);
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else if (--ctx->refcount == 0) {
        ctx_teardown(ctx);
    }
    pthread_mutex_unlock(&g_ctx_lock);
    return r;
}

FC_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(dev, "cuDevicePrimaryCtxRelease");
}

FC_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(dev, "cuDevicePrimaryCtxRelease_v2");
}

FC_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    FC_TRY(primary_device(dev, "cuDevicePrimaryCtxGetState"));
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_ctx_lock);
    struct fc_ctx *ctx = g_primary[dev];
    *active = ctx && ctx->refcount > 0;
    *flags = ctx && ctx->refcount > 0 ? ctx->flags : g_primary_flags[dev];
    pthread_mutex_unlock(&g_ctx_lock);
    return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned flags, const char *call)
{
    FC_TRY(primary_device(dev, call));
    if (flags & ~FC_CTX_FLAGS_ALLOWED) {
        fc_complain(call, "invalid flags 0x%x", flags);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&g_ctx_lock);
    g_primary_flags[dev] = flags;
    if (g_primary[dev] && g_primary[dev]->refcount > 0) g_primary[dev]->flags = flags;
    pthread_mutex_unlock(&g_ctx_lock);
    return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return primary_set_flags(dev, flags, "cuDevicePrimaryCtxSetFlags");
}

FC_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    return primary_set_flags(dev, flags, "cuDevicePrimaryCtxSetFlags_v2");
}

/* Destroys all state of the primary context now; the next retain starts afresh. */
static CUresult primary_reset(CUdevice dev, const char *call)
{
    FC_TRY(primary_device(dev, call));
    pthread_mutex_lock(&g_ctx_lock);
    struct fc_ctx *ctx = g_primary[dev];
    if (ctx && ctx->refcount > 0) {
        ctx_teardown(ctx);
        ctx->refcount = 0;
    }
    g_primary_flags[dev] = 0;
    pthread_mutex_unlock(&g_ctx_lock);
    return CUDA_SUCCESS;
}

FC_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return primary_reset(dev, "cuDevicePrimaryCtxReset");
}

FC_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return primary_reset(dev, "cuDevicePrimaryCtxReset_v2");
}

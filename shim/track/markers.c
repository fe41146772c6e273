/*
 * markers.c: see markers.h.
 *
 * Driver functions are looked up by the exact names libcuda.so.1 exports
 * (cuda.h renames several: cuEventDestroy is cuEventDestroy_v2, and so on),
 * so that the shim works whatever runtime or headers the job was built with.
 *
 * Pools: one per CUDA context, up to MAX_POOLS. A pool holds `pool_size`
 * markers and a lock-free stack of free ones; its head packs a 32-bit tag with
 * the index, so a pop racing with a pop and a push cannot be fooled (ABA).
 */
#include "track/markers.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/log.h"

#define MAX_POOLS 16
#define MAX_MARKERS 65536 /* per pool: a marker is pool * MAX_MARKERS + index */
static int64_t anchor_refresh_ns = 60LL * 1000000000;

static struct {
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_push)(CUcontext);
    CUresult (*ctx_pop)(CUcontext *);
    CUresult (*stream_get_ctx)(CUstream, CUcontext *);
    CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*stream_create)(CUstream *, unsigned int);
    CUresult (*event_create)(CUevent *, unsigned int);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_query)(CUevent);
    CUresult (*event_synchronize)(CUevent);
    CUresult (*event_elapsed)(float *, CUevent, CUevent);
    CUresult (*exchange_capture_mode)(CUstreamCaptureMode *);
} cu;

struct pool {
    ng_atomic(CUcontext) ctx; /* published once the pool is complete */
    int size;
    CUevent *start, *end;
    ng_atomic(uint32_t) *next; /* free-stack links */
    ng_atomic(uint64_t) head;  /* (tag << 32) | (index + 1), 0 = empty */
    CUstream anchor_stream;
    CUevent anchor;
    int64_t anchor_ns, anchor_taken_mono_ns;
};

static struct pool pools[MAX_POOLS];
static ng_atomic(int) npools;
static ng_atomic(CUcontext) wanted;   /* a context that asked for a pool */
static int pool_size = 4096;
static ng_atomic(int) driver_state;   /* 0 unknown, 1 open, -1 unusable */
static ng_atomic(int) driver_version; /* cuDriverGetVersion, 0 unknown */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER; /* creation only */
static ng_atomic(uint64_t) no_marker, captured;
static ng_atomic(int) retired; /* pools whose context went away */

static int resolve(void *lib)
{
    struct {
        const char *name;
        void **slot;
        int required;
    } fns[] = {
        {"cuCtxGetCurrent", (void **)&cu.ctx_get_current, 1},
        {"cuCtxPushCurrent_v2", (void **)&cu.ctx_push, 1},
        {"cuCtxPopCurrent_v2", (void **)&cu.ctx_pop, 1},
        {"cuStreamGetCtx", (void **)&cu.stream_get_ctx, 1},
        {"cuStreamIsCapturing", (void **)&cu.stream_is_capturing, 1},
        {"cuStreamCreate", (void **)&cu.stream_create, 1},
        {"cuEventCreate", (void **)&cu.event_create, 1},
        {"cuEventRecord", (void **)&cu.event_record, 1},
        {"cuEventQuery", (void **)&cu.event_query, 1},
        {"cuEventSynchronize", (void **)&cu.event_synchronize, 1},
        {"cuEventElapsedTime_v2", (void **)&cu.event_elapsed, 0},
        {"cuThreadExchangeStreamCaptureMode", (void **)&cu.exchange_capture_mode, 1},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        *fns[i].slot = dlsym(lib, fns[i].name);
        if (!*fns[i].slot && fns[i].required) {
            NG_WARN("libcuda.so.1 lacks %s: GPU progress of NCCL ops is not tracked",
                    fns[i].name);
            return -1;
        }
    }
    if (!cu.event_elapsed) cu.event_elapsed = dlsym(lib, "cuEventElapsedTime");
    return 0;
}

static void open_once(void)
{
    /* RTLD_LOCAL: the driver's symbols must not join the global scope on our
     * account. The library is normally loaded already (by the runtime). */
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        NG_WARN("cannot open libcuda.so.1 (%s): GPU progress of NCCL ops is not tracked",
                dlerror());
        ng_atomic_store_release(&driver_state, -1);
        return;
    }
    CUresult (*get_version)(int *) = (CUresult(*)(int *))dlsym(lib, "cuDriverGetVersion");
    int v = 0;
    if (get_version && get_version(&v) == CUDA_SUCCESS) ng_atomic_store_relaxed(&driver_version, v);
    ng_atomic_store_release(&driver_state, resolve(lib) == 0 ? 1 : -1);
}

int ncclguard_markers_driver_version(void)
{
    return ng_atomic_load_relaxed(&driver_version);
}

int ncclguard_markers_open(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, open_once);
    return ng_atomic_load_acquire(&driver_state) == 1 ? 0 : -1;
}

void ncclguard_markers_set_anchor_period(int64_t ns)
{
    if (ns > 0) anchor_refresh_ns = ns;
}

void ncclguard_markers_set_pool_size(uint64_t markers)
{
    if (markers > MAX_MARKERS) markers = MAX_MARKERS;
    if (markers >= 16 && !ng_atomic_load_acquire(&npools)) pool_size = (int)markers;
}

static void free_push(struct pool *p, uint32_t i)
{
    uint64_t old = ng_atomic_load_relaxed(&p->head), neu;
    do {
        ng_atomic_store_relaxed(&p->next[i], (uint32_t)old);
        neu = ((old >> 32) + 1) << 32 | (i + 1);
    } while (!ng_atomic_cas_weak_release(&p->head, &old, neu));
}

static int free_pop(struct pool *p)
{
    uint64_t old = ng_atomic_load_acquire(&p->head), neu;
    do {
        uint32_t top = (uint32_t)old;
        if (!top) return -1;
        uint32_t next = ng_atomic_load_relaxed(&p->next[top - 1]);
        neu = ((old >> 32) + 1) << 32 | next;
    } while (!ng_atomic_cas_weak_acquire(&p->head, &old, neu));
    return (int)(uint32_t)old - 1;
}

/* The driver's answers for an event, stream or context whose context is gone
 * (released and perhaps retained again under the same handle). */
static int context_gone(CUresult r)
{
    return r == CUDA_ERROR_CONTEXT_IS_DESTROYED || r == CUDA_ERROR_INVALID_CONTEXT ||
           r == CUDA_ERROR_INVALID_HANDLE;
}

/* The pool's context is gone: its events are unusable. The pool is left out of
 * every lookup from now on (its slot is not reused: records may still name its
 * markers), and the next creation on that handle, or the watchdog, makes a new
 * one. Any thread; idempotent. */
static void retire(struct pool *p)
{
    CUcontext ctx = ng_atomic_exchange_acq_rel(&p->ctx, NULL);
    if (!ctx) return;
    ng_atomic_add_relaxed(&retired, 1);
    ng_atomic_store_relaxed(&wanted, ctx);
}

/* Creates the pool of `ctx` (current on this thread). Not on the hot path. */
static void create_pool(CUcontext ctx)
{
    pthread_mutex_lock(&pool_lock);
    int n = ng_atomic_load_acquire(&npools);
    for (int i = 0; i < n; i++)
        if (ng_atomic_load_relaxed(&pools[i].ctx) == ctx) goto out;
    if (n == MAX_POOLS) {
        NG_WARN_ONCE("more than %d CUDA contexts: ops on the others are not tracked", MAX_POOLS);
        goto out;
    }
    struct pool *p = &pools[n];
    p->size = pool_size;
    p->start = calloc((size_t)p->size, sizeof *p->start);
    p->end = calloc((size_t)p->size, sizeof *p->end);
    p->next = calloc((size_t)p->size, sizeof *p->next);
    if (!p->start || !p->end || !p->next) goto fail;
    for (int i = 0; i < p->size; i++)
        if (cu.event_create(&p->start[i], CU_EVENT_DEFAULT) ||
            cu.event_create(&p->end[i], CU_EVENT_DEFAULT))
            goto fail;
    if (cu.stream_create(&p->anchor_stream, CU_STREAM_NON_BLOCKING) ||
        cu.event_create(&p->anchor, CU_EVENT_DEFAULT))
        goto fail;
    for (int i = p->size - 1; i >= 0; i--) free_push(p, (uint32_t)i);
    ng_atomic_store_release(&p->ctx, ctx);
    ng_atomic_store_release(&npools, n + 1);
    goto out;
fail:
    /* Events already made are kept (destroying may synchronize); the pool
     * slot is not published, so nothing uses them. */
    NG_WARN_ONCE("cannot create CUDA events for a marker pool: ops on this context are "
                 "not tracked on the GPU");
out:
    pthread_mutex_unlock(&pool_lock);
}

static struct pool *pool_of(CUcontext ctx, int *id)
{
    int n = ng_atomic_load_acquire(&npools);
    for (int i = 0; i < n; i++)
        if (ng_atomic_load_acquire(&pools[i].ctx) == ctx) {
            *id = i;
            return &pools[i];
        }
    return NULL;
}

/* A context released and retained again can come back under the same handle,
 * with the events of its old pool dead: ask one of them before trusting it. */
void ncclguard_markers_prepare_current(void)
{
    CUcontext ctx = NULL;
    if (ncclguard_markers_open() || cu.ctx_get_current(&ctx) || !ctx) return;
    int id;
    struct pool *p = pool_of(ctx, &id);
    if (p && context_gone(cu.event_query(p->anchor))) retire(p);
    create_pool(ctx);
}

enum ng_capture ncclguard_stream_capturing(void *stream)
{
    if (ng_atomic_load_acquire(&driver_state) != 1) return NG_CAPTURE_NONE;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu.stream_is_capturing((CUstream)stream, &status) != CUDA_SUCCESS)
        return NG_CAPTURE_UNKNOWN;
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) return NG_CAPTURE_NONE;
    ng_atomic_add_relaxed(&captured, 1);
    return NG_CAPTURE_ACTIVE;
}

enum ng_marker_begin ncclguard_marker_begin(void *stream, int start, int *marker)
{
    if (ng_atomic_load_acquire(&driver_state) != 1) return NG_MARKER_NONE;
    CUstream s = stream;
    switch (ncclguard_stream_capturing(stream)) {
    case NG_CAPTURE_NONE: break;
    case NG_CAPTURE_ACTIVE: return NG_MARKER_CAPTURED;
    case NG_CAPTURE_UNKNOWN: ng_atomic_add_relaxed(&no_marker, 1); return NG_MARKER_NONE;
    }
    CUcontext ctx = NULL;
    int id = 0;
    struct pool *p = NULL;
    if (cu.stream_get_ctx(s, &ctx) == CUDA_SUCCESS) p = pool_of(ctx, &id);
    int i = p ? free_pop(p) : -1;
    if (i < 0) {
        if (!p && ctx) ng_atomic_store_relaxed(&wanted, ctx);
        if (p)
            NG_WARN_ONCE("all %d CUDA event pairs of a context are in use: later ops are "
                         "recorded without GPU progress; raise NCCLGUARD_RING", p->size);
        ng_atomic_add_relaxed(&no_marker, 1);
        return NG_MARKER_NONE;
    }
    CUresult r = start ? cu.event_record(p->start[i], s) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) {
        free_push(p, (uint32_t)i);
        if (context_gone(r)) retire(p);
        ng_atomic_add_relaxed(&no_marker, 1);
        return NG_MARKER_NONE;
    }
    *marker = id * MAX_MARKERS + i;
    return NG_MARKER_OK;
}

static struct pool *pool_at(int marker, int *i)
{
    int id = marker / MAX_MARKERS;
    *i = marker % MAX_MARKERS;
    if (marker < 0 || id >= ng_atomic_load_acquire(&npools)) return NULL;
    return &pools[id];
}

int ncclguard_marker_end(int marker, void *stream)
{
    int i;
    struct pool *p = pool_at(marker, &i);
    return p && cu.event_record(p->end[i], (CUstream)stream) == CUDA_SUCCESS ? 0 : -1;
}

void ncclguard_marker_release(int marker)
{
    int i;
    struct pool *p = pool_at(marker, &i);
    if (p) free_push(p, (uint32_t)i);
}

/* GPU time of a completed event on the host's CLOCK_REALTIME scale. */
static int64_t event_time(struct pool *p, CUevent ev)
{
    float ms = 0;
    if (!p->anchor_ns || !cu.event_elapsed || cu.event_elapsed(&ms, p->anchor, ev)) return 0;
    return p->anchor_ns + (int64_t)((double)ms * 1e6);
}

enum ng_marker_state ncclguard_marker_poll(int marker, int has_start, int64_t *start_ns,
                                               int64_t *end_ns)
{
    int i;
    struct pool *p = pool_at(marker, &i);
    if (!p) return NG_MARKER_ERROR;
    CUresult r = cu.event_query(p->end[i]);
    if (r == CUDA_SUCCESS) {
        *end_ns = event_time(p, p->end[i]);
        *start_ns = has_start ? event_time(p, p->start[i]) : 0;
        return NG_MARKER_DONE;
    }
    if (r != CUDA_ERROR_NOT_READY) return NG_MARKER_ERROR;
    if (!has_start) return NG_MARKER_PENDING;
    r = cu.event_query(p->start[i]);
    if (r == CUDA_SUCCESS) {
        *start_ns = event_time(p, p->start[i]);
        return NG_MARKER_STARTED;
    }
    return r == CUDA_ERROR_NOT_READY ? NG_MARKER_PENDING : NG_MARKER_ERROR;
}

void ncclguard_markers_watchdog_setup(void)
{
    if (ncclguard_markers_open()) return;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (cu.exchange_capture_mode(&mode) != CUDA_SUCCESS)
        NG_WARN("cannot set the watchdog's stream capture mode to relaxed; its event queries "
                "could invalidate CUDA graph captures");
}

int ncclguard_markers_relaxed_begin(void)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (ng_atomic_load_acquire(&driver_state) != 1 ||
        cu.exchange_capture_mode(&mode) != CUDA_SUCCESS)
        return -1;
    return (int)mode;
}

void ncclguard_markers_relaxed_end(int saved)
{
    CUstreamCaptureMode mode = (CUstreamCaptureMode)saved;
    if (saved >= 0) cu.exchange_capture_mode(&mode);
}

/* Records the pool's anchor event on its private stream and notes the host
 * time, so that event times can be put on the host clock. */
static void refresh_anchor(struct pool *p)
{
    int64_t now = ng_clock_ns(CLOCK_MONOTONIC);
    CUcontext ctx = ng_atomic_load_acquire(&p->ctx);
    if (!ctx || (p->anchor_ns && now - p->anchor_taken_mono_ns < anchor_refresh_ns)) return;
    CUresult r = cu.ctx_push(ctx);
    if (r != CUDA_SUCCESS) {
        if (context_gone(r)) retire(p);
        return;
    }
    int64_t t0 = ng_clock_ns(CLOCK_REALTIME);
    if (cu.event_record(p->anchor, p->anchor_stream) == CUDA_SUCCESS &&
        cu.event_synchronize(p->anchor) == CUDA_SUCCESS) {
        int64_t t1 = ng_clock_ns(CLOCK_REALTIME);
        p->anchor_ns = t0 + (t1 - t0) / 2;
        p->anchor_taken_mono_ns = now;
    }
    CUcontext dummy;
    cu.ctx_pop(&dummy);
}

void ncclguard_markers_maintain(void)
{
    if (ng_atomic_load_acquire(&driver_state) != 1) return;
    CUcontext want = ng_atomic_exchange_relaxed(&wanted, NULL);
    int id;
    if (want && !pool_of(want, &id) && cu.ctx_push(want) == CUDA_SUCCESS) {
        create_pool(want);
        CUcontext dummy;
        cu.ctx_pop(&dummy);
    }
    int n = ng_atomic_load_acquire(&npools);
    for (int i = 0; i < n; i++) refresh_anchor(&pools[i]);
}

void ncclguard_markers_stats(struct ng_marker_stats *out)
{
    out->no_marker = ng_atomic_load_relaxed(&no_marker);
    out->captured = ng_atomic_load_relaxed(&captured);
    out->pools = ng_atomic_load_acquire(&npools) - ng_atomic_load_relaxed(&retired);
}

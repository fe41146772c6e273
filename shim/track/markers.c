/*
 * markers.c: see markers.h.
 *
 * Driver functions are looked up by the exact names libcuda.so.1 exports
 * (cuda.h renames several: cuEventDestroy is cuEventDestroy_v2, and so on),
 * so that the shim works whatever runtime or headers the job was built with.
 *
 * Pools: one per CUDA context, up to MAX_POOLS. A pool holds `pool_size`
 * plain markers (events created with CU_EVENT_DISABLE_TIMING: a record of one
 * costs a fraction of a timing event's on a real GPU) and `ntimed` timed
 * markers (CU_EVENT_DEFAULT) for the sampled ops. A timed marker carries
 * MARKER_TIMED in its number.
 *
 * Free markers wait on lock-free stacks; a stack's head packs a 32-bit tag
 * with the index, so a pop racing with a pop and a push cannot be fooled
 * (ABA). Each set has a shared stack, where all start, and HOMES home stacks:
 * a thread takes from its home first, a marker goes back to the home of the
 * thread that took it, and so each thread keeps recording the same events,
 * whose driver objects stay in its core's caches, instead of ones another
 * core just used (docs/architecture.md has what it saves). A thread whose home
 * and the shared stack are empty takes from the other homes, so no op goes
 * untracked while any marker is free.
 *
 * Context cache: each thread remembers the pool of its last STREAM_CACHE
 * streams, so that an op asks the driver for its stream's context only the
 * first time. It assumes what the driver guarantees: a stream's context is
 * fixed for the stream's life. A handle can outlive its stream (cuStreamDestroy
 * is not intercepted) and come back as a stream of another context; the first
 * record on it then fails (an event of one context recorded on a stream of
 * another is refused), and the entry is dropped and the context asked again.
 * The special handles (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) name a
 * stream of the thread's current context, which can change: never cached.
 */
#include "track/markers.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "base/mem.h"
#include "base/atomic.h"
#include "base/clock.h"
#include "base/log.h"
#include "track/kmarks.h"

#define MAX_POOLS 16
#define MAX_MARKERS 65536      /* per pool: a marker is pool * MAX_MARKERS + index */
#define MARKER_TIMED (1 << 30) /* set in a timed marker's number */
#define STREAM_CACHE 4
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
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_release)(CUdevice);
} cu;

#define HOMES 16
#define SHARED HOMES /* the stack index of the shared stack */

/* A stack's head, (tag << 32) | (index + 1), 0 = empty, on a line of its own. */
struct stack_head {
    ng_atomic(uint64_t) head;
    char pad[64 - sizeof(uint64_t)];
};

/* One kind of marker: `size` pairs of events and the free ones. */
struct pairs {
    int size;
    CUevent *start, *end;
    ng_atomic(uint32_t) * next;         /* links, whichever stack a pair is on */
    ng_atomic(uint8_t) * home;          /* the stack a pair goes back to */
    struct stack_head stack[HOMES + 1]; /* the homes, then the shared one */
};

struct pool {
    ng_atomic(CUcontext) ctx; /* published once the pool is complete */
    struct pairs plain, timed;
    CUstream anchor_stream;
    CUevent anchor;
    int64_t anchor_ns, anchor_taken_mono_ns;
};

static struct pool pools[MAX_POOLS];
static ng_atomic(int) npools;
static ng_atomic(CUcontext) wanted; /* a context that asked for a pool */
static int pool_size = 4096;
static int timing_sample = 16;        /* NCCLGUARD_TIMING_SAMPLE: sizes the timed pairs */
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
        {"cuDeviceGet", (void **)&cu.device_get, 0},
        {"cuDevicePrimaryCtxRetain", (void **)&cu.primary_retain, 0},
        {"cuDevicePrimaryCtxRelease_v2", (void **)&cu.primary_release, 0},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        *fns[i].slot = dlsym(lib, fns[i].name);
        if (!*fns[i].slot && fns[i].required) {
            NG_WARN("libcuda.so.1 lacks %s: GPU progress of NCCL ops is not tracked", fns[i].name);
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

void ncclguard_markers_set_timing_sample(int every)
{
    if (every >= 0 && !ng_atomic_load_acquire(&npools)) timing_sample = every;
}

static void push(struct pairs *k, int stack, uint32_t i)
{
    ng_atomic(uint64_t) *head = &k->stack[stack].head;
    uint64_t old = ng_atomic_load_relaxed(head), neu;
    do {
        ng_atomic_store_relaxed(&k->next[i], (uint32_t)old);
        neu = ((old >> 32) + 1) << 32 | (i + 1);
    } while (!ng_atomic_cas_weak_release(head, &old, neu));
}

static inline __attribute__((always_inline)) int pop(struct pairs *k, int stack)
{
    ng_atomic(uint64_t) *head = &k->stack[stack].head;
    uint64_t old = ng_atomic_load_acquire(head), neu;
    do {
        uint32_t top = (uint32_t)old;
        if (!top) return -1;
        uint32_t next = ng_atomic_load_relaxed(&k->next[top - 1]);
        neu = ((old >> 32) + 1) << 32 | next;
    } while (!ng_atomic_cas_weak_acquire(head, &old, neu));
    return (int)(uint32_t)old - 1;
}

/* This thread's home stack. */
static NG_TLS int thread_home = -1;
static ng_atomic(int) homes_given;

static int my_home(void)
{
    if (__builtin_expect(thread_home < 0, 0))
        thread_home = (int)((unsigned)ng_atomic_add_relaxed(&homes_given, 1) % HOMES);
    return thread_home;
}

/* A free pair of k for this thread, which becomes its home's; -1: none. */
static inline __attribute__((always_inline)) int take(struct pairs *k)
{
    int h = my_home(), i = pop(k, h);
    if (__builtin_expect(i >= 0, 1)) return i;
    i = pop(k, SHARED);
    for (int j = 1; i < 0 && j < HOMES; j++) i = pop(k, (h + j) % HOMES);
    if (i >= 0) ng_atomic_store_relaxed(&k->home[i], (uint8_t)h);
    return i;
}

/* Pair i of k is free again: back to its home. */
static void give_back(struct pairs *k, uint32_t i)
{
    push(k, ng_atomic_load_relaxed(&k->home[i]), i);
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

static void take_anchor(struct pool *p, int64_t now);

/* Creates n pairs of events with `flags` in the current context, all free. */
static int create_pairs(struct pairs *k, int n, unsigned flags)
{
    k->size = n;
    if (!n) return 0;
    k->start = calloc((size_t)n, sizeof *k->start);
    k->end = calloc((size_t)n, sizeof *k->end);
    k->next = calloc((size_t)n, sizeof *k->next);
    k->home = calloc((size_t)n, sizeof *k->home);
    if (!k->start || !k->end || !k->next || !k->home) return -1;
    ncclguard_mem_add((size_t)n *
                      (sizeof *k->start + sizeof *k->end + sizeof *k->next + sizeof *k->home));
    for (int i = 0; i < n; i++)
        if (cu.event_create(&k->start[i], flags) || cu.event_create(&k->end[i], flags)) return -1;
    for (int i = n - 1; i >= 0; i--) push(k, SHARED, (uint32_t)i);
    return 0;
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
    /* Timed pairs: enough for one op in timing_sample of a full pool, and 64
     * for the first ops of each class; none with sampling off. */
    int ntimed = timing_sample ? pool_size / timing_sample + 64 : 0;
    if (create_pairs(&p->plain, pool_size, CU_EVENT_DISABLE_TIMING) ||
        create_pairs(&p->timed, ntimed < pool_size ? ntimed : pool_size, CU_EVENT_DEFAULT) ||
        cu.stream_create(&p->anchor_stream, CU_STREAM_NON_BLOCKING) ||
        cu.event_create(&p->anchor, CU_EVENT_DEFAULT))
        goto fail;
    /* The first anchor now, before the pool is published (the watchdog owns it
     * then), so that the first op of each class gets its GPU times. */
    if (p->timed.size) take_anchor(p, ng_clock_ns(CLOCK_MONOTONIC));
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

/* ncclguard_stream_capturing, the driver known to be open. */
static inline enum ng_capture capturing(CUstream stream)
{
    CUstreamCaptureStatus status; /* set by the driver when it answers */
    if (cu.stream_is_capturing((CUstream)stream, &status) != CUDA_SUCCESS)
        return NG_CAPTURE_UNKNOWN;
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) return NG_CAPTURE_NONE;
    ng_atomic_add_relaxed(&captured, 1);
    return NG_CAPTURE_ACTIVE;
}

enum ng_capture ncclguard_stream_capturing(void *stream)
{
    if (ng_atomic_load_acquire(&driver_state) != 1) return NG_CAPTURE_NONE;
    return capturing((CUstream)stream);
}

/* The thread's context cache (see the file comment). */
struct stream_pool {
    CUstream stream;
    CUcontext ctx; /* the pool's context when cached: a retired pool misses */
    struct pool *pool;
    int id;
};
static NG_TLS struct stream_pool stream_cache[STREAM_CACHE];
static NG_TLS unsigned stream_cache_next;

static int cacheable(CUstream s)
{
    return (uintptr_t)s > (uintptr_t)CU_STREAM_PER_THREAD;
}

static struct stream_pool *cache_entry(CUstream s)
{
    for (int i = 0; i < STREAM_CACHE; i++)
        if (stream_cache[i].stream == s) return &stream_cache[i];
    return NULL;
}

/* The pool of stream s, from the thread's cache (*cached = 1) or the driver;
 * NULL when there is none (*ctx says which context lacks one). */
static inline __attribute__((always_inline)) struct pool *stream_pool(CUstream s, int *id,
                                                                      CUcontext *ctx, int *cached)
{
    struct stream_pool *e = cacheable(s) ? cache_entry(s) : NULL;
    if (e && ng_atomic_load_acquire(&e->pool->ctx) == e->ctx) {
        *cached = 1;
        *id = e->id;
        *ctx = e->ctx;
        return e->pool;
    }
    *cached = 0;
    *ctx = NULL;
    if (cu.stream_get_ctx(s, ctx) != CUDA_SUCCESS) return NULL;
    struct pool *p = pool_of(*ctx, id);
    if (p && cacheable(s)) {
        if (!e) e = &stream_cache[stream_cache_next++ % STREAM_CACHE];
        *e = (struct stream_pool){s, *ctx, p, *id};
    }
    return p;
}

/* A record on s failed: s may be a new stream under an old handle. */
static void forget_stream(CUstream s)
{
    struct stream_pool *e = cacheable(s) ? cache_entry(s) : NULL;
    if (e) *e = (struct stream_pool){NULL, NULL, NULL, 0};
}

static void take_failed(struct pool *p)
{
    if (p)
        NG_WARN_ONCE("all %d CUDA event pairs of a context are in use: later ops are "
                     "recorded without GPU progress; raise NCCLGUARD_RING",
                     p->plain.size);
    ng_atomic_add_relaxed(&no_marker, 1);
}

/* The number of pair i of k, a kind of pool p (the pool's index `id`). */
static inline int marker_of(struct pool *p, int id, struct pairs *k, int i)
{
    return (k == &p->timed ? MARKER_TIMED : 0) | (id * MAX_MARKERS + i);
}

/* ncclguard_marker_begin past the capture query, for any case. */
static __attribute__((noinline)) enum ng_marker_begin
begin_general(CUstream s, int start, int timed, int *marker, void **end)
{
    CUcontext ctx;
    int id = 0, cached;
    struct pool *p = stream_pool(s, &id, &ctx, &cached);
    for (;;) {
        if (!p) {
            if (ctx) ng_atomic_store_relaxed(&wanted, ctx);
            take_failed(NULL);
            return NG_MARKER_NONE;
        }
        /* A sampled op takes a timed pair while there is one, else a plain one. */
        struct pairs *k = timed && p->timed.size ? &p->timed : &p->plain;
        int i = take(k);
        if (i < 0 && k == &p->timed) i = take(k = &p->plain);
        if (i < 0) {
            take_failed(p);
            return NG_MARKER_NONE;
        }
        CUresult r = start ? cu.event_record(k->start[i], s) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS) {
            *marker = marker_of(p, id, k, i);
            *end = k->end[i];
            return NG_MARKER_OK;
        }
        give_back(k, (uint32_t)i);
        if (cached) { /* ask the driver again: a new stream under an old handle? */
            struct pool *was = p;
            forget_stream(s);
            p = stream_pool(s, &id, &ctx, &cached);
            if (p != was) continue;
        }
        if (p && context_gone(r)) retire(p);
        ng_atomic_add_relaxed(&no_marker, 1);
        return NG_MARKER_NONE;
    }
}

enum ng_marker_begin ncclguard_marker_begin(void *stream, int start, int timed, int *marker,
                                            void **end)
{
    if (ng_atomic_load_acquire(&driver_state) != 1) return NG_MARKER_NONE;
    CUstream s = stream;
    switch (capturing(s)) {
    case NG_CAPTURE_NONE: break;
    case NG_CAPTURE_ACTIVE: return NG_MARKER_CAPTURED;
    case NG_CAPTURE_UNKNOWN: ng_atomic_add_relaxed(&no_marker, 1); return NG_MARKER_NONE;
    }
    /* The common case here, with few values to keep: a stream in the thread's
     * cache, a free pair, a record that succeeds. Anything else, a failed
     * record included, goes the general way (which tries again). */
    struct stream_pool *e = cacheable(s) ? cache_entry(s) : NULL;
    if (__builtin_expect(e && ng_atomic_load_acquire(&e->pool->ctx) == e->ctx, 1)) {
        struct pool *p = e->pool;
        struct pairs *k = timed && p->timed.size ? &p->timed : &p->plain;
        int i = take(k);
        if (__builtin_expect(i >= 0, 1)) {
            /* the outputs first: nothing but them is needed after the record */
            *marker = marker_of(p, e->id, k, i);
            *end = k->end[i];
            if (!start || cu.event_record(k->start[i], s) == CUDA_SUCCESS) return NG_MARKER_OK;
            ncclguard_marker_release(*marker);
        }
    }
    return begin_general(s, start, timed, marker, end);
}

static struct pool *pool_at(int marker, struct pairs **k, int *i)
{
    if (marker < 0) return NULL;
    int n = marker & ~MARKER_TIMED, id = n / MAX_MARKERS;
    *i = n % MAX_MARKERS;
    if (id >= ng_atomic_load_acquire(&npools)) return NULL;
    *k = marker & MARKER_TIMED ? &pools[id].timed : &pools[id].plain;
    return &pools[id];
}

int ncclguard_marker_end_event(void *end, void *stream)
{
    if (cu.event_record((CUevent)end, (CUstream)stream) == CUDA_SUCCESS) return 0;
    forget_stream((CUstream)stream);
    return -1;
}

int ncclguard_marker_end(int marker, void *stream)
{
    int i;
    struct pairs *k;
    if (pool_at(marker, &k, &i)) return ncclguard_marker_end_event(k->end[i], stream);
    forget_stream((CUstream)stream);
    return -1;
}

void ncclguard_marker_release(int marker)
{
    if (ng_is_kmark(marker)) return ncclguard_kmark_release(marker);
    int i;
    struct pairs *k;
    if (pool_at(marker, &k, &i)) give_back(k, (uint32_t)i);
}

/* GPU time of a completed timed event on the host's CLOCK_REALTIME scale. */
static int64_t event_time(struct pool *p, CUevent ev)
{
    float ms = 0;
    if (!p->anchor_ns || !cu.event_elapsed || cu.event_elapsed(&ms, p->anchor, ev)) return 0;
    return p->anchor_ns + (int64_t)((double)ms * 1e6);
}

enum ng_marker_state ncclguard_marker_poll(int marker, int has_start, int64_t *start_ns,
                                           int64_t *end_ns)
{
    if (ng_is_kmark(marker)) return ncclguard_kmark_poll(marker, start_ns, end_ns);
    int i;
    struct pairs *k;
    struct pool *p = pool_at(marker, &k, &i);
    if (!p) return NG_MARKER_ERROR;
    /* Plain events have no time to give: the caller has its discovery times. */
    int timed = k == &p->timed;
    CUresult r = cu.event_query(k->end[i]);
    if (r == CUDA_SUCCESS) {
        *end_ns = timed ? event_time(p, k->end[i]) : 0;
        *start_ns = timed && has_start ? event_time(p, k->start[i]) : 0;
        return NG_MARKER_DONE;
    }
    if (r != CUDA_ERROR_NOT_READY) return NG_MARKER_ERROR;
    if (!has_start) return NG_MARKER_PENDING;
    r = cu.event_query(k->start[i]);
    if (r == CUDA_SUCCESS) {
        *start_ns = timed ? event_time(p, k->start[i]) : 0;
        return NG_MARKER_STARTED;
    }
    return r == CUDA_ERROR_NOT_READY ? NG_MARKER_PENDING : NG_MARKER_ERROR;
}

int ncclguard_marker_passed(int marker, int end)
{
    if (ng_is_kmark(marker)) return ncclguard_kmark_passed(marker, end);
    int i;
    struct pairs *k;
    if (!pool_at(marker, &k, &i)) return -1;
    CUresult r = cu.event_query(end ? k->end[i] : k->start[i]);
    return r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_NOT_READY ? 0 : -1;
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

/* Refreshes the pool's anchor (below); its context is current. */
static void take_anchor(struct pool *p, int64_t now)
{
    int64_t t0 = ng_clock_ns(CLOCK_REALTIME);
    if (cu.event_record(p->anchor, p->anchor_stream) == CUDA_SUCCESS &&
        cu.event_synchronize(p->anchor) == CUDA_SUCCESS) {
        int64_t t1 = ng_clock_ns(CLOCK_REALTIME);
        p->anchor_ns = t0 + (t1 - t0) / 2;
        p->anchor_taken_mono_ns = now;
    }
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
    take_anchor(p, now);
    CUcontext dummy;
    cu.ctx_pop(&dummy);
}

void ncclguard_markers_prepare_device(int ordinal)
{
    CUdevice dev;
    CUcontext ctx = NULL;
    if (ncclguard_markers_open() || !cu.device_get || !cu.primary_retain || !cu.primary_release ||
        cu.device_get(&dev, ordinal) != CUDA_SUCCESS ||
        cu.primary_retain(&ctx, dev) != CUDA_SUCCESS)
        return;
    int id;
    if (ctx && !pool_of(ctx, &id) && cu.ctx_push(ctx) == CUDA_SUCCESS) {
        create_pool(ctx);
        CUcontext dummy;
        cu.ctx_pop(&dummy);
    }
    cu.primary_release(dev);
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

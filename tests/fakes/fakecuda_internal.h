/*
 * fakecuda_internal.h: shared definitions of the fake libcuda.so.1 (CPU harness).
 *
 * The fake is a CUDA driver whose "GPU" is a set of host worker threads, one per stream.
 * Every object a caller can hold (context, stream, event, graph, graph exec) lives in a
 * slot of a handle arena (fakecuda_handle.c) that is never freed nor reused, so a stale or
 * foreign pointer is recognised instead of crashing the fake.
 *
 * Modules and what they own:
 *   fakecuda_init.c     cuInit, configuration (FAKECUDA_*), fork handling, the API entry check,
 *                       loud misuse lines, thread ids, the clock
 *   fakecuda_handle.c   the handle arena
 *   fakecuda_errors.c   cuGetErrorString / cuGetErrorName
 *   fakecuda_device.c   devices
 *   fakecuda_ctx.c      contexts, primary contexts, the per-thread context stack
 *   fakecuda_queue.c    stream queues, worker threads, the legacy-stream barriers, waiting
 *   fakecuda_stream.c   the stream API, special stream handles, per-thread default streams
 *   fakecuda_event.c    events
 *   fakecuda_capture.c  stream capture and the "potentially unsafe call" rule
 *   fakecuda_graph.c    graphs, graph execs, cuGraphLaunch
 *   fakecuda_mem.c      memory
 *   fakecuda_procaddr.c cuGetProcAddress (table in fakecuda_procs.def)
 *   fakecuda_test.c     the test-only API of fakecuda.h
 *
 * Lock order (a thread holding one lock may only take locks further right):
 *   g_ctx_lock -> ctx->lock -> stream->lock
 *   event->lock -> stream->lock
 *   g_ctx_lock -> g_prog_mu -> ctx->lock   (a waiter evaluating a legacy-stream barrier)
 *   g_cap_lock, g_mem_lock: leaves, taken with no other lock held (g_ctx_lock aside).
 * No lock is ever held while a stream worker runs an operation (host function, kernel).
 */
#ifndef FAKECUDA_INTERNAL_H
#define FAKECUDA_INTERNAL_H

/*
 * Compile as the real driver is compiled: with __CUDA_API_VERSION_INTERNAL, cuda.h does not
 * rename cuFoo to cuFoo_v2 and declares the older ABI versions under their exported names,
 * so every definition in the fake is checked against the prototype of the symbol it exports.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fakecuda.h"

#define FC_API __attribute__((visibility("default")))

/* One error idiom: return the first failing CUresult. */
#define FC_TRY(expr)                                 \
    do {                                             \
        CUresult fc_try_ = (expr);                   \
        if (fc_try_ != CUDA_SUCCESS) return fc_try_; \
    } while (0)

#define FC_DRIVER_VERSION 13000
#define FC_MAX_DEVICES 64
#define FC_TICKET_NONE UINT64_MAX

/* ---- per-thread default stream variants that cuda.h only declares with PTDS on ---- */
CUresult cuStreamQuery_ptsz(CUstream hStream);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx);
CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx);
CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags);
CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId);
CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *status,
                                        cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                                        const CUgraphEdgeData **edges, size_t *ndeps);
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags);
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream);

/* ---------------------------------- handles ---------------------------------- */

enum fc_kind {
    FC_KIND_CTX = 0x43545801,
    FC_KIND_STREAM,
    FC_KIND_EVENT,
    FC_KIND_GRAPH,
    FC_KIND_EXEC
};

/* First member of every handle object. */
struct fc_hdr {
    uint32_t kind;          /* enum fc_kind, fixed when the slot is handed out */
    _Atomic uint32_t alive; /* 1 until the handle is destroyed; slots are never reused */
};

enum fc_handle_state { FC_HANDLE_FOREIGN, FC_HANDLE_DEAD, FC_HANDLE_ALIVE };

/* Returns a zeroed slot of at least size bytes with hdr set to (kind, alive), or NULL. */
void *fc_handle_new(uint32_t kind, size_t size);
/* Classifies p without dereferencing it unless it lies in the arena. Lock-free. */
enum fc_handle_state fc_handle_state(const void *p, uint32_t kind);
/* CUDA_SUCCESS when p is a live handle of kind; else complains for call that the `what` at p
 * was destroyed, or that p is not a `what`, and returns CUDA_ERROR_INVALID_HANDLE. */
CUresult fc_handle_check(const void *p, uint32_t kind, const char *call, const char *what);
/* Marks a handle destroyed; returns false when it already was. */
bool fc_handle_kill(void *p);

/* ----------------------------------- work ------------------------------------ */

enum fc_work_kind {
    FC_WORK_NOP,         /* a marker: completes when reached */
    FC_WORK_HOST,        /* cuLaunchHostFunc */
    FC_WORK_SLEEP,       /* fakecuda_test_kernel */
    FC_WORK_SPIN,        /* fakecuda_test_spin */
    FC_WORK_COPY,        /* memcpy */
    FC_WORK_SET8,        /* memset, 1-byte elements */
    FC_WORK_SET32,       /* memset, 4-byte elements */
    FC_WORK_RECORD,      /* event record: the event reaches generation gen */
    FC_WORK_WAIT,        /* wait until stream s has completed the op with ticket */
    FC_WORK_NODE_RECORD, /* graph node: event record captured in a stream */
    FC_WORK_NODE_WAIT,   /* graph node: event wait captured in a stream */
};

struct fc_event;
struct fc_stream;

/* One unit of stream work; also the node type of a captured graph. */
struct fc_work {
    enum fc_work_kind kind;
    union {
        struct {
            CUhostFn fn;
            void *arg;
        } host;
        uint64_t sleep_ns;
        const volatile int *spin_flag;
        struct {
            void *dst;
            const void *src;
            size_t n;
        } copy;
        struct {
            void *dst;
            uint32_t value;
            size_t n;
        } set;
        struct {
            struct fc_event *ev;
            uint64_t gen;
        } record;
        struct {
            struct fc_stream *s;
            uint64_t ticket;
        } wait;
        /* NODE_RECORD / NODE_WAIT: external nodes act at each launch, others do nothing */
        struct {
            struct fc_event *ev;
            bool external;
        } node;
    } u;
};

/* ---------------------------------- contexts --------------------------------- */

struct fc_ctx {
    struct fc_hdr hdr;
    int device;
    bool primary;
    unsigned flags;
    unsigned long long id;
    _Atomic bool active;       /* false once destroyed (primary: released to zero) */
    _Atomic uint64_t gen;      /* incarnation, bumped at each (re)activation */
    int refcount;              /* primary contexts only; under g_ctx_lock */
    pthread_mutex_t lock;      /* protects streams (the list) */
    struct fc_stream *streams; /* streams that may still run work, draining ones included */
    _Atomic(struct fc_stream *) legacy; /* legacy default stream of this incarnation */
    _Atomic uint64_t next_ticket;
    _Atomic int capturing_blocking; /* blocking streams of this context now capturing */
};

/* The current context of the calling thread, or INVALID_CONTEXT (loud) when none. */
CUresult fc_ctx_current(const char *call, struct fc_ctx **out);
/* Validates an explicit context handle (INVALID_CONTEXT, loud, when stale or foreign). */
CUresult fc_ctx_lookup(CUcontext h, const char *call, struct fc_ctx **out);
/* True while ctx is active in incarnation gen. */
bool fc_ctx_usable(struct fc_ctx *ctx, uint64_t gen);

/* ---------------------------------- streams ---------------------------------- */

enum fc_stream_kind { FC_STREAM_USER, FC_STREAM_LEGACY, FC_STREAM_PER_THREAD };

struct fc_capture;

struct fc_op {
    struct fc_op *next;
    uint64_t ticket;
    struct fc_work w;
};

struct fc_stream {
    struct fc_hdr hdr;
    enum fc_stream_kind kind;
    unsigned flags;
    int priority;
    unsigned long long id;
    struct fc_ctx *ctx;
    struct fc_stream *legacy;  /* blocking streams: the legacy stream they order against */
    pthread_mutex_t lock;      /* protects the queue, the pool and the flags below */
    pthread_cond_t wake;       /* the worker sleeps here when the queue is empty */
    struct fc_op *head, *tail; /* head: the op being run, or the next one */
    struct fc_op *pool;        /* recycled ops: no allocation in steady state */
    bool worker_started;
    bool stopping;                /* destroyed: the worker drains the queue, then exits */
    bool listed;                  /* on ctx->streams; under ctx->lock */
    struct fc_stream *ctx_next;   /* under ctx->lock */
    _Atomic uint64_t head_ticket; /* ticket of the oldest unfinished op, FC_TICKET_NONE */
    _Atomic uint64_t wait_ticket; /* ticket of the oldest op not yet started, FC_TICKET_NONE */
    _Atomic uint64_t enq_count;   /* ops pushed so far */
    _Atomic uint64_t done_count;  /* ops completed so far */
    _Atomic(struct fc_capture *) capture; /* written under g_cap_lock */
    int64_t cap_last_node;   /* index of this stream's last captured node; g_cap_lock */
    int64_t cap_joined_upto; /* last node joined back into the capture; g_cap_lock */
};

/* True for streams that synchronise with the legacy stream. */
static inline bool fc_stream_blocking(const struct fc_stream *s)
{
    return s->kind != FC_STREAM_LEGACY && !(s->flags & CU_STREAM_NON_BLOCKING);
}

/* queue (fakecuda_queue.c) */
struct fc_stream *fc_stream_alloc(struct fc_ctx *ctx, enum fc_stream_kind kind, unsigned flags,
                                  int priority);
void fc_stream_retire(struct fc_stream *s);
/* Appends w to the queue of s; first blocks while the queue s feeds is full (queue depth). */
CUresult fc_queue_push(struct fc_stream *s, const struct fc_work *w, const char *call,
                       uint64_t *ticket);
/* The two halves of fc_queue_push, for a caller that holds a lock a worker may need while
 * it waits for room (cuEventRecord): wait first, then push without waiting. */
void fc_queue_wait_room(struct fc_stream *s);
CUresult fc_queue_push_now(struct fc_stream *s, const struct fc_work *w, const char *call,
                           uint64_t *ticket);
bool fc_stream_idle(struct fc_stream *s);
CUresult fc_stream_wait_done(struct fc_stream *s, uint64_t target);
void fc_stream_wait_ticket(struct fc_stream *s, uint64_t ticket);
CUresult fc_ctx_drain(struct fc_ctx *ctx);
bool fc_legacy_idle(struct fc_ctx *ctx);
void fc_progress_notify(void);
void fc_progress_wait(bool (*ready)(void *), void *arg);
int fc_queue_live_workers(void);
void fc_queue_atfork_child(void);

/* stream API helpers (fakecuda_stream.c) */
CUresult fc_stream_resolve(CUstream h, bool ptds, const char *call, struct fc_stream **out);
CUresult fc_submit(struct fc_stream *s, const struct fc_work *w, const char *call);
CUresult fc_stream_sync(struct fc_stream *s, const char *call);
CUresult fc_run_sync(struct fc_stream *s, const struct fc_work *w, const char *call);

/* ---------------------------------- events ----------------------------------- */

struct fc_event {
    struct fc_hdr hdr;
    unsigned flags;
    struct fc_ctx *ctx;
    uint64_t ctx_gen;
    pthread_mutex_t lock;         /* protects the plain fields below */
    _Atomic uint64_t rec_gen;     /* records issued */
    _Atomic uint64_t done_gen;    /* highest record generation a worker has passed */
    uint64_t done_ns;             /* host clock when done_gen was passed */
    struct fc_stream *rec_stream; /* position of the latest record */
    uint64_t rec_ticket;
    _Atomic bool captured; /* latest record went into a capture */
    uint64_t cap_id;       /* that capture, and where in it */
    struct fc_stream *cap_stream;
    int64_t cap_node;
};

CUresult fc_event_lookup(CUevent h, const char *call, struct fc_event **out);
void fc_event_passed(struct fc_event *ev, uint64_t gen);
CUresult fc_event_record(struct fc_event *ev, struct fc_stream *s, unsigned flags,
                         const char *call);
CUresult fc_event_wait(struct fc_stream *s, struct fc_event *ev, unsigned flags, const char *call);

/* ---------------------------------- capture ---------------------------------- */

struct fc_graph;

struct fc_capture {
    struct fc_capture *next;
    uint64_t id;
    CUstreamCaptureMode mode;
    CUstreamCaptureStatus status; /* ACTIVE or INVALIDATED */
    uint64_t owner;               /* fc_thread_id() of the thread that began it */
    struct fc_stream *origin;
    struct fc_stream **members; /* origin first, then streams that joined */
    size_t nmembers, cap_members;
    struct fc_graph *graph;
};

static inline bool fc_stream_capturing(struct fc_stream *s)
{
    return atomic_load_explicit(&s->capture, memory_order_acquire) != NULL;
}

CUresult fc_capture_check_unsafe(const char *call);
CUresult fc_capture_check_legacy(struct fc_stream *s, bool invalidate, const char *call);
CUresult fc_capture_check_sync(struct fc_stream *s, const char *call);
CUresult fc_capture_check_ctx(struct fc_ctx *ctx, const char *call);
/* Appends w to the capture of s. *captured=false when s is no longer capturing. */
CUresult fc_capture_add(struct fc_stream *s, const struct fc_work *w, const char *call,
                        bool *captured, uint64_t *cap_id, int64_t *node);
CUresult fc_capture_wait_event(struct fc_stream *s, uint64_t cap_id, struct fc_stream *src,
                               int64_t src_node, bool *handled, const char *call);
bool fc_capture_invalidate(struct fc_stream *s);
void fc_capture_stream_gone(struct fc_stream *s);
void fc_capture_atfork_child(void);

/* ----------------------------------- graphs ---------------------------------- */

struct fc_graph {
    struct fc_hdr hdr;
    struct fc_work *nodes;
    size_t count, cap;
};

struct fc_graph *fc_graph_new(void);
bool fc_graph_append(struct fc_graph *g, const struct fc_work *w);
void fc_graph_discard(struct fc_graph *g);

/* ----------------------------------- memory ---------------------------------- */

void fc_mem_release_ctx(struct fc_ctx *ctx);
void fc_mem_atfork_child(void);

/* ------------------------------ init and plumbing ----------------------------- */

/* Items a queue holds when FAKECUDA_QUEUE_DEPTH is unset: a real launch queue blocks the
 * host at about a thousand pending launches per stream (docs/harness.md). */
#define FC_QUEUE_DEPTH_DEFAULT 1024

struct fc_config {
    int devices;               /* FAKECUDA_DEVICES */
    size_t mem_bytes;          /* FAKECUDA_MEM_MB, per device */
    uint64_t op_delay_ns;      /* FAKECUDA_OP_DELAY_US */
    long long stall_after_ops; /* FAKECUDA_STALL_AFTER_OPS, -1 when off */
    bool instant_events;       /* FAKECUDA_INSTANT_EVENTS: benchmarks only */
    long long queue_depth;     /* FAKECUDA_QUEUE_DEPTH: items a queue holds, 0 unbounded */
    long long max_connections; /* FAKECUDA_MAX_CONNECTIONS: queues per context, 0 per stream */
};
extern struct fc_config fc_cfg;

/* Entry check of every API call that needs cuInit: initialised, not a forked child of an
 * initialised parent, not called from a stream worker (host functions must not call CUDA). */
CUresult fc_enter(const char *call);
void fc_count_timed_record(void); /* fakecuda_thread_timed_records (fakecuda.h) */
void fc_complain(const char *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t fc_now_ns(void);
uint64_t fc_thread_id(void);
void fc_mark_worker_thread(void);
bool fc_device_valid(CUdevice dev);
void fc_ctx_atfork_child(void);
unsigned long long fc_next_id(void);

#endif

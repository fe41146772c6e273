/*
 * fakenccl profiler plugin host (see fakenccl_profiler.h; the rules and their
 * NCCL sources are in docs/harness.md, "Profiler plugin").
 */
#include "fakenccl_profiler.h"

#include "fakenccl_core.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Event type bits (nccl_profiler.h). */
enum {
    P_GROUP = 1 << 0,
    P_COLL = 1 << 1,
    P_P2P = 1 << 2,
    P_PROXY_OP = 1 << 3,
    P_PROXY_STEP = 1 << 4,
    P_KERNEL_CH = 1 << 6,
    P_NET = 1 << 7,
    P_GROUP_API = 1 << 8,
    P_COLL_API = 1 << 9,
    P_P2P_API = 1 << 10,
    P_KERNEL_LAUNCH = 1 << 11,
};
#define P_KERNEL_CH_STOP 22 /* ncclProfilerKernelChStop */
/* What turns each event on: the event's bit or that of any event below it (profiler.cc). */
#define P_BELOW (P_PROXY_OP | P_PROXY_STEP | P_KERNEL_CH | P_NET)
#define P_ON_COLL_API (P_COLL_API | P_COLL | P_BELOW)
#define P_ON_P2P_API (P_P2P_API | P_P2P | P_BELOW)
#define P_ON_GROUP_API (P_GROUP_API | P_ON_COLL_API | P_ON_P2P_API | P_KERNEL_LAUNCH | P_GROUP)
#define P_ON_GROUP (P_GROUP | P_COLL | P_P2P | P_BELOW)

typedef void (*p_logger_t)(int level, unsigned long flags, const char *file, int line,
                           const char *fmt, ...);

/* A Coll event as v4 describes it; v5 and v6 add its parentGroup after these members. */
struct p_coll_v4 {
    uint64_t seq;
    const char *func;
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    int root;
    const char *dtype;
    uint8_t nchannels, nwarps;
    const char *algo, *proto;
};

/* A P2p event as v4 describes it; v5 and v6 add its parentGroup after these members. */
struct p_p2p_v4 {
    const char *func;
    void *buff;
    const char *dtype;
    size_t count;
    int peer;
    uint8_t nchannels;
};

/* The v5 descriptor; v6 extends the same union with copy-engine members (larger). */
struct p_descr_v5 {
    uint64_t type;
    void *parent;
    int rank;
    union {
        struct {
            bool graph_captured;
            int group_depth;
        } group_api;
        struct {
            const char *func;
            size_t count;
            const char *dtype;
            int root;
            void *stream;
            bool graph_captured;
        } coll_api;
        struct {
            const char *func;
            size_t count;
            const char *dtype;
            void *stream;
            bool graph_captured;
        } p2p_api;
        struct {
            void *stream;
        } kernel_launch;
        struct {
            struct p_coll_v4 v4;
            void *parent_group;
        } coll;
        struct {
            struct p_p2p_v4 v4;
            void *parent_group;
        } p2p;
        struct {
            uint8_t channel;
            uint64_t ptimer;
        } kernel_ch;
        char v6_room[96]; /* v6's ceColl member is the largest: keep its size */
    };
};

/* v4: a uint8_t type, no API events, no parentGroup members. */
struct p_descr_v4 {
    uint8_t type;
    void *parent;
    int rank;
    union {
        struct p_coll_v4 coll;
        struct p_p2p_v4 p2p;
        struct {
            uint8_t channel;
            uint64_t ptimer;
        } kernel_ch;
    };
};

typedef union {
    struct {
        uint64_t ptimer;
    } kernel_ch;
    char room[16];
} p_state_args;

/* ncclProfiler_v4_t .. v6_t (v4's init has no commName/nNodes/nranks/rank/logfn order
 * change: it is init(ctx, mask*, commName, commHash, nNodes, nranks, rank, logfn)). */
struct p_v56 {
    const char *name;
    int (*init)(void **ctx, uint64_t comm_id, int *mask, const char *comm_name, int nnodes,
                int nranks, int rank, p_logger_t log);
    int (*start)(void *ctx, void **handle, void *descr);
    int (*stop)(void *handle);
    int (*record)(void *handle, int state, p_state_args *args);
    int (*finalize)(void *ctx);
};
struct p_v4 {
    const char *name;
    int (*init)(void **ctx, int *mask, const char *comm_name, uint64_t comm_hash, int nnodes,
                int nranks, int rank, p_logger_t log);
    int (*start)(void *ctx, void **handle, void *descr);
    int (*stop)(void *handle);
    int (*record)(void *handle, int state, p_state_args *args);
    int (*finalize)(void *ctx);
};

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int load_state; /* 0 not tried, 1 loaded, -1 none; under load_lock, then read-only */
static int version;
static const struct p_v56 *v56;
static const struct p_v4 *v4;
static int mask; /* ncclProfilerEventMask: process-wide, the plugin writes it */
static _Thread_local void *group_api;
static _Thread_local int group_api_depth;

static int cur_mask(void)
{
    return __atomic_load_n(&mask, __ATOMIC_RELAXED);
}

static void fake_log(int level, unsigned long flags, const char *file, int line, const char *fmt,
                     ...)
{
    (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

static void load(void)
{
    const char *name = fn_getenv("NCCL_PROFILER_PLUGIN");
    load_state = -1;
    if (name && !strcasecmp(name, "none")) return;
    void *h = fn_plugin_open("libnccl-profiler", name);
    if (!h) return;
    static const char *const syms[] = {"ncclProfiler_v6", "ncclProfiler_v5", "ncclProfiler_v4",
                                       "ncclProfiler_v3", "ncclProfiler_v2", "ncclProfiler_v1"};
    for (int i = 0; i < 6; i++) {
        void *s = dlsym(h, syms[i]);
        if (!s) continue;
        version = 6 - i;
        if (version >= 5)
            v56 = s;
        else if (version == 4)
            v4 = s;
        else
            fn_loud("profiler plugin API v%d found in %s: this fake drives v4 to v6 only", version,
                    name ? name : "libnccl-profiler.so");
        break;
    }
    if (v56 || v4) load_state = 1;
}

void fn_prof_comm_init(struct fn_comm *c)
{
    pthread_mutex_lock(&load_lock);
    if (!load_state) load();
    pthread_mutex_unlock(&load_lock);
    if (load_state != 1) return;
    uint64_t hash = fn_hash64(c->key, sizeof c->key, 0);
    const char *name = c->name[0] ? c->name : NULL;
    int err = v56 ? v56->init(&c->prof_ctx, hash, &mask, name, 1, c->nranks, c->rank, fake_log)
                  : v4->init(&c->prof_ctx, &mask, name, hash, 1, c->nranks, c->rank, fake_log);
    c->prof_live = err == 0; /* NCCL goes on without the profiler when init fails */
}

void fn_prof_comm_fini(struct fn_comm *c)
{
    if (!c->prof_live) return;
    c->prof_live = false;
    if (v56)
        v56->finalize(c->prof_ctx);
    else if (v4)
        v4->finalize(c->prof_ctx);
}

static void *start(struct fn_comm *c, struct p_descr_v5 *d)
{
    void *h = NULL;
    if (!c->prof_live) return NULL;
    if (v56) {
        v56->start(c->prof_ctx, &h, d);
        return h;
    }
    /* v4 knows no API events and no KernelLaunch: NCCL's v4 adapter drops them */
    if (d->type & (P_GROUP_API | P_COLL_API | P_P2P_API | P_KERNEL_LAUNCH)) return NULL;
    struct p_descr_v4 o;
    memset(&o, 0, sizeof o);
    o.type = (uint8_t)d->type;
    o.parent = d->parent;
    o.rank = d->rank;
    if (d->type == P_COLL) {
        o.coll = d->coll.v4;
        o.parent = d->coll.parent_group; /* v4: a Coll's parent is its Group */
    } else if (d->type == P_P2P) {
        o.p2p = d->p2p.v4;
        o.parent = d->p2p.parent_group;
    } else if (d->type == P_KERNEL_CH) {
        o.kernel_ch.channel = d->kernel_ch.channel, o.kernel_ch.ptimer = d->kernel_ch.ptimer;
    }
    v4->start(c->prof_ctx, &h, &o);
    return h;
}

static void stop(void *h)
{
    if (h && v56)
        v56->stop(h);
    else if (h && v4)
        v4->stop(h);
}

static bool is_p2p(const struct fn_op *op)
{
    return op->kind == FN_OP_SEND || op->kind == FN_OP_RECV;
}

/* NCCL's ncclFuncToString names (collectives.cc): "AlltoAll", with a small t. */
static const char *func_name(const struct fn_op *op)
{
    static const char *const n[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                    "ReduceScatter", "AlltoAll",  "Gather", "Scatter",
                                    "Send",          "Recv"};
    return n[op->kind];
}

/* NCCL's ncclDatatypeToString names (collectives.cc), which the events carry; it has
 * none for ncclUint8 ("Unknown"), and neither has the fake. */
static const char *dtype_name(ncclDataType_t t)
{
    static const char *const n[] = {
        [ncclInt8] = "ncclInt8",
        [ncclInt32] = "ncclInt32",
        [ncclUint32] = "ncclUint32",
        [ncclInt64] = "ncclInt64",
        [ncclUint64] = "ncclUint64",
        [ncclFloat16] = "ncclFloat16",
        [ncclFloat32] = "ncclFloat32",
        [ncclFloat64] = "ncclFloat64",
        [ncclBfloat16] = "ncclBfloat16",
        [ncclFloat8e4m3] = "ncclFloat8e4m3",
        [ncclFloat8e5m2] = "ncclFloat8e5m2",
    };
    return (unsigned)t < sizeof n / sizeof n[0] && n[t] ? n[t] : "Unknown";
}

static uint64_t gpu_timer(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t); /* %globaltimer counts ns like CLOCK_REALTIME */
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void fn_prof_group_api_start(void)
{
    group_api_depth++;
}

void fn_prof_group_api_stop(void)
{
    if (group_api_depth > 0 && --group_api_depth == 0) {
        stop(group_api);
        group_api = NULL;
    }
}

/* Whether the call's stream is capturing into a CUDA graph, which NCCL asks before
 * its API events (enqueue.cc: ncclPlannerSetCapturingGraph, then isGraphCaptured). */
static bool capturing(CUstream s)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    return cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

void *fn_prof_api_start(const struct fn_op *op)
{
    struct fn_comm *c = op->comm;
    int m = cur_mask();
    if (load_state != 1 || !c->prof_live) return NULL;
    bool captured = capturing(op->stream);
    struct p_descr_v5 d;
    if (!group_api &&
        (m & P_ON_GROUP_API)) { /* the outermost group, or the call's implicit one (group.cc) */
        memset(&d, 0, sizeof d);
        d.type = P_GROUP_API;
        d.rank = c->rank;
        d.group_api.group_depth = group_api_depth;
        d.group_api.graph_captured = captured;
        group_api = start(c, &d);
    }
    memset(&d, 0, sizeof d);
    d.parent = group_api;
    d.rank = c->rank;
    if (!(m & (is_p2p(op) ? P_ON_P2P_API : P_ON_COLL_API))) return NULL;
    if (is_p2p(op)) {
        d.type = P_P2P_API;
        d.p2p_api.func = func_name(op), d.p2p_api.count = op->count;
        d.p2p_api.dtype = dtype_name(op->dtype), d.p2p_api.stream = op->stream;
        d.p2p_api.graph_captured = captured;
    } else {
        d.type = P_COLL_API;
        d.coll_api.func = func_name(op), d.coll_api.count = op->count;
        d.coll_api.dtype = dtype_name(op->dtype), d.coll_api.root = op->root;
        d.coll_api.stream = op->stream;
        d.coll_api.graph_captured = captured;
    }
    return start(c, &d);
}

void fn_prof_api_stop(void *handle)
{
    stop(handle);
    if (!group_api_depth) { /* an implicit group ends with its call */
        stop(group_api);
        group_api = NULL;
    }
}

void fn_prof_launch(struct fn_op *ops, int nops)
{
    if (load_state != 1) return;
    struct fn_comm *c = ops[0].comm;
    struct p_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = P_GROUP;
    d.rank = c->rank;
    void *group = cur_mask() & P_ON_GROUP ? start(c, &d) : NULL;
    for (int i = 0; i < nops; i++) {
        struct fn_op *op = &ops[i];
        memset(&d, 0, sizeof d);
        d.parent = op->prof_api;
        d.rank = op->comm->rank;
        if (is_p2p(op)) {
            d.type = P_P2P;
            d.p2p.v4.func = func_name(op),
            d.p2p.v4.buff = op->kind == FN_OP_SEND ? (void *)op->sendbuff : op->recvbuff;
            d.p2p.v4.dtype = dtype_name(op->dtype), d.p2p.v4.count = op->count;
            d.p2p.v4.peer = op->root, d.p2p.v4.nchannels = 1, d.p2p.parent_group = group;
        } else {
            d.type = P_COLL;
            /* taken whether or not the event is on, as NCCL does for RAS (profiler.cc) */
            d.coll.v4.seq = atomic_fetch_add(&op->comm->prof_seq[op->kind], 1);
            d.coll.v4.func = func_name(op), d.coll.v4.sendbuff = op->sendbuff;
            d.coll.v4.recvbuff = op->recvbuff, d.coll.v4.count = op->count,
            d.coll.v4.root = op->root;
            d.coll.v4.dtype = dtype_name(op->dtype), d.coll.v4.nchannels = 1, d.coll.v4.nwarps = 1;
            d.coll.v4.algo = "RING", d.coll.v4.proto = "SIMPLE", d.coll.parent_group = group;
        }
        int want = is_p2p(op) ? P_P2P : P_COLL;
        op->prof_task = cur_mask() & (want | P_BELOW) ? start(op->comm, &d) : NULL;
    }
    if (cur_mask() & P_KERNEL_LAUNCH) {
        memset(&d, 0, sizeof d);
        d.type = P_KERNEL_LAUNCH;
        d.parent = group;
        d.rank = c->rank;
        d.kernel_launch.stream = ops[0].stream;
        stop(start(c, &d));
    }
    /* the plan is enqueued: Coll and P2p stop here, before the GPU runs them */
    for (int i = 0; i < nops; i++) stop(ops[i].prof_task);
    stop(group);
}

void fn_prof_kernel_start(struct fn_op *op)
{
    op->prof_kernel = NULL;
    if (load_state != 1 || !op->prof_task || !(cur_mask() & P_KERNEL_CH)) return;
    struct p_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = P_KERNEL_CH;
    d.parent = op->prof_task;
    d.rank = op->comm->rank;
    d.kernel_ch.channel = 0;
    d.kernel_ch.ptimer = gpu_timer();
    op->prof_kernel = start(op->comm, &d);
}

void fn_prof_kernel_stop(struct fn_op *op)
{
    void *h = op->prof_kernel;
    if (!h) return;
    op->prof_kernel = NULL;
    p_state_args a;
    memset(&a, 0, sizeof a);
    a.kernel_ch.ptimer = gpu_timer();
    if (v56)
        v56->record(h, P_KERNEL_CH_STOP, &a);
    else
        v4->record(h, P_KERNEL_CH_STOP, &a);
    stop(h);
}

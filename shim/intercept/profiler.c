/*
 * profiler.c: the profiler plugin entry point (see profiler.h).
 */
#include "intercept/profiler.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "base/atomic.h"
#include "base/log.h"
#include "policy/config.h"
#include "policy/policy.h"
#include "base/ops.h"
#include "intercept/pluginlib.h"
#include "intercept/real.h"
#include "track/comm.h"
#include "track/kmarks.h"
#include "track/reported.h"
#include "track/track.h"

/* Event type bits and the KernelCh stop state (nccl_profiler.h). */
#define EV_COLL (1 << 1)
#define EV_P2P (1 << 2)
#define EV_KERNEL_CH (1 << 6)
#define EV_COLL_API (1 << 9)
#define EV_P2P_API (1 << 10)
#define STATE_KERNEL_CH_STOP 22
#define DEFAULT_MASK (EV_COLL | EV_P2P | EV_KERNEL_CH)

typedef void (*ng_nccl_logger_t)(int level, unsigned long flags, const char *file, int line,
                                 const char *fmt, ...);

/* ncclProfilerEventDescr_v5_t: its header, and the union members read here
 * (profiler_v5.h). The union is as large as its largest member, the Coll one. */
struct coll_v5 {
    uint64_t seq; /* seqNumber: of this collective type on this communicator */
    const char *func;
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    int root;
    const char *dtype;
    uint8_t nchannels, nwarps;
    const char *algo, *proto;
    void *parent_group;
};
struct p2p_v5 {
    const char *func;
    void *buff;
    const char *dtype;
    size_t count;
    int peer;
    uint8_t nchannels;
    void *parent_group;
};
struct coll_api_v5 {
    const char *func;
    size_t count;
    const char *dtype;
    int root;
    void *stream;
    bool graph_captured;
};
struct p2p_api_v5 {
    const char *func;
    size_t count;
    const char *dtype;
    void *stream;
    bool graph_captured;
};
struct descr_v5 {
    uint64_t type;
    void *parent;
    int rank;
    union {
        struct coll_v5 coll;
        struct p2p_v5 p2p;
        struct coll_api_v5 coll_api;
        struct p2p_api_v5 p2p_api;
        struct {
            uint8_t channel;
            uint64_t ptimer; /* the GPU's globaltimer */
        } kernel_ch;
    };
};
_Static_assert(sizeof(struct descr_v5) == 112, "ncclProfilerEventDescr_v5_t is 112 bytes");

struct prof_v5 {
    const char *name;
    int (*init)(void **ctx, uint64_t comm_id, int *mask, const char *comm_name, int nnodes,
                int nranks, int rank, ng_nccl_logger_t log);
    int (*start)(void *ctx, void **handle, struct descr_v5 *d);
    int (*stop)(void *handle);
    int (*record)(void *handle, int state, void *args);
    int (*finalize)(void *ctx);
};

#define MAX_COMMS 64
struct pcomm {
    void *chain_ctx;      /* the chained plugin's context of this communicator */
    struct ng_comm *comm; /* its registry record: the wrappers', or one of its own */
    int wrapped;          /* the wrappers created it: they record its ops */
    uint64_t hash;
    int rank, nranks;
    ng_atomic(uint64_t) enqueued;      /* Coll events */
    ng_atomic(uint64_t) p2p_enqueued;  /* P2p events */
    ng_atomic(uint64_t) kernels_start; /* KernelCh starts */
    ng_atomic(uint64_t) kernels_done;  /* KernelChStop */
    ng_atomic(int) finalized;
};
static struct pcomm comms[MAX_COMMS];
static ng_atomic(int) ncomms;

/* Event handles: a ring of small records; a handle lives from its start to its stop, far
 * shorter than a turn of the ring. */
#define NHANDLES 65536
struct handle {
    struct pcomm *comm;
    int type;
    void *chain;     /* the chained plugin's handle of the same event */
    int mark;        /* Coll, P2p, KernelCh: the op's kernel mark (track/reported.h) */
    uint32_t gen;    /* and its generation */
    uint64_t stream; /* CollApi, P2pApi: the call's stream */
    int captured;    /* and whether it was captured into a CUDA graph */
};
static struct handle handles[NHANDLES];
static ng_atomic(uint64_t) next_handle;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
extern const struct prof_v5 ncclProfiler_v5;

static void at_exit_report(void)
{
    ncclguard_profiler_report();
}

/* The chained plugin (profiler_chain) and the mask it asked for: its own int, re-read at
 * each event and added to NCCL's, so that it can widen it as it could under NCCL. */
static const struct prof_v5 *chain;
static int chain_mask;
static ng_atomic(int *) nccl_mask; /* the same int for every communicator, set by each init */

static bool in_ring(const void *p)
{
    return p >= (const void *)handles && p < (const void *)(handles + NHANDLES);
}

/* Our handle, as NCCL hands it back as a parent, to the chained plugin's handle. */
static void *chained(void *ours)
{
    return ours && in_ring(ours) ? ((struct handle *)ours)->chain : NULL;
}

/* The plugin the job named itself in NCCL_PROFILER_PLUGIN, or NCCL's default name
 * when it named none, which the constructor replaced with this library (see
 * ncclguard_profiler_take_env); `quiet`: not there is no news. */
static char job_plugin[256];
static int job_plugin_quiet;
static void (*start_machinery)(void); /* ncclguard_start, handed over by the constructor */
static int plugin_on; /* NCCL_PROFILER_PLUGIN names this library (the constructor's view) */
static void take_env(const char *self);

static void install(void)
{
    if (ng_atomic_load_acquire(&ncclguard_tracking)) atexit(at_exit_report); /* off: silent */
    const char *name = ncclguard_settings()->profiler_chain;
    if (!name[0]) name = job_plugin;
    if (!name[0]) return;
    void *h = ncclguard_plugin_open("libnccl-profiler", name);
    if (!h && job_plugin_quiet && name == job_plugin) return;
    const struct prof_v5 *p = h ? dlsym(h, "ncclProfiler_v6") : NULL;
    if (h && !p) p = dlsym(h, "ncclProfiler_v5");
    if (!p || p == &ncclProfiler_v5) {
        NG_WARN("profiler_chain=%s: %s; no profiler plugin is chained", name,
                !h  ? "cannot be opened"
                : p ? "is ncclguard itself"
                    : "has no ncclProfiler_v6 or _v5");
        return;
    }
    chain = p;
    NG_INFO("profiler plugin %s chained behind ncclguard's", p->name ? p->name : name);
}

static void add_chain_mask(void)
{
    int m = __atomic_load_n(&chain_mask, __ATOMIC_RELAXED);
    int *nm = ng_atomic_load_relaxed(&nccl_mask);
    if (nm && (__atomic_load_n(nm, __ATOMIC_RELAXED) | m) != __atomic_load_n(nm, __ATOMIC_RELAXED))
        __atomic_or_fetch(nm, m, __ATOMIC_RELAXED);
}

static int p_init(void **ctx, uint64_t comm_id, int *mask, const char *comm_name, int nnodes,
                  int nranks, int rank, ng_nccl_logger_t log)
{
    int i = ng_atomic_add_relaxed(&ncomms, 1);
    if (i >= MAX_COMMS) {
        NG_WARN_ONCE("profiler plugin: more than %d communicators; the others are not followed",
                     MAX_COMMS);
        *ctx = NULL;
        return 0; /* NCCL goes on; our events for it are ignored */
    }
    pthread_once(&exit_once, install);
    comms[i].hash = comm_id;
    comms[i].rank = rank;
    comms[i].nranks = nranks;
    if (start_machinery && ng_atomic_load_acquire(&ncclguard_tracking)) {
        ncclguard_real_as_plugin(); /* before the start resolves the wrappers' NCCL */
        start_machinery();          /* loaded as a plugin only: the machinery starts here */
        comms[i].comm = ncclguard_reported_comm(comm_id, rank, nranks, comm_name,
                                                &comms[i].wrapped);
    }
    *ctx = &comms[i];
    ng_atomic_store_relaxed(&nccl_mask, mask);
    if (chain && chain->init(&comms[i].chain_ctx, comm_id, &chain_mask, comm_name, nnodes, nranks,
                             rank, log) != 0)
        comms[i].chain_ctx = NULL; /* as NCCL: that plugin goes without this communicator */
    /* One int for the whole process: ask only for what follows the ops the wrappers
     * do not see, and only once there are some (a communicator of the wrappers needs
     * no event: NCCL then makes none for ncclguard). */
    if (comms[i].comm && !comms[i].wrapped) __atomic_or_fetch(mask, DEFAULT_MASK, __ATOMIC_RELAXED);
    add_chain_mask();
    return 0;
}

/*
 * Whether NCCL would have sent this event to a plugin whose mask is m: an event is on when
 * its bit or the bit of an event below it is set (NVIDIA/nccl src/plugin/profiler.cc, the
 * mask sets of each ncclProfilerStart*Event). The chained plugin gets exactly those, not
 * the ones ncclguard asked for on top.
 */
static bool wanted(uint64_t type, int m)
{
    const int proxy = (1 << 3) | (1 << 4) | (1 << 7), below = proxy | EV_KERNEL_CH;
    switch (type) {
    case 1 << 8: return m != 0;                             /* GroupApi */
    case 1 << 9: return m & ((1 << 9) | EV_COLL | below);   /* CollApi */
    case 1 << 10: return m & ((1 << 10) | EV_P2P | below);  /* P2pApi */
    case 1 << 0: return m & (1 | EV_COLL | EV_P2P | below); /* Group */
    case EV_COLL: return m & (EV_COLL | below);
    case EV_P2P: return m & (EV_P2P | below);
    case 1 << 3: return m & proxy;                 /* ProxyOp */
    case 1 << 4: return m & ((1 << 4) | (1 << 7)); /* ProxyStep */
    default: return m & (int)type;
    }
}

/* Hands the event to the chained plugin, its parents made its own handles. */
static void *chain_start(struct pcomm *c, struct descr_v5 *d)
{
    if (!chain || !c->chain_ctx || !wanted(d->type, __atomic_load_n(&chain_mask, __ATOMIC_RELAXED)))
        return NULL;
    struct descr_v5 copy = *d;
    copy.parent = chained(d->parent);
    if (d->type == EV_COLL) copy.coll.parent_group = chained(d->coll.parent_group);
    if (d->type == EV_P2P) copy.p2p.parent_group = chained(d->p2p.parent_group);
    void *h = NULL;
    chain->start(c->chain_ctx, &h, &copy);
    add_chain_mask();
    return h;
}

/* The op type of an NCCL function name (ncclFuncToString), -1 for another. */
static int op_type(const char *func)
{
    for (int t = 0; func && t < NG_OP_NTYPES; t++)
        if (!strcmp(func, ng_op_name(t))) return t;
    return -1;
}

/* The data type of its NCCL name (ncclDatatypeToString), -1 for another. */
static int dtype_of(const char *name)
{
    static const char *const names[] = {
        [ncclInt8] = "ncclInt8",
        [ncclUint8] = "ncclUint8",
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
    for (int t = 0; name && t < (int)(sizeof names / sizeof names[0]); t++)
        if (names[t] && !strcmp(name, names[t])) return t;
    return -1;
}

/* A Coll or P2p event: the op, recorded through track/reported.h unless the
 * wrappers record it. Its parent is its API event (v5), which knows the
 * stream and whether the call was captured. */
static void launched(struct pcomm *c, struct handle *h, const struct descr_v5 *d)
{
    const struct handle *api = in_ring(d->parent) ? d->parent : NULL;
    uint64_t stream = api ? api->stream : 0;
    int captured = api ? api->captured : 0;
    h->mark = NG_NO_MARKER;
    if (d->type == EV_COLL) {
        ng_atomic_add_relaxed(&c->enqueued, 1);
        if (!c->comm) return;
        const struct coll_v5 *o = &d->coll;
        ncclguard_reported_op(c->comm, op_type(o->func), o->count, dtype_of(o->dtype), o->root,
                              o->nchannels, stream, captured, &h->mark, &h->gen);
    } else {
        ng_atomic_add_relaxed(&c->p2p_enqueued, 1);
        if (!c->comm) return;
        const struct p2p_v5 *o = &d->p2p;
        ncclguard_reported_op(c->comm, op_type(o->func), o->count, dtype_of(o->dtype), o->peer,
                              o->nchannels, stream, captured, &h->mark, &h->gen);
    }
}

static int p_start(void *ctx, void **out, struct descr_v5 *d)
{
    struct pcomm *c = ctx;
    *out = NULL;
    if (!c) return 0;
    int ours = d->type == EV_COLL || d->type == EV_P2P || d->type == EV_KERNEL_CH ||
               d->type == EV_COLL_API || d->type == EV_P2P_API;
    if (!ours && !chain) return 0;
    struct handle *h = &handles[ng_atomic_add_relaxed(&next_handle, 1) % NHANDLES];
    h->comm = c;
    h->type = (int)d->type;
    h->mark = NG_NO_MARKER;
    if (d->type == EV_COLL_API) {
        h->stream = (uint64_t)(uintptr_t)d->coll_api.stream;
        h->captured = d->coll_api.graph_captured;
    } else if (d->type == EV_P2P_API) {
        h->stream = (uint64_t)(uintptr_t)d->p2p_api.stream;
        h->captured = d->p2p_api.graph_captured;
    } else if (d->type == EV_COLL || d->type == EV_P2P) {
        launched(c, h, d);
    } else if (d->type == EV_KERNEL_CH) {
        ng_atomic_add_relaxed(&c->kernels_start, 1);
        const struct handle *task = in_ring(d->parent) ? d->parent : NULL;
        if (task) {
            h->mark = task->mark;
            h->gen = task->gen;
            ncclguard_kmark_start(h->mark, h->gen, (int64_t)d->kernel_ch.ptimer);
        }
    }
    h->chain = chain_start(c, d);
    *out = h;
    return 0;
}

static int p_stop(void *handle)
{
    /* ours: Coll stops once enqueued; KernelCh's end is its KernelChStop state */
    struct handle *h = handle;
    if (h && h->chain && chain) chain->stop(h->chain);
    return 0;
}

static int p_record(void *handle, int state, void *args)
{
    struct handle *h = handle;
    if (h && h->type == EV_KERNEL_CH && state == STATE_KERNEL_CH_STOP) {
        ng_atomic_add_relaxed(&h->comm->kernels_done, 1);
        uint64_t ptimer = 0; /* ncclProfilerEventStateArgs_v5_t's kernelCh.pTimer */
        if (args) memcpy(&ptimer, args, sizeof ptimer);
        ncclguard_kmark_stop(h->mark, h->gen, (int64_t)ptimer);
    }
    if (h && h->chain && chain) chain->record(h->chain, state, args);
    return 0;
}

static int p_finalize(void *ctx)
{
    struct pcomm *c = ctx;
    if (c) ng_atomic_store_relaxed(&c->finalized, 1);
    if (c && c->comm) ncclguard_reported_comm_end(c->comm);
    if (c && c->chain_ctx && chain) chain->finalize(c->chain_ctx);
    return 0;
}

__attribute__((visibility("default")))
const struct prof_v5 ncclProfiler_v5 = {"ncclguard", p_init, p_start, p_stop, p_record, p_finalize};

/* Ops of the wrappers' communicator c that NCCL reported beyond what the wrappers
 * recorded: calls that reached NCCL past them (a private handle on their comm). */
static uint64_t unseen_by_wrappers(struct ng_comm *c)
{
    uint64_t reported = 0, recorded = 0;
    for (int t = 0; t < NG_OP_NTYPES; t++) {
        reported += ng_atomic_load_relaxed(&c->reported_by_type[t]);
        recorded += ng_atomic_load_relaxed(&c->ops_by_type[t]);
    }
    return reported > recorded ? reported - recorded : 0;
}

void ncclguard_profiler_report(void)
{
    int n = ng_atomic_load_relaxed(&ncomms), wrapped = 0, both = 0;
    if (n > MAX_COMMS) n = MAX_COMMS;
    for (int i = 0; i < ncclguard_comm_count(); i++)
        wrapped += (ng_atomic_load_relaxed(&ncclguard_comm_at(i)->seen) & NG_SEEN_WRAPPERS) != 0;
    for (int i = 0; i < n; i++) both += comms[i].wrapped;
    /* how this process's NCCL was seen: by the plugin only, or by the wrappers too */
    if (n > 0 && wrapped == 0)
        NG_INFO("%d communicators seen by the profiler plugin only: no call went through the "
                "wrappers (NCCL linked statically, or resolved through a private dlopen "
                "handle); their ops are tracked from the plugin's events",
                n);
    else if (n > 0)
        NG_INFO("%d communicators seen by the profiler plugin, %d through the wrappers, %d of "
                "them by both (their ops recorded once, by the wrappers)",
                n, wrapped, both);
    for (int i = 0; i < n; i++) {
        struct pcomm *c = &comms[i];
        uint64_t ks = ng_atomic_load_relaxed(&c->kernels_start);
        uint64_t kd = ng_atomic_load_relaxed(&c->kernels_done);
        uint64_t unseen = c->wrapped && c->comm ? unseen_by_wrappers(c->comm) : 0;
        NG_INFO("communicator %016llx rank %d/%d seen by the profiler plugin: %llu collectives "
                "and %llu sends and receives enqueued, %llu kernels started, %llu finished%s",
                (unsigned long long)c->hash, c->rank, c->nranks,
                (unsigned long long)ng_atomic_load_relaxed(&c->enqueued),
                (unsigned long long)ng_atomic_load_relaxed(&c->p2p_enqueued),
                (unsigned long long)ks, (unsigned long long)kd,
                ks > kd ? " (started, not finished: the GPU is inside a kernel)" : "");
        if (unseen)
            NG_WARN("communicator %016llx: %llu ops reached NCCL without the wrappers (a "
                    "private handle on a communicator they created): they are not tracked",
                    (unsigned long long)c->hash, (unsigned long long)unseen);
    }
}

/* dl_iterate_phdr: the path of a loaded libnccl.so* into ctx (PATH_MAX bytes). */
static int find_nccl(struct dl_phdr_info *m, size_t size, void *ctx)
{
    (void)size;
    const char *base = m->dlpi_name ? strrchr(m->dlpi_name, '/') : NULL;
    if (!base || strncmp(base + 1, "libnccl.so", 10)) return 0;
    snprintf(ctx, PATH_MAX, "%s", m->dlpi_name);
    return 1;
}

/*
 * No silence, at exit. With the plugin off, a process that loaded NCCL and created no
 * communicator through the wrappers may have used one they cannot see. With it named,
 * NCCL that never announced the wrappers' communicators to it did not load it (older
 * than 2.28.3, without profiler API v5, or a NCCL_PROFILER_PLUGIN changed before NCCL
 * read it), and would not announce a private handle's either.
 */
static void silence_check(void)
{
    char path[PATH_MAX];
    int wrapped = ncclguard_comm_count();
    if (!plugin_on && !wrapped && dl_iterate_phdr(find_nccl, path))
        NG_INFO("%s is loaded, but no communicator was created through the wrappers and the "
                "profiler plugin is off: communicators of a private dlopen handle (pynccl) are "
                "not followed; NCCLGUARD_PROFILER_PLUGIN=1 with NCCL_PROFILER_PLUGIN unset "
                "follows them",
                path);
    else if (plugin_on && wrapped && !ng_atomic_load_relaxed(&ncomms))
        NG_INFO("NCCL never loaded ncclguard as its profiler plugin (it needs NCCL 2.28.3 or "
                "later, profiler API v5): communicators of a private dlopen handle, if any, "
                "were not followed");
}

void ncclguard_profiler_init(void (*start)(void))
{
    start_machinery = start;
    Dl_info info;
    if (!dladdr((const void *)&ncclProfiler_v5, &info) || !info.dli_fname || !info.dli_fname[0])
        return;
    if (ncclguard_plugin_preloaded(info.dli_fname)) take_env(info.dli_fname);
    const char *v = getenv("NCCL_PROFILER_PLUGIN");
    plugin_on = v && ncclguard_plugin_names_self(v, info.dli_fname);
    atexit(silence_check);
}

static void take_env(const char *self)
{
    const struct ng_env_change *site = ncclguard_policy_change_of("NCCL_PROFILER_PLUGIN");
    if (!ncclguard_settings()->profiler_plugin || site) return; /* off, or the site's */
    const char *v = getenv("NCCL_PROFILER_PLUGIN");
    if (v && (!strcasecmp(v, "none") || ncclguard_plugin_names_self(v, self))) return;
    if (v && ncclguard_plugin_names_ncclguard(v)) v = NULL; /* another copy: replaced */
    if (v && !ncclguard_settings()->profiler_chain[0]) {
        snprintf(job_plugin, sizeof job_plugin, "%s", v);
        setenv("NCCLGUARD_PROFILER_CHAIN", job_plugin, 0); /* a child chains it too */
    } else if (!v) {
        snprintf(job_plugin, sizeof job_plugin, "libnccl-profiler.so"); /* NCCL's default */
        job_plugin_quiet = 1;
    }
    if (setenv("NCCL_PROFILER_PLUGIN", self, 1) != 0) return;
    /* said when it changes what the job asked for; the usual case only at debug */
    if (v && ncclguard_policy_talks())
        NG_INFO("NCCL_PROFILER_PLUGIN=%s (ncclguard as NCCL's profiler plugin, to follow "
                "communicators the wrappers cannot see; the job's plugin %s is chained behind it)",
                self, v);
    else if (!v)
        NG_DEBUG("NCCL_PROFILER_PLUGIN=%s (ncclguard as NCCL's profiler plugin, to follow "
                 "communicators the wrappers cannot see; was unset)",
                 self);
}

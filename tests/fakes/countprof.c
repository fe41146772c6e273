/*
 * countprof: a profiler plugin for tests, in the role of NCCL's Inspector. It
 * exports ncclProfiler_v<COUNTPROF_V> (6, 5 or 4) and writes one line per
 * call NCCL makes into it to $COUNTPROF_LOG.<pid> (write(2), O_APPEND):
 *   init rank=R nranks=N name=NAME id=HEX      finalize rank=R
 *   start TYPE [func=F] [seq=S] [peer=P] parent=TYPE|-     stop TYPE [func=F]
 *   state TYPE state=N
 * $COUNTPROF_MASK (default all events) is the mask it asks for at init;
 * $COUNTPROF_WIDEN=N widens it to all events at its Nth start. Its handles
 * come from a fixed pool and are never freed, so a parent stays valid.
 * Its ABI declarations are written independently of the fake's
 * (tests/fakes/fakenccl_profiler.c), from NVIDIA/nccl profiler_v4.h .. v6.h.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef COUNTPROF_V
#define COUNTPROF_V 5
#endif

#define EXPORT __attribute__((visibility("default")))

struct coll5 {
    uint64_t seq;
    const char *func;
    const void *s;
    void *r;
    size_t count;
    int root;
    const char *dtype;
    uint8_t nch, nwarps;
    const char *algo, *proto;
    void *grp;
};
struct p2p5 {
    const char *func;
    void *buff;
    const char *dtype;
    size_t count;
    int peer;
    uint8_t nch;
    void *grp;
};
struct api5 {
    const char *func;
    size_t count;
    const char *dtype;
};

#if COUNTPROF_V >= 5
struct descr {
    uint64_t type;
    void *parent;
    int rank;
    union {
        struct coll5 coll;
        struct p2p5 p2p;
        struct api5 api;
    };
};
#else
struct descr {
    uint8_t type;
    void *parent;
    int rank;
    union {
        struct coll5 coll;
        struct p2p5 p2p;
    };
};
#endif

struct handle {
    uint64_t type;
};
static struct handle pool[1 << 16];
static int used;
static int mask_set;
static int *mask_ptr;
static int starts;
static int fd = -1;

static const char *type_name(uint64_t t)
{
    static const char *const n[] = {"Group",     "Coll",      "P2p",      "ProxyOp",
                                    "ProxyStep", "ProxyCtrl", "KernelCh", "NetPlugin",
                                    "GroupApi",  "CollApi",   "P2pApi",   "KernelLaunch",
                                    "CeColl",    "CeSync",    "CeBatch"};
    for (int i = 0; i < 15; i++)
        if (t == (1ull << i)) return n[i];
    return "?";
}

static void out(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || fd < 0) return;
    if (n > (int)sizeof line - 2) n = sizeof line - 2;
    line[n++] = '\n';
    if (write(fd, line, (size_t)n) < 0) return;
}

static int do_init(void **ctx, int *mask, const char *name, uint64_t id, int nranks, int rank)
{
    const char *log = getenv("COUNTPROF_LOG");
    if (fd < 0 && log) {
        char path[512];
        snprintf(path, sizeof path, "%s.%d", log, (int)getpid());
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
    const char *m = getenv("COUNTPROF_MASK");
    if (!mask_set) *mask = m ? (int)strtol(m, NULL, 0) : 0x7fff;
    mask_set = 1;
    mask_ptr = mask;
    static int ctxs[64];
    *ctx = &ctxs[rank & 63];
    const char *slow = getenv("COUNTPROF_INIT_SLEEP_MS"); /* an init that takes its time */
    if (slow) usleep((useconds_t)atoi(slow) * 1000);
    out("init rank=%d nranks=%d name=%s id=%llx", rank, nranks, name ? name : "-",
        (unsigned long long)id);
    return 0;
}

/* What a handle NCCL passed is: one of ours (its event type), none, or another's. */
static const char *handle_name(const void *h)
{
    const struct handle *p = h;
    bool ours = p >= pool && p < pool + sizeof pool / sizeof pool[0];
    return !p ? "-" : ours ? type_name(p->type) : "foreign";
}

static int start_event(void *ctx, void **h, void *d_)
{
    (void)ctx;
    struct descr *d = d_;
    const char *w = getenv("COUNTPROF_WIDEN");
    if (w && ++starts == atoi(w) && mask_ptr) __atomic_store_n(mask_ptr, 0x7fff, __ATOMIC_RELAXED);
    int i = __atomic_fetch_add(&used, 1, __ATOMIC_RELAXED);
    struct handle *me = i < (int)(sizeof pool / sizeof pool[0]) ? &pool[i] : NULL;
    if (me) me->type = d->type;
    *h = me;
    const char *pn = handle_name(d->parent);
#if COUNTPROF_V >= 5 /* v4 has no parentGroup members */
    char group[64];
    snprintf(group, sizeof group, " group=%s",
             handle_name(d->type == 2   ? d->coll.grp
                         : d->type == 4 ? d->p2p.grp
                                        : NULL));
#else
    const char *group = "";
#endif
    if (d->type == 2)
        out("start Coll func=%s seq=%llu rank=%d parent=%s%s dtype=%s", d->coll.func,
            (unsigned long long)d->coll.seq, d->rank, pn, group, d->coll.dtype);
    else if (d->type == 4)
        out("start P2p func=%s peer=%d rank=%d parent=%s%s dtype=%s", d->p2p.func, d->p2p.peer,
            d->rank, pn, group, d->p2p.dtype);
#if COUNTPROF_V >= 5
    else if (d->type == (1 << 9) || d->type == (1 << 10))
        out("start %s func=%s parent=%s", type_name(d->type), d->api.func, pn);
#endif
    else
        out("start %s parent=%s", type_name(d->type), pn);
    return 0;
}

static int stop_event(void *h)
{
    struct handle *me = h;
    if (me) out("stop %s", type_name(me->type));
    return 0;
}

static int record_state(void *h, int state, void *args)
{
    (void)args;
    struct handle *me = h;
    if (me) out("state %s state=%d", type_name(me->type), state);
    return 0;
}

static int finalize(void *ctx)
{
    (void)ctx;
    out("finalize");
    return 0;
}

/* The plugin's table: its name, then init, startEvent, stopEvent, recordEventState, finalize. */
struct prof {
    const char *name;
    void *init, *start, *stop, *record, *fini;
};

#if COUNTPROF_V >= 5
static int init5(void **ctx, uint64_t id, int *mask, const char *name, int nnodes, int nranks,
                 int rank, void *log)
{
    (void)nnodes, (void)log;
    return do_init(ctx, mask, name, id, nranks, rank);
}
#if COUNTPROF_V == 6
EXPORT const struct prof ncclProfiler_v6 = {"countprof", init5,        start_event,
                                            stop_event,  record_state, finalize};
#else
EXPORT const struct prof ncclProfiler_v5 = {"countprof", init5,        start_event,
                                            stop_event,  record_state, finalize};
#endif
#else
static int init4(void **ctx, int *mask, const char *name, uint64_t id, int nnodes, int nranks,
                 int rank, void *log)
{
    (void)nnodes, (void)log;
    return do_init(ctx, mask, name, id, nranks, rank);
}
EXPORT const struct prof ncclProfiler_v4 = {"countprof", init4,        start_event,
                                            stop_event,  record_state, finalize};
#endif

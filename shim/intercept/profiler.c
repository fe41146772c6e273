/*
 * profiler.c: the profiler plugin entry point (see profiler.h).
 */
#include "intercept/profiler.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "base/atomic.h"
#include "base/log.h"

/* Event type bits and the KernelCh stop state (nccl_profiler.h). */
#define EV_COLL (1 << 1)
#define EV_KERNEL_CH (1 << 6)
#define STATE_KERNEL_CH_STOP 22
#define DEFAULT_MASK (EV_COLL | EV_KERNEL_CH)

typedef void (*ng_nccl_logger_t)(int level, unsigned long flags, const char *file, int line,
                                 const char *fmt, ...);

/* The members of ncclProfilerEventDescr_v5_t read here: its header and the Coll member. */
struct descr_v5 {
    uint64_t type;
    void *parent;
    int rank;
    union {
        struct {
            uint64_t seq;
            const char *func;
        } coll;
        char room[96]; /* the union's other members, not read */
    };
};

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
    uint64_t hash;
    int rank, nranks;
    ng_atomic(uint64_t) enqueued;      /* Coll events */
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
};
static struct handle handles[NHANDLES];
static ng_atomic(uint64_t) next_handle;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void at_exit(void)
{
    ncclguard_profiler_report();
}

static void install_exit(void)
{
    atexit(at_exit);
}

static int p_init(void **ctx, uint64_t comm_id, int *mask, const char *comm_name, int nnodes,
                  int nranks, int rank, ng_nccl_logger_t log)
{
    (void)comm_name, (void)nnodes, (void)log;
    int i = ng_atomic_add_relaxed(&ncomms, 1);
    if (i >= MAX_COMMS) {
        NG_WARN_ONCE("profiler plugin: more than %d communicators; the others are not followed",
                     MAX_COMMS);
        *ctx = NULL;
        return 0; /* NCCL goes on; our events for it are ignored */
    }
    comms[i].hash = comm_id;
    comms[i].rank = rank;
    comms[i].nranks = nranks;
    *ctx = &comms[i];
    /* one int for the whole process: ask only for what is cheap (issue 21) */
    __atomic_or_fetch(mask, DEFAULT_MASK, __ATOMIC_RELAXED);
    pthread_once(&exit_once, install_exit);
    return 0;
}

static int p_start(void *ctx, void **out, struct descr_v5 *d)
{
    struct pcomm *c = ctx;
    *out = NULL;
    if (!c)
        return 0;
    if (d->type == EV_COLL) {
        ng_atomic_add_relaxed(&c->enqueued, 1);
    } else if (d->type == EV_KERNEL_CH) {
        ng_atomic_add_relaxed(&c->kernels_start, 1);
    } else {
        return 0;
    }
    struct handle *h = &handles[ng_atomic_add_relaxed(&next_handle, 1) % NHANDLES];
    h->comm = c;
    h->type = (int)d->type;
    *out = h;
    return 0;
}

static int p_stop(void *handle)
{
    (void)handle; /* Coll stops once enqueued; KernelCh's end is its KernelChStop state */
    return 0;
}

static int p_record(void *handle, int state, void *args)
{
    (void)args;
    struct handle *h = handle;
    if (h && h->type == EV_KERNEL_CH && state == STATE_KERNEL_CH_STOP)
        ng_atomic_add_relaxed(&h->comm->kernels_done, 1);
    return 0;
}

static int p_finalize(void *ctx)
{
    struct pcomm *c = ctx;
    if (c)
        ng_atomic_store_relaxed(&c->finalized, 1);
    return 0;
}

__attribute__((visibility("default"))) const struct prof_v5 ncclProfiler_v5 = {
    "ncclguard", p_init, p_start, p_stop, p_record, p_finalize};

void ncclguard_profiler_report(void)
{
    int n = ng_atomic_load_relaxed(&ncomms);
    for (int i = 0; i < n && i < MAX_COMMS; i++) {
        struct pcomm *c = &comms[i];
        uint64_t ks = ng_atomic_load_relaxed(&c->kernels_start);
        uint64_t kd = ng_atomic_load_relaxed(&c->kernels_done);
        NG_INFO("communicator %016llx rank %d/%d seen by the profiler plugin: %llu collectives "
                "enqueued, %llu kernels started, %llu finished%s",
                (unsigned long long)c->hash, c->rank, c->nranks,
                (unsigned long long)ng_atomic_load_relaxed(&c->enqueued),
                (unsigned long long)ks, (unsigned long long)kd,
                ks > kd ? " (started, not finished: the GPU is inside a kernel)" : "");
    }
}

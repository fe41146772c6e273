/*
 * lifecycle.c: see lifecycle.h. Creation and ending are not hot paths: these
 * hooks may take the registry's lock and write events.
 */
#include "track/lifecycle.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "base/altstack.h"
#include "base/atomic.h"
#include "base/events.h"
#include "base/hash.h"
#include "track/comm.h"
#include "track/deferred.h"
#include "track/markers.h"
#include "track/track.h"

static ng_atomic(uint64_t) init_all_calls; /* CommInitAll ids: this process only */

/* An event about a communicator. "rank" of every event line is the process's
 * global rank; the rank in the communicator is "comm_rank". */
static void comm_event(const char *what, struct ng_comm *c)
{
    ncclguard_event(what,
                    "\"comm\":\"%016llx\",\"comm_rank\":%d,\"comm_nranks\":%d,"
                    "\"parent\":\"%016llx\"",
                    (unsigned long long)c->id, ng_comm_rank(c), ng_comm_nranks(c),
                    (unsigned long long)c->parent_id);
}

void ncclguard_comm_announce(struct ng_comm *c)
{
    if (ng_comm_nranks(c) <= 0 || ng_atomic_load_relaxed(&c->announced)) return;
    if (!ng_atomic_exchange_relaxed(&c->announced, 1)) comm_event("comm_created", c);
}

/* The record this thread is creating, between a creation's hooks, and the creations
 * through the wrappers in flight in the process: what tells NCCL's profiler plugin
 * which of the communicators it announces are the wrappers' (track/reported.c). */
static NG_TLS struct ng_comm *creating;
static ng_atomic(int) creations;

struct ng_comm *ncclguard_comm_creating(void)
{
    return creating;
}

int ncclguard_creations_in_flight(void)
{
    return ng_atomic_load_acquire(&creations);
}

static void start_creation(struct ng_init_ticket *t, ncclComm_t *out, uint64_t id, int rank,
                           int nranks, uint64_t parent, const ncclConfig_t *config)
{
    ncclguard_altstack_ensure(); /* the crash handler's room on this thread */
    if (ncclguard_track_mode != NG_TRACK_OFF) ncclguard_markers_prepare_current();
    t->out = out;
    t->comm = ncclguard_comm_new(id, rank, nranks, parent, config);
    if (!t->comm) return;
    creating = t->comm;
    ng_atomic_add_seq_cst(&creations, 1);
}

void ncclguard_init_pre(struct ng_init_ticket *t, ncclComm_t *out, int nranks, int rank, int nids,
                        const ncclUniqueId *ids, const ncclConfig_t *config)
{
    uint64_t id = NG_HASH_SEED;
    for (int i = 0; ids && i < nids; i++) id = ng_hash(id, &ids[i], sizeof ids[i]);
    start_creation(t, out, id, rank, nranks, 0, config);
}

void ncclguard_init_all_pre(struct ng_init_ticket *t, ncclComm_t *out, int ndev)
{
    (void)ndev;
    ng_atomic_add_seq_cst(&creations, 1); /* its records come in the post hook */
    ncclguard_altstack_ensure();
    t->out = out;
    t->comm = NULL; /* one record per device is made in the post hook */
}

/* A child's id: the parent's id, the ordinal of this split on the parent (the
 * same on every rank, since splits are collective over the parent) and the
 * color or excluded set. */
static uint64_t child_id(struct ng_comm *parent, const void *what, size_t len)
{
    uint64_t ordinal = ng_atomic_add_relaxed(&parent->splits, 1);
    uint64_t id = ng_hash(parent->id, &ordinal, sizeof ordinal);
    return ng_hash(id, what, len);
}

void ncclguard_split_pre(struct ng_init_ticket *t, ncclComm_t parent, int color, ncclComm_t *out,
                         const ncclConfig_t *config)
{
    struct ng_comm *p = ncclguard_comm_find(parent);
    t->out = out;
    t->comm = NULL;
    if (!p) return;
    uint64_t id = child_id(p, &color, sizeof color);
    if (color == NCCL_SPLIT_NOCOLOR) return;
    start_creation(t, out, id, -1, -1, p->id, config);
    ncclguard_comm_reserve_peers(t->comm, p->npeers);
}

void ncclguard_shrink_pre(struct ng_init_ticket *t, ncclComm_t parent, const int *excluded,
                          int nexcluded, ncclComm_t *out, const ncclConfig_t *config)
{
    struct ng_comm *p = ncclguard_comm_find(parent);
    t->out = out;
    t->comm = NULL;
    if (!p) return;
    uint64_t set = NG_HASH_SEED;
    if (excluded && nexcluded > 0)
        set = ng_hash(set, excluded, (size_t)nexcluded * sizeof *excluded);
    start_creation(t, out, child_id(p, &set, sizeof set), -1, -1, p->id, config);
    ncclguard_comm_reserve_peers(t->comm, p->npeers);
}

/*
 * A nonblocking ncclCommSplit or ncclCommShrink that returns ncclInProgress
 * writes the child's handle only when it completes (as NCCL does), on a thread
 * of its own: reading *newcomm then would race. Such children wait here, per
 * thread, and are matched in order with the first handles this thread uses
 * that the registry does not know (the application polls the child's async
 * error before using it).
 */
#define PENDING_CHILDREN 8
static NG_TLS struct ng_comm *pending[PENDING_CHILDREN];
static NG_TLS int npending;

struct ng_comm *ncclguard_comm_adopt(ncclComm_t handle)
{
    if (!npending || !handle) return NULL;
    struct ng_comm *c = pending[0];
    memmove(pending, pending + 1, (size_t)--npending * sizeof pending[0]);
    ncclguard_comm_attach(c, handle);
    ncclguard_comm_announce(c);
    ncclguard_track_wake(); /* the watchdog learns its rank and size */
    return c;
}

void ncclguard_init_post(struct ng_init_ticket *t, ncclResult_t r)
{
    struct ng_comm *c = t->comm;
    if (!c) return;
    creating = NULL;
    ng_atomic_add_seq_cst(&creations, -1);
    if (r == ncclInProgress && c->parent_id && npending < PENDING_CHILDREN) {
        pending[npending++] = c;
        return;
    }
    if (!ng_accepted(r) || !t->out || !*t->out) {
        ncclguard_comm_set_state(c, NG_COMM_FAILED);
        return;
    }
    ncclguard_comm_attach(c, *t->out);
    if (r == ncclSuccess) ncclguard_comm_set_state(c, NG_COMM_READY);
    if (ng_comm_nranks(c) > 0)
        ncclguard_comm_announce(c);
    else
        ncclguard_track_wake(); /* a split child: the watchdog learns its size now */
}

void ncclguard_init_all_post(struct ng_init_ticket *t, int ndev, const int *devlist, ncclResult_t r)
{
    ng_atomic_add_seq_cst(&creations, -1);
    if (r != ncclSuccess || !t->out) return;
    /* Communicator i runs on device devlist[i] (i without a list), in that
     * device's primary context, which the current one is only for one of them. */
    if (ncclguard_track_mode != NG_TRACK_OFF)
        for (int i = 0; i < ndev; i++) ncclguard_markers_prepare_device(devlist ? devlist[i] : i);
    uint64_t call = ng_atomic_add_relaxed(&init_all_calls, 1);
    pid_t pid = getpid();
    for (int i = 0; i < ndev; i++) {
        uint64_t id = ng_hash(NG_HASH_SEED, &pid, sizeof pid);
        id = ng_hash(id, &call, sizeof call);
        struct ng_comm *c = ncclguard_comm_new(id, i, ndev, 0, NULL);
        ncclguard_comm_attach(c, t->out[i]);
        ncclguard_comm_set_state(c, NG_COMM_READY);
    }
}

void ncclguard_end_pre(struct ng_end_ticket *t, ncclComm_t comm, int kind)
{
    t->comm = ncclguard_comm_find(comm);
    t->kind = kind;
    t->fenced = t->comm && ng_atomic_load_acquire(&t->comm->fenced);
    if (t->fenced) return;
    ncclguard_comm_set_ending(t->comm, 1); /* the watchdog lets go of the handle */
    /* The application may release the CUDA context right after this call;
     * settle what the GPU finished while the markers can still be queried. */
    if (t->comm) ncclguard_track_settle();
    /* Abort frees the handle even when it fails, so forget it first. */
    if (t->comm && kind == NG_END_ABORT) {
        ncclguard_comm_set_state(t->comm, NG_COMM_ABORTED);
        comm_event("comm_aborted", t->comm);
    }
}

void ncclguard_end_post(struct ng_end_ticket *t, ncclResult_t r)
{
    static const int state_of[] = {
        [NG_END_FINALIZE] = NG_COMM_FINALIZING,
        [NG_END_DESTROY] = NG_COMM_DESTROYED,
        [NG_END_ABORT] = NG_COMM_ABORTED,
        [NG_END_REVOKE] = NG_COMM_REVOKED,
    };
    if (!t->comm || t->kind == NG_END_ABORT) return;
    if (ng_accepted(r))
        ncclguard_comm_set_state(t->comm, state_of[t->kind]);
    else
        ncclguard_comm_set_ending(t->comm, 0);
    if (ng_accepted(r) && t->kind == NG_END_DESTROY) comm_event("comm_destroyed", t->comm);
    if (t->kind == NG_END_DESTROY && r == ncclSuccess) ncclguard_track_settle();
}

void ncclguard_async_error_post(ncclComm_t comm, const ncclResult_t *err, ncclResult_t r)
{
    struct ng_comm *c = ncclguard_comm_find(comm);
    if (!c && r == ncclSuccess) c = ncclguard_comm_adopt(comm);
    if (!c || r != ncclSuccess || !err) return;
    if (*err == ncclSuccess) ncclguard_flush_deferred(ncclguard_comm_index(c));
    ncclguard_track_async_error(c, (int)*err);
    if (*err == ncclSuccess && ng_atomic_load_acquire(&c->state) == NG_COMM_INITIALIZING)
        ncclguard_comm_set_state(c, NG_COMM_READY);
}

/* The calling thread's last call was refused because of a fence, so that
 * ncclGetLastError(NULL) can explain it. */
static NG_TLS struct ng_comm *last_fenced;

int ncclguard_fenced(ncclComm_t comm)
{
    struct ng_comm *c = ncclguard_comm_find(comm);
    if (!c || !ng_atomic_load_acquire(&c->fenced)) return 0;
    last_fenced = c;
    return 1;
}

ncclResult_t ncclguard_fenced_result(void)
{
    return ncclInvalidUsage;
}

ncclResult_t ncclguard_end_fenced(struct ng_end_ticket *t)
{
    /* NCCL already freed the handle: forget it, and tell the application its
     * own clean-up went fine. */
    ncclguard_comm_set_state(t->comm,
                             t->kind == NG_END_FINALIZE ? NG_COMM_ABORTED : NG_COMM_DESTROYED);
    return ncclSuccess;
}

ncclResult_t ncclguard_async_error_fenced(ncclResult_t *err)
{
    if (err) *err = ncclRemoteError;
    return ncclSuccess;
}

const char *ncclguard_fenced_last_error(ncclComm_t comm)
{
    struct ng_comm *c = comm ? ncclguard_comm_find(comm) : last_fenced;
    if (!c || !ng_atomic_load_acquire(&c->fenced)) return NULL;
    return c->fence_reason;
}

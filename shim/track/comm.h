/*
 * comm.h: the communicator registry.
 *
 * Owns: one record per communicator this process created (through any creation
 * path), found from the opaque ncclComm_t handle, which is never dereferenced.
 * A record carries an id that is identical on every rank of the communicator
 * (a hash of the ncclUniqueId(s); for split/shrink, derived from the parent's id,
 * the split ordinal on the parent, and the color or excluded set), its place in
 * the job, its state and the per-communicator sequence counters.
 *
 * Records are preallocated at the first communicator creation and never freed,
 * so other threads (watchdog, dump) may read them without a lock.
 *
 * Threads: ncclguard_comm_find is lock-free and may run on the hot path; the
 * other functions take a short internal lock and run on creation/destroy paths.
 */
#ifndef NCCLGUARD_COMM_H
#define NCCLGUARD_COMM_H

#include <nccl.h>
#include <pthread.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/ops.h"

/* Communicators a process can have tracked; the newest beyond it are not. Every
 * per-communicator table of the shim has this many entries. */
#define NG_MAX_COMMS 1024

enum ng_comm_state {
    NG_COMM_INITIALIZING,
    NG_COMM_READY,
    NG_COMM_FINALIZING,
    NG_COMM_REVOKED,
    NG_COMM_ABORTED,
    NG_COMM_DESTROYED,
    NG_COMM_FAILED, /* creation returned an error */
};

/* Point-to-point traffic with one peer of a communicator (its comm rank). */
struct ng_peer {
    ng_atomic(uint64_t) seq;  /* sends and receives so far: the p2p_seq of the last */
    ng_atomic(uint64_t) done; /* p2p_seq of the newest one seen completed */
};

/* How the shim learnt of a communicator (ng_comm.seen). */
#define NG_SEEN_WRAPPERS 1 /* created through the wrappers: they record its ops */
#define NG_SEEN_PLUGIN 2   /* announced by NCCL's profiler plugin (track/reported.h) */

struct ng_comm {
    /* fixed at creation */
    uint64_t id;
    int slot;           /* index in the registry (ncclguard_comm_at) */
    int blocking;       /* 0 for nonblocking communicators */
    char name[64];      /* commName from the config, or "" */
    uint64_t parent_id; /* 0 for a root communicator */
    int64_t created_ns; /* CLOCK_REALTIME */
    /* shared */
    ng_atomic(ncclComm_t) handle;      /* NULL until creation returned it */
    ng_atomic(int) rank, nranks;       /* -1 until known (split children) */
    ng_atomic(int) device;             /* -1 until known */
    ng_atomic(int) state;              /* enum ng_comm_state */
    ng_atomic(int) last_async_error;   /* ncclResult_t */
    ng_atomic(uint64_t) splits;        /* split/shrink calls on this communicator */
    ng_atomic(uint64_t) coll_seq;      /* collectives called so far */
    ng_atomic(int) overlap_said;       /* two threads in collectives at once: said (track/ops.c) */
    ng_atomic(uint64_t) completed_seq; /* seq of the newest collective seen completed */
    ng_atomic(uint64_t) ops_by_type[NG_OP_NTYPES];      /* calls that NCCL accepted */
    ng_atomic(int) seen;                                /* NG_SEEN_* */
    ng_atomic(uint64_t) reported_by_type[NG_OP_NTYPES]; /* ops the profiler plugin reported */
    ng_atomic(struct ng_peer *) peers; /* npeers entries, or NULL (set after npeers) */
    int npeers;
    /* The watchdog calls NCCL on `handle` only under poll_lock and while
     * `ending` is 0; the hooks of Finalize/Destroy/Abort/Revoke set `ending`
     * under the lock first, so the watchdog never touches a freed handle. */
    pthread_mutex_t poll_lock;
    int ending; /* under poll_lock */
    /* Set when ncclguard itself aborted the communicator (the escalation
     * ladder): from then on the shim answers every call on the handle without
     * reaching NCCL, which freed it. */
    ng_atomic(int) fenced;
    char fence_reason[200];   /* written before `fenced` is set */
    ng_atomic(int) announced; /* its comm_created event was written */
    /* Nonblocking communicators: application calls inside it, and whether the
     * observer is (see ncclguard_comm_enter). */
    ng_atomic(int) app_inside;
    ng_atomic(int) observer_inside;
};

/* Split and shrink children learn their size only later: they reserve the
 * parent's size of per-peer counters at creation, before anyone uses them. */
void ncclguard_comm_reserve_peers(struct ng_comm *c, int npeers);

/* Counts an op of c as seen completed: a collective's seq (seq > 0), else the
 * p2p_seq of a send or receive with peer. The watchdog calls it before it
 * publishes the record's completed state, so that whoever sees the state
 * (a dump) and then reads the counter finds the op counted. */
void ncclguard_comm_count_completed(struct ng_comm *c, uint64_t seq, int peer, uint64_t p2p_seq);

/* Index of a record in the registry (for ncclguard_comm_at). */
int ncclguard_comm_index(const struct ng_comm *c);

/* Marks the communicator as being ended (before Finalize/Destroy/Abort/Revoke
 * reach NCCL), or back to usable when that call failed. */
void ncclguard_comm_set_ending(struct ng_comm *c, int ending);

/* Creates a record in state INITIALIZING (handle not yet known). NULL when the
 * registry is full or could not be allocated (logged once). */
struct ng_comm *ncclguard_comm_new(uint64_t id, int rank, int nranks, uint64_t parent_id,
                                   const ncclConfig_t *config);

/* Publishes the handle that creation returned, so ncclguard_comm_find sees it. */
void ncclguard_comm_attach(struct ng_comm *c, ncclComm_t handle);

/* Rank and size in the communicator: -1 until known (a split child learns them
 * at the watchdog's first poll, which stores them atomically). Any thread. */
static inline int ng_comm_rank(struct ng_comm *c)
{
    return ng_atomic_load_relaxed(&c->rank);
}

static inline int ng_comm_nranks(struct ng_comm *c)
{
    return ng_atomic_load_relaxed(&c->nranks);
}

static inline int ng_comm_state(struct ng_comm *c)
{
    return ng_atomic_load_acquire(&c->state);
}

/* The handle, once creation returned it (NULL before). Any thread. */
ncclComm_t ncclguard_comm_handle(struct ng_comm *c);

/*
 * NCCL lets one thread at a time operate a communicator; on a nonblocking one,
 * ncclCommGetAsyncError completes and frees the pending group job without
 * atomics, so the observer must never ask it while an application call is
 * inside. A Dekker handshake on two counters, sequentially consistent: each side
 * raises its own, then looks at the other's. The application never waits for
 * long: at most for the observer's one ncclCommGetAsyncError, which on a
 * nonblocking communicator does not block.
 *
 * ncclguard_comm_enter: an application thread is about to call NCCL on c (NULL,
 * or a blocking communicator: nothing to do); returns c when it entered it,
 * else NULL, to hand to ncclguard_comm_leave after the call.
 * ncclguard_comm_observe_begin: the observer may call NCCL on c now (1; then
 * ncclguard_comm_observe_end), or an application call is inside (0).
 */
struct ng_comm *ncclguard_comm_enter(struct ng_comm *c);
static inline void ncclguard_comm_leave(struct ng_comm *c)
{
    if (c) ng_atomic_add_seq_cst(&c->app_inside, -1);
}
int ncclguard_comm_observe_begin(struct ng_comm *c);
void ncclguard_comm_observe_end(struct ng_comm *c);

/* Lock-free lookup; NULL for a handle this process never registered. */
struct ng_comm *ncclguard_comm_find(ncclComm_t handle);

/* Changes at every change of the handle map (a handle attached or unmapped, a
 * fork): an answer of ncclguard_comm_find that a thread keeps holds while it
 * is unchanged. Read it before the lookup. */
extern NG_HIDDEN ng_atomic(uint64_t) ncclguard_comm_map_version;
static inline uint64_t ncclguard_comm_map_changes(void)
{
    return ng_atomic_load_acquire(&ncclguard_comm_map_version);
}

/* Sets the state; DESTROYED and ABORTED also unmap the handle (NCCL may reuse it). */
void ncclguard_comm_set_state(struct ng_comm *c, enum ng_comm_state s);

/* Number of records, and the i-th one (for summaries and dumps). */
int ncclguard_comm_count(void);
struct ng_comm *ncclguard_comm_at(int i);

/* fork(): the child forgets every record of the parent and starts clean. */
void ncclguard_comm_atfork_prepare(void);
void ncclguard_comm_atfork_parent(void);
void ncclguard_comm_atfork_child(void);

const char *ncclguard_comm_state_name(int s);

#endif

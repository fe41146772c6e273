/*
 * reported.c: the ops NCCL's profiler plugin reports (see reported.h).
 */
#include "track/reported.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/ops.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/kmarks.h"
#include "track/lifecycle.h"
#include "track/stacks.h"
#include "track/track.h"

/* The oldest wrappers' record of this rank and size that the plugin has not announced
 * yet, claimed now; or NULL. With the plugin loaded from the start, each record of
 * the wrappers is announced at its own creation, so one not yet announced is one
 * whose announcement is coming: a grouped creation announces its communicators
 * from NCCL's threads, at ncclGroupEnd, after the calls returned. */
static struct ng_comm *claim_wrapped(int rank, int nranks)
{
    for (int i = 0; i < ncclguard_comm_count(); i++) {
        struct ng_comm *c = ncclguard_comm_at(i);
        int r = ng_comm_rank(c), n = ng_comm_nranks(c), st = ng_comm_state(c);
        int seen = NG_SEEN_WRAPPERS;
        if ((st != NG_COMM_INITIALIZING && st != NG_COMM_READY) || (r >= 0 && r != rank) ||
            (n > 0 && n != nranks))
            continue;
        if (ng_atomic_cas_acq_rel(&c->seen, &seen, NG_SEEN_WRAPPERS | NG_SEEN_PLUGIN)) return c;
    }
    return NULL;
}

struct ng_comm *ncclguard_reported_comm(uint64_t nccl_hash, int rank, int nranks, const char *name,
                                        int *wrapped)
{
    /* this thread's creation through the wrappers (NCCL creates a lone blocking
     * communicator on the caller's thread), else one of theirs of this rank and
     * size (its own thread: a group, a nonblocking one) */
    struct ng_comm *c = ncclguard_comm_creating();
    int seen = NG_SEEN_WRAPPERS;
    if (!c || !ng_atomic_cas_acq_rel(&c->seen, &seen, NG_SEEN_WRAPPERS | NG_SEEN_PLUGIN))
        c = claim_wrapped(rank, nranks);
    *wrapped = 1;
    if (c) return c;
    /* none, while the wrappers create one (ncclCommInitAll makes its records after):
     * theirs, not followed here; the plugin follows no op of it */
    if (ncclguard_creations_in_flight() > 0) return NULL;
    *wrapped = 0;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = name;
    c = ncclguard_comm_new(nccl_hash, rank, nranks, 0, &config);
    if (!c) return NULL;
    ng_atomic_store_relaxed(&c->seen, NG_SEEN_PLUGIN);
    ncclguard_comm_set_state(c, NG_COMM_READY);
    ncclguard_comm_announce(c);
    return c;
}

void ncclguard_reported_comm_end(struct ng_comm *c)
{
    if (!(ng_atomic_load_relaxed(&c->seen) & NG_SEEN_WRAPPERS))
        ncclguard_comm_set_state(c, NG_COMM_DESTROYED);
}

static _Thread_local uint64_t thread_id;

void ncclguard_reported_op(struct ng_comm *c, int type, uint64_t count, ncclDataType_t dtype,
                           int root, int channels, uint64_t stream, int captured, int *mark,
                           uint32_t *gen)
{
    *mark = NG_NO_MARKER;
    if (type < 0 || type >= NG_OP_NTYPES) return;
    ng_atomic_add_relaxed(&c->reported_by_type[type], 1);
    if (ng_atomic_load_relaxed(&c->seen) & NG_SEEN_WRAPPERS) return; /* the wrappers' op */
    if (!thread_id) thread_id = (uint64_t)gettid();
    struct ng_op_record r;
    memset(&r, 0, sizeof r);
    r.count = count;
    r.stream = stream;
    r.thread_id = thread_id;
    r.enqueue_mono_ns = ng_clock_ns(CLOCK_MONOTONIC);
    r.op = type;
    r.dtype = dtype;
    r.redop = -1; /* the plugin's events do not say */
    r.root = root;
    r.comm_slot = c->slot;
    r.marker = NG_NO_MARKER;
    r.stack = NG_NO_STACK; /* taken on NCCL's thread, not the caller's: not the job's stack */
    ng_atomic_add_relaxed(&c->ops_by_type[type], 1);
    if (ng_op_is_p2p(type)) {
        if (root >= 0 && root < c->npeers)
            r.p2p_seq = ng_atomic_add_relaxed(&c->peers[root].seq, 1) + 1;
        if (r.p2p_seq == 1) r.flags |= NG_REC_FIRST;
    } else {
        uint64_t before = ng_atomic_add_relaxed(&c->coll_seq, 1);
        r.seq = before + 1;
        if (before == 0) r.flags |= NG_REC_FIRST;
    }
    int state = NG_OP_CAPTURED;
    if (!captured && ncclguard_track_mode != NG_TRACK_OFF) {
        r.marker = ncclguard_kmark_take(channels, gen);
        state = r.marker == NG_NO_MARKER ? NG_OP_UNTRACKED : NG_OP_SCHEDULED;
    }
    if (ncclguard_flight_append(&r, state) == NG_FLIGHT_NONE && r.marker != NG_NO_MARKER) {
        ncclguard_kmark_release(r.marker);
        r.marker = NG_NO_MARKER;
    }
    *mark = r.marker;
    ncclguard_track_arrival();
}

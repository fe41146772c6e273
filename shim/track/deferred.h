/*
 * deferred.h: end markers of nonblocking communicators.
 *
 * A nonblocking call that returns ncclInProgress may still be issuing its
 * kernels, so its end marker cannot be recorded yet. It waits here, one entry
 * per op or per (group, stream), until a later call on the communicator, or a
 * successful async-error poll of it, shows that NCCL finished launching. Until
 * then the marker belongs to its entry: the watchdog and the ring leave it alone
 * while the record says NG_REC_DEFERRED.
 *
 * Threads: application threads (a short lock, not held across NCCL calls).
 */
#ifndef NCCLGUARD_DEFERRED_H
#define NCCLGUARD_DEFERRED_H

#include <stdint.h>

struct ng_deferred {
    int comm_slot; /* the communicator's registry slot, -1 for a group's */
    int marker;
    uint64_t stream;
    uint64_t index;    /* the op's record, for a single op; a group's: its place */
    uint64_t group_id; /* 0 for a single op */
    int refs;          /* a group's records on this stream */
};

/* Keeps the end marker of d for later; when the table is full, records it now
 * (less precisely). */
void ncclguard_defer(const struct ng_deferred *d);

/* Records the end markers deferred for communicator `slot` (-1: all). Cheap when
 * nothing is deferred (one atomic load). */
void ncclguard_flush_deferred(int slot);

void ncclguard_deferred_atfork_child(void);

#endif

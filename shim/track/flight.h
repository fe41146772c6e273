/*
 * flight.h: the flight recorder, a ring of the last NCCLGUARD_RING op records.
 *
 * Owns: the ring (preallocated at the first communicator creation) and the
 * lifecycle of one record. A record is written by the application thread that
 * enqueued the op, then advanced (state, GPU times) by the watchdog.
 *
 * Concurrency, without locks:
 *  - a writer claims index i with one atomic add on `head`; the slot is
 *    i % capacity. Writers never wait for one another, nor for readers;
 *  - each slot has a seqlock-style `version`: odd while the claiming writer
 *    fills it, 2*(i+1) once record i is complete. A reader copies the slot and
 *    keeps the copy only if the version was even and unchanged around the copy;
 *  - `state_word` packs (index, state): the watchdog moves a record from one
 *    state to the next with a compare-and-swap, which fails harmlessly when
 *    the slot has meanwhile been reused for a newer record;
 *  - what the watchdog learns of a record lives beside the ring, one entry per
 *    slot with a part for each of its two threads (the observer: GPU and
 *    discovery times, the slow flag; the enforcer: the timeout and dumped
 *    flags), each part written by its thread only and tagged with the index of
 *    the record it is about; a copy of the record merges a part in only when its
 *    tag matches, so a value meant for an overwritten record never shows in its
 *    successor. The end of a nonblocking record's deferral is tagged the same
 *    way, by the application thread that records its end marker;
 *  - a writer preempted between its claim and its stores while the others go a
 *    whole lap of the ring writes its older record over the newer one of its
 *    slot: the newer one is lost uncounted, and a copy by its index fails (a
 *    drop's copy taken while both write can even mix the two). It
 *    takes a ring full of ops enqueued during one preemption;
 *  - claiming a slot whose previous record is not finished drops that record
 *    (counted in `dropped_inflight`); every overwrite counts in `overwritten`.
 *    A dropped record that holds CUDA events (a marker, or a share of its
 *    group's) is taken from the watchdog with a compare-and-swap on
 *    `state_word`, and a copy goes to the drop callback, which returns them.
 *
 * Threads: ncclguard_flight_append on any application thread (hot path: no
 * malloc, no syscall); readers on the watchdog, a dump, or a signal handler.
 */
#ifndef NCCLGUARD_FLIGHT_H
#define NCCLGUARD_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"
#include "base/ops.h"

#define NG_NO_MARKER (-1)
/* Where the GPU is with a record's marker: its CUDA events (markers.h), or its
 * kernel mark (kmarks.h). */
enum ng_marker_state { NG_MARKER_PENDING, NG_MARKER_STARTED, NG_MARKER_DONE, NG_MARKER_ERROR };

/* Records are copied word by word with relaxed atomic accesses (torn-free, and
 * clean under ThreadSanitizer): 64-bit fields, and 32-bit ones two to a word. */
struct ng_op_record {
    /* set by the writer */
    uint64_t seq;     /* collectives on this communicator, from 1 (0 for p2p) */
    uint64_t p2p_seq; /* sends+recvs to this peer on this communicator, from 1 */
    uint64_t count;
    uint64_t stream;         /* cudaStream_t value */
    uint64_t group_id;       /* 0 when not in a group */
    uint64_t thread_id;      /* gettid() of the caller */
    int64_t enqueue_mono_ns; /* CLOCK_MONOTONIC */
    int32_t op;              /* enum ng_op_type (base/ops.h) */
    int32_t dtype;           /* ncclDataType_t */
    int32_t redop;           /* ncclRedOp_t, -1 when none */
    union {
        int32_t root; /* a rooted collective's root, -1 when none */
        int32_t peer; /* a Send's or Recv's peer (comm rank) */
    };
    int32_t comm_slot; /* index of the communicator in the registry, -1 if none */
    int32_t marker;    /* CUDA event pair (track/markers.h), NG_NO_MARKER if none */
    int32_t result;    /* ncclResult_t the enqueue returned */
    int32_t stack;     /* enqueue stack id (track/stacks.h), NG_NO_STACK if none */
    uint64_t flags;    /* NG_REC_*: the writer's, and the watchdog's */
    /* concurrency */
    uint64_t state_word; /* (index << 8) | enum ng_op_state (base/ops.h) */
    uint64_t version;    /* 2*index+1 while written, 2*index+2 when complete */
    /* derived by a copy from the writer's fields, not in the ring's slot (each
     * word there is one more store on the hot path): the communicator's from
     * the registry record at comm_slot (0 and -1 without one; a split child's
     * rank and size once known), bytes from count and dtype, enqueue_ns from
     * enqueue_mono_ns on the process's current CLOCK_REALTIME offset */
    uint64_t comm_id;
    int32_t comm_rank, comm_nranks;
    uint64_t bytes;
    int64_t enqueue_ns; /* CLOCK_REALTIME */
    /* learnt by the watchdog: not in the ring's slot (the writer never stores
     * them), kept beside it and merged into copies; 0 unknown */
    int64_t gpu_start_ns, gpu_end_ns;   /* GPU-side, CLOCK_REALTIME scale */
    int64_t seen_start_ns, seen_end_ns; /* when the watchdog discovered them */
};

/* The state of a record copied out of the ring. */
static inline int ng_record_state(const struct ng_op_record *r)
{
    return (int)(r->state_word & 0xff);
}

#define NG_REC_SLOW 0x1u     /* reported as slow (watchdog) */
#define NG_REC_TIMEOUT 0x2u  /* reported as timed out (watchdog) */
#define NG_REC_DEFERRED 0x4u /* end marker not yet recorded (nonblocking, or being recorded) */
#define NG_REC_FIRST 0x8u    /* first op on its communicator */
#define NG_REC_DUMPED 0x10u  /* its timeout asked for a dump (watchdog) */
#define NG_REC_GAP 0x20u     /* timed only for coming after a host gap (ops.c) */
/* A group's op on a stream that got no place of its own in its group (track/
 * groups.h): it shares the marker of place NG_REC_PLACE(flags), a stream of its
 * group that holds an op of its communicator. Not in dumps. */
#define NG_REC_FOLLOWS 0x40u
#define NG_REC_PLACE_SHIFT 8
#define NG_REC_PLACE_MASK (0xfull << NG_REC_PLACE_SHIFT)
#define NG_REC_PLACE(flags) ((int)((NG_REC_PLACE_MASK & (flags)) >> NG_REC_PLACE_SHIFT))
#define NG_REC_INTERNAL (NG_REC_FOLLOWS | NG_REC_PLACE_MASK)
#define NG_REC_WATCH_FLAGS (NG_REC_SLOW | NG_REC_TIMEOUT | NG_REC_DUMPED)

struct ng_flight_stats {
    uint64_t recorded;         /* records ever appended */
    uint64_t overwritten;      /* records lost to wrap-around */
    uint64_t dropped_inflight; /* of which still unfinished when overwritten */
    uint64_t capacity;
    uint64_t bytes; /* the ring's mapping and what is kept beside it (metrics) */
};

#define NG_FLIGHT_NONE UINT64_MAX

/* Allocates the ring, of `capacity` rounded up to a power of two (at least
 * 16); idempotent. 0, or -1 when memory is short. */
int ncclguard_flight_init(uint64_t capacity);

/* Appends a copy of *rec in `state`; returns its index, NG_FLIGHT_NONE when the
 * ring is not allocated. Hot path: one atomic add and the copy (and a
 * compare-and-swap when an unfinished record holding events is dropped). */
uint64_t ncclguard_flight_append(const struct ng_op_record *rec, int state);

/* CLOCK_REALTIME minus CLOCK_MONOTONIC, which copies add to enqueue_mono_ns
 * (the watchdog refreshes it at each poll). Any thread. */
void ncclguard_flight_set_realtime_offset(int64_t ns);

/* Called on the writer's thread with a copy of each record dropped while in
 * flight that holds CUDA events, once per record: the watchdog no longer
 * advances it, so what it held is the callback's to return. Must not block. */
typedef void (*ng_flight_drop_fn)(const struct ng_op_record *dropped);
void ncclguard_flight_on_drop(ng_flight_drop_fn fn);

/* Copies record `index` consistently; 0 on success, -1 if torn or overwritten. */
int ncclguard_flight_copy(uint64_t index, struct ng_op_record *out);

/* Current state of record `index`, or -1 if it was overwritten. */
int ncclguard_flight_state(uint64_t index);

/* Moves record `index` from state `from` to `to`; 0 on success, -1 if the
 * record changed meanwhile (overwritten, or advanced by someone else). */
int ncclguard_flight_advance(uint64_t index, int from, int to);

/* What a watchdog thread learnt of record `index`: one of gpu_start_ns,
 * gpu_end_ns, seen_start_ns, seen_end_ns, or flags (its NG_REC_WATCH_FLAGS
 * bits). Each `watcher` writes its own part only, from one thread. Kept beside
 * the ring, tagged with `index`, so that it never lands in a newer record of the
 * same slot. */
enum ng_watcher { NG_WATCHER_OBSERVER, NG_WATCHER_ENFORCER, NG_WATCHERS };
enum ng_watch_field {
    NG_WATCH_GPU_START,
    NG_WATCH_GPU_END,
    NG_WATCH_SEEN_START,
    NG_WATCH_SEEN_END,
    NG_WATCH_FLAGS,
    NG_WATCH_NFIELDS
};
void ncclguard_flight_watch(uint64_t index, enum ng_watcher who, enum ng_watch_field field,
                            uint64_t value);
/* The same for several fields at once, those whose bit (1u << field) is set in
 * `which`, from value[field]: the observer learns up to four times of an op
 * that completes, for the price of one call. */
void ncclguard_flight_watch_fields(uint64_t index, enum ng_watcher who, unsigned which,
                                   const uint64_t value[NG_WATCH_NFIELDS]);

/* The application thread recorded the deferred end marker of record `index`:
 * copies of it no longer carry NG_REC_DEFERRED. */
void ncclguard_flight_end_deferred(uint64_t index);

/*
 * The hot path's short deferral. An op goes into the ring before its end marker
 * is recorded, since that record blocks behind a full launch queue (a stuck
 * GPU), and the op must be there by then: ncclguard_flight_append_pending
 * appends it in state NG_OP_SCHEDULED with the NG_FLIGHT_END_PENDING bit of its
 * state word set. While the bit is set, copies show the op scheduled with
 * NG_REC_DEFERRED (its marker is not asked), and nobody can advance it
 * (ncclguard_flight_advance fails; the observer tries again at its next pass).
 * Once the record returns, ncclguard_flight_publish_end clears the bit with a
 * compare-and-swap on the slot just written: 1; or 0 when the record left the
 * ring meanwhile (dropped, its marker left to its writer), whose marker the
 * caller then returns. Whoever wins the swap owns the marker: never two, never
 * none. Hot path: the append, and one compare-and-swap, inline.
 */
#define NG_FLIGHT_END_PENDING 0x80
#define NG_FLIGHT_STATE_BITS 8 /* a state word: (index << 8) | state */
struct ng_flight_pending {
    ng_atomic(uint64_t) * word; /* the record's state word (without a ring, one the
                                * swap never matches) */
    uint64_t value;             /* its value as appended */
};
uint64_t ncclguard_flight_append_pending(const struct ng_op_record *rec,
                                         struct ng_flight_pending *p);
static inline int ncclguard_flight_publish_end(struct ng_flight_pending *p)
{
    uint64_t expected = p->value;
    return ng_atomic_cas_acq_rel(p->word, &expected, expected & ~(uint64_t)NG_FLIGHT_END_PENDING);
}

/* What a reader or a walk hands its callback: record `index`, a consistent
 * copy of it. */
typedef void (*ng_flight_fn)(uint64_t index, const struct ng_op_record *r, void *ctx);

/*
 * A reader that takes every record once, as it is appended: each of the
 * watchdog's threads keeps one (the observer files the records in its lanes,
 * the enforcer in its agenda), so that a pass copies the records appended since
 * the last one, not the ring. A record still being written when the reader
 * reaches it is taken at a later call (the first NG_FLIGHT_LATE of them; past
 * that, the reader waits at the next one); a record overwritten before it was
 * taken is skipped.
 */
#define NG_FLIGHT_LATE 64
struct ng_flight_reader {
    uint64_t next; /* the records below it were taken, or are late */
    uint64_t late[NG_FLIGHT_LATE];
    int nlate;
};

/* Calls fn for every record appended since the last call on rd. */
void ncclguard_flight_read(struct ng_flight_reader *rd, ng_flight_fn fn, void *ctx);

/* Calls fn for every record of the ring that is not in a final state (those
 * being written are left out): a whole walk, for the rare pass that must find
 * records wherever they are. */
void ncclguard_flight_walk(ng_flight_fn fn, void *ctx);

/* Index one past the newest record. */
uint64_t ncclguard_flight_head(void);

void ncclguard_flight_stats(struct ng_flight_stats *out);

/* fork(): the child starts with an empty ring. */
void ncclguard_flight_atfork_child(void);

#endif

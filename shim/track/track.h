/*
 * track.h: the tracking subsystem as a whole: its start at the first
 * communicator, its parameters, and fork.
 *
 * Owns: whether the shim tracks at all (ncclguard_tracking), the tracking mode,
 * the flight recorder's drop policy (a record overwritten while in flight gives
 * its CUDA events back), and the two things track/ asks of the watchdog. track/
 * reads no settings: it is handed everything here, at start.
 *
 * Threads: ncclguard_track_start under the start module's lock, on the
 * application thread that creates the first communicator; the getters from
 * any thread (the hot path reads the mode).
 */
#ifndef NCCLGUARD_TRACK_H
#define NCCLGUARD_TRACK_H

#include <stdint.h>

#include "base/atomic.h"
#include "base/ops.h"

struct ng_comm;

/*
 * What the watchdog does for application threads, handed over at start: track/
 * sits below watch/ (docs/architecture.md), so it reaches it through these.
 *   settle:      before a communicator ends (its CUDA context may go next),
 *                advance op states from the markers on the calling thread;
 *   async_error: report an async error that the application's own
 *                ncclCommGetAsyncError saw, once;
 *   wake:        poll now, not at the next period: a split child was created,
 *                whose rank and size only NCCL knows.
 */
struct ng_track_observer {
    void (*settle)(void);
    void (*async_error)(struct ng_comm *c, int err);
    void (*wake)(void);
};

struct ng_track_params {
    enum ng_track_mode mode;
    uint64_t ring;            /* flight recorder records */
    int timing_sample;        /* one op in N per class gets timed events; 0: none */
    int64_t anchor_period_ns; /* 0: the default (markers.h) */
    int stack_depth;          /* enqueue stack frames, 0: none (track/stacks.h) */
    struct ng_track_observer observer;
};

/* True once the shim tracks calls; false when disabled or turned off by an error.
 * The wrappers read it on every call. */
extern NG_HIDDEN ng_atomic(int) ncclguard_tracking;

/* The mode handed to ncclguard_track_start (NG_TRACK_FULL before): set once,
 * before the first communicator is published; the hot path reads it. */
extern NG_HIDDEN enum ng_track_mode ncclguard_track_mode;

/* NCCLGUARD_TIMING_SAMPLE as handed to ncclguard_track_start (16 before): one
 * op in N of each (communicator, op, size class), the first included, gets
 * timed markers; 0: none. Set once, before the first op; the hot path reads it. */
extern NG_HIDDEN int ncclguard_timing_sample;

/* Gives the flight recorder the current CLOCK_REALTIME offset (the watchdog at
 * each poll): a record keeps its monotonic time only (track/flight.h). */
void ncclguard_track_refresh_clock(void);

/* Allocates the flight recorder and the group table, sizes the marker pools and
 * opens the CUDA driver. 0, or -1 when tracking had to be turned off (logged). */
int ncclguard_track_start(const struct ng_track_params *p);

/* The observer's hooks (no-ops before start). */
void ncclguard_track_settle(void);
void ncclguard_track_async_error(struct ng_comm *c, int err);
void ncclguard_track_wake(void);

/* Set by the observer while it rests (nothing in flight for a second: it polls
 * once a second, not every period); the first op recorded after that wakes it,
 * so that a burst after a pause is followed at once, its markers returned in
 * time. One relaxed load per op, one wake per rest. */
extern ng_atomic(int) ncclguard_track_resting;
static inline void ncclguard_track_arrival(void)
{
    if (__builtin_expect(ng_atomic_load_relaxed(&ncclguard_track_resting), 0) &&
        ng_atomic_exchange_relaxed(&ncclguard_track_resting, 0))
        ncclguard_track_wake();
}

/* fork(): the child starts with an empty ring, no group markers, no deferred
 * end markers (the registry forgets its records in track/comm.c). */
void ncclguard_track_atfork_child(void);

#endif

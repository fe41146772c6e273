/*
 * observer.h: the watchdog's observer, the one thread of the shim that calls
 * CUDA and NCCL on its own behalf, and so the one that may block inside them
 * (a full hardware queue, a stuck driver, an NCCL call that hangs).
 *
 * Owns: following every op on the GPU (its markers: scheduled -> started ->
 * completed; the ops in flight wait in lanes, lanes.h), the duration statistics and slow-op lines of completed ops, the
 * marker pools and clock anchors, each communicator's async error and the rank
 * and size of split children, and a heartbeat. It decides nothing irreversible:
 * timeouts, dumps and the escalation ladder are the enforcer's (watchdog.c),
 * which never calls CUDA or NCCL and tells from the heartbeat when the observer
 * is stuck.
 *
 * Threads: the observer thread ("ncclguard-wd": the fake NCCL's call log tells
 * the shim's own calls by it); ncclguard_observer_pass(0) also on an
 * application thread before it ends a communicator (markers only, no NCCL
 * call); ncclguard_observer_async_error from any thread.
 */
#ifndef NCCLGUARD_OBSERVER_H
#define NCCLGUARD_OBSERVER_H

#include <stdint.h>

struct ng_comm;

/* Starts the observer thread; 0, or -1 (logged). */
int ncclguard_observer_start(void);

/* One pass. full = 0: only the markers of unfinished ops (the settle before a
 * communicator ends, in relaxed capture mode); full = 1: also the pools and
 * clock anchors and every communicator's async error. */
void ncclguard_observer_pass(int full);

/* Poll now instead of at the end of the period. */
void ncclguard_observer_wake(void);

/* Reports an async error of `c` once (log line and event), from whichever
 * thread saw it first: the observer or the application's own call. */
void ncclguard_observer_async_error(struct ng_comm *c, int err);

/* Called by each full pass that finds records appended since the last one (the
 * enforcer's: it wakes when it rests, watchdog.c); on the observer's thread,
 * under its pass lock. Must not block. */
typedef void (*ng_observer_arrival_fn)(void);
void ncclguard_observer_on_arrival(ng_observer_arrival_fn fn);

/* How long the observer has been inside its current pass, in ns (0 between
 * passes); the enforcer's view of its heartbeat. */
int64_t ncclguard_observer_busy_ns(int64_t now_mono);

/* sleep_ms: the sleep chosen after the last full pass, NCCLGUARD_POLL_MS, or a
 * second while nothing is in flight (tests). */
struct ng_observer_stats {
    uint64_t completed, slow, async_errors, passes;
    long sleep_ms;
};
void ncclguard_observer_stats(struct ng_observer_stats *out);

/* fork(): the child has no observer thread; it starts one at its first comm. */
void ncclguard_observer_atfork_child(void);

#endif

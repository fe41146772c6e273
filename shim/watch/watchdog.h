/*
 * watchdog.h: the watchdog, two threads started at the first communicator.
 *
 * The observer (observer.h) follows every op on the GPU and polls NCCL; it may
 * block inside CUDA or NCCL. The enforcer (watchdog.c) decides: when a step can
 * be due (at most once per NCCLGUARD_POLL_MS; at least every 5 s, and at once
 * when ops arrive after it found none in flight) it
 * reports timeouts and stuck communicator creations, asks
 * the dump thread (dumper.h) for dumps (on timeout, on request by signal, at
 * exit when asked) and runs the escalation ladder, and it never calls CUDA or
 * NCCL, so a hung call cannot stop it; nor does a slow dump. This header is
 * what the rest of the shim sees of both.
 *
 * Threads: ncclguard_watchdog_start on the application thread that creates the
 * first communicator; ncclguard_watchdog_request_dump from anywhere, including
 * a signal handler (it sets a flag and writes an eventfd).
 */
#ifndef NCCLGUARD_WATCHDOG_H
#define NCCLGUARD_WATCHDOG_H

#include <stdint.h>

void ncclguard_watchdog_start(void);

/* Async-signal-safe: asks the dump thread for a dump, and wakes it. */
void ncclguard_watchdog_request_dump(void);

/* The same for the dump that carries NCCL's RAS answer (evidence/ras.h):
 * reason "ras". */
void ncclguard_watchdog_request_ras_dump(void);

/* At exit: one last poll on the calling thread, the exit dump if configured
 * (written by the dump thread, waited for at most NG_DUMPER_WAIT_S),
 * and the summary line. */
void ncclguard_watchdog_at_exit(void);

/* fork(): the child has no watchdog thread; it starts one at its first comm. */
void ncclguard_watchdog_atfork_child(void);

struct ng_watchdog_stats {
    uint64_t completed, slow, timeouts, init_timeouts, async_errors, dumps, polls;
    long observer_sleep_ms; /* the observer's sleep after its last pass */
};
void ncclguard_watchdog_stats(struct ng_watchdog_stats *out);

/* Reports an async error of `c` once (log line and event), from whichever
 * thread saw it first: the watchdog's poll or the application's own call. */
struct ng_comm;
void ncclguard_watchdog_async_error(struct ng_comm *c, int err);

/* One full poll, for tests and the benchmark. */
void ncclguard_watchdog_poll_once(void);

/* The enforcer's passes so far, when the last began and when the next is due
 * (CLOCK_MONOTONIC), whether it rests (its last pass found nothing in flight)
 * and how often the observer woke it early, for tests. */
struct ng_enforcer_schedule {
    uint64_t passes;
    int64_t last_ns, next_ns;
    int resting;
    uint64_t kicks;
};
void ncclguard_watchdog_enforcer_schedule(struct ng_enforcer_schedule *out);

/* Any thread but a signal handler: poll now instead of at the end of the period. */
void ncclguard_watchdog_wake(void);

/* Application thread, before it ends a communicator (the context may go away
 * next): advances op states from the CUDA markers, and makes no NCCL call. */
void ncclguard_watchdog_settle(void);

#endif

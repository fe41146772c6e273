/*
 * watchdog.h: the thread that follows every op on the GPU.
 *
 * Owns: the watchdog thread (started at the first communicator creation),
 * which every NCCLGUARD_POLL_MS advances op states from their CUDA markers,
 * keeps duration statistics, reports slow ops, timeouts, stuck communicator
 * creations and async errors, and writes dumps (on timeout, on request by
 * signal, at exit when asked).
 *
 * Threads: ncclguard_watchdog_start on the application thread that creates the
 * first communicator; ncclguard_watchdog_request_dump from anywhere, including
 * a signal handler (it only sets a flag).
 */
#ifndef NCCLGUARD_WATCHDOG_H
#define NCCLGUARD_WATCHDOG_H

#include <stdint.h>

void ncclguard_watchdog_start(void);

/* Async-signal-safe: asks the watchdog for a dump at its next poll. */
void ncclguard_watchdog_request_dump(void);

/* At exit: one last poll on the calling thread, the exit dump if configured,
 * and the summary line. */
void ncclguard_watchdog_at_exit(void);

/* fork(): the child has no watchdog thread; it starts one at its first comm. */
void ncclguard_watchdog_atfork_child(void);

struct ng_watchdog_stats {
    uint64_t completed, slow, timeouts, init_timeouts, async_errors, dumps, polls;
};
void ncclguard_watchdog_stats(struct ng_watchdog_stats *out);

/* Reports an async error of `c` once (log line and event), from whichever
 * thread saw it first: the watchdog's poll or the application's own call. */
struct ng_comm;
void ncclguard_watchdog_async_error(struct ng_comm *c, int err);

/* One full poll, for tests and the benchmark. */
void ncclguard_watchdog_poll_once(void);

/* Any thread but a signal handler: poll now instead of at the end of the period. */
void ncclguard_watchdog_wake(void);

/* Application thread, before it ends a communicator (the context may go away
 * next): advances op states from the CUDA markers, and makes no NCCL call. */
void ncclguard_watchdog_settle(void);

#endif

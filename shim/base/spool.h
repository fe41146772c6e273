/*
 * spool.h: the writer thread of the log and the event log, so that a file that
 * stops taking lines (a stalled network file system, where write(2) on a
 * regular file blocks whatever O_NONBLOCK says) never stalls the thread that
 * logs: an application thread, or the watchdog.
 *
 * Owns: a fixed queue of lines (NG_SPOOL_SLOTS of NG_SPOOL_LINE bytes, static,
 * untouched until used), the thread "ncclguard-out" that writes them in order,
 * and the accounting of lost lines per sink (struct ng_sink): a line that the
 * queue has no room for, or that the file does not take whole, is lost, counted,
 * and the first loss of each sink is said once on stderr.
 *
 * Before ncclguard_spool_start (so in a process without a communicator) and
 * after a fork, lines are written directly by the caller, as there is no
 * thread; stderr is always written directly (it is the job's own).
 *
 * Threads: ncclguard_spool_write from any thread but signal handlers; start and
 * finish from the shim's start and exit paths; atfork_child in the child.
 */
#ifndef NCCLGUARD_SPOOL_H
#define NCCLGUARD_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/atomic.h"

#define NG_SPOOL_SLOTS 256    /* lines queued at most */
#define NG_SPOOL_LINE 2048    /* bytes of one queued line (an event line's maximum) */
#define NG_SPOOL_EXIT_MS 2000 /* how long exit and the kill action wait for the queue */

/* One output (the log, the event log) as far as losses go. */
struct ng_sink {
    const char *what;         /* "the log", for the notice */
    ng_atomic(uint64_t) lost; /* lines lost */
};

/* Writes (or queues) one line for fd; 0 when written or queued, -1 when it is
 * lost now (counted in sink). Never waits for the file. */
int ncclguard_spool_write(struct ng_sink *sink, int fd, const char *line, size_t len);

/* Starts the writer thread (once; at the first communicator). When it cannot
 * start, lines keep being written directly. */
void ncclguard_spool_start(void);

/* Waits until the queue is written, at most deadline_ms (exit, the kill action):
 * 0 when it is, and later lines are then written directly; -1 when lines are
 * still queued (the file is stalled: they are lost with the process). */
int ncclguard_spool_finish(int deadline_ms);

/* fork(): the child has no writer thread; it writes directly, and drops what
 * the parent had queued (the parent writes it). */
void ncclguard_spool_atfork_child(void);

#endif

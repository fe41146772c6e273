/*
 * trigger.h: the cross-rank dump. A rank that times out, or a person who runs
 * `touch <dump dir>/TRIGGER`, makes every rank of the job dump once, the ranks
 * that wait on nothing included.
 *
 * Owns: the incident id, the trigger file in the job's shared dump directory,
 * the node's poller election and the node-local fan-out:
 *  - <dump dir>/TRIGGER: its first line names who raised the incident (empty
 *    when a person touched it); the incident id is "<mtime>-<first line or
 *    'manual'>", so every node derives the same id from the same file, and a
 *    touch of an old file starts a new incident;
 *  - /dev/shm/ncclguard-<uid>/poller-<h>.lock: one process per node holds its
 *    flock and stats TRIGGER every NCCLGUARD_TRIGGER_POLL_S seconds (default
 *    2): one metadata operation per node and period on the shared file system
 *    (<h> is a hash of the dump directory: one channel per job). The poller
 *    removes it when it leaves, under its lock; a process that becomes a
 *    poller removes the files that nobody holds (jobs killed before they could);
 *  - /dev/shm/ncclguard-<uid>/trigger-<h>: the poller (or a rank that timed
 *    out) writes the incident id there; every process of the node stats it
 *    when the directory changes (inotify: the dump thread sleeps on
 *    ncclguard_trigger_wait_fd), or at each watchdog period without inotify;
 *    a stat on tmpfs. A process that is not the poller does nothing on a
 *    timer: it tries the lock again when the directory changes, which the
 *    poller's exit does (its lock file closed, however it ends).
 * NCCLGUARD_NODE_DIR names another node-local directory in place of /dev/shm
 * (a container with a private /dev/shm; tests that play two nodes on one).
 * A trigger file older than the process's start is history, never an
 * incident. A rank that times out within TRIGGER_JOIN_S of an incident joins
 * it instead of raising a new one.
 *
 * Threads: init under the start lock; the rest on the watchdog thread (the
 * thread that writes the dumps), between dumps. raise and check hand the
 * incident to the dump (dump_body.h). TRIGGER and the fan-out are read as
 * base/infile.h says: a FIFO, a link or a stranger's file is refused with one
 * line, never waited on. ncclguard_trigger_exit from the exit handler.
 */
#ifndef NCCLGUARD_TRIGGER_H
#define NCCLGUARD_TRIGGER_H

#include <stdint.h>

/* Computes the paths (after ncclguard_dump_init) and reads
 * NCCLGUARD_TRIGGER_POLL_S. Creates /dev/shm/ncclguard-<uid> and the lock
 * file; nothing in the dump directory. */
void ncclguard_trigger_init(void);

/* A timeout: joins the incident of a recent trigger file or raises a new one
 * (TRIGGER written, node fanned out). Returns 1 when this rank has not dumped
 * for that incident yet (it is then counted as dumped), 0 otherwise. */
int ncclguard_trigger_raise(void);

/* One check: the node's fan-out (and, for the poller, the shared file
 * every trigger period). Returns 1 when an incident arrived that this rank has
 * not dumped for (counted as dumped now), 0 otherwise. */
int ncclguard_trigger_check(void);

/* A descriptor that polls readable when the fan-out may have changed (check
 * then), or -1 (made at the first call; without inotify, or without a node
 * directory). */
int ncclguard_trigger_wait_fd(void);

/* When a check is next due without an event on the wait descriptor
 * (CLOCK_MONOTONIC): the poller's stat of TRIGGER every trigger period; the
 * first try at the poller's lock; INT64_MAX for a process that is not the
 * poller (an event wakes it); and every period_ns when the fan-out has no
 * wait descriptor. */
int64_t ncclguard_trigger_next_ns(int64_t now_mono, int64_t period_ns);

/* True when this process reports incident `id` (evidence/verdict.h): it raised
 * it, or the id names no rank (a manual trigger, a node-local incident) and
 * this is global rank 0 or the only process. */
int ncclguard_trigger_is_reporter(const char *id);

/* The incident this rank dumped for last; NULL before any. */
const char *ncclguard_trigger_incident(void);

/* The process leaves (its exit handler, or the kill action before _exit): the
 * poller removes its lock file, under the lock. */
void ncclguard_trigger_exit(void);

/* fork(): the child holds no poller lock and has seen no incident. */
void ncclguard_trigger_atfork_child(void);

#endif

/*
 * stats.h: running duration statistics of completed ops, per (communicator,
 * op, size class), and the slow-op rule built on them.
 *
 * A size class is the power of two of the op's bytes, so a 1 KiB AllReduce is
 * not compared with a 1 GiB one. Each class keeps its last 32 durations; the
 * median of that window is the reference once 8 have been seen (warm-up).
 *
 * Threads: the watchdog only (no locking).
 */
#ifndef NCCLGUARD_STATS_H
#define NCCLGUARD_STATS_H

#include <stdint.h>

/* Adds one duration. Returns the class's median before this sample (ns), or 0
 * during the warm-up. */
int64_t ncclguard_stats_observe(uint64_t comm_id, int op, uint64_t bytes, int64_t dur_ns);

/* Forgets everything (fork child, tests). */
void ncclguard_stats_reset(void);

#endif

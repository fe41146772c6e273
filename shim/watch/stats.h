/*
 * stats.h: running duration statistics of completed ops, per (communicator,
 * op, size class), the reference of the slow-op rule.
 *
 * A size class is the power of two of the op's bytes, so a 1 KiB AllReduce is
 * not compared with a 1 GiB one. Each class keeps a histogram of its durations
 * in quarter-octave buckets (each bucket 19% wider than the one below, from 1 ns
 * to 2^40 ns), aged by halving every count after each 64 samples, so that it
 * follows a job whose op times drift. The reference is the histogram's median
 * (the middle of its bucket: within 10% of the true value), recomputed every 8
 * samples, and given once 8 samples have been seen (warm-up). Cost per sample: a
 * bucket index and an increment, plus a walk of the buckets every eighth sample;
 * no sort. The same histograms can serve metrics later.
 *
 * Threads: the observer only (no locking).
 */
#ifndef NCCLGUARD_STATS_H
#define NCCLGUARD_STATS_H

#include <stdint.h>

/* Adds one duration. Returns the class's median before this sample (ns), or 0
 * during the warm-up (and for a class the table has no room for). */
int64_t ncclguard_stats_observe(uint64_t comm_id, int op, uint64_t bytes, int64_t dur_ns);

/* Forgets everything (fork child, tests). */
void ncclguard_stats_reset(void);

#endif

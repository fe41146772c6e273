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
 * samples, and given once 32 samples have been seen (warm-up: an op that waits
 * for its peers varies with their lateness, and a median of a few samples
 * misleads). Cost per sample: a
 * bucket index and an increment, plus a walk of the buckets every eighth sample;
 * no sort. The same histograms can serve metrics later.
 *
 * The relative part of the slow-op rule lives here too, because one rank alone
 * cannot tell its own slowness from waiting for a late peer: a peer that pauses
 * once makes every rank's op of that step long. So an op is slow by the factor
 * rule only when its class has been over factor x median in at least
 * NG_SLOW_PERSIST (6) of its last 8 samples, this one included: a lasting change,
 * not an occasional wait. Telling the straggler is left to `ncclguard analyze`,
 * which sees every rank.
 *
 * Threads: the observer only (no locking).
 */
#ifndef NCCLGUARD_STATS_H
#define NCCLGUARD_STATS_H

#include <stdint.h>

#define NG_SLOW_PERSIST 6

struct ng_sample {
    int64_t median; /* the class's median before this sample (ns); 0 in the warm-up */
    int persistent; /* over `factor` x median in >= NG_SLOW_PERSIST of the last 8 */
};

/* Adds one duration. An op counts as over when factor > 0, it lasted at least
 * floor_ns and longer than factor x the median. A class the table has no room
 * for gives {0, 0}. */
struct ng_sample ncclguard_stats_observe(uint64_t comm_id, int op, uint64_t bytes, int64_t dur_ns,
                                         double factor, int64_t floor_ns);

/* Forgets everything (fork child, tests). */
void ncclguard_stats_reset(void);

#endif

/*
 * metrics.h: live metrics for Prometheus, as a file that node_exporter's
 * textfile collector serves (`metrics = textfile:DIR`, docs/metrics.md).
 *
 * Owns: the few counters that the shim did not keep already and that cost
 * nothing on the hot path, all kept by the observer as it ends ops (op ends by
 * communicator, op and state; the time of each communicator's last completed op;
 * the histograms of the GPU durations of timing samples; the GPU time of the
 * timed collectives, for the straggler ranking), and the file
 * DIR/ncclguard-<job>-r<rank>-<pid>.prom in the Prometheus text exposition
 * format, written whole into "<name>.tmp" and renamed over the name, so that a
 * reader sees the old file or the new one, never a part.
 *
 * Everything else in the file is read from what the shim keeps anyway: the
 * registry's counters, the flight recorder's statistics, the watchdog's
 * (slow ops, timeouts, dumps, async errors), one walk of the ring per write (the
 * ops in flight and the oldest one's age), and /proc for the CPU time of the
 * shim's own threads.
 *
 * At most NG_METRICS_COMMS communicators of a process get series of their own
 * (the first ones created); the others are added up under comm="other".
 *
 * The file is written by the dump thread, which owns the shim's file I/O: a
 * directory on a file system that hangs holds up that thread only, never the
 * enforcer's timeouts.
 *
 * Threads: ncclguard_metrics_op_end on whoever runs an observer pass (under
 * the observer's pass lock: one at a time); ncclguard_metrics_tick on the
 * dump thread (or the enforcer, when that thread could not start);
 * ncclguard_metrics_init at the start of the watchdog;
 * ncclguard_metrics_at_exit on the exiting thread. Not for signal handlers.
 */
#ifndef NCCLGUARD_METRICS_H
#define NCCLGUARD_METRICS_H

#include <stdint.h>

#include "base/atomic.h"
#include "track/flight.h"

/* Communicators with series of their own per process; the rest are "other". */
#define NG_METRICS_COMMS 16

/* 1 while a metrics file is being kept: the observer's hooks test it first. */
extern NG_HIDDEN ng_atomic(int) ncclguard_metrics_active;
static inline int ncclguard_metrics_on(void)
{
    return ng_atomic_load_relaxed(&ncclguard_metrics_active);
}

/* The watchdog's counters, handed in by watchdog.c (which this module does
 * not include: the watchdog includes it). Called on the thread that writes. */
struct ng_metrics_watch {
    uint64_t slow, timeouts, init_timeouts, dumps, async_errors;
};
typedef void (*ng_metrics_watch_fn)(struct ng_metrics_watch *out);

/* Reads the settings and checks the directory: one line and no metrics when
 * `metrics` names no usable one. `watch` gives the watchdog's counters. The
 * first file is written at the dump thread's first tick. */
void ncclguard_metrics_init(ng_metrics_watch_fn watch);

/* The op of record r ended in `state` (completed, failed, aborted; others are
 * ignored), with the GPU times the observer learnt (0: unknown), seen at
 * now_mono. */
void ncclguard_metrics_op_end(const struct ng_op_record *r, int state, int64_t gpu_start,
                              int64_t gpu_end, int64_t now_mono);

/* The dump thread (watch/dumper.c), each time it wakes: writes the file when
 * it is due. Returns when the next write is due (CLOCK_MONOTONIC), which
 * bounds its sleep; INT64_MAX when none will be. */
int64_t ncclguard_metrics_tick(int64_t now_mono);

/* At a clean exit: the last file when metrics_keep_at_exit is on, else the
 * file is removed. No file is written after it. */
void ncclguard_metrics_at_exit(void);

/* fork(): the child keeps no file of the parent's; its first communicator
 * starts its own. */
void ncclguard_metrics_atfork_child(void);

#endif

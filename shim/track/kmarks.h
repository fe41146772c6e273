/*
 * kmarks.h: kernel marks, what NCCL's profiler plugin tells of the kernel of an
 * op the wrappers never saw (track/reported.h), channel by channel.
 *
 * Owns: a fixed table of marks. A mark counts the channels of its op's kernel
 * that started and that stopped (KernelCh events, with the GPU's timer): the op
 * started with its first channel and completed when every one of its nChannels
 * stopped. A mark is a marker number of its own range, and markers.c hands the
 * observer's polls of those numbers to this file, so an op with a mark is
 * followed like one with CUDA events. A mark is free again once its op's record
 * is finished (ncclguard_marker_release) and every channel stopped, so that no
 * event of an earlier op lands in a later one; a kernel that never stops keeps
 * its mark, and with every mark taken an op is recorded without one (untracked).
 *
 * Threads: take on the thread that launches the op; start and stop on NCCL's
 * proxy thread; poll, passed and release on the observer (release also on a
 * writer that drops a record in flight). No lock, no malloc: one word per mark,
 * changed by compare-and-swap.
 */
#ifndef NCCLGUARD_TRACK_KMARKS_H
#define NCCLGUARD_TRACK_KMARKS_H

#include <stdint.h>

#include "track/flight.h"

/* Kernel marks are marker numbers from NG_KMARK_BASE on (CUDA markers are below). */
#define NG_KMARK_BASE (1 << 29)
#define NG_KMARKS 8192
static inline int ng_is_kmark(int marker)
{
    return marker >= NG_KMARK_BASE && marker < NG_KMARK_BASE + NG_KMARKS;
}

/* A free mark for an op whose kernel runs on `channels` channels: its number and
 * *gen, its generation; NG_NO_MARKER (flight.h) when every mark is taken. */
int ncclguard_kmark_take(int channels, uint32_t *gen);

/* A channel of the op's kernel started / stopped, at GPU time ns (CLOCK_REALTIME
 * scale, 0 when unknown). */
void ncclguard_kmark_start(int mark, uint32_t gen, int64_t ns);
void ncclguard_kmark_stop(int mark, uint32_t gen, int64_t ns);

/* The observer's side, as for CUDA markers (markers.h). */
enum ng_marker_state ncclguard_kmark_poll(int mark, int64_t *start_ns, int64_t *end_ns);
int ncclguard_kmark_passed(int mark, int end);
void ncclguard_kmark_release(int mark);

/* Kernel marks in use (tests). */
int ncclguard_kmarks_busy(void);

#endif

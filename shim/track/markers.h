/*
 * markers.h: the CUDA driver, seen from the shim.
 *
 * Owns: libcuda.so.1, opened with dlopen(RTLD_LOCAL) at the first communicator
 * creation and never before; the pools of CUDA events ("markers": one start and
 * one end event) per context; the mapping of event times onto the host clock.
 *
 * A marker is recorded on the op's stream before (start) and after (end) the
 * NCCL work; the watchdog queries them. Most markers are events without
 * timing (CU_EVENT_DISABLE_TIMING, cheap to record); the sampled ops get timed
 * ones, whose GPU times the watchdog reads. Events are created only off the hot
 * path (at communicator creation, or by the watchdog) and never destroyed
 * while the process runs, since destroying an event can synchronize.
 *
 * Threads: ncclguard_marker_begin/end on application threads (hot path:
 * no lock, no malloc, CUDA event calls only: the capture query and the
 * records, and the stream's context the first time a thread uses a stream); ncclguard_marker_poll and
 * _release on the watchdog, which first calls ncclguard_markers_watchdog_setup so
 * that its queries never invalidate another thread's stream capture.
 */
#ifndef NCCLGUARD_GPU_H
#define NCCLGUARD_GPU_H

#include <stdint.h>

#include "track/flight.h"

/* Opens libcuda.so.1 and resolves what the shim uses; 0, or -1 (logged once). */
int ncclguard_markers_open(void);

/* cuDriverGetVersion of the opened driver (13000 for CUDA 13.0); 0 when not
 * known. Any thread, signal handlers included. */
int ncclguard_markers_driver_version(void);

/* Makes sure the context current on this thread has a marker pool (called at
 * communicator creation, off the hot path). */
void ncclguard_markers_prepare_current(void);

/* The same for the primary context of device `ordinal`, after ncclCommInitAll
 * made its communicator there (NCCL's runtime holds that context then: the
 * reference taken here is given back). */
void ncclguard_markers_prepare_device(int ordinal);

enum ng_marker_begin {
    NG_MARKER_OK,       /* *marker is set and its start event recorded (if `start`) */
    NG_MARKER_CAPTURED, /* the stream is capturing into a CUDA graph: no marker */
    NG_MARKER_NONE,     /* no marker available (no driver, no pool, pool empty) */
};

/* Takes a marker for `stream` and, when `start` is set, records its start event.
 * With `timed` (a sampled op) the marker is a timed one while the pool has one
 * free: its events give GPU times; other markers' events are created with
 * CU_EVENT_DISABLE_TIMING and give only progress. *end is its end event, for
 * ncclguard_marker_end_event. */
enum ng_marker_begin ncclguard_marker_begin(void *stream, int start, int timed, int *marker,
                                            void **end);

/* Whether `stream` may get a marker now (the query is safe during a capture). */
enum ng_capture {
    NG_CAPTURE_NONE,    /* not capturing: a marker may be recorded */
    NG_CAPTURE_ACTIVE,  /* capturing into a CUDA graph: the op only records work */
    NG_CAPTURE_UNKNOWN, /* the driver would not say (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
                         * the legacy stream while a blocking stream of its context
                         * captures): recording an event there would invalidate that
                         * capture, so no marker */
};
enum ng_capture ncclguard_stream_capturing(void *stream);

/* Records the end event of `marker` on `stream`. -1 on a CUDA error. */
int ncclguard_marker_end(int marker, void *stream);
/* The same with the end event that ncclguard_marker_begin gave (the hot path:
 * no lookup of the marker). */
int ncclguard_marker_end_event(void *end, void *stream);

/* Returns the marker to its pool (the GPU may not have reached it: reusing an
 * event only moves it). */
void ncclguard_marker_release(int marker);

/* Watchdog: where the GPU is with `marker`. `has_start` says whether the start
 * event was recorded. GPU times are CLOCK_REALTIME ns, 0 when unknown. */
enum ng_marker_state ncclguard_marker_poll(int marker, int has_start, int64_t *start_ns,
                                           int64_t *end_ns);

/* Watchdog: whether the GPU passed the end event of `marker` (end = 1) or its
 * start event (end = 0, when it was recorded): 1, 0 not yet, -1 on an error.
 * One query, for an op whose progress is known up to the other event. */
int ncclguard_marker_passed(int marker, int end);

/* Watchdog thread set-up: relaxed capture mode for this thread. */
void ncclguard_markers_watchdog_setup(void);

/* An application thread that queries markers (the settle before a communicator
 * ends) switches to relaxed capture mode for the time of the queries, so that
 * another thread's global-mode capture stays valid: _begin returns the mode to
 * restore (-1: unchanged), _end restores it. */
int ncclguard_markers_relaxed_begin(void);
void ncclguard_markers_relaxed_end(int saved);

/* Watchdog: creates pools that application threads asked for, refreshes the
 * host-clock anchors. Cheap when there is nothing to do. */
void ncclguard_markers_maintain(void);

struct ng_marker_stats {
    uint64_t no_marker; /* ops that got no marker (pool empty, unknown context) */
    uint64_t captured;  /* ops enqueued while their stream was capturing */
    int pools;
};
void ncclguard_markers_stats(struct ng_marker_stats *out);

/* Markers per pool (set from NCCLGUARD_RING before the first pool), at most
 * 65536. */
void ncclguard_markers_set_pool_size(uint64_t markers);

/* NCCLGUARD_TIMING_SAMPLE, before the first pool: each pool gets
 * markers / every + 64 timed markers (at most `markers`), none for 0. */
void ncclguard_markers_set_timing_sample(int every);

/* How often the watchdog re-anchors GPU times on the host clock (60 s; the
 * tests shorten it, to reach the blocking record and synchronize sooner). */
void ncclguard_markers_set_anchor_period(int64_t ns);

#endif

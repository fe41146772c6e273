/*
 * observer.c: see observer.h.
 *
 * A pass walks the flight recorder from the observer's own tail (the oldest
 * record that may still change) to the head, asks the markers of unfinished
 * records how far the GPU is, and moves records along scheduled -> started ->
 * completed. A full pass then tends the marker pools and asks each
 * communicator for its async error.
 */
#include "watch/observer.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/atomic.h"
#include "base/clock.h"
#include "base/events.h"
#include "base/identity.h"
#include "base/log.h"
#include "base/thread.h"
#include "policy/config.h"
#include "policy/envaudit.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/groups.h"
#include "track/lifecycle.h"
#include "track/markers.h"
#include "track/track.h"
#include "watch/describe.h"
#include "watch/nccl_calls.h"
#include "watch/stats.h"

#define SLOW_LINES_PER_WINDOW 10
/* The factor rule ignores ops shorter than this: a 20 us op that took 300 us
 * is launch and scheduling noise, not a slow collective. */
#define SLOW_FACTOR_FLOOR_NS (1000LL * 1000)
#define SLOW_WINDOW_NS (10LL * 1000000000)

static pthread_t thread;
static ng_atomic(int) running;
/* The observer sleeps on this between passes; ncclguard_observer_wake cuts it short. */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond;
static int woken;                      /* under sleep_lock */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tail;                  /* under pass_lock */
static ng_atomic(int64_t) pass_began;  /* CLOCK_MONOTONIC of the pass under way, 0: none */
static ng_atomic(uint64_t) ncompleted, nslow, nasync_errors, npasses;
static int64_t slow_window_start;      /* under pass_lock, like the slow lines */
static int slow_lines;
static uint64_t slow_suppressed;

/* Logs a slow op, at most SLOW_LINES_PER_WINDOW lines per window; the next
 * line printed says how many were left out. */
static void report_slow(const struct ng_op_record *r, int64_t dur_ns, int64_t median_ns,
                        int64_t now)
{
    char idb[8];
    ng_atomic_add_relaxed(&nslow, 1);
    ncclguard_event("slow_op",
                    "\"comm\":\"%016llx\",\"op\":\"%s\",\"seq\":%llu,\"bytes\":%llu,"
                    "\"duration_ns\":%lld,\"median_ns\":%lld",
                    (unsigned long long)r->comm_id, ng_op_name((int)r->op),
                    (unsigned long long)r->seq, (unsigned long long)r->bytes,
                    (long long)dur_ns, (long long)median_ns);
    if (now - slow_window_start > SLOW_WINDOW_NS) {
        slow_window_start = now;
        slow_lines = 0;
    }
    if (slow_lines >= SLOW_LINES_PER_WINDOW) {
        slow_suppressed++;
        return;
    }
    slow_lines++;
    char more[64] = "";
    if (slow_suppressed)
        snprintf(more, sizeof more, " (%llu more slow ops not shown)",
                 (unsigned long long)slow_suppressed);
    slow_suppressed = 0;
    char ref[64] = "", what[96], at[256];
    if (median_ns)
        snprintf(ref, sizeof ref, ", %.1fx the median %.3f ms", (double)dur_ns / (double)median_ns,
                 median_ns / 1e6);
    NG_WARN("slow %s on comm %s…(%lld ranks), %llu bytes: %.3f ms%s%s%s",
            ncclguard_describe_op(r, what, sizeof what), ncclguard_short_id(r->comm_id, idb),
            ncclguard_record_comm_size(r), (unsigned long long)r->bytes, dur_ns / 1e6, ref,
            more, ncclguard_describe_where(r, at, sizeof at));
}

static void completed(const struct ng_op_record *r, uint64_t index, int64_t gpu_start,
                      int64_t gpu_end, int64_t now_mono)
{
    ng_atomic_add_relaxed(&ncompleted, 1);
    /* Only timing samples (timed markers) have GPU times; the slow-op rules use
     * them alone, since a discovery time is off by up to a poll period. With
     * TRACK=end a sample has no start: enqueue to GPU end. */
    if (!gpu_end) return;
    int64_t dur = gpu_end - (gpu_start ? gpu_start : r->enqueue_ns);
    const struct ng_settings *s = ncclguard_settings();
    struct ng_sample k = ncclguard_stats_observe(r->comm_id, (int)r->op, r->bytes, dur,
                                                 s->slow_factor, SLOW_FACTOR_FLOOR_NS);
    if ((s->slow_ms > 0 && dur > s->slow_ms * 1000000LL) || k.persistent) {
        ncclguard_flight_watch(index, NG_WATCHER_OBSERVER, NG_WATCH_FLAGS,
                               r->flags | NG_REC_SLOW);
        report_slow(r, dur, k.median, now_mono);
    }
}

/* Streams found busy in this pass: a stream runs its work in order, so once
 * one of its ops is not finished, the later ones have not started; their
 * markers need no query (this keeps a pass cheap with many ops queued). The
 * exception is the rest of the same group: the ops of a group on one stream
 * share its marker and run together, so they take the state it was found in. */
#define BUSY_STREAMS 64
struct busy_stream {
    uint64_t stream;
    uint64_t group_id; /* the group whose marker was found unfinished, 0 for an op */
    enum ng_marker_state m;
    int64_t start_ns;
};

/* Communicators with an op found unfinished in this pass, and its stream. NCCL
 * runs a communicator's kernels one after another through its internal stream
 * (enqueue.cc), so a later op of it on another stream has not started, even
 * when its start marker, recorded on its own stream before NCCL made that
 * stream wait, has passed. */
#define BUSY_COMMS 64
struct busy_comm {
    int64_t slot;
    uint64_t stream;
};

struct pass {
    int has_start; /* TRACK=full: start markers were recorded */
    int64_t now_real, now_mono;
    struct busy_stream busy[BUSY_STREAMS];
    int nbusy;
    struct busy_comm comms[BUSY_COMMS];
    int ncomms;
};

/* Whether an earlier op of the record's communicator, on another stream, is
 * unfinished; notes the record's own when it is the first. */
static int behind_comm(struct pass *p, const struct ng_op_record *r)
{
    for (int i = 0; i < p->ncomms; i++)
        if (p->comms[i].slot == r->comm_slot) return p->comms[i].stream != r->stream;
    if (p->ncomms < BUSY_COMMS) p->comms[p->ncomms++] = (struct busy_comm){r->comm_slot, r->stream};
    return 0;
}

static const struct busy_stream *busy_entry(const struct pass *p, uint64_t stream)
{
    for (int i = 0; i < p->nbusy; i++)
        if (p->busy[i].stream == stream) return &p->busy[i];
    return NULL;
}

static void watch(uint64_t index, enum ng_watch_field f, int64_t v)
{
    ncclguard_flight_watch(index, NG_WATCHER_OBSERVER, f, (uint64_t)v);
}

/* Where the GPU is with record `index`; moves its state on and returns it. */
static int progress(uint64_t index, const struct ng_op_record *r, int state, void *ctx)
{
    struct pass *p = ctx;
    int marker = (int)r->marker, shared = 0;
    if (marker == NG_NO_MARKER && r->group_id) {
        marker = ncclguard_group_find(r->group_id, r->stream);
        shared = 1;
    }
    struct ng_comm *c = ncclguard_comm_at((int)r->comm_slot);
    int cs = c ? ng_comm_state(c) : NG_COMM_READY;
    int end = marker == NG_GROUP_FAILED                       ? NG_OP_FAILED
              : cs == NG_COMM_ABORTED || cs == NG_COMM_REVOKED ? NG_OP_ABORTED
                                                               : -1;
    if (end >= 0) {
        if (ncclguard_flight_advance(index, state, end) != 0) return state;
        /* A deferred marker is still held by track/deferred.c, which returns it. */
        if (marker >= 0 && !(r->flags & NG_REC_DEFERRED)) {
            if (shared) ncclguard_group_put(r->group_id, r->stream);
            else ncclguard_marker_release(marker);
        }
        return end;
    }
    if (marker < 0 || (r->flags & NG_REC_DEFERRED)) return state;
    int behind = behind_comm(p, r);
    int64_t gs = 0, ge = 0;
    enum ng_marker_state m;
    const struct busy_stream *b = busy_entry(p, r->stream);
    if (b) {
        if (!shared || b->group_id != r->group_id) return state;
        m = b->m;
        gs = b->start_ns;
    } else {
        m = ncclguard_marker_poll(marker, p->has_start, &gs, &ge);
        if (m != NG_MARKER_DONE && p->nbusy < BUSY_STREAMS)
            p->busy[p->nbusy++] = (struct busy_stream){r->stream, shared ? r->group_id : 0, m, gs};
    }
    if (m != NG_MARKER_DONE && behind) return state; /* waits for its communicator */
    int to = m == NG_MARKER_DONE      ? NG_OP_COMPLETED
             : m == NG_MARKER_STARTED ? NG_OP_STARTED
             : m == NG_MARKER_ERROR   ? NG_OP_FAILED
                                      : state;
    if (to == state || (to == NG_OP_STARTED && state != NG_OP_SCHEDULED)) return state;
    if (to != NG_OP_FAILED) {
        if (!r->seen_start_ns && p->has_start) watch(index, NG_WATCH_SEEN_START, p->now_real);
        if (gs && !r->gpu_start_ns) watch(index, NG_WATCH_GPU_START, gs);
    }
    if (to == NG_OP_COMPLETED) {
        watch(index, NG_WATCH_SEEN_END, p->now_real);
        watch(index, NG_WATCH_GPU_END, ge);
    }
    if (to == NG_OP_COMPLETED) ncclguard_comm_count_completed(c, r->seq, r->peer, r->p2p_seq);
    if (ncclguard_flight_advance(index, state, to) != 0) return state;
    if (ng_op_state_final(to)) {
        if (shared) ncclguard_group_put(r->group_id, r->stream);
        else ncclguard_marker_release(marker);
    }
    if (to == NG_OP_COMPLETED) completed(r, index, gs, ge, p->now_mono);
    return to;
}

/* Each communicator's async error; a split child's rank and size, which only
 * NCCL knows. The handle is used under its poll_lock only while it is not
 * being ended, so the observer never touches a freed handle. */
static void poll_comms(void)
{
    const struct ng_nccl_calls *nccl = ncclguard_nccl_calls();
    for (int i = 0; i < ncclguard_comm_count(); i++) {
        struct ng_comm *c = ncclguard_comm_at(i);
        int state = ng_comm_state(c);
        if (state != NG_COMM_READY && state != NG_COMM_INITIALIZING) continue;
        ncclResult_t err = ncclSuccess;
        int rank = -1, nranks = -1, dev = -1;
        if (!ncclguard_comm_observe_begin(c)) continue; /* the application is inside */
        pthread_mutex_lock(&c->poll_lock);
        ncclComm_t h = ncclguard_comm_handle(c);
        int usable = !c->ending && h && nccl->comm_get_async_error;
        ncclResult_t r = usable ? nccl->comm_get_async_error(h, &err) : ncclInvalidUsage;
        if (usable && r == ncclSuccess && err == ncclSuccess &&
            ng_atomic_load_relaxed(&c->device) < 0 && nccl->comm_count &&
            nccl->comm_user_rank && nccl->comm_cu_device) {
            nccl->comm_count(h, &nranks);
            nccl->comm_user_rank(h, &rank);
            nccl->comm_cu_device(h, &dev);
        }
        pthread_mutex_unlock(&c->poll_lock);
        ncclguard_comm_observe_end(c);
        if (r != ncclSuccess) continue;
        if (nranks > 0) { /* read by application threads: atomic stores */
            ng_atomic_store_relaxed(&c->rank, rank);
            ng_atomic_store_relaxed(&c->nranks, nranks);
            ng_atomic_store_relaxed(&c->device, dev);
            ncclguard_comm_announce(c); /* a split child's comm_created */
        }
        if (err == ncclSuccess && state == NG_COMM_INITIALIZING)
            ncclguard_comm_set_state(c, NG_COMM_READY);
        ncclguard_observer_async_error(c, err);
    }
}

void ncclguard_observer_async_error(struct ng_comm *c, int err)
{
    int last = ng_atomic_exchange_relaxed(&c->last_async_error, err);
    if (err == ncclSuccess || err == ncclInProgress || err == last) return;
    ng_atomic_add_relaxed(&nasync_errors, 1);
    const struct ng_nccl_calls *nccl = ncclguard_nccl_calls();
    char idb[8];
    NG_WARN("async error on comm %s… (rank %d of %d): %s", ncclguard_short_id(c->id, idb),
            ng_comm_rank(c), ng_comm_nranks(c),
            nccl->get_error_string ? nccl->get_error_string((ncclResult_t)err) : "?");
    ncclguard_event("async_error", "\"comm\":\"%016llx\",\"error\":%d",
                    (unsigned long long)c->id, err);
}

void ncclguard_observer_pass(int full)
{
    pthread_mutex_lock(&pass_lock);
    struct pass p = {.has_start = ncclguard_track_mode == NG_TRACK_FULL,
                     .now_real = ng_clock_ns(CLOCK_REALTIME),
                     .now_mono = ng_clock_ns(CLOCK_MONOTONIC)};
    ng_atomic_store_relaxed(&pass_began, p.now_mono);
    if (ncclguard_track_mode == NG_TRACK_OFF) /* GPU progress is not followed */
        tail = ncclguard_flight_head();
    else
        ncclguard_flight_walk(&tail, progress, &p);
    if (full) {
        ncclguard_track_refresh_clock();
        ncclguard_markers_maintain();
        poll_comms();
        ng_atomic_add_relaxed(&npasses, 1);
    }
    ng_atomic_store_relaxed(&pass_began, 0);
    pthread_mutex_unlock(&pass_lock);
}

int64_t ncclguard_observer_busy_ns(int64_t now_mono)
{
    int64_t began = ng_atomic_load_relaxed(&pass_began);
    return began && now_mono > began ? now_mono - began : 0;
}

/* Sleeps one period, or less when woken. */
static void sleep_until_next_pass(long ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&sleep_lock);
    while (!woken && pthread_cond_timedwait(&sleep_cond, &sleep_lock, &until) == 0) {
    }
    woken = 0;
    pthread_mutex_unlock(&sleep_lock);
}

void ncclguard_observer_wake(void)
{
    if (!ng_atomic_load_acquire(&running)) return;
    pthread_mutex_lock(&sleep_lock);
    woken = 1;
    pthread_cond_signal(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
}

static void *observer_main(void *arg)
{
    (void)arg;
    /* Named before anything else: the fake NCCL's call log tells the shim's own
     * calls from the application's by this name. */
    pthread_setname_np(pthread_self(), "ncclguard-wd");
    ncclguard_markers_watchdog_setup();
    /* NCCL calls of the shim's own are made on this thread only, so that the
     * application's threads see exactly their own calls. */
    const struct ng_nccl_calls *nccl = ncclguard_nccl_calls();
    int version = 0;
    if (nccl->get_version && nccl->get_version(&version) == ncclSuccess)
        ncclguard_identity_set_nccl_version(version);
    ncclguard_envaudit_at_first_comm(); /* once per process; local rank 0 by default */
    long ms = ncclguard_settings()->poll_ms;
    while (ng_atomic_load_acquire(&running)) {
        sleep_until_next_pass(ms);
        ncclguard_observer_pass(1);
    }
    return NULL;
}

int ncclguard_observer_start(void)
{
    if (ng_atomic_exchange_acq_rel(&running, 1)) return 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sleep_cond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = ncclguard_thread_start(&thread, observer_main, NULL);
    if (rc) {
        ng_atomic_store_release(&running, 0);
        NG_WARN("cannot start the watchdog's observer thread (%s): ops are recorded but not "
                "followed on the GPU", strerror(rc));
        return -1;
    }
    return 0;
}

void ncclguard_observer_stats(struct ng_observer_stats *out)
{
    out->completed = ng_atomic_load_relaxed(&ncompleted);
    out->slow = ng_atomic_load_relaxed(&nslow);
    out->async_errors = ng_atomic_load_relaxed(&nasync_errors);
    out->passes = ng_atomic_load_relaxed(&npasses);
}

void ncclguard_observer_atfork_child(void)
{
    pthread_mutex_init(&pass_lock, NULL);
    pthread_mutex_init(&sleep_lock, NULL);
    ng_atomic_store_relaxed(&running, 0);
    woken = 0;
    tail = 0;
    ng_atomic_store_relaxed(&pass_began, 0);
    ng_atomic_store_relaxed(&ncompleted, 0);
    ng_atomic_store_relaxed(&nslow, 0);
    ng_atomic_store_relaxed(&nasync_errors, 0);
    ng_atomic_store_relaxed(&npasses, 0);
    slow_window_start = 0;
    slow_lines = 0;
    slow_suppressed = 0;
    ncclguard_stats_reset();
}

/*
 * observer.c: see observer.h.
 *
 * The ops in flight wait in lanes (lanes.h: one per communicator and stream,
 * oldest first). A pass settles each lane from its oldest op: those the GPU
 * finished leave it, up to its front, the first one it has not. It then takes
 * the records appended since the last pass into their lanes, asking the GPU at
 * once about each one that has nothing unfinished ahead of it, and last moves
 * each communicator's oldest front on to started. A pass thus costs the lanes
 * and the ops that move on (scheduled -> started -> completed), not the ops in
 * flight. A full pass then tends the marker pools and asks each communicator
 * for its async error.
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
#include "watch/lanes.h"
#include "watch/metrics.h"
#include "watch/nccl_calls.h"
#include "watch/stats.h"

#define SLOW_LINES_PER_WINDOW 10
/* The factor rule ignores ops shorter than this: a 20 us op that took 300 us
 * is launch and scheduling noise, not a slow collective. */
#define SLOW_FACTOR_FLOOR_NS (1000LL * 1000)
#define SLOW_WINDOW_NS (10LL * 1000000000)
/* The observer's sleep once nothing has been in flight for as long
 * (NCCLGUARD_POLL_MS when longer): a pause of the job shorter than that, or a
 * thread that was not scheduled for a while, changes nothing. */
#define IDLE_SLEEP_MS 1000

static pthread_t thread;
static ng_atomic(int) running;
/* The observer sleeps on this between passes; ncclguard_observer_wake cuts it short. */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond;
static int woken; /* under sleep_lock */
static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ng_flight_reader reader;    /* under pass_lock, like the lanes */
static unsigned char swept[NG_MAX_COMMS]; /* under pass_lock: its ops were ended with it */
static ng_atomic(int64_t) pass_began;     /* CLOCK_MONOTONIC of the pass under way, 0: none */
static ng_atomic(uint64_t) ncompleted, nslow, nasync_errors, npasses;
static ng_atomic(long) sleep_ms; /* the sleep after the last full pass */
static uint64_t last_head;       /* under pass_lock: the ring's head at the last pass */
static uint64_t peak_batch;      /* under pass_lock: the most records between two passes */
static int64_t idle_since;       /* under pass_lock: the first full pass of the idle
                                   * stretch (CLOCK_MONOTONIC), 0: not idle */
static ng_atomic(ng_observer_arrival_fn) on_arrival;
static int64_t slow_window_start; /* under pass_lock, like the slow lines */
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
                    (unsigned long long)r->seq, (unsigned long long)r->bytes, (long long)dur_ns,
                    (long long)median_ns);
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
            (long long)r->comm_nranks, (unsigned long long)r->bytes, dur_ns / 1e6, ref, more,
            ncclguard_describe_where(r, at, sizeof at));
}

static void completed(const struct ng_op_record *r, uint64_t index, int64_t gpu_start,
                      int64_t gpu_end, int64_t now_mono)
{
    ng_atomic_add_relaxed(&ncompleted, 1);
    /* Only timing samples (timed markers) have GPU times; the slow-op rules use
     * them alone, since a discovery time is off by up to a poll period. With
     * TRACK=end a sample has no start: enqueue to GPU end. */
    if (!gpu_end || (r->flags & NG_REC_GAP)) return; /* a gap's sample: waiting, by design */
    int64_t dur = gpu_end - (gpu_start ? gpu_start : r->enqueue_ns);
    const struct ng_settings *s = ncclguard_settings();
    struct ng_sample k = ncclguard_stats_observe(r->comm_id, (int)r->op, r->bytes, dur,
                                                 s->slow_factor, SLOW_FACTOR_FLOOR_NS);
    if ((s->slow_ms > 0 && dur > s->slow_ms * 1000000LL) || k.persistent) {
        ncclguard_flight_watch(index, NG_WATCHER_OBSERVER, NG_WATCH_FLAGS, r->flags | NG_REC_SLOW);
        report_slow(r, dur, k.median, now_mono);
    }
}

struct pass {
    int has_start; /* TRACK=full: start markers were recorded */
    int64_t now_real, now_mono;
};

/* What a pass knows of one record: a consistent copy, and the marker that
 * tells its progress, its own or the one its group shares on its stream. */
struct op {
    uint64_t index;
    const struct ng_op_record *r;
    struct ng_comm *comm; /* NULL: none */
    int state;
    int marker;
    int shared; /* the marker is its group's */
};

/* o for record `index` (copy r); 0, or -1 when the record is final (an
 * untracked one is not, here: a later op of its stream can still tell that it
 * completed). Inline: every record appended comes through here. */
static inline int prepare(uint64_t index, const struct ng_op_record *r, struct op *o)
{
    *o = (struct op){.index = index,
                     .r = r,
                     .comm = ncclguard_comm_at((int)r->comm_slot),
                     .state = ng_record_state(r),
                     .marker = (int)r->marker};
    if (ng_op_state_final(o->state) && o->state != NG_OP_UNTRACKED) return -1;
    if (o->marker == NG_NO_MARKER && r->group_id) {
        o->marker = ncclguard_group_find(r);
        o->shared = 1;
    }
    return 0;
}

/* o for the record of lane node `node`, copied into *r; 0, or -1 when it is
 * final or gone. */
static int look(uint32_t node, struct ng_op_record *r, struct op *o)
{
    uint64_t index = ncclguard_node_index(node);
    return ncclguard_flight_copy(index, r) == 0 ? prepare(index, r, o) : -1;
}

/* Whether c was aborted or revoked: its ops in flight end aborted. */
static int comm_over(struct ng_comm *c)
{
    int cs = c ? ng_comm_state(c) : NG_COMM_READY;
    return cs == NG_COMM_ABORTED || cs == NG_COMM_REVOKED;
}

/* The state o ends in whatever its marker says: failed when its group's
 * ncclGroupEnd failed, untracked when its stream got no marker there, aborted
 * with its communicator; -1 otherwise. */
static int end_state(const struct op *o)
{
    if (o->marker == NG_GROUP_FAILED) return NG_OP_FAILED;
    if (o->marker == NG_GROUP_UNTRACKED) return NG_OP_UNTRACKED;
    return comm_over(o->comm) ? NG_OP_ABORTED : -1;
}

/* Moves o on to `to`, with what the GPU told (start and end times, 0 when
 * unknown): 0, or -1 when the record changed meanwhile (a writer dropped it,
 * and so owns its events). Inline, like settle: an op that completes goes
 * through both, and their calls were a tenth of its instructions. */
static inline __attribute__((always_inline)) int move_on(struct pass *p, const struct op *o, int to,
                                                         int64_t gs, int64_t ge)
{
    const struct ng_op_record *r = o->r;
    if (to == o->state || (to == NG_OP_STARTED && o->state != NG_OP_SCHEDULED)) return 0;
    const uint64_t t[NG_WATCH_NFIELDS] = {[NG_WATCH_SEEN_START] = (uint64_t)p->now_real,
                                          [NG_WATCH_GPU_START] = (uint64_t)gs,
                                          [NG_WATCH_SEEN_END] = (uint64_t)p->now_real,
                                          [NG_WATCH_GPU_END] = (uint64_t)ge};
    unsigned which = 0;
    if (to == NG_OP_STARTED || to == NG_OP_COMPLETED) {
        if (!r->seen_start_ns && p->has_start) which |= 1u << NG_WATCH_SEEN_START;
        if (gs && !r->gpu_start_ns) which |= 1u << NG_WATCH_GPU_START;
    }
    if (to == NG_OP_COMPLETED) {
        which |= 1u << NG_WATCH_SEEN_END;
        which |= 1u << NG_WATCH_GPU_END;
        /* before the state is published: a dump that reads the state, then the
         * counter, finds the op counted */
        ncclguard_comm_count_completed(o->comm, r->seq, (int)r->peer, r->p2p_seq);
    }
    if (which) ncclguard_flight_watch_fields(o->index, NG_WATCHER_OBSERVER, which, t);
    if (ncclguard_flight_advance(o->index, o->state, to) != 0) return -1;
    /* Whoever finishes a record returns its events; a deferred end marker is
     * still track/deferred.c's, which returns it. */
    if (ng_op_state_final(to) && o->marker >= 0 && !(r->flags & NG_REC_DEFERRED)) {
        if (o->shared)
            ncclguard_group_put(r);
        else
            ncclguard_marker_release(o->marker);
    }
    if (to == NG_OP_COMPLETED) completed(r, o->index, gs, ge, p->now_mono);
    if (ncclguard_metrics_on()) ncclguard_metrics_op_end(r, to, gs, ge, p->now_mono);
    return 0;
}

enum { OP_LEFT, OP_DONE, OP_WAITING, OP_FOLLOWING, OP_UNFINISHED };

/*
 * Asks the GPU about o, and moves it on when it finished or will never run.
 * OP_LEFT: it is in flight no more (moved to a final state now, or dropped by
 * a writer meanwhile); OP_DONE: its marker says the GPU finished it, and it
 * was moved to completed now; OP_WAITING: it has no marker to ask yet (its end
 * marker is deferred, its group not launched); OP_FOLLOWING: it is untracked
 * (no marker of its own or of its group), and only an op behind it on its
 * stream can tell that it finished; OP_UNFINISHED: *m and *gs say how far its
 * marker is.
 */
static inline __attribute__((always_inline)) int settle(struct pass *p, const struct op *o,
                                                        enum ng_marker_state *m, int64_t *gs)
{
    /* it stays untracked, its communicator's end too: whether it ran is not known */
    if (__builtin_expect(o->marker < 0, 0) && o->state == NG_OP_UNTRACKED) return OP_FOLLOWING;
    int end = end_state(o);
    if (end >= 0) {
        /* a record whose end marker its writer is still recording cannot be
         * moved on yet (track/flight.h): it waits for the next pass */
        if (move_on(p, o, end, 0, 0) != 0)
            return ncclguard_flight_state(o->index) == o->state ? OP_WAITING : OP_LEFT;
        return end == NG_OP_UNTRACKED ? OP_FOLLOWING : OP_LEFT;
    }
    if (o->marker < 0 || (o->r->flags & NG_REC_DEFERRED)) return OP_WAITING;
    int64_t ge = 0;
    *gs = 0;
    *m = ncclguard_marker_poll(o->marker, p->has_start, gs, &ge);
    if (*m != NG_MARKER_DONE) return OP_UNFINISHED;
    return move_on(p, o, NG_OP_COMPLETED, *gs, ge) == 0 ? OP_DONE : OP_LEFT;
}

/*
 * The GPU finished the op of node `done` of lane l: its stream ran everything
 * enqueued before it, so each untracked op ahead of it in the lane finished
 * too, and completes now (without GPU times). A lane's ops are in the order of
 * their stream: NCCL lets one thread at a time call a communicator, and an op
 * without a marker is on its stream when its call (or its group's end)
 * returns, before the next call's marker is recorded. Only a completion tells:
 * a start marker can be recorded before a nonblocking op ahead of it was
 * issued.
 */
static void complete_ahead(struct pass *p, struct ng_lane *l, uint32_t done)
{
    for (uint32_t n = l->oldest, newer; n && n != done; n = newer) {
        newer = ncclguard_node_newer(n);
        struct ng_op_record r;
        struct op o;
        if (look(n, &r, &o) != 0)
            ncclguard_node_remove(n); /* finished, or gone */
        else if (o.state == NG_OP_UNTRACKED && move_on(p, &o, NG_OP_COMPLETED, 0, 0) == 0)
            ncclguard_node_remove(n);
    }
}

static void set_front(struct ng_lane *l, uint32_t node, const struct op *o, enum ng_marker_state m,
                      int64_t gs)
{
    l->front = node;
    l->front_index = o->index;
    l->front_state = o->state;
    l->front_marker = o->marker;
    l->front_gpu = m;
    l->front_start_ns = gs;
}

/*
 * Whether the lane's front is as the last pass left it: still its oldest op,
 * in the same state (the end of its communicator, seen by sweep_ended, changes
 * that), and its marker not further. Then nothing behind it moved either, and
 * the lane costs one query: of the start event while the GPU has not reached
 * it (the end event comes after it on the stream), else of the end event.
 */
static int front_unmoved(const struct pass *p, const struct ng_lane *l)
{
    if (!l->front || l->front != l->oldest ||
        ncclguard_flight_state(l->front_index) != l->front_state)
        return 0;
    int end = !p->has_start || l->front_gpu == NG_MARKER_STARTED;
    return (l->front_gpu == NG_MARKER_PENDING || l->front_gpu == NG_MARKER_STARTED) &&
           ncclguard_marker_passed(l->front_marker, end) == 0;
}

/*
 * A lane from its oldest op: the ops that finished leave it, up to the first
 * one the GPU has not finished, the lane's front; its stream runs the later
 * ones after it, so they have not started and their markers need no query.
 * An op with no marker to ask yet is passed over: it may not even be on the
 * stream yet, and says nothing of the ops behind it.
 */
static void settle_lane(struct pass *p, uint32_t lane)
{
    struct ng_lane *l = ncclguard_lane(lane);
    if (front_unmoved(p, l) || (!l->front && l->idle)) return;
    l->front = 0;
    int kept = 0, waiting = 0;
    for (uint32_t n = l->oldest, newer; n; n = newer) {
        newer = ncclguard_node_newer(n); /* the last removal ends the lane too */
        struct ng_op_record r;
        struct op o;
        enum ng_marker_state m;
        int64_t gs;
        int v = look(n, &r, &o) != 0 ? OP_LEFT : settle(p, &o, &m, &gs);
        if (v == OP_DONE && kept) complete_ahead(p, l, n); /* kept: ops ahead of it */
        if (v == OP_LEFT || v == OP_DONE) {
            ncclguard_node_remove(n);
            continue;
        }
        if (v == OP_UNFINISHED) {
            set_front(l, n, &o, m, gs);
            return;
        }
        kept = 1;
        waiting |= v == OP_WAITING;
    }
    /* Untracked ops alone change only when an op is filed behind them. */
    if (kept) l->idle = !waiting;
}

/*
 * A record appended since the last pass. An op whose progress the GPU tells
 * goes into its lane, and is asked at once when nothing unfinished is ahead of
 * it there; one without a marker only its communicator's end moves on. An op
 * of a group taken before its ncclGroupEnd published the group's marker waits
 * in its lane like the others: when that end failed, the op ends failed once
 * nothing unfinished is ahead of it.
 */
static void take(uint64_t index, const struct ng_op_record *r, void *ctx)
{
    struct pass *p = ctx;
    struct op o;
    ncclguard_lanes_vacate(index); /* the slot's last record, dropped in flight */
    if (prepare(index, r, &o) != 0) {
        /* failed at enqueue: appended final, never moved on */
        if (o.state == NG_OP_FAILED && ncclguard_metrics_on())
            ncclguard_metrics_op_end(r, o.state, 0, 0, p->now_mono);
        return;
    }
    if (r->marker == NG_NO_MARKER && !r->group_id && o.state != NG_OP_UNTRACKED) {
        int end = end_state(&o);
        if (end >= 0) move_on(p, &o, end, 0, 0);
        return;
    }
    uint32_t lane = ncclguard_lane_of(r->comm_slot, r->stream, r->thread_id, 0);
    if (lane && ncclguard_lane(lane)->front) { /* behind an unfinished op: not started */
        ncclguard_lane_file(lane, index);
        return;
    }
    enum ng_marker_state m;
    int64_t gs;
    int v = settle(p, &o, &m, &gs);
    if (__builtin_expect(lane != 0, 0) && v == OP_DONE) { /* untracked ops ahead finished too */
        uint32_t n = ncclguard_lane_file(lane, index);
        complete_ahead(p, ncclguard_lane(lane), n);
        ncclguard_node_remove(n);
        return;
    }
    if (v <= OP_DONE) return; /* OP_LEFT, OP_DONE: in flight no more */
    if (!lane) lane = ncclguard_lane_of(r->comm_slot, r->stream, r->thread_id, 1);
    uint32_t n = ncclguard_lane_file(lane, index);
    if (v == OP_UNFINISHED) set_front(ncclguard_lane(lane), n, &o, m, gs);
}

/*
 * The GPU started a lane's front, or its marker failed: the front moves on,
 * and with it the rest of its group on the stream, which shares its marker
 * and so its state.
 */
static void start_front(struct pass *p, struct ng_lane *l)
{
    int m = l->front_gpu, state = l->front_state;
    int to = m == NG_MARKER_STARTED ? NG_OP_STARTED : m == NG_MARKER_ERROR ? NG_OP_FAILED : state;
    if (to == state) return;
    int64_t gs = l->front_start_ns;
    uint64_t group = 0;
    for (uint32_t n = l->front, newer; n; n = newer) {
        newer = ncclguard_node_newer(n);
        struct ng_op_record r;
        struct op o;
        if (look(n, &r, &o) != 0) return;       /* gone meanwhile: the next pass takes it out */
        if (o.state == NG_OP_UNTRACKED) return; /* only an op behind it tells */
        if (group && (!o.shared || r.group_id != group)) return;
        if (move_on(p, &o, to, gs, 0) != 0 || ng_op_state_final(to))
            ncclguard_node_remove(n);
        else if (n == l->front)
            l->front_state = to;
        if (!o.shared) return;
        group = r.group_id;
    }
}

/*
 * NCCL runs a communicator's kernels one after another through its internal
 * stream (enqueue.cc): of the fronts of its lanes only the oldest can have
 * started, even when a later one's start marker, recorded on its own stream
 * before NCCL made that stream wait, has passed.
 */
static void start_comm(struct pass *p, int comm)
{
    uint64_t oldest = UINT64_MAX;
    for (uint32_t id = ncclguard_lanes_first(comm); id; id = ncclguard_lane(id)->next) {
        struct ng_lane *l = ncclguard_lane(id);
        if (l->front && l->front_index < oldest) oldest = l->front_index;
    }
    for (uint32_t id = ncclguard_lanes_first(comm), next; id; id = next) {
        struct ng_lane *l = ncclguard_lane(id);
        next = l->next; /* start_front may end the lane */
        if (l->front && l->front_index == oldest) start_front(p, l);
    }
}

/* Ends an op in flight of a communicator that was aborted or revoked. */
static void end_if_over(uint64_t index, const struct ng_op_record *r, void *ctx)
{
    struct op o;
    if (prepare(index, r, &o) != 0) return;
    int end = end_state(&o);
    if (end >= 0) move_on(ctx, &o, end, 0, 0);
}

/* Communicators aborted or revoked since the last pass: their ops in flight,
 * in lanes or not (those without a marker), end aborted. One walk of the ring
 * finds them, once per communicator; its later records end as they are taken. */
static void sweep_ended(struct pass *p)
{
    int any = 0;
    for (int i = 0; i < ncclguard_comm_count() && i < NG_MAX_COMMS; i++)
        if (!swept[i] && comm_over(ncclguard_comm_at(i))) swept[i] = any = 1;
    if (any) ncclguard_flight_walk(end_if_over, p);
}

/* One pass over the ops in flight: the lanes first, where the ops that finished
 * since the last pass leave them, then the records appended since, then the
 * starts, each communicator's once all its lanes' fronts are known. */
static void follow(struct pass *p)
{
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    if (!st.capacity) return;
    if (ncclguard_lanes_init(st.capacity) != 0) {
        NG_WARN_ONCE("no memory for the watchdog's lanes (%llu records): ops are recorded but "
                     "not followed on the GPU",
                     (unsigned long long)st.capacity);
        return;
    }
    sweep_ended(p);
    for (int c = 0; c < ncclguard_lanes_comms(); c++)
        for (uint32_t id = ncclguard_lanes_first(c), next; id; id = next) {
            next = ncclguard_lane(id)->next; /* settle_lane may end the lane */
            settle_lane(p, id);
        }
    ncclguard_flight_read(&reader, take, p);
    for (int c = 0; c < ncclguard_lanes_comms(); c++) start_comm(p, c);
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
            ng_atomic_load_relaxed(&c->device) < 0 && nccl->comm_count && nccl->comm_user_rank &&
            nccl->comm_cu_device) {
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
    ncclguard_event("async_error", "\"comm\":\"%016llx\",\"error\":%d", (unsigned long long)c->id,
                    err);
}

/* Whether nothing was in flight after a full pass: no op in a lane, none appended
 * since the last full pass (`arrived`) or still being written, no communicator
 * being created. An op enqueued while the observer rests wakes it
 * (ncclguard_track_arrival), once. */
static int at_rest(int arrived)
{
    int rest = !arrived && !reader.nlate;
    for (int c = 0; rest && c < ncclguard_lanes_comms(); c++)
        if (ncclguard_lanes_first(c)) rest = 0;
    for (int i = 0; rest && i < ncclguard_comm_count(); i++)
        if (ng_comm_state(ncclguard_comm_at(i)) == NG_COMM_INITIALIZING) rest = 0;
    return rest;
}

/* The sleep after a full pass that found nothing in flight: a second, but
 * short enough that a burst as dense as the densest seen between two passes
 * (peak_batch in a period) fills at most half the ring, and so half of each
 * marker pool (as large): the ops of the burst are followed, not dropped for
 * want of room. Never below a period. */
static long rest_ms(long period_ms)
{
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    uint64_t cap = st.capacity;
    long ms = IDLE_SLEEP_MS;
    if (peak_batch && (uint64_t)period_ms * cap / (2 * peak_batch) < (uint64_t)ms)
        ms = (long)((uint64_t)period_ms * cap / (2 * peak_batch));
    return ms > period_ms ? ms : period_ms;
}

void ncclguard_observer_pass(int full)
{
    pthread_mutex_lock(&pass_lock);
    struct pass p = {.has_start = ncclguard_track_mode == NG_TRACK_FULL,
                     .now_real = ng_clock_ns(CLOCK_REALTIME),
                     .now_mono = ng_clock_ns(CLOCK_MONOTONIC)};
    ng_atomic_store_relaxed(&pass_began, p.now_mono);
    if (ncclguard_track_mode != NG_TRACK_OFF) follow(&p); /* off: GPU progress is not followed */
    if (full) {
        ncclguard_track_refresh_clock();
        ncclguard_markers_maintain();
        poll_comms();
        ng_atomic_add_relaxed(&npasses, 1);
        /* A job at rest (nothing in flight for a second) is polled once a
         * second, not every period: its communicators' async errors are asked
         * then too (an error with no op in flight holds nobody up). */
        uint64_t head = ncclguard_flight_head();
        int arrived = head != last_head;
        if (head - last_head > peak_batch) peak_batch = head - last_head;
        last_head = head;
        long ms = ncclguard_settings()->poll_ms;
        if (!at_rest(arrived))
            idle_since = 0;
        else if (!idle_since)
            idle_since = p.now_mono;
        int rest = idle_since && p.now_mono - idle_since >= IDLE_SLEEP_MS * 1000000LL;
        ng_atomic_store_relaxed(&sleep_ms, rest ? rest_ms(ms) : ms);
        ng_atomic_store_relaxed(&ncclguard_track_resting, rest); /* the next op wakes it */
        ng_observer_arrival_fn fn = ng_atomic_load_acquire(&on_arrival);
        if (arrived && fn) fn(); /* the enforcer may rest */
    }
    ng_atomic_store_relaxed(&pass_began, 0);
    pthread_mutex_unlock(&pass_lock);
}

void ncclguard_observer_on_arrival(ng_observer_arrival_fn fn)
{
    ng_atomic_store_release(&on_arrival, fn);
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
    ng_atomic_store_relaxed(&sleep_ms, ncclguard_settings()->poll_ms);
    while (ng_atomic_load_acquire(&running)) {
        sleep_until_next_pass(ng_atomic_load_relaxed(&sleep_ms));
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
                "followed on the GPU",
                strerror(rc));
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
    out->sleep_ms = ng_atomic_load_relaxed(&sleep_ms);
}

void ncclguard_observer_atfork_child(void)
{
    pthread_mutex_init(&pass_lock, NULL);
    pthread_mutex_init(&sleep_lock, NULL);
    ng_atomic_store_relaxed(&running, 0);
    woken = 0;
    memset(&reader, 0, sizeof reader);
    last_head = peak_batch = 0;
    idle_since = 0;
    ng_atomic_store_relaxed(&sleep_ms, 0);
    memset(swept, 0, sizeof swept);
    ncclguard_lanes_atfork_child();
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

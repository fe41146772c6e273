/*
 * ops.c: see ops.h. The hooks around every collective, point-to-point op
 * and group: they map the handle to its registry record, take the sequence
 * numbers that make one op comparable across ranks, put CUDA markers around
 * the op and append its record to the flight recorder.
 */
#include "track/ops.h"

#include <time.h>
#include <unistd.h>

#include "base/altstack.h"
#include "base/atomic.h"
#include "base/clock.h"
#include "base/log.h"
#include "track/comm.h"
#include "track/deferred.h"
#include "track/groups.h"
#include "track/lifecycle.h"
#include "track/markers.h"
#include "track/stacks.h"
#include "track/track.h"

static NG_TLS int group_depth;

/* The group being built on this thread: the streams its ops use (their
 * places, groups.h), how many ops each has, the communicator of its first op,
 * and the marker each gets at the outermost ncclGroupEnd. */
#define GROUP_STREAMS NG_GROUP_STREAMS
struct group_stream {
    uint64_t stream;
    int refs;
    int comm; /* registry slot of its first op's communicator */
    int marker;
    void *end_event;
    int timed; /* one of its ops is a timing sample */
};
static NG_TLS uint64_t group_id;
static NG_TLS int group_nonblocking; /* a communicator of the group is nonblocking */
/* The group's nonblocking communicators, which its ncclGroupEnd operates. */
#define GROUP_COMMS 16
static NG_TLS struct ng_comm *group_comms[GROUP_COMMS];
static NG_TLS int group_ncomms;
static NG_TLS int group_nstreams;
static NG_TLS struct group_stream group_streams[GROUP_STREAMS];
static NG_TLS uint64_t thread_id;
static ng_atomic(uint64_t) group_counter;

/* Timing samples: per (communicator slot, op, size class), one more than the
 * ops to go until the next sample; 0 for a class not seen yet. A plain load and
 * store, not an atomic add: two threads on one communicator may lose a count,
 * which only moves the next sample. Zero pages until used. */
#define CLASS_TYPES 16 /* NG_OP_NTYPES and NG_SIZE_CLASSES rounded up to powers of */
#define CLASS_SIZES 64 /* two: an index of shifts, not multiplications */
_Static_assert(NG_OP_NTYPES <= CLASS_TYPES && NG_SIZE_CLASSES <= CLASS_SIZES, "classes fit");
static ng_atomic(uint32_t) class_ops[NG_MAX_COMMS][CLASS_TYPES][CLASS_SIZES];
static ng_atomic(uint32_t) class_count[NG_MAX_COMMS]; /* classes seen per slot */

/* The first op of a class is a sample; its next one comes every + phase ops
 * later, where the k-th class a communicator meets has phase k mod every, and
 * then one in every. The phases put the classes of one training step on
 * different steps: with one phase for all, the samples of a step are all of
 * one step in every, and a straggler rule sees every-th as many steps (issue
 * 18: 13 samples of 200 steps at 1 in 16). */
static __attribute__((noinline)) uint32_t first_of_class(const struct ng_comm *c, int every)
{
    uint32_t k = ng_atomic_add_relaxed(&class_count[c->slot], 1);
    return (uint32_t)every + k % (uint32_t)every;
}

/* An op enqueued this long after its communicator's previous one is a sample
 * too: the first op of a training step, the one where a late rank makes the
 * others wait (the rest of the step follows in lockstep). At most one such
 * sample per millisecond and communicator. */
#define SAMPLE_GAP_NS 1000000
static ng_atomic(int64_t) last_enqueue[NG_MAX_COMMS];

/* Whether this op is a timing sample: 1 by its class's count (above), 2 only
 * for coming after a gap (such a sample measures how long the rank waited for
 * its peers' hosts, so the slow-op rules leave it out: NG_REC_GAP), 0 not. A
 * count down, not a count and a remainder: a division costs more than the rest
 * of this. c is a registry record (its slot is below NG_MAX_COMMS), type one
 * of the wrappers' enum ng_op_type, now its enqueue time. */
static inline __attribute__((always_inline)) int sampled(const struct ng_comm *c, int type,
                                                         uint64_t bytes, int64_t now)
{
    int every = ncclguard_timing_sample;
    if (!every) return 0;
    int64_t prev = ng_atomic_load_relaxed(&last_enqueue[c->slot]);
    ng_atomic_store_relaxed(&last_enqueue[c->slot], now);
    int gap = now - prev > SAMPLE_GAP_NS;
    ng_atomic(uint32_t) *n = &class_ops[c->slot][type][ng_size_class(bytes)];
    uint32_t v = ng_atomic_load_relaxed(n);
    if (v > 1) {
        ng_atomic_store_relaxed(n, v - 1);
        return gap ? 2 : 0;
    }
    ng_atomic_store_relaxed(n, v ? (uint32_t)every : first_of_class(c, every));
    return 1;
}

/* A nonblocking communicator that the group uses (the first GROUP_COMMS). */
static void note_group_comm(struct ng_comm *c)
{
    group_nonblocking = 1;
    for (int i = 0; i < group_ncomms; i++)
        if (group_comms[i] == c) return;
    if (group_ncomms < GROUP_COMMS) group_comms[group_ncomms++] = c;
}

/* A thread's first op: its id, and room for the crash handler (an alternate
 * signal stack), once per thread, off the path of every later op. */
static __attribute__((noinline, cold)) void first_op_of_thread(void)
{
    thread_id = (uint64_t)gettid();
    ncclguard_altstack_ensure();
}

/*
 * Two threads in collective calls on one communicator at once: another
 * thread's collective was taken (its post hook counted it) while this thread
 * was inside its own call, between its pre hook, which noted the count, and
 * its post hook. Any two overlapping calls that NCCL accepts are found this
 * way, by the one whose post comes second, for the price of a load: the count
 * is the one the post hook takes anyway. NCCL lets one thread at a time use a
 * communicator and leaves the rest undefined (on a nonblocking one a race on
 * its group job). Said once per communicator.
 */
static __attribute__((noinline, cold)) void two_threads(struct ng_comm *c, int type)
{
    if (ng_atomic_exchange_relaxed(&c->overlap_said, 1)) return;
    NG_WARN("two threads use communicator %016llx at once (another thread's collective was "
            "enqueued while thread %llu was inside nccl%s on it): NCCL lets one thread at a "
            "time call a communicator; serialize its calls",
            (unsigned long long)c->id, (unsigned long long)thread_id, ng_op_name(type));
}

/* The thread's last communicator: most ops are on the same one as the thread's
 * last, and the map's probe costs more than the rest of the lookup. */
static NG_TLS ncclComm_t last_handle;
static NG_TLS struct ng_comm *last_comm;
static NG_TLS uint64_t last_map;

static struct ng_comm *find(ncclComm_t comm)
{
    uint64_t map = ncclguard_comm_map_changes();
    if (comm == last_handle && map == last_map && last_comm) return last_comm;
    struct ng_comm *c = ncclguard_comm_find(comm);
    last_handle = comm;
    last_comm = c;
    last_map = map;
    return c;
}

/*
 * A group's op on a stream that gets no place of its own (past the first
 * GROUP_STREAMS, or the legacy stream while a capture forbids a marker there):
 * it follows the first place whose stream holds an op of its communicator,
 * and counts among that place's records. NCCL launches a communicator's part
 * of a group once, after every stream of it reached the group, and makes every
 * one of them wait for its end ("CUDA Stream Semantics" of the NCCL user
 * guide; enqueue.cc): that stream's marker tells this op's progress. A place
 * whose first op is another communicator's may hold this one's too: it is not
 * followed then, which only loses the marker. With no such place the op is
 * untracked (group_slot -1), and only a later op of its own stream can tell
 * that it finished (watch/observer.c).
 */
static void follow_place(struct ng_op_ticket *t, const struct ng_comm *c)
{
    for (int i = 0; i < group_nstreams; i++)
        if (group_streams[i].comm == c->slot) {
            group_streams[i].refs++;
            t->rec.flags |= NG_REC_FOLLOWS | (uint64_t)i << NG_REC_PLACE_SHIFT;
            t->group_slot = i;
            return;
        }
}

int ncclguard_op_pre(struct ng_op_ticket *t, int type, ncclComm_t comm, cudaStream_t stream,
                     size_t count, ncclDataType_t dtype, int redop, int root)
{
    struct ng_comm *c = find(comm);
    if (__builtin_expect(!c, 0)) c = ncclguard_comm_adopt(comm);
    t->comm = c;
    t->captured = 0;
    t->group_slot = -1;
    t->entered = NULL;
    if (!c) return 0;
    if (ng_atomic_load_acquire(&c->fenced)) {
        t->comm = NULL;
        return 1;
    }
    if (!c->blocking) {
        t->entered = ncclguard_comm_enter(c);
        ncclguard_flush_deferred(ncclguard_comm_index(c));
    }
    if (__builtin_expect(!thread_id, 0)) first_op_of_thread();
    struct ng_op_record *r = &t->rec;
    /* Field by field: a compound literal would be zeroed first with rep stos,
     * which costs more than the rest of the hook. The communicator's fields,
     * the bytes and the CLOCK_REALTIME time are derived by a copy (flight.h). */
    /* the collectives taken so far: until the post hook, which counts this one
     * and finds any other thread's taken meanwhile (two_threads) */
    r->seq = ng_atomic_load_relaxed(&c->coll_seq);
    r->p2p_seq = 0;
    r->count = count;
    r->stream = (uint64_t)(uintptr_t)stream;
    r->group_id = 0;
    r->thread_id = thread_id;
    r->enqueue_mono_ns = ng_clock_ns(CLOCK_MONOTONIC);
    r->op = type;
    r->dtype = dtype;
    r->redop = redop; /* -1 from the wrappers of ops without one (nccl_api.def) */
    r->root = root;   /* or the peer: the same field */
    r->comm_slot = c->slot;
    r->flags = 0; /* result: the post hook's, before any append */
    r->marker = NG_NO_MARKER;
    r->stack = ncclguard_stack_capture(__builtin_return_address(0));
    enum ng_track_mode mode = ncclguard_track_mode;
    if (mode == NG_TRACK_OFF) return 0;
    uint64_t bytes = count * ng_dtype_size(dtype);
    if (group_depth > 0) {
        r->group_id = group_id;
        if (!c->blocking) note_group_comm(c);
        enum ng_capture cap = ncclguard_stream_capturing(stream);
        if (cap == NG_CAPTURE_ACTIVE) { /* recorded into a graph */
            t->captured = 1;
            return 0;
        }
        int i = 0;
        while (cap == NG_CAPTURE_NONE && i < group_nstreams && group_streams[i].stream != r->stream)
            i++;
        if (cap != NG_CAPTURE_NONE || i == GROUP_STREAMS) {
            follow_place(t, c);
            return 0;
        }
        if (i == group_nstreams) {
            group_streams[i] = (struct group_stream){r->stream, 0, c->slot, NG_NO_MARKER, NULL, 0};
            group_nstreams++;
        }
        group_streams[i].refs++;
        int sample = sampled(c, type, bytes, r->enqueue_mono_ns);
        if (sample == 2) r->flags = NG_REC_GAP;
        group_streams[i].timed |= sample != 0;
        t->group_slot = i;
        return 0;
    }
    int marker;
    int sample = sampled(c, type, bytes, r->enqueue_mono_ns);
    if (sample == 2) r->flags = NG_REC_GAP;
    switch (ncclguard_marker_begin(stream, mode == NG_TRACK_FULL, sample != 0, &marker,
                                   &t->end_event)) {
    case NG_MARKER_OK: r->marker = marker; break;
    case NG_MARKER_CAPTURED: t->captured = 1; break;
    case NG_MARKER_NONE: break;
    }
    return 0;
}

/* ncclguard_op_post of an op of communicator c: its record appended. */
static void post(struct ng_op_ticket *t, struct ng_comm *c, ncclResult_t res)
{
    ncclguard_comm_leave(t->entered);
    struct ng_op_record *r = &t->rec;
    r->result = res;
    if (!ng_accepted(res)) {
        r->seq = 0;
        if (r->marker != NG_NO_MARKER) ncclguard_marker_release((int)r->marker);
        if (t->group_slot >= 0) group_streams[t->group_slot].refs--;
        r->marker = NG_NO_MARKER;
        ncclguard_flight_append(r, NG_OP_FAILED);
        return;
    }
    int op = (int)r->op; /* once: the atomics below make the compiler load it again */
    ng_atomic_add_relaxed(&c->ops_by_type[op], 1);
    /* NCCL connects lazily: the first collective of a communicator, and the
     * first send or recv with each peer, set up connections (NG_REC_FIRST). */
    if (ng_op_is_p2p(op)) {
        r->seq = 0;
        if (r->peer >= 0 && r->peer < c->npeers)
            r->p2p_seq = ng_atomic_add_relaxed(&c->peers[r->peer].seq, 1) + 1;
        if (r->p2p_seq == 1) r->flags |= NG_REC_FIRST;
    } else {
        uint64_t before = ng_atomic_add_relaxed(&c->coll_seq, 1);
        if (__builtin_expect(before != r->seq, 0)) two_threads(c, op);
        r->seq = before + 1;
        if (before == 0) r->flags |= NG_REC_FIRST;
    }
    if (t->captured) {
        ncclguard_flight_append(r, NG_OP_CAPTURED);
        return;
    }
    if (r->marker == NG_NO_MARKER) { /* a group's ops get their markers at its end */
        ncclguard_flight_append(r, t->group_slot >= 0 ? NG_OP_SCHEDULED : NG_OP_UNTRACKED);
        return;
    }
    if (res == ncclInProgress) {
        r->flags |= NG_REC_DEFERRED;
        struct ng_deferred d = {(int)r->comm_slot, (int)r->marker, r->stream, 0, 0, 0};
        d.index = ncclguard_flight_append(r, NG_OP_SCHEDULED);
        ncclguard_defer(&d);
        return;
    }
    /* In the ring first, then the end marker: with the GPU stuck, the launch
     * queue is full and the record blocks, so the op must be there already
     * (scheduled, its marker not yet to be asked: flight.h) for the watchdog
     * to time it out and a dump to show it. */
    struct ng_flight_pending p;
    ncclguard_flight_append_pending(r, &p);
    ncclguard_marker_end_event(t->end_event, (void *)(uintptr_t)r->stream);
    if (__builtin_expect(!ncclguard_flight_publish_end(&p), 0))
        ncclguard_marker_release((int)r->marker);
}

void ncclguard_op_post(struct ng_op_ticket *t, ncclResult_t res)
{
    if (!t->comm) return;
    post(t, t->comm, res);
    ncclguard_track_arrival(); /* after the append: an observer at rest looks now */
}

void ncclguard_group_start_post(ncclResult_t r)
{
    if (r != ncclSuccess) return;
    if (group_depth++ == 0) {
        group_id = ng_atomic_add_relaxed(&group_counter, 1) + 1;
        group_nstreams = 0;
        group_nonblocking = 0;
        group_ncomms = 0;
    }
}

/* At the outermost ncclGroupEnd NCCL launches the group: start markers go on
 * every stream the group touched, right before. */
void ncclguard_group_end_pre(void)
{
    if (group_depth != 1) return;
    for (int i = 0; i < group_ncomms; i++) ncclguard_comm_enter(group_comms[i]);
    for (int i = 0; i < group_nstreams; i++) {
        struct group_stream *g = &group_streams[i];
        int marker;
        if (g->refs > 0 && ncclguard_marker_begin((void *)(uintptr_t)g->stream,
                                                  ncclguard_track_mode == NG_TRACK_FULL, g->timed,
                                                  &marker, &g->end_event) == NG_MARKER_OK)
            g->marker = marker;
    }
}

void ncclguard_group_end_post(ncclResult_t res)
{
    if (group_depth == 0) return;
    if (--group_depth > 0) return;
    for (int i = 0; i < group_ncomms; i++) ncclguard_comm_leave(group_comms[i]);
    group_ncomms = 0;
    for (int i = 0; i < group_nstreams; i++) {
        struct group_stream *g = &group_streams[i];
        if (g->refs <= 0) continue;
        if (!ng_accepted(res)) {
            if (g->marker != NG_NO_MARKER) ncclguard_marker_release(g->marker);
            ncclguard_group_publish(group_id, i, g->stream, NG_GROUP_FAILED, g->refs);
        } else if (g->marker == NG_NO_MARKER) {
            ncclguard_group_publish(group_id, i, g->stream, NG_GROUP_UNTRACKED, g->refs);
        } else if (res == ncclInProgress) {
            struct ng_deferred d = {-1, g->marker, g->stream, (uint64_t)i, group_id, g->refs};
            ncclguard_defer(&d);
        } else {
            ncclguard_marker_end_event(g->end_event, (void *)(uintptr_t)g->stream);
            ncclguard_group_publish(group_id, i, g->stream, g->marker, g->refs);
        }
    }
    group_nstreams = 0;
}

void ncclguard_group_simulate_end_pre(void)
{
    if (group_nonblocking) ncclguard_group_end_pre();
}

void ncclguard_group_simulate_end_post(ncclResult_t res)
{
    if (group_depth == 0) return;
    if (group_nonblocking || group_depth > 1) {
        ncclguard_group_end_post(res);
        return;
    }
    /* The outermost end of a blocking group that is only simulated. */
    group_depth = 0;
    for (int i = 0; i < group_nstreams; i++)
        if (group_streams[i].refs > 0)
            ncclguard_group_publish(group_id, i, group_streams[i].stream, NG_GROUP_FAILED,
                                    group_streams[i].refs);
    group_nstreams = 0;
}

uint64_t ncclguard_op_total(int type)
{
    uint64_t n = 0;
    for (int i = 0; i < ncclguard_comm_count(); i++)
        n += ng_atomic_load_relaxed(&ncclguard_comm_at(i)->ops_by_type[type]);
    return n;
}

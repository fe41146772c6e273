/*
 * track.c: see track.h. The hooks around every collective, point-to-point op
 * and group: they map the handle to its registry record, take the sequence
 * numbers that make one op comparable across ranks, put CUDA markers around
 * the op and append its record to the flight recorder. This is the hot path.
 */
#include "track/ops.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "policy/config.h"
#include "track/markers.h"
#include "evidence/dump.h"
#include "base/events.h"
#include "track/groups.h"
#include "base/log.h"
#include "watch/watchdog.h"

int ncclguard_tracking;

static NG_TLS int group_depth;

const char *ncclguard_op_name(int type)
{
    static const char *const names[] = {
#define NG_OP_NAME(e, s) s,
        NG_OPS(NG_OP_NAME)
#undef NG_OP_NAME
    };
    return type >= 0 && type < NG_OP_NTYPES ? names[type] : "Unknown";
}

/* The group being built on this thread: the streams its ops use, how many
 * ops each has, and the marker each gets at the outermost ncclGroupEnd. */
#define GROUP_STREAMS 16
struct group_stream {
    uint64_t stream;
    int refs;
    int marker;
};
static NG_TLS uint64_t group_id;
static NG_TLS int group_nstreams;
static NG_TLS struct group_stream group_streams[GROUP_STREAMS];
static NG_TLS uint64_t thread_id;
static uint64_t group_counter; /* atomic */

/* Nonblocking communicators: end markers that wait until NCCL has finished
 * launching (ncclInProgress), one entry per op or per (group, stream). */
#define DEFERRED_MAX 256
struct deferred {
    int comm_slot;
    int marker;
    uint64_t stream, index, group_id;
    int refs;
};
static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static struct deferred deferred[DEFERRED_MAX];
static int ndeferred; /* atomic for the unlocked emptiness check */

static int track_mode = NG_TRACK_FULL;

/* CLOCK_REALTIME minus CLOCK_MONOTONIC, refreshed by the watchdog at each
 * poll: the hot path reads one clock instead of two. */
static int64_t realtime_offset; /* atomic */

void ncclguard_track_refresh_clock(void)
{
    struct timespec rt, mt;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    int64_t off = ((int64_t)rt.tv_sec - mt.tv_sec) * 1000000000 + (rt.tv_nsec - mt.tv_nsec);
    __atomic_store_n(&realtime_offset, off, __ATOMIC_RELAXED);
}

static uint64_t dtype_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

/*
 * Records the end marker of `d` now and makes it visible to the watchdog.
 * Until then the marker of a deferred record belongs to its entry here: the
 * watchdog and the ring leave it alone while the record says NG_REC_DEFERRED,
 * so when the record has meanwhile finished (aborted) or left the ring, the
 * marker is returned here.
 */
static void end_deferred(const struct deferred *d)
{
    ncclguard_gpu_marker_end(d->marker, (void *)(uintptr_t)d->stream);
    if (d->group_id) {
        ncclguard_group_publish(d->group_id, d->stream, d->marker, d->refs);
        return;
    }
    struct ng_op_record r;
    if (ncclguard_flight_copy(d->index, &r) == 0 &&
        !ng_op_state_final(ng_record_state(&r)))
        NG_FLIGHT_SET(d->index, flags, r.flags & ~(uint64_t)NG_REC_DEFERRED);
    else
        ncclguard_gpu_marker_release(d->marker);
}

/* A record overwritten in the ring before it finished: the watchdog will not
 * see it finish, so its events go back to the pool now. */
static void release_dropped(const struct ng_op_record *r)
{
    if (r->flags & NG_REC_DEFERRED) return; /* end_deferred returns it */
    if (r->marker != NG_NO_MARKER) ncclguard_gpu_marker_release((int)r->marker);
    else if (r->group_id) ncclguard_group_put(r->group_id, r->stream);
}

static void defer(const struct deferred *d)
{
    pthread_mutex_lock(&deferred_lock);
    int kept = ndeferred < DEFERRED_MAX;
    if (kept) {
        deferred[ndeferred] = *d;
        __atomic_store_n(&ndeferred, ndeferred + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&deferred_lock);
    if (!kept) end_deferred(d); /* full: record the end now, less precisely */
}

/* Records the end markers deferred for communicator `slot` (-1: all): NCCL has
 * finished launching its work, as a later call or a successful async-error
 * poll on it shows. */
void ncclguard_flush_deferred(int slot)
{
    if (!__atomic_load_n(&ndeferred, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&deferred_lock);
    for (int i = 0; i < ndeferred;) {
        if (slot >= 0 && deferred[i].comm_slot != slot && deferred[i].comm_slot >= 0) {
            i++;
            continue;
        }
        end_deferred(&deferred[i]);
        deferred[i] = deferred[--ndeferred];
    }
    pthread_mutex_unlock(&deferred_lock);
}

void ncclguard_op_pre(struct ng_op_ticket *t, int type, ncclComm_t comm, cudaStream_t stream,
                      size_t count, ncclDataType_t dtype, int redop, int root)
{
    struct ng_comm *c = ncclguard_comm_find(comm);
    if (__builtin_expect(!c, 0)) c = ncclguard_comm_adopt(comm);
    t->comm = c;
    t->captured = 0;
    t->group_slot = -1;
    t->fenced = 0;
    if (!c) return;
    if (__atomic_load_n(&c->fenced, __ATOMIC_ACQUIRE)) {
        t->fenced = 1;
        t->comm = NULL;
        return;
    }
    if (!c->blocking) ncclguard_flush_deferred(ncclguard_comm_index(c));
    if (!thread_id) thread_id = (uint64_t)gettid();
    struct ng_op_record *r = &t->rec;
    int64_t now = ng_clock_ns(CLOCK_MONOTONIC);
    /* Field by field: a compound literal would be zeroed first with rep stos,
     * which costs more than the rest of the hook. */
    r->comm_id = c->id;
    r->seq = 0;
    r->p2p_seq = 0;
    r->count = count;
    r->bytes = count * dtype_size(dtype);
    r->stream = (uint64_t)(uintptr_t)stream;
    r->group_id = 0;
    r->thread_id = thread_id;
    r->enqueue_ns = now + __atomic_load_n(&realtime_offset, __ATOMIC_RELAXED);
    r->enqueue_mono_ns = now;
    r->op = type;
    r->dtype = dtype;
    r->redop = type == NG_OP_ALLREDUCE || type == NG_OP_REDUCE || type == NG_OP_REDUCESCATTER
                   ? redop : -1;
    r->root = root;
    r->comm_rank = ng_comm_rank(c);
    r->comm_nranks = ng_comm_nranks(c);
    r->comm_slot = c->slot;
    r->result = 0;
    r->gpu_start_ns = r->gpu_end_ns = r->seen_start_ns = r->seen_end_ns = 0;
    r->flags = 0;
    r->marker = NG_NO_MARKER;
    if (track_mode == NG_TRACK_OFF) return;
    if (group_depth > 0) {
        r->group_id = group_id;
        if (ncclguard_gpu_stream_capturing(stream)) {
            t->captured = 1;
            return;
        }
        int i = 0;
        while (i < group_nstreams && group_streams[i].stream != r->stream) i++;
        if (i == GROUP_STREAMS) return; /* too many streams: no marker for this one */
        if (i == group_nstreams) {
            group_streams[i] = (struct group_stream){r->stream, 0, NG_NO_MARKER};
            group_nstreams++;
        }
        group_streams[i].refs++;
        t->group_slot = i;
        return;
    }
    int marker;
    switch (ncclguard_gpu_marker_begin(stream, track_mode == NG_TRACK_FULL, &marker)) {
    case NG_MARKER_OK: r->marker = marker; break;
    case NG_MARKER_CAPTURED: t->captured = 1; break;
    case NG_MARKER_NONE: break;
    }
}

void ncclguard_op_post(struct ng_op_ticket *t, ncclResult_t res)
{
    struct ng_comm *c = t->comm;
    if (!c) return;
    struct ng_op_record *r = &t->rec;
    r->result = res;
    if (!ng_accepted(res)) {
        if (r->marker != NG_NO_MARKER) ncclguard_gpu_marker_release((int)r->marker);
        if (t->group_slot >= 0) group_streams[t->group_slot].refs--;
        r->marker = NG_NO_MARKER;
        ncclguard_flight_append(r, NG_OP_FAILED);
        return;
    }
    __atomic_fetch_add(&c->ops_by_type[r->op], 1, __ATOMIC_RELAXED);
    if (r->op == NG_OP_SEND || r->op == NG_OP_RECV) {
        if (r->root >= 0 && r->root < c->npeers)
            r->p2p_seq = __atomic_add_fetch(&c->peers[r->root].seq, 1, __ATOMIC_RELAXED);
    } else {
        r->seq = __atomic_add_fetch(&c->coll_seq, 1, __ATOMIC_RELAXED);
    }
    /* NCCL connects lazily: the first collective of a communicator, and the
     * first send or recv with each peer, set up connections. */
    if (r->seq == 1 || r->p2p_seq == 1) r->flags |= NG_REC_FIRST;
    if (t->captured) {
        ncclguard_flight_append(r, NG_OP_CAPTURED);
        return;
    }
    if (r->marker == NG_NO_MARKER) {
        ncclguard_flight_append(r, NG_OP_SCHEDULED);
        return;
    }
    if (res == ncclInProgress) {
        r->flags |= NG_REC_DEFERRED;
        struct deferred d = {(int)r->comm_slot, (int)r->marker, r->stream, 0, 0, 0};
        d.index = ncclguard_flight_append(r, NG_OP_SCHEDULED);
        defer(&d);
        return;
    }
    ncclguard_gpu_marker_end((int)r->marker, (void *)(uintptr_t)r->stream);
    ncclguard_flight_append(r, NG_OP_SCHEDULED);
}

void ncclguard_group_start_post(ncclResult_t r)
{
    if (r != ncclSuccess) return;
    if (group_depth++ == 0) {
        group_id = __atomic_add_fetch(&group_counter, 1, __ATOMIC_RELAXED);
        group_nstreams = 0;
    }
}

/* At the outermost ncclGroupEnd NCCL launches the group: start markers go on
 * every stream the group touched, right before. */
void ncclguard_group_end_pre(void)
{
    if (group_depth != 1) return;
    for (int i = 0; i < group_nstreams; i++) {
        struct group_stream *g = &group_streams[i];
        int marker;
        if (g->refs > 0 && ncclguard_gpu_marker_begin((void *)(uintptr_t)g->stream,
                                                       track_mode == NG_TRACK_FULL,
                                                       &marker) == NG_MARKER_OK)
            g->marker = marker;
    }
}

void ncclguard_group_end_post(ncclResult_t res)
{
    if (group_depth == 0) return;
    if (--group_depth > 0) return;
    for (int i = 0; i < group_nstreams; i++) {
        struct group_stream *g = &group_streams[i];
        if (g->refs <= 0) continue;
        if (!ng_accepted(res)) {
            if (g->marker != NG_NO_MARKER) ncclguard_gpu_marker_release(g->marker);
            ncclguard_group_publish(group_id, g->stream, NG_GROUP_FAILED, g->refs);
        } else if (g->marker == NG_NO_MARKER) {
            continue;
        } else if (res == ncclInProgress) {
            struct deferred d = {-1, g->marker, g->stream, 0, group_id, g->refs};
            defer(&d);
        } else {
            ncclguard_gpu_marker_end(g->marker, (void *)(uintptr_t)g->stream);
            ncclguard_group_publish(group_id, g->stream, g->marker, g->refs);
        }
    }
    group_nstreams = 0;
}

/* The first communicator of the process: allocate the flight recorder, open
 * the CUDA driver, start the watchdog. Runs once (under init.c's once). */
void ncclguard_track_start(void)
{
    const struct ng_settings *s = ncclguard_settings();
    track_mode = s->track;
    ncclguard_track_refresh_clock();
    if (ncclguard_flight_init((uint64_t)s->ring) != 0) {
        NG_WARN("cannot allocate the flight recorder (%lld records): tracking is off",
                (long long)s->ring);
        __atomic_store_n(&ncclguard_tracking, 0, __ATOMIC_RELEASE);
        return;
    }
    ncclguard_flight_on_drop(release_dropped);
    ncclguard_groups_init((uint64_t)s->ring);
    if (track_mode != NG_TRACK_OFF) {
        /* A marker for each record of the ring, and a few for the ops being
         * enqueued: each takes its marker before its record drops an
         * unfinished one, which returns that one's marker. */
        struct ng_flight_stats fs;
        ncclguard_flight_stats(&fs);
        ncclguard_gpu_set_pool_size(fs.capacity + 64);
        ncclguard_gpu_open();
    }
    ncclguard_dump_init();
    ncclguard_events_open(s->events);
    ncclguard_watchdog_start();
}

void ncclguard_track_atfork_child(void)
{
    ncclguard_flight_atfork_child();
    ncclguard_groups_atfork_child();
    ncclguard_watchdog_atfork_child();
    pthread_mutex_init(&deferred_lock, NULL);
    ndeferred = 0;
}

uint64_t ncclguard_op_total(int type)
{
    uint64_t n = 0;
    for (int i = 0; i < ncclguard_comm_count(); i++)
        n += __atomic_load_n(&ncclguard_comm_at(i)->ops_by_type[type], __ATOMIC_RELAXED);
    return n;
}

/*
 * track.c: see track.h. The wrappers call these hooks around every NCCL call;
 * the hooks map handles to registry records and keep the sequence numbers that
 * make one op comparable across ranks.
 */
#include "track.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "gpu.h"
#include "groups.h"
#include "dump.h"
#include "events.h"
#include "init.h"
#include "log.h"
#include "watchdog.h"

int ncclguard_tracking;

/* initial-exec: the library is preloaded, so its TLS is static and needs no
 * __tls_get_addr call on the hot path. */
#define NG_TLS __thread __attribute__((tls_model("initial-exec")))
static NG_TLS int group_depth;
static uint64_t init_all_calls; /* CommInitAll ids: this process only, atomic */

const char *ncclguard_op_name(int type)
{
    static const char *const names[] = {
#define NG_OP_NAME(e, s) s,
        NG_OPS(NG_OP_NAME)
#undef NG_OP_NAME
    };
    return type >= 0 && type < NG_OP_NTYPES ? names[type] : "Unknown";
}

static int accepted(ncclResult_t r)
{
    return r == ncclSuccess || r == ncclInProgress;
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

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

/* Records the end marker of `d` now and makes it visible to the watchdog. */
static void end_deferred(const struct deferred *d)
{
    ncclguard_gpu_marker_end(d->marker, (void *)(uintptr_t)d->stream);
    if (d->group_id) {
        ncclguard_group_publish(d->group_id, d->stream, d->marker, d->refs);
        return;
    }
    struct ng_op_record r;
    if (ncclguard_flight_copy(d->index, &r) == 0)
        NG_FLIGHT_SET(d->index, flags, r.flags & ~(uint64_t)NG_REC_DEFERRED);
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
    int64_t now = mono_ns();
    /* One compound literal: the compiler zeroes the rest with wide stores
     * (memset's rep stos costs more than the whole record here). */
    *r = (struct ng_op_record){
        .comm_id = c->id,
        .comm_slot = ncclguard_comm_index(c),
        .comm_rank = __atomic_load_n(&c->rank, __ATOMIC_RELAXED),
        .comm_nranks = __atomic_load_n(&c->nranks, __ATOMIC_RELAXED),
        .op = type,
        .count = count,
        .dtype = dtype,
        .bytes = count * dtype_size(dtype),
        .redop = type == NG_OP_ALLREDUCE || type == NG_OP_REDUCE || type == NG_OP_REDUCESCATTER
                     ? redop : -1,
        .root = root,
        .stream = (uint64_t)(uintptr_t)stream,
        .thread_id = thread_id,
        .enqueue_mono_ns = now,
        .enqueue_ns = now + __atomic_load_n(&realtime_offset, __ATOMIC_RELAXED),
    };
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
    if (!accepted(res)) {
        if (r->marker != NG_NO_MARKER) ncclguard_gpu_marker_release((int)r->marker);
        if (t->group_slot >= 0) group_streams[t->group_slot].refs--;
        r->marker = NG_NO_MARKER;
        ncclguard_flight_append(r, NG_OP_FAILED);
        return;
    }
    __atomic_fetch_add(&c->ops_by_type[r->op], 1, __ATOMIC_RELAXED);
    if (r->op == NG_OP_SEND || r->op == NG_OP_RECV) {
        if (c->p2p_seq && r->root >= 0 && r->root < c->p2p_cap)
            r->p2p_seq = __atomic_add_fetch(&c->p2p_seq[r->root], 1, __ATOMIC_RELAXED);
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
        if (!accepted(res)) {
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
    ncclguard_groups_init((uint64_t)s->ring);
    if (track_mode != NG_TRACK_OFF) {
        ncclguard_gpu_set_pool_size((int)(s->ring < 65536 ? s->ring : 65536));
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

static void comm_event(const char *what, const struct ng_comm *c)
{
    ncclguard_event(what, "\"comm\":\"%016llx\",\"rank\":%d,\"nranks\":%d,\"parent\":\"%016llx\"",
                    (unsigned long long)c->id, c->rank, c->nranks,
                    (unsigned long long)c->parent_id);
}

static void start_creation(struct ng_init_ticket *t, ncclComm_t *out, uint64_t id, int rank,
                           int nranks, uint64_t parent, const ncclConfig_t *config)
{
    ncclguard_first_comm();
    if (track_mode != NG_TRACK_OFF) ncclguard_gpu_prepare_current();
    t->out = out;
    t->comm = ncclguard_comm_new(id, rank, nranks, parent, config);
}

void ncclguard_init_pre(struct ng_init_ticket *t, ncclComm_t *out, int nranks, int rank,
                        int nids, const ncclUniqueId *ids, const ncclConfig_t *config)
{
    uint64_t id = NG_HASH_SEED;
    for (int i = 0; ids && i < nids; i++) id = ncclguard_hash(id, &ids[i], sizeof ids[i]);
    start_creation(t, out, id, rank, nranks, 0, config);
}

void ncclguard_init_all_pre(struct ng_init_ticket *t, ncclComm_t *out, int ndev)
{
    (void)ndev;
    t->out = out;
    t->comm = NULL; /* one record per device is made in the post hook */
}

/* A child's id: the parent's id, the ordinal of this split on the parent (the
 * same on every rank, since splits are collective over the parent) and the
 * color or excluded set. */
static uint64_t child_id(struct ng_comm *parent, const void *what, size_t len)
{
    uint64_t ordinal = __atomic_fetch_add(&parent->splits, 1, __ATOMIC_RELAXED);
    uint64_t id = ncclguard_hash(parent->id, &ordinal, sizeof ordinal);
    return ncclguard_hash(id, what, len);
}

void ncclguard_split_pre(struct ng_init_ticket *t, ncclComm_t parent, int color,
                         ncclComm_t *out, const ncclConfig_t *config)
{
    struct ng_comm *p = ncclguard_comm_find(parent);
    t->out = out;
    t->comm = NULL;
    if (!p) return;
    uint64_t id = child_id(p, &color, sizeof color);
    if (color == NCCL_SPLIT_NOCOLOR) return;
    start_creation(t, out, id, -1, -1, p->id, config);
    ncclguard_comm_reserve_peers(t->comm, p->p2p_cap);
}

void ncclguard_shrink_pre(struct ng_init_ticket *t, ncclComm_t parent, const int *excluded,
                          int nexcluded, ncclComm_t *out, const ncclConfig_t *config)
{
    struct ng_comm *p = ncclguard_comm_find(parent);
    t->out = out;
    t->comm = NULL;
    if (!p) return;
    uint64_t set = NG_HASH_SEED;
    if (excluded && nexcluded > 0)
        set = ncclguard_hash(set, excluded, (size_t)nexcluded * sizeof *excluded);
    start_creation(t, out, child_id(p, &set, sizeof set), -1, -1, p->id, config);
    ncclguard_comm_reserve_peers(t->comm, p->p2p_cap);
}

void ncclguard_init_post(struct ng_init_ticket *t, ncclResult_t r)
{
    struct ng_comm *c = t->comm;
    if (!c) return;
    if (!accepted(r) || !t->out || !*t->out) {
        ncclguard_comm_set_state(c, NG_COMM_FAILED);
        return;
    }
    ncclguard_comm_attach(c, *t->out);
    if (r == ncclSuccess) ncclguard_comm_set_state(c, NG_COMM_READY);
    comm_event("comm_created", c);
}

void ncclguard_init_all_post(struct ng_init_ticket *t, int ndev, ncclResult_t r)
{
    if (r != ncclSuccess || !t->out) return;
    ncclguard_first_comm();
    uint64_t call = __atomic_fetch_add(&init_all_calls, 1, __ATOMIC_RELAXED);
    pid_t pid = getpid();
    for (int i = 0; i < ndev; i++) {
        uint64_t id = ncclguard_hash(NG_HASH_SEED, &pid, sizeof pid);
        id = ncclguard_hash(id, &call, sizeof call);
        struct ng_comm *c = ncclguard_comm_new(id, i, ndev, 0, NULL);
        ncclguard_comm_attach(c, t->out[i]);
        ncclguard_comm_set_state(c, NG_COMM_READY);
    }
}

void ncclguard_end_pre(struct ng_end_ticket *t, ncclComm_t comm, int kind)
{
    t->comm = ncclguard_comm_find(comm);
    t->kind = kind;
    t->fenced = t->comm && __atomic_load_n(&t->comm->fenced, __ATOMIC_ACQUIRE);
    if (t->fenced) return;
    ncclguard_comm_set_ending(t->comm, 1); /* the watchdog lets go of the handle */
    /* The application may release the CUDA context right after this call;
     * settle what the GPU finished while the markers can still be queried. */
    if (t->comm) ncclguard_watchdog_settle();
    /* Abort frees the handle even when it fails, so forget it first. */
    if (t->comm && kind == NG_END_ABORT) {
        ncclguard_comm_set_state(t->comm, NG_COMM_ABORTED);
        comm_event("comm_aborted", t->comm);
    }
}

void ncclguard_end_post(struct ng_end_ticket *t, ncclResult_t r)
{
    static const int state_of[] = {
        [NG_END_FINALIZE] = NG_COMM_FINALIZING,
        [NG_END_DESTROY] = NG_COMM_DESTROYED,
        [NG_END_ABORT] = NG_COMM_ABORTED,
        [NG_END_REVOKE] = NG_COMM_REVOKED,
    };
    if (!t->comm || t->kind == NG_END_ABORT) return;
    if (accepted(r)) ncclguard_comm_set_state(t->comm, state_of[t->kind]);
    else ncclguard_comm_set_ending(t->comm, 0);
    if (accepted(r) && t->kind == NG_END_DESTROY) comm_event("comm_destroyed", t->comm);
    if (t->kind == NG_END_DESTROY && r == ncclSuccess) ncclguard_watchdog_settle();
}

void ncclguard_async_error_post(ncclComm_t comm, const ncclResult_t *err, ncclResult_t r)
{
    struct ng_comm *c = ncclguard_comm_find(comm);
    if (!c || r != ncclSuccess || !err) return;
    if (*err == ncclSuccess) ncclguard_flush_deferred(ncclguard_comm_index(c));
    ncclguard_watchdog_async_error(c, (int)*err);
    if (*err == ncclSuccess &&
        __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == NG_COMM_INITIALIZING)
        ncclguard_comm_set_state(c, NG_COMM_READY);
}

/* The calling thread's last call was refused because of a fence, so that
 * ncclGetLastError(NULL) can explain it. */
static NG_TLS const struct ng_comm *last_fenced;

int ncclguard_fenced(ncclComm_t comm)
{
    struct ng_comm *c = ncclguard_comm_find(comm);
    if (!c || !__atomic_load_n(&c->fenced, __ATOMIC_ACQUIRE)) return 0;
    last_fenced = c;
    return 1;
}

ncclResult_t ncclguard_fenced_result(void)
{
    return ncclInvalidUsage;
}

ncclResult_t ncclguard_end_fenced(struct ng_end_ticket *t)
{
    /* NCCL already freed the handle: forget it, and tell the application its
     * own clean-up went fine. */
    ncclguard_comm_set_state(t->comm, t->kind == NG_END_FINALIZE ? NG_COMM_ABORTED
                                                                 : NG_COMM_DESTROYED);
    return ncclSuccess;
}

ncclResult_t ncclguard_async_error_fenced(ncclResult_t *err)
{
    if (err) *err = ncclRemoteError;
    return ncclSuccess;
}

const char *ncclguard_fenced_last_error(ncclComm_t comm)
{
    const struct ng_comm *c = comm ? ncclguard_comm_find(comm) : last_fenced;
    if (!c || !__atomic_load_n(&c->fenced, __ATOMIC_ACQUIRE)) return NULL;
    return c->fence_reason;
}

uint64_t ncclguard_op_total(int type)
{
    uint64_t n = 0;
    for (int i = 0; i < ncclguard_comm_count(); i++)
        n += __atomic_load_n(&ncclguard_comm_at(i)->ops_by_type[type], __ATOMIC_RELAXED);
    return n;
}

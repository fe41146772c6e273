/*
 * test_shim_observer.c: the observer's lanes (shim/watch/observer.c, lanes.c)
 * against the fake driver's streams and events. A lane gives up its ops oldest
 * first and leaves the ops behind an unfinished one alone; many streams and
 * communicators each get their lane; as many lanes as the ring has slots, and a
 * record overwritten while in flight in the middle of a lane, lose no other
 * op's progress; a communicator's op on a second stream waits for its op on
 * the first; a group's ops on a stream share its marker; an op without a
 * marker follows its group or its stream: when its stream got none at the
 * group's end (the pool was empty) it is untracked until a later op of that
 * stream completes, and with it; the 17th stream of a group, and the legacy
 * stream during a capture, follow the group's stream of their communicator;
 * the per-thread default stream of each thread is a lane of its own; an op
 * with no marker to ask yet (a deferred end) holds up nothing behind it; an aborted
 * communicator's ops end aborted, in a lane or not. And the hooks' lookup of
 * the communicator, which a thread keeps: a handle that NCCL hands out again
 * for a new communicator names the new one.
 *
 * Records are appended by hand with real markers around fake kernels; an op is
 * held started by a kernel that spins between its start and end markers, or
 * held scheduled by one before its start marker. Each poll is one
 * ncclguard_observer_pass; the watchdog's threads are not started.
 */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../fakes/fakecuda.h"
#include "base/atomic.h"
#include "base/clock.h"
#include "check_main.h"
#include "policy/config_load.h"
#include "track/comm.h"
#include "track/flight.h"
#include "track/groups.h"
#include "track/markers.h"
#include "track/ops.h"
#include "track/track.h"
#include "watch/observer.h"

extern char **environ;

/* Tracking as at the first communicator, with a ring of `ring` records, and a
 * context current on this thread. */
static void start(uint64_t ring)
{
    setenv("NCCLGUARD_LOG_LEVEL", "error", 1);
    struct ng_config_paths none = {.site = "", .user = "", .job = ""};
    ncclguard_config_load(&none, environ, 0);
    struct ng_track_params tp = {.mode = NG_TRACK_FULL, .ring = ring, .timing_sample = 0};
    ck_assert_int_eq(ncclguard_track_start(&tp), 0);
    CUdevice dev;
    CUcontext ctx;
    ck_assert(!cuInit(0) && !cuDeviceGet(&dev, 0) && !cuDevicePrimaryCtxRetain(&ctx, dev) &&
              !cuCtxSetCurrent(ctx));
    ncclguard_markers_prepare_current();
}

static CUstream stream(void)
{
    CUstream s;
    ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    return s;
}

/* Holds stream s until *release. */
static void hold(CUstream s, const volatile int *release)
{
    ck_assert_int_eq(fakecuda_test_spin(s, release), CUDA_SUCCESS);
}

static void let_go(volatile int *release)
{
    __atomic_store_n(release, 1, __ATOMIC_RELEASE);
}

static struct ng_op_record record(int64_t comm_slot, CUstream s)
{
    static uint64_t seq;
    struct ng_op_record r;
    memset(&r, 0, sizeof r);
    r.comm_slot = comm_slot;
    r.stream = (uint64_t)(uintptr_t)s;
    r.op = NG_OP_ALLREDUCE;
    r.seq = ++seq;
    r.peer = -1;
    r.marker = NG_NO_MARKER;
    r.enqueue_ns = ng_clock_ns(CLOCK_REALTIME);
    r.enqueue_mono_ns = ng_clock_ns(CLOCK_MONOTONIC);
    return r;
}

/* An op of communicator slot `comm_slot` on s: its start marker, with `spin` a
 * kernel that spins until *spin (the op is started meanwhile), its end
 * marker. Returns its index; its marker into *marker when not NULL. */
static uint64_t op(int64_t comm_slot, CUstream s, const volatile int *spin, int *marker)
{
    void *end_ev;
    int m;
    ck_assert_int_eq(ncclguard_marker_begin(s, 1, 0, &m, &end_ev), NG_MARKER_OK);
    if (spin) hold(s, spin);
    ck_assert_int_eq(ncclguard_marker_end(m, s), 0);
    if (marker) *marker = m;
    struct ng_op_record r = record(comm_slot, s);
    r.marker = m;
    return ncclguard_flight_append(&r, NG_OP_SCHEDULED);
}

static int state(uint64_t index)
{
    return ncclguard_flight_state(index);
}

/* Polls until marker m is as far as `want` (the stream got there), at most 10 s. */
static void reach(int m, enum ng_marker_state want)
{
    for (int i = 0; i < 10000; i++) {
        int64_t gs, ge;
        if (ncclguard_marker_poll(m, 1, &gs, &ge) >= want) return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("marker %d never reached state %d", m, (int)want);
}

static void pass(void)
{
    ncclguard_observer_pass(0);
}

NG_TEST(lane_oldest_first)
{
    start(1024);
    static volatile int spin;
    CUstream s = stream();
    int ma, mb;
    uint64_t a = op(1, s, NULL, &ma), b = op(1, s, &spin, &mb);
    uint64_t c = op(1, s, NULL, NULL), d = op(1, s, NULL, NULL);
    reach(ma, NG_MARKER_DONE);
    reach(mb, NG_MARKER_STARTED);
    pass();
    ck_assert_int_eq(state(a), NG_OP_COMPLETED);
    ck_assert_int_eq(state(b), NG_OP_STARTED);
    pass(); /* from its lane this time: the same */
    ck_assert_int_eq(state(b), NG_OP_STARTED);
    ck_assert_int_eq(state(c), NG_OP_SCHEDULED);
    ck_assert_int_eq(state(d), NG_OP_SCHEDULED);
    let_go(&spin);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    pass(); /* every op of the lane that finished, in one pass */
    ck_assert_int_eq(state(b), NG_OP_COMPLETED);
    ck_assert_int_eq(state(c), NG_OP_COMPLETED);
    ck_assert_int_eq(state(d), NG_OP_COMPLETED);
    struct ng_op_record r;
    ck_assert_int_eq(ncclguard_flight_copy(b, &r), 0);
    ck_assert(r.seen_start_ns && r.seen_end_ns && r.seen_start_ns < r.seen_end_ns);
}
END_TEST

/* 48 streams, each with the ops of two communicators (96 lanes): each lane's
 * front is followed on its own, and once released every op completes. */
#define NSTREAMS 48
NG_TEST(many_streams_and_comms)
{
    start(4096);
    static volatile int spin[NSTREAMS];
    CUstream s[NSTREAMS];
    uint64_t first[NSTREAMS], next[NSTREAMS], other[NSTREAMS];
    int m[NSTREAMS];
    for (int i = 0; i < NSTREAMS; i++) {
        s[i] = stream();
        op(2 * i, s[i], NULL, NULL);
        first[i] = op(2 * i, s[i], &spin[i], &m[i]);
        next[i] = op(2 * i, s[i], NULL, NULL);
        other[i] = op(2 * i + 1, s[i], NULL, NULL);
    }
    for (int i = 0; i < NSTREAMS; i++) reach(m[i], NG_MARKER_STARTED);
    pass();
    pass();
    for (int i = 0; i < NSTREAMS; i++) {
        ck_assert_int_eq(state(first[i]), NG_OP_STARTED);
        ck_assert_int_eq(state(next[i]), NG_OP_SCHEDULED);
        ck_assert_int_eq(state(other[i]), NG_OP_SCHEDULED);
    }
    for (int i = 0; i < NSTREAMS; i += 2) let_go(&spin[i]); /* every other stream */
    for (int i = 0; i < NSTREAMS; i += 2) cuStreamSynchronize(s[i]);
    pass();
    for (int i = 0; i < NSTREAMS; i++) {
        int want = i % 2 ? NG_OP_STARTED : NG_OP_COMPLETED;
        ck_assert_int_eq(state(first[i]), want);
        ck_assert_int_eq(state(next[i]), i % 2 ? NG_OP_SCHEDULED : NG_OP_COMPLETED);
        ck_assert_int_eq(state(other[i]), i % 2 ? NG_OP_SCHEDULED : NG_OP_COMPLETED);
    }
    for (int i = 1; i < NSTREAMS; i += 2) let_go(&spin[i]);
    for (int i = 1; i < NSTREAMS; i += 2) cuStreamSynchronize(s[i]);
    pass();
    for (int i = 0; i < NSTREAMS; i++) {
        ck_assert_int_eq(state(first[i]), NG_OP_COMPLETED);
        ck_assert_int_eq(state(next[i]), NG_OP_COMPLETED);
        ck_assert_int_eq(state(other[i]), NG_OP_COMPLETED);
    }
}
END_TEST

/* A ring of 16 has room for 16 lanes: one op held on each of 16 streams fills
 * them. The 17th op, on a 17th stream, overwrites the first while it is in
 * flight: that one leaves its lane, the new one gets a lane, and every other
 * op still completes. */
NG_TEST(as_many_lanes_as_slots)
{
    start(16);
    static volatile int spin;
    CUstream s[17];
    uint64_t i[17];
    int m[17];
    for (int k = 0; k < 16; k++) {
        s[k] = stream();
        i[k] = op(k, s[k], &spin, &m[k]);
    }
    for (int k = 0; k < 16; k++) reach(m[k], NG_MARKER_STARTED);
    pass();
    for (int k = 0; k < 16; k++) ck_assert_int_eq(state(i[k]), NG_OP_STARTED);
    s[16] = stream();
    i[16] = op(16, s[16], &spin, &m[16]);
    ck_assert_int_eq(state(i[0]), -1); /* overwritten */
    reach(m[16], NG_MARKER_STARTED);
    pass();
    for (int k = 1; k < 17; k++) ck_assert_int_eq(state(i[k]), NG_OP_STARTED);
    let_go(&spin);
    for (int k = 0; k < 17; k++) cuStreamSynchronize(s[k]);
    pass();
    for (int k = 1; k < 17; k++) ck_assert_int_eq(state(i[k]), NG_OP_COMPLETED);
}
END_TEST

/* One stream held before any op starts, a ring of 16: rounds of 40 ops, a pass
 * after the first 10 (they wait in the lane), so that the next 30 overwrite
 * records in the middle of the lane. The 16 newest complete once the stream
 * goes on, and the markers of the dropped ones come back: 10 rounds need 400
 * markers of a pool of 80. */
NG_TEST(overwritten_in_flight)
{
    start(16);
    CUstream s = stream();
    for (int round = 0; round < 10; round++) {
        static volatile int spin[10];
        hold(s, &spin[round]);
        uint64_t first = 0;
        for (int k = 0; k < 40; k++) {
            uint64_t i = op(3, s, NULL, NULL);
            if (k == 0) first = i;
            if (k == 9) pass();
        }
        pass();
        for (uint64_t i = first; i < first + 24; i++) ck_assert_int_eq(state(i), -1);
        for (uint64_t i = first + 24; i < first + 40; i++)
            ck_assert_int_eq(state(i), NG_OP_SCHEDULED);
        let_go(&spin[round]);
        ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
        pass();
        for (uint64_t i = first + 24; i < first + 40; i++)
            ck_assert_int_eq(state(i), NG_OP_COMPLETED);
    }
    struct ng_marker_stats ms;
    ncclguard_markers_stats(&ms);
    ck_assert_uint_eq(ms.no_marker, 0);
    ck_assert_uint_eq(fakecuda_misuse_count(), 0);
}
END_TEST

/* A writer thread appends ops on a held stream into a ring of 16 as fast as it
 * can while passes run: records are dropped in flight at every moment of a
 * pass, also between the settling of their lane and the taking of the records
 * that replace them. Once the stream goes on, the 16 newest complete, and the
 * dropped ones' markers came back. (Also run under ThreadSanitizer.) */
struct writer {
    CUcontext ctx;
    CUstream s;
    ng_atomic(int) stop;
    uint64_t last, failed;
};

static void *write_ops(void *arg)
{
    void *end_ev;
    struct writer *w = arg;
    if (cuCtxSetCurrent(w->ctx)) return NULL;
    while (!ng_atomic_load_acquire(&w->stop)) {
        int m;
        if (ncclguard_marker_begin(w->s, 1, 0, &m, &end_ev) != NG_MARKER_OK ||
            ncclguard_marker_end(m, w->s) != 0) {
            w->failed++;
            continue;
        }
        struct ng_op_record r = record(6, w->s);
        r.marker = m;
        w->last = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    }
    return NULL;
}

NG_TEST(overwritten_while_passes_run)
{
    /* An unbounded launch queue: a held stream takes every op (a real one blocks
     * the writer after about a thousand, analyze.sh's queuefull job). */
    setenv("FAKECUDA_QUEUE_DEPTH", "0", 1);
    start(16);
    static volatile int spin;
    struct writer w = {.s = stream()};
    ck_assert_int_eq(cuCtxGetCurrent(&w.ctx), CUDA_SUCCESS);
    hold(w.s, &spin);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, write_ops, &w), 0);
    int64_t until = ng_clock_ns(CLOCK_MONOTONIC) + 300000000;
    int passes = 0;
    while (ng_clock_ns(CLOCK_MONOTONIC) < until || passes < 100) {
        pass();
        passes++;
    }
    ng_atomic_store_release(&w.stop, 1);
    pthread_join(t, NULL);
    ck_assert_uint_eq(w.failed, 0);
    ck_assert_uint_gt(w.last, 1000);
    let_go(&spin);
    ck_assert_int_eq(cuStreamSynchronize(w.s), CUDA_SUCCESS);
    pass();
    for (uint64_t i = w.last - 15; i <= w.last; i++) ck_assert_int_eq(state(i), NG_OP_COMPLETED);
    ck_assert_uint_eq(fakecuda_misuse_count(), 0);
}
END_TEST

/* One communicator, two streams: its op on s2 is started by its marker, but
 * NCCL runs it after its op on s1, which is held before it starts. */
NG_TEST(comm_waits_for_its_other_stream)
{
    start(1024);
    static volatile int before, spin;
    CUstream s1 = stream(), s2 = stream();
    hold(s1, &before);
    uint64_t a = op(5, s1, NULL, NULL);
    int mb;
    uint64_t b = op(5, s2, &spin, &mb);
    reach(mb, NG_MARKER_STARTED);
    pass();
    pass();
    ck_assert_int_eq(state(a), NG_OP_SCHEDULED);
    ck_assert_int_eq(state(b), NG_OP_SCHEDULED);
    let_go(&before);
    ck_assert_int_eq(cuStreamSynchronize(s1), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(a), NG_OP_COMPLETED);
    ck_assert_int_eq(state(b), NG_OP_STARTED);
    let_go(&spin);
    ck_assert_int_eq(cuStreamSynchronize(s2), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(b), NG_OP_COMPLETED);
}
END_TEST

/* Three ops of a group on one stream share its marker: all three are started,
 * then completed, together; an op behind them waits. */
NG_TEST(group_shares_marker)
{
    void *end_ev;
    start(1024);
    static volatile int spin;
    CUstream s = stream();
    int m;
    ck_assert_int_eq(ncclguard_marker_begin(s, 1, 0, &m, &end_ev), NG_MARKER_OK);
    hold(s, &spin);
    ck_assert_int_eq(ncclguard_marker_end(m, s), 0);
    uint64_t g[3];
    for (int k = 0; k < 3; k++) {
        struct ng_op_record r = record(7, s);
        r.group_id = 99;
        g[k] = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    }
    ncclguard_group_publish(99, 0, (uint64_t)(uintptr_t)s, m, 3);
    uint64_t after = op(7, s, NULL, NULL);
    reach(m, NG_MARKER_STARTED);
    pass();
    for (int k = 0; k < 3; k++) ck_assert_int_eq(state(g[k]), NG_OP_STARTED);
    ck_assert_int_eq(state(after), NG_OP_SCHEDULED);
    let_go(&spin);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    pass();
    for (int k = 0; k < 3; k++) ck_assert_int_eq(state(g[k]), NG_OP_COMPLETED);
    ck_assert_int_eq(state(after), NG_OP_COMPLETED);
}
END_TEST

/* A group's stream that got no marker at its ncclGroupEnd: its ops are
 * untracked while nothing tells more, and complete once the op behind them on
 * the stream completes (the stream ran them first). */
NG_TEST(group_without_marker_untracked)
{
    start(1024);
    CUstream s = stream();
    uint64_t g[2];
    for (int k = 0; k < 2; k++) {
        struct ng_op_record r = record(7, s);
        r.group_id = 98;
        g[k] = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    }
    pass();
    for (int k = 0; k < 2; k++) ck_assert_int_eq(state(g[k]), NG_OP_SCHEDULED); /* not launched */
    ncclguard_group_publish(98, 0, (uint64_t)(uintptr_t)s, NG_GROUP_UNTRACKED, 2);
    pass();
    for (int k = 0; k < 2; k++) ck_assert_int_eq(state(g[k]), NG_OP_UNTRACKED);
    pass(); /* nothing behind them: they stay so */
    for (int k = 0; k < 2; k++) ck_assert_int_eq(state(g[k]), NG_OP_UNTRACKED);
    int m;
    uint64_t after = op(7, s, NULL, &m);
    reach(m, NG_MARKER_DONE);
    pass();
    ck_assert_int_eq(state(after), NG_OP_COMPLETED);
    for (int k = 0; k < 2; k++) ck_assert_int_eq(state(g[k]), NG_OP_COMPLETED);
}
END_TEST

/* A communicator registered with the hooks, under handle h. */
static ncclComm_t hook_comm(uint64_t id, uintptr_t handle)
{
    struct ng_comm *c = ncclguard_comm_new(id, 0, 1, 0, NULL);
    ck_assert_ptr_nonnull(c);
    ncclComm_t h = (ncclComm_t)handle;
    ncclguard_comm_attach(c, h);
    return h;
}

/* An AllReduce on s through the hooks, as the wrapper makes it; its index. */
static uint64_t hook_op(ncclComm_t h, CUstream s)
{
    struct ng_op_ticket t;
    ncclguard_op_pre(&t, NG_OP_ALLREDUCE, h, (cudaStream_t)s, 2, ncclFloat, ncclSum, -1);
    ncclguard_op_post(&t, ncclSuccess);
    return ncclguard_flight_head() - 1;
}

/* The same from the hooks: a group whose ncclGroupEnd finds the marker pool
 * empty publishes its stream without a marker: its op is untracked, and
 * completes with the next op on its stream, which gets a marker again, once
 * the GPU finished that one. */
NG_TEST(group_end_without_marker)
{
    void *end_ev;
    static volatile int spin;
    start(16); /* a pool of 16 + 64 pairs */
    ncclComm_t h = hook_comm(43, 0x4300);
    CUstream s = stream();
    ncclguard_group_start_post(ncclSuccess);
    uint64_t index = hook_op(h, s);
    int m[16 + 64];
    for (int i = 0; i < 16 + 64; i++)
        ck_assert_int_eq(ncclguard_marker_begin(s, 1, 0, &m[i], &end_ev), NG_MARKER_OK);
    ncclguard_group_end_pre();
    ncclguard_group_end_post(ncclSuccess);
    for (int i = 0; i < 16 + 64; i++) ncclguard_marker_release(m[i]);
    pass();
    ck_assert_int_eq(state(index), NG_OP_UNTRACKED);
    hold(s, &spin);
    uint64_t next = hook_op(h, s);
    pass();
    ck_assert_int_eq(state(next), NG_OP_SCHEDULED);
    ck_assert_int_eq(state(index), NG_OP_UNTRACKED); /* nothing tells yet */
    let_go(&spin);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(next), NG_OP_COMPLETED);
    ck_assert_int_eq(state(index), NG_OP_COMPLETED);
}
END_TEST

/* A group over 17 streams of one communicator: the 17th stream gets no place
 * of its own, and its op follows the group's first stream, which NCCL makes
 * wait for the whole launch: scheduled while that stream has not reached the
 * group, completed with it. */
NG_TEST(group_17th_stream_follows_its_group)
{
    start(1024);
    static volatile int spin;
    ncclComm_t h = hook_comm(44, 0x4400);
    CUstream s[17];
    for (int i = 0; i < 17; i++) s[i] = stream();
    hold(s[0], &spin);
    ncclguard_group_start_post(ncclSuccess);
    uint64_t index[17];
    for (int i = 0; i < 17; i++) index[i] = hook_op(h, s[i]);
    ncclguard_group_end_pre();
    ncclguard_group_end_post(ncclSuccess);
    pass();
    ck_assert_int_eq(state(index[0]), NG_OP_SCHEDULED);
    ck_assert_int_eq(state(index[16]), NG_OP_SCHEDULED);
    let_go(&spin);
    for (int i = 0; i < 17; i++) ck_assert_int_eq(cuStreamSynchronize(s[i]), CUDA_SUCCESS);
    pass();
    for (int i = 0; i < 17; i++) ck_assert_int_eq(state(index[i]), NG_OP_COMPLETED);
}
END_TEST

/* The 17th stream's op holds a share of the marker it follows: the op of the
 * followed stream finishing first does not give that marker back (to be taken
 * by the next op, still pending) while the 17th's op, held behind an earlier op
 * of its own stream, has still to ask it. */
NG_TEST(follower_keeps_its_share_of_the_marker)
{
    start(1024);
    static volatile int spin;
    ncclComm_t h = hook_comm(46, 0x4600);
    CUstream s[17];
    for (int i = 0; i < 17; i++) s[i] = stream();
    int m;
    uint64_t before = op(ncclguard_comm_find(h)->slot, s[16], &spin, &m); /* holds s[16] */
    ncclguard_group_start_post(ncclSuccess);
    uint64_t index[17];
    for (int i = 0; i < 17; i++) index[i] = hook_op(h, s[i]);
    ncclguard_group_end_pre();
    ncclguard_group_end_post(ncclSuccess);
    for (int i = 0; i < 16; i++) ck_assert_int_eq(cuStreamSynchronize(s[i]), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(index[0]), NG_OP_COMPLETED);
    ck_assert_int_eq(state(index[16]), NG_OP_SCHEDULED); /* behind `before` */
    static volatile int spin2;
    uint64_t later[20]; /* they take the 16 markers just given back, and more */
    for (int k = 0; k < 20; k++) later[k] = op(ncclguard_comm_find(h)->slot, s[0], &spin2, NULL);
    let_go(&spin);
    ck_assert_int_eq(cuStreamSynchronize(s[16]), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(before), NG_OP_COMPLETED);
    ck_assert_int_eq(state(index[16]), NG_OP_COMPLETED);
    for (int k = 0; k < 20; k++) ck_assert_int_ne(state(later[k]), NG_OP_COMPLETED);
    let_go(&spin2);
    ck_assert_int_eq(cuStreamSynchronize(s[0]), CUDA_SUCCESS);
}
END_TEST

/* A group's op on the legacy stream while a blocking stream captures in global
 * mode: no marker may go on the legacy stream (it would invalidate the
 * capture), and the op follows the group's other stream of its communicator.
 * In a group of the legacy stream alone, the op is untracked, and completes
 * with a later op there once the capture is over. */
NG_TEST(group_legacy_stream_during_capture)
{
    start(1024);
    static volatile int spin;
    ncclComm_t h = hook_comm(45, 0x4500);
    CUstream nb = stream(), blocking;
    ck_assert_int_eq(cuStreamCreate(&blocking, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    hold(nb, &spin);
    CUgraph graph;
    ck_assert_int_eq(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    ncclguard_group_start_post(ncclSuccess);
    uint64_t on_nb = hook_op(h, nb), on_legacy = hook_op(h, CU_STREAM_LEGACY);
    ncclguard_group_end_pre();
    ncclguard_group_end_post(ncclSuccess);
    ncclguard_group_start_post(ncclSuccess);
    uint64_t alone = hook_op(h, CU_STREAM_LEGACY);
    ncclguard_group_end_pre();
    ncclguard_group_end_post(ncclSuccess);
    ck_assert_int_eq(cuStreamEndCapture(blocking, &graph), CUDA_SUCCESS); /* still valid */
    ck_assert_int_eq(cuGraphDestroy(graph), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(on_nb), NG_OP_SCHEDULED);
    ck_assert_int_eq(state(on_legacy), NG_OP_SCHEDULED);
    ck_assert_int_eq(state(alone), NG_OP_UNTRACKED);
    let_go(&spin);
    ck_assert_int_eq(cuStreamSynchronize(nb), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(on_nb), NG_OP_COMPLETED);
    ck_assert_int_eq(state(on_legacy), NG_OP_COMPLETED);
    ck_assert_int_eq(state(alone), NG_OP_UNTRACKED);
    uint64_t after = hook_op(h, CU_STREAM_LEGACY);
    ck_assert_int_eq(cuStreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(after), NG_OP_COMPLETED);
    ck_assert_int_eq(state(alone), NG_OP_COMPLETED);
}
END_TEST

/* A nonblocking op whose end marker is deferred has nothing to ask: the op
 * behind it on its lane completes meanwhile; it completes once its end marker
 * is recorded. */
NG_TEST(deferred_op_passed_over)
{
    void *end_ev;
    start(1024);
    CUstream s = stream();
    int m;
    ck_assert_int_eq(ncclguard_marker_begin(s, 1, 0, &m, &end_ev), NG_MARKER_OK);
    struct ng_op_record r = record(4, s);
    r.marker = m;
    r.flags = NG_REC_DEFERRED;
    uint64_t deferred = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    int mb;
    uint64_t b = op(4, s, NULL, &mb);
    reach(mb, NG_MARKER_DONE);
    pass();
    ck_assert_int_eq(state(deferred), NG_OP_SCHEDULED);
    ck_assert_int_eq(state(b), NG_OP_COMPLETED);
    pass();
    ck_assert_int_eq(state(deferred), NG_OP_SCHEDULED);
    ck_assert_int_eq(ncclguard_marker_end(m, s), 0);
    ncclguard_flight_end_deferred(deferred);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    pass();
    ck_assert_int_eq(state(deferred), NG_OP_COMPLETED);
}
END_TEST

/* An aborted communicator's ops end aborted: one in its lane, one without a
 * marker (in no lane), and one appended after the abort. */
NG_TEST(aborted_comm_ends_its_ops)
{
    start(1024);
    static volatile int before;
    struct ng_comm *c = ncclguard_comm_new(42, 0, 1, 0, NULL);
    ck_assert_ptr_nonnull(c);
    CUstream s = stream();
    hold(s, &before);
    uint64_t laned = op(c->slot, s, NULL, NULL);
    struct ng_op_record r = record(c->slot, s);
    uint64_t bare = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    pass();
    ck_assert_int_eq(state(laned), NG_OP_SCHEDULED);
    ck_assert_int_eq(state(bare), NG_OP_SCHEDULED);
    ncclguard_comm_set_state(c, NG_COMM_ABORTED);
    pass();
    ck_assert_int_eq(state(laned), NG_OP_ABORTED);
    ck_assert_int_eq(state(bare), NG_OP_ABORTED);
    uint64_t later = op(c->slot, s, NULL, NULL);
    pass();
    ck_assert_int_eq(state(later), NG_OP_ABORTED);
    let_go(&before);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
}
END_TEST

/* The hooks' lookup of the communicator is kept by the thread while the handle
 * map is unchanged: a handle destroyed and handed out again for another
 * communicator names that one in the ops that follow. */
NG_TEST(reused_handle_names_new_comm)
{
    start(16);
    ncclComm_t h = (ncclComm_t)(uintptr_t)0x5100;
    CUstream s = stream();
    struct ng_op_record r;
    for (uint64_t id = 51; id <= 52; id++) {
        struct ng_comm *c = ncclguard_comm_new(id, 0, 1, 0, NULL);
        ck_assert_ptr_nonnull(c);
        ncclguard_comm_attach(c, h);
        for (int k = 0; k < 2; k++) { /* the second is found in the thread's keeping */
            struct ng_op_ticket t;
            ck_assert_int_eq(ncclguard_op_pre(&t, NG_OP_ALLREDUCE, h, (cudaStream_t)s, 2, ncclFloat,
                                              ncclSum, -1),
                             0);
            ncclguard_op_post(&t, ncclSuccess);
            ck_assert_int_eq(ncclguard_flight_copy(ncclguard_flight_head() - 1, &r), 0);
            ck_assert_uint_eq(r.comm_id, id);
        }
        ncclguard_comm_set_state(c, NG_COMM_DESTROYED);
    }
}
END_TEST

static long sleep_ms(void)
{
    ncclguard_observer_pass(1);
    struct ng_observer_stats st;
    ncclguard_observer_stats(&st);
    return st.sleep_ms;
}

/* The observer polls every period while an op is in flight, in its lane or just
 * appended, or was less than a second ago, and once a second once nothing has
 * been for a second: the sleep it chose after each full pass. The waits are
 * lower bounds the code holds to, not measurements. */
NG_TEST(observer_sleeps_a_second_at_rest)
{
    start(1024);                       /* NCCLGUARD_POLL_MS: 100 */
    ck_assert_int_eq(sleep_ms(), 100); /* idle from now */
    struct timespec second = {1, 100000000};
    nanosleep(&second, NULL);
    ck_assert_int_eq(sleep_ms(), 1000);
    /* at rest the next op wakes it, once */
    ck_assert_int_eq(ncclguard_track_resting, 1);
    ncclguard_track_arrival();
    ck_assert_int_eq(ncclguard_track_resting, 0);
    ck_assert_int_eq(sleep_ms(), 1000);
    ck_assert_int_eq(ncclguard_track_resting, 1);
    static volatile int spin;
    CUstream s = stream();
    int m;
    op(1, s, &spin, &m);
    reach(m, NG_MARKER_STARTED);
    ck_assert_int_eq(sleep_ms(), 100); /* appended */
    ck_assert_int_eq(ncclguard_track_resting, 0);
    ck_assert_int_eq(sleep_ms(), 100); /* in its lane */
    nanosleep(&second, NULL);
    ck_assert_int_eq(sleep_ms(), 100); /* in its lane for a second: not at rest */
    let_go(&spin);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    ck_assert_int_eq(sleep_ms(), 100); /* it completed in this pass: idle from now */
    nanosleep(&second, NULL);
    ck_assert_int_eq(sleep_ms(), 1000);
}
END_TEST

/* One op on the per-thread default stream of a thread of its own: the thread
 * records its markers there (held started by a spin when `spin`), appends it
 * with its thread id, and stays until *stay is cleared, its stream drained. */
struct pt_op {
    CUcontext ctx;
    const volatile int *spin;
    volatile int stay;
    int appended;
    uint64_t index;
    int marker;
};

static void *pt_op_main(void *arg)
{
    struct pt_op *o = arg;
    void *end_ev;
    ck_assert_int_eq(cuCtxSetCurrent(o->ctx), CUDA_SUCCESS);
    ck_assert_int_eq(ncclguard_marker_begin(CU_STREAM_PER_THREAD, 1, 0, &o->marker, &end_ev),
                     NG_MARKER_OK);
    if (o->spin) hold(CU_STREAM_PER_THREAD, o->spin);
    ck_assert_int_eq(ncclguard_marker_end(o->marker, CU_STREAM_PER_THREAD), 0);
    struct ng_op_record r = record(3, CU_STREAM_PER_THREAD);
    r.thread_id = (uint64_t)gettid();
    r.marker = o->marker;
    o->index = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    __atomic_store_n(&o->appended, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&o->stay, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    return NULL;
}

static void pt_op_begin(pthread_t *t, struct pt_op *o)
{
    ck_assert_int_eq(pthread_create(t, NULL, pt_op_main, o), 0);
    while (!__atomic_load_n(&o->appended, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* The per-thread default stream (CU_STREAM_PER_THREAD, 0x2) of two threads is
 * two streams: the op of the second thread, which its stream finished, is not
 * held up behind the first thread's, which its own stream holds started. */
NG_TEST(per_thread_streams_are_lanes_of_their_own)
{
    start(1024);
    static volatile int spin;
    CUcontext ctx;
    ck_assert_int_eq(cuCtxGetCurrent(&ctx), CUDA_SUCCESS);
    pthread_t ta, tb;
    struct pt_op a = {.ctx = ctx, .spin = &spin, .stay = 1};
    struct pt_op b = {.ctx = ctx, .stay = 1};
    pt_op_begin(&ta, &a);
    pt_op_begin(&tb, &b);
    reach(a.marker, NG_MARKER_STARTED);
    reach(b.marker, NG_MARKER_DONE);
    pass();
    ck_assert_int_eq(state(a.index), NG_OP_STARTED);
    ck_assert_int_eq(state(b.index), NG_OP_COMPLETED);
    let_go(&spin);
    __atomic_store_n(&a.stay, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&b.stay, 0, __ATOMIC_RELEASE);
    ck_assert_int_eq(pthread_join(ta, NULL), 0);
    ck_assert_int_eq(pthread_join(tb, NULL), 0);
    pass();
    ck_assert_int_eq(state(a.index), NG_OP_COMPLETED);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("observer", "lanes", 60, ng_check_tests(), NULL));
}

/*
 * The flight recorder: records come back as written, wrap-around is counted,
 * a record overwritten while unfinished counts as dropped, state changes are
 * compare-and-swap, a copy derives what the writer does not store, and
 * concurrent writers and readers never see a torn record
 * (run this suite under ThreadSanitizer too: make tsan).
 */
#include <check.h>

#include "check_main.h"
#include <pthread.h>
#include <stdlib.h>

#include "base/atomic.h"
#include "track/comm.h"
#include "track/flight.h"

static struct ng_op_record make(uint64_t v)
{
    struct ng_op_record r = {0};
    r.seq = v; /* the first word a writer stores */
    r.count = v * 5;
    r.thread_id = v * 7;
    r.enqueue_mono_ns = (int64_t)v * 11;
    r.marker = (int32_t)(v % 1000); /* holds events: a drop goes to the callback */
    r.flags = v * 13;               /* the last word a writer stores */
    return r;
}

static int consistent(const struct ng_op_record *r)
{
    uint64_t v = r->seq;
    return r->count == v * 5 && r->thread_id == v * 7 && r->enqueue_mono_ns == (int64_t)v * 11 &&
           r->flags == v * 13;
}

/* The drop callback: counts the records it gets, and checks each copy. */
static ng_atomic(uint64_t) ndropped, dropped_bad;

static void count_drop(const struct ng_op_record *r)
{
    ng_atomic_add_relaxed(&ndropped, 1);
    if (!consistent(r)) ng_atomic_add_relaxed(&dropped_bad, 1);
}

/* One process-wide ring: the tests run in forked children (CK_FORK default). */
NG_TEST(append_copy_and_wrap)
{
    ck_assert_int_eq(ncclguard_flight_init(16), 0);
    ncclguard_flight_on_drop(count_drop);
    for (uint64_t v = 1; v <= 40; v++) {
        struct ng_op_record r = make(v);
        ck_assert_uint_eq(ncclguard_flight_append(&r, v % 2 ? NG_OP_COMPLETED : NG_OP_SCHEDULED),
                          v - 1);
    }
    struct ng_op_record out;
    ck_assert_int_eq(ncclguard_flight_copy(39, &out), 0);
    ck_assert(consistent(&out));
    ck_assert_uint_eq(out.seq, 40);
    ck_assert_int_eq(ncclguard_flight_copy(10, &out), -1); /* overwritten */
    ck_assert_int_eq(ncclguard_flight_state(10), -1);
    ck_assert_int_eq(ncclguard_flight_state(24), NG_OP_COMPLETED); /* v = 25, odd */
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    ck_assert_uint_eq(st.recorded, 40);
    ck_assert_uint_eq(st.overwritten, 24);
    /* of the 24 overwritten, v = 1..24: the even ones were still scheduled */
    ck_assert_uint_eq(st.dropped_inflight, 12);
    /* each dropped record was handed over once, intact */
    ck_assert_uint_eq(ndropped, 12);
    ck_assert_uint_eq(dropped_bad, 0);
}
END_TEST

/* What a writer does not store, a copy derives: the communicator's id, rank
 * and size from its registry record (a split child's once known), the bytes
 * from count and type, the CLOCK_REALTIME enqueue time from the monotonic one. */
NG_TEST(copy_derives_the_rest)
{
    ck_assert_int_eq(ncclguard_flight_init(16), 0);
    struct ng_comm *c = ncclguard_comm_new(0xabcdefULL, -1, -1, 0x1234ULL, NULL);
    ck_assert_ptr_nonnull(c);
    ncclguard_flight_set_realtime_offset(1000000);
    struct ng_op_record r = make(1), out;
    r.comm_slot = c->slot;
    r.dtype = ncclBfloat16;
    uint64_t i = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    ck_assert_int_eq(ncclguard_flight_copy(i, &out), 0);
    ck_assert_uint_eq(out.comm_id, 0xabcdefULL);
    ck_assert_int_eq(out.comm_rank, -1);
    ck_assert_uint_eq(out.bytes, r.count * 2);
    ck_assert_int_eq(out.enqueue_ns, r.enqueue_mono_ns + 1000000);
    ng_atomic_store_relaxed(&c->rank, 3); /* the watchdog learnt them */
    ng_atomic_store_relaxed(&c->nranks, 8);
    ck_assert_int_eq(ncclguard_flight_copy(i, &out), 0);
    ck_assert_int_eq(out.comm_rank, 3);
    ck_assert_int_eq(out.comm_nranks, 8);
    r.comm_slot = -1; /* no communicator */
    r.dtype = 99;     /* a type this header lacks: 8 bytes */
    i = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    ck_assert_int_eq(ncclguard_flight_copy(i, &out), 0);
    ck_assert_uint_eq(out.comm_id, 0);
    ck_assert_int_eq(out.comm_nranks, -1);
    ck_assert_uint_eq(out.bytes, r.count * 8);
}
END_TEST

/* A record without CUDA events is dropped (and counted) without the callback. */
NG_TEST(drop_without_events)
{
    ck_assert_int_eq(ncclguard_flight_init(16), 0);
    ncclguard_flight_on_drop(count_drop);
    for (uint64_t v = 1; v <= 32; v++) {
        struct ng_op_record r = make(v);
        if (v <= 8) r.marker = NG_NO_MARKER;
        if (v <= 4) r.group_id = v; /* a share of a group's events */
        ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    }
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    ck_assert_uint_eq(st.dropped_inflight, 16);
    ck_assert_uint_eq(ndropped, 12); /* all but v = 5..8 */
}
END_TEST

NG_TEST(advance_is_compare_and_swap)
{
    ck_assert_int_eq(ncclguard_flight_init(16), 0);
    struct ng_op_record r = make(1);
    r.flags = 0; /* the flags below are then the watchdog's alone */
    uint64_t i = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    ck_assert_int_eq(ncclguard_flight_advance(i, NG_OP_STARTED, NG_OP_COMPLETED), -1);
    ck_assert_int_eq(ncclguard_flight_advance(i, NG_OP_SCHEDULED, NG_OP_STARTED), 0);
    ck_assert_int_eq(ncclguard_flight_state(i), NG_OP_STARTED);
    ncclguard_flight_watch(i, NG_WATCHER_OBSERVER, NG_WATCH_GPU_START, 1234);
    ncclguard_flight_watch(i, NG_WATCHER_OBSERVER, NG_WATCH_FLAGS, NG_REC_SLOW | NG_REC_FIRST);
    ncclguard_flight_watch(i, NG_WATCHER_ENFORCER, NG_WATCH_FLAGS, NG_REC_TIMEOUT);
    struct ng_op_record out;
    ck_assert_int_eq(ncclguard_flight_copy(i, &out), 0);
    ck_assert_int_eq(out.gpu_start_ns, 1234);
    ck_assert_uint_eq(out.flags, NG_REC_SLOW | NG_REC_TIMEOUT); /* its own flags only */
    /* overwrite the slot: updates for the old index must not land */
    for (int k = 0; k < 16; k++) ncclguard_flight_append(&r, NG_OP_COMPLETED);
    ck_assert_int_eq(ncclguard_flight_advance(i, NG_OP_STARTED, NG_OP_COMPLETED), -1);
    ncclguard_flight_watch(i, NG_WATCHER_OBSERVER, NG_WATCH_GPU_START, 99);
    ncclguard_flight_watch(i, NG_WATCHER_ENFORCER, NG_WATCH_FLAGS, NG_REC_DUMPED);
    ck_assert_int_eq(ncclguard_flight_copy(i + 16, &out), 0);
    ck_assert_int_eq(out.gpu_start_ns, 0);
    ck_assert_uint_eq(out.flags, 0);
}
END_TEST

/* The end of a deferral is tagged with its record: it clears NG_REC_DEFERRED in
 * copies of that record, and never in the next record of the slot. */
NG_TEST(deferral_end_belongs_to_its_record)
{
    ck_assert_int_eq(ncclguard_flight_init(16), 0);
    struct ng_op_record r = make(1);
    r.flags = NG_REC_DEFERRED;
    uint64_t i = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    struct ng_op_record out;
    ck_assert_int_eq(ncclguard_flight_copy(i, &out), 0);
    ck_assert_uint_eq(out.flags, NG_REC_DEFERRED);
    ncclguard_flight_end_deferred(i);
    ck_assert_int_eq(ncclguard_flight_copy(i, &out), 0);
    ck_assert_uint_eq(out.flags, 0);
    for (int k = 0; k < 16; k++) ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    ck_assert_int_eq(ncclguard_flight_copy(i + 16, &out), 0);
    ck_assert_uint_eq(out.flags, NG_REC_DEFERRED);
}
END_TEST

/* The watchdog's race: it copies a record, then stores what it learnt while
 * writers lap the ring. A value meant for record j must only ever show in
 * record j (seen_end_ns = 7 j + 1 here), never in a later record of its slot. */
#define LAPPERS 3
#define LAPS_PER_WRITER 1000000
static ng_atomic(int) race_stop;
static ng_atomic(uint64_t) race_wrong, race_checked;
#define CHECKS_WANTED 300000

static void *lapper(void *arg)
{
    (void)arg;
    struct ng_op_record r = make(1);
    /* On to the checker's first CHECKS_WANTED checks, however late it was
     * scheduled (up to 20 times the laps). */
    for (int k = 0; k < 20 * LAPS_PER_WRITER; k++) {
        if (k >= LAPS_PER_WRITER && ng_atomic_load_relaxed(&race_checked) >= CHECKS_WANTED) break;
        ncclguard_flight_append(&r, NG_OP_SCHEDULED);
    }
    return NULL;
}

static void *racing_watchdog(void *arg)
{
    (void)arg;
    while (!ng_atomic_load_acquire(&race_stop)) {
        uint64_t h = ncclguard_flight_head();
        for (uint64_t j = h > 8 ? h - 8 : 0; j < h; j++) {
            struct ng_op_record out;
            if (ncclguard_flight_copy(j, &out) != 0) continue;
            ncclguard_flight_watch(j, NG_WATCHER_OBSERVER, NG_WATCH_SEEN_END, 7 * j + 1);
            /* and, for one slot in four, late of the record a lap before, as the
             * observer can learn of an op after its slot was reused: the part is
             * retagged under copies of record j */
            if (j >= 16 && j % 4 == 0)
                ncclguard_flight_watch(j - 16, NG_WATCHER_OBSERVER, NG_WATCH_SEEN_END,
                                       7 * (j - 16) + 1);
        }
    }
    return NULL;
}

static void *race_checker(void *arg)
{
    (void)arg;
    while (!ng_atomic_load_acquire(&race_stop)) {
        uint64_t h = ncclguard_flight_head();
        for (uint64_t j = h > 16 ? h - 16 : 0; j < h; j++) {
            struct ng_op_record out;
            if (ncclguard_flight_copy(j, &out) != 0 || !out.seen_end_ns) continue;
            ng_atomic_add_relaxed(&race_checked, 1);
            if ((uint64_t)out.seen_end_ns != 7 * j + 1) ng_atomic_add_relaxed(&race_wrong, 1);
        }
    }
    return NULL;
}

NG_TEST(watchdog_values_never_reach_a_newer_record)
{
    ck_assert_int_eq(ncclguard_flight_init(16), 0);
    pthread_t w[LAPPERS], wd, ck;
    pthread_create(&wd, NULL, racing_watchdog, NULL);
    pthread_create(&ck, NULL, race_checker, NULL);
    for (int k = 0; k < LAPPERS; k++) pthread_create(&w[k], NULL, lapper, NULL);
    for (int k = 0; k < LAPPERS; k++) pthread_join(w[k], NULL);
    ng_atomic_store_release(&race_stop, 1);
    pthread_join(wd, NULL);
    pthread_join(ck, NULL);
    ck_assert_uint_gt(race_checked, 0);
    ck_assert_uint_eq(race_wrong, 0);
}
END_TEST

#define WRITERS 4
#define PER_WRITER 20000
#define RING 256
/* A writer preempted between its claim and its stores while the others went a
 * whole lap writes its older record over a newer one of its slot (flight.h):
 * that slot then holds no record of the last lap, or, when both wrote at once,
 * one whose words are both records' under the newer one's version. Each such
 * append ends with the head more than a lap past its index; the writers count
 * those, and the checks below allow no more anomalies than that (none on an
 * idle machine, a few under ThreadSanitizer on a loaded one). */
static ng_atomic(uint64_t) lapped_appends;

static void *writer(void *arg)
{
    uint64_t base = (uint64_t)(uintptr_t)arg * PER_WRITER;
    for (uint64_t k = 1; k <= PER_WRITER; k++) {
        struct ng_op_record r = make(base + k);
        uint64_t i = ncclguard_flight_append(&r, NG_OP_SCHEDULED);
        if (ncclguard_flight_head() - i > RING) ng_atomic_add_relaxed(&lapped_appends, 1);
    }
    return NULL;
}

static ng_atomic(uint64_t) nadvanced; /* records the reader moved to completed */

/* Reads the newest records (torn copies? each torn index counts once), and
 * finishes the oldest ones, which the writers are about to overwrite (one
 * owner?). */
static uint64_t torn;
static unsigned char torn_seen[WRITERS * PER_WRITER];
static void *reader(void *arg)
{
    ng_atomic(int) *stop = arg;
    while (!ng_atomic_load_acquire(stop)) {
        uint64_t h = ncclguard_flight_head();
        for (uint64_t i = h > 64 ? h - 64 : 0; i < h; i++) {
            struct ng_op_record out;
            if (ncclguard_flight_copy(i, &out) == 0 && !consistent(&out) && !torn_seen[i]) {
                torn_seen[i] = 1;
                torn++;
            }
        }
        for (uint64_t i = h > RING ? h - RING : 0; i < h && i < h - RING + 16; i++)
            if (ncclguard_flight_advance(i, NG_OP_SCHEDULED, NG_OP_COMPLETED) == 0)
                ng_atomic_add_relaxed(&nadvanced, 1);
    }
    return NULL;
}

NG_TEST(concurrent_writers_and_reader)
{
    ck_assert_int_eq(ncclguard_flight_init(RING), 0);
    ncclguard_flight_on_drop(count_drop);
    pthread_t w[WRITERS], rd;
    ng_atomic(int) stop = 0;
    pthread_create(&rd, NULL, reader, &stop);
    for (uintptr_t k = 0; k < WRITERS; k++) pthread_create(&w[k], NULL, writer, (void *)k);
    for (int k = 0; k < WRITERS; k++) pthread_join(w[k], NULL);
    ng_atomic_store_release(&stop, 1);
    pthread_join(rd, NULL);
    uint64_t laps = lapped_appends;
    ck_assert_uint_le(torn, laps);
    struct ng_flight_stats st;
    ncclguard_flight_stats(&st);
    ck_assert_uint_eq(st.recorded, WRITERS * PER_WRITER);
    ck_assert_uint_eq(st.overwritten, WRITERS * PER_WRITER - RING);
    /* Every surviving record is intact and its index is unique, but for a
     * lapped writer's slot (above): each writer leaves one in the last lap at
     * most (its next append claims an index past the lap that overwrote it). */
    int found = 0, anomalies = 0;
    uint64_t unfinished = 0;
    for (uint64_t i = st.recorded - RING; i < st.recorded; i++) {
        struct ng_op_record out;
        if (ncclguard_flight_copy(i, &out) != 0 || !consistent(&out)) {
            anomalies++;
            continue;
        }
        unfinished += ng_record_state(&out) == NG_OP_SCHEDULED;
        found++;
    }
    ck_assert_int_le(anomalies, WRITERS);
    ck_assert_uint_le((uint64_t)anomalies, laps);
    ck_assert_int_eq(found + anomalies, RING);
    /* No record was finished twice: the reader advanced it, a writer dropped it,
     * or it is still there. (Fewer is possible here, not in a real job: a
     * lapped writer replaces a record uncounted.) A dropped record is handed to
     * the callback intact, or not at all. */
    ck_assert_uint_le(nadvanced + st.dropped_inflight + unfinished, WRITERS * PER_WRITER);
    ck_assert_uint_le(ndropped, st.dropped_inflight);
    /* The same lapped writer can also mix its payload into the copy of a record
     * being dropped from its slot (flight.h). */
    ck_assert_uint_le(dropped_bad, WRITERS);
    ck_assert_uint_le(dropped_bad, laps);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("flight", "ring", 120, ng_check_tests(), NULL));
}

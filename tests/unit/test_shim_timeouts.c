/*
 * test_shim_timeouts.c: the enforcer's agenda (shim/watch/due.c and its use in
 * watchdog.c) finds every op past its timeout at the first poll after it, in
 * whatever order the ops sit in the ring: a younger op with a shorter timeout
 * behind an older one (the first-op timeout, a per-size timeout), ops of two
 * communicators on one stream, an op that ages past its timeout between polls;
 * ops without a marker never time out; an op's own timeout (AllReduce's, op 0, too)
 * replaces the general one. Between passes the enforcer sleeps
 * until something can be due, never past an op appended meanwhile. Records
 * are appended to the flight recorder by hand with their enqueue time in the
 * past; the watchdog's threads are not started (each poll is one
 * ncclguard_watchdog_poll_once; the dump thread is, where a test says so).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "check_main.h"
#include "policy/config.h"
#include "policy/config_load.h"
#include "track/flight.h"
#include "track/groups.h"
#include "track/track.h"
#include "watch/due.h"
#include "watch/dumper.h"
#include "watch/watchdog.h"

#define S 1000000000LL

extern char **environ;

static void load_timeout(const char *timeout, const char *floor_bandwidth)
{
    setenv("NCCLGUARD_TIMEOUT", timeout, 1);
    setenv("NCCLGUARD_FIRST_TIMEOUT", "600", 1);
    setenv("NCCLGUARD_DUMP_AT", "0", 1);
    setenv("NCCLGUARD_LOG_LEVEL", "error", 1);
    if (floor_bandwidth) setenv("NCCLGUARD_FLOOR_BANDWIDTH", floor_bandwidth, 1);
    struct ng_config_paths none = {.site = "", .user = "", .job = ""};
    ncclguard_config_load(&none, environ, 0);
    ncclguard_track_mode = NG_TRACK_OFF; /* the observer leaves the records alone */
    ck_assert_int_eq(ncclguard_flight_init(1024), 0);
}

/* load_timeout(timeout) with the observer polling every 10 ms and no init timeout, then the
 * dumper started (else the enforcer ticks its checks), checked. */
static void start_enforcer(const char *timeout)
{
    setenv("NCCLGUARD_POLL_MS", "10", 1);
    setenv("NCCLGUARD_INIT_TIMEOUT", "0", 1);
    load_timeout(timeout, NULL);
    ck_assert_int_eq(ncclguard_dumper_start(), 0);
}

static void load(const char *floor_bandwidth)
{
    load_timeout("1", floor_bandwidth);
}

/* Appends an op of `type` enqueued `age_ns` ago on `stream`; returns its index. */
static uint64_t typed_op(int type, int comm, uint64_t stream, int64_t age_ns, uint64_t bytes,
                         int first, int marker)
{
    struct ng_op_record r;
    memset(&r, 0, sizeof r);
    r.stream = stream;
    r.op = type;
    r.count = bytes;
    r.dtype = ncclInt8;
    r.comm_slot = comm;
    r.peer = -1;
    r.marker = marker ? 1 : NG_NO_MARKER;
    r.flags = first ? NG_REC_FIRST : 0;
    r.enqueue_mono_ns = ng_clock_ns(CLOCK_MONOTONIC) - age_ns;
    return ncclguard_flight_append(&r, NG_OP_SCHEDULED);
}

/* An AllReduce enqueued `age_ns` ago on `stream`. */
static uint64_t op(int comm, uint64_t stream, int64_t age_ns, uint64_t bytes, int first, int marker)
{
    return typed_op(NG_OP_ALLREDUCE, comm, stream, age_ns, bytes, first, marker);
}

static int timed_out(uint64_t index)
{
    struct ng_op_record r;
    ck_assert_int_eq(ncclguard_flight_copy(index, &r), 0);
    return (r.flags & NG_REC_TIMEOUT) != 0;
}

NG_TEST(younger_first_timeout_behind_older)
{
    load(NULL);
    uint64_t first = op(1, 7, 5 * S, 8, 1, 1);  /* 5 s of 600 */
    uint64_t second = op(1, 7, 3 * S, 8, 0, 1); /* 3 s of 1, behind it */
    uint64_t other = op(2, 7, 2 * S, 8, 0, 1);  /* another comm, same stream */
    uint64_t bare = op(2, 7, 2 * S, 8, 0, 0);   /* no marker: never */
    uint64_t fresh = op(1, 8, 0, 8, 0, 1);      /* not yet */
    ncclguard_watchdog_poll_once();
    ck_assert(!timed_out(first));
    ck_assert(timed_out(second));
    ck_assert(timed_out(other));
    ck_assert(!timed_out(bare));
    ck_assert(!timed_out(fresh));
    /* it ages past its timeout between polls: the next poll after finds it */
    struct timespec ts = {1, 100000000};
    nanosleep(&ts, NULL);
    ncclguard_watchdog_poll_once();
    ck_assert(timed_out(fresh));
    ck_assert(!timed_out(first));
    ck_assert(!timed_out(bare));
}
END_TEST

NG_TEST(size_scaled_timeouts)
{
    load("1000000000");                                   /* 1 GB/s: 1 s more per GB */
    uint64_t big = op(1, 7, 4 * S, 10000000000ULL, 0, 1); /* 4 s of 1 + 10 */
    uint64_t small = op(1, 7, 2 * S, 8, 0, 1);            /* 2 s of 1, younger */
    ncclguard_watchdog_poll_once();
    ck_assert(!timed_out(big));
    ck_assert(timed_out(small));
}
END_TEST

/* An op's own timeout is the one the enforcer applies, AllReduce's (op 0) too: with
 * timeout 600 s and timeout_allreduce 1 s, an AllReduce 2 s in flight times out and a
 * Broadcast as old does not; with timeout_broadcast instead, the other way round. */
static void own_timeout_applies(const char *var, int allreduce_times_out)
{
    setenv(var, "1", 1);
    load_timeout("600", NULL);
    uint64_t ar = typed_op(NG_OP_ALLREDUCE, 1, 7, 2 * S, 8, 0, 1);
    uint64_t bc = typed_op(NG_OP_BROADCAST, 1, 8, 2 * S, 8, 0, 1);
    ncclguard_watchdog_poll_once();
    ck_assert_int_eq(timed_out(ar), allreduce_times_out);
    ck_assert_int_eq(timed_out(bc), !allreduce_times_out);
}

NG_TEST(own_timeout_of_allreduce_applies)
{
    own_timeout_applies("NCCLGUARD_TIMEOUT_ALLREDUCE", 1);
}
END_TEST

NG_TEST(own_timeout_of_broadcast_applies)
{
    own_timeout_applies("NCCLGUARD_TIMEOUT_BROADCAST", 0);
}
END_TEST

NG_TEST(agenda_order)
{
    ck_assert_int_eq(ncclguard_due_init(64), 0);
    ncclguard_due_clear();
    int64_t at[] = {50, 10, 40, 10, 30, 20, 60, 5};
    for (int i = 0; i < 8; i++) ck_assert_int_eq(ncclguard_due_push(at[i], (uint64_t)i), 0);
    struct ng_due d, prev = {-1, 0};
    int n = 0;
    while (ncclguard_due_peek(&d)) {
        ck_assert(d.at_ns > prev.at_ns || (d.at_ns == prev.at_ns && d.index > prev.index));
        prev = d;
        ncclguard_due_pop();
        n++;
    }
    ck_assert_int_eq(n, 8);
}
END_TEST

static struct ng_enforcer_schedule schedule(void)
{
    struct ng_enforcer_schedule e;
    ncclguard_watchdog_enforcer_schedule(&e);
    return e;
}

/* Nothing can fall due for a long while: the enforcer sleeps a second after a
 * pass that took ops (they may go on coming), until the observer's heartbeat
 * can be late (5 s) after one that took none: not one period. */
NG_TEST(idle_enforcer_sleeps_long)
{
    start_enforcer("600");
    op(1, 7, 0, 8, 0, 1); /* due in 600 s */
    ncclguard_watchdog_poll_once();
    struct ng_enforcer_schedule e = schedule();
    ck_assert_int_eq(e.passes, 1);
    ck_assert_int_eq(e.next_ns - e.last_ns, S);
    ncclguard_watchdog_poll_once();
    e = schedule();
    ck_assert_int_eq(e.next_ns - e.last_ns, 5 * S);
    ck_assert_int_eq(e.resting, 0); /* an op in flight: no need to be woken for one */
}
END_TEST

/* A sleep never runs past the step of an op appended while it lasts (its
 * enqueue comes after the pass), nor past the agenda's next step. */
NG_TEST(op_appended_during_sleep_is_due_no_sooner)
{
    start_enforcer("0.3");
    ncclguard_watchdog_poll_once(); /* nothing in flight */
    struct ng_enforcer_schedule e = schedule();
    uint64_t late = op(1, 7, 0, 8, 0, 1);
    struct ng_op_record r;
    ck_assert_int_eq(ncclguard_flight_copy(late, &r), 0);
    ck_assert_int_le(e.next_ns, r.enqueue_mono_ns + 300000000);
    ck_assert_int_ge(e.next_ns - e.last_ns, 10000000); /* a period at least */
    /* in the agenda now: the next pass is within a period of its step, not a
     * second later */
    uint64_t soon = op(1, 8, 250000000, 8, 0, 1); /* due in 50 ms */
    ncclguard_watchdog_poll_once();
    e = schedule();
    ck_assert_int_eq(ncclguard_flight_copy(soon, &r), 0);
    ck_assert_int_le(e.next_ns, r.enqueue_mono_ns + 300000000 + 10000000);
    ck_assert_int_ge(e.next_ns - e.last_ns, 10000000);
    /* and when it comes, the op is found */
    struct timespec ts = {0, 0};
    int64_t left = e.next_ns - ng_clock_ns(CLOCK_MONOTONIC);
    if (left > 0) ts.tv_nsec = (long)left;
    nanosleep(&ts, NULL);
    ncclguard_watchdog_poll_once();
    ck_assert(timed_out(soon));
}
END_TEST

/* With nothing in flight the enforcer rests: it is woken by the observer's
 * pass that finds ops appended, once, not at every pass; the observer sleeps
 * a second while nothing is in flight, a period otherwise. The wake-ups are
 * counted, not timed. */
NG_TEST(enforcer_rests_until_ops_arrive)
{
    start_enforcer("600");
    ncclguard_watchdog_poll_once();
    struct timespec second = {1, 100000000}; /* the observer rests after a second idle */
    nanosleep(&second, NULL);
    for (int i = 0; i < 2; i++) ncclguard_watchdog_poll_once();
    struct ng_enforcer_schedule e = schedule();
    ck_assert_int_eq(e.resting, 1);
    ck_assert_int_eq(e.kicks, 0);
    ck_assert_int_eq(e.next_ns - e.last_ns, 5 * S);
    struct ng_watchdog_stats w;
    ncclguard_watchdog_stats(&w);
    ck_assert_int_eq(w.observer_sleep_ms, 1000);
    op(1, 7, 0, 8, 0, 1);
    ncclguard_watchdog_poll_once(); /* the observer finds it, then the enforcer takes it */
    e = schedule();
    ck_assert_int_eq(e.kicks, 1);
    ck_assert_int_eq(e.resting, 0);
    ncclguard_watchdog_stats(&w);
    ck_assert_int_eq(w.observer_sleep_ms, 10);
    op(1, 7, 0, 8, 0, 1);
    ncclguard_watchdog_poll_once(); /* not at rest: no wake-up */
    ck_assert_int_eq(schedule().kicks, 1);
}
END_TEST

/* At rest the observer sleeps a second, unless a burst as dense as the densest
 * it saw between two passes (in a period) would fill half the ring meanwhile:
 * then as long as that takes, a period at least (ring of 1024, period 10 ms). */
NG_TEST(observer_rest_after_a_burst)
{
    start_enforcer("600");
    struct ng_watchdog_stats w;
    struct timespec second = {1, 100000000}; /* the observer rests after a second idle */
    ncclguard_watchdog_poll_once();
    nanosleep(&second, NULL);
    ncclguard_watchdog_poll_once();
    ncclguard_watchdog_stats(&w);
    ck_assert_int_eq(w.observer_sleep_ms, 1000);
    for (int i = 0; i < 100; i++) op(1, 7, 0, 8, 0, 1);
    ncclguard_watchdog_poll_once();
    ncclguard_watchdog_poll_once();
    ncclguard_watchdog_stats(&w);
    ck_assert_int_eq(w.observer_sleep_ms, 10); /* idle, but not for a second yet */
    nanosleep(&second, NULL);
    ncclguard_watchdog_poll_once();
    ncclguard_watchdog_stats(&w);
    ck_assert_int_eq(w.observer_sleep_ms, 10 * 1024 / 200); /* 100 a period: 512 in 51 ms */
    for (int i = 0; i < 600; i++) op(1, 7, 0, 8, 0, 1);
    ncclguard_watchdog_poll_once();
    ncclguard_watchdog_poll_once();
    nanosleep(&second, NULL);
    ncclguard_watchdog_poll_once();
    ncclguard_watchdog_stats(&w);
    ck_assert_int_eq(w.observer_sleep_ms, 10); /* 512 in less than a period: one period */
}
END_TEST

/* With no timeout, ops never enter the agenda: the enforcer still does not rest
 * after a pass that took ops, so that ops flowing wake it once, not at every
 * pass of the observer; once a pass finds none, it rests again. */
NG_TEST(enforcer_not_woken_while_ops_flow)
{
    start_enforcer("0");
    ncclguard_watchdog_poll_once();
    ck_assert_int_eq(schedule().resting, 1);
    for (int i = 0; i < 3; i++) {
        op(1, 7, 0, 8, 0, 1);
        ncclguard_watchdog_poll_once();
        ck_assert_int_eq(schedule().kicks, 1);
        ck_assert_int_eq(schedule().resting, 0);
    }
    ncclguard_watchdog_poll_once();
    ck_assert_int_eq(schedule().resting, 1);
    op(1, 7, 0, 8, 0, 1);
    ncclguard_watchdog_poll_once();
    ck_assert_int_eq(schedule().kicks, 2);
}
END_TEST

/* A group's op enqueued `age_ns` ago on `stream` in group `group`, without a
 * marker of its own, with `flags` (NG_REC_FOLLOWS and a place). */
static uint64_t group_op(uint64_t stream, uint64_t group, int64_t age_ns, uint64_t flags)
{
    uint64_t index = op(1, stream, age_ns, 8, 0, 0);
    struct ng_op_record r;
    ck_assert_int_eq(ncclguard_flight_copy(index, &r), 0);
    r.group_id = group;
    r.flags |= flags;
    return ncclguard_flight_append(&r, NG_OP_SCHEDULED);
}

/* A group's op without a marker of its own times out only while a marker of
 * its group tells (or, before its ncclGroupEnd, can tell) its progress: its
 * stream's, or that of the place it follows (the 17th stream of a group, the
 * legacy stream during a capture). Not when its stream, or that place, got no
 * marker at ncclGroupEnd (the pool was empty): it is untracked, even before the
 * observer, which may be stuck in a CUDA call, has said so. */
NG_TEST(markerless_group_ops_time_out_only_when_followed)
{
    load(NULL);
    ncclguard_groups_init(1024);
    const uint64_t follows = NG_REC_FOLLOWS | 0ull << NG_REC_PLACE_SHIFT;
    ncclguard_group_publish(6, 0, 7, 3, 2);
    ncclguard_group_publish(8, 0, 7, NG_GROUP_UNTRACKED, 2);
    uint64_t not_ended = group_op(7, 5, 3 * S, 0);
    uint64_t marked = group_op(7, 6, 3 * S, 0), behind_marked = group_op(9, 6, 3 * S, follows);
    uint64_t bare = group_op(7, 8, 3 * S, 0), behind_bare = group_op(9, 8, 3 * S, follows);
    ncclguard_watchdog_poll_once();
    ck_assert(timed_out(not_ended));
    ck_assert(timed_out(marked));
    ck_assert(timed_out(behind_marked));
    ck_assert(!timed_out(bare));
    ck_assert(!timed_out(behind_bare));
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("timeouts", "timeouts", 60, ng_check_tests(), NULL));
}

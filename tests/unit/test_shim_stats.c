/*
 * test_shim_stats.c: the duration statistics behind the slow-op rule
 * (shim/watch/stats.c): warm-up, the median's accuracy, classes kept apart,
 * ageing that follows a drift, and durations outside the histogram's range.
 */
#include <check.h>

#include "check_main.h"
#include <stdint.h>

#include "base/ops.h"
#include "watch/stats.h"

#define MS 1000000LL

static int64_t observe(int64_t ns)
{
    return ncclguard_stats_observe(0x1234, NG_OP_ALLREDUCE, 4096, ns, 0, 0).median;
}

static int64_t observe_in(uint64_t comm, int op, uint64_t bytes, int64_t ns)
{
    return ncclguard_stats_observe(comm, op, bytes, ns, 0, 0).median;
}

static int near(int64_t got, int64_t want, double tolerance)
{
    double d = (double)got - (double)want;
    return (d < 0 ? -d : d) <= tolerance * (double)want;
}

NG_TEST(warm_up_then_the_median)
{
    ncclguard_stats_reset();
    for (int i = 0; i < 32; i++) ck_assert_int_eq(observe((1 + i % 3) * MS), 0);
    int64_t m = observe(2 * MS); /* 1,2,3,1,2,3,... ms: the median is 2 ms */
    ck_assert_msg(near(m, 2 * MS, 0.1), "median %lld", (long long)m);
}
END_TEST

NG_TEST(median_of_a_spread)
{
    ncclguard_stats_reset();
    int64_t m = 0;
    for (int i = 0; i < 200; i++) m = observe(MS + (i * 7919 % 2000) * 1000); /* 1..3 ms */
    ck_assert_msg(near(m, 2 * MS, 0.1), "median %lld", (long long)m);
}
END_TEST

NG_TEST(classes_are_kept_apart)
{
    ncclguard_stats_reset();
    for (int i = 0; i < 50; i++) {
        observe_in(1, NG_OP_ALLREDUCE, 4096, MS);
        observe_in(2, NG_OP_ALLREDUCE, 4096, 50 * MS);     /* other comm */
        observe_in(1, NG_OP_ALLGATHER, 4096, 20 * MS);     /* other op */
        observe_in(1, NG_OP_ALLREDUCE, 1 << 30, 300 * MS); /* other size */
    }
    ck_assert(near(observe_in(1, NG_OP_ALLREDUCE, 4096, MS), MS, 0.1));
    ck_assert(near(observe_in(2, NG_OP_ALLREDUCE, 4096, MS), 50 * MS, 0.1));
    ck_assert(near(observe_in(1, NG_OP_ALLGATHER, 4096, MS), 20 * MS, 0.1));
    ck_assert(near(observe_in(1, NG_OP_ALLREDUCE, 1 << 30, MS), 300 * MS, 0.1));
    /* the same size class: 4096 and 5000 bytes are compared */
    ck_assert(near(observe_in(1, NG_OP_ALLREDUCE, 5000, MS), MS, 0.1));
}
END_TEST

NG_TEST(ageing_follows_a_drift)
{
    ncclguard_stats_reset();
    for (int i = 0; i < 500; i++) observe(MS);
    int64_t m = 0;
    for (int i = 0; i < 200; i++) m = observe(10 * MS);
    ck_assert_msg(near(m, 10 * MS, 0.1), "after the drift: %lld", (long long)m);
}
END_TEST

NG_TEST(durations_out_of_range)
{
    ncclguard_stats_reset();
    for (int i = 0; i < 40; i++) observe(i % 2 ? 0 : INT64_MAX);
    int64_t m = observe(1);
    ck_assert_int_gt(m, 0); /* clamped into the histogram, no crash */
}
END_TEST

/* The relative rule: one long op among fast ones (a peer that paused once) is not
 * slow; a class that stays over factor x median is, from its sixth sample over. */
NG_TEST(slow_only_when_persistent)
{
    ncclguard_stats_reset();
    struct ng_sample k;
    for (int i = 0; i < 40; i++) ncclguard_stats_observe(9, NG_OP_ALLREDUCE, 4096, 2 * MS, 10, MS);
    for (int round = 0; round < 5; round++) { /* a 40 ms wait every eighth sample */
        k = ncclguard_stats_observe(9, NG_OP_ALLREDUCE, 4096, 40 * MS, 10, MS);
        ck_assert_int_eq(k.persistent, 0);
        ck_assert(near(k.median, 2 * MS, 0.1));
        for (int i = 0; i < 7; i++)
            ncclguard_stats_observe(9, NG_OP_ALLREDUCE, 4096, 2 * MS, 10, MS);
    }
    int reported = 0;
    for (int i = 0; i < 6; i++) /* now every op of the class takes 40 ms */
        reported += ncclguard_stats_observe(9, NG_OP_ALLREDUCE, 4096, 40 * MS, 10, MS).persistent;
    ck_assert_int_ge(reported, 1); /* from the sixth over in a row */
    k = ncclguard_stats_observe(9, NG_OP_ALLREDUCE, 4096, 40 * MS, 0, MS); /* factor off */
    ck_assert_int_eq(k.persistent, 0);
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("stats", "stats", 0, ng_check_tests(), NULL));
}

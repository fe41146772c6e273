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
    return ncclguard_stats_observe(0x1234, NG_OP_ALLREDUCE, 4096, ns);
}

static int near(int64_t got, int64_t want, double tolerance)
{
    double d = (double)got - (double)want;
    return (d < 0 ? -d : d) <= tolerance * (double)want;
}

START_TEST(warm_up_then_the_median)
{
    ncclguard_stats_reset();
    for (int i = 0; i < 8; i++) ck_assert_int_eq(observe((1 + i % 3) * MS), 0);
    int64_t m = observe(2 * MS); /* 1,2,3,1,2,3,1,2 ms: the median is 2 ms */
    ck_assert_msg(near(m, 2 * MS, 0.1), "median %lld", (long long)m);
}
END_TEST

START_TEST(median_of_a_spread)
{
    ncclguard_stats_reset();
    int64_t m = 0;
    for (int i = 0; i < 200; i++) m = observe(MS + (i * 7919 % 2000) * 1000); /* 1..3 ms */
    ck_assert_msg(near(m, 2 * MS, 0.1), "median %lld", (long long)m);
}
END_TEST

START_TEST(classes_are_kept_apart)
{
    ncclguard_stats_reset();
    for (int i = 0; i < 50; i++) {
        ncclguard_stats_observe(1, NG_OP_ALLREDUCE, 4096, MS);
        ncclguard_stats_observe(2, NG_OP_ALLREDUCE, 4096, 50 * MS);          /* other comm */
        ncclguard_stats_observe(1, NG_OP_ALLGATHER, 4096, 20 * MS);          /* other op */
        ncclguard_stats_observe(1, NG_OP_ALLREDUCE, 1 << 30, 300 * MS);      /* other size */
    }
    ck_assert(near(ncclguard_stats_observe(1, NG_OP_ALLREDUCE, 4096, MS), MS, 0.1));
    ck_assert(near(ncclguard_stats_observe(2, NG_OP_ALLREDUCE, 4096, MS), 50 * MS, 0.1));
    ck_assert(near(ncclguard_stats_observe(1, NG_OP_ALLGATHER, 4096, MS), 20 * MS, 0.1));
    ck_assert(near(ncclguard_stats_observe(1, NG_OP_ALLREDUCE, 1 << 30, MS), 300 * MS, 0.1));
    /* the same size class: 4096 and 5000 bytes are compared */
    ck_assert(near(ncclguard_stats_observe(1, NG_OP_ALLREDUCE, 5000, MS), MS, 0.1));
}
END_TEST

START_TEST(ageing_follows_a_drift)
{
    ncclguard_stats_reset();
    for (int i = 0; i < 500; i++) observe(MS);
    int64_t m = 0;
    for (int i = 0; i < 200; i++) m = observe(10 * MS);
    ck_assert_msg(near(m, 10 * MS, 0.1), "after the drift: %lld", (long long)m);
}
END_TEST

START_TEST(durations_out_of_range)
{
    ncclguard_stats_reset();
    for (int i = 0; i < 20; i++) observe(i % 2 ? 0 : INT64_MAX);
    int64_t m = observe(1);
    ck_assert_int_gt(m, 0); /* clamped into the histogram, no crash */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stats");
    TCase *t = tcase_create("stats");
    tcase_add_test(t, warm_up_then_the_median);
    tcase_add_test(t, median_of_a_spread);
    tcase_add_test(t, classes_are_kept_apart);
    tcase_add_test(t, ageing_follows_a_drift);
    tcase_add_test(t, durations_out_of_range);
    suite_add_tcase(s, t);
    return ng_check_run(s);
}

/*
 * test_shim_kmarks: the kernel marks of the ops NCCL's profiler plugin reports
 * (track/kmarks.h), polled through the markers' own calls as the observer does:
 * pending until a channel starts, started until every channel stopped, then
 * done with the GPU times; events of an earlier op never land in a later one;
 * a mark is free only once its record is finished and its kernel stopped.
 */
#include <stdint.h>

#include "check_main.h"
#include "track/kmarks.h"
#include "track/markers.h"

static int take(int channels, uint32_t *gen)
{
    int m = ncclguard_kmark_take(channels, gen);
    ck_assert(ng_is_kmark(m));
    return m;
}

NG_TEST(pending_started_done)
{
    uint32_t g;
    int m = take(2, &g);
    int64_t s = -1, e = -1;
    ck_assert_int_eq(ncclguard_marker_poll(m, 1, &s, &e), NG_MARKER_PENDING);
    ck_assert_int_eq(ncclguard_marker_passed(m, 0), 0);
    ncclguard_kmark_start(m, g, 1000);
    ncclguard_kmark_start(m, g, 1500); /* the second channel: the first start stays */
    ck_assert_int_eq(ncclguard_marker_poll(m, 1, &s, &e), NG_MARKER_STARTED);
    ck_assert_int_eq(s, 1000);
    ck_assert_int_eq(ncclguard_marker_passed(m, 0), 1);
    ncclguard_kmark_stop(m, g, 2000);
    ck_assert_int_eq(ncclguard_marker_poll(m, 1, &s, &e), NG_MARKER_STARTED); /* 1 of 2 */
    ck_assert_int_eq(ncclguard_marker_passed(m, 1), 0);
    ncclguard_kmark_stop(m, g, 2500);
    ck_assert_int_eq(ncclguard_marker_poll(m, 1, &s, &e), NG_MARKER_DONE);
    ck_assert_int_eq(s, 1000);
    ck_assert_int_eq(e, 2500);
    ck_assert_int_eq(ncclguard_marker_passed(m, 1), 1);
    ncclguard_marker_release(m);
    ck_assert_int_eq(ncclguard_kmarks_busy(), 0);
}
END_TEST

/* No GPU time (a timer of 0): the host's time at the event stands in for it. */
NG_TEST(no_timer_takes_the_host_time)
{
    uint32_t g;
    int m = take(1, &g);
    ncclguard_kmark_start(m, g, 0);
    ncclguard_kmark_stop(m, g, 0);
    int64_t s = 0, e = 0;
    ck_assert_int_eq(ncclguard_marker_poll(m, 1, &s, &e), NG_MARKER_DONE);
    ck_assert_int_gt(s, 1700000000LL * 1000000000LL);
    ck_assert_int_ge(e, s);
}
END_TEST

/* More events than channels change nothing: a start after the last stop is not a new run. */
NG_TEST(extra_events_are_ignored)
{
    uint32_t g;
    int m = take(1, &g);
    ncclguard_kmark_start(m, g, 10);
    ncclguard_kmark_start(m, g, 20);
    ncclguard_kmark_stop(m, g, 30);
    ncclguard_kmark_stop(m, g, 40);
    int64_t s = 0, e = 0;
    ck_assert_int_eq(ncclguard_marker_poll(m, 1, &s, &e), NG_MARKER_DONE);
    ck_assert_int_eq(s, 10);
    ck_assert_int_eq(e, 30);
}
END_TEST

/* A record finished before its kernel (aborted, dropped) keeps its mark until the
 * kernel stops; then the mark is free, and the old op's events miss the new one. */
NG_TEST(released_mark_waits_for_its_kernel)
{
    uint32_t g;
    int m = take(1, &g);
    ncclguard_kmark_start(m, g, 10);
    ncclguard_marker_release(m);
    ck_assert_int_eq(ncclguard_kmarks_busy(), 1);
    ck_assert_int_eq(ncclguard_marker_poll(m, 1, &(int64_t){0}, &(int64_t){0}), NG_MARKER_STARTED);
    ncclguard_kmark_stop(m, g, 20);
    ck_assert_int_eq(ncclguard_kmarks_busy(), 0);
    ck_assert_int_eq(ncclguard_marker_poll(m, 1, &(int64_t){0}, &(int64_t){0}), NG_MARKER_ERROR);
}
END_TEST

NG_TEST(earlier_ops_events_miss_the_next)
{
    uint32_t g1, g2;
    int m1 = take(1, &g1);
    ncclguard_kmark_start(m1, g1, 10);
    ncclguard_kmark_stop(m1, g1, 20);
    ncclguard_marker_release(m1);
    int m2 = -1;
    for (int i = 0; i < NG_KMARKS && m2 != m1; i++) { /* until the same mark comes again */
        m2 = take(1, &g2);
        if (m2 != m1) ncclguard_marker_release(m2); /* never started: free at once */
    }
    ck_assert_int_eq(m2, m1);
    ck_assert_uint_ne(g2, g1);
    ncclguard_kmark_start(m1, g1, 30); /* late: of the earlier op */
    ncclguard_kmark_stop(m1, g1, 40);
    int64_t s = 0, e = 0;
    ck_assert_int_eq(ncclguard_marker_poll(m2, 1, &s, &e), NG_MARKER_PENDING);
}
END_TEST

/* Every mark taken: the next op gets none (it is recorded untracked). */
NG_TEST(all_taken_gives_none)
{
    uint32_t g;
    for (int i = 0; i < NG_KMARKS; i++) take(1, &g);
    ck_assert_int_eq(ncclguard_kmark_take(1, &g), NG_NO_MARKER);
    ck_assert_int_eq(ncclguard_kmarks_busy(), NG_KMARKS);
}
END_TEST

/* Not a kernel mark: the CUDA markers' range is not this file's. */
NG_TEST(cuda_marker_numbers_are_not_marks)
{
    ck_assert(!ng_is_kmark(0));
    ck_assert(!ng_is_kmark(NG_KMARK_BASE - 1));
    ck_assert(!ng_is_kmark(NG_KMARK_BASE + NG_KMARKS));
    ck_assert(!ng_is_kmark(1 << 30)); /* a timed CUDA marker */
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("kmarks", "marks", 30, ng_check_tests(), NULL));
}

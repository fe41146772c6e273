/*
 * test_shim_stacks: the enqueue-stack table (track/stacks.h): one id per
 * distinct stack, the frames from the caller on, the depth cut, a full table,
 * and threads that capture the same stacks at once.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "check_main.h"
#include "track/stacks.h"
#include "track/unwind.h"

typedef int64_t (*ng_capture_fn)(void);
int64_t stack_sites_path(unsigned path, int levels, ng_capture_fn capture);

static int64_t capture(void)
{
    return ncclguard_stack_capture();
}

/* The ids of the stacks of paths[], captured from one call site (a stack
 * includes the test's own frames: a call from another line is another stack). */
static void capture_paths(const unsigned *paths, int n, int levels, int64_t *ids)
{
    for (int i = 0; i < n; i++) ids[i] = stack_sites_path(paths[i], levels, capture);
}

static void init(int depth)
{
    ncclguard_stacks_init(depth);
    ck_assert_msg(!strcmp(ncclguard_unwind_method(), "libunwind"),
                  "libunwind.so.8 is needed (scripts/install-deps installs libunwind8)");
}

START_TEST(one_id_per_stack)
{
    init(24);
    const unsigned paths[] = {5, 5, 6};
    int64_t ids[3];
    capture_paths(paths, 3, 4, ids);
    int64_t a = ids[0], b = ids[1], c = ids[2];
    ck_assert_int_ge(a, 0);
    ck_assert_int_eq(a, b);
    ck_assert_int_ge(c, 0);
    ck_assert_int_ne(a, c);
    const uint64_t *pcs;
    int n = ncclguard_stack_frames(a, &pcs);
    ck_assert_int_gt(n, 5); /* 5 levels of the library, then the test's callers */
    Dl_info info;
    ck_assert(dladdr((void *)(uintptr_t)pcs[0], &info) && strstr(info.dli_fname, "libstacksites"));
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.used, 2);
    ck_assert_int_eq(st.depth, 24);
    ck_assert_int_eq((int)st.lost, 0);
}
END_TEST

START_TEST(depth_cuts_the_stack)
{
    init(3);
    const uint64_t *pcs;
    ck_assert_int_eq(ncclguard_stack_frames(stack_sites_path(0, 8, capture), &pcs), 3);
}
END_TEST

START_TEST(off_without_depth)
{
    ncclguard_stacks_init(0);
    ck_assert_int_eq(stack_sites_path(0, 2, capture), NG_NO_STACK);
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.depth, 0);
    ck_assert_int_eq(st.capacity, 0);
}
END_TEST

/* 2048 distinct stacks: the first 1024 get ids 0..1023, the others none, and
 * the ones in the table are still found. */
START_TEST(full_table_keeps_what_it_has)
{
    init(24);
    enum { N = 2 * NG_STACKS_MAX + 2 };
    static unsigned paths[N];
    static int64_t ids[N];
    for (unsigned p = 0; p < 2 * NG_STACKS_MAX; p++) paths[p] = p;
    paths[N - 2] = 7;                 /* in the table */
    paths[N - 1] = NG_STACKS_MAX + 1; /* not */
    capture_paths(paths, N, 11, ids);
    for (unsigned p = 0; p < 2 * NG_STACKS_MAX; p++)
        ck_assert_int_eq(ids[p], p < NG_STACKS_MAX ? (int64_t)p : NG_NO_STACK);
    ck_assert_int_eq(ids[N - 2], 7);
    ck_assert_int_eq(ids[N - 1], NG_NO_STACK);
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.used, NG_STACKS_MAX);
    ck_assert_int_eq((int)st.lost, NG_STACKS_MAX + 1);
}
END_TEST

#define PATHS 64
#define ROUNDS 200
static int64_t seen[5][PATHS];

static void *capturer(void *arg)
{
    int64_t *mine = arg;
    for (int round = 0; round < ROUNDS; round++)
        for (unsigned p = 0; p < PATHS; p++) {
            int64_t id = stack_sites_path(p, 6, capture);
            if (id == NG_NO_STACK) continue; /* another thread was adding it */
            if (mine[p] == NG_NO_STACK) mine[p] = id;
            if (mine[p] != id) return (void *)1;
        }
    return NULL;
}

/* Threads that meet the same new stacks at once agree on their ids, and no
 * stack takes two entries; a thread started afterwards finds them all. */
START_TEST(threads_agree)
{
    init(24);
    pthread_t t[5];
    for (int i = 0; i < 5; i++)
        for (int p = 0; p < PATHS; p++) seen[i][p] = NG_NO_STACK;
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, capturer, seen[i]), 0);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.used, PATHS);
    ck_assert_int_eq(pthread_create(&t[4], NULL, capturer, seen[4]), 0);
    pthread_join(t[4], NULL);
    for (int p = 0; p < PATHS; p++) {
        ck_assert_int_ge(seen[4][p], 0);
        for (int i = 0; i < 4; i++)
            ck_assert(seen[i][p] == NG_NO_STACK || seen[i][p] == seen[4][p]);
    }
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.used, PATHS);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {one_id_per_stack, depth_cuts_the_stack, off_without_depth,
                            full_table_keeps_what_it_has, threads_agree, NULL};
    return ng_check_run(ng_check_suite("stacks", "table", 60, tests, NULL));
}

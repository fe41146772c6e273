/*
 * test_shim_stacks: the enqueue-stack table (track/stacks.h): one id per
 * distinct stack, the frames from the caller on, the depth cut, a full table,
 * and threads that capture the same stacks at once; and its cache of call
 * sites, which must give every capture the stack a full unwind gives: two
 * stacks that share their innermost frames, a recursion at several depths, a
 * thread that switches to a stack of its own (swapcontext), a library
 * unloaded and another loaded where it was.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "base/hash.h"
#include "check_main.h"
#include "track/stacks.h"
#include "track/unwind.h"

typedef int64_t (*ng_capture_fn)(void);
int64_t stack_sites_path(unsigned path, int levels, ng_capture_fn capture);
int64_t stack_sites_rec(int d, ng_capture_fn capture);

/* The shim's way: a function of the shim that the job called captures (not
 * as a tail call: the shim's function keeps its frame, as op_pre does). */
__attribute__((noinline)) static int64_t capture(void)
{
    int64_t id = ncclguard_stack_capture(__builtin_return_address(0));
    __asm__ volatile("" ::: "memory");
    return id;
}

/* Captures that disagreed with a full unwind made at the same place. */
static int wrong;

/* capture(), and the same stack unwound in full right after (libunwind): the
 * frames from this function's return address on, cut to the depth. */
__attribute__((noinline)) static int64_t checked(void)
{
    void *ra = __builtin_return_address(0);
    int64_t id = ncclguard_stack_capture(ra);
    void *raw[NG_STACKS_DEPTH_MAX + 16];
    int n = ncclguard_unwind_fast(raw, NG_STACKS_DEPTH_MAX + 16), i = 0;
    while (i < n && raw[i] != ra) i++;
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    int want = n - i < st.depth ? n - i : st.depth;
    const uint64_t *pcs;
    int got = id >= 0 ? ncclguard_stack_frames(id, &pcs) : 0;
    if (got != want)
        wrong++;
    else
        for (int k = 0; k < got; k++)
            if (pcs[k] != (uint64_t)(uintptr_t)raw[i + k]) wrong++;
    return id;
}

static uint64_t unwinds(void)
{
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    return st.unwinds;
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

NG_TEST(one_id_per_stack)
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

NG_TEST(depth_cuts_the_stack)
{
    init(3);
    const uint64_t *pcs;
    ck_assert_int_eq(ncclguard_stack_frames(stack_sites_path(0, 8, capture), &pcs), 3);
}
END_TEST

NG_TEST(off_without_depth)
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
NG_TEST(full_table_keeps_what_it_has)
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

/* Stacks whose hashes all fall in one bucket (by the table's hash, base/hash.h,
 * over its 2 x NG_STACKS_MAX buckets): each gets an entry of its own while the
 * list has room, however long the run of taken buckets it must pass. A bound
 * of 32 probes lost the 33rd, and in a CI run the 998th stack of the test
 * above, as the addresses fell. */
NG_TEST(one_bucket_keeps_every_stack)
{
    init(24);
    enum { N = 100, MASK = 2 * NG_STACKS_MAX - 1 };
    uint64_t pcs[N];
    uint64_t bucket = ng_hash_word(NG_HASH_SEED, 1) & MASK;
    int n = 0;
    for (uint64_t v = 1; n < N; v++)
        if ((ng_hash_word(NG_HASH_SEED, v) & MASK) == bucket) pcs[n++] = v;
    for (int i = 0; i < N; i++) ck_assert_int_eq(ncclguard_stack_intern(&pcs[i], 1), i);
    for (int i = 0; i < N; i++) ck_assert_int_eq(ncclguard_stack_intern(&pcs[i], 1), i);
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.used, N);
    ck_assert_int_eq((int)st.lost, 0);
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
NG_TEST(threads_agree)
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

/* Paths of 3 levels: every pair shares its innermost frames, and the paths
 * that differ in bit 0 differ only in the last of their 7 frames (the
 * outermost level's call in stack_sites_path; site_a and site_b are one
 * function once the compiler folds them): each capture,
 * in any order, has the stack of a full unwind, and most come from the cache. */
NG_TEST(shared_innermost_frames)
{
    init(7);
    for (int round = 0; round < 20; round++)
        for (unsigned p = 0; p < 8; p++) {
            unsigned path = round & 1 ? 7 - p : p;
            stack_sites_path(path, 3, checked);
        }
    ck_assert_int_eq(wrong, 0);
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.used, 8);
    ck_assert_uint_le(st.unwinds, 8 * 2); /* the cache answers all but the first rounds */
}
END_TEST

/* The same call site 1 to 6 calls deep into a recursion: stacks that differ
 * only by one more repetition of the same return address (depth 5: the
 * recursion of 3 and of 4 differ in their last frame only). */
NG_TEST(recursion_depths)
{
    init(5);
    for (int round = 0; round < 20; round++)
        for (int d = 1; d <= 6; d++) stack_sites_rec(round & 1 ? 7 - d : d, checked);
    ck_assert_int_eq(wrong, 0);
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.used, 4); /* d = 4, 5 and 6 fill the 5 frames alike */
    ck_assert_uint_le(st.unwinds, 6 * 2);
}
END_TEST

/* Big frames, so that the stack a switch leaves behind keeps its words. */
__attribute__((noinline)) static int64_t from_main(void)
{
    volatile char big[2048];
    big[0] = 1;
    int64_t r = stack_sites_path(5, 3, checked);
    __asm__ volatile("" ::"r"(big) : "memory");
    return r;
}

__attribute__((noinline)) static int64_t from_fiber(void)
{
    volatile char big[2048];
    big[0] = 2; /* not the body of from_main: the compiler would fold the two */
    int64_t r = stack_sites_path(5, 3, checked);
    __asm__ volatile("" ::"r"(big) : "memory");
    return r;
}

static ucontext_t main_ctx, fiber_ctx;
static int64_t fiber_ids[4];

static void fiber(void)
{
    for (int i = 0; i < 4; i++) {
        fiber_ids[i] = from_fiber();
        swapcontext(&fiber_ctx, &main_ctx);
    }
}

/* A thread that runs the same call site on its own stack and on a stack of
 * its own making, in turn: each has its stack (the site's 7 frames and the
 * function that called it), though the words of the other stay where they
 * were. */
NG_TEST(stack_switch)
{
    init(8);
    size_t size = 256 * 1024;
    char *stack = malloc(size);
    ck_assert_ptr_nonnull(stack);
    ck_assert_int_eq(getcontext(&fiber_ctx), 0);
    fiber_ctx.uc_stack.ss_sp = stack;
    fiber_ctx.uc_stack.ss_size = size;
    fiber_ctx.uc_link = &main_ctx;
    makecontext(&fiber_ctx, fiber, 0);
    int64_t main_ids[4];
    for (int i = 0; i < 4; i++) {
        main_ids[i] = from_main();
        from_main();
        ck_assert_int_eq(swapcontext(&main_ctx, &fiber_ctx), 0);
    }
    ck_assert_int_eq(wrong, 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(main_ids[i], main_ids[0]);
        ck_assert_int_eq(fiber_ids[i], fiber_ids[0]);
    }
    ck_assert_int_ne(main_ids[0], fiber_ids[0]);
    ck_assert_uint_le(unwinds(), 4); /* 8 main and 4 fiber captures: 1 or 2 stacks each */
    free(stack);
}
END_TEST

typedef int64_t (*dl_site_fn)(ng_capture_fn, uint64_t);

/* capture(), not checked(): libunwind's own caches keep the first library's
 * frame layout (its unw_backtrace and unw_step alike): the stack is checked
 * against where via_b is instead. */
__attribute__((noinline)) static int64_t via_a(dl_site_fn f, uint64_t fill)
{
    int64_t r = f(capture, fill);
    __asm__ volatile("" ::: "memory");
    return r;
}

__attribute__((noinline)) static int64_t via_b(dl_site_fn f, uint64_t fill)
{
    int64_t r = f(capture, fill);
    __asm__ volatile("" ::: "memory");
    return r + 0 * (int64_t)fill + (r < -1); /* not via_a's body: it would be folded into it */
}

static void *open_site(const char *name, dl_site_fn *f)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", STACKDL_DIR, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s: %s", path, dlerror());
    *f = (dl_site_fn)dlsym(h, "stack_dl_site");
    ck_assert_ptr_nonnull(*f);
    return h;
}

/* Unloads the library of handle h the way the mode under test says: through
 * the process's dlclose (intercept/loader.c's, linked into this program), or
 * past it, through libc's own, as a library bound to libc would. */
enum unload { THROUGH_WRAPPER, PAST_WRAPPER };
static void unload(void *h, enum unload how)
{
    int (*libc_dlclose)(void *) = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
    ck_assert_ptr_nonnull(libc_dlclose);
    ck_assert_int_eq(how == THROUGH_WRAPPER ? dlclose(h) : libc_dlclose(h), 0);
}

/* A library unloaded, and another loaded at the same address whose call site
 * is at the same address too but whose frame is larger, and filled where the
 * first one's caller's return address was with that same word: the second's
 * stack names its own caller. An unload past the wrapper is seen at the next
 * full unwind (here a capture of another stack, `between`). */
static void reload_case(int watched, enum unload how, int between)
{
    if (watched) ncclguard_stacks_watch_unloads();
    init(2);
    dl_site_fn f1, f2;
    void *h = open_site("libstackdl1.so", &f1);
    int64_t a = 0;
    for (int i = 0; i < 3; i++) a = via_a(f1, 0);
    ck_assert_int_ge(a, 0);
    const uint64_t *pcs;
    ck_assert_int_eq(ncclguard_stack_frames(a, &pcs), 2);
    uint64_t site = pcs[0], caller = pcs[1];
    unload(h, how);
    h = open_site("libstackdl2.so", &f2);
    ck_assert_msg(f1 == f2, "the second library is not where the first was (%p, %p)", (void *)f1,
                  (void *)f2);
    if (between) {
        uint64_t before = unwinds();
        capture();
        ck_assert_uint_eq(unwinds(), before + 1);
    }
    int64_t b = via_b(f2, caller);
    ck_assert_int_ge(b, 0);
    ck_assert_int_eq(ncclguard_stack_frames(b, &pcs), 2);
    ck_assert_msg(pcs[0] == site, "the call site moved: the test proves nothing");
    ck_assert(pcs[1] != caller);
    ck_assert(pcs[1] > (uint64_t)(uintptr_t)via_b && pcs[1] < (uint64_t)(uintptr_t)via_b + 256);
    uint64_t before = unwinds();
    ck_assert_int_eq(via_b(f2, caller), b); /* and from the cache, the same */
    ck_assert_uint_eq(unwinds(), before);
    dlclose(h);
}

/* Not watched (this program's dlclose is not the one the loader's lookups
 * find): the loader's own count, asked at every capture. */
NG_TEST(dl_site_after_reload)
{
    reload_case(0, THROUGH_WRAPPER, 0);
}
END_TEST

/* Watched: the wrapper's count of unloads alone. */
NG_TEST(dl_site_after_reload_watched)
{
    reload_case(1, THROUGH_WRAPPER, 0);
}
END_TEST

NG_TEST(dl_unload_past_wrapper_seen_at_next_unwind)
{
    reload_case(1, PAST_WRAPPER, 1);
}
END_TEST

#define SHARED_PATHS 16
static int64_t shared_ids[4][SHARED_PATHS];

static void *sharer(void *arg)
{
    int64_t *mine = arg;
    for (int round = 0; round < 50; round++)
        for (unsigned p = 0; p < SHARED_PATHS; p++) {
            unsigned path = (p + (unsigned)(mine - shared_ids[0])) % SHARED_PATHS;
            int64_t id = stack_sites_path(path, 4, capture);
            if (id == NG_NO_STACK) continue; /* another thread was adding it */
            if (mine[path] == NG_NO_STACK) mine[path] = id;
            if (mine[path] != id) return (void *)1;
        }
    return NULL;
}

/* Threads that make the sites of the same new stacks at once and use each
 * other's: each path keeps one id, the same in every thread. A library was
 * unloaded first, so that every full unwind is the shim's own walk (libunwind's
 * per-thread cache is freed at thread exit in a way ThreadSanitizer cannot
 * follow: tests/e2e/tsan.sh runs this case). */
START_TEST(threads_share_sites)
{
    init(24);
    dl_site_fn f;
    dlclose(open_site("libstackdl1.so", &f));
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        for (int p = 0; p < SHARED_PATHS; p++) shared_ids[i][p] = NG_NO_STACK;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, sharer, shared_ids[i]), 0);
    for (int i = 0; i < 4; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        ck_assert_ptr_null(rc);
    }
    for (int p = 0; p < SHARED_PATHS; p++)
        for (int i = 1; i < 4; i++) ck_assert_int_eq(shared_ids[i][p], shared_ids[0][p]);
    struct ng_stacks_stats st;
    ncclguard_stacks_stats(&st);
    ck_assert_int_eq(st.used, SHARED_PATHS);
    /* each thread's first capture of a path that has an id makes or finds its site */
    ck_assert_uint_lt(st.unwinds, 4 * SHARED_PATHS * 50);
}
END_TEST

int main(void)
{
    Suite *s = ng_check_suite("stacks", "table", 60, ng_check_tests(), NULL);
    TCase *threads = tcase_create("threads"); /* CK_RUN_CASE=threads under TSan */
    tcase_set_timeout(threads, 120);
    tcase_add_test(threads, threads_share_sites);
    suite_add_tcase(s, threads);
    return ng_check_run(s);
}

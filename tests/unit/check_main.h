/*
 * check_main.h: how every Check program in tests/unit builds and runs its suite, and the
 * temporary directory and files its tests write. Called from main and from the tests (one
 * thread each: Check runs every test in a process of its own).
 */
#ifndef NCCLGUARD_CHECK_MAIN_H
#define NCCLGUARD_CHECK_MAIN_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * NG_TEST(name) ... END_TEST: a test, written as with START_TEST, that adds itself to the
 * program's list before main runs; ng_check_tests() is that list, for ng_check_suite. A test
 * written is a test run, and there is no list to keep. A loop test, or a test of another test
 * case, stays a START_TEST that main adds itself. (START_TEST defines the `name` declared here.)
 */
#define NG_TEST(name)                                              \
    static const TTest *name;                                      \
    __attribute__((constructor)) static void name##_register(void) \
    {                                                              \
        ng_check_register(name);                                   \
    }                                                              \
    START_TEST(name)

/* The most NG_TESTs of one program. */
#define NG_CHECK_TESTS_MAX 256

/* Where NG_TEST adds its tests: NULL-terminated, in the order they are written (the
 * constructors of one file run in the order they are defined). */
static inline const TTest **ng_check_registry(void)
{
    static const TTest *tests[NG_CHECK_TESTS_MAX + 1];
    return tests;
}

/* Appends test to the registry; past NG_CHECK_TESTS_MAX, says so and aborts. */
static inline void ng_check_register(const TTest *test)
{
    const TTest **tests = ng_check_registry();
    size_t n = 0;
    while (tests[n]) n++;
    if (n == NG_CHECK_TESTS_MAX) {
        fprintf(stderr, "check_main.h: more than %d tests; raise NG_CHECK_TESTS_MAX\n",
                NG_CHECK_TESTS_MAX);
        abort();
    }
    tests[n] = test;
}

/* The tests NG_TEST added, NULL-terminated, in the order they are written. */
static inline const TTest *const *ng_check_tests(void)
{
    return ng_check_registry();
}

/*
 * A program's suite: suite `name` of one test case `tcase`, which holds tests (a
 * NULL-terminated list, in the order they run: ng_check_tests(), or a list of START_TEST
 * tests). timeout_s is each test's limit in seconds; 0 keeps Check's default (4 s, or
 * CK_DEFAULT_TIMEOUT). Where tc is not NULL, *tc gets the test case, for a fixture or a loop
 * test (tcase_add_loop_test) on top.
 */
static inline Suite *ng_check_suite(const char *name, const char *tcase, double timeout_s,
                                    const TTest *const tests[], TCase **tc)
{
    Suite *s = suite_create(name);
    TCase *t = tcase_create(tcase);
    if (timeout_s > 0) tcase_set_timeout(t, timeout_s);
    for (size_t i = 0; tests[i]; i++) tcase_add_test(t, tests[i]);
    suite_add_tcase(s, t);
    if (tc) *tc = t;
    return s;
}

/* ng_check_suite of the tests NG_TEST added, each run between setup and teardown (Check's
 * checked fixture, in the test's own process). */
static inline Suite *ng_check_fixture_suite(const char *name, const char *tcase, double timeout_s,
                                            void (*setup)(void), void (*teardown)(void), TCase **tc)
{
    TCase *t;
    Suite *s = ng_check_suite(name, tcase, timeout_s, ng_check_tests(), &t);
    tcase_add_checked_fixture(t, setup, teardown);
    if (tc) *tc = t;
    return s;
}

/* A new empty directory /tmp/ng-<name>-XXXXXX, its path in dir (size bytes), checked. */
static inline void ng_check_tmpdir(char *dir, size_t size, const char *name)
{
    ck_assert_int_lt(snprintf(dir, size, "/tmp/ng-%s-XXXXXX", name), (int)size);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Removes dir and everything in it (rm -rf); true when that succeeded. */
static inline bool ng_check_rmtree(const char *dir)
{
    char cmd[256];
    return snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) < (int)sizeof cmd && system(cmd) == 0;
}

/* Writes text to dir/name (created or emptied first), checked. Returns the path, in one of
 * 8 static slots: the path of the 9th call replaces the first. */
static inline const char *ng_check_write(const char *dir, const char *name, const char *text)
{
    static char paths[8][192];
    static int next;
    char *p = paths[next++ % 8];
    ck_assert_int_lt(snprintf(p, sizeof paths[0], "%s/%s", dir, name), (int)sizeof paths[0]);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

/* Runs one suite (forking per test, Check's default) and returns the exit status. */
static inline int ng_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif

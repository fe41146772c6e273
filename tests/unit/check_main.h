/* check_main.h: how every Check program in tests/unit builds and runs its suite. */
#ifndef NCCLGUARD_CHECK_MAIN_H
#define NCCLGUARD_CHECK_MAIN_H

#include <check.h>
#include <stddef.h>
#include <stdlib.h>

/*
 * A program's suite: suite `name` of one test case `tcase`, which holds tests (a
 * NULL-terminated list, in the order they run). timeout_s is each test's limit in seconds; 0
 * keeps Check's default (4 s, or CK_DEFAULT_TIMEOUT). Where tc is not NULL, *tc gets the test
 * case, for a fixture or a loop test (tcase_add_loop_test) on top.
 */
static inline Suite *ng_check_suite(const char *name, const char *tcase, double timeout_s,
                                    const TTest *const tests[], TCase **tc)
{
    Suite *s = suite_create(name);
    TCase *t = tcase_create(tcase);
    if (timeout_s > 0)
        tcase_set_timeout(t, timeout_s);
    for (size_t i = 0; tests[i]; i++)
        tcase_add_test(t, tests[i]);
    suite_add_tcase(s, t);
    if (tc)
        *tc = t;
    return s;
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

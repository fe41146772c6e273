/* check_main.h: how every Check program in tests/unit runs its suite. */
#ifndef NCCLGUARD_CHECK_MAIN_H
#define NCCLGUARD_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

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

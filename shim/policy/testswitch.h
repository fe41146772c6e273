/*
 * testswitch.h: the test-only switches, NCCLGUARD_TEST_* (the stand-in site
 * file, the system root of the facts, the observer's anchor period). Every one
 * is read through ncclguard_test_switch, which honours it only while the site
 * file NG_SITE_CONFIG does not exist: where a site file exists no variable of
 * the job can steer what it decides (replace it, switch one of its conditional
 * sections by faking the facts, escape its locks and forced values), and
 * config.c says once that the switch was ignored. Without a site file there is
 * nothing to escape: a switch gives a job no more than NCCLGUARD_CONFIG does.
 *
 * Threads: any but a signal handler (getenv, lstat).
 */
#ifndef NCCLGUARD_TESTSWITCH_H
#define NCCLGUARD_TESTSWITCH_H

#define NG_SITE_CONFIG "/etc/ncclguard.conf"

/* The value of the test switch `name`, or NULL (unset, or a site file exists). */
const char *ncclguard_test_switch(const char *name);

/* Whether test switches are honoured: NG_SITE_CONFIG does not exist. */
int ncclguard_test_switches_on(void);

#endif

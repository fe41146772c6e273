/*
 * test_shim_trigger.c: the incident's join window (shim/evidence/trigger.c). A rank that
 * times out less than TRIGGER_JOIN_S (600 s) after another rank's TRIGGER joins that
 * incident (it dumps for it, and does not report it); at 600 s it starts an incident of its
 * own (it rewrites TRIGGER and reports it). A TRIGGER older than the process is history. The wall clock is this program's: it defines
 * clock_gettime, which the shim's objects linked in here call, and answers CLOCK_REALTIME
 * with the time a test sets (any other clock, and the realtime clock before a test sets
 * it, from the kernel). TRIGGER's mtime is set with utimensat.
 */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/identity.h"
#include "check_main.h"
#include "evidence/dump.h"
#include "evidence/trigger.h"
#include "policy/config.h"
#include "policy/config_load.h"

#define S 1000000000LL
#define JOIN_S 600

extern char **environ;

static int64_t fake_realtime; /* 0: the kernel's */

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (id == CLOCK_REALTIME && fake_realtime) {
        ts->tv_sec = (time_t)(fake_realtime / S);
        ts->tv_nsec = (long)(fake_realtime % S);
        return 0;
    }
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static char dir[64], dumps[128];
static const int64_t start = 1700000000LL * S;        /* the process starts */
static const int64_t raised = 1700000100LL * S + 250; /* another rank raised the incident */

/* Rank 0 of a job whose rank 1 raised an incident at `at`: its TRIGGER in the dump
 * directory. */
static void setup_at(int64_t at)
{
    ng_check_tmpdir(dir, sizeof dir, "trigger");
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    ck_assert_int_eq(mkdir(dumps, 0700), 0);
    char node[128];
    snprintf(node, sizeof node, "%s/node", dir);
    ck_assert_int_eq(mkdir(node, 0700), 0);
    setenv("NCCLGUARD_DUMP_DIR", dumps, 1);
    setenv("NCCLGUARD_NODE_DIR", node, 1);
    setenv("RANK", "0", 1);
    setenv("NCCLGUARD_LOG_LEVEL", "error", 1);
    struct ng_config_paths none = {.site = "", .user = "", .job = ""};
    ncclguard_config_load(&none, environ, 0);
    ncclguard_identity_init();
    ncclguard_dump_init();
    fake_realtime = start;
    ncclguard_trigger_init();
    const char *trigger = ng_check_write(dumps, "TRIGGER", "r1@otherhost\n");
    ck_assert_int_eq(chmod(trigger, 0644), 0);
    struct timespec t[2] = {{(time_t)(at / S), (long)(at % S)}, {(time_t)(at / S), (long)(at % S)}};
    ck_assert_int_eq(utimensat(AT_FDCWD, trigger, t, 0), 0);
}

static void setup(void)
{
    setup_at(raised);
}

static void teardown(void)
{
    ck_assert(ng_check_rmtree(dir));
}

static const char *joined_id = "1700000100.000000250-r1@otherhost";

NG_TEST(timeout_just_inside_the_window_joins)
{
    setup();
    fake_realtime = raised + JOIN_S * S - 1;
    ck_assert_int_eq(ncclguard_trigger_raise(), 1); /* not dumped for yet */
    ck_assert_str_eq(ncclguard_trigger_incident(), joined_id);
    ck_assert(!ncclguard_trigger_is_reporter(joined_id));
    ck_assert_int_eq(ncclguard_trigger_raise(), 0); /* dumped for it already */
    teardown();
}
END_TEST

NG_TEST(timeout_at_the_window_starts_its_own)
{
    setup();
    fake_realtime = raised + JOIN_S * S;
    ck_assert_int_eq(ncclguard_trigger_raise(), 1);
    const char *id = ncclguard_trigger_incident();
    ck_assert_ptr_nonnull(id);
    ck_assert_str_ne(id, joined_id);
    ck_assert_msg(strstr(id, "-r0@"), "incident %s is not rank 0's", id);
    ck_assert(ncclguard_trigger_is_reporter(id));
    teardown();
}
END_TEST

NG_TEST(timeout_right_after_the_raise_joins)
{
    setup();
    fake_realtime = raised;
    ck_assert_int_eq(ncclguard_trigger_raise(), 1);
    ck_assert_str_eq(ncclguard_trigger_incident(), joined_id);
    teardown();
}
END_TEST

/* A TRIGGER from before the process started is history (an earlier job's): a timeout
 * starts an incident of its own; one written at the start is this job's. */
NG_TEST(trigger_from_before_the_start_is_history)
{
    setup_at(start - 1);
    fake_realtime = start + S;
    ck_assert_int_eq(ncclguard_trigger_raise(), 1);
    ck_assert_msg(strstr(ncclguard_trigger_incident(), "-r0@"), "joined %s",
                  ncclguard_trigger_incident());
    teardown();
}
END_TEST

NG_TEST(trigger_written_at_the_start_joins)
{
    setup_at(start);
    fake_realtime = start + S;
    ck_assert_int_eq(ncclguard_trigger_raise(), 1);
    ck_assert_str_eq(ncclguard_trigger_incident(), "1700000000.000000000-r1@otherhost");
    teardown();
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("trigger", "trigger", 60, ng_check_tests(), NULL));
}

/*
 * test_shim_escalation.c: the abort deadline (shim/watch/escalation.c) with abort_at and
 * kill_at both set. An ncclCommAbort still under way one nanosecond before abort_deadline
 * kills nothing; one that has not returned at the deadline ends the process with kill_exit,
 * after the kill's dump; one that returned in time never kills, however late the check.
 * With kill_at off, a missed deadline is said and the process lives. The abort runs on the
 * shim's helper thread against a stand-in ncclCommAbort that returns when the test says;
 * every check is given its time (ncclguard_escalation_check's clock), so nothing here
 * waits for a deadline to pass. A kill happens in a forked child of the test.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/identity.h"
#include "check_main.h"
#include "evidence/dump.h"
#include "policy/config.h"
#include "policy/config_load.h"
#include "track/comm.h"
#include "watch/escalation.h"
#include "watch/nccl_calls.h"

#define S 1000000000LL
#define DEADLINE_S 10

extern char **environ;

static char dir[64];
static int release[2] = {-1, -1}; /* the stand-in abort returns once a byte arrives */
static volatile int aborts_called;

static ncclResult_t stand_in_abort(ncclComm_t comm)
{
    (void)comm;
    __atomic_add_fetch(&aborts_called, 1, __ATOMIC_SEQ_CST);
    char b;
    while (read(release[0], &b, 1) < 0) {
    }
    return ncclSuccess;
}

/* The settings (abort_at 2, abort_deadline 10 s, kill_at as given, kill_exit 77), the
 * dump directory, the stand-in abort; one communicator, whose abort is started between
 * *t0 and *t1 (CLOCK_MONOTONIC). */
static struct ng_comm *start_abort(const char *kill_at, int64_t *t0, int64_t *t1)
{
    ng_check_tmpdir(dir, sizeof dir, "escalation");
    setenv("NCCLGUARD_DUMP_DIR", dir, 1);
    setenv("NCCLGUARD_TIMEOUT", "1", 1);
    setenv("NCCLGUARD_ABORT_AT", "2", 1);
    setenv("NCCLGUARD_ABORT_DEADLINE", "10", 1);
    setenv("NCCLGUARD_KILL_AT", kill_at, 1);
    setenv("NCCLGUARD_KILL_EXIT", "77", 1);
    setenv("NCCLGUARD_LOG_LEVEL", "error", 1);
    struct ng_config_paths none = {.site = "", .user = "", .job = ""};
    ncclguard_config_load(&none, environ, 0);
    ck_assert(ncclguard_settings()->abort_deadline == DEADLINE_S);
    ncclguard_identity_init();
    ncclguard_dump_init();
    ck_assert_int_eq(pipe(release), 0);
    static const struct ng_nccl_calls calls = {.comm_abort = stand_in_abort};
    ncclguard_nccl_calls_set(&calls);
    struct ng_comm *c = ncclguard_comm_new(42, 0, 2, 0, NULL);
    ck_assert_ptr_nonnull(c);
    ncclguard_comm_attach(c, (ncclComm_t)(uintptr_t)0x1000);
    ncclguard_comm_set_state(c, NG_COMM_READY);
    *t0 = ng_clock_ns(CLOCK_MONOTONIC);
    ncclguard_escalation_abort(c, "a test");
    *t1 = ng_clock_ns(CLOCK_MONOTONIC);
    ck_assert_int_eq(ng_atomic_load_acquire(&c->fenced), 1);
    return c;
}

static void done(void)
{
    ck_assert(ng_check_rmtree(dir));
}

/* Dumps in dir whose reason is `reason`. */
static int dumps_of(const char *reason)
{
    static char text[1 << 16];
    char want[64];
    snprintf(want, sizeof want, "\"reason\":\"%s\"", reason);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".json")) continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY);
        if (fd < 0) continue;
        ssize_t got = read(fd, text, sizeof text - 1);
        close(fd);
        text[got > 0 ? got : 0] = '\0';
        n += strstr(text, want) != NULL;
    }
    closedir(d);
    return n;
}

/* Runs the check at `now` in a child; its exit status (0: the check returned, the process
 * lived), or -1 when it died otherwise. */
static int check_in_child(int64_t now)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        ncclguard_escalation_check(now);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

NG_TEST(abort_past_deadline_kills_when_kill_is_set)
{
    int64_t t0, t1;
    start_abort("3", &t0, &t1);
    /* one ns before the deadline of the earliest start it can have had: still under way */
    ck_assert_int_eq(ncclguard_escalation_check(t0 + DEADLINE_S * S - 1), 1);
    ck_assert_int_eq(ncclguard_escalation_check(t0 + DEADLINE_S * S - 1), 1);
    ck_assert_int_eq(check_in_child(t0 + DEADLINE_S * S - 1), 0);
    ck_assert_int_eq(dumps_of("kill"), 0);
    /* at the deadline of the latest start it can have had: kill_exit, after the dump */
    ck_assert_int_eq(check_in_child(t1 + DEADLINE_S * S), 77);
    ck_assert_int_eq(dumps_of("kill"), 1);
    uint64_t started, finished;
    ncclguard_escalation_stats(&started, &finished);
    ck_assert(started == 1 && finished == 0);
    done();
}
END_TEST

NG_TEST(abort_returned_in_time_never_kills)
{
    int64_t t0, t1;
    start_abort("3", &t0, &t1);
    ck_assert_int_eq(write(release[1], "x", 1), 1);
    /* the helper returns: the check at t0 sees it (a generous bound for a broken run) */
    int64_t give_up = ng_clock_ns(CLOCK_MONOTONIC) + 30 * S;
    while (ncclguard_escalation_check(t0) != 0) {
        ck_assert_msg(ng_clock_ns(CLOCK_MONOTONIC) < give_up, "the abort never returned");
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    uint64_t started, finished;
    ncclguard_escalation_stats(&started, &finished);
    ck_assert(started == 1 && finished == 1 && aborts_called == 1);
    ck_assert_int_eq(check_in_child(t1 + DEADLINE_S * S), 0);
    ck_assert_int_eq(check_in_child(t1 + 1000 * DEADLINE_S * S), 0);
    ck_assert_int_eq(dumps_of("kill"), 0);
    done();
}
END_TEST

NG_TEST(abort_past_deadline_without_kill_lives)
{
    int64_t t0, t1;
    struct ng_comm *c = start_abort("off", &t0, &t1);
    ck_assert_int_eq(ncclguard_escalation_check(t0 + DEADLINE_S * S - 1), 1);
    ck_assert_int_eq(check_in_child(t1 + DEADLINE_S * S), 0);
    /* here too: past the deadline, no longer under way, and the process lives */
    ck_assert_int_eq(ncclguard_escalation_check(t1 + DEADLINE_S * S), 0);
    ck_assert_int_eq(ncclguard_escalation_check(t1 + 2 * DEADLINE_S * S), 0);
    ck_assert_int_eq(ng_atomic_load_acquire(&c->fenced), 1);
    ck_assert_int_eq(dumps_of("kill"), 0);
    done();
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("escalation", "escalation", 60, ng_check_tests(), NULL));
}

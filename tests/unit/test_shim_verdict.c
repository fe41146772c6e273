/*
 * test_shim_verdict.c: the verdict in the job's log (shim/evidence/verdict.c) starts once
 * per incident: a later dump of the same incident starts no second one, a dump of another
 * incident does. The analyzer is found beside the library, here beside the program: the
 * test runs this program again with argv[0] naming a file in its own folder, beside a
 * stand-in `ncclguard` that lives as long as the process that started it. Each verdict
 * under way is a thread of its own, so the threads in /proc/self/task say how many were
 * started, right after the call that starts one.
 */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/identity.h"
#include "check_main.h"
#include "evidence/dump.h"
#include "evidence/dump_format.h"
#include "evidence/verdict.h"
#include "policy/config.h"
#include "policy/config_load.h"

extern char **environ;

static int tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The program run again (NG_VERDICT_DIR set): one dump of incident X in the dump
 * directory, then the dumps of X, X again and Y. 0, or the step that went wrong. */
static int verdicts(const char *dir)
{
    char dumps[256], path[320];
    snprintf(dumps, sizeof dumps, "%s/dumps", dir);
    if (mkdir(dumps, 0700) != 0) return 10;
    snprintf(path, sizeof path, "%s/" NG_DUMP_PREFIX "r0-host-1" NG_DUMP_SUFFIX, dumps);
    FILE *f = fopen(path, "w");
    if (!f) return 11;
    fputs("{\"schema\":\"x\",\"incident\":\"X\"}\n", f);
    fclose(f);
    setenv("NCCLGUARD_DUMP_DIR", dumps, 1);
    setenv("WORLD_SIZE", "1", 1);
    struct ng_config_paths none = {.site = "", .user = "", .job = ""};
    ncclguard_config_load(&none, environ, 0);
    ncclguard_identity_init();
    ncclguard_dump_init();
    ncclguard_verdict_init(60);
    int base = tasks();
    if (base < 1) return 12;
    ncclguard_verdict_after_dump("X");
    if (tasks() != base + 1) return 1; /* the first dump of X starts its verdict */
    ncclguard_verdict_after_dump("X");
    if (tasks() != base + 1) return 2; /* a later dump of X starts none */
    ncclguard_verdict_after_dump("Y");
    if (tasks() != base + 2) return 3; /* another incident's does */
    ncclguard_verdict_after_dump("Y");
    if (tasks() != base + 2) return 4;
    return 0;
}

NG_TEST(one_verdict_per_incident)
{
    char dir[64], me[PATH_MAX], name[128];
    ng_check_tmpdir(dir, sizeof dir, "verdict");
    ssize_t n = readlink("/proc/self/exe", me, sizeof me - 1);
    ck_assert_int_gt(n, 0);
    me[n] = '\0';
    /* argv[0], which dladdr names for the program: a file in dir (not a link, which
     * realpath would follow back) */
    const char *arg0 = ng_check_write(dir, "test_shim_verdict", "");
    const char *stand_in = ng_check_write(dir, "ncclguard",
                                          "#!/bin/sh\n"
                                          "while kill -0 $PPID 2>/dev/null; do sleep 0.1; done\n");
    ck_assert_int_eq(chmod(stand_in, 0755), 0);
    snprintf(name, sizeof name, "%s", arg0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("NG_VERDICT_DIR", dir, 1);
        char *argv[] = {name, NULL};
        execv(me, argv);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "step %d went wrong (status %#x)",
                  WEXITSTATUS(status), status);
    ck_assert(ng_check_rmtree(dir));
}
END_TEST

int main(void)
{
    const char *dir = getenv("NG_VERDICT_DIR");
    if (dir) return verdicts(dir);
    return ng_check_run(ng_check_suite("verdict", "verdict", 60, ng_check_tests(), NULL));
}

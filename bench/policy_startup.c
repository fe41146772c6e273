/*
 * policy_startup.c: what the site policy adds to process start-up.
 *
 *   policy_startup PROBE SITE_CONF
 *
 * 1. In process: the median time of ncclguard_policy_apply_at_start() (what the
 *    library constructor runs) without a config file, with SITE_CONF, and with
 *    generated worst-case files at the size and line limits.
 * 2. Whole processes: the median wall time of fork + exec + exit of PROBE (a
 *    program that applies the policy in its constructor), without a config file
 *    and with SITE_CONF, interleaved, in the same run.
 * Prints figures and ratios; it asserts nothing (timing belongs here, not in tests).
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/identity.h"
#include "base/log.h"
#include "policy/config.h"
#include "policy/confread.h"
#include "policy/facts.h"
#include "policy/policy.h"
#include "timing.h"

/* Median of n runs of the constructor's policy step with the site file conf
 * (NCCLGUARD_TEST_SITE_CONFIG) and the user file of XDG_CONFIG_HOME=xdg (NULL: none). */
static double in_process_us(const char *conf, const char *xdg, int n)
{
    static double t[4000];
    setenv("NCCLGUARD_TEST_SITE_CONFIG", conf, 1);
    if (xdg)
        setenv("XDG_CONFIG_HOME", xdg, 1);
    else
        unsetenv("XDG_CONFIG_HOME");
    for (int i = 0; i < n; i++) {
        ncclguard_facts_reset(); /* conditions read their facts again, as in a new process */
        double t0 = (bench_now_ns() / 1e3);
        ncclguard_policy_apply_at_start();
        t[i] = (bench_now_ns() / 1e3) - t0;
    }
    return bench_median(t, n);
}

/* Wall time of one fork + exec + exit of probe with the site file conf. */
static double spawn_us(const char *probe, const char *conf)
{
    char var[1200];
    snprintf(var, sizeof var, "NCCLGUARD_TEST_SITE_CONFIG=%s", conf);
    char *argv[] = {(char *)probe, NULL};
    char *envp[] = {var, "HOME=/nonexistent", "LOCAL_RANK=1", "PATH=/usr/bin:/bin", NULL};
    pid_t pid;
    int status;
    double t0 = (bench_now_ns() / 1e3);
    if (posix_spawn(&pid, probe, NULL, NULL, argv, envp) != 0) return -1;
    waitpid(pid, &status, 0);
    return (bench_now_ns() / 1e3) - t0;
}

/* Writes a generated worst case: `lines` copies of fmt (with the line number). */
static const char *worst_case(const char *name, const char *head, const char *fmt, int lines)
{
    static char path[8][128];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 128, "/tmp/ncclguard-bench-%d-%s.conf", (int)getpid(), name);
    FILE *f = fopen(p, "w");
    if (!f) return "/nonexistent";
    fputs(head, f);
    for (int i = 0; i < lines && ftell(f) < NG_CONF_MAX_BYTES - 200; i++) {
        fprintf(f, fmt, i, i);
        fputc('\n', f);
    }
    fclose(f);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PROBE SITE_CONF\n", argv[0]);
        return 64;
    }
    const char *probe = argv[1], *site = argv[2];
    setenv("LOCAL_RANK", "1", 1); /* a quiet rank: no log line per change */
    setenv("HOME", "/nonexistent", 1);
    unsetenv("XDG_CONFIG_HOME");
    ncclguard_identity_init();
    ncclguard_log_init();

    double none = in_process_us("/nonexistent/ncclguard.conf", NULL, 4000);
    double ex = in_process_us(site, NULL, 2000);
    printf("policy step in process (median): no config file %.2f us, %s %.1f us (ratio %.0f)\n",
           none, site, ex, ex / none);

    static const struct {
        const char *name, *head, *fmt;
    } worst[] = {
        {"comments", "", "# %d %d padding padding padding padding padding padding padding"},
        {"bad-keys", "", "unknown_key_%05d_%d = 1"},
        {"settings", "", "timeout = %d%d"},
        {"env-rules", "[env.default]\n", "NCCL_GENERATED_%05d = value-%d"},
        {"when", "", "[when host=gpu-%05d* gpus>=8 world_size=1..%d job=train-*]"},
        {"forbid-globs", "[env.forbid]\n", "NCCL_G%05d_%d_*"},
    };
    for (size_t i = 0; i < sizeof worst / sizeof worst[0]; i++) {
        const char *p = worst_case(worst[i].name, worst[i].head, worst[i].fmt, NG_CONF_MAX_LINES);
        printf("worst case %-13s (%d lines, <= 1 MiB): %.0f us\n", worst[i].name, NG_CONF_MAX_LINES,
               in_process_us(p, NULL, 50));
        unlink(p);
    }
    /* a user file whose every line is checked against the site's forbid patterns */
    const char *globs = worst_case("site-globs", "[env.forbid]\n", "NCCL_G%05d_%d_*", 40);
    char xdg[128], user[160];
    snprintf(xdg, sizeof xdg, "/tmp/ncclguard-bench-%d-xdg", (int)getpid());
    snprintf(user, sizeof user, "%s/ncclguard.conf", xdg);
    if (mkdir(xdg, 0700) == 0 || errno == EEXIST) {
        const char *u = worst_case("user", "[env.default]\n", "NCCL_SAME = %d%d", 10000);
        rename(u, user);
        printf("worst case %-13s (site patterns, %d user lines): %.0f us\n", "user-vs-site",
               NG_CONF_MAX_LINES, in_process_us(globs, xdg, 50));
        unlink(user);
        rmdir(xdg);
    }
    unlink(globs);
    unsetenv("XDG_CONFIG_HOME");

    enum { N = 300 };
    static double a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = spawn_us(probe, "/nonexistent/ncclguard.conf");
        b[i] = spawn_us(probe, site);
    }
    double ma = bench_median(a, N), mb = bench_median(b, N);
    printf("process start-up, fork+exec+exit of %s (median of %d): no config file %.0f us, "
           "with %s %.0f us\n",
           probe, N, ma, site, mb);
    printf("startup_ratio=%.3f added_us=%.0f (example site file vs none)\n", mb / ma, mb - ma);
    return 0;
}
